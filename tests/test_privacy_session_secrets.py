"""A value recognised as a secret once in a session is redacted wherever it comes back in that
session, end to end: the real server (a subprocess on the tiny model, judge workers in it), the
real buffer on disk, the buffer CLI's exports, a feedback comment and the teacher prompt built
from what was stored. Every file the run wrote is grepped: the buffer directory (the WAL while
the server writes it, then everything after shutdown), both export formats and the server log.

The planted passphrase is said once with a cue ("My vault passphrase is X"); later requests no
longer carry that message: the user repeats X without a cue ("to confirm: X"), the assistant's
echo of X is in the history the client sends back, and finally the model itself produces X in its
reply to a stateless request: X is picked from the greedy reply of the tiny
model to a fixed prompt (probed in an opted-out session, which stores nothing), so asking that
prompt again in the session makes the model's own response contain X.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from openclaw.buffer import TrajectoryBuffer

SID = "vault-chat"
ASK = "Say something."
MAX_TOKENS = 24


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _chat(client: httpx.Client, messages: list[dict], headers: dict[str, str]) -> str:
    r = client.post("/v1/chat/completions", headers=headers,
                    json={"model": "m", "messages": messages, "max_tokens": MAX_TOKENS, "temperature": 0})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"]["content"] or ""


def _pick_passphrase(reply: str) -> str:
    """A word of the model's reply that the prose-password rule takes as a value (not an ordinary
    -ed/-ing/-ly word), long enough to be unique in the files grepped."""
    words = [w for w in reply.split() if re.fullmatch(r"[A-Za-z]{10,}", w) and not re.search(r"(ed|ing|ly)$", w.lower())]
    assert words, f"the tiny model's reply has no word to plant as a passphrase: {reply!r}"
    return max(words, key=len)


def _buffer_cli(buf: Path, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "openclaw.buffer", "--dir", str(buf), *args],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _files_containing(paths: list[Path], needle: bytes) -> list[str]:
    hits = []
    for root in paths:
        for p in [root] if root.is_file() else sorted(root.rglob("*")):
            if p.is_file() and needle in p.read_bytes():
                hits.append(str(p))
    return hits


def _wait_judged(buf: Path, turn_index: int, deadline_s: float = 180.0) -> None:
    end = time.monotonic() + deadline_s
    while True:
        with TrajectoryBuffer.open(buf, create=False) as b:
            turns = b.session_turns(SID)
        if len(turns) > turn_index and turns[turn_index].state == "judged":
            return
        assert time.monotonic() < end, f"turn {turn_index} never judged: {[t.state for t in turns]}"
        time.sleep(0.2)  # polling the buffer, with a deadline


def test_passphrase_repeated_and_echoed_never_reaches_disk(tiny_model_path: Path, tmp_path: Path,
                                                           start_intercept_server) -> None:
    from openclaw.bridge.teacher import teacher_messages
    from openclaw.bridge.turns import turn_signal

    buf, exports, log = tmp_path / "buf", tmp_path / "exports", tmp_path / "server.log"
    exports.mkdir()
    port = _free_port()
    proc = start_intercept_server(tiny_model_path, buf, port, log, "--judge-workers", "1", "--log-level", "debug")
    session = {"X-Session-Id": SID}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            probe = _chat(client, [{"role": "user", "content": ASK}],
                          {"X-Session-Id": "probe", "X-RL-Opt-Out": "1"})
            secret = _pick_passphrase(probe)
            needle = secret.encode()

            history = [{"role": "user", "content": "Hello! Can you help me with my vault?"}]
            history.append({"role": "assistant", "content": _chat(client, history, session)})
            history.append({"role": "user", "content": f"My vault passphrase is {secret}"})
            _chat(client, history, session)
            # The client has dropped the message with the cue from its history (as a compaction
            # does) and echoes the passphrase back as the assistant's words; the user repeats it.
            _chat(client, [history[0], {"role": "assistant", "content": f"Noted, I will keep {secret} safe for you."},
                           {"role": "user", "content": f"to confirm: {secret}"}], session)
            _wait_judged(buf, 0)  # the first turn (clean, trainable) got its next state and was judged
            # A stateless follow-up: the model's own reply contains the passphrase.
            reply = _chat(client, [{"role": "user", "content": ASK}], {**session, "X-Session-Done": "1"})
            assert secret in reply, "the model did not reproduce its probed reply"
            r = client.post("/v1/feedback", json={"session_id": SID, "turn_index": 0, "rating": "down",
                                                  "comment": f"Never make me repeat {secret} again."})
            assert r.status_code == 200, r.text
            assert secret not in r.text

            _buffer_cli(buf, "export", "--format", "json", "-o", str(exports / "sessions.json"))
            _buffer_cli(buf, "export", "--format", "jsonl", "-o", str(exports / "sessions.jsonl"))
            live = [p for p in buf.iterdir() if p.is_file()]
            assert any(p.name.endswith("-wal") for p in live), [p.name for p in live]
            assert _files_containing([buf, exports, log], needle) == []
    finally:
        os.kill(proc.pid, signal.SIGTERM)  # by PID: the process this test started
        proc.wait(60)
    assert _files_containing([buf, exports, log], needle) == []

    with TrajectoryBuffer.open(buf, create=False) as b:
        turns = b.session_turns(SID)
        assert b.session_turns("probe") == []
    assert len(turns) == 4
    assert turns[0].trainable and turns[0].state == "judged"
    assert "[REDACTED:password]" in turns[0].next_state["content"]
    assert "[REDACTED:password]" in turns[2].messages[-1]["content"]  # "to confirm: X"
    assert "[REDACTED:password]" in turns[2].messages[-2]["content"]  # the assistant's echo
    assert "[REDACTED:password]" in turns[1].next_state["content"]
    assert "[REDACTED:password]" in (turns[3].content or "")  # the model's own words
    for t in turns[1:]:
        assert not t.trainable and t.prompt_ids == [] and t.response_ids == []
    comment = turns[0].feedback["comment"]
    assert "[REDACTED:password]" in comment
    hint = turn_signal(turns[0]).hint  # what the trainer's OPD teacher is shown: the comment
    assert hint == comment
    teacher = json.dumps(teacher_messages(turns[0].messages, hint))
    assert secret not in teacher and "[REDACTED:password]" in teacher
