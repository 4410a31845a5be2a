"""Gradient synchronisation, TP-aware clipping and the optimizer for the Megatron actor.

megatron's own optimizer stack (`get_megatron_optimizer`, `clip_grads`, grad scaler) allocates
with `device="cuda"` in many places, so the actor uses torch.optim over the megatron
parameters and does megatron's bookkeeping itself (the parts `finalize_model_grads` does):
- data-parallel: all-reduce (SUM; losses are pre-normalised by global totals) over the DP group;
- sequence parallel: norms see only their sequence slice, so their grads are all-reduced
  over the TP group (params megatron marks with `sequence_parallel=True`);
- q/k layernorm (Qwen3): replicated weights applied to each rank's own heads only, so their
  grads are partial per TP rank and are summed over the TP group as well;
- tied embeddings with PP>1: first-stage embedding and last-stage output copy all-reduce
  their grads over megatron's embedding group (params marked `shared_embedding`);
- grad norm: squares of TP-sharded params from every TP rank plus replicated params once,
  summed over the model-parallel group, so every rank clips by the same global norm.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist


def _flat_all_reduce(grads: list[torch.Tensor], group) -> None:
    if not grads:
        return
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, group=group)
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset : offset + n].view_as(g))
        offset += n


def finalize_grads(model: torch.nn.Module) -> None:
    """Make every rank's grads the full-batch grads of its own shard (see module doc)."""
    from megatron.core import parallel_state as mpu

    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    params = [p for _, p in named]
    for p in params:
        if p.grad is None:  # a rank that saw no tokens still joins the collectives
            p.grad = torch.zeros_like(p)
    if mpu.get_data_parallel_world_size() > 1:
        _flat_all_reduce([p.grad for p in params], mpu.get_data_parallel_group())
    if mpu.get_tensor_model_parallel_world_size() > 1:
        sp = [p.grad for n, p in named
              if getattr(p, "sequence_parallel", False) or "q_layernorm" in n or "k_layernorm" in n]
        _flat_all_reduce(sp, mpu.get_tensor_model_parallel_group())
    if mpu.get_pipeline_model_parallel_world_size() > 1:
        shared = [p.grad for p in params if getattr(p, "shared_embedding", False)]
        if shared and mpu.is_rank_in_embedding_group():
            _flat_all_reduce(shared, mpu.get_embedding_group())


def _counts_for_norm(p: torch.nn.Parameter, tp_rank: int) -> bool:
    if getattr(p, "shared", False):  # last stage's copy of a tied embedding: counted on stage 0
        return False
    return bool(getattr(p, "tensor_model_parallel", False)) or tp_rank == 0


def clip_grad_norm(model: torch.nn.Module, max_norm: float) -> float:
    """Global L2 norm of the model's grads across TP/PP ranks; clips in place when max_norm > 0."""
    from megatron.core import parallel_state as mpu

    tp_rank = mpu.get_tensor_model_parallel_rank()
    params = [p for p in model.parameters() if p.requires_grad and p.grad is not None]
    sq = torch.zeros((), dtype=torch.float64)
    for p in params:
        if _counts_for_norm(p, tp_rank):
            sq += p.grad.detach().double().pow(2).sum().cpu()
    if mpu.get_model_parallel_group() is not None and dist.get_world_size(mpu.get_model_parallel_group()) > 1:
        dist.all_reduce(sq, group=mpu.get_model_parallel_group())
    norm = math.sqrt(float(sq))
    if max_norm > 0 and norm > max_norm:
        coef = max_norm / (norm + 1e-6)
        for p in params:
            p.grad.mul_(coef)
    return norm


class MasterWeightAdamW:
    """AdamW over fp32 master copies of the model's parameters.

    Used when the model weights are bf16 (`--bf16`: megatron keeps bf16 params and fp32 master
    weights, as its mixed-precision optimizer does) and for `--optimizer-cpu-offload`, where the
    masters and Adam moments live in host memory: after backward the grads are copied to the
    masters' device, the step runs there, and the updated weights are copied back into the
    (accelerator) parameters. On a CPU-only machine the offload copies are host to host, so
    the code path is the one a GPU run takes.
    """

    def __init__(self, params: list[torch.nn.Parameter], master_device: torch.device | str | None = None,
                 **adam_kwargs) -> None:
        self.params = list(params)
        self.offloaded = master_device is not None and torch.device(master_device).type == "cpu"
        self.master = [p.detach().to(master_device or p.device, dtype=torch.float32, copy=True).requires_grad_(True)
                       for p in self.params]
        self.inner = torch.optim.AdamW(self.master, **adam_kwargs)

    @property
    def param_groups(self):
        return self.inner.param_groups

    @property
    def state(self):
        return self.inner.state

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None
        self.inner.zero_grad(set_to_none=set_to_none)

    @torch.no_grad()
    def step(self) -> None:
        for p, m in zip(self.params, self.master, strict=True):
            m.grad = None if p.grad is None else p.grad.detach().to(m.device, dtype=torch.float32)
        self.inner.step()
        for p, m in zip(self.params, self.master, strict=True):
            p.copy_(m.to(p.device, dtype=p.dtype))

    @torch.no_grad()
    def to(self, device: torch.device | str) -> None:
        """Move masters and Adam moments (colocated offload/onload; no-op when offloaded to CPU)."""
        if self.offloaded:
            return
        for m in self.master:
            m.data = m.data.to(device)
        for state in self.inner.state.values():
            for k, v in state.items():
                if torch.is_tensor(v) and k != "step":
                    state[k] = v.to(device)

    def state_dict(self) -> dict:
        # the fp32 masters are part of the state: bf16 params alone lose the low bits
        return {"inner": self.inner.state_dict(), "master": [m.detach().cpu() for m in self.master]}

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state["inner"])
        with torch.no_grad():
            for m, saved in zip(self.master, state["master"], strict=True):
                m.copy_(saved.to(m.device))


def build_optimizer(params: list[torch.nn.Parameter], *, lr: float, betas: tuple[float, float], eps: float,
                    weight_decay: float, cpu_offload: bool):
    """AdamW; with fp32 masters when the params are not fp32 or the state is offloaded."""
    if not params:
        raise ValueError("model has no trainable parameters")
    kwargs = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if cpu_offload:
        return MasterWeightAdamW(params, master_device="cpu", **kwargs)
    if any(p.dtype != torch.float32 for p in params):
        return MasterWeightAdamW(params, **kwargs)
    return torch.optim.AdamW(params, **kwargs)
