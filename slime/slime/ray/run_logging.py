"""Per-run output: slime.utils.metrics.MetricsLogger (JSONL, training.log, progress bar with
ETA, wandb / tensorboard) plus one human line per rollout on stderr."""

from __future__ import annotations

import sys
import time
from typing import Any

_LINE_KEYS = ("reward/mean", "reward/std", "loss/total", "loss/pg", "loss/kl", "policy/entropy",
              "policy/clipfrac", "gradient/norm", "learning_rate", "staleness/dropped", "time/step")


class RunLogger:
    def __init__(self, cfg: Any, total_steps: int, start_step: int, echo: bool = True) -> None:
        from slime.utils.metrics import MetricsLogger

        self.metrics = MetricsLogger.from_config(cfg, total_steps=total_steps, start_step=start_step)
        self.total = total_steps
        self.start = start_step
        self.t0 = time.monotonic()
        self.echo = echo  # False: the caller prints its own progress (metrics still go to the files)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        self.metrics.log(metrics, step=step)
        if not self.echo:
            return
        done = step + 1 - self.start
        eta = (time.monotonic() - self.t0) / max(1, done) * max(0, self.total - step - 1)
        keys = [k for k in _LINE_KEYS if k in metrics] + sorted(k for k in metrics if _is_eval_reward(k))
        parts = " ".join(f"{k}={float(metrics[k]):.4g}" for k in keys)
        print(f"[rollout {step + 1}/{self.total} eta {int(eta)}s] {parts}", file=sys.stderr, flush=True)

    def info(self, message: str, *args: Any) -> None:
        self.metrics.info(message, *args)

    def close(self) -> None:
        self.metrics.close()


def _is_eval_reward(key: str) -> bool:
    return key.startswith("eval/") and key.endswith("/reward")
