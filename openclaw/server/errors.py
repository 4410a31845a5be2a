"""OpenAI-shaped errors; they live in `openclaw.httpapi.errors` (the engine's API uses them too)."""

from openclaw.httpapi.errors import (
    OpenAIError,
    error_body,
    error_response,
    install_error_handlers,
    validation_error,
)

__all__ = ["OpenAIError", "error_body", "error_response", "install_error_handlers", "validation_error"]
