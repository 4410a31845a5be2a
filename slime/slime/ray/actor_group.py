"""The train actor group: one Ray actor per data-parallel rank, placed in the PG bundles.

Rendezvous: rank 0 reports its node IP and a free port; every rank then joins
torch.distributed with that MASTER_ADDR/MASTER_PORT (gloo on CPU, nccl on GPU).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from slime.ray.placement_group import Placement
from slime.ray.train_actor import TrainRayActorRemote
from slime.utils.types import Sample


class RayTrainGroup:
    def __init__(self, config: Any, placement: Placement, model_path: str | None = None,
                 trainer_state_dir: str | None = None) -> None:
        self.world_size = len(placement.actor_bundles)
        self.actors = []
        for bundle in placement.actor_bundles:
            options: dict[str, Any] = {
                "num_cpus": placement.cpus_per_actor,
                "num_gpus": 1 if placement.use_gpu else 0,
                "scheduling_strategy": PlacementGroupSchedulingStrategy(
                    placement_group=placement.pg, placement_group_bundle_index=bundle),
                "runtime_env": {"env_vars": {"TOKENIZERS_PARALLELISM": "false",
                                             "OMP_NUM_THREADS": str(int(placement.cpus_per_actor))}},
            }
            self.actors.append(TrainRayActorRemote.options(**options).remote())
        master_addr, master_port = ray.get(self.actors[0].node_address.remote())
        steps = ray.get([a.init.remote(config, rank, self.world_size, master_addr, master_port, model_path,
                                       trainer_state_dir) for rank, a in enumerate(self.actors)])
        self.global_step = int(steps[0])

    def train(self, rollout_id: int, samples: list[Sample] | Any, sample_weights: list[float] | None = None) -> dict[str, float]:
        ref = samples if isinstance(samples, ray.ObjectRef) else ray.put(samples)
        metrics = ray.get([a.train.remote(rollout_id, ref, sample_weights) for a in self.actors])
        return metrics[0]  # reduced across ranks already: identical everywhere

    def current_global_step(self) -> int:
        """Optimizer steps taken so far (rank 0's; every rank steps together)."""
        return int(ray.get(self.actors[0].current_global_step.remote()))

    def save_hf(self, folder: str | Path) -> None:
        ray.get([a.save_hf.remote(str(folder)) for a in self.actors])

    def save_hf_files(self) -> ray.ObjectRef:
        """Rank 0's saved weight files, left in Ray's object store: a handle to pass on to a
        rollout manager on another node, which fetches them from rank 0's node directly (they
        never pass through this driver)."""
        refs = [a.save_hf_files.remote() for a in self.actors]
        ray.get(refs[1:])  # the other ranks only take part in the collective save
        return refs[0]

    def rank0_node(self) -> dict[str, Any]:
        """Rank 0's node (id, address) and PID: where `save_hf` writes its folder."""
        return ray.get(self.actors[0].node_info.remote())

    def save_trainer_state(self, folder: str | Path) -> None:
        ray.get([a.save_trainer_state.remote(str(folder)) for a in self.actors])

    def gpu_ids(self) -> list[str]:
        """The GPUs of all ranks (colocated engines run on them)."""
        ids: list[str] = []
        for part in ray.get([a.gpu_ids.remote() for a in self.actors]):
            ids.extend(i for i in part if i not in ids)
        return ids

    def offload(self) -> None:
        ray.get([a.offload.remote() for a in self.actors])

    def onload(self) -> None:
        ray.get([a.onload.remote() for a in self.actors])

    def shutdown(self) -> None:
        try:
            ray.get([a.shutdown.remote() for a in self.actors], timeout=60)
        except Exception:  # noqa: BLE001 - best effort; the actors are killed next anyway
            pass
        for a in self.actors:
            ray.kill(a)
        self.actors = []
