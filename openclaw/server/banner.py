"""The ready banner: where the server listens and how to point OpenClaw at it."""

from __future__ import annotations

import json
from typing import Any

PROVIDER_ID = "openclaw-rl"
# The OpenClaw CLI sizes its requests from the snippet's numbers. Its default agent prompt is ~13k
# tokens (it estimates ~15.5k: chars / 4 x 1.25), and for a custom endpoint it clamps
# max_completion_tokens to contextWindow - its estimate - 1, at least 1. Told a window of 8,192 it
# therefore asks for 1 token on every turn. So the snippet advertises at least this much: what the
# server accepts, since it fits longer prompts into the model's real window by a documented rule
# (openclaw/server/context_fit.py: oldest history, then tool schemas, then the system prompt's middle).
OPENCLAW_MIN_CONTEXT_WINDOW = 32768
# Completion budget per call: a reply of 1/8 of the model's window leaves 7/8 for the prompt.
MAX_TOKENS_FRACTION = 8


def snippet_limits(model_context: int, default_max_tokens: int) -> tuple[int, int]:
    """(contextWindow, maxTokens) for the snippet, from the model's real context length."""
    return max(model_context, OPENCLAW_MIN_CONTEXT_WINDOW), max(1, min(default_max_tokens, model_context // MAX_TOKENS_FRACTION))


def openclaw_provider_config(base_url: str, model_id: str, api_key: str | None, context_window: int,
                             max_tokens: int) -> dict[str, Any]:
    """An `openclaw.json` fragment: a custom OpenAI-compatible provider plus the default model.
    `context_window` is the model's real context length and `max_tokens` the server's default
    completion budget; the snippet carries `snippet_limits` of them. The key is referenced
    through the environment rather than printed."""
    context_window, max_tokens = snippet_limits(context_window, max_tokens)
    return {
        "models": {"providers": {PROVIDER_ID: {
            "baseUrl": f"{base_url}/v1",
            "apiKey": "${OPENCLAW_API_KEY}" if api_key else "local",
            "api": "openai-completions",
            "models": [{"id": model_id, "name": f"{model_id} (OpenClaw-RL)", "reasoning": False,
                        "input": ["text"], "contextWindow": context_window, "maxTokens": max_tokens,
                        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}}],
        }}},
        "agents": {"defaults": {"model": {"primary": f"{PROVIDER_ID}/{model_id}"}}},
    }


def ready_banner(base_url: str, model_id: str, model_path: str, backend: str, api_key: str | None,
                 context_window: int, max_tokens: int, rl_enabled: bool, rl_buffer_dir: str | None) -> str:
    snippet = json.dumps(openclaw_provider_config(base_url, model_id, api_key, context_window, max_tokens), indent=2)
    auth = "required (Authorization: Bearer $OPENCLAW_API_KEY)" if api_key else "off (loopback only)"
    rl = f"on, buffer {rl_buffer_dir}" if rl_enabled else "off"
    return "\n".join([
        "",
        "OpenClaw-RL server ready",
        f"  OpenAI API   : {base_url}/v1   (model: {model_id})",
        f"  SGLang API   : {base_url}/generate, /update_weights_from_disk, ...",
        f"  model        : {model_path}  [backend {backend}]",
        f"  auth         : {auth}",
        f"  RL intercept : {rl}",
        f"  context      : {context_window} tokens; longer prompts are trimmed to fit (oldest history, then tool",
        "                 schemas, then the system prompt's middle; see openclaw/server/context_fit.py)",
        "",
        "openclaw.json provider snippet:",
        snippet,
        "",
    ])
