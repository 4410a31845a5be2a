"""Training metrics: JSONL always, a human ``training.log`` (``tail -f`` works), a progress bar
with ETA, and W&B / TensorBoard on request.

Metric names follow the reference (``loss/total``, ``loss/binary``, ``loss/opd``,
``reward/mean``, ``reward/std``, ``gradient/norm``, ``learning_rate``) plus our own
(``loss/pg``, ``loss/kl``, ``policy/entropy``, ``policy/clipfrac``, ``perf/tokens_per_s``,
``time/<phase>``, ``staleness/*``). Nothing whose name looks like a credential is ever written.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from slime.utils.environment import env_value

# Reference metric names (DESIGN.md "Conventions users will expect").
LOSS_TOTAL = "loss/total"
LOSS_BINARY = "loss/binary"
LOSS_OPD = "loss/opd"
REWARD_MEAN = "reward/mean"
REWARD_STD = "reward/std"
GRAD_NORM = "gradient/norm"
LEARNING_RATE = "learning_rate"

METRICS_FILE = "metrics.jsonl"
HUMAN_LOG_FILE = "training.log"

_SECRET_LAST_WORDS = {"key", "keys", "token", "secret", "password", "passwd", "credential", "credentials", "apikey"}
_SECRET_ANY_WORDS = {"secret", "password", "passwd", "credential", "credentials", "apikey"}
# Dataset-field selectors named *_key that hold column names, not credentials.
_NOT_SECRET = {
    "input_key", "label_key", "metadata_key", "tool_key", "reward_key", "eval_reward_key",
    "eval_input_key", "eval_label_key", "eval_tool_key", "multimodal_keys",
}
REDACTED = "***"


def is_secret_name(name: str) -> bool:
    """True for names like ``wandb_key``, ``OPENCLAW_API_KEY``, ``hf_token``, ``db_password``."""
    lowered = name.lower().replace("-", "_")
    if lowered in _NOT_SECRET:
        return False
    words = [w for w in lowered.split("_") if w]
    return bool(words) and (words[-1] in _SECRET_LAST_WORDS or any(w in _SECRET_ANY_WORDS for w in words))


def redact(values: Any) -> Any:
    """A copy of a (nested) mapping with credential-like entries replaced by ``***``."""
    if isinstance(values, Mapping):
        return {
            k: (REDACTED if is_secret_name(str(k)) and v not in (None, "") else redact(v)) for k, v in values.items()
        }
    if isinstance(values, (list, tuple)):
        return [redact(v) for v in values]
    return values


def _scalar(value: Any) -> float | int | str | None:
    if hasattr(value, "detach"):  # torch tensor
        value = value.detach().float().mean().item() if value.numel() != 1 else value.detach().item()
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, str)) or value is None:
        return value
    try:
        return float(value)
    except (TypeError, ValueError):
        return str(value)


def _fmt_duration(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


def _fmt_value(value: Any) -> str:
    if isinstance(value, float):
        if value != 0.0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
            return f"{value:.3e}"
        return f"{value:.4f}"
    return str(value)


class MetricsLogger:
    """One per training run (rank 0 writes; other ranks get a no-op logger).

    log(metrics, step) appends one JSON line, one human line and forwards to W&B/TensorBoard.
    """

    def __init__(
        self,
        log_dir: str | os.PathLike[str] = "./logs",
        *,
        total_steps: int | None = None,
        start_step: int = 0,
        progress_bar: bool = True,
        use_wandb: bool = False,
        wandb_project: str | None = None,
        wandb_group: str | None = None,
        wandb_team: str | None = None,
        wandb_dir: str | None = None,
        wandb_mode: str | None = None,
        wandb_run_id: str | None = None,
        wandb_key: str | None = None,
        wandb_host: str | None = None,
        run_name: str | None = None,
        use_tensorboard: bool = False,
        tb_dir: str | None = None,
        config: Mapping[str, Any] | None = None,
        rank: int = 0,
        capture_logger: str | None = "slime",
    ) -> None:
        self.enabled = rank == 0
        self.log_dir = Path(log_dir)
        self.total_steps = total_steps
        self._start_step = start_step
        self._t0 = time.monotonic()
        self._done = 0
        self._wandb = None
        self._tb = None
        self._bar = None
        self._jsonl = None
        self._handler: logging.Handler | None = None
        self._captured: logging.Logger | None = None
        if not self.enabled:
            return
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._jsonl = open(self.log_dir / METRICS_FILE, "a", buffering=1, encoding="utf-8")  # line-buffered
        self._human = logging.getLogger(f"slime.metrics.{id(self)}")
        self._human.propagate = False
        self._human.setLevel(logging.INFO)
        self._handler = logging.FileHandler(self.log_dir / HUMAN_LOG_FILE, encoding="utf-8")
        self._handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self._human.addHandler(self._handler)
        if capture_logger:
            # The trainer's own modules log through "slime.*": their lines land in training.log too.
            self._captured = logging.getLogger(capture_logger)
            self._captured.addHandler(self._handler)
            if self._captured.level == logging.NOTSET or self._captured.level > logging.INFO:
                self._captured.setLevel(logging.INFO)
        safe_config = redact(dict(config)) if config else {}
        if safe_config:
            (self.log_dir / "config.json").write_text(json.dumps(safe_config, indent=2, default=str))
        if progress_bar and total_steps:
            from tqdm import tqdm

            interactive = sys.stderr.isatty()
            self._bar = tqdm(
                total=total_steps, initial=start_step, desc="train", unit="step", file=sys.stderr,
                dynamic_ncols=interactive, mininterval=0.5 if interactive else 30.0,
            )
        if use_wandb:
            self._wandb = self._init_wandb(
                project=wandb_project, group=wandb_group, entity=wandb_team, directory=wandb_dir,
                mode=wandb_mode, run_id=wandb_run_id, key=wandb_key, host=wandb_host, name=run_name,
                config=safe_config,
            )
        if use_tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            directory = tb_dir or env_value("TENSORBOARD_DIR") or str(self.log_dir / "tensorboard")
            self._tb = SummaryWriter(log_dir=directory)
            self.tb_dir = directory
        self._human.info("logging to %s (metrics.jsonl, training.log)", self.log_dir.resolve())

    @classmethod
    def from_config(cls, config: Any, *, total_steps: int | None = None, start_step: int = 0, rank: int = 0) -> MetricsLogger:
        """Build from a TrainConfig (its ``logging`` section) and record the redacted config."""
        lg = config.logging
        tb_dir = None
        if lg.tb_project_name:
            tb_dir = str(Path(lg.tb_project_name) / (lg.tb_experiment_name or ""))
        return cls(
            lg.log_dir, total_steps=total_steps, start_step=start_step, progress_bar=lg.progress_bar,
            use_wandb=lg.use_wandb, wandb_project=lg.wandb_project, wandb_group=lg.wandb_group,
            wandb_team=lg.wandb_team, wandb_dir=lg.wandb_dir, wandb_mode=lg.wandb_mode,
            wandb_run_id=lg.wandb_run_id, wandb_key=lg.wandb_key, wandb_host=lg.wandb_host,
            use_tensorboard=lg.use_tensorboard, tb_dir=tb_dir, config=config.to_dict(), rank=rank,
        )

    def _init_wandb(self, *, project, group, entity, directory, mode, run_id, key, host, name, config) -> Any:
        import wandb

        mode = mode or env_value("WANDB_MODE") or "online"
        directory = Path(directory or self.log_dir)
        directory.mkdir(parents=True, exist_ok=True)
        if key and mode == "online":
            wandb.login(key=key, host=host, relogin=True)
        return wandb.init(
            project=project or "slime", group=group, entity=entity, name=name, id=run_id,
            resume="allow" if run_id else None, dir=str(directory), mode=mode, config=config,
            settings=wandb.Settings(console="off", silent=True),
        )

    @property
    def wandb_run_dir(self) -> str | None:
        return getattr(self._wandb, "dir", None) if self._wandb is not None else None

    def eta_seconds(self) -> float | None:
        """Remaining time from the average duration of the steps logged by this process.

        Each ``log`` call counts as one finished step, whatever the step numbering (0- or
        1-based rollout ids); ``start_step`` steps were done before (a resumed run)."""
        if not self.total_steps or self._done <= 0:
            return None
        per_step = (time.monotonic() - self._t0) / self._done
        return per_step * max(self.total_steps - self._start_step - self._done, 0)

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        if not self.enabled:
            return
        clean = {k: _scalar(v) for k, v in metrics.items() if not is_secret_name(k)}
        record = {"step": step, "time": time.time(), **clean}
        assert self._jsonl is not None
        self._jsonl.write(json.dumps(record, default=str, allow_nan=True) + "\n")
        self._done += 1
        eta = self.eta_seconds()
        progress = f"step {step}" + (f"/{self.total_steps}" if self.total_steps else "")
        if eta is not None:
            progress += f" eta {_fmt_duration(eta)}"
        self._human.info("%s | %s", progress, " ".join(f"{k}={_fmt_value(v)}" for k, v in clean.items()))
        for handler in self._human.handlers:
            handler.flush()
        numeric = {k: v for k, v in clean.items() if isinstance(v, (int, float)) and math.isfinite(v)}
        if self._wandb is not None:
            self._wandb.log(numeric, step=step)
        if self._tb is not None:
            for k, v in numeric.items():
                self._tb.add_scalar(k, v, global_step=step)
            self._tb.flush()
        if self._bar is not None:
            self._bar.update(1)
            shown = {k: _fmt_value(clean[k]) for k in (LOSS_TOTAL, REWARD_MEAN) if k in clean}
            if shown:
                self._bar.set_postfix(shown, refresh=False)

    def info(self, message: str, *args: Any) -> None:
        if self.enabled:
            self._human.info(message, *args)

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()
        if self._captured is not None and self._handler is not None:
            self._captured.removeHandler(self._handler)
        if self._handler is not None:
            self._human.removeHandler(self._handler)
            self._handler.close()
        if self._jsonl is not None:
            self._jsonl.close()
        self.enabled = False

    def __enter__(self) -> MetricsLogger:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# --------------------------------------------------------------------------------------------
# Helpers producing the standard metric groups
# --------------------------------------------------------------------------------------------


def reward_metrics(rewards: Iterable[float], prefix: str = "reward") -> dict[str, float]:
    """reward/mean, reward/std (population), reward/min, reward/max."""
    values = [float(r) for r in rewards]
    if not values:
        return {}
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    return {f"{prefix}/mean": mean, f"{prefix}/std": std, f"{prefix}/min": min(values), f"{prefix}/max": max(values)}


def staleness_metrics(sample_versions: Iterable[int], current_version: int, *, dropped: int = 0) -> dict[str, float]:
    """How many weight versions behind the trained samples were (async training)."""
    lags = [current_version - int(v) for v in sample_versions]
    out: dict[str, float] = {"staleness/dropped": float(dropped)}
    if lags:
        out["staleness/mean"] = sum(lags) / len(lags)
        out["staleness/max"] = float(max(lags))
    return out


def optimizer_step_metrics(reduced: Mapping[str, float], grad_norm: float, lr: float,
                           started: float, phases: Mapping[str, float] | None = None) -> dict[str, float]:
    """A train step's metrics, from its sums reduced across ranks (private `_` entries dropped, the
    token count `_tokens` reported as perf/train_tokens), plus the gradient norm before clipping, the
    learning rate the step used and the seconds since `started` (time.perf_counter). `phases`: this
    rank's own seconds per phase (`_forward_s` -> perf/forward_time; not reduced: ranks run in step)."""
    out = {k: v for k, v in reduced.items() if not k.startswith("_")}
    out["gradient/norm"] = float(grad_norm)
    out["learning_rate"] = float(lr)
    out["perf/train_tokens"] = reduced.get("_tokens", 0.0)
    out["perf/step_time"] = time.perf_counter() - started
    for name, seconds in (phases or {}).items():
        out[f"perf/{name.strip('_').removesuffix('_s')}_time"] = float(seconds)
    return out


class StepTimer:
    """Step-time breakdown: ``with timer("rollout"): ...`` then ``timer.metrics()`` gives
    ``time/rollout`` etc. (seconds, summed over repeated phases) and ``time/step``."""

    def __init__(self) -> None:
        self._totals: dict[str, float] = {}
        self._start = time.perf_counter()

    @contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._totals[phase] = self._totals.get(phase, 0.0) + time.perf_counter() - t0

    def metrics(self, *, tokens: int | None = None) -> dict[str, float]:
        elapsed = time.perf_counter() - self._start
        out = {f"time/{k}": v for k, v in self._totals.items()}
        out["time/step"] = elapsed
        if tokens is not None and elapsed > 0:
            out["perf/tokens_per_s"] = tokens / elapsed
        return out


class MetricsAccumulator:
    """Average metrics over micro-batches (weighted, e.g. by sample count)."""

    def __init__(self) -> None:
        self._sums: dict[str, float] = {}
        self._weights: dict[str, float] = {}

    def add(self, metrics: Mapping[str, Any], weight: float = 1.0) -> None:
        for k, v in metrics.items():
            value = _scalar(v)
            if isinstance(value, (int, float)):
                self._sums[k] = self._sums.get(k, 0.0) + float(value) * weight
                self._weights[k] = self._weights.get(k, 0.0) + weight

    def result(self) -> dict[str, float]:
        return {k: self._sums[k] / self._weights[k] for k in self._sums if self._weights[k]}
