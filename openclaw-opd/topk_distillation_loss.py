"""Top-k distillation: reverse KL to the hinted teacher over its top-k tokens plus a tail bin.

At each response position t the teacher (the policy shown the hint) gives its top-k tokens
K_t with log-probs q. Both distributions are collapsed onto k + 1 bins (the k tokens, and
"anything else" = 1 - sum over K_t), and the loss is the reverse KL

    KL(student_t || teacher_t) = sum_b P_b (log P_b - Q_b),   P = student bins, Q = teacher bins

averaged like any slime loss (the reducer). Unlike the token-level OPD advantage, which only
sees the sampled token, this moves probability towards what the teacher would have said
(e.g. ending the answer where the teacher would), with the tail bin keeping it a proper
divergence. Reverse KL is mode-seeking: the student concentrates on the teacher's likely
tokens rather than spreading over all of them.

    --custom-loss-function-path openclaw-opd/topk_distillation_loss.py:topk_distillation_loss
    --opd-topk K   (the rollout then fetches the teacher top-k, openclaw.bridge.teacher.teacher_topk)

The teacher top-k reach the loss through files under --opd-topk-cache-dir keyed by the sample's
token ids: slime's train batch carries per-token scalars (teacher_log_probs), not per-token
lists. Samples without a file (no hint) contribute 0 and are counted in opd/topk_missing.
"""

from __future__ import annotations

import json
from typing import Any

import torch

from openclaw.bridge.teacher import tokens_key, topk_cache_dir


def tail_log_prob(top_log_probs: torch.Tensor) -> torch.Tensor:
    """log(1 - sum(exp(top))) along the last dim, clamped away from log(0)."""
    mass = top_log_probs.exp().sum(-1).clamp(max=1.0 - 1e-6)
    return torch.log1p(-mass)


def bin_reverse_kl(student_log_probs: torch.Tensor, teacher_ids: torch.Tensor, teacher_top: torch.Tensor) -> torch.Tensor:
    """student_log_probs [T, V] (full vocabulary), teacher_ids / teacher_top [T, k] -> KL per position [T]."""
    s_top = student_log_probs.gather(-1, teacher_ids)
    s_bins = torch.cat([s_top, tail_log_prob(s_top).unsqueeze(-1)], -1)
    t_bins = torch.cat([teacher_top, tail_log_prob(teacher_top).unsqueeze(-1)], -1)
    return (s_bins.exp() * (s_bins - t_bins)).sum(-1)


def load_topk(config: Any, tokens: Any) -> tuple[list[list[int]], list[list[float]]] | None:
    path = topk_cache_dir(config) / f"{tokens_key(tokens)}.json"
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    return data["ids"], data["logprobs"]


def topk_distillation_loss(batch: dict[str, Any], *, config: Any, reducer: Any, logits: torch.Tensor | None = None):
    if logits is None:
        raise ValueError("topk_distillation_loss needs the student logits (the FSDP backend passes them)")
    mask = batch["loss_masks"].float()
    temperature = float(getattr(config, "rollout_temperature", 1.0) or 1.0)
    kl = torch.zeros_like(mask)
    missing = 0.0
    # The backend may hand over only the last positions (`logits_to_keep`): row 0 of `logits` is
    # sequence position `offset` of the micro-batch's padded width.
    offset = max(batch["total_lengths"]) - logits.shape[1]
    for i, (p, r) in enumerate(zip(batch["prompt_lengths"], batch["response_lengths"], strict=True)):
        topk = load_topk(config, batch["tokens"][i])
        if topk is None or r == 0:
            missing += 1.0
            continue
        ids = torch.tensor(topk[0], dtype=torch.long, device=logits.device)
        top = torch.tensor(topk[1], dtype=torch.float32, device=logits.device)
        if ids.shape[0] != r:
            raise ValueError(f"teacher top-k covers {ids.shape[0]} positions, the response has {r}")
        student = torch.log_softmax(logits[i, p - 1 - offset: p - 1 - offset + r].float() / temperature, -1)
        kl[i, :r] = bin_reverse_kl(student, ids, top)
    loss = reducer(kl * mask)
    metrics = {"loss/opd_topk_kl": loss.detach(), "opd/topk_missing": torch.tensor(missing),
               "loss/total": loss.detach()}
    return loss, metrics
