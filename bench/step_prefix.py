"""A gui-rl-shaped GRPO step on SmolLM2-135M (embedded), CPU, fp32: the opening every row shares
(system prompt + worked examples, 280 tokens) run once per step vs once per micro-batch.

The batch is the one gui-rl trains on since 2026-11-24: 8 prompts x 8 samples (and 16 x 4),
each prompt a 280-token opening then a ~100-token page, responses of 6-14 tokens;
`--max-tokens-per-gpu 4096` (one micro-batch per GRPO group, whose prompt the shared-prompt forward
runs once), LoRA r8, KL to the base (the reference log-prob pass), `--use-rollout-logprobs`. Timed:
`train_rollout` (reference log-probs and one optimizer step), the two actors interleaved, median of
N repetitions after one warm-up each. Also checked: both give the same gradient norm.

    python bench/step_prefix.py [--reps 3] [--groups 8] [--model-path PATH]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
from grouped_micro_batches import (  # noqa: E402 (this folder)
    OPENING,
    PER_GROUP,
    build_actor,
    interleaved_steps,
    make_samples,
    print_report,
    step,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--groups", type=int, default=8, help="prompts per step (GRPO groups of 8)")
    ap.add_argument("--model-path", default=None)
    a = ap.parse_args()
    if a.groups < 2:
        # one prompt's group is one micro-batch, and the actor runs the step prefix only when a step
        # has two or more: with one there would be nothing to compare
        ap.error("--groups must be at least 2 (the step prefix applies to steps of two or more micro-batches)")
    from transformers import AutoConfig

    from openclaw.models import resolve_model_path

    load = os.getloadavg()[0]
    model_path = str(a.model_path or resolve_model_path(None))
    vocab = AutoConfig.from_pretrained(model_path).vocab_size

    def batch():
        return make_samples(vocab, groups=a.groups)

    torch.manual_seed(0)
    once = build_actor(model_path, groups=a.groups)
    torch.manual_seed(0)
    per_mb = build_actor(model_path, "--disable-step-prefix-forward", groups=a.groups)
    toks, lens = [s.tokens for s in batch()], [s.response_length for s in batch()]
    rollout_lp = per_mb[0].compute_log_probs(toks, lens)
    n_mbs = len(once[0]._micro_batches(toks, lens))
    prefix = once[0]._step_prefix(once[0].model, toks, lens, n_mbs)
    assert prefix is not None and prefix.length >= OPENING, "the step prefix did not apply to this batch"
    norms = (step(*once, batch(), rollout_lp)["gradient/norm"],  # warm-up, and the same update both ways
             step(*per_mb, batch(), rollout_lp)["gradient/norm"])
    t_once, t_per = interleaved_steps(once, per_mb, batch, rollout_lp, a.reps)
    print_report(load, [f"batch: {a.groups} prompts x {PER_GROUP} samples, {n_mbs} micro-batches, {prefix.length}-token "
                        f"shared opening, {sum(map(len, toks))} tokens, {sum(lens)} trained; LoRA r8 attention, fp32, "
                        "KL to the base",
                        f"first update's gradient norm: opening once {norms[0]:.6f}, per micro-batch {norms[1]:.6f}"],
                 ("opening once per step", t_once), ("opening per micro-batch", t_per), "once/per-micro-batch")


if __name__ == "__main__":
    main()
