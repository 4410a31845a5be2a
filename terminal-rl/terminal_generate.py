"""Terminal-RL custom generate function (--custom-generate-function-path terminal-rl/terminal_generate.py).

One call = one episode: the model emits a command, the sandbox runs it, the output is appended
as a user turn (loss_mask 0), up to MAX_STEPS; then the task's tests run and
reward = fraction passed (+ --prm-step-coef * mean step score). Flags come from
--extra-args-provider-path terminal-rl/terminal_generate.py (add_arguments); each has an env default.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from terminal_env import SYSTEM_PROMPT, TerminalEnv, episode_reward, process_scores
from terminal_tasks import TerminalTask, load_tasks

from openclaw.engines.sglang_client import SGLangClient
from openclaw.sandbox import SandboxConfig, parallel_envs_from_env, sandbox_config_from_env
from openclaw.sandbox.episode import (
    chat_prompt_ids,
    engine_url_for,
    load_tokenizer,
    pool_for_running_loop,
)
from openclaw.sandbox.trajectory import ObservationFormat, TrajectoryBuilder, Turn, run_agent_loop


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Terminal-RL flags (slime's extra-args-provider contract); values land in args."""
    parser.add_argument("--env-type", default=os.environ.get("ENV_TYPE", "terminal"), choices=["terminal"])
    parser.add_argument("--max-steps", type=int, default=int(os.environ.get("MAX_STEPS", "20")),
                        help="Model turns per episode [env MAX_STEPS]")
    parser.add_argument("--parallel-envs", type=int, default=None,
                        help="Concurrent sandboxed episodes [env PARALLEL_ENVS, default 8]")
    parser.add_argument("--prm-step-coef", type=float, default=float(os.environ.get("PRM_STEP_COEF", "0")),
                        help="Weight of the per-step process score added to the test-pass fraction")
    parser.add_argument("--sandbox", default=os.environ.get("OPENCLAW_SANDBOX", "bwrap"), choices=["bwrap", "none"],
                        help="bwrap (default) or none (trusted local debugging only: NO isolation)")
    parser.add_argument("--terminal-tasks", default=os.environ.get("TERMINAL_TASKS"),
                        help="Task file/folder for samples that carry only a task id (default: terminal-rl/tasks)")
    parser.add_argument("--command-timeout", type=float, default=30.0, help="Wall-clock seconds per command")


@dataclass(frozen=True)
class TerminalRLConfig:
    max_steps: int
    parallel_envs: int
    prm_step_coef: float
    sandbox: SandboxConfig
    tasks_path: str | None
    max_context_len: int

    @classmethod
    def from_args(cls, args: Any) -> TerminalRLConfig:
        def get(name: str, default: Any) -> Any:
            value = getattr(args, name, None)
            return default if value is None else value

        max_steps = int(get("max_steps", os.environ.get("MAX_STEPS", 20)))
        if max_steps < 1:
            raise ValueError(f"--max-steps/MAX_STEPS must be >= 1, got {max_steps}")
        timeout = float(get("command_timeout", 30.0))
        return cls(
            max_steps=max_steps,
            parallel_envs=int(get("parallel_envs", 0)) or parallel_envs_from_env(),
            prm_step_coef=float(get("prm_step_coef", 0.0)),
            sandbox=sandbox_config_from_env(get("sandbox", None), wall_timeout_s=timeout),
            tasks_path=get("terminal_tasks", None),
            max_context_len=int(get("rollout_max_context_len", 4096)),
        )


def task_for_sample(sample: Any, tasks_path: str | None) -> TerminalTask:
    meta = sample.metadata or {}
    if isinstance(meta.get("task"), dict):
        return TerminalTask.from_dict(meta["task"])
    task_id = meta.get("task_id") or sample.label
    if not task_id:
        raise ValueError(f"sample {sample.index}: metadata has neither 'task' nor 'task_id' (and no label)")
    for task in load_tasks(tasks_path):
        if task.id == task_id:
            return task
    raise ValueError(f"sample {sample.index}: unknown task id {task_id!r}")


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    from slime.utils.types import Sample

    cfg = TerminalRLConfig.from_args(args)
    task = task_for_sample(sample, cfg.tasks_path)
    tokenizer = load_tokenizer(args.hf_checkpoint)
    obs_format = ObservationFormat.from_tokenizer(tokenizer, role="user")
    messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task.instruction}]
    prompt_text, prompt_ids = chat_prompt_ids(tokenizer, messages)
    pool = pool_for_running_loop(cfg.sandbox, cfg.parallel_envs)
    async with pool.session() as sandbox, SGLangClient(engine_url_for(args, sample.index)) as client:
        env = TerminalEnv(task, sandbox, max_steps=cfg.max_steps)
        await env.reset()
        builder = TrajectoryBuilder(client, prompt_ids, sampling_params, cfg.max_context_len)

        async def step(turn: Turn) -> str | None:
            result = await env.step(turn.text)
            return None if result.done else result.observation

        outcome = await run_agent_loop(builder, tokenizer, obs_format, step)
        await builder.finalize()
        evaluation_result = await env.evaluate()
    step_scores = [s.step_score for s in env.history]
    builder.fill_sample(sample)
    sample.prompt = prompt_text
    sample.response = tokenizer.decode(sample.tokens[len(prompt_ids):])
    sample.reward = episode_reward(evaluation_result, process_scores(env.history), cfg.prm_step_coef)
    sample.status = Sample.Status(outcome)
    sample.metadata.update(
        task_id=task.id, steps=env.steps, tests_passed=evaluation_result.passed,
        tests_total=evaluation_result.total, test_details=evaluation_result.details, step_scores=step_scores,
        actions=[s.action.kind for s in env.history],
    )
    return sample
