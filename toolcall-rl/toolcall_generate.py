"""Tool-call RL custom generate function (--custom-generate-function-path toolcall-rl/toolcall_generate.py).

One call = one episode: model turn -> tool calls run (the python tool in the sandbox) -> their
results appended as a tool turn (loss_mask 0) -> ... until a final answer or MAX_STEPS.
Reward = correctness (+ --tool-use-bonus). Flags: --extra-args-provider-path
toolcall-rl/toolcall_generate.py (add_arguments), each with an env default.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from dataclasses import dataclass
from typing import Any

from toolcall_env import ToolCallEnv, system_prompt
from toolcall_tasks import MathTask, normalize_number
from toolcall_tools import load_tools_config

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
    parser.add_argument("--env-type", default=os.environ.get("ENV_TYPE", "toolcall"), choices=["toolcall"])
    parser.add_argument("--tools-config", default=os.environ.get("TOOLS_CONFIG"),
                        help="OpenAI tools JSON [env TOOLS_CONFIG, default toolcall-rl/tools_config.json]")
    parser.add_argument("--max-steps", type=int, default=int(os.environ.get("MAX_STEPS", "8")),
                        help="Model turns per episode [env MAX_STEPS]")
    parser.add_argument("--parallel-envs", type=int, default=None, help="Concurrent episodes [env PARALLEL_ENVS]")
    parser.add_argument("--tool-use-bonus", type=float, default=float(os.environ.get("TOOL_USE_BONUS", "0")),
                        help="Added to a correct answer's reward when a tool call succeeded")
    parser.add_argument("--sandbox", default=os.environ.get("OPENCLAW_SANDBOX", "bwrap"), choices=["bwrap", "none"],
                        help="bwrap (default) or none (trusted local debugging only: NO isolation)")
    parser.add_argument("--python-tool-timeout", type=float, default=10.0, help="Seconds per python tool call")


@dataclass(frozen=True)
class ToolCallRLConfig:
    tools: tuple[dict[str, Any], ...]
    max_steps: int
    parallel_envs: int
    tool_use_bonus: float
    sandbox: SandboxConfig
    python_timeout_s: float
    max_context_len: int

    @classmethod
    def from_args(cls, args: Any) -> ToolCallRLConfig:
        def get(name: str, default: Any) -> Any:
            value = getattr(args, name, None)
            return default if value is None else value

        timeout = float(get("python_tool_timeout", 10.0))
        return cls(
            tools=tuple(load_tools_config(get("tools_config", os.environ.get("TOOLS_CONFIG")))),
            max_steps=int(get("max_steps", os.environ.get("MAX_STEPS", 8))),
            parallel_envs=int(get("parallel_envs", 0)) or parallel_envs_from_env(),
            tool_use_bonus=float(get("tool_use_bonus", 0.0)),
            sandbox=sandbox_config_from_env(get("sandbox", None), wall_timeout_s=timeout),
            python_timeout_s=timeout,
            max_context_len=int(get("rollout_max_context_len", 4096)),
        )


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


async def generate(args: Any, sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
    from slime.utils.types import Sample

    cfg = ToolCallRLConfig.from_args(args)
    task = task_for_sample(sample)
    tokenizer = load_tokenizer(args.hf_checkpoint)
    obs_format = ObservationFormat.from_tokenizer(tokenizer, role="tool")
    tools = list(cfg.tools)
    messages = [{"role": "system", "content": system_prompt(tools)}, {"role": "user", "content": task.question}]
    prompt_text, prompt_ids = chat_prompt_ids(tokenizer, messages)
    needs_sandbox = any(t["function"]["name"] == "python" for t in tools)
    pool = pool_for_running_loop(cfg.sandbox, cfg.parallel_envs) if needs_sandbox else None
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(SGLangClient(engine_url_for(args, sample.index)))
        session = await stack.enter_async_context(pool.session()) if pool is not None else None
        env = ToolCallEnv(task, session, tools, max_steps=cfg.max_steps, python_timeout_s=cfg.python_timeout_s)
        env.reset()
        builder = TrajectoryBuilder(client, prompt_ids, sampling_params, cfg.max_context_len)

        async def step(turn: Turn) -> str | None:
            result = await env.step(turn.text)
            if result.done or result.observation is None:
                return None
            return template_tool_content(result.observation, obs_format)

        outcome = await run_agent_loop(builder, tokenizer, obs_format, step)
        await builder.finalize()
    builder.fill_sample(sample)
    sample.prompt = prompt_text
    sample.response = tokenizer.decode(sample.tokens[len(prompt_ids):])
    sample.reward = env.reward(cfg.tool_use_bonus)
    sample.status = Sample.Status(outcome)
    sample.metadata.update(
        answer_pred=env.answer, answer_true=task.answer, correct=env.correct, steps=env.steps,
        tool_calls=len(env.outcomes), tool_calls_ok=sum(o.ok for o in env.outcomes),
    )
    return sample
