"""Writes and chunks: a record's bytes, computed (and checked) before the write lock is taken,
and the content-addressed, reference-counted chunks that messages, tool lists and prompt-id
blocks are stored in (see the `chunks` table in `schema`)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from openclaw.buffer.records import RecordError, TurnRecord, pack_floats, pack_ids
from openclaw.buffer.schema import CHUNK_IDS


@dataclass
class Prepared:
    """A record's bytes, computed before the write lock is taken."""

    payload: str
    messages: list[tuple[bytes, str]]  # (hash, JSON) per message
    tools: tuple[bytes, str] | None
    prompt: list[tuple[bytes, bytes]]  # (hash, int32 block) per CHUNK_IDS prompt ids
    response_ids: bytes
    logprobs: bytes
    next_state: str | None


def _hash(kind: bytes, data: bytes) -> bytes:
    return hashlib.blake2b(kind + data, digest_size=16).digest()


def utf8(text: str, what: str) -> bytes:
    """`text` as UTF-8, or RecordError naming the field: SQLite can only bind valid UTF-8, and a
    lone surrogate (e.g. in a session id or a message `name`) failed the whole group commit
    it shared with other users' turns."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise RecordError(f"{what} is not valid Unicode text (lone surrogate at {e.start})") from None


def json_text(value: Any, what: str) -> str:
    js = json.dumps(value, ensure_ascii=False, sort_keys=True)
    utf8(js, what)
    return js


class PrepCache:
    """Per-handle memo of chunk encodings: a session's next turn repeats its history, so most
    messages and prompt-id blocks were encoded and hashed one turn earlier. Keys are the
    message's (role, content) for plain messages and the block's ids; values (hash, data)."""

    def __init__(self, size: int = 4096):
        self.size = size
        self.lock = threading.Lock()  # write_ops may run on several threads of one handle
        self.msgs: OrderedDict[tuple[str, str], tuple[bytes, str]] = OrderedDict()
        self.blocks: OrderedDict[tuple[int, ...], tuple[bytes, bytes]] = OrderedDict()

    @staticmethod
    def _get(d: OrderedDict, key: Any) -> Any:
        hit = d.get(key)
        if hit is not None:
            d.move_to_end(key)
        return hit

    def _put(self, d: OrderedDict, key: Any, value: Any) -> None:
        d[key] = value
        if len(d) > self.size:
            d.popitem(last=False)

    def message(self, m: dict[str, Any]) -> tuple[bytes, str]:
        plain = len(m) == 2 and isinstance(m.get("content"), str) and isinstance(m.get("role"), str)
        key = (m["role"], m["content"]) if plain else None
        if key is not None and (hit := self._get(self.msgs, key)) is not None:
            return hit
        js = json.dumps(m, ensure_ascii=False, sort_keys=True)
        out = (_hash(b"m", utf8(js, "a message")), js)  # only valid text is ever cached
        if key is not None:
            self._put(self.msgs, key, out)
        return out

    def block(self, ids: list[int]) -> tuple[bytes, bytes]:
        key = tuple(ids)
        if (hit := self._get(self.blocks, key)) is not None:
            return hit
        data = pack_ids(ids)
        out = (_hash(b"p", data), data)
        if len(ids) == CHUNK_IDS:  # only full blocks repeat
            self._put(self.blocks, key, out)
        return out


def prepare(r: TurnRecord, cache: PrepCache) -> Prepared:
    """Validate and encode `r`. RecordError for anything SQLite could not store, so a bad
    record is refused on its own before it reaches a shared transaction."""
    r.validate()
    for what in ("session_id", "model", "request_id"):
        value = getattr(r, what)
        if not isinstance(value, str):
            raise RecordError(f"{what} must be a string, got {type(value).__name__}")
        utf8(value, what)
    try:
        with cache.lock:
            msgs = [cache.message(m) for m in r.messages]
            ids = r.prompt_ids
            prompt = [cache.block(ids[i : i + CHUNK_IDS]) for i in range(0, len(ids), CHUNK_IDS)]
        tools = None
        if r.tools is not None:
            js = json_text(r.tools, "the tools list")
            tools = (_hash(b"t", js.encode("utf-8")), js)
        payload = json_text(
            {"response_text": r.response_text, "content": r.content, "tool_calls": r.tool_calls, "metadata": r.metadata},
            "the response",
        )
        next_state = json_text(r.next_state, "next_state") if r.next_state is not None else None
        return Prepared(payload, msgs, tools, prompt, pack_ids(r.response_ids), pack_floats(r.response_logprobs),
                        next_state)
    except RecordError:
        raise
    except (TypeError, OverflowError, ValueError) as e:  # e.g. a non-int token id: a bad record, not a crash
        raise RecordError(f"record cannot be stored: {e}") from None


def upsert_chunks(c: sqlite3.Connection, preps: list[Prepared]) -> None:
    """Insert or add references to every chunk of `preps`, in as few statements as possible."""
    counts: dict[bytes, list[Any]] = {}
    for p in preps:
        for h, d in [*p.messages, *([p.tools] if p.tools else []), *p.prompt]:
            e = counts.get(h)
            if e is None:
                counts[h] = [d, 1]
            else:
                e[1] += 1
    rows = list(counts.items())
    for i in range(0, len(rows), 5000):  # 2 parameters per row, under SQLite's 32766 limit
        part = rows[i : i + 5000]
        marks = ",".join(["(?,?)"] * len(part))
        c.execute(f"INSERT OR IGNORE INTO chunks (hash, data) VALUES {marks}", [x for h, (d, _) in part for x in (h, d)])
        c.execute(
            f"INSERT INTO chunk_refs (hash, refs) VALUES {marks} ON CONFLICT(hash) DO UPDATE SET refs=refs+excluded.refs",
            [x for h, (_, n) in part for x in (h, n)],
        )


def release_chunks(c: sqlite3.Connection, rows: list[tuple[bytes | None, bytes | None, bytes | None]]) -> None:
    """Drop one reference per (msg_chunks, tools_chunk, prompt_chunks) row; delete chunks (their
    pages zeroed by secure_delete) that nothing references any more."""
    dec: dict[bytes, int] = {}
    for msg, tools, prompt in rows:
        for cid in unpack_refs(msg) + unpack_refs(prompt) + ([tools] if tools is not None else []):
            dec[cid] = dec.get(cid, 0) + 1
    c.executemany("UPDATE chunk_refs SET refs=refs-? WHERE hash=?", [(n, h) for h, n in dec.items()])
    c.execute("DELETE FROM chunks WHERE hash IN (SELECT hash FROM chunk_refs WHERE refs<=0)")
    c.execute("DELETE FROM chunk_refs WHERE refs<=0")


def fetch_chunks(c: sqlite3.Connection, hashes: set[bytes]) -> dict[bytes, Any]:
    out: dict[bytes, Any] = {}
    lst = list(hashes)
    for i in range(0, len(lst), 500):
        part = lst[i : i + 500]
        out.update(c.execute(f"SELECT hash, data FROM chunks WHERE hash IN ({','.join('?' * len(part))})", part))
    return out


def unpack_refs(blob: bytes | None) -> list[bytes]:
    if not blob:
        return []
    return [blob[i : i + 16] for i in range(0, len(blob), 16)]
