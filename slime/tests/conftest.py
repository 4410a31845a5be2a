"""Fixtures shared by slime's tests."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

# The engine program slime's end-to-end tests start for --rollout-backend embedded: slime ships none,
# so its tests name the runtime's (a program name, never an import).
ENGINE_COMMAND = "python -m openclaw.engines.serve"


@pytest.fixture(scope="session")
def engine_command() -> str:
    return ENGINE_COMMAND


@pytest.fixture
def loss_batch() -> Callable[[], dict[str, Any]]:
    """A fresh two-sample loss batch per call (tensors a test may modify):
    sample 0: two tokens, ratios [1.5, 1.0], A = +1, reward 1; sample 1: one token (the second is
    padding), ratio .5, A = -1, reward 0."""

    def make() -> dict[str, Any]:
        old = torch.tensor([[-1.0, -2.0], [-1.0, -3.0]])
        new = (old + torch.tensor([[math.log(1.5), 0.0], [-math.log(2.0), 0.0]])).requires_grad_(True)
        return {
            "log_probs": new,
            "old_log_probs": old,
            "advantages": torch.tensor([[1.0, 1.0], [-1.0, 0.0]]),
            "loss_masks": torch.tensor([[1, 1], [1, 0]]),
            "rewards": torch.tensor([1.0, 0.0]),
        }

    return make
