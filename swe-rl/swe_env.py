"""The SWE environment: an episode = a repository at its base state + an issue text.

The agent acts through four tools, each run inside the episode's sandbox: `bash` (a shell
command in /workspace), `view` (a file with line numbers), `str_replace` (edit by exact string
replacement, the old string must occur exactly once) and `submit`. The episode's patch is the
diff of the work tree against the pristine base; the repository's own tests decide the reward:
1 when every FAIL_TO_PASS test passes and no PASS_TO_PASS test breaks, else 0.

What is scored is the recorded patch, applied to a fresh copy of the base: a patch refused by
`swe_guard` (test infrastructure, shadowing modules, reaching into the runner) scores 0 without
running, and a run in which the report plugin saw tampering scores 0; the reason is kept.
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from swe_guard import patch_violations
from swe_instances import Instance
from swe_tests import TestRun
from swe_workspace import PatchTooLarge, clean_tree_with_patch, current_patch, load_base, run_instance_tests

from openclaw.sandbox import ExecResult, SandboxSession
from openclaw.tracks import EpisodeEnv, SandboxStep, process_bonus

SYSTEM_PROMPT = """You are a software engineer fixing a bug in the Python repository at /workspace.
Call one tool per turn, as <tool_call>{"name": ..., "arguments": {...}}</tool_call>:
- bash: {"command": "..."} runs a shell command in /workspace (no network; python3 is available)
- view: {"path": "...", "start_line": 1, "end_line": 80} shows a file with line numbers
- str_replace: {"path": "...", "old_str": "...", "new_str": "..."} replaces the one exact occurrence of old_str
- submit: {} ends the episode; your changes to the repository are the fix.
A ```bash``` block is also accepted as a bash call. Fix the library code, not the tests."""

_TOOL_CALL = re.compile(r"<tool_call>\s*(\{.*?\})\s*</tool_call>", re.DOTALL)
_BASH_BLOCK = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)```", re.DOTALL)
TOOLS = ("bash", "view", "str_replace", "submit")

INVALID_OBSERVATION = ('No tool call found. Reply with one <tool_call>{"name": "bash", "arguments": '
                       '{"command": "ls"}}</tool_call> (tools: bash, view, str_replace, submit).')

# Runs inside the sandbox: exact, unique string replacement (arguments arrive base64-encoded JSON).
_EDIT_SCRIPT = r"""
import base64, json, sys
a = json.loads(base64.b64decode(sys.argv[1]))
try:
    text = open(a["path"], encoding="utf-8").read()
except OSError as e:
    sys.exit(f"cannot read {a['path']}: {e.strerror}")
n = text.count(a["old_str"])
if n != 1:
    sys.exit(f"old_str occurs {n} times in {a['path']}; it must occur exactly once")
open(a["path"], "w", encoding="utf-8").write(text.replace(a["old_str"], a["new_str"], 1))
print(f"edited {a['path']}")
"""


@dataclass(frozen=True)
class Action:
    tool: str  # bash | view | str_replace | submit | invalid
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def parse_action(text: str) -> Action:
    """The first tool call (or ```bash``` block) in a model turn."""
    found: list[tuple[int, Action]] = []
    m = _TOOL_CALL.search(text)
    if m:
        try:
            call = json.loads(m.group(1))
            name, arguments = call.get("name"), call.get("arguments") or {}
            if name not in TOOLS or not isinstance(arguments, dict):
                action = Action("invalid", error=f"unknown tool {name!r}; tools: {', '.join(TOOLS)}")
            else:
                action = Action(name, arguments)
        except (json.JSONDecodeError, AttributeError) as e:
            action = Action("invalid", error=f"tool call is not valid JSON: {e}")
        found.append((m.start(), action))
    b = _BASH_BLOCK.search(text)
    if b and b.group(1).strip():
        found.append((b.start(), Action("bash", {"command": b.group(1).strip()})))
    if not found:
        return Action("invalid", error=INVALID_OBSERVATION)
    return min(found, key=lambda x: x[0])[1]


# A step's score is 1 for a tool call that succeeded, 0 otherwise (submitting counts as success).
StepResult = SandboxStep[Action]


@dataclass
class EvalResult:
    resolved: bool
    patch: str
    tests: dict[str, str]  # test id -> outcome, FAIL_TO_PASS and PASS_TO_PASS
    fail_to_pass_passed: int
    pass_to_pass_passed: int
    test_seconds: float
    timed_out: bool
    refused: list[str] = field(default_factory=list)  # why the patch scored 0 whatever the tests said

    @property
    def reward(self) -> float:
        return 1.0 if self.resolved else 0.0  # a refused patch is never resolved


def score(instance: Instance, run: TestRun, patch: str) -> EvalResult:
    f2p = sum(run.passed(t) for t in instance.FAIL_TO_PASS)
    p2p = sum(run.passed(t) for t in instance.PASS_TO_PASS)
    refused = [f"the test run was tampered with: {t}" for t in run.tamper]
    resolved = (f2p == len(instance.FAIL_TO_PASS) and p2p == len(instance.PASS_TO_PASS) and not run.timed_out
                and not refused)
    return EvalResult(resolved, patch, dict(run.outcomes), f2p, p2p, run.duration_s, run.timed_out, refused)


def refused_result(instance: Instance, patch: str, reasons: list[str]) -> EvalResult:
    return EvalResult(False, patch, {t: "not run" for t in instance.test_ids}, 0, 0, 0.0, False, reasons)


@dataclass(eq=False)
class SweEnv(EpisodeEnv[StepResult]):
    instance: Instance
    session: SandboxSession
    base_dir: Path
    runtime_dir: Path
    command_timeout_s: float = 30.0
    test_timeout_s: float = 120.0
    max_observation_chars: int = 2000
    deps_dir: Path | None = None
    setup_seconds: float = field(default=0.0, init=False)

    async def reset(self) -> str:
        """Copy the base repository into the episode's work dir; the first observation is the issue."""
        self.restart()
        self.setup_seconds = await load_base(self.session, self.base_dir)
        return self.instance.problem_statement

    async def _run(self, command: str) -> ExecResult:
        return await self.session.run(command, timeout_s=self.command_timeout_s)

    async def _use_tool(self, action: Action) -> tuple[str, ExecResult | None, float]:
        args = action.arguments
        if action.tool == "bash":
            command = str(args.get("command", "")).strip()
            if not command:
                return "bash needs a non-empty \"command\".", None, 0.0
            r = await self._run(command)
            return r.observation(self.max_observation_chars), r, float(r.exit_code == 0 and not r.timed_out)
        if action.tool == "view":
            path = str(args.get("path", ""))
            try:
                start = max(1, int(args.get("start_line", 1)))
                end = int(args.get("end_line", start + 79))
            except (TypeError, ValueError):
                return "start_line and end_line must be integers.", None, 0.0
            q = shlex.quote(path)
            r = await self._run(f"if [ -d {q} ]; then ls -la {q}; else cat -n -- {q} | sed -n '{start},{end}p'; fi")
            return r.observation(self.max_observation_chars), r, float(r.exit_code == 0 and bool(r.stdout))
        if action.tool == "str_replace":
            missing = [k for k in ("path", "old_str", "new_str") if not isinstance(args.get(k), str)]
            if missing:
                return f"str_replace needs string arguments {missing}.", None, 0.0
            payload = base64.b64encode(json.dumps({k: args[k] for k in ("path", "old_str", "new_str")}).encode())
            r = await self._run(f"python3 -c {shlex.quote(_EDIT_SCRIPT)} {payload.decode()}")
            return r.observation(self.max_observation_chars), r, float(r.exit_code == 0)
        return action.error or INVALID_OBSERVATION, None, 0.0

    async def act(self, model_text: str) -> StepResult:
        action = parse_action(model_text)
        if action.tool == "submit":
            return StepResult("Submitted.", True, action, step_score=1.0)
        observation, r, step_score = await self._use_tool(action)
        return StepResult(observation, False, action, r, step_score)

    async def evaluate(self) -> EvalResult:
        """The recorded patch (the work tree against the pristine base), scored on a fresh copy of the base."""
        try:
            patch = await current_patch(self.session, self.base_dir)
        except PatchTooLarge as e:
            return refused_result(self.instance, "", [str(e)])
        return await score_patch(self.instance, patch, self.session, self.base_dir, self.runtime_dir,
                                 self.test_timeout_s, self.deps_dir)


def episode_reward(evaluation: EvalResult, step_scores: list[float], prm_step_coef: float) -> float:
    """1 if resolved else 0, plus prm_step_coef * mean per-step process score (0 by default).
    A refused patch earns nothing, not even the process bonus."""
    if evaluation.refused:
        return 0.0
    return evaluation.reward + process_bonus(step_scores, prm_step_coef)


async def score_patch(instance: Instance, patch: str, session: SandboxSession, base_dir: Path, runtime_dir: Path,
                      test_timeout_s: float = 120.0, deps_dir: Path | None = None) -> EvalResult:
    """SWE-bench's harness step: `patch` checked by swe_guard, applied to a fresh copy of the base
    repository in `session`'s work dir (whatever was there is deleted), then the instance's tests.
    A refused patch, or one that does not apply, scores 0 with the reason in `refused`."""
    reasons = patch_violations(patch, base_dir)
    if reasons:
        return refused_result(instance, patch, reasons)
    if not await clean_tree_with_patch(session, base_dir, patch, instance.test_files, instance.test_patch):
        return refused_result(instance, patch, ["the patch does not apply to the base repository"])
    run = await run_instance_tests(session, runtime_dir, instance.test_ids, instance.python_path, test_timeout_s,
                                   deps_dir)
    return score(instance, run, patch)
