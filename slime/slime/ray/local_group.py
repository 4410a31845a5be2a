"""The train group's interface without Ray: training ranks that are processes of their own.

Rank 0 lives in this process, next to the driver (`slime.ray.setup.setup(where="local" | "torchrun")`),
which runs the same loop over it as over `RayTrainGroup`; every rank is the same `TrainRayActor` code
the Ray actors run. With one rank (`LocalTrainGroup.one_rank`, the runtime's demo on two CPU cores)
that is all. Under torchrun the other ranks run `serve_commands`: each group call is broadcast to
them as a command and run by every rank on its own `TrainRayActor`, so collectives (gradient
all-reduce, FSDP2 state-dict gathers) line up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch.distributed as dist

from slime.ray.engine_process import free_port
from slime.ray.train_actor import TrainRayActor
from slime.utils.types import Sample

# The group calls every rank runs (rank 0 broadcasts them; `serve_commands` refuses any other).
COMMANDS = ("train", "save_hf", "save_trainer_state", "offload", "onload", "shutdown")

Command = tuple[str, tuple[Any, ...]]


def exchange(command: Command | None) -> Command:
    """Rank 0 sends `command`, every other rank receives it (no-op without a process group)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        assert command is not None
        return command
    box = [command]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def serve_commands(rank: TrainRayActor) -> None:
    """Ranks > 0: run rank 0's commands on this rank until `shutdown`."""
    while True:
        name, args = exchange(None)
        if name not in COMMANDS:
            raise RuntimeError(f"unknown command {name!r} from rank 0")
        getattr(rank, name)(*args)
        if name == "shutdown":
            return


class LocalTrainGroup:
    """Rank 0's handle on all ranks (the driver's `run.train`)."""

    def __init__(self, rank0: TrainRayActor, world_size: int = 1) -> None:
        self.rank0 = rank0
        self.world_size = world_size

    @classmethod
    def one_rank(cls, config: Any, model_path: str | None = None,
                 trainer_state_dir: str | None = None) -> LocalTrainGroup:
        """A world of one: rank 0 in this process, on a private rendezvous port."""
        rank0 = TrainRayActor()
        rank0.init(config, 0, 1, "127.0.0.1", free_port(), model_path, trainer_state_dir)
        return cls(rank0)

    def _all(self, name: str, *args: Any) -> Any:
        exchange((name, args))
        return getattr(self.rank0, name)(*args)

    @property
    def actor(self) -> Any:
        """The backend's train actor (model, tokenizer), for in-process callers."""
        return self.rank0.actor

    def train(self, rollout_id: int, samples: list[Sample], sample_weights: list[float] | None = None) -> dict[str, float]:
        return self._all("train", rollout_id, samples, sample_weights)  # metrics are reduced across ranks

    def current_global_step(self) -> int:
        return self.rank0.current_global_step()  # a local read: every rank steps together

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
