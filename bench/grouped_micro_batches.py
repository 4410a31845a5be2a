"""A GUI-RL-shaped GRPO step on SmolLM2-135M (embedded), CPU, fp32: micro-batches that keep each
prompt's group together (so the shared-prompt forward runs each prompt once) vs micro-batches
formed by length alone (what `--use-dynamic-batch-size` did before: GRPO groups of different
prompts mixed, so no micro-batch had one prompt and every row ran its whole prompt).

The batch is what gui-rl trains on: 4 prompts x 8 samples, each prompt ~380-400 tokens (a
280-token opening shared by all, then the page), responses of 6-14 tokens (so sorting by length
mixes the groups); `--max-tokens-per-gpu 4096`, LoRA r8 on attention, KL to the base (the
reference log-prob pass), `--use-rollout-logprobs`. Timed: `train_rollout` (the reference log-prob pass
and one optimizer step), both actors interleaved, median of N repetitions after one warm-up each.
Both run with `--disable-step-prefix-forward`: the opening run once per step, which would help the
by-length micro-batches too, is measured on its own by bench/step_prefix.py.

    python bench/grouped_micro_batches.py [--reps 3] [--groups 4] [--model-path PATH]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402

GROUPS, PER_GROUP, OPENING, PAGE = 4, 8, 280, 100


def make_samples(vocab: int, seed: int = 0, groups: int = GROUPS) -> list:
    from slime.utils.types import Sample

    g = torch.Generator().manual_seed(seed)
    opening = torch.randint(100, vocab - 1, (OPENING,), generator=g).tolist()
    pages = [torch.randint(100, vocab - 1, (PAGE + 7 * (k % 4),), generator=g).tolist() for k in range(groups)]
    samples = []
    for k in range(groups):  # in group order, as train_rollout's group advantages expect
        for i in range(PER_GROUP):
            n = 6 + (i + 3 * k) % 9
            response = torch.randint(100, vocab - 1, (n,), generator=g).tolist()
            samples.append(Sample(index=len(samples), group_index=k, tokens=opening + pages[k] + response,
                                  response_length=n, loss_mask=[1] * n, reward=float((i + k) % 3 == 0)))
    return samples


def build_actor(model_path: str, *extra: str, groups: int = GROUPS):
    from slime.backends.fsdp import ActorConfig, FSDPTrainActor
    from slime.backends.fsdp.train_loop import build_loss_call
    from slime.utils.arguments import parse_config

    args = parse_config([
        "--hf-checkpoint", model_path, "--rollout-batch-size", str(groups), "--n-samples-per-prompt", str(PER_GROUP),
        "--use-lora", "--lora-rank", "8", "--lora-alpha", "16", "--lr", "1e-3",
        "--use-dynamic-batch-size", "--max-tokens-per-gpu", "4096", "--use-rollout-logprobs",
        "--use-kl-loss", "--kl-loss-coef", "0.2", "--kl-loss-type", "low_var_kl", *extra,
    ]).to_namespace()
    return FSDPTrainActor(ActorConfig.from_args(args), args), args, build_loss_call(args)


def by_length_only(actor) -> None:
    """The partition before prompt groups were kept together (same budget, no keys)."""
    from slime.backends.fsdp.batching import pad_micro_batch, partition_dynamic

    def micro_batches(tokens, response_lengths):
        groups = partition_dynamic([len(t) for t in tokens], actor.cfg.max_tokens_per_gpu)
        return [pad_micro_batch(g, tokens, response_lengths, actor.tokenizer.pad_token_id) for g in groups]

    actor._micro_batches = micro_batches


def step(actor, args, loss_call, samples, rollout_lp) -> dict:
    from slime.backends.fsdp.train_loop import train_rollout

    for s, lp in zip(samples, rollout_lp, strict=True):
        s.rollout_log_probs = list(lp)
    return train_rollout(actor, args, samples, loss_call)  # the reference log-prob pass (KL) is part of it


def interleaved_times(run_a, run_b, reps: int) -> tuple[list[float], list[float]]:
    """Wall-clock seconds of `reps` alternating calls of run_a and run_b: load on the machine
    affects both alike."""
    times_a, times_b = [], []
    for _ in range(reps):
        for run, times in ((run_a, times_a), (run_b, times_b)):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
    return times_a, times_b


def interleaved_steps(actor_a: tuple, actor_b: tuple, batch: Callable[[], list], rollout_lp: list,
                      reps: int) -> tuple[list[float], list[float]]:
    """`interleaved_times` of one training step of each actor, on a fresh batch each time."""
    return interleaved_times(lambda: step(*actor_a, batch(), rollout_lp), lambda: step(*actor_b, batch(), rollout_lp),
                             reps)


def machine_line(load: float) -> str:
    return (f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load avg at start "
            f"{load:.1f}, torch threads {torch.get_num_threads()}, torch {torch.__version__}")


def print_report(load: float, about: list[str], a: tuple[str, list[float]], b: tuple[str, list[float]],
                 ratio_name: str) -> None:
    """The machine, the `about` lines, each side's (label, step times), and last the headline: the
    ratio of their medians (the line tests/test_bench_smoke.py reads)."""
    print(machine_line(load))
    for line in about:
        print(line)
    for label, times in (a, b):
        print(f"{label} (s): {[round(t, 2) for t in times]} median {statistics.median(times):.2f}")
    ratio = statistics.median(a[1]) / statistics.median(b[1])
    print(f"{ratio_name} = {ratio:.3f} wall-clock median (reference log-probs + train step)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--groups", type=int, default=GROUPS, help="prompts per step (GRPO groups of 8)")
    ap.add_argument("--model-path", default=None)
    a = ap.parse_args()
    from transformers import AutoConfig

    from openclaw.models import resolve_model_path

    load = os.getloadavg()[0]
    model_path = str(a.model_path or resolve_model_path(None))
    vocab = AutoConfig.from_pretrained(model_path).vocab_size

    def batch() -> list:
        return make_samples(vocab, groups=a.groups)

    samples = batch()
    torch.manual_seed(0)
    grouped = build_actor(model_path, "--disable-step-prefix-forward", groups=a.groups)
    torch.manual_seed(0)
    mixed = build_actor(model_path, "--disable-step-prefix-forward", groups=a.groups)
    by_length_only(mixed[0])
    toks, lens = [s.tokens for s in samples], [s.response_length for s in samples]
    rollout_lp = grouped[0].compute_log_probs(toks, lens)
    mbs_grouped, mbs_mixed = grouped[0]._micro_batches(toks, lens), mixed[0]._micro_batches(toks, lens)
    step(*grouped, batch(), rollout_lp)  # warm-up
    step(*mixed, batch(), rollout_lp)
    t_grouped, t_mixed = interleaved_steps(grouped, mixed, batch, rollout_lp, a.reps)
    shared = [sum(mb.shared_prompt_length() > 0 for mb in mbs) for mbs in (mbs_grouped, mbs_mixed)]
    print_report(load, [f"batch: {a.groups} prompts x {PER_GROUP} samples, {sum(map(len, toks))} tokens, "
                        f"{sum(lens)} trained; LoRA r8 attention, fp32, KL to the base",
                        f"micro-batches: grouped {len(mbs_grouped)} (shared prompt in {shared[0]}), by length "
                        f"{len(mbs_mixed)} (shared prompt in {shared[1]})"],
                 ("grouped step", t_grouped), ("by-length step", t_mixed), "grouped/by-length")


if __name__ == "__main__":
    main()
