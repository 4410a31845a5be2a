"""SWE-RL custom generate function (--custom-generate-function-path swe-rl/swe_generate.py).

One call = one episode: the model calls a tool, the sandbox runs it, the result is appended as a
user turn (loss_mask 0), up to MAX_STEPS; then the patch is taken (git diff) and the instance's
FAIL_TO_PASS / PASS_TO_PASS tests run: reward 1 if resolved else 0 (+ --prm-step-coef * mean
step score). Flags come from --extra-args-provider-path swe-rl/swe_generate.py (add_arguments).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import swe_sources
from swe_bench import SweBenchPath, instance_for_sample
from swe_env import SYSTEM_PROMPT, SweEnv, episode_reward
from swe_instances import Instance, base_repo, dependency_dir

from openclaw.sandbox import Limits, SandboxConfig, sandbox_config_from_env
from openclaw.tracks import Play, SandboxedOptions, Score, generate_episode, option


def _path_or_none(text: str) -> str | None:
    """An empty SWE_BENCH_PATH names no file: the shipped instances are used."""
    return text or None


@dataclass(frozen=True)
class SweRLConfig(SandboxedOptions):
    NAME = "swe"

    max_steps: int = option(20, env="MAX_STEPS", help="Model turns (tool calls) per episode [env MAX_STEPS]")
    prm_step_coef: float = option(0.0, env="PRM_STEP_COEF",
                                  help="Weight of the per-step process score added to the 0/1 resolved reward")
    swe_bench_path: str | None = option(None, env="SWE_BENCH_PATH", parse=_path_or_none,
                                        help="SWE-bench JSON/JSONL[:mirrors dir] for samples that carry only an "
                                             "instance id [env SWE_BENCH_PATH; default: the shipped instances]")
    command_timeout: float = option(30.0, help="Wall-clock seconds per tool call")
    test_timeout: float = option(120.0, help="Wall-clock seconds for the test run")
    episode_memory_mb: int = option(1024, help="Address-space limit per process")

    def sandbox_config(self) -> SandboxConfig:
        # The test run needs its own (longer) CPU budget; the per-call wall timeout is passed per run.
        limits = Limits(wall_timeout_s=self.command_timeout,
                        cpu_seconds=int(max(self.command_timeout, self.test_timeout)),
                        address_space_bytes=self.episode_memory_mb << 20)
        return SandboxConfig(kind=sandbox_config_from_env(self.sandbox).kind, limits=limits)

    @property
    def bench(self) -> SweBenchPath | None:
        """The user's SWE-bench instances and mirrors, or None: the shipped instances."""
        return SweBenchPath.parse(self.swe_bench_path) if self.swe_bench_path else None


add_arguments = SweRLConfig.add_arguments


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


@dataclass
class SweRun:
    """An episode whose repository is ready: it answers the model's turns, then scores the patch."""

    instance: Instance
    env: SweEnv
    setup_seconds: float
    prm_step_coef: float
    transcript: list[dict[str, str]] = field(default_factory=list)

    async def step(self, model_text: str) -> str | None:
        """The tool's result for one model turn, or None when the episode is over."""
        result = await self.env.step(model_text)
        self.transcript.append({"model": model_text, "tool": result.action.tool, "observation": result.observation})
        return None if result.done else result.observation

    async def finish(self, outcome: str) -> Episode:
        env, result = self.env, await self.env.evaluate()
        scores = [s.step_score for s in env.history]
        return Episode(self.instance.instance_id, episode_reward(result, scores, self.prm_step_coef), result.resolved,
                       result.patch, result.tests, env.steps, scores, [s.action.tool for s in env.history],
                       self.setup_seconds, result.test_seconds, outcome, self.transcript, result.refused)


@contextlib.asynccontextmanager
async def swe_run(cfg: SweRLConfig, instance: Instance, mirrors: str | None) -> AsyncIterator[SweRun]:
    """The instance's repository in a sandbox of its own, reset for an episode."""
    base, runtime, deps = await prepare_instance(instance, mirrors)
    async with cfg.session() as sandbox:
        # Setup = the episode's own copy of the repository (copy + git commit), not the wait for a free slot.
        t0 = time.monotonic()
        env = SweEnv(instance, sandbox, base, runtime, max_steps=cfg.max_steps, command_timeout_s=cfg.command_timeout,
                     test_timeout_s=cfg.test_timeout, deps_dir=deps)
        await env.reset()
        yield SweRun(instance, env, time.monotonic() - t0, cfg.prm_step_coef)


def initial_messages(instance: Instance) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": instance.problem_statement}]


@contextlib.asynccontextmanager
async def swe_play(cfg: SweRLConfig, instance: Instance, mirrors: str | None) -> AsyncIterator[Play]:
    async with swe_run(cfg, instance, mirrors) as run:

        async def score(outcome: str) -> Score:
            episode = await run.finish(outcome)
            return Score(episode.reward, episode.metadata())

        yield Play(initial_messages(instance), lambda turn: run.step(turn.text), score)


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    cfg = SweRLConfig.from_args(args)
    bench = cfg.bench
    instance = instance_for_sample(sample, bench)
    mirrors = bench.mirrors if bench else None
    return await generate_episode(args, sample, sampling_params,
                                  lambda tokenizer, obs_format: swe_play(cfg, instance, mirrors),
                                  cfg.rollout_max_context_len)
