"""Training ranks started by `torchrun` instead of Ray (slime/train_grpo.py).

torchrun starts one process per rank with RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR /
MASTER_PORT in its env; the process group comes from those (gloo on CPU, NCCL on GPU). Rank 0 is
the driver: `slime.ray.setup.setup(cfg, where="torchrun", torchrun=...)` brings the run up and it
runs the same loop as slime/train.py (rollout -> train -> push weights -> save) through
`slime.ray.local_group.LocalTrainGroup`, which broadcasts each group call to the other ranks; they
only serve commands (`serve_commands`) until `shutdown`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
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


def start_rank(cfg: Any, tr: TorchrunEnv, model_path: str, trainer_state_dir: str | None) -> TrainRayActor:
    """This process's training rank; joins the process group (via the backend's init_distributed)."""
    rank = TrainRayActor()
    rank.init(cfg, tr.rank, tr.world_size, tr.master_addr, tr.master_port, model_path, trainer_state_dir)
    return rank
