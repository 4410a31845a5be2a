"""Model files: the embedded default (SmolLM2-135M-Instruct) and tiny random test models."""

from openclaw.models.embedded import (
    EMBEDDED_MODEL_NAME,
    EmbeddedModelMissing,
    default_model_path,
    embedded_model_dir,
    prepare_embedded_model,
    resolve_model_path,
)
from openclaw.models.tiny import build_tiny_model

__all__ = [
    "EMBEDDED_MODEL_NAME",
    "EmbeddedModelMissing",
    "build_tiny_model",
    "default_model_path",
    "embedded_model_dir",
    "prepare_embedded_model",
    "resolve_model_path",
]
