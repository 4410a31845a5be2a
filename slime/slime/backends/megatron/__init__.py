"""Megatron-core training backend (`--train-backend megatron`).

Modules: cpu_compat (the CPU shim), hf_config (HF config.json -> GPTSpec), model_builder
(GPTSpec -> megatron GPTModel), weights (HF <-> Megatron tensors, TP/PP aware), parallel
(process groups), optim (grad sync, clipping, optimizer), pipeline (stage-to-stage p2p),
options/args (flags), actor (MegatronTrainActor).
Importing this package does not import megatron-core; the actor module does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from slime.backends.megatron.actor import MegatronTrainActor as MegatronTrainActor


def __getattr__(name: str):
    if name == "MegatronTrainActor":
        from slime.backends.megatron.actor import MegatronTrainActor

        return MegatronTrainActor
    raise AttributeError(name)
