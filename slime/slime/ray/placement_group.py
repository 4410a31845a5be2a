"""Placement groups: GPU bundles on GPU clusters, CPU bundles on CPU-only machines.

One bundle per training rank (plus, disaggregated on GPUs, one per rollout GPU). With
`--colocate` the engines use the training bundles' GPUs. On CPU the embedded engines are
subprocesses of the rollout manager, which needs no bundle of its own.

Choosing nodes: `--actor-resources NAME` puts every training bundle on nodes that offer the Ray
custom resource NAME (`ray start --resources '{"NAME": 1}'`), `--rollout-resources NAME` the
rollout manager and so its engines. Each holder asks for a sliver of the resource
(`RESOURCE_SHARE`), so one unit on a node admits any number of ranks; a name no live node offers
is refused before anything is scheduled (it would wait forever).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import ray
from ray.util.placement_group import PlacementGroup, placement_group

RESOURCE_SHARE = 0.001
_PLACEMENT_FLAGS = (("actor_resources", "--actor-resources"), ("rollout_resources", "--rollout-resources"))


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


def node_info() -> dict[str, Any]:
    """Where the calling Ray worker runs: its node's id and address (as Ray knows them) and its PID."""
    return {"node_id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
            "pid": os.getpid()}


def resource_request(name: str | None) -> dict[str, float]:
    """The custom-resource part of a bundle or actor that must sit on a node offering `name`."""
    return {name: RESOURCE_SHARE} if name else {}


def check_placement_resources(args: Any, nodes: Sequence[Mapping[str, Any]]) -> None:
    """Refuse --actor-resources / --rollout-resources names that no live node offers (`nodes`:
    `ray.nodes()`), naming the custom resources the cluster does have."""
    alive = [n for n in nodes if n.get("Alive", True)]
    offered = {name for n in alive for name in n.get("Resources", {})}
    custom = sorted(r for r in offered if r not in ("CPU", "GPU", "memory", "object_store_memory")
                    and not r.startswith(("node:", "accelerator_type:")))
    for attr, flag in _PLACEMENT_FLAGS:
        name = getattr(args, attr, None)
        if name and name not in offered:
            raise ValueError(
                f"{flag} {name}: no node of this Ray cluster offers the custom resource {name!r} "
                f"(custom resources here: {', '.join(custom) or 'none'}); start the node(s) meant for it with "
                f"`ray start ... --resources '{{\"{name}\": 1}}'` or drop the flag")


def cpus_per_rank(node_cpus: Sequence[float], world: int) -> float:
    """CPUs for each training rank on a CPU-only cluster: an equal share of the CPUs of the nodes the
    ranks may use (torch runs that many threads), at least 1, and no more than one node has, since
    a bundle cannot span nodes."""
    total = float(sum(node_cpus)) or 1.0
    if world > total:
        return 1.0
    return max(1.0, float(min(int(total // max(1, world)), int(max(node_cpus, default=1.0)))))


def _eligible_cpus(resource: str | None) -> list[float]:
    return [float(n["Resources"].get("CPU", 0)) for n in ray.nodes()
            if n.get("Alive") and (not resource or resource in n["Resources"])]


def create_placement(args: Any, timeout_s: float = 120.0) -> Placement:
    world = int(args.actor_num_nodes) * int(args.actor_num_gpus_per_node)
    use_gpu = cluster_has_gpus()
    actor_res = resource_request(getattr(args, "actor_resources", None))
    if use_gpu:
        rollout_gpus = 0 if args.colocate else int(args.rollout_num_gpus or 1)
        bundles = [{"GPU": 1, "CPU": 1, **actor_res} for _ in range(world)]
        if rollout_gpus:  # one bundle: the rollout manager actor holds every engine GPU
            bundles.append({"GPU": rollout_gpus, "CPU": 1,
                            **resource_request(getattr(args, "rollout_resources", None))})
        cpus = 1.0
    else:
        cpus = cpus_per_rank(_eligible_cpus(getattr(args, "actor_resources", None)), world)
        rollout_gpus = 0
        bundles = [{"CPU": cpus, **actor_res} for _ in range(world)]
    pg = placement_group(bundles, strategy="PACK")
    ready, _ = ray.wait([pg.ready()], timeout=timeout_s)
    if not ready:
        ray.util.remove_placement_group(pg)
        raise RuntimeError(f"placement group {bundles} could not be scheduled within {timeout_s}s; "
                           f"cluster has {ray.cluster_resources()}")
    return Placement(pg=pg, use_gpu=use_gpu, actor_bundles=list(range(world)),
                     rollout_bundles=[world] if rollout_gpus else [], cpus_per_actor=cpus,
                     rollout_gpus=rollout_gpus)
