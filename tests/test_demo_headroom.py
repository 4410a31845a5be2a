"""`python -m openclaw.demo.headroom`: whether OPD's hinted teacher meets a persona's preference.

Real parts: the CLI in a subprocess, the real engine process it starts (the tiny model; SmolLM2 in the
slow test), the persona's IFEval checkers, the judge's own hint extractor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from openclaw.demo.headroom import teacher_prompt
from openclaw.demo.personas import load_persona

REPO = Path(__file__).resolve().parents[1]


def _cli(*args: str | Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "openclaw.demo.headroom", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=timeout)


def test_teacher_prompt_is_the_hint_in_front_of_the_question() -> None:
    prompt = teacher_prompt("What is rain?", "No, that's too long. Keep it to one or two sentences.")
    assert prompt == "No, that's too long. Keep it to one or two sentences.\n\nWhat is rain?"
    # feedback that only says "again" carries nothing to correct: no hint, the teacher is the policy
    assert teacher_prompt("What is rain?", "try again") is None


def test_headroom_on_the_tiny_model(tiny_model_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "headroom.json"
    res = _cli("--model-path", tiny_model_path, "--persona", "brief", "no_commas", "--limit", "3",
               "--max-tokens", "8", "--json", out)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "[2/2] no_commas: 3 train prompts" in res.stdout
    rows = json.loads(out.read_text())
    assert [r["persona"] for r in rows] == ["brief", "no_commas"]
    for row in rows:
        persona = load_persona(row["persona"])
        examples = row["examples"]
        assert row["prompts"] == len(examples) == 3
        assert row["hinted"] == sum(e["teacher_prompt"] is not None for e in examples)
        for e in examples:
            # the verdicts are the persona's IFEval checkers on the replies written out
            assert e["policy_meets"] == all(persona.follows(e["policy"]))
            assert e["teacher_meets"] == all(persona.follows(e["teacher"]))
            if e["teacher_prompt"] is None:
                assert e["teacher"] == e["policy"]
            else:
                assert e["teacher_prompt"].endswith("\n\n" + e["prompt"])
                assert e["teacher_prompt"] == e["feedback"] + "\n\n" + e["prompt"]
        assert row["policy_meets"] == pytest.approx(100 * sum(e["policy_meets"] for e in examples) / 3)
        assert row["teacher_meets"] == pytest.approx(100 * sum(e["teacher_meets"] for e in examples) / 3)
        assert f"{row['persona']:<14}" in res.stdout


def test_refusals(tmp_path: Path) -> None:
    res = _cli("--persona", "nobody-by-this-name")
    assert res.returncode == 2 and "nobody-by-this-name" in res.stderr
    res = _cli("--engine-url", "http://127.0.0.1:9")
    assert res.returncode == 2 and "--tokenizer-path" in res.stderr
    res = _cli("--limit", "0")
    assert res.returncode == 2 and "positive" in res.stderr
    # a flag that would not apply is refused, not ignored
    res = _cli("--tokenizer-path", str(tmp_path))
    assert res.returncode == 2 and "--tokenizer-path goes with --engine-url" in res.stderr
    res = _cli("--engine-url", "http://127.0.0.1:9", "--tokenizer-path", str(tmp_path), "--threads", "2")
    assert res.returncode == 2 and "--threads sets the engine this command starts" in res.stderr


@pytest.mark.slow
def test_the_hinted_teacher_shows_one_sentence_replies_on_the_embedded_model(tmp_path: Path) -> None:
    """Measured before: greedy SmolLM2 answers none of the first 6 training prompts in one sentence;
    shown the user's complaint first, it does for most of them (bench/RESULTS.md, 'Teacher headroom')."""
    out = tmp_path / "headroom.json"
    res = _cli("--persona", "one_sentence", "--limit", "6", "--json", out, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (row,) = json.loads(out.read_text())
    assert row["hinted"] >= 4
    assert row["teacher_meets"] >= row["policy_meets"] + 30


def test_a_killed_run_stops_the_engine_it_started(tiny_model_path: Path) -> None:
    """SIGTERM (a scheduler's kill, `timeout`) ends the run as Ctrl-C does: the engine process is stopped,
    found by parentage while it runs and checked by PID after."""
    import os
    import signal
    import time

    from openclaw.proctree import descendants

    proc = subprocess.Popen([sys.executable, "-m", "openclaw.demo.headroom", "--model-path", str(tiny_model_path),
                             "--max-tokens", "8"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:  # the engine is up once the first persona starts
        if line.startswith("[1/"):
            break
    engines = [pid for pid in descendants(proc.pid) if b"openclaw.engines.serve" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert engines, "no engine process below the CLI"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) != 0
    deadline = time.monotonic() + 30
    while any(Path(f"/proc/{pid}").exists() for pid in engines) and time.monotonic() < deadline:
        time.sleep(0.2)  # polling the processes' exit, not synchronising on time
    for pid in engines:
        if Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)  # ours: started by the CLI above
            raise AssertionError(f"engine {pid} outlived its CLI")
