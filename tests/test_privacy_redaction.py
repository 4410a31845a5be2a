"""Redaction behind the real server (in-process, tiny model) and the real buffer on disk: AWS secret
access keys in the forms people paste (the AWS CLI's JSON, prose), and secrets placed in the
session id (header or body). The bytes of the buffer directory (the WAL while the server writes
it) and of both export formats are grepped."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openclaw.buffer import TrajectoryBuffer
from openclaw.server.config import parse_config

AWS_FORMS = {
    "aws-json": ('{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7"}',
                 "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7"),
    "aws-prose": ("my aws secret access key: je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY thanks",
                  "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"),
    "aws-my-secret": ("FYI my AWS secret is Zx9+Pq4LmN2bVc8KjH7gF6dS5aQ3wE1rT0yU/iOp",
                      "Zx9+Pq4LmN2bVc8KjH7gF6dS5aQ3wE1rT0yU/iOp"),
}


@pytest.fixture(scope="module")
def engine(tiny_model_path: Path) -> Iterator[Any]:
    from openclaw.engines.hf_engine import HFEngine

    eng = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=4)
    yield eng
    asyncio.run(eng.shutdown())


def _serve(engine: Any, buf: Path):
    from openclaw.server.app import create_app
    from openclaw.server.runner import serve_in_background

    cfg = parse_config(["--enable-rl-intercept", "--rl-buffer-dir", str(buf)], env={})
    return serve_in_background(create_app(cfg, engine=engine))


def _chat(client: httpx.Client, text: str, headers: dict[str, str] | None = None, **body: Any) -> None:
    r = client.post("/v1/chat/completions", headers=headers or {},
                    json={"model": "m", "max_tokens": 3, "temperature": 0,
                          "messages": [{"role": "user", "content": text}], **body})
    assert r.status_code == 200, r.text


def _export(buf: Path, out: Path, fmt: str) -> bytes:
    proc = subprocess.run([sys.executable, "-m", "openclaw.buffer", "--dir", str(buf), "export", "--format", fmt,
                           "-o", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out.read_bytes()


def _live_bytes(buf: Path) -> bytes:
    files = {p.name: p.read_bytes() for p in buf.iterdir() if p.is_file()}
    assert any(name.endswith("-wal") for name in files), sorted(files)
    return b"".join(files.values())


def test_aws_secret_keys_in_json_and_prose_are_redacted(engine: Any, tmp_path: Path) -> None:
    buf = tmp_path / "buf"
    with _serve(engine, buf) as srv, httpx.Client(base_url=srv.base_url, timeout=60) as client:
        for sid, (text, _) in AWS_FORMS.items():
            _chat(client, text, {"X-Session-Id": sid})
        raw = _live_bytes(buf)
        raw += _export(buf, tmp_path / "all.json", "json") + _export(buf, tmp_path / "all.jsonl", "jsonl")
    for sid, (_, key) in AWS_FORMS.items():
        assert key.encode() not in raw, sid
        assert key[:13].encode() not in raw, sid
    assert all(key.encode() not in p.read_bytes() for p in buf.rglob("*") if p.is_file() for _, key in AWS_FORMS.values())
    with TrajectoryBuffer.open(buf, create=False) as b:
        for sid in AWS_FORMS:
            (turn,) = b.session_turns(sid)
            assert "[REDACTED:aws_secret]" in turn.messages[0]["content"], turn.messages
            # The ids of the key are the key: the turn keeps its redacted text only.
            assert not turn.trainable and turn.prompt_ids == [] and turn.response_ids == []
            assert turn.metadata["untrainable_reason"] == "redacted"


SECRET_IDS = ["sk-proj-Abcdefghijklmnop1234567890", "team-ghp_abcdefghijklmnopqrstuvwxyz0123456789",
              "bob password=hunter2hunter"]


def test_session_ids_carrying_secrets_are_never_stored(engine: Any, tmp_path: Path) -> None:
    buf = tmp_path / "buf"
    with _serve(engine, buf) as srv, httpx.Client(base_url=srv.base_url, timeout=60) as client:
        _chat(client, "first", {"X-Session-Id": SECRET_IDS[0]})
        _chat(client, "second", {"X-Session-Id": SECRET_IDS[0]})  # the same conversation
        _chat(client, "third", session_id=SECRET_IDS[1])
        _chat(client, "fourth", {"X-Session-Id": SECRET_IDS[2]})
        _chat(client, "plain", {"X-Session-Id": "chat-42"})
        raw = _live_bytes(buf)
        raw += _export(buf, tmp_path / "all.json", "json") + _export(buf, tmp_path / "all.jsonl", "jsonl")
    raw += b"".join(p.read_bytes() for p in buf.rglob("*") if p.is_file())
    for needle in ("Abcdefghijklmnop1234567890", "ghp_abcdefghijklmnopqrstuvwxyz", "hunter2hunter"):
        assert needle.encode() not in raw, needle
    with TrajectoryBuffer.open(buf, create=False) as b:
        sessions = {sid: b.session_turns(sid) for sid in b.session_ids()}
    assert [len(t) for s, t in sessions.items() if s == "chat-42"] == [1]  # an ordinary id is kept as sent
    hidden = {s: [t.messages[0]["content"] for t in turns] for s, turns in sessions.items() if s != "chat-42"}
    assert sorted(hidden.values()) == [["first", "second"], ["fourth"], ["third"]], hidden
    assert all(s.startswith("redacted-") for s in hidden), hidden
