"""Plumbing shared by the Track 2 generate functions: per-loop pools, tokenizers, engine clients."""

from __future__ import annotations

import asyncio
import functools
import weakref
from typing import Any

from openclaw.sandbox.config import SandboxConfig
from openclaw.sandbox.pool import SandboxPool

# asyncio primitives belong to one event loop and the trainer may run rollouts in several loops
# (one asyncio.run per rollout), so pools are cached per loop and vanish with it.
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[Any, ...], SandboxPool]] = (
    weakref.WeakKeyDictionary()
)


def pool_for_running_loop(config: SandboxConfig, size: int) -> SandboxPool:
    """The PARALLEL_ENVS-bounded pool shared by every episode of the current event loop."""
    loop = asyncio.get_running_loop()
    per_loop = _POOLS.setdefault(loop, {})
    key = (config, size)
    if key not in per_loop:
        per_loop[key] = SandboxPool(config, size)
    return per_loop[key]


@functools.lru_cache(maxsize=4)
def load_tokenizer(path: str) -> Any:
    """The policy's tokenizer (cached: every episode of a run uses the same one)."""
    try:
        from slime.backends.fsdp.model import load_tokenizer as slime_load
    except ImportError:  # the runtime package alone (no trainer installed)
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(path)
    return slime_load(path)


def encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def chat_prompt_ids(tokenizer: Any, messages: list[dict[str, str]], **template_kwargs: Any) -> tuple[str, list[int]]:
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **template_kwargs)
    return text, encode(tokenizer, text)


def engine_url_for(args: Any, sample_index: int | None) -> str:
    from slime.rollout.engine_io import engine_urls_from_args

    urls = engine_urls_from_args(args)
    return urls[(sample_index or 0) % len(urls)]
