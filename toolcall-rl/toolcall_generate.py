"""Tool-call RL custom generate function (--custom-generate-function-path toolcall-rl/toolcall_generate.py).

One call = one episode: model turn -> tool calls run (the python tool in the sandbox) -> their
results appended as a tool turn (loss_mask 0) -> ... until a final answer or MAX_STEPS.
Reward = correctness (+ --tool-use-bonus). Flags: --extra-args-provider-path
toolcall-rl/toolcall_generate.py (add_arguments), each with an env default.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from toolcall_env import ToolCallEnv, system_prompt
from toolcall_tasks import MathTask, normalize_number
from toolcall_tools import load_tools_config

from openclaw.sandbox import SandboxConfig, sandbox_config_from_env
from openclaw.sandbox.trajectory import ObservationFormat, Turn
from openclaw.tracks import Play, SandboxedOptions, Score, generate_episode, option


@dataclass(frozen=True)
class ToolCallRLConfig(SandboxedOptions):
    NAME = "toolcall"

    max_steps: int = option(8, env="MAX_STEPS", help="Model turns per episode [env MAX_STEPS]")
    parallel_envs: int | None = option(None, parse=int, help="Concurrent episodes [env PARALLEL_ENVS]")
    tools_config: str | None = option(
        None, env="TOOLS_CONFIG", help="OpenAI tools JSON [env TOOLS_CONFIG, default toolcall-rl/tools_config.json]")
    tool_use_bonus: float = option(0.0, env="TOOL_USE_BONUS",
                                   help="Added to a correct answer's reward when a tool call succeeded")
    python_tool_timeout: float = option(10.0, help="Seconds per python tool call")

    def sandbox_config(self) -> SandboxConfig:
        return sandbox_config_from_env(self.sandbox, wall_timeout_s=self.python_tool_timeout)


add_arguments = ToolCallRLConfig.add_arguments


def template_tool_content(observation: str, obs_format: ObservationFormat) -> str:
    """Chat templates with native tool turns (Qwen's) wrap a tool message in <tool_response> tags
    themselves: then pass the inner content so the tags are not doubled."""
    open_tag, close_tag = "<tool_response>\n", "\n</tool_response>"
    if "<tool_response>" in obs_format.prefix and observation.startswith(open_tag) and observation.endswith(close_tag):
        return observation[len(open_tag):-len(close_tag)]
    return observation


def task_for_sample(sample: Any) -> MathTask:
    meta = sample.metadata or {}
    question = meta.get("question") or (sample.prompt if isinstance(sample.prompt, str) else None)
    answer = meta.get("answer", sample.label)
    if not question or answer is None:
        raise ValueError(f"sample {sample.index}: needs a question (metadata or prompt) and an answer (label)")
    norm = normalize_number(str(answer))
    if norm is None:
        raise ValueError(f"sample {sample.index}: answer {answer!r} is not a number")
    return MathTask(question, norm)


@contextlib.asynccontextmanager
async def toolcall_play(cfg: ToolCallRLConfig, task: MathTask, obs_format: ObservationFormat) -> AsyncIterator[Play]:
    tools = list(load_tools_config(cfg.tools_config))
    async with contextlib.AsyncExitStack() as stack:
        # Only the python tool runs code: without it an episode holds no sandbox.
        needs_sandbox = any(t["function"]["name"] == "python" for t in tools)
        session = await stack.enter_async_context(cfg.session()) if needs_sandbox else None
        env = ToolCallEnv(task, session, tools, max_steps=cfg.max_steps, python_timeout_s=cfg.python_tool_timeout)
        env.reset()

        async def step(turn: Turn) -> str | None:
            result = await env.step(turn.text)
            if result.done or result.observation is None:
                return None
            return template_tool_content(result.observation, obs_format)

        async def score(outcome: str) -> Score:
            return Score(env.reward(cfg.tool_use_bonus), dict(
                answer_pred=env.answer, answer_true=task.answer, correct=env.correct, steps=env.steps,
                tool_calls=len(env.outcomes), tool_calls_ok=sum(o.ok for o in env.outcomes)))

        messages = [{"role": "system", "content": system_prompt(tools)}, {"role": "user", "content": task.question}]
        yield Play(messages, step, score)


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    cfg = ToolCallRLConfig.from_args(args)
    task = task_for_sample(sample)
    return await generate_episode(args, sample, sampling_params,
                                  lambda tokenizer, obs_format: toolcall_play(cfg, task, obs_format),
                                  cfg.rollout_max_context_len, role="tool")
