"""Training ranks started by `torchrun` instead of Ray (slime/train_grpo.py).

torchrun starts one process per rank with RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR /
MASTER_PORT in its env; the process group comes from those (gloo on CPU, NCCL on GPU). Rank 0 is
the driver: `slime.ray.setup.setup(cfg, where="torchrun", torchrun=...)` brings the run up and it
runs the same loop as slime/train.py (rollout -> train -> push weights -> save) through
`slime.ray.local_group.LocalTrainGroup`, which broadcasts each group call to the other ranks; they
only serve commands (`serve_commands`) until `shutdown`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from slime.ray.train_actor import TrainRayActor


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
