"""`python -m openclaw.buffer` as a user runs it: real subprocesses on a real buffer."""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openclaw.buffer import JUDGED, READY, AttachOp, TrajectoryBuffer, TurnRecord

# The public page's "Data Format" example.
REFERENCE = json.loads((Path(__file__).parent / "data" / "page_session.json").read_text())


def cli(*args: str, check: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "openclaw.buffer", *args], capture_output=True, text=True,
                       input=stdin, timeout=120)
    if check and r.returncode != 0:
        raise AssertionError(f"{args}: rc={r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def _fill(d: Path) -> None:
    with TrajectoryBuffer.open(d) as b:
        for i in range(3):
            b.append_turn(TurnRecord(
                session_id="sess-a", turn_index=i, turn_type="main",
                messages=[{"role": "system", "content": "s"}, {"role": "user", "content": f"question {i}"}],
                prompt_ids=[1, 2, 3 + i], response_ids=[7, 8], response_logprobs=[-0.25, -1.5],
                response_text=f"answer {i}", content=f"answer {i}", model="tiny", weight_version=2,
                tool_calls=[{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}] if i == 1 else None,
            ))
        b.append_turn(TurnRecord(session_id="sess-b", turn_index=0, turn_type="side", trainable=False,
                                 messages=[{"role": "user", "content": "title?"}], response_text="T", content="T"))
        ids = [t.turn_id for t in b.session_turns("sess-a")]
        b.write_ops([AttachOp(ids[0], {"role": "user", "content": "question 1"}),
                     AttachOp(ids[1], {"role": "user", "content": "question 2"})])
        b.finalize_session("sess-a")
        for t in b.claim_for_judging("w", limit=1):
            b.write_judgement(t.turn_id, {"score": 1.0})


def test_stats_tail_verify(tmp_path: Path) -> None:
    d = tmp_path / "buf"
    _fill(d)
    st = json.loads(cli("stats", "--dir", str(d), "--json").stdout)
    assert st["turns"] == 4 and st["by_state"][JUDGED] == 1 and st["by_state"][READY] == 2
    human = cli("--dir", str(d), "stats").stdout
    assert "sessions    2" in human
    tail = cli("tail", "--dir", str(d), "-n", "2").stdout.strip().splitlines()
    assert len(tail) == 2 and "sess-b" in tail[-1]
    assert "ok: 4 turn(s)" in cli("verify", "--dir", str(d)).stdout


def test_verify_detects_broken_invariants(tmp_path: Path) -> None:
    d = tmp_path / "buf"
    _fill(d)
    with sqlite3.connect(d / "buffer.sqlite3") as c:  # corrupt behind the API's back
        c.execute("UPDATE turns SET state='judged', judgement=NULL WHERE turn_index=2 AND session_id='sess-a'")
        c.execute("UPDATE turns SET response_logprobs=x'00' WHERE session_id='sess-b'")
    r = cli("verify", "--dir", str(d), check=False)
    assert r.returncode == 1
    assert "judged without a judgement" in r.stdout and "log-probs not 1:1" in r.stdout


def test_export_import_round_trip(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    _fill(src)
    for fmt in ("json", "jsonl"):
        out = tmp_path / f"export.{fmt}"
        cli("export", "--dir", str(src), "--format", fmt, "-o", str(out))
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        target = dst / fmt
        assert "imported 2 session(s), 4 turn(s)" in cli("import", str(out), "--dir", str(target)).stdout
        # idempotent: a second import skips existing sessions
        assert "skipped 2 existing" in cli("import", str(out), "--dir", str(target)).stdout
        a = json.loads(cli("export", "--dir", str(src)).stdout)
        b = json.loads(cli("export", "--dir", str(target)).stdout)
        strip = ("turn_id", "metadata")
        for sa, sb in zip(a, b, strict=True):
            assert sa["session_id"] == sb["session_id"]
            for ta, tb in zip(sa["turns"], sb["turns"], strict=True):
                assert {k: v for k, v in ta.items() if k not in strip} == {k: v for k, v in tb.items() if k not in strip}
        assert "ok" in cli("verify", "--dir", str(target)).stdout


def test_import_reference_format(tmp_path: Path, tiny_model_path: Path) -> None:
    ref = tmp_path / "ref.json"
    ref.write_text(json.dumps(REFERENCE))
    d1 = tmp_path / "no_tok"
    r = cli("import", str(ref), "--dir", str(d1)).stdout
    assert "1 trainable turn(s) had no token ids" in r
    with TrajectoryBuffer.open(d1) as b:
        main, side = b.session_turns("user_session_abc123")
        assert not main.trainable and main.next_state["content"].startswith("User accepted")
        assert side.turn_type == "side"
    d2 = tmp_path / "tok"
    cli("import", str(ref), "--dir", str(d2), "--tokenizer", str(tiny_model_path))
    with TrajectoryBuffer.open(d2) as b:
        main, side = b.session_turns("user_session_abc123")
        assert main.trainable and main.state == READY and main.prompt_ids and main.response_ids
        assert main.response_logprobs == []  # never invented
    exported = json.loads(cli("export", "--dir", str(d2), "--session", "user_session_abc123", "--text-only").stdout)
    for k in ("type", "prompt", "response", "next_state", "trainable"):
        assert [t[k] for t in exported["turns"]] == [t.get(k) for t in REFERENCE["turns"]], k
    assert exported["turns"][0]["trainable"] is True and "prompt_ids" not in exported["turns"][0]


def test_import_rejects_malformed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    for doc in ('{"turns": []}', '[{"session_id": "x", "turns": [{"type": "other"}]}]', "{not json",
                json.dumps({"session_id": "a\u0000b", "turns": []})):
        bad.write_text(doc)
        r = cli("import", str(bad), "--dir", str(tmp_path / "b"), check=False)
        assert r.returncode == 2 and "error" in r.stderr, doc


def test_import_redacts(tmp_path: Path) -> None:
    doc = {"session_id": "s", "turns": [{"type": "main", "prompt": "token ghp_0123456789abcdefghijABCDEFGHIJklmn",
                                         "response": "ok", "trainable": True, "prompt_ids": [1], "response_ids": [2]}]}
    f = tmp_path / "s.json"
    f.write_text(json.dumps(doc))
    d = tmp_path / "b"
    assert "1 turn(s) redacted" in cli("import", str(f), "--dir", str(d)).stdout
    assert not any(b"0123456789abcdefghijABCDEFGHIJ" in p.read_bytes() for p in d.iterdir())


def test_purge(tmp_path: Path) -> None:
    d = tmp_path / "buf"
    _fill(d)
    assert "3 turn(s)" in cli("purge", "--dir", str(d), "--session", "sess-a").stdout
    raw = b"".join(p.read_bytes() for p in d.iterdir())
    assert b"question 1" not in raw and b"sess-a" not in raw
    with TrajectoryBuffer.open(d) as b:
        assert b.session_ids() == ["sess-b"]
        old = TurnRecord(session_id="old", turn_index=0, turn_type="side", trainable=False, messages=[],
                         created_at=time.time() - 7200)
        b.append_turn(old)
    assert "purged 1 turn(s)" in cli("purge", "--dir", str(d), "--older-than", "1h").stdout
    assert cli("purge", "--dir", str(d), "--older-than", "soon", check=False).returncode == 2
    assert "ok" in cli("verify", "--dir", str(d)).stdout


def test_missing_buffer_is_a_clear_error(tmp_path: Path) -> None:
    r = cli("stats", "--dir", str(tmp_path / "nope"), check=False)
    assert r.returncode != 0 and "no trajectory buffer" in r.stderr


@pytest.mark.parametrize("cmd", ["stats", "tail", "export", "import", "verify", "purge"])
def test_help(cmd: str) -> None:
    assert "usage" in cli(cmd, "--help").stdout
