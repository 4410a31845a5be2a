"""Batched next-token sampling with SGLang's log-prob semantics.

Log-probs follow SGLang's default (`sglang/srt/layers/sampler.py`): the returned log-prob of a
sampled token is taken from `log_softmax(logits / temperature)` — temperature applied, top-p /
top-k truncation NOT applied (they only restrict which token is drawn). Greedy rows
(temperature 0) use the raw `log_softmax(logits)`. With `original_logprobs=True` every row uses
the raw model distribution (SGLang's `SGLANG_RETURN_ORIGINAL_LOGPROB=1`). At temperature 1 (the
usual RL rollout setting) the two coincide and equal the trainer's log-probs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class RowSampling:
    """Per-row sampling state (one running request)."""

    temperature: float
    top_p: float
    top_k: int
    generator: torch.Generator | None
    top_logprobs_num: int


@dataclass
class SampleOutput:
    tokens: list[int]
    logprobs: list[float]
    top_logprobs: list[tuple[tuple[int, float], ...]]


def _draw(logits: torch.Tensor, rows: list[RowSampling]) -> list[int]:
    """Vectorised inverse-CDF sampling for rows with temperature > 0.

    One uniform number per row comes from that row's own generator, so a seeded request draws
    the same tokens whatever else is in the batch. top-k / top-p are applied in sorted order
    (only when some row asks for them): keep the k most likely tokens, then the smallest prefix
    whose mass reaches top_p; the draw is renormalised over what is kept.
    """
    vocab = logits.shape[-1]
    dev = logits.device
    temps = torch.tensor([r.temperature for r in rows], dtype=logits.dtype, device=dev).unsqueeze(-1)
    probs = torch.softmax(logits / temps, dim=-1)
    order = None
    if any(r.top_p < 1.0 or 0 < r.top_k < vocab for r in rows):
        probs, order = torch.sort(probs, dim=-1, descending=True)
        ks = torch.tensor([r.top_k if 0 < r.top_k < vocab else vocab for r in rows], device=dev).unsqueeze(-1)
        ps = torch.tensor([r.top_p for r in rows], dtype=probs.dtype, device=dev).unsqueeze(-1)
        drop = torch.arange(vocab, device=dev).unsqueeze(0) >= ks
        drop |= (torch.cumsum(probs, dim=-1) - probs) > ps  # mass before this token already >= top_p
        probs = probs.masked_fill(drop, 0.0)
    cdf = torch.cumsum(probs, dim=-1)
    u = torch.cat([torch.rand(1, generator=r.generator, dtype=cdf.dtype, device=dev) for r in rows])
    idx = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).clamp_(max=vocab - 1)
    if order is not None:
        idx = order.gather(-1, idx)
    return idx.squeeze(-1).tolist()


def sample_batch(logits: torch.Tensor, rows: list[RowSampling], want_logprobs: bool,
                 original_logprobs: bool = False) -> SampleOutput:
    """Sample one token per row of `logits` [B, V] (fp32)."""
    batch = logits.shape[0]
    tokens: list[int] = torch.argmax(logits, dim=-1).tolist()
    hot = [i for i, r in enumerate(rows) if r.temperature > 0]
    if hot:
        sub = logits if len(hot) == batch else logits[torch.tensor(hot, device=logits.device)]
        for i, tok in zip(hot, _draw(sub, [rows[i] for i in hot]), strict=True):
            tokens[i] = tok
    logprobs: list[float] = []
    tops: list[tuple[tuple[int, float], ...]] = [()] * batch
    if want_logprobs:
        temps = [r.temperature if r.temperature > 0 and not original_logprobs else 1.0 for r in rows]
        if all(t == 1.0 for t in temps):
            logp = torch.log_softmax(logits, dim=-1)
        else:
            scale = torch.tensor(temps, dtype=logits.dtype, device=logits.device).unsqueeze(-1)
            logp = torch.log_softmax(logits / scale, dim=-1)
        idx = torch.tensor(tokens, device=logits.device).unsqueeze(-1)
        logprobs = logp.gather(-1, idx).squeeze(-1).tolist()
        max_top = max(r.top_logprobs_num for r in rows)
        if max_top > 0:
            vals, ids = torch.topk(logp, max_top, dim=-1)
            vals_l, ids_l = vals.tolist(), ids.tolist()
            tops = [tuple(zip(ids_l[i][:r.top_logprobs_num], vals_l[i][:r.top_logprobs_num], strict=True))
                    for i, r in enumerate(rows)]
    return SampleOutput(tokens=tokens, logprobs=logprobs, top_logprobs=tops)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, chunk: int = 256) -> list[float]:
    """log_softmax(logits[i])[targets[i]] in fp32, a chunk of positions at a time (a full
    [L, vocab] fp32 log-softmax of a long prompt would double the memory of the logits)."""
    out: list[float] = []
    for i in range(0, logits.shape[0], chunk):
        logp = torch.log_softmax(logits[i:i + chunk].float(), dim=-1)
        out.extend(logp.gather(-1, targets[i:i + chunk].unsqueeze(-1)).squeeze(-1).tolist())
    return out
