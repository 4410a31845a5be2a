"""Point-to-point activation exchange between pipeline stages (GPipe-style schedule).

megatron's schedules (`forward_backward_pipelining_*`) hard-code CUDA tensors, so the actor
runs its own simple schedule: all micro-batches forward (stage s receives from s-1 and sends to
s+1), then all backward in reverse order (gradients travel s+1 -> s). Every rank of a pipeline
walks the micro-batches in the same order, so blocking send/recv cannot deadlock. Memory is
that of GPipe (activations of all micro-batches of one step are kept), fine for the model
sizes this path is exercised with on CPU; a GPU run at scale should keep micro-batches small.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def is_first() -> bool:
    from megatron.core import parallel_state as mpu

    return mpu.is_pipeline_first_stage()


def is_last() -> bool:
    from megatron.core import parallel_state as mpu

    return mpu.is_pipeline_last_stage()


def pp_size() -> int:
    from megatron.core import parallel_state as mpu

    return mpu.get_pipeline_model_parallel_world_size()


def recv_forward(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    from megatron.core import parallel_state as mpu

    buf = torch.empty(shape, dtype=dtype, device=device)
    dist.recv(buf, src=mpu.get_pipeline_model_parallel_prev_rank())
    return buf.requires_grad_(True)


def send_forward(t: torch.Tensor) -> None:
    from megatron.core import parallel_state as mpu

    dist.send(t.detach().contiguous(), dst=mpu.get_pipeline_model_parallel_next_rank())


def recv_backward(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    from megatron.core import parallel_state as mpu

    buf = torch.empty(shape, dtype=dtype, device=device)
    dist.recv(buf, src=mpu.get_pipeline_model_parallel_next_rank())
    return buf


def send_backward(grad: torch.Tensor) -> None:
    from megatron.core import parallel_state as mpu

    dist.send(grad.contiguous(), dst=mpu.get_pipeline_model_parallel_prev_rank())


def broadcast_from_last_stage(obj):
    """Send a picklable result of the last stage to every stage of this pipeline."""
    from megatron.core import parallel_state as mpu

    if pp_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=mpu.get_pipeline_model_parallel_last_rank(),
                               group=mpu.get_pipeline_model_parallel_group())
    return box[0]
