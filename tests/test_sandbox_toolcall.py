"""toolcall-rl: tools config, safe calculator, sandboxed python tool, tool-call episodes and
rewards, GSM8K loading, and the generate function against the real embedded engine."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import shutil
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module
from slime.utils.types import Sample

from openclaw.sandbox import SandboxConfig, SandboxPool

# toolcall-rl is a plugin folder: its modules load the way the trainer loads them (by file path;
# the loader also makes the plugin's sibling modules importable by name).
toolcall_generate = load_plugin_module("toolcall-rl/toolcall_generate.py")
ToolCallEnv = importlib.import_module("toolcall_env").ToolCallEnv
_tasks, _tools = importlib.import_module("toolcall_tasks"), importlib.import_module("toolcall_tools")
MathTask, extract_answer, generate_train_set = _tasks.MathTask, _tasks.extract_answer, _tasks.generate_train_set
is_correct, load_gsm8k, normalize_number = _tasks.is_correct, _tasks.load_gsm8k, _tasks.normalize_number
CalculatorError, calculate, call_tool = _tools.CalculatorError, _tools.calculate, _tools.call_tool
load_tools_config = _tools.load_tools_config
engine_url = load_plugin_module(str(Path(__file__).resolve().parent / "track_helpers.py")).engine_url

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
TOOLS = load_tools_config()


def test_tools_config_is_openai_schema_and_validated(tmp_path):
    assert {t["function"]["name"] for t in TOOLS} == {"python", "calculator"}
    assert all(t["type"] == "function" and t["function"]["parameters"]["type"] == "object" for t in TOOLS)
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps([{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}]))
    with pytest.raises(ValueError, match="not implemented"):
        load_tools_config(bad)
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_tools_config(bad)
    with pytest.raises(FileNotFoundError, match="TOOLS_CONFIG"):
        load_tools_config(tmp_path / "missing.json")


def test_calculator_is_safe_and_correct():
    assert calculate("(12 * 4) + 7 / 2") == 51.5
    assert calculate("2^10 - sqrt(16)") == 1020
    assert calculate("max(3, 9, 4) // 2") == 4
    assert calculate("-3 ** 2") == -9
    for evil in ("__import__('os').system('id')", "().__class__", "open('/etc/passwd')", "[1, 2]",
                 "lambda: 1", "9 ** 9 ** 9", "10 ** 5000", "x + 1", "1 / 0", "'a' * 3", "True + 1"):
        with pytest.raises(CalculatorError):
            calculate(evil)


def test_answers_and_grading():
    assert extract_answer("I think <answer>$1,234.50</answer>") == "1234.5"
    assert extract_answer("so \\boxed{36}") == "36"
    assert extract_answer("#### 72") == "72"
    assert extract_answer("the answer is 5") is None  # a final-answer form is required
    assert normalize_number("3/4") == "0.75" and normalize_number("36.0") == "36"
    assert is_correct("36", "36.00") and not is_correct("35", "36") and not is_correct(None, "1")


def test_gsm8k_and_train_set():
    evals = load_gsm8k(limit=3)
    assert len(evals) == 3 and evals[0].answer == "36"
    assert len(load_gsm8k()) == 1319
    train = generate_train_set(40, seed=3)
    assert train == generate_train_set(40, seed=3)  # seeded: reproducible
    assert len({t.question for t in train}) == 40
    assert all(normalize_number(t.answer) == t.answer for t in train)


@needs_bwrap
async def test_python_tool_runs_sandboxed(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("hunter2")
    pool = SandboxPool(SandboxConfig(), size=1)
    enabled = {"python", "calculator"}
    async with pool.session() as sb:
        ok = await call_tool("python", json.dumps({"code": "print(sum(range(101)))"}), sb, enabled)
        assert ok.ok and ok.content == "5050"
        leak = await call_tool("python", json.dumps({"code": f"print(open({str(secret)!r}).read())"}), sb, enabled)
        assert not leak.ok and "hunter2" not in leak.content and "FileNotFoundError" in leak.content
        net = await call_tool("python", json.dumps(
            {"code": "import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)"}), sb, enabled)
        assert not net.ok and ("OSError" in net.content or "unreachable" in net.content)
        slow = await call_tool("python", json.dumps({"code": "while True: pass"}), sb, enabled, python_timeout_s=1)
        assert not slow.ok and "timed out" in slow.content
    bad = await call_tool("shell", "{}", None, enabled)
    assert not bad.ok and "unknown tool" in bad.content
    assert (await call_tool("calculator", "not json", None, enabled)).content.startswith("error")


@needs_bwrap
async def test_episode_known_good_and_bad_sequences():
    task = MathTask("What is 17 * 23 + 4?", "395")
    pool = SandboxPool(SandboxConfig(), size=1)
    async with pool.session() as sb:
        env = ToolCallEnv(task, sb, TOOLS, max_steps=4)
        assert env.reset() == task.question
        step = await env.step('<tool_call>{"name": "calculator", "arguments": {"expression": "17*23+4"}}</tool_call>')
        assert not step.done and step.outcomes[0].ok
        assert '"content": "395"' in step.observation and step.observation.startswith("<tool_response>")
        step = await env.step("The result is <answer>395</answer>")
        assert step.done and step.answer == "395" and step.observation is None
        assert env.reward(0.0) == 1.0 and env.reward(0.1) == pytest.approx(1.1)

        # Wrong answer after a successful tool call: no reward and no bonus.
        env = ToolCallEnv(task, sb, TOOLS, max_steps=4)
        env.reset()
        await env.step('<tool_call>{"name": "python", "arguments": {"code": "print(17*23)"}}</tool_call>')
        await env.step("<answer>391</answer>")
        assert env.reward(0.1) == 0.0

        # Correct without tools: full reward, no bonus. Tool spam until MAX_STEPS: zero.
        env = ToolCallEnv(task, sb, TOOLS, max_steps=2)
        env.reset()
        await env.step("<answer>395</answer>")
        assert env.reward(0.1) == 1.0
        env = ToolCallEnv(task, sb, TOOLS, max_steps=2)
        env.reset()
        call = '<tool_call>{"name": "calculator", "arguments": {"expression": "1+1"}}</tool_call>'
        assert not (await env.step(call)).done
        assert (await env.step(call)).done
        assert env.reward(0.1) == 0.0
        with pytest.raises(RuntimeError):
            await env.step(call)


@needs_bwrap
async def test_generate_against_real_engine(tiny_model_path, engine_url):

    args = argparse.Namespace(hf_checkpoint=str(tiny_model_path), rollout_engine_urls=[engine_url], tools_config=None,
                              max_steps=3, parallel_envs=2, tool_use_bonus=0.1, sandbox="bwrap",
                              python_tool_timeout=5.0, rollout_max_context_len=2048)
    evals = load_gsm8k(limit=1)
    sample = Sample(index=0, prompt=evals[0].question, label=evals[0].answer)
    out = await toolcall_generate.generate(args, sample, {"max_new_tokens": 16, "temperature": 1.0,
                                                          "no_stop_trim": True})
    out.validate()
    assert out.response_length == len(out.loss_mask) == len(out.rollout_log_probs) > 0
    assert all(math.isfinite(x) and x <= 0 for x in out.rollout_log_probs)
    assert out.metadata["answer_true"] == "36"
    # A random model makes no tool call: one model turn, fully trainable, wrong answer.
    assert out.loss_mask == [1] * out.response_length
    assert out.reward == 0.0 and out.metadata["tool_calls"] == 0
    assert "<tools>" in out.prompt and "calculator" in out.prompt
    with pytest.raises(ValueError, match="needs a question"):
        await toolcall_generate.generate(args, Sample(index=1), {"max_new_tokens": 4})


def test_observation_format_from_real_tokenizer(tiny_model_path):
    template_tool_content = toolcall_generate.template_tool_content

    from openclaw.sandbox.episode import load_tokenizer
    from openclaw.sandbox.trajectory import ObservationFormat

    tok = load_tokenizer(str(tiny_model_path))
    fmt = ObservationFormat.from_tokenizer(tok, role="tool")
    assert fmt.prefix == "<|im_end|>\n<|im_start|>tool\n" and fmt.suffix == "<|im_end|>\n<|im_start|>assistant\n"
    assert fmt.closes([5, tok.eos_token_id]) and not fmt.closes([5, 6]) and not fmt.closes([])
    assert fmt.text("R", turn_closed=True) == "\n<|im_start|>tool\nR<|im_end|>\n<|im_start|>assistant\n"
    obs = '<tool_response>\n{"name": "calculator", "content": "4"}\n</tool_response>'
    assert template_tool_content(obs, fmt) == obs  # ChatML has no tool tags of its own: keep ours
    qwen_like = ObservationFormat("<|im_end|>\n<|im_start|>user\n<tool_response>\n",
                                  "\n</tool_response><|im_end|>\n<|im_start|>assistant\n", "<|im_end|>", 2)
    assert template_tool_content(obs, qwen_like) == '{"name": "calculator", "content": "4"}'
