"""SWE-RL custom generate function (--custom-generate-function-path swe-rl/swe_generate.py).

One call = one episode: the model calls a tool, the sandbox runs it, the result is appended as a
user turn (loss_mask 0), up to MAX_STEPS; then the patch is taken (git diff) and the instance's
FAIL_TO_PASS / PASS_TO_PASS tests run: reward 1 if resolved else 0 (+ --prm-step-coef * mean
step score). Flags come from --extra-args-provider-path swe-rl/swe_generate.py (add_arguments).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import swe_sources
from swe_bench import SweBenchPath, instance_for_sample
from swe_env import SYSTEM_PROMPT, SweEnv, episode_reward
from swe_instances import Instance, base_repo, dependency_dir

from openclaw.engines.sglang_client import SGLangClient
from openclaw.sandbox import Limits, SandboxConfig, parallel_envs_from_env, sandbox_config_from_env
from openclaw.sandbox.episode import chat_prompt_ids, engine_url_for, load_tokenizer, pool_for_running_loop
from openclaw.sandbox.trajectory import ObservationFormat, TrajectoryBuilder, Turn, run_agent_loop


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """SWE-RL flags (slime's extra-args-provider contract); values land in args."""
    parser.add_argument("--env-type", default=os.environ.get("ENV_TYPE", "swe"), choices=["swe"])
    parser.add_argument("--max-steps", type=int, default=int(os.environ.get("MAX_STEPS", "20")),
                        help="Model turns (tool calls) per episode [env MAX_STEPS]")
    parser.add_argument("--parallel-envs", type=int, default=None,
                        help="Concurrent sandboxed episodes [env PARALLEL_ENVS, default 8]")
    parser.add_argument("--prm-step-coef", type=float, default=float(os.environ.get("PRM_STEP_COEF", "0")),
                        help="Weight of the per-step process score added to the 0/1 resolved reward")
    parser.add_argument("--sandbox", default=os.environ.get("OPENCLAW_SANDBOX", "bwrap"), choices=["bwrap", "none"],
                        help="bwrap (default) or none (trusted local debugging only: NO isolation)")
    parser.add_argument("--swe-bench-path", default=os.environ.get("SWE_BENCH_PATH") or None,
                        help="SWE-bench JSON/JSONL[:mirrors dir] for samples that carry only an instance id "
                             "[env SWE_BENCH_PATH; default: the shipped instances]")
    parser.add_argument("--command-timeout", type=float, default=30.0, help="Wall-clock seconds per tool call")
    parser.add_argument("--test-timeout", type=float, default=120.0, help="Wall-clock seconds for the test run")
    parser.add_argument("--episode-memory-mb", type=int, default=1024, help="Address-space limit per process")


@dataclass(frozen=True)
class SweRLConfig:
    max_steps: int
    parallel_envs: int
    prm_step_coef: float
    sandbox: SandboxConfig
    swe_bench_path: SweBenchPath | None
    command_timeout_s: float
    test_timeout_s: float
    max_context_len: int

    @classmethod
    def from_args(cls, args: Any) -> SweRLConfig:
        max_steps = int(args.max_steps)
        if max_steps < 1:
            raise ValueError(f"--max-steps/MAX_STEPS must be >= 1, got {max_steps}")
        command_timeout, test_timeout = float(args.command_timeout), float(args.test_timeout)
        base = sandbox_config_from_env(args.sandbox, wall_timeout_s=command_timeout)
        # The test run needs its own (longer) CPU budget; the per-call wall timeout is passed per run.
        limits = Limits(wall_timeout_s=command_timeout, cpu_seconds=int(max(command_timeout, test_timeout)),
                        address_space_bytes=int(args.episode_memory_mb) << 20)
        return cls(
            max_steps=max_steps,
            parallel_envs=int(args.parallel_envs or 0) or parallel_envs_from_env(),
            prm_step_coef=float(args.prm_step_coef),
            sandbox=SandboxConfig(kind=base.kind, limits=limits),
            swe_bench_path=SweBenchPath.parse(args.swe_bench_path) if args.swe_bench_path else None,
            command_timeout_s=command_timeout,
            test_timeout_s=test_timeout,
            max_context_len=int(args.rollout_max_context_len),
        )


@dataclass
class Episode:
    """What one episode produced, besides its tokens (kept in the Sample's metadata and eval logs)."""

    instance_id: str
    reward: float
    resolved: bool
    patch: str
    tests: dict[str, str]
    steps: int
    step_scores: list[float]
    tools: list[str]
    setup_seconds: float
    test_seconds: float
    outcome: str
    transcript: list[dict[str, str]] = field(default_factory=list)  # model text + tool result per step (eval logs)
    refused: list[str] = field(default_factory=list)  # why the patch scored 0 whatever the tests said

    def metadata(self) -> dict[str, Any]:
        return dict(instance_id=self.instance_id, resolved=self.resolved, patch=self.patch, test_results=self.tests,
                    steps=self.steps, step_scores=self.step_scores, tools=self.tools,
                    setup_seconds=self.setup_seconds, test_seconds=self.test_seconds, refused=self.refused)


async def prepare_instance(instance: Instance, mirrors: str | None) -> tuple[Path, Path, Path | None]:
    """Host-side material for an episode (built once, then cached): base repo, pytest, deps."""
    base = await asyncio.to_thread(base_repo, instance, mirrors)
    runtime = await asyncio.to_thread(swe_sources.pytest_runtime_dir)
    deps = await asyncio.to_thread(dependency_dir, instance, mirrors)
    return base, runtime, deps


async def run_episode(cfg: SweRLConfig, instance: Instance, builder: TrajectoryBuilder, tokenizer: Any,
                      mirrors: str | None) -> Episode:
    base, runtime, deps = await prepare_instance(instance, mirrors)
    obs_format = ObservationFormat.from_tokenizer(tokenizer, role="user")
    pool = pool_for_running_loop(cfg.sandbox, cfg.parallel_envs)
    async with pool.session() as sandbox:
        # Setup = the episode's own copy of the repository (copy + git commit), not the wait for a free slot.
        t0 = time.monotonic()
        env = SweEnv(instance, sandbox, base, runtime, max_steps=cfg.max_steps, command_timeout_s=cfg.command_timeout_s,
                     test_timeout_s=cfg.test_timeout_s, deps_dir=deps)
        await env.reset()
        setup = time.monotonic() - t0

        transcript: list[dict[str, str]] = []

        async def step(turn: Turn) -> str | None:
            result = await env.step(turn.text)
            transcript.append({"model": turn.text, "tool": result.action.tool, "observation": result.observation})
            return None if result.done else result.observation

        outcome = await run_agent_loop(builder, tokenizer, obs_format, step)
        await builder.finalize()
        result = await env.evaluate()
    scores = [s.step_score for s in env.history]
    return Episode(instance.instance_id, episode_reward(result, scores, cfg.prm_step_coef), result.resolved,
                   result.patch, result.tests, env.steps, scores, [s.action.tool for s in env.history],
                   setup, result.test_seconds, outcome, transcript, result.refused)


def initial_messages(instance: Instance) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": instance.problem_statement}]


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    from slime.utils.types import Sample

    cfg = SweRLConfig.from_args(args)
    instance = instance_for_sample(sample, cfg.swe_bench_path)
    tokenizer = load_tokenizer(args.hf_checkpoint)
    prompt_text, prompt_ids = chat_prompt_ids(tokenizer, initial_messages(instance))
    async with SGLangClient(engine_url_for(args, sample.index)) as client:
        builder = TrajectoryBuilder(client, prompt_ids, sampling_params, cfg.max_context_len)
        mirrors = cfg.swe_bench_path.mirrors if cfg.swe_bench_path else None
        episode = await run_episode(cfg, instance, builder, tokenizer, mirrors)
    builder.fill_sample(sample)
    sample.prompt = prompt_text
    sample.response = tokenizer.decode(sample.tokens[len(prompt_ids):])
    sample.reward = episode.reward
    sample.status = Sample.Status(episode.outcome)
    sample.metadata.update(episode.metadata())
    return sample
