"""Where the replies come from: local weights served by our own server on a private port, or any
OpenAI-compatible endpoint (SGLang, vLLM, a GPU box running `python -m openclaw.server`).

Every family talks to a `Target` over HTTP, so a checkpoint, the base model and a remote endpoint
are evaluated by the same code. Local weights are served by `openclaw.server` in this process on a
free loopback port (the embedded engine batches concurrent requests); `--device`/`--dtype` pick
where and how (`auto`: CUDA + bf16 when a GPU is present, else CPU fp32).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

# Evaluation traffic must never become training data when the endpoint runs the RL intercept.
EVAL_HEADERS = {"X-RL-Opt-Out": "true"}


@dataclass(frozen=True)
class ModelSpec:
    """What to evaluate. Exactly one of: `model_path` (local weights), `base_url` (an endpoint),
    or neither (the embedded SmolLM2-135M)."""

    label: str  # "checkpoint" | "base": the row this model gets in the report
    model_path: str | None = None
    base_url: str | None = None
    model: str | None = None  # endpoint: the model name to request (default: the first one it lists)
    api_key: str | None = None
    tokenizer: str | None = None  # endpoint: tokenizer folder for tool-use (default: what the endpoint reports)


@dataclass(frozen=True)
class Target:
    """A served model, ready for requests."""

    label: str
    description: str  # the weights folder or the endpoint URL (for the report)
    openai_url: str  # OpenAI API root, ".../v1"
    native_url: str | None  # SGLang-native API root (/generate); None when the endpoint lacks it
    model: str
    api_key: str
    tokenizer_path: str | None  # a local tokenizer folder (tool-use builds token-level prompts with it)
    max_context_len: int | None
    weights_path: str | None  # local weights (KL needs them); None for an endpoint
    device: str | None = None
    dtype: str | None = None


def tokenizer_folder(path: str) -> str:
    """The folder holding `path`'s tokenizer (a PEFT adapter saved without one: its base model)."""
    folder = Path(path)
    if (folder / "tokenizer_config.json").is_file() or not (folder / "adapter_config.json").is_file():
        return str(folder)
    return str(json.loads((folder / "adapter_config.json").read_text())["base_model_name_or_path"])


@contextlib.contextmanager
def open_target(spec: ModelSpec, *, device: str = "auto", dtype: str = "auto",
                max_batch_size: int = 16) -> Iterator[Target]:
    """Serve local weights (or attach to an endpoint) for the duration of the block."""
    if spec.base_url is not None:
        yield attach_endpoint(spec)
        return
    with serve_local(spec, device=device, dtype=dtype, max_batch_size=max_batch_size) as target:
        yield target


@contextlib.contextmanager
def serve_local(spec: ModelSpec, *, device: str, dtype: str, max_batch_size: int) -> Iterator[Target]:
    import torch

    from openclaw.engines.hf_engine import HFEngine
    from openclaw.models import resolve_model_path
    from openclaw.server.app import create_app
    from openclaw.server.config import ServerConfig
    from openclaw.server.engine_loader import resolve_dtype
    from openclaw.server.runner import serve_in_background

    path = str(resolve_model_path(spec.model_path)) if spec.model_path is None else spec.model_path
    if not Path(path).exists():
        raise FileNotFoundError(f"--model-path {path} does not exist")
    path = str(Path(path).resolve())
    dev = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
    torch_dtype = resolve_dtype(dtype, dev)
    print(f"[{spec.label}] loading {path} on {dev} ({torch_dtype})", file=sys.stderr, flush=True)
    engine = HFEngine.load(path, dtype=torch_dtype, device=dev, max_batch_size=max_batch_size)
    server = serve_in_background(create_app(ServerConfig(), engine=engine))
    try:
        info = _model_info(server.base_url)
        yield Target(label=spec.label, description=path, openai_url=server.base_url + "/v1",
                     native_url=server.base_url, model=str(info.get("served_model_name") or path),
                     api_key="EMPTY", tokenizer_path=tokenizer_folder(path),
                     max_context_len=engine.max_context_len, weights_path=path, device=dev, dtype=torch_dtype)
    finally:
        server.stop()
        asyncio.run(engine.shutdown())


def attach_endpoint(spec: ModelSpec) -> Target:
    """An OpenAI-compatible endpoint. Its SGLang-native API (our server and SGLang serve one at the
    root) is detected with GET /get_model_info; tool-use needs it, the other families do not."""
    from openai import OpenAI

    assert spec.base_url is not None
    openai_url = spec.base_url.rstrip("/")
    if not openai_url.endswith("/v1"):
        openai_url += "/v1"
    root = openai_url[: -len("/v1")]
    api_key = spec.api_key or "EMPTY"
    client = OpenAI(base_url=openai_url, api_key=api_key, default_headers=EVAL_HEADERS)
    model = spec.model
    if model is None:
        listed = [m.id for m in client.models.list().data]
        if not listed:
            raise ValueError(f"{openai_url}/models lists no model; pass --model NAME")
        model = listed[0]
    info = _model_info(root, api_key)
    native = root if info else None
    reported = info.get("tokenizer_path") or info.get("model_path")
    tokenizer = spec.tokenizer or (tokenizer_folder(str(reported)) if reported and Path(str(reported)).is_dir() else None)
    max_ctx = info.get("max_context_length")
    return Target(label=spec.label, description=openai_url, openai_url=openai_url, native_url=native, model=model,
                  api_key=api_key, tokenizer_path=tokenizer, max_context_len=int(max_ctx) if max_ctx else None,
                  weights_path=None)


def _model_info(root: str, api_key: str | None = None) -> dict[str, Any]:
    """SGLang's /get_model_info, or {} when the server does not serve the native API."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key and api_key != "EMPTY" else {}
    try:
        r = httpx.get(root + "/get_model_info", headers=headers, timeout=30)
    except httpx.HTTPError:
        return {}
    if r.status_code != 200:
        return {}
    try:
        body = r.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
