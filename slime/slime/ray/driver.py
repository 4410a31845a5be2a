"""What train.py and train_async.py share: bring the run up (Ray, placement, rollout manager,
train group, resume), save checkpoints, push weights, log, and tear everything down.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from slime.utils.checkpoint import (
    CheckpointMeta,
    begin_checkpoint,
    commit_checkpoint,
    load_meta,
    resolve_checkpoint,
)
from slime.utils.types import Sample
from slime.utils.weight_sync import WeightVersions

log = logging.getLogger("slime.train")

_PATH_FIELDS = ("prompt_data", "save", "load", "log_dir", "save_debug_rollout_data", "load_debug_rollout_data",
                "save_hf", "hf_checkpoint")
_PLUGIN_FIELDS = ("rollout_function_path", "custom_generate_function_path", "custom_rm_path",
                  "custom_loss_function_path", "dynamic_sampling_filter_path", "data_source_path",
                  "eval_function_path")


def absolutize(cfg: Any) -> Any:
    """Make relative paths absolute before the config travels to Ray workers (whose working
    directory may differ from the driver's)."""
    flat = cfg.to_flat_dict()
    changes: dict[str, Any] = {}
    for name in _PATH_FIELDS:
        value = flat.get(name)
        if isinstance(value, str) and value and not os.path.isabs(value) and "://" not in value:
            changes[name] = os.path.abspath(value)
    for name in _PLUGIN_FIELDS:
        value = flat.get(name)
        if isinstance(value, str) and (".py" in value or "/" in value):
            file_part, sep, attr = value.partition(".py:")
            file_part = file_part + ".py" if sep else file_part
            if os.path.isfile(file_part):
                changes[name] = os.path.abspath(file_part) + (f":{attr}" if sep else "")
    return cfg.with_overrides(**changes) if changes else cfg


def init_ray(cfg: Any) -> None:
    """Connect to the job's cluster (RAY_ADDRESS, set by `ray job submit`) or --ray-address;
    otherwise start a private local instance (never attach to someone else's `ray start`)."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    address = cfg.cluster.ray_address or (None if os.environ.get("RAY_ADDRESS") else "local")
    kwargs: dict[str, Any] = {"address": address, "log_to_driver": True, "include_dashboard": False} \
        if address == "local" else {"address": address}
    ray.init(**kwargs)


def make_logger(cfg: Any, total_steps: int, start_step: int):
    from slime.ray.run_logging import RunLogger

    return RunLogger(cfg, total_steps, start_step)


@dataclass
class Run:
    cfg: Any
    args: Any
    model_path: str  # what the engines and the trainer load at start (a checkpoint when resuming)
    start_rollout_id: int
    num_rollout: int
    weights: WeightVersions
    placement: Any = None
    rollout: Any = None  # RolloutManager actor handle
    train: Any = None  # RayTrainGroup
    logger: Any = None
    sync_root: Path | None = None
    data_states: dict[int, dict[str, Any]] = field(default_factory=dict)
    _engines_on: bool = True
    _trainer_on: bool = True
    trained_indices: list[int] = field(default_factory=list)

    # ------------------------------------------------------------------ steps
    def generate(self, rollout_id: int):
        """Remote call: returns an ObjectRef of (samples, metrics, data_source_state)."""
        return self.rollout.generate_with_state.remote(rollout_id)

    # Colocated mode: the engines and the trainer take turns on the same devices. Rollout and
    # weight loading need the engines resident; training needs them released (SGLang) and the
    # trainer's weights/optimizer back on the GPU. The flags make each switch idempotent.
    def _engines_resident(self, on: bool) -> None:
        if self.cfg.cluster.offload_rollout and self.rollout is not None and self._engines_on != on:
            ray.get((self.rollout.onload if on else self.rollout.offload).remote())
            self._engines_on = on

    def _trainer_resident(self, on: bool) -> None:
        if self.cfg.cluster.offload_train and self.train is not None and self._trainer_on != on:
            (self.train.onload if on else self.train.offload)()
            self._trainer_on = on

    def before_rollout(self) -> None:
        self._trainer_resident(False)
        self._engines_resident(True)

    def train_on(self, rollout_id: int, samples: list[Sample], sample_weights: list[float] | None = None) -> dict[str, float]:
        self._engines_resident(False)
        self._trainer_resident(True)
        metrics = self.train.train(rollout_id, samples, sample_weights)
        self.trained_indices.extend(int(s.index) for s in samples if s.index is not None)
        return metrics

    def sync_weights(self) -> float:
        """Write weights (or the adapter) and load them into every engine; returns seconds."""
        t0 = time.perf_counter()
        self._trainer_resident(True)
        self._engines_resident(True)
        folder = self.weights.next_folder()
        self.train.save_hf(folder)
        ray.get(self.rollout.update_weights.remote(str(folder), self.weights.version + 1))
        self.weights.committed(folder)
        return time.perf_counter() - t0

    def save(self, rollout_id: int) -> Path | None:
        c = self.cfg.checkpoint
        if not c.save or self.train is None:
            return None
        t0 = time.perf_counter()
        tmp = begin_checkpoint(c.save, rollout_id)
        self.train.save_hf(tmp)
        if not c.no_save_optim:
            self.train.save_trainer_state(tmp)
        state = self.data_states.get(rollout_id, {})
        meta = CheckpointMeta(rollout_id=rollout_id, data_source=state.get("data_source", {}),
                              consumer_positions=state.get("consumer_positions", {}),
                              weight_version=self.weights.version, global_step=0,
                              base_model_path=self.cfg.rollout.hf_checkpoint, use_lora=self.cfg.lora.use_lora,
                              extra={"trained_sample_ranges": to_ranges(self.trained_indices)})
        final = commit_checkpoint(c.save, rollout_id, tmp, meta, keep_last=c.keep_last_n_checkpoints)
        if c.save_hf:
            target = Path(c.save_hf.format(rollout_id=rollout_id))
            self.train.save_hf(target)
        log.info("saved %s in %.1fs", final, time.perf_counter() - t0)
        return final

    def should_save(self, rollout_id: int) -> bool:
        c = self.cfg.checkpoint
        last = rollout_id == self.num_rollout - 1
        return bool(c.save) and ((c.save_interval is not None and (rollout_id + 1) % c.save_interval == 0) or last)

    def shutdown(self) -> None:
        if self.train is not None:
            self.train.shutdown()
            self.train = None
        if self.rollout is not None:
            try:
                ray.get(self.rollout.shutdown.remote(), timeout=120)
            finally:
                ray.kill(self.rollout)
            self.rollout = None
        if self.placement is not None:
            self.placement.remove()
            self.placement = None
        if self.sync_root is not None:
            shutil.rmtree(self.sync_root, ignore_errors=True)
        if self.logger is not None:
            self.logger.close()


def to_ranges(indices: list[int]) -> list[list[int]]:
    """[0,1,2,5,6] -> [[0,2],[5,6]] (inclusive): a compact record of which samples were trained."""
    out: list[list[int]] = []
    for i in sorted(set(indices)):
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def from_ranges(ranges: list[list[int]]) -> list[int]:
    return [i for a, b in ranges for i in range(a, b + 1)]


def _resolve_model(cfg: Any) -> Any:
    if cfg.rollout.hf_checkpoint:
        return cfg
    from openclaw.models import resolve_model_path

    return cfg.with_overrides(hf_checkpoint=str(resolve_model_path(None)))


def setup(cfg: Any) -> Run:
    """Bring up every part of a run; on failure, tear down what was started."""
    from slime.ray.actor_group import RayTrainGroup
    from slime.ray.placement_group import create_placement

    cfg = absolutize(_resolve_model(cfg))
    args = cfg.to_namespace()
    ckpt = resolve_checkpoint(cfg.checkpoint.load) if cfg.checkpoint.load else None
    if cfg.checkpoint.load and ckpt is None:
        log.warning("--load %s holds no checkpoint yet: starting from scratch", cfg.checkpoint.load)
    meta = load_meta(ckpt) if ckpt else None
    model_path = str(ckpt) if ckpt else cfg.rollout.hf_checkpoint
    start = meta.rollout_id + 1 if meta else int(cfg.data.start_rollout_id or 0)
    init_ray(cfg)
    # weight-sync folders: a private temp dir (on the engines' node), $SLIME_WEIGHT_SYNC_DIR if set
    sync_parent = os.environ.get("SLIME_WEIGHT_SYNC_DIR")
    if sync_parent:
        Path(sync_parent).mkdir(parents=True, exist_ok=True)
    sync_root = Path(tempfile.mkdtemp(prefix="slime-weights-", dir=sync_parent))
    run = Run(cfg=cfg, args=args, model_path=model_path, start_rollout_id=start, num_rollout=0,
              weights=WeightVersions(root=sync_root, version=meta.weight_version if meta else 0,
                                     interval=cfg.rollout.update_weights_interval),
              sync_root=sync_root)
    if meta:
        run.trained_indices = from_ranges(meta.extra.get("trained_sample_ranges", []))
    try:
        debug = cfg.debug
        need_engines = not debug.debug_train_only
        if not debug.debug_rollout_only:
            run.placement = create_placement(args)
        use_gpu = bool(run.placement and run.placement.use_gpu)
        if not debug.debug_rollout_only:
            run.train = RayTrainGroup(cfg, run.placement, model_path=model_path,
                                      trainer_state_dir=str(ckpt) if ckpt else None)
        options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 2}
        if use_gpu and run.placement.rollout_bundles:  # disaggregated: the engines' own GPUs
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            options.update(num_gpus=run.placement.rollout_gpus, scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=run.placement.pg, placement_group_bundle_index=run.placement.rollout_bundles[0]))
        run.rollout = ray.remote(RolloutManagerActor).options(**options).remote(
            cfg, model_path, use_gpu, cfg.logging.log_dir, meta.data_source if meta else None, run.weights.version,
            meta.consumer_positions if meta else None)
        if need_engines:
            gpu_ids = run.train.gpu_ids() if (use_gpu and cfg.cluster.colocate and run.train) else None
            ray.get(run.rollout.start_engines.remote(gpu_ids))
        run.num_rollout = _num_rollout(cfg, ray.get(run.rollout.num_prompts.remote()))
        run.logger = make_logger(cfg, run.num_rollout, start)
    except BaseException:
        run.shutdown()
        raise
    return run


def _num_rollout(cfg: Any, num_prompts: int) -> int:
    if cfg.data.num_rollout is not None:
        return int(cfg.data.num_rollout)
    if cfg.data.num_epoch is not None and num_prompts:
        return max(1, cfg.data.num_epoch * num_prompts // cfg.data.rollout_batch_size)
    raise ValueError("set --num-rollout (or --num-epoch with --prompt-data)")


class RolloutManagerActor:
    """RolloutManager plus the bookkeeping the driver needs for exact resume."""

    def __init__(self, cfg: Any, model_path: str, use_gpu: bool, log_dir: str,
                 data_source_state: dict[str, Any] | None, weight_version: int,
                 consumer_positions: dict[str, Any] | None = None) -> None:
        from slime.ray.rollout_manager import RolloutManager

        self.m = RolloutManager(cfg, model_path, use_gpu, log_dir, data_source_state, weight_version)
        if consumer_positions and hasattr(self.m.data_source, "load_consumer_positions"):
            self.m.data_source.load_consumer_positions(consumer_positions)

    def start_engines(self, gpu_ids: list[str] | None = None) -> list[str]:
        return self.m.start_engines(gpu_ids)

    def engine_pids(self) -> list[int]:
        return self.m.engine_pids()

    def engine_urls(self) -> list[str]:
        return self.m.engine_urls()

    def num_prompts(self) -> int:
        return self.m.num_prompts()

    def generate_with_state(self, rollout_id: int):
        samples, metrics = self.m.generate(rollout_id)
        ds = self.m.data_source
        state = {"data_source": self.m.data_source_state(),
                 "consumer_positions": ds.consumer_positions() if hasattr(ds, "consumer_positions") else {}}
        return samples, metrics, state

    def update_weights(self, model_path: str, version: int) -> int:
        return self.m.update_weights(model_path, version)

    def offload(self) -> None:
        self.m.offload()

    def onload(self) -> None:
        self.m.onload()

    def shutdown(self) -> None:
        self.m.shutdown()


def rollout_summary(samples: list[Sample], args: Any) -> dict[str, float]:
    from slime.rollout.sglang_rollout import reward_value
    from slime.utils.metrics import reward_metrics

    out = reward_metrics([reward_value(args, s) for s in samples])
    out["rollout/num_samples"] = float(len(samples))
    out["rollout/response_tokens"] = float(sum(s.response_length for s in samples))
    return out
