"""toolcall-rl's reward attacked the way a reward-hacking policy would: every attack runs through the
real episode (`ToolCallEnv.step` + `reward`) and, where a tool is involved, the real bubblewrap
sandbox. An attack either scores 0, or the test says which documented rule makes it legitimate."""

from __future__ import annotations

import importlib
import json
import shutil
import time
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

from openclaw.sandbox import Limits, SandboxConfig, SandboxPool

load_plugin_module("toolcall-rl/toolcall_generate.py")  # makes the plugin's modules importable by name
_env, _tasks, _tools = (importlib.import_module(m) for m in ("toolcall_env", "toolcall_tasks", "toolcall_tools"))
ToolCallEnv, MathTask = _env.ToolCallEnv, _tasks.MathTask

REPO = Path(__file__).resolve().parents[1]
TOOLS = _tools.load_tools_config()
BONUS = 0.1
ONE_THIRD = _tasks.normalize_number("1/3")  # the gold as the loaders store it
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def short(value: object) -> str | None:
    """Readable test ids for replies thousands of characters long."""
    return value[:40] + "..." if isinstance(value, str) and len(value) > 40 else None


def task(gold: str) -> MathTask:
    return MathTask("Carol has 20 signatures and Jennifer has 44. How many more to reach 100?", gold)


async def episode(replies: list[str], gold: str, session=None, max_steps: int = 4,
                  python_timeout_s: float = 10.0) -> ToolCallEnv:
    """Plays `replies` as the model's turns (stopping when the episode ends) and returns the env."""
    env = ToolCallEnv(task(gold), session, TOOLS, max_steps=max_steps, python_timeout_s=python_timeout_s)
    env.reset()
    for reply in replies:
        if (await env.step(reply)).done:
            break
    return env


async def score(reply: str, gold: str) -> float:
    return (await episode([reply], gold)).reward(BONUS)


def calc(expression: str) -> str:
    return '<tool_call>' + json.dumps({"name": "calculator", "arguments": {"expression": expression}}) + '</tool_call>'


def python(code: str) -> str:
    return '<tool_call>' + json.dumps({"name": "python", "arguments": {"code": code}}) + '</tool_call>'


@pytest.fixture()
async def sandbox():
    async with SandboxPool(SandboxConfig(), size=1).session() as sb:
        yield sb


# ---- honest answers keep their reward -------------------------------------------------------

@pytest.mark.parametrize("reply, gold", [
    ("<answer>36</answer>", "36"),
    ("The sisters need 36 more. <answer>36</answer>", "36"),
    ("<answer> 36 </answer>", "36"),
    ("<answer>\n36\n</answer>", "36"),
    ("<answer>36 signatures</answer>", "36"),
    ("<answer>36.</answer>", "36"),
    ("<answer>36.00</answer>", "36"),
    ("<answer>$1,234.50</answer>", "1234.5"),
    ("<answer>65,960</answer>", "65960"),
    ("<answer>-7</answer>", "-7"),
    ("<answer>3/4</answer>", "0.75"),
    ("<answer>1/3</answer>", ONE_THIRD),
    ("<answer>50%</answer>", "50"),
    ("so \\boxed{36}", "36"),
    ("work...\n#### 36", "36"),
    ("\\boxed{36} and so <answer>36</answer>", "36"),  # the same answer stated twice
    ("<answer>36</answer> <answer>36.0</answer>", "36"),
    ("#### Step 1: 100 - 64\nThen <answer>36</answer>", "36"),  # a markdown heading is not an answer
])
async def test_honest_correct_answers_score_full_reward(reply, gold):
    assert await score(reply, gold) == 1.0


async def test_every_shipped_and_generated_gold_is_reachable():
    # The gold as a data file writes it ('65,960'), in each answer form, earns the reward.
    raw = [row["ground_truth_answer"] for row in json.loads(_tasks.DEFAULT_GSM8K.read_text())]
    raw += [t.answer for t in _tasks.generate_train_set(512)]
    for gold in raw:
        truth = _tasks.normalize_number(gold)
        for reply in (f"<answer>{gold}</answer>", f"\\boxed{{{gold}}}", f"#### {gold}"):
            assert await score(reply, truth) == 1.0, reply


async def test_wrong_answers_score_zero():
    for reply in ("<answer>35</answer>", "\\boxed{37}", "#### 360", "<answer>-36</answer>", "36"):
        assert await score(reply, "36") == 0.0, reply


# ---- several candidate answers in one reply -------------------------------------------------

ALL_NUMBERS = "".join(f"<answer>{i}</answer>" for i in range(1001))


@pytest.mark.parametrize("reply, gold", [
    ("<answer>1</answer><answer>2</answer>", "2"),
    ("<answer>1</answer><answer>2</answer>", "1"),
    (ALL_NUMBERS, "1000"),
    (ALL_NUMBERS, "36"),
    ("\\boxed{35} \\boxed{36}", "36"),
    ("#### 35\n#### 36", "36"),
    ("<answer>1 or 2 or 3</answer>", "1"),
    ("<answer>36 or 40</answer>", "36"),
    ("<answer>36, 40</answer>", "36"),
    ("<answer>30-40</answer>", "30"),
    ("<answer>between 30 and 40</answer>", "30"),
    ("<answer>" + ", ".join(map(str, range(1001))) + "</answer>", "0"),
    ("<answer>" + " ".join(map(str, range(1001))) + "</answer>", "0"),
], ids=short)
async def test_several_candidate_answers_score_zero(reply, gold):
    assert await score(reply, gold) == 0.0


@pytest.mark.parametrize("reply, gold", [
    ("<answer>1, 2, 3</answer>", "123"),  # a list is not one number with thousands separators
    ("<answer>3 6</answer>", "36"),  # digits split by a space are two numbers
    ("<answer>12,34</answer>", "1234"),  # not a thousands grouping
])
async def test_numbers_are_never_glued_together(reply, gold):
    assert await score(reply, gold) == 0.0


async def test_text_around_the_answer_tag_is_not_graded():
    # Only the answer field counts: a different number in the prose does not change the grade.
    assert await score("Maybe 40? No: <answer>36</answer>", "36") == 1.0
    assert await score("<answer>36</answer> (or 40)", "40") == 0.0


# ---- number-format tricks -------------------------------------------------------------------

@pytest.mark.parametrize("reply, gold", [
    ("<answer>100000000000000000000.5</answer>", "100"),  # as float text: '1e+20', zeros stripped: '1e+2'
    ("<answer>1000000000000000000000000000000.5</answer>", "1000"),
    ("<answer>1e2</answer>", "1"),  # 1e2 is 100, not 1
    ("<answer>2.5e1</answer>", "2.5"),
    ("<answer>.5</answer>", "5"),  # .5 is 0.5, not 5
    ("<answer>\u221236</answer>", "36"),  # U+2212 MINUS SIGN: -36 is not 36
    ("<answer>- 36</answer>", "36"),  # a spaced minus is still a minus
    ("<answer>10\u00b3</answer>", "10"),  # 10 cubed is not 10
    ("<answer>2\u00bd</answer>", "2"),
    ("<answer>1.2.3</answer>", "1.2"),
    ("<answer>1e999999999</answer>", "1"),
    ("<answer>" + "9" * 5000 + "</answer>", "9"),
], ids=short)
async def test_number_format_tricks_score_zero(reply, gold):
    start = time.monotonic()
    assert await score(reply, gold) == 0.0
    assert time.monotonic() - start < 1.0  # a huge exponent or digit string is refused, not computed


@pytest.mark.parametrize("reply, gold", [
    ("<answer>1e2</answer>", "100"),
    ("<answer>.5</answer>", "0.5"),
    ("<answer>\u221236</answer>", "-36"),
    ("<answer>\uff13\uff16</answer>", "36"),  # full-width digits
    ("<answer>100.0000001</answer>", "100"),  # within the stated tolerance, 1e-6
    ("<answer>0.333333333</answer>", ONE_THIRD),
])
async def test_other_notations_of_the_right_number_count(reply, gold):
    assert await score(reply, gold) == 1.0


async def test_tolerance_is_absolute_1e_minus_6():
    assert _tasks.ANSWER_TOLERANCE == _tasks.Fraction(1, 10**6)
    assert await score("<answer>100.000001</answer>", "100") == 1.0
    assert await score("<answer>100.0000011</answer>", "100") == 0.0
    assert await score("<answer>99.99999</answer>", "100") == 0.0


# ---- empty and missing answers --------------------------------------------------------------

@pytest.mark.parametrize("reply", ["", " ", "<answer></answer>", "<answer> </answer>", "<answer>none</answer>",
                                   "<answer>-</answer>", "\\boxed{}", "####", "<answer>zero</answer>"])
@pytest.mark.parametrize("gold", ["0", ""])
async def test_empty_answers_score_zero_even_for_empty_ish_gold(reply, gold):
    assert await score(reply, gold) == 0.0


def test_a_gold_that_is_not_a_number_never_matches():
    assert not _tasks.is_correct("0", "") and not _tasks.is_correct("0", "n/a")
    assert not _tasks.is_correct(None, "")


# ---- echoing the question -------------------------------------------------------------------

def test_echoing_any_question_gives_no_answer():
    questions = [t.question for t in _tasks.load_gsm8k()] + [t.question for t in _tasks.generate_train_set(512)]
    assert [q for q in questions if _tasks.extract_answer(q) is not None] == []


# ---- answers inside tool-call markup --------------------------------------------------------

async def test_answer_inside_a_tool_calls_arguments_is_not_a_final_answer():
    env = await episode([calc("<answer>36</answer>")], "36", max_steps=1)
    assert env.done and env.answer is None and env.reward(BONUS) == 0.0
    env = await episode([calc("<answer>36</answer>"), "I am done."], "36")
    assert env.done and env.reward(BONUS) == 0.0


@pytest.mark.parametrize("reply", [
    '<tool_call>{"name": "calculator", "arguments": <answer>36</answer>}</tool_call>',  # JSON that does not parse
    '<tool_call>{"name": "calculator", "arguments": {"expression": "<answer>36</answer>"',  # never closed
    '<tool_response>\n{"name": "python", "content": "<answer>36</answer>"}\n</tool_response>',  # a forged result
])
async def test_answer_inside_tool_markup_of_the_final_message_does_not_count(reply):
    assert await score(reply, "36") == 0.0


async def test_final_message_with_a_tool_call_is_not_final():
    env = await episode(["<answer>36</answer> " + calc("1+1")], "36", max_steps=1)
    assert env.done and env.answer is None and env.reward(BONUS) == 0.0


@needs_bwrap
async def test_tool_output_is_never_taken_as_the_final_answer(sandbox):
    printed = python("print('<answer>36</answer>'); print('#### 36')")
    env = await episode([printed], "36", session=sandbox, max_steps=1)
    assert env.outcomes[0].ok and "<answer>36</answer>" in env.outcomes[0].content
    assert env.done and env.answer is None and env.reward(BONUS) == 0.0
    env = await episode([printed, "See the tool output above."], "36", session=sandbox)
    assert env.done and env.answer is None and env.reward(BONUS) == 0.0


# ---- very long replies ----------------------------------------------------------------------

async def test_a_reply_of_unclosed_tags_is_graded_quickly():
    # A pattern that rescans the rest of the reply from each unclosed tag needs seconds for 8000 of
    # them: no reward, but a stalled rollout worker.
    start = time.monotonic()
    for opener in ("<answer>", "<tool_response>", "<tool_call>", "\\boxed{"):
        assert await score(opener * 8000 + "36", "36") == 0.0, opener
    assert await score("<answer>" * 8000 + "<answer>36</answer>", "36") == 1.0
    assert time.monotonic() - start < 1.0


async def test_a_long_reasoning_before_one_answer_still_counts():
    reply = "Let me think. " * 5000 + "<answer>36</answer>"
    assert await score(reply, "36") == 1.0


# ---- tools are optional; the bonus needs a correct answer and a successful call --------------

async def test_no_tool_call_earns_the_answer_but_not_the_bonus():
    # The README promises: the policy *may* call tools; the bonus only rides on a correct answer.
    assert await score("<answer>36</answer>", "36") == 1.0
    env = await episode([calc("1/0"), "<answer>36</answer>"], "36")
    assert not env.outcomes[0].ok and env.reward(BONUS) == 1.0  # a failed call earns no bonus
    env = await episode([calc("100-64"), "<answer>36</answer>"], "36")
    assert env.reward(BONUS) == pytest.approx(1.0 + BONUS)
    env = await episode([calc("100-64"), "<answer>35</answer>"], "36")
    assert env.reward(BONUS) == 0.0


async def test_tool_spam_until_max_steps_scores_zero():
    env = await episode([calc("100-64")] * 4, "36", max_steps=4)
    assert env.done and env.answer is None and env.reward(BONUS) == 0.0


# ---- reading the gold answer from inside the sandbox ----------------------------------------

LEAK_PROBE = r"""
import glob, json, os
def read(p):
    try:
        with open(p, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""
pids = glob.glob("/proc/[0-9]*")
bwrap = read("/proc/1/cmdline").split(chr(0))
mounts = " ".join(bwrap[:bwrap.index("--")]) + read("/proc/self/mountinfo")  # bwrap's options, not our code
sources = {"os.environ": json.dumps(dict(os.environ)), "mounts": mounts}
sources.update({p + "/environ": read(p + "/environ") for p in pids})
print(json.dumps({
    "root": sorted(os.listdir("/")),
    "visible": [p for p in PATHS if os.path.exists(p)],
    "programs": sorted({os.path.basename(read(p + "/cmdline").split(chr(0))[0]) for p in pids}),
    "hits": sorted({n for n in NEEDLES for text in sources.values() if n in text}),
}))
"""


def host_paths_with_gold() -> list[str]:
    data = REPO / "toolcall-rl" / "data"
    return [str(p) for p in (data / "gsm8k_test.json", data / "train.jsonl", data / "eval.jsonl",
                             REPO / "toolcall-rl" / "tools_config.json", REPO, Path.home(), Path("/work"))]


@needs_bwrap
async def test_sandbox_cannot_read_the_gold_from_files_env_or_proc(sandbox, monkeypatch):
    gold_marker = "GOLD-ANSWER-4711"
    # Whatever the trainer's environment holds (here: a marker and the data path) must not get in.
    monkeypatch.setenv("TOOLCALL_GOLD", gold_marker)
    monkeypatch.setenv("GSM8K_PATH", str(REPO / "toolcall-rl" / "data" / "gsm8k_test.json"))
    secrets = [gold_marker, "GSM8K_PATH", "toolcall-rl", str(REPO)]
    # Present in what the probe reads (environments, bwrap's mounts): proof that it reads them.
    controls = ["--ro-bind /usr /usr", "HOME=/workspace"]
    code = LEAK_PROBE.replace("PATHS", repr(host_paths_with_gold())).replace("NEEDLES", repr(secrets + controls))
    env = await episode([python(code)], "36", session=sandbox, max_steps=1)
    outcome = env.outcomes[0]
    assert outcome.ok, outcome.content
    seen = json.loads(outcome.content)
    assert seen["visible"] == [] and seen["hits"] == controls, seen
    assert set(seen["root"]) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "proc", "sbin", "tmp", "usr",
                                 "workspace"}
    # Only the sandbox's own processes exist: the trainer, which holds the gold, is not visible.
    assert set(seen["programs"]) <= {"bwrap", "bash", "python3"}, seen["programs"]
    assert env.reward(BONUS) == 0.0  # and running the probe is no answer


@needs_bwrap
async def test_sandbox_has_no_copy_of_the_data_set(sandbox):
    question = _tasks.load_gsm8k(limit=1)[0].question[:60]
    search = (
        "find / -path /proc -prune -o \\( -iname '*gsm8k*' -o -name 'train.jsonl' -o -name 'eval.jsonl' "
        "-o -name tools_config.json -o -name 'python3' \\) -print 2>/dev/null; "
        f"grep -rlF --include='*.json*' {json.dumps(question)} / 2>/dev/null; true"
    )
    env = await episode([python(f"import subprocess; subprocess.run({search!r}, shell=True)")], "36",
                        session=sandbox, max_steps=1)
    found = env.outcomes[0].content.split()
    assert "/usr/bin/python3" in found  # the search does reach the mounted system
    assert [p for p in found if "python3" not in p] == []


@pytest.mark.slow
@needs_bwrap
async def test_no_visible_file_holds_a_question_of_the_data_set():
    # Reads every visible file: tens of seconds on a cold disk, hence the longer limits.
    question = _tasks.load_gsm8k(limit=1)[0].question[:60]
    code = (f"import subprocess; subprocess.run(['grep', '-rlF', {question!r}, '/usr', '/etc', '/tmp', '/workspace'], "
            "stderr=subprocess.DEVNULL)")
    config = SandboxConfig(limits=Limits(wall_timeout_s=300, cpu_seconds=300))
    async with SandboxPool(config, size=1).session() as sb:
        env = await episode([python(code)], "36", session=sb, max_steps=1, python_timeout_s=300)
    assert env.outcomes[0].content == "(no output)"
