"""FSDP backend: HF causal LMs trained with data parallelism.

GPU: FSDP2 (`fully_shard`) over NCCL. CPU: plain data parallelism over gloo with an explicit
gradient all-reduce (FSDP2 needs reduce-scatter, which gloo lacks; see README).
"""

from slime.backends.fsdp.actor import FSDPTrainActor
from slime.backends.fsdp.config import ActorConfig

__all__ = ["ActorConfig", "FSDPTrainActor"]
