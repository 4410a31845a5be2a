"""Placement groups: GPU bundles on GPU clusters, CPU bundles on CPU-only machines.

One bundle per training rank (plus, disaggregated on GPUs, one per rollout GPU). With
`--colocate` the engines use the training bundles' GPUs. On CPU the embedded engines are
subprocesses of the rollout manager, which needs no bundle of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group


@dataclass
class Placement:
    pg: PlacementGroup
    use_gpu: bool
    actor_bundles: list[int]  # bundle index of each training rank
    rollout_bundles: list[int]  # the engines' GPU bundle (disaggregated GPU mode)
    cpus_per_actor: float
    rollout_gpus: int = 0

    def remove(self) -> None:
        ray.util.remove_placement_group(self.pg)


def cluster_has_gpus() -> bool:
    return float(ray.cluster_resources().get("GPU", 0)) > 0


def create_placement(args: Any, timeout_s: float = 120.0) -> Placement:
    world = int(args.actor_num_nodes) * int(args.actor_num_gpus_per_node)
    use_gpu = cluster_has_gpus()
    if use_gpu:
        rollout_gpus = 0 if args.colocate else int(args.rollout_num_gpus or 1)
        bundles = [{"GPU": 1, "CPU": 1} for _ in range(world)]
        if rollout_gpus:  # one bundle: the rollout manager actor holds every engine GPU
            bundles.append({"GPU": rollout_gpus, "CPU": 1})
        cpus = 1.0
    else:
        total = float(ray.cluster_resources().get("CPU", 1))
        # Each rank gets an equal share of the CPUs (at least 1): torch uses that many threads.
        cpus = max(1.0, float(int(total // max(1, world)))) if world <= total else 1.0
        rollout_gpus = 0
        bundles = [{"CPU": cpus} for _ in range(world)]
    pg = placement_group(bundles, strategy="PACK")
    ready, _ = ray.wait([pg.ready()], timeout=timeout_s)
    if not ready:
        ray.util.remove_placement_group(pg)
        raise RuntimeError(f"placement group {bundles} could not be scheduled within {timeout_s}s; "
                           f"cluster has {ray.cluster_resources()}")
    return Placement(pg=pg, use_gpu=use_gpu, actor_bundles=list(range(world)),
                     rollout_bundles=[world] if rollout_gpus else [], cpus_per_actor=cpus,
                     rollout_gpus=rollout_gpus)
