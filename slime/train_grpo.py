"""Synchronous GRPO training under torchrun, without Ray (the second public page's entry point):

    torchrun --nproc_per_node=N [--nnodes=M --node_rank=R --master_addr=A --master_port=P] \\
        slime/train_grpo.py --hf-checkpoint MODEL --prompt-data P.jsonl ... (any slime/train.py flag)

torchrun's env (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) forms the process group:
gloo on CPU, NCCL on GPU. The training world is torchrun's (--actor-num-nodes / --actor-num-gpus-per-node
follow it). Rank 0 also runs the rollout: embedded engines (CPU) or engines already serving
(--rollout-backend external, the GPU setup: serve SGLang on GPUs outside the torchrun world).
Checkpoints, resume, metrics and logs are slime/train.py's.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from slime.backends.fsdp.torchrun import TorchrunEnv
    from slime.ray.setup import RunInputs
    from slime.utils.arguments import TrainConfig


def _pin_gpu() -> None:
    # Like a Ray bundle: each rank sees only its GPU, as device 0 (set before CUDA initialises).
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    local = os.environ.get("LOCAL_RANK")
    if local is not None and visible != "":
        ids = visible.split(",") if visible else None
        os.environ["CUDA_VISIBLE_DEVICES"] = ids[int(local)] if ids else local


def _checked(argv: list[str] | None, tr: TorchrunEnv) -> tuple[TrainConfig | None, RunInputs | None, str | None]:
    """(config, run inputs, None), or (None, None, why this rank refuses to start)."""
    from slime.ray.setup import run_inputs
    from slime.utils.arguments import ConfigError, parse_config

    try:
        cfg = parse_config(argv, check_files=True)
        cfg = cfg.with_overrides(actor_num_nodes=tr.num_nodes, actor_num_gpus_per_node=tr.local_world_size)
        return cfg, run_inputs(cfg, "torchrun"), None  # every rank: the same refusals on each
    except (ConfigError, RuntimeError, ValueError) as exc:
        return None, None, str(exc)


def main(argv: list[str] | None = None) -> int:
    _pin_gpu()
    from slime.backends.fsdp.torchrun import agree_to_start, start_rank, torchrun_env
    from slime.ray.local_group import serve_commands
    from slime.ray.loop import run_loop
    from slime.ray.setup import setup

    try:
        tr = torchrun_env()
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    cfg, inputs, refusal = _checked(argv, tr)
    if refusal is not None:
        # Said before the exchange below: torchrun may stop this rank once a peer has exited.
        print(f"error: {refusal}", file=sys.stderr, flush=True)
    try:
        refused = agree_to_start(tr, refusal)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if refused:
        if refusal is None:  # this rank's checks passed: say whose did not
            print("error: not starting: " + "; ".join(f"rank {r} refused: {why}" for r, why in sorted(refused.items())),
                  file=sys.stderr)
        return 2
    assert cfg is not None and inputs is not None
    if tr.rank != 0:
        serve_commands(start_rank(inputs.cfg, tr, inputs.model_path, inputs.trainer_state_dir))
        return 0
    run = setup(cfg, where="torchrun", torchrun=tr)
    try:
        run_loop(run, mode="sync")
    finally:
        run.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
