"""One rollout's training on one rank: old/ref log-probs -> advantages -> optimizer steps.

Every rank receives all samples of the rollout. Log-probs are computed for the rank's own
shard and all-gathered, so advantages (group baselines, optional batch whitening) are computed
identically on every rank over the whole rollout. Samples are consumed in order:
`num_steps_per_rollout` optimizer steps, step s trains on the s-th slice of the rollout, and
rank r takes every world_size-th sample of that slice.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from slime.backends.fsdp.actor import FSDPTrainActor
from slime.utils.types import Sample

log = logging.getLogger(__name__)


def _pad(rows: list[list[float]], width: int) -> torch.Tensor:
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.float32)
    return out


def _all_gather_rows(actor: FSDPTrainActor, n: int, mine: dict[int, list[float]]) -> list[list[float]]:
    if actor.world_size > 1:
        gathered: list[dict[int, list[float]] | None] = [None] * actor.world_size
        dist.all_gather_object(gathered, mine)
        merged: dict[int, list[float]] = {}
        for part in gathered:
            merged.update(part or {})
    else:
        merged = mine
    missing = [i for i in range(n) if i not in merged]
    if missing:
        raise RuntimeError(f"log-probs missing for samples {missing[:5]}")
    return [merged[i] for i in range(n)]


def step_slices(n: int, num_steps: int) -> list[list[int]]:
    """Split n samples into num_steps consecutive slices (sizes differ by at most one)."""
    num_steps = max(1, min(num_steps, n))
    size = math.ceil(n / num_steps)
    return [list(range(s, min(n, s + size))) for s in range(0, n, size)]


def _reward(args: Any, s: Sample) -> float:
    from slime.rollout.sglang_rollout import reward_value

    return reward_value(args, s)


@dataclass(frozen=True)
class LossCall:
    """(batch, logits, reducer) -> (loss, metrics): the loss plugin bound to the flags it reads."""

    fn: Callable
    config: Any

    def __call__(self, batch: dict[str, Any], logits: Any, reducer: Callable) -> Any:
        return self.fn(batch, config=self.config, reducer=reducer, logits=logits)

    def with_flags(self, **values: Any) -> LossCall:
        """The same loss reading other values of some flags (a step's adaptive KL weight)."""
        return LossCall(self.fn, argparse.Namespace(**{**vars(self.config), **values}))


def build_loss_call(args: Any) -> LossCall:
    """The built-in loss or the custom plugin (slime's or the reference's signature, adapted by
    slime.utils.plugins), bound to `args`."""
    from slime.algorithms.loss import BUILTIN_LOSSES

    loss_type = getattr(args, "loss_type", "policy_loss")
    if loss_type == "custom_loss":
        from slime.utils.plugins import load_loss_fn

        fn = load_loss_fn(args.custom_loss_function_path, args)
    elif loss_type in BUILTIN_LOSSES:
        fn = BUILTIN_LOSSES[loss_type]
    else:
        raise ValueError(f"unknown --loss-type {loss_type!r}; choose {sorted(BUILTIN_LOSSES)} or custom_loss")
    return LossCall(fn, args)


def train_rollout(actor: FSDPTrainActor, args: Any, samples: list[Sample], loss_call: Callable,
                  sample_weights: list[float] | None = None) -> dict[str, float]:
    """Train on one rollout; returns step-averaged metrics (identical on every rank)."""
    from slime.algorithms.compute import compute_advantages
    from slime.rollout.plugins_io import load_optional

    t0 = time.perf_counter()
    n = len(samples)
    if n == 0:
        raise ValueError("empty rollout: nothing to train on")
    for s in samples:
        s.validate()
    group_size = int(getattr(args, "n_samples_per_prompt", 1) or 1)
    if n % group_size:
        # a custom rollout returned broken groups: no group baseline is possible
        log.warning("%d samples are not groups of %d: advantages use groups of 1", n, group_size)
        group_size = 1
    num_steps = int(getattr(args, "num_steps_per_rollout", 1) or 1)
    slices = step_slices(n, num_steps)
    my_indices = sorted(i for sl in slices for i in sl[actor.rank :: actor.world_size])

    tokens = [list(s.tokens) for s in samples]
    resp = [int(s.response_length) for s in samples]
    masks = [list(s.loss_mask) if s.loss_mask is not None else [1] * s.response_length for s in samples]
    # Removed samples (--rollout-sample-filter-path) keep their place in the group baseline and the
    # step's sample count, with nothing in the loss.
    loss_masks = [[0] * resp[i] if s.remove_sample else masks[i] for i, s in enumerate(samples)]
    # A row with nothing in the loss is not run on one rank (every loss term is masked there). Under
    # FSDP2 every rank must make the same forward calls, so several ranks still run such rows.
    skipped = {i for i in range(n) if not any(loss_masks[i])} if actor.world_size == 1 else set()
    run_indices = [i for i in my_indices if i not in skipped]
    rollout_lp = [s.rollout_log_probs for s in samples]
    have_rollout_lp = all(r is not None for r in rollout_lp)

    def log_probs(reference: bool) -> list[list[float]]:
        mine = dict(zip(run_indices, actor.compute_log_probs([tokens[i] for i in run_indices],
                                                              [resp[i] for i in run_indices], reference=reference),
                        strict=True))
        for i in skipped:  # never read: the row's loss mask is all zero
            mine[i] = list(rollout_lp[i]) if rollout_lp[i] is not None else [0.0] * resp[i]
        return _all_gather_rows(actor, n, mine)

    timings: dict[str, float] = {}
    t = time.perf_counter()
    if getattr(args, "use_rollout_logprobs", False):
        if not have_rollout_lp:
            raise ValueError("--use-rollout-logprobs but some samples have no rollout_log_probs")
        old_lp = [list(r) for r in rollout_lp]  # type: ignore[arg-type]
    else:
        old_lp = log_probs(reference=False)
    timings["perf/old_log_probs_time"] = time.perf_counter() - t
    ref_lp = None
    need_ref = bool(getattr(args, "use_kl_loss", False)) or float(getattr(args, "kl_coef", 0.0)) > 0
    if need_ref:
        t = time.perf_counter()
        ref_lp = log_probs(reference=True)
        timings["perf/ref_log_probs_time"] = time.perf_counter() - t

    width = max(resp) if resp else 0
    mask_t = _pad([[float(x) for x in m] for m in masks], width)
    rewards = torch.tensor([_reward(args, s) for s in samples], dtype=torch.float32)
    post_process = load_optional(args, "custom_reward_post_process_path", "reward_post_process")
    if post_process is not None:
        _, processed = post_process(samples)
        rewards = torch.tensor(processed, dtype=torch.float32)
    teacher = None
    if all(s.teacher_log_probs is not None for s in samples):
        teacher = _pad([list(s.teacher_log_probs) for s in samples], width)  # type: ignore[arg-type]
    adv = compute_advantages(args, rewards=rewards, mask=mask_t, group_size=group_size,
                             old_log_probs=_pad(old_lp, width),
                             ref_log_probs=_pad(ref_lp, width) if ref_lp is not None else None,
                             teacher_log_probs=teacher, rewards_processed=post_process is not None)
    advantages = adv.advantages
    if sample_weights is not None:
        advantages = advantages * torch.tensor(sample_weights, dtype=torch.float32).unsqueeze(-1)

    def rows(t: torch.Tensor) -> list[list[float]]:
        return [t[i, : resp[i]].tolist() for i in range(n)]

    batch: dict[str, Any] = {
        "tokens": tokens, "response_lengths": resp, "loss_masks": loss_masks, "advantages": rows(advantages),
        "old_log_probs": old_lp, "rewards": rewards.tolist(),
        "rollout_log_probs": [list(r) for r in rollout_lp] if have_rollout_lp else None,
        "ref_log_probs": ref_lp,
        "teacher_log_probs": [list(s.teacher_log_probs) for s in samples] if teacher is not None else None,
        "advantage_parts": {k: rows(v) for k, v in adv.parts.items()},
    }
    per_token = bool(getattr(args, "calculate_per_token_loss", False))
    step_metrics: list[dict[str, float]] = []
    for sl in slices:
        shard = [i for i in sl[actor.rank :: actor.world_size] if i not in skipped]
        denominators = {"samples": float(len(sl)), "tokens": float(sum(sum(loss_masks[i]) for i in sl)),
                        "per_token": per_token}
        step_metrics.append(actor.train_step(batch, shard, denominators, loss_call))
    out: dict[str, float] = {}
    for m in step_metrics:
        for k, v in m.items():
            out[k] = out.get(k, 0.0) + v / len(step_metrics)
    out["perf/train_tokens"] = sum(m.get("perf/train_tokens", 0.0) for m in step_metrics)
    out.update(timings)
    total = time.perf_counter() - t0
    out["perf/train_time"] = total
    out["perf/train_tokens_per_s"] = out["perf/train_tokens"] / max(total, 1e-9)
    out["train/num_samples"] = float(n)
    out["train/removed_samples"] = float(sum(s.remove_sample for s in samples))
    out["train/num_steps"] = float(len(slices))
    out["train/advantage_abs_mean"] = float((advantages.abs() * mask_t).sum() / mask_t.sum().clamp_min(1))
    return out
