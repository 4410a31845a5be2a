"""The one training loop's parts: the run (`Run`), its rollout manager (`RolloutManagerActor`) and
the loop's steps, shared by every way of running it (`slime.ray.setup.setup` brings a run up,
`slime.ray.loop` runs it). Per rollout:

    samples, metrics = collect_rollout(run, rollout_id)     # rollout + its data-source state
    metrics.update(run.train_on(rollout_id, samples))       # train
    finish_step(run, rollout_id, metrics, timer)            # push weights, report, save, evaluate, log (when due)

and `run.shutdown()` tears down what was started. The rollout manager is a Ray actor on Ray and a
plain object in an in-process run; `call`/`resolve` hide the difference.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from slime.utils.checkpoint import (
    CheckpointMeta,
    begin_checkpoint,
    commit_checkpoint,
)
from slime.utils.environment import env_value
from slime.utils.types import Sample
from slime.utils.weight_sync import WeightVersions

log = logging.getLogger("slime.train")

_PATH_FIELDS = ("prompt_data", "save", "load", "log_dir", "save_debug_rollout_data", "load_debug_rollout_data",
                "save_hf", "hf_checkpoint")
_PLUGIN_FIELDS = ("rollout_function_path", "custom_generate_function_path", "custom_rm_path",
                  "custom_loss_function_path", "dynamic_sampling_filter_path", "data_source_path",
                  "eval_function_path", "rollout_sample_filter_path", "custom_reward_post_process_path")


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
    evals = flat.get("eval_prompt_data")
    if evals:  # NAME PATH pairs: only the paths
        changes["eval_prompt_data"] = tuple(v if i % 2 == 0 else os.path.abspath(v) for i, v in enumerate(evals))
    return cfg.with_overrides(**changes) if changes else cfg


def init_ray(cfg: Any) -> None:
    """Connect to the job's cluster (RAY_ADDRESS, set by `ray job submit`) or --ray-address;
    otherwise start a private local instance (never attach to someone else's `ray start`)."""
    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    address = cfg.cluster.ray_address or (None if env_value("RAY_ADDRESS") else "local")
    kwargs: dict[str, Any] = {"address": address, "log_to_driver": True, "include_dashboard": False} \
        if address == "local" else {"address": address}
    ray.init(**kwargs)


def make_logger(cfg: Any, total_steps: int, start_step: int, echo: bool = True):
    from slime.ray.run_logging import RunLogger

    return RunLogger(cfg, total_steps, start_step, echo=echo)


class _Ready:
    """An in-process call's result, shaped like a Ray ObjectRef for `resolve`."""

    def __init__(self, value: Any) -> None:
        self.value = value


def call(target: Any, name: str, *args: Any) -> Any:
    """`target.name(*args)`: a remote call on a Ray actor (an ObjectRef), a direct one otherwise."""
    method = getattr(target, name)
    return method.remote(*args) if hasattr(method, "remote") else _Ready(method(*args))


def resolve(ref: Any) -> Any:
    return ref.value if isinstance(ref, _Ready) else ray.get(ref)


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
    weights_cross_node: bool = False  # weight pushes carry the files through Ray's object store
    data_states: dict[int, dict[str, Any]] = field(default_factory=dict)
    _engines_on: bool = True
    _trainer_on: bool = True
    trained_indices: list[int] = field(default_factory=list)
    unreported_indices: list[int] = field(default_factory=list)  # trained, not yet passed to `on_trained`

    # ------------------------------------------------------------------ steps
    def generate(self, rollout_id: int):
        """Start rollout `rollout_id`: a handle for `collect_rollout` (a Ray ObjectRef, or the
        in-process result) of (samples, metrics, data_source_state)."""
        return call(self.rollout, "generate_with_state", rollout_id)

    # Colocated mode: the engines and the trainer take turns on the same devices. Rollout and
    # weight loading need the engines resident; training needs them released (SGLang) and the
    # trainer's weights/optimizer back on the GPU. The flags make each switch idempotent.
    def _engines_resident(self, on: bool) -> None:
        if self.cfg.cluster.offload_rollout and self.rollout is not None and self._engines_on != on:
            resolve(call(self.rollout, "onload" if on else "offload"))
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
        self.unreported_indices.extend(int(s.index) for s in samples if s.index is not None)
        return metrics

    def report_trained(self, rollout_id: int, synced: bool) -> None:
        """Tell the data source which sample indices step `rollout_id` trained and the weight
        version they went into (the one just pushed, or the next one to be pushed), through its
        optional `on_trained(indices, step, weight_version)`; a provenance ledger lives there."""
        if not self.unreported_indices or self.rollout is None:
            return
        version = self.weights.version if synced else self.weights.version + 1
        resolve(call(self.rollout, "on_trained", list(self.unreported_indices), rollout_id, version))
        self.unreported_indices = []

    def sync_weights(self) -> float:
        """Write weights (or the adapter) and load them into every engine; returns seconds.

        Same node (or shared storage): rank 0 saves into a folder and the engines load that path.
        Across nodes (`weights_cross_node`): rank 0 saves into a private folder on its node and hands
        the files to Ray's object store; the rollout manager fetches them from there, writes them
        into a folder on its own node and has its engines load that."""
        t0 = time.perf_counter()
        self._trainer_resident(True)
        self._engines_resident(True)
        if self.weights_cross_node:
            version = self.weights.version + 1
            report = resolve(call(self.rollout, "update_weights_from_files", self.train.save_hf_files(), version))
            self.weights.version = version  # no folder on this side to keep or clean up
            seconds = time.perf_counter() - t0
            log.info("weight sync v%d crossed nodes through Ray's object store: %d files, %d bytes, written to %s "
                     "on the rollout node; engines now serve versions %s (%.2fs)", version, report["files"],
                     report["bytes"], report["folder"], report["served_versions"], seconds)
            return seconds
        folder = self.weights.next_folder()
        self.train.save_hf(folder)
        resolve(call(self.rollout, "update_weights", str(folder), self.weights.version + 1))
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
                              weight_version=self.weights.version, global_step=self.train.current_global_step(),
                              base_model_path=self.cfg.rollout.hf_checkpoint, use_lora=self.cfg.lora.use_lora,
                              extra={"trained_sample_ranges": to_ranges(self.trained_indices)})
        final = commit_checkpoint(c.save, rollout_id, tmp, meta, keep_last=c.keep_last_n_checkpoints)
        if c.save_hf:
            target = Path(c.save_hf.format(rollout_id=rollout_id))
            self.train.save_hf(target)
        log.info("saved %s in %.1fs", final, time.perf_counter() - t0)
        return final

    def should_evaluate(self, rollout_id: int) -> bool:
        interval = self.cfg.data.eval_interval
        last = rollout_id == self.num_rollout - 1
        return interval is not None and ((rollout_id + 1) % interval == 0 or last)

    def evaluate(self, rollout_id: int) -> dict[str, float]:
        """Score the engines' current weights on --eval-prompt-data (the rollout manager runs the
        eval function); returns the `eval/<name>/...` metrics. Nothing of it is trained on."""
        self.before_rollout()  # colocated: the engines generate, the trainer makes room
        return dict(resolve(call(self.rollout, "evaluate", rollout_id)))

    def should_save(self, rollout_id: int) -> bool:
        c = self.cfg.checkpoint
        last = rollout_id == self.num_rollout - 1
        return bool(c.save) and ((c.save_interval is not None and (rollout_id + 1) % c.save_interval == 0) or last)

    def shutdown(self) -> None:
        if self.train is not None:
            self.train.shutdown()
            self.train = None
        if self.rollout is not None and not hasattr(self.rollout.shutdown, "remote"):
            self.rollout.shutdown()  # in-process (no Ray)
            self.rollout = None
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
            self.logger = None


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


def needs_cross_node_sync(trainer_node_id: str, rollout_node_id: str, shared_storage: bool = False) -> bool:
    """Must a weight push carry the files (through Ray's object store) instead of a folder path?

    Yes when training rank 0, which writes the folder, and the rollout manager, whose engines read
    it, run on different Ray nodes, unless the folder is on storage every node mounts at the same
    path (--weight-sync-shared-storage). Decided from Ray's node ids, not from whether the path
    exists on the rollout node: a folder of that name there may hold other (stale) files."""
    return trainer_node_id != rollout_node_id and not shared_storage


def log_layout(run: Run, rollout_node: dict[str, Any], trainer_node: dict[str, Any] | None) -> None:
    """Where the parts of the run landed and how weights will travel (training.log)."""
    urls = resolve(call(run.rollout, "engine_urls"))
    pids = resolve(call(run.rollout, "engine_pids"))
    log.info("rollout manager on node %s (id %s, pid %s): engine urls %s, engine pids %s", rollout_node["ip"],
             rollout_node["node_id"], rollout_node["pid"], urls, pids)
    if trainer_node is not None:
        log.info("train rank 0 on node %s (id %s, pid %s); weight sync: %s", trainer_node["ip"],
                 trainer_node["node_id"], trainer_node["pid"],
                 "cross-node, through Ray's object store" if run.weights_cross_node else "through a folder on disk")


def continue_numbering(run: Run) -> None:
    """Weight versions are unique across restarts: the data source may name the highest version
    already in use (optional `weight_version_floor()`; the OpenClaw buffer's does) and this run's
    pushes are numbered after it, so a restarted trainer never reuses a version number."""
    floor = int(resolve(call(run.rollout, "weight_version_floor")))
    if floor > run.weights.version:
        log.info("weight versions continue after %d (the highest already in use)", floor)
        run.weights.version = floor


class RolloutManagerActor:
    """RolloutManager plus the bookkeeping the driver needs for exact resume."""

    def __init__(self, cfg: Any, model_path: str, use_gpu: bool, log_dir: str,
                 data_source_state: dict[str, Any] | None, weight_version: int,
                 consumer_positions: dict[str, Any] | None = None, engine_api_key: str | None = None) -> None:
        from slime.ray.rollout_manager import RolloutManager
        from slime.rollout.sglang_client import API_KEY_ENV

        if engine_api_key:
            # The driver's key, for this worker's requests and the engines it starts (they inherit
            # the environment): a worker on another node does not share the driver's environment.
            os.environ[API_KEY_ENV] = engine_api_key

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

    def evaluate(self, rollout_id: int) -> dict[str, float]:
        return self.m.evaluate(rollout_id)

    def generate_with_state(self, rollout_id: int):
        samples, metrics = self.m.generate(rollout_id)
        ds = self.m.data_source
        state = {"data_source": self.m.data_source_state(),
                 "consumer_positions": ds.consumer_positions() if hasattr(ds, "consumer_positions") else {}}
        return samples, metrics, state

    def update_weights(self, model_path: str, version: int) -> int:
        self._before_weight_push()
        return self.m.update_weights(model_path, version)

    def update_weights_from_files(self, files: dict[str, bytes], version: int) -> dict[str, Any]:
        self._before_weight_push()
        return self.m.update_weights_from_files(files, version)

    def _before_weight_push(self) -> None:
        check = getattr(self.m.data_source, "before_weight_push", None)  # optional: may refuse by raising
        if check is not None:
            check()

    def node_info(self) -> dict[str, Any]:
        from slime.ray.placement_group import node_info

        return node_info()

    def weight_version_floor(self) -> int:
        hook = getattr(self.m.data_source, "weight_version_floor", None)  # optional data-source hook
        return int(hook()) if hook is not None else 0

    def on_trained(self, indices: list[int], step: int, weight_version: int) -> None:
        hook = getattr(self.m.data_source, "on_trained", None)  # optional data-source hook
        if hook is not None:
            hook(indices, step, weight_version)

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


# ---------------------------------------------------------------------------------------------
# The loop's steps (train.py, train_async.py and in-process jobs call these, in this order)
# ---------------------------------------------------------------------------------------------


def collect_rollout(run: Run, rollout_id: int, ref: Any = None) -> tuple[list[Sample], dict[str, Any]]:
    """Wait for rollout `rollout_id` (`ref` from `run.generate`, or generate it now), keep its
    data-source state for the checkpoint, and summarise it."""
    samples, rollout_metrics, state = resolve(ref if ref is not None else run.generate(rollout_id))
    run.data_states[rollout_id] = state
    metrics = dict(rollout_metrics)
    metrics.update(rollout_summary(samples, run.args))
    return samples, metrics


def finish_step(run: Run, rollout_id: int, metrics: dict[str, Any], timer: Any, *, sync: bool = True) -> None:
    """The tail of every step: push weights (every --update-weights-interval), tell the data
    source what was trained into which version (`Run.report_trained`), save (every
    --save-interval and at the end), evaluate (every --eval-interval and at the end), log."""
    evaluate = run.should_evaluate(rollout_id)
    # An evaluation scores the weights just trained: its step pushes them even when
    # --update-weights-interval would not.
    synced = sync and (run.weights.due(rollout_id) or evaluate)
    if synced:
        with timer("weight_sync"):
            run.sync_weights()
        metrics["weights/cross_node"] = float(run.weights_cross_node)
    run.report_trained(rollout_id, synced)
    metrics["weights/version"] = run.weights.version
    if run.should_save(rollout_id):
        with timer("save"):
            run.save(rollout_id)
    if evaluate:
        with timer("eval"):
            metrics.update(run.evaluate(rollout_id))
    log_step(run, rollout_id, metrics, timer)


def log_step(run: Run, rollout_id: int, metrics: dict[str, Any], timer: Any) -> None:
    metrics.update(timer.metrics(tokens=int(metrics.get("rollout/response_tokens", 0))))
    run.logger.log(rollout_id, metrics)
