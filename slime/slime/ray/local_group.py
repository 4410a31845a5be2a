"""The train group's interface without Ray: one training rank in this process.

For a job that already lives in one process next to its inference engine (the runtime's demo on
two CPU cores): the driver (`slime.ray.driver.setup_local`) runs the same loop over it as over
`RayTrainGroup`, and the rank is the same `TrainRayActor` code the Ray actors run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slime.ray.engine_process import free_port
from slime.ray.train_actor import TrainRayActor
from slime.utils.types import Sample


class LocalTrainGroup:
    def __init__(self, config: Any, model_path: str | None = None, trainer_state_dir: str | None = None) -> None:
        self.rank0 = TrainRayActor()
        self.world_size = 1
        self.global_step = self.rank0.init(config, 0, 1, "127.0.0.1", free_port(), model_path, trainer_state_dir)

    @property
    def actor(self) -> Any:
        """The backend's train actor (model, tokenizer), for in-process callers."""
        return self.rank0.actor

    def train(self, rollout_id: int, samples: list[Sample], sample_weights: list[float] | None = None) -> dict[str, float]:
        return self.rank0.train(rollout_id, samples, sample_weights)

    def current_global_step(self) -> int:
        return self.rank0.current_global_step()

    def save_hf(self, folder: str | Path) -> None:
        self.rank0.save_hf(str(folder))

    def save_trainer_state(self, folder: str | Path) -> None:
        self.rank0.save_trainer_state(str(folder))

    def gpu_ids(self) -> list[str]:
        return []

    def offload(self) -> None:
        self.rank0.offload()

    def onload(self) -> None:
        self.rank0.onload()

    def shutdown(self) -> None:
        self.rank0.shutdown()
