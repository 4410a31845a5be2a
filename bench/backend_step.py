"""Megatron vs FSDP backend: one GRPO optimizer step (and one log-prob pass) on the same
batch, same model, CPU fp32, single rank (TP=1, informational).

Both actors get the same samples, old log-probs and advantages, and run the default policy
loss (slime.algorithms.loss.policy_loss) through their own `train_step`: forward with grad ->
log-probs/entropy -> PPO-clipped loss -> backward -> grad sync/clip -> AdamW. Timed
interleaved, median of N after a warm-up; the per-step loss of both is printed as a check that
they compute the same thing.

    python bench/backend_step.py [--model tiny|embedded|PATH] [--samples 16] [--prompt-len 64]
                                 [--response-len 64] [--reps 5] [--out bench/results/backend_step.md]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
warnings.filterwarnings("ignore")


def _model_path(name: str) -> Path:
    from openclaw.models import build_tiny_model, prepare_embedded_model

    if name == "tiny":
        return build_tiny_model("qwen3", seed=0)
    if name == "embedded":
        return prepare_embedded_model()
    return Path(name)


def _batch(vocab: int, n: int, p: int, r: int) -> dict:
    import torch

    g = torch.Generator().manual_seed(0)
    tokens = [torch.randint(3, vocab, (p + r,), generator=g).tolist() for _ in range(n)]
    return {"tokens": tokens, "response_lengths": [r] * n, "loss_masks": [[1] * r for _ in range(n)],
            "advantages": [[1.0 if i % 2 == 0 else -1.0] * r for i in range(n)], "rewards": [float(i % 2 == 0) for i in range(n)]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--response-len", type=int, default=64)
    ap.add_argument("--micro-batch-size", type=int, default=4)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)

    import json

    import torch
    from slime.backends.fsdp.actor import FSDPTrainActor
    from slime.backends.fsdp.config import ActorConfig
    from slime.backends.fsdp.train_loop import build_loss_call
    from slime.backends.megatron.actor import MegatronTrainActor
    from slime.backends.megatron.options import MegatronOptions

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])
    path = _model_path(a.model)
    vocab = json.loads((path / "config.json").read_text())["vocab_size"]
    cfg = ActorConfig(model_path=str(path), lr=1e-6, global_batch_size=a.samples, micro_batch_size=a.micro_batch_size)
    actors = {"fsdp": FSDPTrainActor(cfg), "megatron": MegatronTrainActor(cfg, options=MegatronOptions())}
    batch = _batch(vocab, a.samples, a.prompt_len, a.response_len)
    batch["old_log_probs"] = actors["fsdp"].compute_log_probs(batch["tokens"], batch["response_lengths"])
    args = argparse.Namespace(advantage_estimator="grpo", eps_clip=0.2, eps_clip_high=0.2, eps_clip_c=None,
                              loss_type="policy_loss", entropy_coef=0.0, use_kl_loss=False,
                              calculate_per_token_loss=False, use_tis=False, use_rollout_logprobs=False)
    loss_call = build_loss_call(args)
    den = {"samples": float(a.samples), "tokens": float(a.samples * a.response_len), "per_token": False}
    idx = list(range(a.samples))
    times: dict[str, dict[str, list[float]]] = {k: {"step": [], "logprobs": []} for k in actors}
    losses: dict[str, list[float]] = {k: [] for k in actors}
    for rep in range(a.reps + 1):  # rep 0 is the warm-up
        for name, actor in actors.items():
            t = time.perf_counter()
            actor.compute_log_probs(batch["tokens"], batch["response_lengths"])
            lp_time = time.perf_counter() - t
            t = time.perf_counter()
            m = actor.train_step(batch, idx, den, loss_call)
            step_time = time.perf_counter() - t
            if rep:
                times[name]["step"].append(step_time)
                times[name]["logprobs"].append(lp_time)
                losses[name].append(m["loss/total"])
    tokens = a.samples * (a.prompt_len + a.response_len)
    rows = []
    for name in actors:
        step = statistics.median(times[name]["step"])
        lp = statistics.median(times[name]["logprobs"])
        rows.append(f"| {name} | {step:.3f} | {tokens / step:.0f} | {lp:.3f} | {losses[name][0]:.6f} |")
    ratio = statistics.median(times["megatron"]["step"]) / statistics.median(times["fsdp"]["step"])
    report = "\n".join([
        "# Megatron vs FSDP backend: one GRPO step on CPU (informational)",
        "",
        "Command: `python bench/backend_step.py " + " ".join(argv if argv is not None else sys.argv[1:]) + "`",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads (shared with other processes: timings are noisy)",
        f"Model: {path.name} ({sum(p.numel() for p in actors['fsdp'].model.parameters()) / 1e6:.1f}M params), fp32; "
        f"batch {a.samples} x ({a.prompt_len} prompt + {a.response_len} response) tokens, micro-batch {a.micro_batch_size}; "
        f"median of {a.reps} after 1 warm-up, interleaved.",
        "",
        "| backend | train step (s) | tokens/s | log-prob pass (s) | loss/total (1st timed step) |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Megatron / FSDP step time: {ratio:.2f}x. Megatron here is TP=1 with the local (non-TransformerEngine) "
        "layer spec and unfused kernels, the configuration that runs on CPU.",
    ])
    print(report)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(report + "\n")
    actors["megatron"].shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
