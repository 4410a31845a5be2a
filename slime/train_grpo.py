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


def _pin_gpu() -> None:
    # Like a Ray bundle: each rank sees only its GPU, as device 0 (set before CUDA initialises).
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    local = os.environ.get("LOCAL_RANK")
    if local is not None and visible != "":
        ids = visible.split(",") if visible else None
        os.environ["CUDA_VISIBLE_DEVICES"] = ids[int(local)] if ids else local


def main(argv: list[str] | None = None) -> int:
    _pin_gpu()
    from slime.backends.fsdp.torchrun import start_rank, torchrun_env
    from slime.ray.local_group import serve_commands
    from slime.ray.loop import run_loop
    from slime.ray.setup import run_inputs, setup
    from slime.utils.arguments import ConfigError, parse_config

    try:
        tr = torchrun_env()
        cfg = parse_config(argv, check_files=True)
        cfg = cfg.with_overrides(actor_num_nodes=tr.num_nodes, actor_num_gpus_per_node=tr.local_world_size)
        inputs = run_inputs(cfg, "torchrun")  # every rank: the same refusals on each
    except (ConfigError, RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
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
