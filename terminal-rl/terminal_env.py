"""The terminal environment: reset runs the task's setup, step runs one model command in the
episode's sandbox, evaluate runs the task's tests (reward = fraction passed)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from terminal_tasks import OutputTest, TerminalTask, Test, pytest_summary

from openclaw.sandbox import ExecResult, SandboxSession
from openclaw.sandbox.command import SANDBOX_PATH
from openclaw.tracks import EpisodeEnv, SandboxStep, process_bonus

SYSTEM_PROMPT = (
    "You are an agent operating a Linux shell in the directory /workspace. "
    "Reply with exactly one shell command per turn, inside a ```bash``` code block "
    "(or <command>...</command>). You will see its output. When the task is complete, reply with "
    "<answer>done</answer>. There is no network access."
)

_BASH_BLOCK = re.compile(r"```(?:bash|sh|shell|console)?[ \t]*\n(.*?)```", re.DOTALL)
_COMMAND_TAG = re.compile(r"<command>(.*?)</command>", re.DOTALL)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


@dataclass(frozen=True)
class Action:
    kind: str  # "command" | "answer" | "invalid"
    content: str = ""


def parse_action(text: str) -> Action:
    """The first command (```bash``` block or <command> tag) or final answer in a model turn."""
    found: list[tuple[int, Action]] = []
    for pattern, kind in ((_BASH_BLOCK, "command"), (_COMMAND_TAG, "command"), (_ANSWER_TAG, "answer")):
        m = pattern.search(text)
        if m and (kind == "answer" or m.group(1).strip()):
            found.append((m.start(), Action(kind, m.group(1).strip())))
    if not found:
        return Action("invalid")
    return min(found, key=lambda x: x[0])[1]


INVALID_OBSERVATION = (
    "No command found. Reply with one command in a ```bash``` block or <command>...</command>, "
    "or <answer>done</answer> when the task is complete."
)


# A command's step score is 1 when it exited 0 in time (see README: --prm-step-coef); the final
# answer is not a command and is left out of the reward (see process_scores).
StepResult = SandboxStep[Action]


def process_scores(history: Sequence[StepResult]) -> list[float]:
    """The step scores that enter the reward: every turn but the final answer. Scoring the answer
    gave an episode that answers at once, doing nothing, the whole process bonus."""
    return [s.step_score for s in history if s.action.kind != "answer"]


# The whole environment of a test's processes (env -i drops the rest); nothing in it comes from
# the agent. HOME is the command's own fresh /tmp: with HOME=/workspace, the agent's
# ~/.local/lib/python3*/site-packages (usercustomize.py, *.pth) ran inside every python3 of a test
# and its ~/.gitconfig configured the test's git. Git also runs no fsmonitor or hook the agent
# set in its repository's config (command-line scope outranks it).
CHECK_ENV: Mapping[str, str] = {
    "PATH": SANDBOX_PATH,
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "dumb",
    "PYTHONNOUSERSITE": "1",
    "PYTHONDONTWRITEBYTECODE": "1",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_COUNT": "2",
    "GIT_CONFIG_KEY_0": "core.fsmonitor",
    "GIT_CONFIG_VALUE_0": "false",
    "GIT_CONFIG_KEY_1": "core.hooksPath",
    "GIT_CONFIG_VALUE_1": "/dev/null",
}


def check_argv(script: str, extra_env: Mapping[str, str] | None = None) -> list[str]:
    """The argv that runs a test's bash `script` with CHECK_ENV (+ extra_env) as its only environment."""
    env = {**CHECK_ENV, **(extra_env or {})}
    return ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in env.items()),
            "/bin/bash", "--noprofile", "--norc", "-c", script]


@dataclass
class EvalResult:
    passed: int
    total: int
    details: dict[str, bool] = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0


@dataclass(eq=False)
class TerminalEnv(EpisodeEnv[StepResult]):
    task: TerminalTask
    session: SandboxSession
    max_observation_chars: int = 2000
    command_timeout_s: float | None = None

    async def reset(self) -> str:
        """Run the setup script; the first observation is the task instruction."""
        self.restart()
        if self.task.setup:
            r = await self.session.run(self.task.setup)
            if r.exit_code != 0:
                raise RuntimeError(f"task {self.task.id}: setup failed ({r.exit_code}): {r.stderr[-500:]}")
        return self.task.instruction

    async def act(self, model_text: str) -> StepResult:
        action = parse_action(model_text)
        if action.kind == "answer":
            return StepResult("Episode finished.", True, action)
        if action.kind == "invalid":
            return StepResult(INVALID_OBSERVATION, False, action, step_score=0.0)
        r = await self.session.run(action.content, timeout_s=self.command_timeout_s)
        score = 1.0 if r.exit_code == 0 and not r.timed_out else 0.0
        return StepResult(r.observation(self.max_observation_chars), False, action, r, score)

    async def evaluate(self) -> EvalResult:
        """Run the tests after the episode; reward = fraction passed (README: What the reward guarantees)."""
        if self.task.style == "terminal-bench":
            return await self._evaluate_terminal_bench()
        tests_dir = self.session.stage("tests", self.task.test_files) if self.task.test_files else None
        binds = [(tests_dir, "/tests")] if tests_dir else []
        details = {name: await self._passes(test, binds) for name, test in self.task.tests.items()}
        return EvalResult(sum(details.values()), len(details), details)

    async def _check(self, script: str, binds: Sequence[tuple[str, str]],
                     env: Mapping[str, str] | None = None) -> ExecResult:
        # Its own sandbox command: a fresh pid namespace, so no process of the episode (or of an
        # earlier test) is alive in it; deny_ptrace: a program the test runs (the agent's, or a
        # git filter it configured) cannot ptrace the test or write its memory to make it pass.
        return await self.session.run(check_argv(script, env), ro_binds=binds, deny_ptrace=True)

    async def _passes(self, test: Test, binds: Sequence[tuple[str, str]]) -> bool:
        if isinstance(test, OutputTest):
            r = await self._check(test.run, binds)
            return not r.timed_out and not r.truncated and test.passes(r.exit_code, r.stdout)
        r = await self._check(test, binds)
        return r.exit_code == 0 and not r.timed_out

    async def _evaluate_terminal_bench(self) -> EvalResult:
        task = self.task
        files = dict(task.test_files, **{"run-tests.sh": task.tests["run-tests.sh"]})
        tests_dir = self.session.stage("tests", files)
        where = self.session.bound_path(tests_dir, "/tests")
        r = await self._check(f"bash {shlex.quote(where)}/run-tests.sh", [(tests_dir, "/tests")],
                              {"TEST_DIR": where})
        summary = pytest_summary(r.stdout)
        if summary is None:
            ok = r.exit_code == 0 and not r.timed_out
            return EvalResult(int(ok), 1, {"run-tests.sh": ok})
        passed, total = summary
        return EvalResult(passed, total, {"run-tests.sh": passed == total})


def episode_reward(evaluation: EvalResult, step_scores: list[float], prm_step_coef: float) -> float:
    """Fraction of tests passed, plus prm_step_coef * mean per-step process score (0 by default)."""
    return evaluation.fraction + process_bonus(step_scores, prm_step_coef)
