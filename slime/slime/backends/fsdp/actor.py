"""The train actor: one data-parallel rank holding the model, optimizer and scheduler.

Plain class so it runs in-process (tests, benchmarks) or inside a Ray actor (slime.ray).
Rollout data arrives as a list of Samples (every rank receives all of them); each optimizer
step takes the next `global_batch_size` samples and rank r trains on every world_size-th one.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from slime.backends.fsdp import model as model_lib
from slime.backends.fsdp.batching import MicroBatch, make_micro_batches
from slime.backends.fsdp.config import ActorConfig
from slime.backends.fsdp.logprobs import response_logits, token_log_probs
from slime.backends.fsdp.step_prefix import (
    MIN_STEP_PREFIX_TOKENS,
    StepPrefix,
    common_prefix_length,
    run_step_prefix,
)
from slime.utils.checkpoint import rank_state, restore_rng_state
from slime.utils.environment import env_value
from slime.utils.metrics import optimizer_step_metrics

logger = logging.getLogger(__name__)

LossFn = Callable[..., Any]


def _set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def _quiet_transformers() -> None:
    """No per-load/per-save progress bars from transformers in the training logs."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def init_distributed(rank: int, world_size: int, backend: str | None = None) -> None:
    """Join the process group (MASTER_ADDR/MASTER_PORT in the env). On GPU always (FSDP2 needs a
    device mesh even for one rank); on CPU only when there is more than one rank."""
    if dist.is_initialized():
        return
    cuda = torch.cuda.is_available()
    if world_size <= 1 and not cuda:
        return
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if env_value("MASTER_PORT") is None:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    dist.init_process_group(backend=backend or ("nccl" if cuda else "gloo"), rank=rank, world_size=world_size)


class FSDPTrainActor:
    def __init__(self, cfg: ActorConfig, args: Any = None, rank: int = 0, world_size: int = 1,
                 loss_fn: LossFn | None = None) -> None:
        self.cfg = cfg
        self.args = args
        self.rank = rank
        self.world_size = world_size
        init_distributed(rank, world_size)
        _quiet_transformers()
        self.device = torch.device(f"cuda:{torch.cuda.current_device()}") if torch.cuda.is_available() \
            else torch.device("cpu")
        _set_seed(cfg.seed)  # same init on every rank (LoRA A matrices are random)
        self.tokenizer = model_lib.load_tokenizer(cfg.model_path)
        self.model = model_lib.load_model(cfg, self.device)
        # FSDP2 on GPU; on CPU plain DP with an explicit gradient all-reduce (gloo has no
        # reduce-scatter, which FSDP2 needs)
        self.use_fsdp2 = self.device.type == "cuda" and dist.is_initialized()
        if self.use_fsdp2:
            model_lib.apply_fsdp2(self.model)
        self.ref_model = None
        if cfg.need_ref_log_probs and not hasattr(self.model, "disable_adapter"):
            # full fine-tuning: a frozen copy of the initial policy (LoRA needs none)
            self.ref_model = model_lib.load_frozen(cfg.ref_model_path or cfg.model_path, self.device)
        self.optimizer = model_lib.build_optimizer(cfg, self.model)
        self.scheduler = model_lib.build_scheduler(cfg, self.optimizer)
        # --offload-optimizer-state: Adam's moments live in host memory and visit the GPU only for
        # optimizer.step() (they are created there on the first step, then moved out).
        self.offload_optimizer_state = cfg.offload_optimizer_state and self.device.type == "cuda"
        if cfg.offload_optimizer_state and self.device.type != "cuda" and rank == 0:
            logger.warning("--offload-optimizer-state: training runs on the CPU, so the optimizer state is "
                           "already in CPU memory; nothing to move")
        self.loss_fn = loss_fn
        self.global_step = 0
        _set_seed(cfg.seed + rank)

    # ------------------------------------------------------------------ forward helpers
    def _autocast(self):
        if self.cfg.bf16:
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _forward(self, mb: MicroBatch, model: torch.nn.Module | None = None,
                 prefix: StepPrefix | None = None) -> torch.Tensor:
        """Logits of positions first_needed .. T-1 only (`logits_to_keep`): the lm_head matmul
        and its [*, V] output are skipped for prompt positions no response token depends on.
        The returned tensor's position 0 is sequence position `mb.logits_offset`. With a step
        `prefix` the rows' first prefix.length tokens are read from its KV cache, not run."""
        model = model or self.model
        width = mb.input_ids.shape[1]
        mb.logits_offset = max(0, min(mb.prompt_lengths) - 1) if mb.prompt_lengths else 0
        shared = mb.shared_prompt_length() if self._can_share_prompt() else 0
        with self._autocast():
            if shared:
                return self._forward_shared_prompt(mb, model, shared, prefix)
            if prefix is None:
                out = model(input_ids=mb.input_ids.to(self.device), attention_mask=mb.attention_mask.to(self.device),
                            use_cache=False, logits_to_keep=width - mb.logits_offset)
                return out.logits
            rows, start = mb.input_ids.shape[0], prefix.length
            positions = torch.arange(start, width, device=self.device).unsqueeze(0).expand(rows, -1)
            out = model(input_ids=mb.input_ids[:, start:].to(self.device), attention_mask=mb.attention_mask.to(self.device),
                        position_ids=positions, past_key_values=prefix.cache(rows), use_cache=True,
                        logits_to_keep=width - mb.logits_offset)
        return out.logits

    def _step_prefix(self, model: torch.nn.Module, tokens: list[list[int]], response_lengths: list[int],
                     num_micro_batches: int) -> StepPrefix | None:
        """Run the tokens all of a step's rows share once (see step_prefix), when it pays: two or
        more micro-batches, a plain KV cache, one rank and no FSDP2 (FSDP2's weights are gathered
        only for a forward's own backward, not for the prefix's, run later: step_prefix.py)."""
        if (not self.cfg.step_prefix_forward or num_micro_batches < 2 or self.world_size > 1
                or self.use_fsdp2 or not self._kv_cache_usable()):
            return None
        n = common_prefix_length(tokens, response_lengths)
        if n < MIN_STEP_PREFIX_TOKENS:
            return None
        with self._autocast():
            return run_step_prefix(model, tokens[0][:n], self.device)

    def _can_share_prompt(self) -> bool:
        return self.cfg.shared_prompt_forward and self._kv_cache_usable()

    def _kv_cache_usable(self) -> bool:
        if self.cfg.gradient_checkpointing and self.model.training:
            return False  # HF turns the KV cache off under activation checkpointing in training mode
        # a plain attention KV cache only (no recurrent / linear-attention layers to repeat)
        layer_types = getattr(self.model.config, "layer_types", None) or ()
        return all(t in ("full_attention", "sliding_attention") for t in layer_types)

    def _forward_shared_prompt(self, mb: MicroBatch, model: torch.nn.Module, p: int,
                               prefix: StepPrefix | None = None) -> torch.Tensor:
        """The rows share their first `p` tokens: run them once (batch 1; after the step prefix's
        cache if there is one), repeat the KV cache over the rows and run only the responses on it.
        Gradients flow through the repeated cache into the single prompt pass, so this is the same
        computation as the padded forward (up to fp rounding) with the prompt's FLOPs divided by
        the number of rows."""
        from transformers import DynamicCache

        rows = mb.input_ids.shape[0]
        ids = mb.input_ids.to(self.device)
        mask = mb.attention_mask.to(self.device)
        start = prefix.length if prefix is not None else 0
        cache = prefix.cache(1) if prefix is not None else DynamicCache()
        head = model(input_ids=ids[:1, start:p], attention_mask=mask[:1, :p],
                     position_ids=torch.arange(start, p, device=self.device).unsqueeze(0), past_key_values=cache,
                     use_cache=True, logits_to_keep=1)
        cache.batch_repeat_interleave(rows)
        positions = torch.arange(p, ids.shape[1], device=self.device).unsqueeze(0).expand(rows, -1)
        tail = model(input_ids=ids[:, p:], attention_mask=mask, position_ids=positions, past_key_values=cache,
                     use_cache=True)
        return torch.cat([head.logits.expand(rows, -1, -1), tail.logits], dim=1)

    def _micro_batches(self, tokens: list[list[int]], response_lengths: list[int]) -> list[MicroBatch]:
        return make_micro_batches(tokens, response_lengths, self.tokenizer.pad_token_id,
                                  dynamic=self.cfg.use_dynamic_batch_size, max_tokens=self.cfg.max_tokens_per_gpu,
                                  micro_batch_size=self.cfg.micro_batch_size)

    @torch.no_grad()
    def compute_log_probs(self, tokens: list[list[int]], response_lengths: list[int],
                          reference: bool = False) -> list[list[float]]:
        """Response log-probs under the current policy, or the reference (with LoRA: the same
        model with adapters disabled, no second copy; full fine-tuning: the frozen copy loaded
        when a KL term is configured)."""
        out: list[list[float] | None] = [None] * len(tokens)
        ctx = contextlib.nullcontext()
        model = self.model
        if reference:
            if self.ref_model is not None:
                model = self.ref_model
            elif hasattr(self.model, "disable_adapter"):
                ctx = self.model.disable_adapter()
            else:
                raise ValueError("reference log-probs need LoRA or --use-kl-loss/--kl-coef (which load a reference)")
        was_training = self.model.training
        self.model.eval()  # no dropout: log-probs must be deterministic
        try:
            with ctx:
                mbs = self._micro_batches(tokens, response_lengths)
                prefix = self._step_prefix(model, tokens, response_lengths, len(mbs))
                for mb in mbs:
                    logits = self._forward(mb, model, prefix)
                    lp, _ = token_log_probs(response_logits(logits, mb.prompt_lengths, mb.response_lengths,
                                                            mb.logits_offset),
                                            mb.input_ids.to(self.device), mb.prompt_lengths, mb.response_lengths,
                                            self.cfg.temperature)
                    for i, row in zip(mb.indices, lp, strict=True):
                        out[i] = row.float().cpu().tolist()
        finally:
            self.model.train(was_training)
        return out  # type: ignore[return-value]

    # ------------------------------------------------------------------ training
    def shard_for_step(self, n_samples: int, step: int, global_batch_size: int) -> list[int]:
        start = step * global_batch_size
        indices = list(range(start, min(n_samples, start + global_batch_size)))
        return indices[self.rank :: self.world_size]

    def _all_reduce_grads(self) -> None:
        if self.world_size <= 1 or self.use_fsdp2:  # FSDP2 reduce-scatters in backward
            return
        grads = [p.grad for p in self.model.parameters() if p.requires_grad and p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)  # losses are pre-scaled by global denominators: SUM is right
        offset = 0
        for g in grads:
            n = g.numel()
            g.copy_(flat[offset : offset + n].view_as(g))
            offset += n

    def _sync_num_micro_batches(self, n: int) -> int:
        if self.world_size <= 1:
            return n
        t = torch.tensor([n], dtype=torch.long, device=self.device if self.use_fsdp2 else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    def _reduce_metrics(self, sums: dict[str, float]) -> dict[str, float]:
        if self.world_size <= 1 or not sums:
            return sums
        keys = sorted(sums)
        t = torch.tensor([sums[k] for k in keys], dtype=torch.float64,
                         device=self.device if self.use_fsdp2 else "cpu")
        dist.all_reduce(t)
        return dict(zip(keys, t.tolist(), strict=True))

    def train_step(self, batch: dict[str, list], indices: list[int], denominators: dict[str, float],
                   loss_call: Callable[[dict[str, Any], torch.Tensor, Callable], tuple[torch.Tensor, dict]]) -> dict[str, float]:
        """One optimizer step over this rank's `indices` of `batch` (per-sample lists).

        `loss_call(mb_batch, logits, reducer) -> (loss, metrics)`; `reducer` divides by the
        *global* step totals (denominators), so the losses and metrics of all micro-batches
        and ranks simply add up to the step's mean.
        """
        from slime.algorithms.reduction import make_reducer

        t0 = time.perf_counter()
        tokens = [batch["tokens"][i] for i in indices]
        resp = [batch["response_lengths"][i] for i in indices]
        mbs = self._micro_batches(tokens, resp) if indices else []
        n_target = self._sync_num_micro_batches(len(mbs))
        metric_sums: dict[str, float] = {}
        n_tokens = 0
        self.optimizer.zero_grad(set_to_none=True)
        phases = {"_forward_s": 0.0, "_backward_s": 0.0, "_optimizer_s": 0.0}  # this rank's own seconds
        prefix = self._step_prefix(self.model, tokens, resp, len(mbs))
        for k in range(n_target):
            if k < len(mbs):
                mb, weight = mbs[k], 1.0
            elif mbs:  # keep collective call counts equal across ranks (FSDP2): zero-weight re-run
                mb, weight = mbs[-1], 0.0
            else:
                continue
            rows = [indices[i] for i in mb.indices]
            t = time.perf_counter()
            logits = self._forward(mb, prefix=prefix)
            mb_batch = self._micro_batch_dict(batch, rows, mb, logits)
            reducer = make_reducer(mb_batch["loss_masks"], per_token=bool(denominators.get("per_token", False)),
                                   num_samples=denominators["samples"], num_tokens=denominators["tokens"])
            loss, metrics = loss_call(mb_batch, logits, reducer)
            phases["_forward_s"] += time.perf_counter() - t
            t = time.perf_counter()
            (loss * weight).backward()
            phases["_backward_s"] += time.perf_counter() - t
            if weight:
                n_tokens += mb.num_tokens
                for key, value in metrics.items():
                    metric_sums[key] = metric_sums.get(key, 0.0) + float(value)
        if prefix is not None:
            t = time.perf_counter()
            prefix.backward()
            phases["_backward_s"] += time.perf_counter() - t
        t = time.perf_counter()
        self._all_reduce_grads()
        params = [p for p in self.model.parameters() if p.requires_grad]
        max_norm = self.cfg.clip_grad if self.cfg.clip_grad > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        if hasattr(grad_norm, "full_tensor"):
            grad_norm = grad_norm.full_tensor()
        lr = self.optimizer.param_groups[0]["lr"]
        if self.offload_optimizer_state:
            self._move_optimizer_state(self.device)
        self.optimizer.step()
        if self.offload_optimizer_state:
            self._move_optimizer_state(torch.device("cpu"))
        self.scheduler.step()
        phases["_optimizer_s"] = time.perf_counter() - t
        self.global_step += 1
        metric_sums["_tokens"] = float(n_tokens)
        return optimizer_step_metrics(self._reduce_metrics(metric_sums), grad_norm, lr, t0, phases)

    def _micro_batch_dict(self, batch: dict[str, list], rows: list[int], mb: MicroBatch,
                          logits: torch.Tensor) -> dict[str, Any]:
        """The loss function's batch: per-token values right-padded to [B, R] (R = longest
        response in the micro-batch), as slime.algorithms.loss documents."""
        dev = self.device
        # entropy is only differentiated when it is part of the loss (--entropy-coef > 0)
        entropy_grad = float(getattr(self.args, "entropy_coef", 0.0) or 0.0) != 0.0
        lp, ent = token_log_probs(response_logits(logits, mb.prompt_lengths, mb.response_lengths, mb.logits_offset),
                                  mb.input_ids.to(dev), mb.prompt_lengths, mb.response_lengths,
                                  self.cfg.temperature, with_entropy=True, entropy_grad=entropy_grad)
        width = max(mb.response_lengths) if mb.response_lengths else 0

        def pad(values: list) -> torch.Tensor:
            out = torch.zeros((len(values), width), dtype=torch.float32, device=dev)
            for r, v in enumerate(values):
                t = torch.as_tensor(v, dtype=torch.float32, device=dev)
                out[r, : t.numel()] = t
            return out

        out: dict[str, Any] = {
            "log_probs": torch.nn.utils.rnn.pad_sequence(lp, batch_first=True) if lp else pad([]),
            "entropy": torch.nn.utils.rnn.pad_sequence(ent, batch_first=True) if ent else pad([]),
            "response_lengths": list(mb.response_lengths),
            "prompt_lengths": list(mb.prompt_lengths),
            "tokens": [torch.tensor(batch["tokens"][i], dtype=torch.long, device=dev) for i in rows],
            "total_lengths": [len(batch["tokens"][i]) for i in rows],
        }
        for key in ("loss_masks", "advantages", "old_log_probs", "ref_log_probs", "rollout_log_probs",
                    "teacher_log_probs"):
            values = batch.get(key)
            if values is not None and all(values[i] is not None for i in rows):
                out[key] = pad([values[i] for i in rows])
        parts = batch.get("advantage_parts")
        if parts:
            out["advantage_parts"] = {name: pad([v[i] for i in rows]) for name, v in parts.items()}
        if "rewards" in batch:
            out["rewards"] = torch.tensor([batch["rewards"][i] for i in rows], dtype=torch.float32, device=dev)
        if "sample_weights" in batch:
            out["sample_weights"] = torch.tensor([batch["sample_weights"][i] for i in rows], dtype=torch.float32, device=dev)
        return out

    # ------------------------------------------------------------------ state
    def save_hf(self, folder: str | Path) -> None:
        """Write HF-loadable weights (full model) or the PEFT adapter to `folder` (rank 0
        writes; all ranks must call it under FSDP2 because the state dict is gathered)."""
        folder = Path(folder)
        state = None
        if self.use_fsdp2:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            state = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if self.rank != 0:
            return
        folder.mkdir(parents=True, exist_ok=True)
        kwargs = {"state_dict": state} if state is not None else {}
        self.model.save_pretrained(str(folder), safe_serialization=True, **kwargs)
        self.tokenizer.save_pretrained(str(folder))

    def trainer_state(self) -> dict[str, Any]:
        """Optimizer, scheduler and RNG state of this rank (torch.save-able)."""
        return rank_state(self.optimizer, self.scheduler, self.global_step)

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.global_step = int(state.get("global_step", 0))
        restore_rng_state(state.get("rng"))

    def _move_optimizer_state(self, device: torch.device) -> None:
        for state in self.optimizer.state.values():
            for k, v in state.items():
                if torch.is_tensor(v) and v.device != device:
                    state[k] = v.to(device, non_blocking=device.type == "cpu")
        if device.type == "cpu":
            torch.cuda.synchronize(self.device)  # the copies must land before the GPU memory is reused
            torch.cuda.empty_cache()

    def optimizer_state_devices(self) -> set[str]:
        """Device types holding the optimizer's moment tensors (what --offload-optimizer-state
        promises). Adam's scalar step counter is left out: torch keeps it on the CPU either way."""
        return {v.device.type for st in self.optimizer.state.values() for v in st.values()
                if torch.is_tensor(v) and v.dim() > 0}

    def offload(self) -> None:
        """Colocated mode: free accelerator memory for the engine during rollout."""
        if self.device.type != "cuda":
            return  # CPU: engine and trainer share host RAM; nothing to move
        self.model.to("cpu")
        for state in self.optimizer.state.values():
            for k, v in state.items():
                if torch.is_tensor(v):
                    state[k] = v.to("cpu")
        torch.cuda.empty_cache()

    def onload(self) -> None:
        if self.device.type != "cuda":
            return
        self.model.to(self.device)
        if self.offload_optimizer_state:
            return  # the state stays in host memory until the next optimizer step
        for state in self.optimizer.state.values():
            for k, v in state.items():
                if torch.is_tensor(v):
                    state[k] = v.to(self.device)

    def shutdown(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()

