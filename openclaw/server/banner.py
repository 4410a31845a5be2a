"""The ready banner: where the server listens and how to point OpenClaw at it."""

from __future__ import annotations

import json
from typing import Any

PROVIDER_ID = "openclaw-rl"


def openclaw_provider_config(base_url: str, model_id: str, api_key: str | None, context_window: int,
                             max_tokens: int) -> dict[str, Any]:
    """An `openclaw.json` fragment: a custom OpenAI-compatible provider plus the default model.
    The key is referenced through the environment rather than printed."""
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
        "",
        "openclaw.json provider snippet:",
        snippet,
        "",
    ])
