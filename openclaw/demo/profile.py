"""The main job's profile: where its seconds go, per phase, per training step and per interaction,
and how much of this machine's arithmetic each model phase uses.

    python -m openclaw.demo --profile [--minutes M ...]

Sources, all measured in the same run: the engine's scheduler thread (its seconds in prefill and
decode calls, and the tokens they processed: `EngineWork`), the judge's busy seconds, the trainer's
step metrics (`time/*`, `perf/*`, `rollout/*`), the evaluations' own seconds, and the process's CPU
time. The peak is an fp32 matmul on this machine, timed at the start of the run with the serving
and training thread counts.

FLOPs are counted as 2 x (weights of every linear layer, the LM head included) per token, per
forward; a LoRA backward computes activation gradients (about one forward) and only the adapter's
weight gradients (small), so it is counted as one forward too. Attention's own score FLOPs are
left out: at the main job's ~100-token sequences they are under 2% of a forward.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MIN_TIMED_S = 0.01


def matmul_peak_gflops(threads: int, size: int = 1024, seconds: float = 1.0) -> float:
    """fp32 GFLOP/s of a square matmul on `threads` torch threads (this thread's setting restored)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(size, size), torch.randn(size, size)
        torch.mm(a, b)  # warm-up: first call allocates and picks the kernel
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            torch.mm(a, b)
            n += 1
        return 2.0 * size**3 * n / (time.perf_counter() - t0) / 1e9
    finally:
        torch.set_num_threads(before)


def forward_flops_per_token(model: Any) -> float:
    """2 x the weights of every linear layer (tied LM head counted: it is a matmul per token)."""
    import torch

    weights = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    return 2.0 * weights


@dataclass
class EngineWindow:
    """Engine work done inside evaluations, to keep it out of the serving phase's numbers."""

    totals: dict[str, float] = field(default_factory=dict)
    _start: dict[str, float] = field(default_factory=dict)

    def begin(self, snapshot: Mapping[str, float]) -> None:
        self._start = dict(snapshot)

    def end(self, snapshot: Mapping[str, float]) -> None:
        for k, v in snapshot.items():
            self.totals[k] = self.totals.get(k, 0.0) + v - self._start.get(k, 0.0)


@dataclass(frozen=True)
class Phase:
    name: str
    seconds: float
    flops: float | None = None  # the phase's model arithmetic, when it has any
    threads: int = 1


def _sum(steps: Iterable[Mapping[str, float]], key: str) -> float:
    return float(sum(m.get(key, 0.0) for m in steps))


def trainer_phases(steps: Sequence[Mapping[str, float]], flops_per_token: float, threads: int) -> list[Phase]:
    """The trainer thread's phases, from its step metrics."""
    tokens = _sum(steps, "perf/train_tokens")
    rollout, wait, teacher = _sum(steps, "time/rollout"), _sum(steps, "rollout/buffer_wait_s"), _sum(steps, "rollout/teacher_s")
    fwd = flops_per_token * tokens
    return [
        Phase("trainer: waiting for judged turns", wait),
        Phase("trainer: teacher log-probs (engine prefill, hinted prompts)", teacher),
        Phase("trainer: rollout assembly (buffer reads, samples)", max(0.0, rollout - wait - teacher)),
        Phase("trainer: old log-probs", _sum(steps, "perf/old_log_probs_time"), fwd, threads),
        Phase("trainer: reference log-probs (LoRA off)", _sum(steps, "perf/ref_log_probs_time"), fwd, threads),
        Phase("trainer: forward + loss", _sum(steps, "perf/forward_time"), fwd, threads),
        Phase("trainer: backward", _sum(steps, "perf/backward_time"), fwd, threads),
        Phase("trainer: optimizer", _sum(steps, "perf/optimizer_time")),
        Phase("trainer: weight push (save + engine load)", _sum(steps, "time/weight_sync")),
    ]


def engine_phases(work: Mapping[str, float], evaluation: Mapping[str, float], flops_per_token: float,
                  threads: int) -> list[Phase]:
    """The engine thread's phases while chatting (the evaluations' share taken out)."""
    def net(k: str) -> float:
        return work.get(k, 0.0) - evaluation.get(k, 0.0)

    return [
        Phase("engine: prefill (chat prompts + teacher scoring)", net("prefill_s"),
              flops_per_token * net("prefill_tokens"), threads),
        Phase("engine: decode", net("decode_s"), flops_per_token * net("decode_tokens"), threads),
        Phase("engine: weight load + swap", work.get("weight_load_s", 0.0)),
    ]


@dataclass
class Profile:
    wall_s: float
    cpu_s: float
    cores: int
    steps: int
    interactions: int
    peak_gflops: dict[int, float]
    phases: list[Phase]
    notes: list[str] = field(default_factory=list)

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for p in self.phases:
            # A phase that did not run (old log-probs taken from the rollout) has no rate.
            gflops = p.flops / p.seconds / 1e9 if p.flops and p.seconds > MIN_TIMED_S else None
            peak = self.peak_gflops.get(p.threads)
            out.append({"phase": p.name, "seconds": p.seconds, "per_step": p.seconds / max(1, self.steps),
                        "per_interaction": p.seconds / max(1, self.interactions),
                        "share_of_wall": p.seconds / self.wall_s if self.wall_s else 0.0,
                        "gflops": gflops, "share_of_peak": gflops / peak if gflops and peak else None,
                        "threads": p.threads})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "cores": self.cores, "cores_busy": self.cpu_s / self.wall_s,
                "steps": self.steps, "interactions": self.interactions,
                "peak_gflops": {str(k): v for k, v in self.peak_gflops.items()}, "phases": self.rows(),
                "notes": self.notes}

    def markdown(self) -> str:
        peaks = ", ".join(f"{v:.0f} GFLOP/s on {k} thread{'s' if k > 1 else ''}" for k, v in sorted(self.peak_gflops.items()))
        lines = [f"wall {self.wall_s:.0f} s, {self.steps} training steps, {self.interactions} interactions; "
                 f"process CPU {self.cpu_s:.0f} s = {self.cpu_s / self.wall_s:.2f} of {self.cores} cores busy on average; "
                 f"fp32 matmul peak: {peaks}", "",
                 "| phase | seconds | per step | per interaction | % of wall | GFLOP/s | % of peak |",
                 "|---|---|---|---|---|---|---|"]
        for r in self.rows():
            g = "-" if r["gflops"] is None else f"{r['gflops']:.1f}"
            s = "-" if r["share_of_peak"] is None else f"{100 * r['share_of_peak']:.0f}% ({r['threads']} thr)"
            lines.append(f"| {r['phase']} | {r['seconds']:.1f} | {r['per_step']:.2f} | {r['per_interaction']:.3f} | "
                         f"{100 * r['share_of_wall']:.0f}% | {g} | {s} |")
        lines += [f"- {n}" for n in self.notes]
        return "\n".join(lines)


def process_cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


def freshness(step_times: Sequence[tuple[float, int, Sequence[int]]], answered_at: Mapping[int, float]) -> dict[str, float]:
    """Seconds from a turn being answered to the end of the step whose weight push served a version
    trained on it: `step_times` is (wall time the step ended, weight version after it, turn ids it
    trained on), in step order; a step that pushed nothing hands its turns to the next push."""
    delays: list[float] = []
    waiting: list[int] = []
    version = 0
    for ended, v, turn_ids in step_times:
        waiting += list(turn_ids)
        if v > version:
            delays += [ended - answered_at[t] for t in waiting if t in answered_at]
            waiting, version = [], v
    if not delays:
        return {"turns": 0}
    delays.sort()
    return {"turns": len(delays), "median_s": statistics.median(delays),
            "p90_s": delays[min(len(delays) - 1, int(0.9 * len(delays)))], "max_s": delays[-1]}
