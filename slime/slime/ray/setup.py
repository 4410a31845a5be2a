"""One way to bring a run up: `setup(cfg, where=...)`.

    where="ray"       on Ray: placement, the train group's actors, the rollout manager as an actor
                      and its engines, resume from --load (slime/train.py, slime/train_async.py)
    where="local"     in this process, without Ray: one training rank and the rollout manager as a
                      plain object, over engines that are already serving (--rollout-backend
                      external); for a job whose engine lives next to the trainer (the runtime's demo);
                      resume from --load
    where="torchrun"  rank 0 of a torchrun world (slime/train_grpo.py): this process's rank drives the
                      others by broadcast commands, the rollout manager is a plain object here
                      (embedded or external engines), resume from --load

Every form ends the same: weight versions continue after the data source's floor, a named adapter
(--lora-adapter-name) is loaded into the engines, the run length is known and the logger is open. A failure tears down what was started.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from slime.ray.driver import (
    RolloutManagerActor,
    Run,
    absolutize,
    call,
    continue_numbering,
    from_ranges,
    init_ray,
    log_layout,
    make_logger,
    needs_cross_node_sync,
    resolve,
)
from slime.ray.rollout_manager import check_engine_command
from slime.utils.checkpoint import CheckpointMeta, load_meta, resolve_checkpoint
from slime.utils.environment import env_value
from slime.utils.weight_sync import WeightVersions

if TYPE_CHECKING:
    from slime.backends.fsdp.torchrun import TorchrunEnv

log = logging.getLogger("slime.train")

Where = Literal["ray", "local", "torchrun"]
WHERE: tuple[Where, ...] = ("ray", "local", "torchrun")


@dataclass(frozen=True)
class RunInputs:
    """What every part of a run loads: the config with absolute paths, the model (the checkpoint when
    resuming with --load), the checkpoint folder and its metadata (None for a fresh run)."""

    cfg: Any
    model_path: str
    checkpoint: Path | None
    meta: CheckpointMeta | None

    @property
    def trainer_state_dir(self) -> str | None:
        return str(self.checkpoint) if self.checkpoint else None


def run_inputs(cfg: Any, where: Where) -> RunInputs:
    """The run's inputs, or a ValueError for a config this form of run cannot take. Every torchrun
    rank calls it (the refusals are the same on each, so no rank waits on one that stopped)."""
    if where not in WHERE:
        raise ValueError(f"where={where!r}: one of {', '.join(WHERE)}")
    # slime knows no default model (the runtime's launcher resolves one and passes it)
    if not cfg.rollout.hf_checkpoint:
        raise ValueError("no model: pass --hf-checkpoint (an HF model folder or hub id)")
    if where == "torchrun" and cfg.debug.debug_rollout_only:
        raise ValueError("--debug-rollout-only trains nothing: run it with slime/train.py (no training ranks)")
    cfg = absolutize(cfg)
    if where == "local":
        if cfg.cluster.rollout_backend != "external":
            raise ValueError("an in-process run trains against engines that are already serving: "
                             "pass --rollout-backend external --rollout-external-engine-addrs HOST:PORT")
    if where != "ray":  # no GPU for engines outside Ray: known now (on Ray, once placed)
        check_engine_command(cfg.to_namespace(), use_gpu=False)
    ckpt = resolve_checkpoint(cfg.checkpoint.load) if cfg.checkpoint.load else None
    if cfg.checkpoint.load and ckpt is None:
        log.warning("--load %s holds no checkpoint yet: starting from scratch", cfg.checkpoint.load)
    return RunInputs(cfg=cfg, model_path=str(ckpt) if ckpt else cfg.rollout.hf_checkpoint, checkpoint=ckpt,
                     meta=load_meta(ckpt) if ckpt else None)


def setup(cfg: Any, *, where: Where = "ray", torchrun: TorchrunEnv | None = None, echo_steps: bool = True) -> Run:
    """Bring up every part of a run (`where`: see the module docstring); `torchrun`: this process's
    place in the torchrun world (`torchrun_env()`), for where="torchrun"; `echo_steps`: print each
    step's line (a caller with its own progress display turns it off)."""
    if where == "torchrun" and torchrun is None:
        raise ValueError("where='torchrun' needs this process's torchrun env (slime.backends.fsdp.torchrun.torchrun_env)")
    inputs = run_inputs(cfg, where)
    if where == "ray" and inputs.cfg.cluster.weight_sync_shared_storage and not env_value("SLIME_WEIGHT_SYNC_DIR"):
        raise ValueError("--weight-sync-shared-storage: set SLIME_WEIGHT_SYNC_DIR to the shared folder (every "
                         "node must see it at the same path); without it the folders go to this node's /tmp")
    run = _new_run(inputs)
    try:
        layout = _bring_up_on_ray(run, inputs) if where == "ray" else _bring_up_here(run, inputs, torchrun)
        continue_numbering(run)
        load_initial_adapter(run)
        run.num_rollout = num_rollout(run.cfg, int(resolve(call(run.rollout, "num_prompts"))))
        run.logger = make_logger(run.cfg, run.num_rollout, run.start_rollout_id, echo=echo_steps)
        if layout is not None:
            log_layout(run, *layout)
    except BaseException:
        run.shutdown()
        raise
    return run


def load_initial_adapter(run: Run) -> None:
    """With --lora-adapter-name the engines answer for the policy only under that name, and before a
    push they hold no adapter of that name (or another run's): the trainer's current adapter (fresh,
    or the resumed checkpoint's) is pushed once, as a new version, before the first rollout, so every
    request naming it is answered by the weights being trained. Nothing to push without a trainer
    (--debug-rollout-only: the engines must already serve the name) or without engines."""
    name = run.cfg.lora.lora_adapter_name
    if name is None or run.train is None or run.cfg.debug.debug_train_only:
        return
    seconds = run.sync_weights()
    log.info("the engines serve the trainer's adapter as %r at version %d (%.2fs)", name, run.weights.version, seconds)


def num_rollout(cfg: Any, num_prompts: int) -> int:
    """Rollouts in the run: --num-rollout, else --num-epoch passes over the prompts."""
    if cfg.data.num_rollout is not None:
        return int(cfg.data.num_rollout)
    if cfg.data.num_epoch is not None and num_prompts:
        return max(1, cfg.data.num_epoch * num_prompts // cfg.data.rollout_batch_size)
    raise ValueError("set --num-rollout (or --num-epoch with --prompt-data)")


def _new_run(inputs: RunInputs) -> Run:
    """The run's record, resumed from the checkpoint's metadata when there is one. Weight-sync folders
    go to a private temp dir ($SLIME_WEIGHT_SYNC_DIR if set: on the engines' node or shared storage)."""
    cfg, meta = inputs.cfg, inputs.meta
    sync_parent = env_value("SLIME_WEIGHT_SYNC_DIR")
    if sync_parent:
        Path(sync_parent).mkdir(parents=True, exist_ok=True)
    sync_root = Path(tempfile.mkdtemp(prefix="slime-weights-", dir=sync_parent))
    run = Run(cfg=cfg, args=cfg.to_namespace(), model_path=inputs.model_path,
              start_rollout_id=meta.rollout_id + 1 if meta else int(cfg.data.start_rollout_id or 0), num_rollout=0,
              weights=WeightVersions(root=sync_root, version=meta.weight_version if meta else 0,
                                     interval=cfg.rollout.update_weights_interval),
              sync_root=sync_root)
    if meta:
        run.trained_indices = from_ranges(meta.extra.get("trained_sample_ranges", []))
    return run


def _manager_args(run: Run, inputs: RunInputs, use_gpu: bool) -> tuple[Any, ...]:
    """RolloutManagerActor's arguments (the API key is added on Ray, where the actor may run elsewhere)."""
    meta = inputs.meta
    return (run.cfg, inputs.model_path, use_gpu, run.cfg.logging.log_dir, meta.data_source if meta else None,
            run.weights.version, meta.consumer_positions if meta else None)


def _bring_up_here(run: Run, inputs: RunInputs, torchrun: TorchrunEnv | None) -> None:
    """Training ranks and the rollout manager in this process (where="local" / "torchrun"); nothing to
    lay out across nodes."""
    from slime.ray.local_group import LocalTrainGroup

    if torchrun is None:
        run.train = LocalTrainGroup.one_rank(run.cfg, model_path=inputs.model_path,
                                             trainer_state_dir=inputs.trainer_state_dir)
    else:
        from slime.backends.fsdp.torchrun import start_rank

        rank0 = start_rank(run.cfg, torchrun, inputs.model_path, inputs.trainer_state_dir)
        run.train = LocalTrainGroup(rank0, torchrun.world_size)
    run.rollout = RolloutManagerActor(*_manager_args(run, inputs, use_gpu=False))
    if not run.cfg.debug.debug_train_only:
        run.rollout.start_engines()
        run.args = run.rollout.m.args  # the manager's view carries the engine URLs the plugins read
    return None


def _bring_up_on_ray(run: Run, inputs: RunInputs) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Ray, placement, the train actors, the rollout manager actor and its engines; returns where the
    rollout manager and train rank 0 landed (for `log_layout`)."""
    import ray

    from slime.ray.actor_group import RayTrainGroup
    from slime.ray.placement_group import check_placement_resources, create_placement, resource_request
    from slime.rollout.sglang_client import engine_api_key

    cfg, debug = run.cfg, run.cfg.debug
    init_ray(cfg)
    check_placement_resources(run.args, ray.nodes())
    if not debug.debug_rollout_only:
        run.placement = create_placement(run.args)
    use_gpu = bool(run.placement and run.placement.use_gpu)
    check_engine_command(run.args, use_gpu)
    if not debug.debug_rollout_only:
        run.train = RayTrainGroup(cfg, run.placement, model_path=inputs.model_path,
                                  trainer_state_dir=inputs.trainer_state_dir)
    options: dict[str, Any] = {"num_cpus": 0, "max_concurrency": 2}
    if use_gpu and run.placement.rollout_bundles:  # disaggregated: the engines' own GPUs
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        options.update(num_gpus=run.placement.rollout_gpus, scheduling_strategy=PlacementGroupSchedulingStrategy(
            placement_group=run.placement.pg, placement_group_bundle_index=run.placement.rollout_bundles[0]))
    elif cfg.cluster.rollout_resources:  # (in the bundle case the bundle holds it)
        options["resources"] = resource_request(cfg.cluster.rollout_resources)
    # By argument, not runtime_env: an actor's env vars are shown by Ray's dashboard and state API.
    run.rollout = ray.remote(RolloutManagerActor).options(**options).remote(
        *_manager_args(run, inputs, use_gpu), engine_api_key())
    if not debug.debug_train_only:
        gpu_ids = run.train.gpu_ids() if (use_gpu and cfg.cluster.colocate and run.train) else None
        ray.get(run.rollout.start_engines.remote(gpu_ids))
    rollout_node = ray.get(run.rollout.node_info.remote())
    trainer_node = run.train.rank0_node() if run.train is not None else None
    if trainer_node is not None:
        run.weights_cross_node = needs_cross_node_sync(trainer_node["node_id"], rollout_node["node_id"],
                                                       cfg.cluster.weight_sync_shared_storage)
    return rollout_node, trainer_node
