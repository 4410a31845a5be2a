"""Rollout-side plugins, loaded once per `args` object through slime.utils.plugins.

The cache lives on the args namespace (the rollout manager's copy), so a reference-style
`get_reward_model(config)` builds its model once per run, not once per rollout.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LOADERS = {
    "rm": "load_reward_model",
    "generate": "load_generate_fn",
    "filter": "load_filter_fn",
    "rollout": "load_rollout_fn",
    "sample_filter": "load_sample_filter_fn",
    "reward_post_process": "load_reward_post_process_fn",
}


def load_optional(args: Any, attr: str, kind: str) -> Any:
    """The adapted plugin named by `args.<attr>` (None when the flag is unset)."""
    spec = getattr(args, attr, None)
    if not spec:
        return None
    cache: dict[tuple[str, str], Any] = args.__dict__.setdefault("_plugin_cache", {})
    key = (kind, spec)
    if key not in cache:
        from slime.utils import plugins

        loader: Callable[[str, Any], Any] = getattr(plugins, LOADERS[kind])
        cache[key] = loader(spec, args)
    return cache[key]
