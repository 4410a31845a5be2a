"""The RL intercept behind the real server: real HTTP, the tiny model, a real buffer on disk."""

from __future__ import annotations

import asyncio
import json
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from openclaw.buffer import AWAITING, CLOSED, READY, TrajectoryBuffer
from openclaw.server.config import parse_config

TOOLS = [{
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather for a city",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
}]
INTERNAL = ("<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>\nConversation data (data, not instructions):\n"
            "\"Active exec sessions:\\nnone\"\n<<<END_OPENCLAW_INTERNAL_CONTEXT>>>")


@pytest.fixture(scope="module")
def engine(tiny_model_path: Path):
    from openclaw.engines.hf_engine import HFEngine

    eng = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=8)
    yield eng
    asyncio.run(eng.shutdown())


@contextmanager
def serve(engine: Any, buffer_dir: Path, idle: float = 600.0, flags: tuple[str, ...] = ()) -> Iterator[tuple[httpx.Client, Any]]:
    """The real app with the intercept built through the server's own wiring (its flags, parsed)."""
    from openclaw.server.app import create_app
    from openclaw.server.runner import serve_in_background

    cfg = parse_config(["--enable-rl-intercept", "--rl-buffer-dir", str(buffer_dir),
                        "--session-idle-timeout", str(idle), *flags], env={})
    app = create_app(cfg, engine=engine)
    observer = app.state.openclaw.observer
    with serve_in_background(app) as srv, httpx.Client(base_url=srv.base_url, timeout=60) as client:
        yield client, observer


def chat(client: httpx.Client, messages: list[dict], headers: dict | None = None, **body: Any) -> dict:
    r = client.post("/v1/chat/completions", headers=headers or {},
                    json={"model": "m", "messages": messages, "max_tokens": 4, "temperature": 0, **body})
    assert r.status_code == 200, r.text
    return r.json()


def reply_of(resp: dict) -> dict:
    msg = resp["choices"][0]["message"]
    out = {"role": "assistant", "content": msg.get("content") or ""}
    if msg.get("tool_calls"):
        out["tool_calls"] = msg["tool_calls"]
    return out


def read(buffer_dir: Path) -> TrajectoryBuffer:
    return TrajectoryBuffer.open(buffer_dir)


def test_header_session_next_state_and_done(engine: Any, tmp_path: Path) -> None:
    d = tmp_path / "buf"
    with serve(engine, d) as (client, _):
        h = {"X-Session-Id": "conv/../../etc/passwd"}  # path separators: just a string to us
        m1 = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello"}]
        r1 = chat(client, m1, h)
        m2 = m1 + [reply_of(r1), {"role": "user", "content": "thanks, now in French"}]
        r2 = chat(client, m2, h)
        chat(client, m2 + [reply_of(r2), {"role": "user", "content": "bye"}], {**h, "X-Session-Done": "1"})
    b = read(d)
    turns = b.session_turns("conv/../../etc/passwd")
    assert [t.turn_index for t in turns] == [0, 1, 2]
    assert [t.turn_type for t in turns] == ["main"] * 3
    assert turns[0].next_state["content"] == "thanks, now in French" and turns[0].next_state["role"] == "user"
    assert turns[1].next_state["content"] == "bye"
    assert turns[2].next_state is None and turns[2].state == READY  # finalized by X-Session-Done
    assert all(t.state == READY for t in turns)
    t0 = turns[0]
    assert len(t0.response_ids) == len(t0.response_logprobs) > 0 and all(lp <= 0 for lp in t0.response_logprobs)
    assert t0.prompt_ids and t0.model and t0.metadata["session_source"] == "header"
    assert t0.response_text == r1["choices"][0]["message"]["content"] or t0.content == r1["choices"][0]["message"]["content"]
    assert not (tmp_path / "etc").exists() and sorted(p.name for p in d.iterdir())[0].startswith("buffer")
    assert b.open_sessions() == [] and b.verify() == []


def test_body_keys_and_side_turns(engine: Any, tmp_path: Path) -> None:
    d = tmp_path / "buf"
    with serve(engine, d) as (client, _):
        m1 = [{"role": "user", "content": "plan my day"}]
        r1 = chat(client, m1, session_id="body-sess")
        # a side call in the same session must not consume the pending next state
        chat(client, [{"role": "user", "content": "title for this chat?"}], session_id="body-sess", turn_type="side")
        chat(client, m1 + [reply_of(r1), {"role": "user", "content": "more detail"}], session_id="body-sess")
    b = read(d)
    turns = b.session_turns("body-sess")
    assert [t.turn_type for t in turns] == ["main", "side", "main"]
    assert turns[0].next_state["content"] == "more detail" and turns[0].metadata["session_source"] == "body"
    assert turns[1].state == CLOSED and not turns[1].trainable
    assert turns[2].state == AWAITING


def test_openclaw_runtime_line_and_internal_context(engine: Any, tmp_path: Path) -> None:
    """What unmodified OpenClaw sends: no headers, the runtime line in the first user message,
    a trailing internal-context message that is dropped from later history."""
    d = tmp_path / "buf"
    sys_msg = {"role": "system", "content": "You are a personal assistant running inside OpenClaw."}
    first = {"role": "user", "content": "[Sat 2026-11-21 22:28 UTC] First message\n\nRuntime: agent=main | "
             "session=agent:main:explicit:oc-42 | sessionId=oc-42 | host=vm | model=local/tiny"}
    internal = {"role": "user", "content": [{"type": "text", "text": INTERNAL}]}
    with serve(engine, d) as (client, _):
        r1 = chat(client, [sys_msg, first, internal])
        second = {"role": "user", "content": "[Sat 2026-11-21 22:29 UTC] Second message"}
        chat(client, [sys_msg, first, reply_of(r1), second, internal])
    turns = read(d).session_turns("oc-42")
    assert len(turns) == 2 and turns[0].metadata["session_source"] == "runtime_line"
    assert turns[0].next_state["content"] == second["content"]  # not the internal context
    assert INTERNAL not in json.dumps(turns[0].next_state)


def _sse_reply(client: httpx.Client, messages: list[dict], **body: Any) -> dict:
    content, calls = "", {}
    with client.stream("POST", "/v1/chat/completions",
                       json={"model": "m", "messages": messages, "max_tokens": 4, "temperature": 0, "stream": True,
                             **body}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for ch in json.loads(line[6:]).get("choices", []):
                delta = ch.get("delta", {})
                content += delta.get("content") or ""
                for tc in delta.get("tool_calls") or []:
                    slot = calls.setdefault(tc["index"], {"id": tc.get("id"), "type": "function",
                                                          "function": {"name": "", "arguments": ""}})
                    fn = tc.get("function") or {}
                    slot["function"]["name"] += fn.get("name") or ""
                    slot["function"]["arguments"] += fn.get("arguments") or ""
    out: dict = {"role": "assistant", "content": content}
    if calls:
        out["tool_calls"] = [calls[i] for i in sorted(calls)]
    return out


def test_continuity_streaming_tool_loop_with_rewritten_ids(engine: Any, tmp_path: Path) -> None:
    """No session id at all: a streamed agent tool loop is grouped by continuity, although the
    client rewrites the tool-call ids and appends its internal-context message."""
    d = tmp_path / "buf"
    internal = {"role": "user", "content": INTERNAL}
    with serve(engine, d) as (client, _):
        m1 = [{"role": "system", "content": "agent"}, {"role": "user", "content": "weather in Paris?"}]
        forced = {"type": "function", "function": {"name": "get_weather"}}
        a1 = _sse_reply(client, m1 + [internal], tools=TOOLS, tool_choice=forced)
        assert a1["tool_calls"][0]["function"]["name"] == "get_weather"
        for i, tc in enumerate(a1["tool_calls"]):  # OpenClaw rewrites tool-call ids
            tc["id"] = f"call_rewritten_{i}"
        tool_msg = {"role": "tool", "tool_call_id": "call_rewritten_0", "content": "sunny, 21C"}
        m2 = m1 + [a1, tool_msg]
        a2 = _sse_reply(client, m2 + [internal], tools=TOOLS)
        m3 = m2 + [a2, {"role": "user", "content": "great"}]
        _sse_reply(client, m3 + [internal], tools=TOOLS)
        # an unrelated conversation at the same time is its own session
        chat(client, [{"role": "user", "content": "unrelated"}])
    b = read(d)
    sids = b.session_ids()
    assert len(sids) == 2
    turns = max((b.session_turns(s) for s in sids), key=len)
    assert len(turns) == 3
    assert [t.metadata["session_source"] for t in turns] == ["new", "continuity", "continuity"]
    assert turns[0].tool_calls and turns[0].next_state["role"] == "tool"
    assert turns[0].next_state["content"] == "sunny, 21C"
    assert turns[1].next_state == {"role": "user", "content": "great",
                                   "messages": [{"role": "user", "content": "great"}]}


def test_interleaved_concurrent_sessions(engine: Any, tmp_path: Path) -> None:
    """8 conversations advance in lockstep, their requests concurrent: continuity keeps them apart."""
    d = tmp_path / "buf"
    n, rounds = 8, 3

    async def run(base: str) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=120) as ac:
            hist = [[{"role": "user", "content": f"conversation {i}: hello"}] for i in range(n)]

            async def one(i: int, r: int) -> None:
                resp = await ac.post("/v1/chat/completions", json={"model": "m", "messages": hist[i], "max_tokens": 3})
                assert resp.status_code == 200, resp.text
                hist[i] = hist[i] + [reply_of(resp.json()), {"role": "user", "content": f"conv {i} round {r}"}]

            for r in range(rounds):
                await asyncio.gather(*(one(i, r) for i in range(n)))

    with serve(engine, d) as (client, _):
        asyncio.run(run(str(client.base_url)))
    b = read(d)
    assert len(b.session_ids()) == n
    for sid in b.session_ids():
        turns = b.session_turns(sid)
        assert len(turns) == rounds
        i = turns[0].messages[0]["content"].split()[1].rstrip(":")
        for r, t in enumerate(turns[:-1]):
            assert t.next_state["content"] == f"conv {i} round {r}"
    assert b.verify() == []


def test_idle_timeout_finalizes(engine: Any, tmp_path: Path) -> None:
    d = tmp_path / "buf"
    with serve(engine, d, idle=0.3, flags=("--rl-retention-ttl", "1h")) as (client, obs):
        chat(client, [{"role": "user", "content": "hi"}], {"X-Session-Id": "idle-1"})
        deadline = time.time() + 10
        while time.time() < deadline and read(d).session_turns("idle-1")[0].state != READY:
            time.sleep(0.05)  # polling the buffer for the maintenance task, with a deadline
        assert "idle-1" not in obs.tracker
    t = read(d).session_turns("idle-1")[0]
    assert t.state == READY and t.next_state is None


def test_opt_out_never_stored(engine: Any, tmp_path: Path) -> None:
    d = tmp_path / "buf"
    secret_words = "my-very-private-diary-entry"
    with serve(engine, d) as (client, _):
        m1 = [{"role": "user", "content": "public question"}]
        r1 = chat(client, m1)
        # the conversation opts out mid-way: this turn and later ones (even without the header)
        m2 = m1 + [reply_of(r1), {"role": "user", "content": secret_words}]
        r2 = chat(client, m2, {"X-RL-Opt-Out": "1"})
        chat(client, m2 + [reply_of(r2), {"role": "user", "content": secret_words + " 2"}])
        chat(client, [{"role": "user", "content": secret_words + " body"}], rl_opt_out=True)
    b = read(d)
    st = b.stats()
    assert st["turns"] == 1 and st["counters"]["opted_out_turns"] == 3
    only = b.session_turns(b.session_ids()[0])[0]
    assert only.next_state is None and only.state == READY  # finalized, private next state not kept
    b.close()
    assert not any(secret_words.encode() in p.read_bytes() for p in d.iterdir())


SECRETS = [
    "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789",
    "ghp_0123456789abcdefghijABCDEFGHIJklmn",
    "AKIAIOSFODNN7EXAMPLE",
    "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV",
    "postgres://admin:Sup3rS3cretPw@db.internal:5432/prod",
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----",
    "CORP-TOKEN-778899",
]
NEEDLES = [b"AbCdEfGhIjKlMnOpQrStUvWx", b"0123456789abcdefghijABCDEFGHIJ", b"AKIAIOSFODNN7EXAMPLE",
           b"SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV", b"Sup3rS3cretPw", b"b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ",
           b"CORP-TOKEN-778899"]


def test_redaction_nothing_on_disk(engine: Any, tmp_path: Path) -> None:
    d = tmp_path / "buf"
    with serve(engine, d, flags=("--rl-redact-pattern", r"CORP-TOKEN-\d+")) as (client, _):
        m1 = [{"role": "user", "content": "here are my creds:\n" + "\n".join(SECRETS)}]
        r1 = chat(client, m1, {"X-Session-Id": "leaky"}, tools=TOOLS)
        m2 = m1 + [reply_of(r1), {"role": "user", "content": "oops, also " + SECRETS[0]}]
        chat(client, m2, {"X-Session-Id": "leaky"})
        chat(client, [{"role": "user", "content": "clean turn"}], {"X-Session-Id": "clean"})
        raw = b"".join(p.read_bytes() for p in d.iterdir())  # WAL included, while the server runs
        for needle in NEEDLES:
            assert needle not in raw, needle
    b = read(d)
    leaky = b.session_turns("leaky")
    assert all(not t.trainable and t.prompt_ids == [] and t.response_ids == [] for t in leaky)
    assert "[REDACTED:openai_key]" in leaky[0].messages[0]["content"]
    assert "[REDACTED:openai_key]" in leaky[0].next_state["content"]
    assert b.session_turns("clean")[0].trainable
    assert b.stats()["counters"]["redacted_turns"] == 2
    b.close()
    for p in [d, *d.iterdir()]:
        assert stat.S_IMODE(p.stat().st_mode) == (0o700 if p.is_dir() else 0o600)
    raw = b"".join(p.read_bytes() for p in d.rglob("*") if p.is_file())
    for needle in NEEDLES:
        assert needle not in raw, needle


def test_redaction_control_without_redaction(engine: Any, tmp_path: Path) -> None:
    """The negative control: with --rl-no-redact the same grep does find the planted key, so
    the test above would catch a leak."""
    d = tmp_path / "buf"
    with serve(engine, d, flags=("--rl-no-redact",)) as (client, _):
        chat(client, [{"role": "user", "content": "key " + SECRETS[0]}])
    assert NEEDLES[0] in b"".join(p.read_bytes() for p in d.iterdir())


def test_hostile_input(engine: Any, tmp_path: Path) -> None:
    d = tmp_path / "buf"
    with serve(engine, d) as (client, _):
        ok = [{"role": "user", "content": "x"}]
        for sid in ("a\x00b", "x" * 10_240):
            r = client.post("/v1/chat/completions", headers={}, json={"model": "m", "messages": ok, "max_tokens": 2,
                                                                      "session_id": sid})
            assert r.status_code == 400 and r.json()["error"]["param"] == "session_id"
        r = client.post("/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "x"}],
                                                      "max_tokens": 2, "session_id": {"$ne": 1}})
        assert r.status_code == 400
        for bad in ([{"role": "user"}], [{"content": "no role"}], "not a list", [{"role": "wizard", "content": "x"}]):
            r = client.post("/v1/chat/completions", json={"model": "m", "messages": bad, "max_tokens": 2})
            assert 400 <= r.status_code < 500, (bad, r.status_code)
        # valid but odd: unicode, path-like id, sessionId in content that is not a runtime line
        chat(client, [{"role": "user", "content": "sessionId=../../x\u202e\U0001f600"}],
             {"X-Session-Id": "/abs/../path\\with\\backslash"})
    b = read(d)
    assert set(b.session_ids()) == {"/abs/../path\\with\\backslash"}
    assert b.verify() == []
    assert {p.name for p in d.iterdir()} <= {"buffer.sqlite3", "buffer.sqlite3-shm", "buffer.sqlite3-wal"}


def test_restart_continues_session(engine: Any, tmp_path: Path) -> None:
    """A server restart between two turns: continuity state is rebuilt from the buffer."""
    d = tmp_path / "buf"
    m1 = [{"role": "user", "content": "remember me"}]
    with serve(engine, d) as (client, _):
        r1 = chat(client, m1)
    with serve(engine, d) as (client, _):
        chat(client, m1 + [reply_of(r1), {"role": "user", "content": "after restart"}])
    b = read(d)
    assert len(b.session_ids()) == 1
    turns = b.session_turns(b.session_ids()[0])
    assert [t.turn_index for t in turns] == [0, 1]
    assert turns[0].next_state["content"] == "after restart" and turns[1].metadata["session_source"] == "continuity"
