"""The Megatron train actor: the same public surface as `slime.backends.fsdp.FSDPTrainActor`
(compute_log_probs, shard_for_step, train_step, save_hf, trainer_state, load_trainer_state,
offload, onload, shutdown), backed by a megatron-core GPTModel with TP/PP/SP.

Data: the generic train loop hands rank r its own sample indices. Ranks of one model replica
(its TP x PP ranks) must see identical micro-batches, so the actor takes the union of the
indices of its model-parallel group; replicas (DP ranks) see disjoint unions and meet only in
the gradient all-reduce. Log-probs come out of the last pipeline stage and are broadcast back.
Losses run on full-vocabulary logits (gathered over TP), so the very same loss functions,
built-in or custom, run under both backends.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from slime.backends.fsdp.batching import MicroBatch, make_micro_batches
from slime.backends.fsdp.config import ActorConfig
from slime.backends.fsdp.logprobs import response_logits, token_log_probs
from slime.backends.megatron import pipeline as pp_comm
from slime.backends.megatron.hf_config import GPTSpec, spec_from_hf
from slime.backends.megatron.model_builder import BuildOptions, build_gpt_model
from slime.backends.megatron.optim import build_optimizer, clip_grad_norm, finalize_grads
from slime.backends.megatron.options import MegatronOptions
from slime.backends.megatron.parallel import destroy_megatron, init_megatron
from slime.backends.megatron.weights import export_hf_state_dict, load_hf_into_model, save_hf_folder
from slime.utils.checkpoint import rank_state, restore_rng_state
from slime.utils.metrics import optimizer_step_metrics

LOSS_CALL = Callable[[dict[str, Any], torch.Tensor, Callable], tuple[torch.Tensor, dict]]


class MegatronUnsupported(ValueError):
    """A requested feature the Megatron backend cannot run (raised at start-up, never ignored)."""


def check_supported(cfg: ActorConfig, model_path: str | Path) -> None:
    """Start-up refusal of what this backend cannot do, with the way out."""
    if cfg.use_lora or (Path(model_path) / "adapter_config.json").is_file():
        raise MegatronUnsupported(
            "LoRA is not implemented for --train-backend megatron; use --train-backend fsdp "
            "(LoRA adapters via peft, exported in PEFT format)")
    if cfg.need_ref_log_probs:
        raise MegatronUnsupported(
            "--use-kl-loss / --kl-coef need reference log-probs, which the Megatron backend does not "
            "keep (no second model copy); use --train-backend fsdp with --use-lora, or drop the KL term")


def _set_seed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


class MegatronTrainActor:
    def __init__(self, cfg: ActorConfig, args: Any = None, rank: int = 0, world_size: int = 1,
                 loss_fn: Callable | None = None, options: MegatronOptions | None = None) -> None:
        from slime.backends.fsdp import model as hf_model_lib

        self.cfg = cfg
        self.args = args
        self.options = options or MegatronOptions.from_args(args)
        self.rank = rank
        self.world_size = world_size
        check_supported(cfg, cfg.model_path)
        self.device = init_megatron(rank, world_size, self.options.layout, cfg.seed)
        from megatron.core import parallel_state as mpu

        self.mpu = mpu
        self.spec: GPTSpec = spec_from_hf(cfg.model_path, self.options.model_overrides)
        self.tokenizer = hf_model_lib.load_tokenizer(cfg.model_path)
        # --bf16: bf16 weights and activations with fp32 master weights in the optimizer
        # (megatron's mixed precision; autocast does not reach megatron's custom autograd
        # functions, whose backward would mix bf16 grads with fp32 weights)
        self.dtype = torch.bfloat16 if cfg.bf16 else torch.float32
        self.model = build_gpt_model(self.spec, self.options.layout,
                                     BuildOptions(params_dtype=self.dtype, bf16=cfg.bf16,
                                                  recompute_activations=self.options.recompute_activations),
                                     device=self.device)
        load_hf_into_model(self.model, self.spec, cfg.model_path)
        self.model.train()
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = build_optimizer(params, lr=cfg.lr, betas=(cfg.adam_beta1, cfg.adam_beta2), eps=cfg.adam_eps,
                                         weight_decay=cfg.weight_decay, cpu_offload=self.options.optimizer_cpu_offload)
        self.scheduler = hf_model_lib.build_scheduler(cfg, getattr(self.optimizer, "inner", self.optimizer))
        self.loss_fn = loss_fn
        self.global_step = 0
        _set_seed(cfg.seed + rank)

    # ------------------------------------------------------------------ layout helpers
    @property
    def dp_rank(self) -> int:
        return self.mpu.get_data_parallel_rank()

    @property
    def dp_size(self) -> int:
        return self.mpu.get_data_parallel_world_size()

    def _mp_union(self, items: list) -> tuple[list, int, int]:
        """Concatenate `items` over this rank's model-parallel group (TP x PP), in rank order.
        Returns (union, start, end): this rank's items are union[start:end]."""
        group = self.mpu.get_model_parallel_group()
        size = dist.get_world_size(group) if dist.is_initialized() else 1
        if size == 1:
            return list(items), 0, len(items)
        parts: list = [None] * size
        dist.all_gather_object(parts, list(items), group=group)
        me = dist.get_rank(group)
        start = sum(len(p) for p in parts[:me])
        return [x for p in parts for x in p], start, start + len(items)

    def _micro_batches(self, tokens: list[list[int]], response_lengths: list[int]) -> list[MicroBatch]:
        return make_micro_batches(tokens, response_lengths, self.tokenizer.pad_token_id,
                                  dynamic=self.cfg.use_dynamic_batch_size, max_tokens=self.cfg.max_tokens_per_gpu,
                                  micro_batch_size=self.cfg.micro_batch_size)

    def _padded_ids(self, mb: MicroBatch) -> torch.Tensor:
        """Sequence parallel splits the sequence over TP ranks: right-pad to a multiple of TP
        (causal attention keeps real tokens independent of trailing padding)."""
        ids = mb.input_ids
        tp = self.options.tp
        if self.options.sequence_parallel and ids.shape[1] % tp:
            extra = tp - ids.shape[1] % tp
            ids = torch.nn.functional.pad(ids, (0, extra), value=self.tokenizer.pad_token_id)
        return ids.to(self.device)

    def _hidden_shape(self, ids: torch.Tensor) -> tuple[int, int, int]:
        seq = ids.shape[1] // (self.options.tp if self.options.sequence_parallel else 1)
        return (seq, ids.shape[0], self.spec.hidden_size)

    def _stage_forward(self, mb: MicroBatch, input_tensor: torch.Tensor | None) -> torch.Tensor:
        """This stage's output: full-vocab logits [B, T, V] on the last stage, else hidden states."""
        ids = self._padded_ids(mb)
        if not pp_comm.is_first():
            self.model.set_input_tensor(input_tensor)
        positions = torch.arange(ids.shape[1], device=self.device).unsqueeze(0).expand_as(ids)
        out = self.model(ids, positions, attention_mask=None)
        if pp_comm.is_last():
            return out[:, : mb.input_ids.shape[1], : self.spec.vocab_size]
        return out

    def _forward_pass(self, mbs: list[MicroBatch], on_logits: Callable[[int, MicroBatch, torch.Tensor], Any],
                      keep_graph: bool) -> list:
        """Forward all micro-batches through this pipeline; `on_logits` runs on the last stage.
        Returns per micro-batch (input_tensor, stage_output or on_logits result)."""
        saved = []
        for k, mb in enumerate(mbs):
            x = None
            if not pp_comm.is_first():
                x = pp_comm.recv_forward(self._hidden_shape(self._padded_ids(mb)), self.dtype, self.device)
                if not keep_graph:
                    x = x.detach()
            out = self._stage_forward(mb, x)
            if not pp_comm.is_last():
                pp_comm.send_forward(out)
                saved.append((x, out if keep_graph else None))
            else:
                saved.append((x, on_logits(k, mb, out)))
        return saved

    # ------------------------------------------------------------------ log-probs
    @torch.no_grad()
    def compute_log_probs(self, tokens: list[list[int]], response_lengths: list[int],
                          reference: bool = False) -> list[list[float]]:
        if reference:
            raise MegatronUnsupported("reference log-probs are not available with --train-backend megatron")
        pairs, start, end = self._mp_union(list(zip(tokens, response_lengths, strict=True)))
        all_tokens = [list(t) for t, _ in pairs]
        all_resp = [int(r) for _, r in pairs]
        out: list[list[float] | None] = [None] * len(pairs)
        was_training = self.model.training
        self.model.eval()
        try:
            mbs = self._micro_batches(all_tokens, all_resp) if pairs else []

            def on_logits(_k: int, mb: MicroBatch, logits: torch.Tensor) -> None:
                lp, _ = token_log_probs(response_logits(logits, mb.prompt_lengths, mb.response_lengths),
                                        mb.input_ids.to(self.device), mb.prompt_lengths, mb.response_lengths,
                                        self.cfg.temperature)
                for i, row in zip(mb.indices, lp, strict=True):
                    out[i] = row.float().cpu().tolist()

            self._forward_pass(mbs, on_logits, keep_graph=False)
        finally:
            self.model.train(was_training)
        result = pp_comm.broadcast_from_last_stage(out if pp_comm.is_last() else None)
        return result[start:end]

    # ------------------------------------------------------------------ training
    def shard_for_step(self, n_samples: int, step: int, global_batch_size: int) -> list[int]:
        start = step * global_batch_size
        indices = list(range(start, min(n_samples, start + global_batch_size)))
        return indices[self.rank :: self.world_size]

    def train_step(self, batch: dict[str, list], indices: list[int], denominators: dict[str, float],
                   loss_call: LOSS_CALL) -> dict[str, float]:
        """One optimizer step; same contract as FSDPTrainActor.train_step (losses normalised
        by the global step totals in `denominators`, so grads of micro-batches and replicas add)."""
        from slime.algorithms.reduction import make_reducer
        from slime.backends.fsdp.actor import FSDPTrainActor

        t0 = time.perf_counter()
        union, _, _ = self._mp_union(list(indices))
        tokens = [batch["tokens"][i] for i in union]
        resp = [batch["response_lengths"][i] for i in union]
        mbs = self._micro_batches(tokens, resp) if union else []
        metric_sums: dict[str, float] = {}
        n_tokens = 0
        self.optimizer.zero_grad(set_to_none=True)

        def on_logits(_k: int, mb: MicroBatch, logits: torch.Tensor) -> torch.Tensor:
            nonlocal n_tokens
            rows = [union[i] for i in mb.indices]
            # the loss's batch dict is built exactly as the FSDP backend builds it
            mb_batch = FSDPTrainActor._micro_batch_dict(self, batch, rows, mb, logits)
            reducer = make_reducer(mb_batch["loss_masks"], per_token=bool(denominators.get("per_token", False)),
                                   num_samples=denominators["samples"], num_tokens=denominators["tokens"])
            loss, metrics = loss_call(mb_batch, logits, reducer)
            n_tokens += mb.num_tokens
            for key, value in metrics.items():
                metric_sums[key] = metric_sums.get(key, 0.0) + float(value)
            return loss

        if pp_comm.pp_size() == 1:
            # no pipeline: backward right after each forward, one micro-batch's graph at a time
            for mb in mbs:
                on_logits(0, mb, self._stage_forward(mb, None)).backward()
            saved = []
        else:
            saved = self._forward_pass(mbs, on_logits, keep_graph=True)
        for k in reversed(range(len(saved))):
            x, out = saved[k]
            if pp_comm.is_last():
                out.backward()
            else:
                grad = pp_comm.recv_backward(tuple(out.shape), out.dtype, self.device)
                out.backward(grad)
            if not pp_comm.is_first():
                pp_comm.send_backward(x.grad)
            saved[k] = None  # free this micro-batch's activations
        finalize_grads(self.model)
        grad_norm = clip_grad_norm(self.model, self.cfg.clip_grad)
        lr = self.optimizer.param_groups[0]["lr"]
        self.optimizer.step()
        self.scheduler.step()
        self.global_step += 1
        metric_sums["_tokens"] = float(n_tokens)
        return optimizer_step_metrics(self._reduce_metrics(metric_sums), grad_norm, lr, t0)

    def _reduce_metrics(self, sums: dict[str, float]) -> dict[str, float]:
        """Sum the metrics of all replicas; within a replica only the last stage's TP rank 0 counts."""
        if not dist.is_initialized() or dist.get_world_size() == 1:
            return sums
        contributes = pp_comm.is_last() and self.mpu.get_tensor_model_parallel_rank() == 0
        parts: list = [None] * dist.get_world_size()
        dist.all_gather_object(parts, sums if contributes else None)
        total: dict[str, float] = {}
        for part in parts:
            for k, v in (part or {}).items():
                total[k] = total.get(k, 0.0) + v
        return total

    # ------------------------------------------------------------------ state
    def export_hf_state_dict(self) -> dict[str, torch.Tensor] | None:
        """Collective: gather TP shards and PP stages into HF names (full dict on rank 0)."""
        return export_hf_state_dict(self.model, self.spec)

    def save_hf(self, folder: str | Path) -> None:
        """Collective (every rank must call it): write an HF model folder from rank 0."""
        state = self.export_hf_state_dict()
        if dist.is_initialized() and dist.get_rank() != 0:
            return
        save_hf_folder(state, folder, self.cfg.model_path)
        self.tokenizer.save_pretrained(str(folder))

    def trainer_state(self) -> dict[str, Any]:
        return rank_state(self.optimizer, self.scheduler, self.global_step,
                          layout={"tp": self.options.tp, "pp": self.options.pp, "rank": self.rank,
                                  "world_size": self.world_size})

    def load_trainer_state(self, state: dict[str, Any]) -> None:
        layout = state.get("layout")
        mine = (self.options.tp, self.options.pp, self.world_size, self.rank)
        if layout and (layout["tp"], layout["pp"], layout["world_size"], layout.get("rank", self.rank)) != mine:
            # each rank's optimizer state belongs to its own TP/PP shard
            raise ValueError(f"optimizer state of rank {layout.get('rank')} saved with TP={layout['tp']} "
                             f"PP={layout['pp']} world={layout['world_size']} cannot be loaded by rank {self.rank} "
                             f"with TP={self.options.tp} PP={self.options.pp} world={self.world_size}; resume with "
                             "the same layout (or restart from the HF weights of the checkpoint with --hf-checkpoint)")
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.global_step = int(state.get("global_step", 0))
        restore_rng_state(state.get("rng"))

    def offload(self) -> None:
        """Colocated mode: free accelerator memory for the engine during rollout."""
        if self.device.type != "cuda":
            return  # CPU: engine and trainer share host RAM; nothing to move
        self.model.to("cpu")
        self._move_optimizer_state("cpu")
        torch.cuda.empty_cache()

    def onload(self) -> None:
        if self.device.type != "cuda":
            return
        self.model.to(self.device)
        self._move_optimizer_state(self.device)

    def _move_optimizer_state(self, device) -> None:
        if hasattr(self.optimizer, "to"):  # fp32 masters (bf16 / --optimizer-cpu-offload)
            self.optimizer.to(device)
            return
        for state in self.optimizer.state.values():
            for k, v in state.items():
                if torch.is_tensor(v):
                    state[k] = v.to(device)

    def shutdown(self) -> None:
        destroy_megatron()
