"""Training ranks started by `torchrun` instead of Ray (slime/train_grpo.py).

torchrun starts one process per rank with RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR /
MASTER_PORT in its env; the process group comes from those (gloo on CPU, NCCL on GPU). Rank 0 is
the driver: it runs the same loop as slime/train.py (rollout -> train -> push weights -> save)
through `TorchrunTrainGroup`, which has the train group's interface (`RayTrainGroup`,
`LocalTrainGroup`). Each group call is broadcast to the other ranks as a command and run by every
rank on its own `TrainRayActor` (the same rank code the Ray actors run), so collectives (gradient
all-reduce, FSDP2 state-dict gathers) line up. The other ranks only serve commands until `shutdown`.
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch.distributed as dist

from slime.ray.train_actor import TrainRayActor
from slime.utils.types import Sample

log = logging.getLogger("slime.train")

_COMMANDS = ("train", "save_hf", "save_trainer_state", "offload", "onload", "shutdown")


@dataclass(frozen=True)
class TorchrunEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    master_addr: str
    master_port: int

    @property
    def num_nodes(self) -> int:
        return max(1, self.world_size // self.local_world_size)


def torchrun_env(env: dict[str, str] | None = None) -> TorchrunEnv:
    """The rank layout torchrun put in the environment; an error naming the variable when absent."""
    env = dict(os.environ if env is None else env)
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if not env.get(k)]
    if missing:
        raise RuntimeError(f"{', '.join(missing)} not set: start this with torchrun "
                           "(torchrun --nproc_per_node=N slime/train_grpo.py ...), or use slime/train.py")
    world = int(env["WORLD_SIZE"])
    return TorchrunEnv(rank=int(env["RANK"]), world_size=world, local_rank=int(env.get("LOCAL_RANK", env["RANK"])),
                       local_world_size=int(env.get("LOCAL_WORLD_SIZE", world)),
                       master_addr=env["MASTER_ADDR"], master_port=int(env["MASTER_PORT"]))


def start_rank(cfg: Any, tr: TorchrunEnv, model_path: str, trainer_state_dir: str | None) -> TrainRayActor:
    """This process's training rank; joins the process group (via the backend's init_distributed)."""
    rank = TrainRayActor()
    rank.init(cfg, tr.rank, tr.world_size, tr.master_addr, tr.master_port, model_path, trainer_state_dir)
    return rank


def _exchange(command: tuple[str, tuple[Any, ...]] | None) -> tuple[str, tuple[Any, ...]]:
    """Rank 0 sends `command`, every other rank receives it (no-op without a process group)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        assert command is not None
        return command
    box = [command]
    dist.broadcast_object_list(box, src=0)
    return box[0]


class TorchrunTrainGroup:
    """Rank 0's handle on all ranks (the driver's `run.train`)."""

    def __init__(self, rank0: TrainRayActor, world_size: int) -> None:
        self.rank0 = rank0
        self.world_size = world_size

    def _all(self, name: str, *args: Any) -> Any:
        _exchange((name, args))
        return getattr(self.rank0, name)(*args)

    @property
    def actor(self) -> Any:
        return self.rank0.actor

    def train(self, rollout_id: int, samples: list[Sample], sample_weights: list[float] | None = None) -> dict[str, float]:
        return self._all("train", rollout_id, samples, sample_weights)  # metrics are reduced across ranks

    def current_global_step(self) -> int:
        return self.rank0.current_global_step()  # local read: every rank steps together

    def save_hf(self, folder: str | Path) -> None:
        self._all("save_hf", str(folder))

    def save_trainer_state(self, folder: str | Path) -> None:
        self._all("save_trainer_state", str(folder))

    def gpu_ids(self) -> list[str]:
        return []

    def offload(self) -> None:
        self._all("offload")

    def onload(self) -> None:
        self._all("onload")

    def shutdown(self) -> None:
        self._all("shutdown")


def serve_commands(rank: TrainRayActor) -> None:
    """Ranks > 0: run rank 0's commands on this rank until `shutdown`."""
    while True:
        name, args = _exchange(None)
        if name not in _COMMANDS:
            raise RuntimeError(f"unknown command {name!r} from rank 0")
        getattr(rank, name)(*args)
        if name == "shutdown":
            return


def rank_inputs(cfg: Any) -> tuple[Any, str, str | None]:
    """What every rank loads: the config with absolute paths, the model (the checkpoint when
    resuming with --load) and the trainer-state folder (None for a fresh run)."""
    from slime.ray.driver import absolutize
    from slime.utils.checkpoint import resolve_checkpoint

    if not cfg.rollout.hf_checkpoint:
        raise ValueError("no model: pass --hf-checkpoint (an HF model folder or hub id)")
    if cfg.debug.debug_rollout_only:
        raise ValueError("--debug-rollout-only trains nothing: run it with slime/train.py (no training ranks)")
    cfg = absolutize(cfg)
    ckpt = resolve_checkpoint(cfg.checkpoint.load) if cfg.checkpoint.load else None
    return cfg, str(ckpt) if ckpt else cfg.rollout.hf_checkpoint, str(ckpt) if ckpt else None


def setup_torchrun(cfg: Any, tr: TorchrunEnv, *, echo_steps: bool = True):
    """Rank 0: the run's parts in this process (`slime.ray.driver.setup` without Ray): the ranks,
    the rollout manager as a plain object (embedded engines started here, or external ones), the
    logger, and resume from --load."""
    from slime.ray.driver import RolloutManagerActor, Run, _num_rollout, from_ranges, make_logger
    from slime.utils.checkpoint import load_meta
    from slime.utils.weight_sync import WeightVersions

    cfg, model_path, state_dir = rank_inputs(cfg)
    meta = load_meta(Path(state_dir)) if state_dir else None
    sync_root = Path(tempfile.mkdtemp(prefix="slime-weights-", dir=os.environ.get("SLIME_WEIGHT_SYNC_DIR")))
    run = Run(cfg=cfg, args=cfg.to_namespace(), model_path=model_path,
              start_rollout_id=meta.rollout_id + 1 if meta else int(cfg.data.start_rollout_id or 0), num_rollout=0,
              weights=WeightVersions(root=sync_root, version=meta.weight_version if meta else 0,
                                     interval=cfg.rollout.update_weights_interval),
              sync_root=sync_root)
    if meta:
        run.trained_indices = from_ranges(meta.extra.get("trained_sample_ranges", []))
    try:
        rank0 = start_rank(cfg, tr, model_path, state_dir)
        run.train = TorchrunTrainGroup(rank0, tr.world_size)
        run.rollout = RolloutManagerActor(cfg, model_path, False, cfg.logging.log_dir,
                                          meta.data_source if meta else None, run.weights.version,
                                          meta.consumer_positions if meta else None)
        if not cfg.debug.debug_train_only:
            run.rollout.start_engines()
            run.args = run.rollout.m.args  # the manager's view carries the engine URLs the plugins read
        run.num_rollout = _num_rollout(cfg, run.rollout.num_prompts())
        run.logger = make_logger(cfg, run.num_rollout, run.start_rollout_id, echo=echo_steps)
    except BaseException:
        run.shutdown()
        raise
    return run
