"""Training ranks started by `torchrun` instead of Ray (slime/train_grpo.py).

torchrun starts one process per rank with RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR /
MASTER_PORT in its env; the process group comes from those (gloo on CPU, NCCL on GPU). Rank 0 is
the driver: `slime.ray.setup.setup(cfg, where="torchrun", torchrun=...)` brings the run up and it
runs the same loop as slime/train.py (rollout -> train -> push weights -> save) through
`slime.ray.local_group.LocalTrainGroup`, which broadcasts each group call to the other ranks; they
only serve commands (`serve_commands`) until `shutdown`.

Before any of that, every rank runs the same start-up checks and the ranks exchange their outcomes
(`agree_to_start`): torchrun stops all ranks as soon as one exits with an error, so a rank must not
exit on a refusal before its peers have run their own checks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from slime.ray.train_actor import TrainRayActor
from slime.utils.environment import env_value


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


def torchrun_env(env: Mapping[str, str] | None = None) -> TorchrunEnv:
    """The rank layout torchrun put in the environment; an error naming the variable when absent."""
    rank, world = env_value("RANK", env), env_value("WORLD_SIZE", env)
    addr, port = env_value("MASTER_ADDR", env), env_value("MASTER_PORT", env)
    if rank is None or world is None or addr is None or port is None:
        named = (("RANK", rank), ("WORLD_SIZE", world), ("MASTER_ADDR", addr), ("MASTER_PORT", port))
        raise RuntimeError(f"{', '.join(k for k, v in named if v is None)} not set: start this with torchrun "
                           "(torchrun --nproc_per_node=N slime/train_grpo.py ...), or use slime/train.py")
    return TorchrunEnv(rank=int(rank), world_size=int(world), local_rank=int(env_value("LOCAL_RANK", env) or rank),
                       local_world_size=int(env_value("LOCAL_WORLD_SIZE", env) or world),
                       master_addr=addr, master_port=int(port))


# How long a rank waits for its peers' start-up checks. A peer that crashed on the way makes
# torchrun stop this rank anyway; the bound is for one hung before it could report.
CHECKS_TIMEOUT_S = 300.0
_CHECKS_KEY = "slime/start_checks"


def agree_to_start(tr: TorchrunEnv, refusal: str | None, timeout_s: float = CHECKS_TIMEOUT_S) -> dict[int, str]:
    """Every rank's refusal (rank -> message; empty: all ranks may start), once all ranks have checked.

    torchrun stops every rank as soon as one exits with an error: a rank that refused and exited at
    once would kill a peer still on its way to the same check (its refusal never printed) or one that
    passed and went on to a process group that will never form. So each rank publishes the outcome
    of its checks on torchrun's store and waits for everyone's before it exits or starts.
    """
    if tr.world_size == 1:
        return {} if refusal is None else {0: refusal}
    import torch.distributed as dist

    keys = [f"{_CHECKS_KEY}/{r}" for r in range(tr.world_size)]
    read = [f"{_CHECKS_KEY}/read/{r}" for r in range(1, tr.world_size)]
    try:
        store, _, _ = next(dist.rendezvous("env://", rank=tr.rank, world_size=tr.world_size,
                                           timeout=timedelta(seconds=timeout_s)))
        store.set(keys[tr.rank], json.dumps({"refusal": refusal}))
        store.wait(keys)
        outcomes = [json.loads(value) for value in store.multi_get(keys)]
        if tr.rank == 0:
            # Started without torchrun's agent, the store lives in this process: it must outlive
            # every rank's read.
            store.wait(read)
        else:
            store.set(read[tr.rank - 1], "1")
    except dist.DistError as exc:
        raise RuntimeError(f"not every rank reported its start-up checks within {timeout_s:g} s (one hung before "
                           f"them?): {exc}") from exc
    return {r: o["refusal"] for r, o in enumerate(outcomes) if o["refusal"] is not None}


def start_rank(cfg: Any, tr: TorchrunEnv, model_path: str, trainer_state_dir: str | None) -> TrainRayActor:
    """This process's training rank; joins the process group (via the backend's init_distributed)."""
    rank = TrainRayActor()
    rank.init(cfg, tr.rank, tr.world_size, tr.master_addr, tr.master_port, model_path, trainer_state_dir)
    return rank
