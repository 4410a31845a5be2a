"""The terminal environment: reset runs the task's setup, step runs one model command in the
episode's sandbox, evaluate runs the task's tests (reward = fraction passed)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from terminal_tasks import TerminalTask, pytest_summary

from openclaw.sandbox import ExecResult, SandboxSession

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


@dataclass
class StepResult:
    observation: str
    done: bool
    action: Action
    exec_result: ExecResult | None = None
    step_score: float = 0.0  # the rule-based process score of this step (see README: --prm-step-coef)


@dataclass
class EvalResult:
    passed: int
    total: int
    details: dict[str, bool] = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0


class TerminalEnv:
    def __init__(self, task: TerminalTask, session: SandboxSession, max_steps: int = 20,
                 max_observation_chars: int = 2000, command_timeout_s: float | None = None) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.task = task
        self.session = session
        self.max_steps = max_steps
        self.max_observation_chars = max_observation_chars
        self.command_timeout_s = command_timeout_s
        self.steps = 0
        self.done = False
        self.history: list[StepResult] = []

    async def reset(self) -> str:
        """Run the setup script; the first observation is the task instruction."""
        self.steps, self.done, self.history = 0, False, []
        if self.task.setup:
            r = await self.session.run(self.task.setup)
            if r.exit_code != 0:
                raise RuntimeError(f"task {self.task.id}: setup failed ({r.exit_code}): {r.stderr[-500:]}")
        return self.task.instruction

    async def step(self, model_text: str) -> StepResult:
        if self.done:
            raise RuntimeError("step() after the episode ended; call reset()")
        self.steps += 1
        action = parse_action(model_text)
        if action.kind == "answer":
            result = StepResult("Episode finished.", True, action, step_score=1.0)
        elif action.kind == "invalid":
            result = StepResult(INVALID_OBSERVATION, False, action, step_score=0.0)
        else:
            r = await self.session.run(action.content, timeout_s=self.command_timeout_s)
            score = 1.0 if r.exit_code == 0 and not r.timed_out else 0.0
            result = StepResult(r.observation(self.max_observation_chars), False, action, r, score)
        if self.steps >= self.max_steps:
            result.done = True
        self.done = result.done
        self.history.append(result)
        return result

    async def evaluate(self) -> EvalResult:
        """Run the tests (read-only at /tests) after the episode; reward = fraction passed."""
        task = self.task
        if task.style == "terminal-bench":
            files = dict(task.test_files, **{"run-tests.sh": task.tests["run-tests.sh"]})
            tests_dir = self.session.stage("tests", files)
            where = shlex.quote(self.session.bound_path(tests_dir, "/tests"))
            r = await self.session.run(
                f"TEST_DIR={where} bash {where}/run-tests.sh", ro_binds=[(tests_dir, "/tests")]
            )
            summary = pytest_summary(r.stdout)
            if summary is None:
                ok = r.exit_code == 0
                return EvalResult(int(ok), 1, {"run-tests.sh": ok})
            passed, total = summary
            return EvalResult(passed, total, {"run-tests.sh": passed == total})
        tests_dir = self.session.stage("tests", task.test_files) if task.test_files else None
        binds = [(tests_dir, "/tests")] if tests_dir else []
        details: dict[str, bool] = {}
        for name, script in task.tests.items():
            r = await self.session.run(script, ro_binds=binds)
            details[name] = r.exit_code == 0 and not r.timed_out
        return EvalResult(sum(details.values()), len(details), details)


def episode_reward(evaluation: EvalResult, step_scores: list[float], prm_step_coef: float) -> float:
    """Fraction of tests passed, plus prm_step_coef * mean per-step process score (0 by default)."""
    bonus = prm_step_coef * (sum(step_scores) / len(step_scores)) if step_scores and prm_step_coef else 0.0
    return evaluation.fraction + bonus
