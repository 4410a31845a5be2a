"""Process groups for the Megatron backend: torch.distributed + megatron parallel_state.

CPU: gloo, after `apply_cpu_compat()`. GPU: nccl, one device per local rank.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from slime.backends.megatron.cpu_compat import apply_cpu_compat
from slime.utils.environment import env_value


@dataclass(frozen=True)
class ParallelLayout:
    tp: int = 1
    pp: int = 1
    sequence_parallel: bool = False

    def validate(self, world_size: int) -> None:
        if self.tp < 1 or self.pp < 1:
            raise ValueError(f"tensor/pipeline parallel sizes must be >= 1 (got TP={self.tp}, PP={self.pp})")
        if world_size % (self.tp * self.pp):
            raise ValueError(f"world size {world_size} is not divisible by TP*PP={self.tp * self.pp}")
        if self.sequence_parallel and self.tp == 1:
            raise ValueError("--sequence-parallel needs --tensor-model-parallel-size > 1")

    def dp(self, world_size: int) -> int:
        return world_size // (self.tp * self.pp)


def init_megatron(rank: int, world_size: int, layout: ParallelLayout, seed: int) -> torch.device:
    """Join the default process group (MASTER_ADDR/MASTER_PORT from the env) and build
    megatron's TP/PP/DP groups. Returns the device this rank computes on."""
    layout.validate(world_size)
    on_cpu = apply_cpu_compat()
    if on_cpu:
        device = torch.device("cpu")
    else:
        local_rank = int(env_value("LOCAL_RANK") or rank % max(1, torch.cuda.device_count()))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29500")
        dist.init_process_group("gloo" if on_cpu else "nccl", rank=rank, world_size=world_size)
    from megatron.core import parallel_state as mpu
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed

    if not mpu.model_parallel_is_initialized():
        mpu.initialize_model_parallel(tensor_model_parallel_size=layout.tp,
                                      pipeline_model_parallel_size=layout.pp)
    torch.manual_seed(seed)
    model_parallel_cuda_manual_seed(seed)
    return device


def destroy_megatron() -> None:
    from megatron.core import parallel_state as mpu

    if mpu.model_parallel_is_initialized():
        mpu.destroy_model_parallel()
    if dist.is_initialized():
        dist.destroy_process_group()
