"""The TurnObserver the server awaits before delivering each response: redact, identify the
session, pair the previous turn with its next state, and store the record durably."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import secrets
import time
from typing import Any

from openclaw.buffer import (
    C_OPTED_OUT,
    C_REDACTED,
    AppendOp,
    AttachOp,
    BufferFull,
    CountOp,
    FinalizeOp,
    Op,
    RecordError,
    TrajectoryBuffer,
    TurnRecord,
)
from openclaw.buffer.redact import KnownSecrets, Redactor, SessionSecrets
from openclaw.intercept.config import InterceptConfig
from openclaw.intercept.sessions import SessionTracker
from openclaw.intercept.writer import GroupCommitWriter

log = logging.getLogger("openclaw.intercept")


def retention_period(ttl: float, maintenance_interval: float) -> float:
    """How often retention runs: a tenth of the TTL (a record outlives it by at most 10%),
    at most every maintenance interval, at least every 50 ms."""
    return max(0.05, min(ttl / 10, maintenance_interval))


class InterceptObserver:
    """Implements openclaw.server.hooks.TurnObserver."""

    def __init__(self, config: InterceptConfig):
        self.config = config
        self.buffer = TrajectoryBuffer.open(config.buffer_dir, max_mb=config.buffer_max_mb, durability=config.durability)
        self.redactor = Redactor(extra=config.compiled_redact) if config.redact else None
        self.secrets = SessionSecrets()
        # Keys the hash that replaces a session id carrying a secret. Random per process and never
        # written: a hash of a guessable password is a password check anyone can run offline.
        self._session_id_key = secrets.token_bytes(32)
        self.tracker = SessionTracker(config, self._safe_session_id if self.redactor is not None else None)
        self._restore()
        ttl = config.retention_ttl
        # Retention runs at start-up (`_restore`) and on the writer thread's timer, with or
        # without requests: a record must not outlive its TTL because nobody chatted.
        self.writer = GroupCommitWriter(
            self.buffer, config.max_batch,
            periodic=(lambda b: b.purge_older_than(ttl)) if ttl is not None else None,
            period_s=retention_period(ttl, config.maintenance_interval) if ttl is not None else 5.0,
        )
        self._maintenance: asyncio.Task | None = None
        self._closed = False

    def _restore(self) -> None:
        """After a restart: finalize sessions idle too long, rebuild the rest (continuity index
        and open turn) from the buffer, so a conversation continues in the same session."""
        if self.config.retention_ttl is not None:
            self.buffer.purge_older_than(self.config.retention_ttl)
        self.buffer.finalize_idle_sessions(self.config.session_idle_timeout)
        for s in self.buffer.open_sessions():
            turns = [t for t in self.buffer.session_turns(s["session_id"]) if t.turn_type == "main"]
            if turns:
                self.tracker.restore(s["session_id"], turns[-1], s["last_seen"])

    # ------------------------------------------------------------------ TurnObserver
    async def on_turn(self, turn: Any) -> None:
        if self._closed:
            raise RuntimeError("RL intercept is closed")
        self._ensure_maintenance()
        now = time.time()
        control = turn.control
        decision = self.tracker.observe(
            control=control, messages=turn.messages, tools=turn.tools, content=turn.content,
            tool_calls=turn.tool_calls, now=now,
        )
        ops: list[Op] = []
        if decision.finalize_before:
            ops.append(FinalizeOp(decision.session_id, "opt_out"))
        record: TurnRecord | None = None
        if decision.store:
            known = self._learn(decision.session_id, turn)
            if decision.attach_to is not None and decision.next_state is not None:
                ns, _ = self._redact(decision.next_state, known)
                ops.append(AttachOp(decision.attach_to, ns))
            record = self._record(turn, decision, now, known)
            ops.append(AppendOp(record))
            if record.metadata.get("redactions"):
                ops.append(CountOp(C_REDACTED, 1))
        else:
            ops.append(CountOp(C_OPTED_OUT, 1))
        if decision.finalize:
            ops.append(FinalizeOp(decision.session_id, "session_done"))
        self.tracker.recorded(decision, record)  # before any await: atomic w.r.t. other turns
        results = await self.writer.submit(ops)
        for op, res in zip(ops, results, strict=True):
            if isinstance(op, AppendOp) and isinstance(res, BufferFull):
                # Served anyway: the size policy refuses new records; counted and logged by the buffer.
                log.warning("turn of session %s not stored: %s", decision.session_id, res)
            elif isinstance(op, AppendOp) and isinstance(res, Exception):
                raise res

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._maintenance is not None:
            self._maintenance.cancel()
            try:
                await self._maintenance
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        await asyncio.to_thread(self.writer.close)
        self.buffer.close()

    # ------------------------------------------------------------------ redaction
    def _learn(self, session_id: str, turn: Any) -> KnownSecrets | None:
        """Remember the contextual secrets of the whole turn (request, next state and reply) before
        any part of it is redacted: the cue may sit in one message and a bare repeat in another,
        or in the reply ("your passphrase is X")."""
        if self.redactor is None:
            return None
        # The client's session id too: `_safe_session_id` learns its secret under the id before the
        # user's namespace is added (`alice~redacted-...` is not `redacted-...`).
        self.secrets.learn(session_id, self.redactor.secrets_in(
            [turn.messages, turn.tools, turn.text, turn.content, turn.tool_calls, turn.control.session_id]))
        return self.secrets.known(session_id)

    def _safe_session_id(self, session_id: str) -> str:
        """A client-chosen session id with a secret in it is replaced by a keyed hash: the same id
        maps to the same session for the life of this process, and the secret is never stored.
        Redacting only the secret would merge unrelated sessions that differ only in it."""
        assert self.redactor is not None
        _, n, found = self.redactor.scan_text(session_id)
        if not n:
            return session_id
        digest = hmac.new(self._session_id_key, session_id.encode("utf-8", "surrogatepass"), hashlib.sha256)
        safe = "redacted-" + digest.hexdigest()[:32]
        self.secrets.learn(safe, found)  # the secret is redacted from that session's text as well
        return safe

    def redact_attached_text(self, text: str) -> str:
        """Text a client attaches to a stored turn afterwards (a feedback comment, which becomes the
        turn's OPD hint and so part of a teacher prompt): the patterns, then every value remembered
        in any session (the comment names a turn, not always its session)."""
        if self.redactor is None:
            return text
        return self.redactor.redact_text(text, self.secrets.known_anywhere())[0]

    # ------------------------------------------------------------------ records
    def _redact(self, value: Any, known: KnownSecrets | None = None) -> tuple[Any, int]:
        if self.redactor is None:
            return value, 0
        return self.redactor.redact(value, known)

    def _record(self, turn: Any, decision: Any, now: float, known: KnownSecrets | None = None) -> TurnRecord:
        messages, n_msgs = self._redact(turn.messages, known)
        tools, n_tools = self._redact(turn.tools, known)
        text, n_text = self._redact(turn.text, known)
        content, n_content = self._redact(turn.content, known)
        tool_calls, n_calls = self._redact(turn.tool_calls, known)
        n_prompt, n_resp = n_msgs + n_tools, n_text + n_content + n_calls
        meta: dict[str, Any] = {
            "session_source": decision.source,
            "finish_reason": turn.finish_reason,
        }
        meta.update(getattr(turn, "metadata", None) or {})  # server-side notes, e.g. context_fit
        if decision.side_reason:
            meta["side_reason"] = decision.side_reason
        prompt_ids, response_ids, logprobs = list(turn.prompt_ids), list(turn.output_ids), list(turn.output_logprobs)
        trainable = decision.turn_type == "main"
        if n_prompt or n_resp:
            # The ids of a secret are the secret: keep only the redacted text, never the ids.
            meta["redactions"] = {"prompt": n_prompt, "response": n_resp}
            prompt_ids, response_ids, logprobs = [], [], []
            trainable = False
            meta["untrainable_reason"] = "redacted"
        elif trainable and (not response_ids or len(logprobs) != len(response_ids) or not prompt_ids):
            meta["untrainable_reason"] = "missing token ids or 1:1 log-probs"
            trainable = False
        if getattr(turn, "reasoning_content", None) is not None:
            trainable = self._mark_reasoning(meta, getattr(turn, "reasoning_span", None), len(response_ids), trainable)
        rec = TurnRecord(
            session_id=decision.session_id,
            turn_index=None,
            turn_type=decision.turn_type,
            messages=messages,
            tools=tools,
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_logprobs=logprobs if len(logprobs) == len(response_ids) else [],
            response_text=text,
            content=content,
            tool_calls=tool_calls,
            model=turn.served_model,
            weight_version=int(turn.weight_version),
            created_at=float(turn.created_at),
            finished_at=float(turn.finished_at),
            request_id=turn.request_id,
            trainable=trainable,
            metadata=meta,
            user_id=turn.control.user_id,
        )
        try:
            rec.validate()
        except RecordError as e:  # e.g. a positive log-prob from a broken engine: keep text only
            rec.prompt_ids, rec.response_ids, rec.response_logprobs = [], [], []
            rec.trainable = False
            meta["untrainable_reason"] = f"invalid: {e}"
        return rec

    def _mark_reasoning(self, meta: dict[str, Any], span: Any, n_response: int, trainable: bool) -> bool:
        """`metadata["reasoning"]`: the turn had a think block (the judge then never falls back to
        the raw text), how it is trained and which response tokens it spans. With
        `--rl-train-reasoning mask` those tokens get loss mask 0 (`loss_mask_zero_spans`, read by
        openclaw.bridge); they and their log-probs stay in the sample, which must be what the
        engine generated. Returns whether the turn stays trainable."""
        mode = self.config.train_reasoning
        note: dict[str, Any] = {"train": mode}
        meta["reasoning"] = note
        if not n_response:  # ids dropped (redacted): nothing to place the block on
            return trainable
        if span is None:
            if mode == "mask" and trainable:
                # Training it would train the very tokens the operator asked to leave out.
                meta["untrainable_reason"] = "think block not found in the generated tokens"
                return False
            return trainable
        start, end = max(0, int(span[0])), min(n_response, int(span[1]))
        note["tokens"] = [start, end]
        if mode != "mask":
            return trainable
        meta["loss_mask_zero_spans"] = [[start, end]]
        if trainable and start == 0 and end >= n_response:
            meta["untrainable_reason"] = "only reasoning (no answer tokens) under --rl-train-reasoning mask"
            return False
        return trainable

    # ------------------------------------------------------------------ maintenance
    def _ensure_maintenance(self) -> None:
        if self._maintenance is None or self._maintenance.done():
            self._maintenance = asyncio.get_running_loop().create_task(self._maintain())

    async def _maintain(self) -> None:
        """Idle-session finalization and retention purge, off the request path."""
        period = min(self.config.maintenance_interval, self.config.session_idle_timeout / 2)
        while True:
            await asyncio.sleep(period)
            try:
                await self.run_maintenance()
            except Exception:  # noqa: BLE001 - keep maintaining; the next round retries
                log.exception("RL intercept maintenance failed")

    async def run_maintenance(self) -> None:
        now = time.time()
        gone = self.tracker.expire(now, self.config.session_idle_timeout)
        if gone:
            await self.writer.submit([FinalizeOp(sid, "idle") for sid in gone])

    def stats(self) -> dict[str, Any]:
        st = self.buffer.stats()
        st["tracked_sessions"] = len(self.tracker)
        st["group_commits"] = self.writer.commits
        return st
