"""The `tool-use` family: GSM8K (toolcall-rl/data/gsm8k_test.json) solved with toolcall-rl's tools
(a sandboxed `python`, a safe `calculator`), accuracy by the final numeric answer.

Each question is one episode of toolcall-rl's own generate function, the rollout its trainer runs
(`toolcall-rl/toolcall_generate.py`, loaded as the trainer loads plugins): the same system prompt,
`<tool_call>` parsing, tool execution in the sandbox, `<tool_response>` turns in the chat
template's tool format, `MAX_STEPS`, and answer extraction. So a checkpoint is measured on exactly
the format it was trained in. Greedy (temperature 0), tool-use bonus 0: reward = correctness.

Transport (`--tool-transport`): `generate` builds the episode token by token through the
SGLang-native `/generate` API (our server and SGLang serve it; the tokenizer must be local): the
exact training format. `chat` runs the same environment (`ToolCallEnv`: system prompt, parsing,
tools, MAX_STEPS, scoring) over the OpenAI chat API, tool results sent back as a user turn of
`<tool_response>` blocks: for endpoints that serve only the OpenAI API (vLLM, hosted APIs); the
prompt layout then follows the endpoint's chat template, not toolcall-rl's token format. `auto`
picks `generate` when the endpoint serves it, else `chat`, and says so on stderr and in the results.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
from dataclasses import dataclass
from typing import Any

from openclaw.evaluation.progress import Progress
from openclaw.evaluation.source import Target

GENERATE_PLUGIN = "toolcall-rl/toolcall_generate.py"


@dataclass(frozen=True)
class ToolUseConfig:
    limit: int | None
    max_steps: int = 3  # model turns per episode (toolcall-rl's CPU preset; its GPU default is 8)
    max_tokens: int = 256  # per model turn
    parallel: int = 8  # episodes at once: their model turns are decoded as one batch
    python_timeout_s: float = 10.0
    transport: str = "auto"  # auto | generate | chat


TRANSPORTS = ("auto", "generate", "chat")


def choose_transport(target: Target, requested: str) -> str:
    """`generate` or `chat` for this target; ValueError when `generate` is asked for and impossible."""
    if requested not in TRANSPORTS:
        raise ValueError(f"--tool-transport must be one of {', '.join(TRANSPORTS)}, got {requested!r}")
    if requested == "chat":
        return "chat"
    why = unavailable_reason(target)
    if why is None:
        return "generate"
    if requested == "generate":
        raise ValueError(f"--tool-transport generate: {why}")
    return "chat"


def unavailable_reason(target: Target) -> str | None:
    """Why `target` cannot run toolcall-rl's token-level episodes (`generate`), or None."""
    if target.native_url is None:
        return (f"{target.description} does not serve the SGLang-native API (/generate, /get_model_info) that "
                "toolcall-rl's episodes are built with; serve the model with `python -m openclaw.server` or SGLang")
    if target.tokenizer_path is None:
        return "the endpoint's tokenizer folder is unknown here; pass --tokenizer PATH"
    return None


def _toolcall_modules() -> tuple[Any, Any]:
    from slime.utils.plugins import load_plugin_module

    generate_module = load_plugin_module(GENERATE_PLUGIN)  # also makes its sibling modules importable
    return generate_module, importlib.import_module("toolcall_tasks")


def episode_args(target: Target, cfg: ToolUseConfig) -> argparse.Namespace:
    """The flags toolcall-rl's generate function reads, as its trainer would pass them."""
    assert target.native_url is not None and target.tokenizer_path is not None
    context = min(4096, target.max_context_len or 4096)
    return argparse.Namespace(
        hf_checkpoint=target.tokenizer_path, rollout_engine_urls=[target.native_url], env_type="toolcall",
        tools_config=None, max_steps=cfg.max_steps, parallel_envs=cfg.parallel, tool_use_bonus=0.0,
        sandbox="bwrap", python_tool_timeout=cfg.python_timeout_s, rollout_max_context_len=context,
    )


def sampling_params(cfg: ToolUseConfig) -> dict[str, Any]:
    # slime's evaluation sampling params with eval temperature 0 (greedy).
    return {"max_new_tokens": cfg.max_tokens, "temperature": 0.0, "top_p": 1.0, "top_k": -1,
            "skip_special_tokens": False, "no_stop_trim": True}


async def _run_episodes(target: Target, cfg: ToolUseConfig, tasks: list[Any], progress: Progress) -> list[Any]:
    from slime.utils.types import Sample

    generate_module, _ = _toolcall_modules()
    args = episode_args(target, cfg)
    params = sampling_params(cfg)
    gate = asyncio.Semaphore(max(1, cfg.parallel))

    async def one(i: int, task: Any) -> Any:
        sample = Sample(index=i, prompt=task.question, label=task.answer,
                        metadata={"question": task.question, "answer": task.answer})
        async with gate:
            out = await generate_module.generate(args, sample, dict(params), evaluation=True)
        progress.step(phase="solved")
        out.metadata["final_text"] = out.response  # the whole episode, tool results included
        return out

    return list(await asyncio.gather(*(one(i, t) for i, t in enumerate(tasks))))


async def _run_chat_episodes(target: Target, cfg: ToolUseConfig, tasks: list[Any], progress: Progress) -> list[dict]:
    """The same environment over the OpenAI chat API (see the module doc)."""
    from openai import AsyncOpenAI

    from openclaw.evaluation.source import EVAL_HEADERS
    from openclaw.sandbox import SandboxPool, sandbox_config_from_env

    generate_module, _ = _toolcall_modules()
    env_module = sys.modules["toolcall_env"]
    tools = list(sys.modules["toolcall_tools"].load_tools_config())
    pool = SandboxPool(sandbox_config_from_env("bwrap", wall_timeout_s=cfg.python_timeout_s), max(1, cfg.parallel))
    client = AsyncOpenAI(base_url=target.openai_url, api_key=target.api_key, timeout=1800, max_retries=2,
                         default_headers=EVAL_HEADERS)

    async def one(task: Any) -> dict:
        async with pool.session() as session:
            env = env_module.ToolCallEnv(task, session, tools, max_steps=cfg.max_steps,
                                         python_timeout_s=cfg.python_timeout_s)
            messages = [{"role": "system", "content": env_module.system_prompt(tools)},
                        {"role": "user", "content": env.reset()}]
            while True:
                out = await client.chat.completions.create(model=target.model, messages=messages,
                                                           max_tokens=cfg.max_tokens, temperature=0.0)
                text = out.choices[0].message.content or ""
                step = await env.step(text)
                if step.done or step.observation is None:
                    break
                messages += [{"role": "assistant", "content": text}, {"role": "user", "content": step.observation}]
        progress.step(phase="solved")
        return {"final_text": text, "correct": env.correct, "answer_pred": env.answer, "answer_true": task.answer, "steps": env.steps,
                "tool_calls": len(env.outcomes), "tool_calls_ok": sum(o.ok for o in env.outcomes)}

    try:
        return list(await asyncio.gather(*(one(t) for t in tasks)))
    finally:
        await client.close()


def run_tool_use(target: Target, cfg: ToolUseConfig) -> dict[str, Any]:
    transport = choose_transport(target, cfg.transport)
    _, tasks_module = _toolcall_modules()
    tasks = tasks_module.load_gsm8k(limit=cfg.limit)
    with Progress(f"tool-use/{target.label}", len(tasks)) as progress:
        if transport == "generate":
            meta = [s.metadata for s in asyncio.run(_run_episodes(target, cfg, tasks, progress))]
        else:
            progress.note(f"{target.description} serves no SGLang-native /generate (or its tokenizer is not local): "
                          "episodes run over the chat API, tool results as user turns, not toolcall-rl's token format"
                          if cfg.transport == "auto" else "episodes run over the chat API (--tool-transport chat)")
            meta = asyncio.run(_run_chat_episodes(target, cfg, tasks, progress))
    n = max(1, len(meta))
    return {
        "accuracy": 100.0 * sum(bool(m["correct"]) for m in meta) / n, "n": len(meta), "transport": transport,
        "used_tools": 100.0 * sum(m["tool_calls"] > 0 for m in meta) / n,
        "tool_calls_ok": sum(m["tool_calls_ok"] for m in meta), "tool_calls": sum(m["tool_calls"] for m in meta),
        "answered": 100.0 * sum(m["answer_pred"] is not None for m in meta) / n,
        "seconds": round(progress.elapsed, 1),
        "episodes": [{"question": t.question[:200], "answer_true": m["answer_true"], "answer_pred": m["answer_pred"],
                      "correct": bool(m["correct"]), "steps": m["steps"], "tool_calls": m["tool_calls"],
                      "response_tail": str(m["final_text"])[-400:]}
                     for t, m in zip(tasks, meta, strict=True)],
    }
