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
    from slime.backends.fsdp.torchrun import (
        rank_inputs,
        serve_commands,
        setup_torchrun,
        start_rank,
        torchrun_env,
    )
    from slime.ray.driver import Run, collect_rollout, finish_step
    from slime.utils.arguments import ConfigError, parse_config
    from slime.utils.metrics import StepTimer

    try:
        tr = torchrun_env()
        cfg = parse_config(argv, check_files=True)
        cfg = cfg.with_overrides(actor_num_nodes=tr.num_nodes, actor_num_gpus_per_node=tr.local_world_size)
        rank_cfg, model_path, state_dir = rank_inputs(cfg)
    except (ConfigError, RuntimeError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if tr.rank != 0:
        serve_commands(start_rank(rank_cfg, tr, model_path, state_dir))
        return 0
    run: Run = setup_torchrun(cfg, tr)
    try:
        for rollout_id in range(run.start_rollout_id, run.num_rollout):
            timer = StepTimer()
            with timer("rollout"):
                samples, metrics = collect_rollout(run, rollout_id)
            with timer("train"):
                metrics.update(run.train_on(rollout_id, samples))
            finish_step(run, rollout_id, metrics, timer, sync=not cfg.debug.debug_train_only)
    finally:
        run.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
