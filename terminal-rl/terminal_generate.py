"""Terminal-RL custom generate function (--custom-generate-function-path terminal-rl/terminal_generate.py).

One call = one episode: the model emits a command, the sandbox runs it, the output is appended
as a user turn (loss_mask 0), up to MAX_STEPS; then the task's tests run and
reward = fraction passed (+ --prm-step-coef * mean step score). Flags come from
--extra-args-provider-path terminal-rl/terminal_generate.py (add_arguments); each has an env default.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from terminal_env import SYSTEM_PROMPT, TerminalEnv, episode_reward, process_scores
from terminal_tasks import TerminalTask, load_tasks

from openclaw.sandbox import SandboxConfig, sandbox_config_from_env
from openclaw.sandbox.trajectory import Turn
from openclaw.tracks import Play, SandboxedOptions, Score, generate_episode, named_in_sample, option


@dataclass(frozen=True)
class TerminalRLConfig(SandboxedOptions):
    NAME = "terminal"

    prm_step_coef: float = option(0.0, env="PRM_STEP_COEF",
                                  help="Weight of the per-step process score added to the test-pass fraction")
    terminal_tasks: str | None = option(
        None, env="TERMINAL_TASKS", help="Task file/folder for samples that carry only a task id (default: terminal-rl/tasks)")
    command_timeout: float = option(30.0, help="Wall-clock seconds per command")

    def sandbox_config(self) -> SandboxConfig:
        return sandbox_config_from_env(self.sandbox, wall_timeout_s=self.command_timeout)


add_arguments = TerminalRLConfig.add_arguments


def task_for_sample(sample: Any, tasks_path: str | None) -> TerminalTask:
    named = named_in_sample(sample, "task", "task_id")
    if isinstance(named, dict):
        return TerminalTask.from_dict(named)
    for task in load_tasks(tasks_path):
        if task.id == named:
            return task
    raise ValueError(f"sample {sample.index}: unknown task id {named!r}")


@contextlib.asynccontextmanager
async def terminal_play(cfg: TerminalRLConfig, task: TerminalTask) -> AsyncIterator[Play]:
    async with cfg.session() as sandbox:
        env = TerminalEnv(task, sandbox, max_steps=cfg.max_steps)
        await env.reset()

        async def step(turn: Turn) -> str | None:
            result = await env.step(turn.text)
            return None if result.done else result.observation

        async def score(outcome: str) -> Score:
            evaluation = await env.evaluate()
            reward = episode_reward(evaluation, process_scores(env.history), cfg.prm_step_coef)
            return Score(reward, dict(
                task_id=task.id, steps=env.steps, tests_passed=evaluation.passed, tests_total=evaluation.total,
                test_details=evaluation.details, step_scores=[s.step_score for s in env.history],
                actions=[s.action.kind for s in env.history]))

        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.instruction}]
        yield Play(messages, step, score)


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    cfg = TerminalRLConfig.from_args(args)
    task = task_for_sample(sample, cfg.terminal_tasks)
    return await generate_episode(args, sample, sampling_params, lambda tokenizer, obs_format: terminal_play(cfg, task),
                                  cfg.rollout_max_context_len)
