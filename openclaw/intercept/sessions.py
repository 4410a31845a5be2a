"""Session identification, turn typing and next-state pairing (in memory, no I/O).

Identification, in DESIGN.md's order:
  1. `X-Session-Id` header, 2. the same key in the JSON body (both parsed by the server into
  RLControl), 3. `sessionId=` in OpenClaw's runtime line (first user message of its sessions),
  4. conversation continuity: the request's messages extend a known session's last request +
  reply (fingerprints ignore tool-call ids, which OpenClaw rewrites, and OpenClaw's synthetic
  internal-context message, which is never kept in later history), 5. a new session.

Sessions are per user (`control.user_id`): a client-chosen id is stored in its user's namespace
(`openclaw.buffer.users.stored_session_id`), and continuity only matches the same user's
sessions, so one user's request never lands in another user's session.

The tracker is called from the event loop only (no awaits inside `observe`), so each decision
and the state update it implies are atomic with respect to concurrent requests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from openclaw.buffer import TurnRecord
from openclaw.buffer.users import stored_session_id
from openclaw.intercept.config import InterceptConfig
from openclaw.intercept.messages import (
    chain_hashes,
    last_user_text,
    next_state_from,
    openclaw_utility_kind,
    reply_message,
    runtime_session_id,
    strip_internal,
    system_fingerprint,
    system_text,
)

# How a session was identified (stored in each record's metadata["session_source"]).
SRC_HEADER, SRC_BODY, SRC_RUNTIME, SRC_CONTINUITY, SRC_NEW = "header", "body", "runtime_line", "continuity", "new"


@dataclass
class _Session:
    session_id: str
    user_id: str
    last_seen: float
    system_fp: bytes = b""
    pending: TurnRecord | None = None  # the last main turn, awaiting its next state
    keys: list[bytes] = field(default_factory=list)  # continuity keys indexed for this session
    opted_out: bool = False


@dataclass
class Decision:
    session_id: str
    source: str
    turn_type: str  # "main" | "side"
    store: bool  # False: opted out (served, never stored)
    attach_to: TurnRecord | None = None  # previous main turn that gets `next_state`
    next_state: dict[str, Any] | None = None
    finalize: bool = False  # finalize the session after this turn (X-Session-Done)
    finalize_before: bool = False  # finalize the session's open turns before this one (opt-out)
    side_reason: str | None = None  # an OpenClaw utility call (messages.openclaw_utility_kind)


class SessionTracker:
    def __init__(self, config: InterceptConfig, safe_session_id: Callable[[str], str] | None = None):
        """`safe_session_id` maps a client-chosen id (header, body, runtime line) to the id that is
        stored: a client may put a secret into it, and ids reach disk, exports and logs."""
        self.config = config
        self._safe_id = safe_session_id or (lambda sid: sid)
        self._sessions: dict[str, _Session] = {}
        # (user, continuity key) -> session ids (most recent last). A key is the fingerprint of
        # (request messages + reply) ("full") or of the request messages alone ("loose": the
        # client edited the reply it echoes, e.g. reformatted it). A think block echoed in front
        # of the answer, or dropped, still gives the full key (messages.message_digest).
        self._full: dict[tuple[str, bytes], list[str]] = {}
        self._loose: dict[tuple[str, bytes], list[str]] = {}

    # ------------------------------------------------------------------ decisions
    def observe(
        self,
        *,
        control: Any,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        content: str | None,
        tool_calls: list[dict[str, Any]] | None,
        now: float,
    ) -> Decision:
        """Decide session/type/pairing for one completed turn and update the tracker. The
        caller must then call `recorded(decision, record)` with the record it stores."""
        msgs = strip_internal(messages)
        hashes = chain_hashes(msgs, skip_system=True) if self.config.continuity else []
        sys_fp = system_fingerprint(msgs)
        user = control.user_id

        sid, source = None, SRC_NEW
        if getattr(control, "session_id", None):
            sid = stored_session_id(user, self._safe_id(control.session_id))
            source = SRC_BODY if control.source.get("session_id") == "body" else SRC_HEADER
        if sid is None:
            rid = runtime_session_id(msgs)
            if rid:
                sid, source = stored_session_id(user, self._safe_id(rid)), SRC_RUNTIME
        if sid is None and hashes:
            sid = self._match(user, hashes, [m for m in msgs if m.get("role") not in ("system", "developer")], sys_fp)
            if sid is not None:
                source = SRC_CONTINUITY

        # An explicit X-Turn-Type wins; then OpenClaw's utility calls (memory flush, compaction
        # summary) are side; then the configured side rules.
        utility = None if getattr(control, "turn_type", None) else openclaw_utility_kind(msgs)
        turn_type = (getattr(control, "turn_type", None) or ("side" if utility else None)
                     or self._rule_type(msgs, tools, continued=sid is not None))
        if sid is None:
            sid = stored_session_id(user, ("side-" if turn_type == "side" else "s-") + uuid.uuid4().hex)
        sess = self._sessions.get(sid)
        if sess is None:
            sess = _Session(sid, user, now, sys_fp)
            self._sessions[sid] = sess
        sess.last_seen = now

        opt_out = bool(getattr(control, "opt_out", False)) or sess.opted_out
        d = Decision(session_id=sid, source=source, turn_type=turn_type, store=not opt_out,
                     finalize=bool(getattr(control, "session_done", False)), side_reason=utility)
        if opt_out:
            # Sticky for the session: later requests of it are not stored either, and the open
            # turn is finalized without the (private) next state.
            d.finalize_before = sess.pending is not None and not sess.opted_out
            sess.opted_out = True
            sess.pending = None
        elif turn_type == "main" and sess.pending is not None:
            d.attach_to = sess.pending
            d.next_state = next_state_from(messages)
        if turn_type == "main":
            self._index(sess, msgs, hashes, content, tool_calls)
        return d

    def recorded(self, decision: Decision, record: TurnRecord | None) -> None:
        """Register the stored record (None when not stored) as the session's open turn."""
        sess = self._sessions.get(decision.session_id)
        if sess is None:
            return
        if decision.finalize:
            self.forget(decision.session_id)
            return
        if decision.turn_type == "main" and record is not None and not sess.opted_out:
            sess.pending = record

    def _rule_type(self, msgs: list[dict[str, Any]], tools: list[dict[str, Any]] | None, *, continued: bool) -> str:
        cfg = self.config
        if cfg.compiled_side_system:
            sys_text = system_text(msgs)
            if any(rx.search(sys_text) for rx in cfg.compiled_side_system):
                return "side"
        if cfg.compiled_side_user:
            user = last_user_text(msgs)
            if any(rx.search(user) for rx in cfg.compiled_side_user):
                return "side"
        if cfg.side_no_history_without_tools and not continued and not tools:
            non_system = [m for m in msgs if m.get("role") not in ("system", "developer")]
            if len(non_system) == 1 and non_system[0].get("role") == "user":
                return "side"
        return "main"

    # ------------------------------------------------------------------ continuity index
    def _match(self, user: str, hashes: list[bytes], msgs: list[dict[str, Any]], sys_fp: bytes) -> str | None:
        # Longest known prefix first; the full key (history + reply) beats the loose one. A
        # loose match needs an assistant message right after the prefix (an edited echo of
        # the reply): a request that merely repeats a known request is NOT a continuation,
        # or every chat opening with "hi" would join the first one that did.
        for i in range(len(hashes) - 1, -1, -1):
            cands = self._full.get((user, hashes[i]))
            if not cands and i + 1 < len(msgs) and msgs[i + 1].get("role") == "assistant":
                cands = self._loose.get((user, hashes[i]))
            if cands:
                return self._pick(cands, sys_fp)
        return None

    def _pick(self, cands: list[str], sys_fp: bytes) -> str:
        same = [s for s in cands if self._sessions[s].system_fp == sys_fp]
        pool = same or cands
        return max(pool, key=lambda s: self._sessions[s].last_seen)

    def _index(self, sess: _Session, msgs: list[dict[str, Any]], hashes: list[bytes],
               content: str | None, tool_calls: list[dict[str, Any]] | None) -> None:
        self._unindex(sess)
        if not hashes:
            return
        loose = hashes[-1]
        full = chain_hashes([reply_message(content, tool_calls)], skip_system=True, start=loose)[-1]
        self._full.setdefault((sess.user_id, full), []).append(sess.session_id)
        self._loose.setdefault((sess.user_id, loose), []).append(sess.session_id)
        sess.keys = [full, loose]

    def _unindex(self, sess: _Session) -> None:
        for key in sess.keys:
            for table in (self._full, self._loose):
                lst = table.get((sess.user_id, key))
                if lst and sess.session_id in lst:
                    lst.remove(sess.session_id)
                    if not lst:
                        del table[(sess.user_id, key)]
        sess.keys = []

    # ------------------------------------------------------------------ life cycle
    def forget(self, session_id: str) -> None:
        sess = self._sessions.pop(session_id, None)
        if sess is not None:
            self._unindex(sess)

    def expire(self, now: float, idle_seconds: float) -> list[str]:
        """Drop sessions idle for `idle_seconds`; returns their ids (to finalize in the buffer)."""
        gone = [sid for sid, s in self._sessions.items() if now - s.last_seen >= idle_seconds]
        for sid in gone:
            self.forget(sid)
        return gone

    def restore(self, session_id: str, last_main: TurnRecord, last_seen: float) -> None:
        """Rebuild a session from the buffer after a restart (its last main turn, whose owner is
        the session's)."""
        msgs = strip_internal(last_main.messages)
        sess = _Session(session_id, last_main.user_id, last_seen, system_fingerprint(msgs))
        self._sessions[session_id] = sess
        if self.config.continuity:
            self._index(sess, msgs, chain_hashes(msgs, skip_system=True), last_main.content, last_main.tool_calls)
        if last_main.state == "awaiting_next_state":
            sess.pending = last_main

    def __len__(self) -> int:
        return len(self._sessions)

    def __contains__(self, session_id: str) -> bool:
        return session_id in self._sessions
