"""One rank of a Megatron test job, run as a real subprocess by slime/tests/test_megatron_*.py.

    RANK=r WORLD_SIZE=n MASTER_ADDR=127.0.0.1 MASTER_PORT=p python megatron_worker.py JOB.json

JOB.json: {"model_path", "tp", "pp", "sequence_parallel", "batch", "steps", "loss",
"save_dir", "engine_url", "out_dir", "actor": {...ActorConfig overrides}}. The rank computes log-probs of
batch["tokens"] (its own shard of the samples, as the train loop would hand it), runs
`steps` GRPO train steps on the whole batch, exports the HF model to save_dir (collective) and
with engine_url, rank 0 pushes the exported folder to that engine
(/pause_generation, /update_weights_from_disk, /flush_cache, /continue_generation) and every
rank writes its results to out_dir/rank<r>.json.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

warnings.filterwarnings("ignore")


def _loss_call(kind: str, args):
    from slime.backends.fsdp.train_loop import build_loss_call

    if kind == "custom":
        args.custom_loss_function_path = str(Path(__file__).with_name("megatron_custom_loss.py")) + ":custom_loss"
        args.loss_type = "custom_loss"
    return build_loss_call(args)


def main(job_file: str) -> None:
    import argparse

    from slime.backends.fsdp.config import ActorConfig
    from slime.backends.megatron.actor import MegatronTrainActor
    from slime.backends.megatron.options import MegatronOptions

    job = json.loads(Path(job_file).read_text())
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    cfg = ActorConfig(model_path=job["model_path"], **job.get("actor", {}))
    opts = MegatronOptions(tp=job.get("tp", 1), pp=job.get("pp", 1),
                           sequence_parallel=job.get("sequence_parallel", False),
                           optimizer_cpu_offload=job.get("optimizer_cpu_offload", False),
                           recompute_activations=job.get("recompute_activations", False))
    actor = MegatronTrainActor(cfg, rank=rank, world_size=world, options=opts)
    batch = job["batch"]
    n = len(batch["tokens"])
    mine = list(range(n))[rank::world]
    result: dict = {"rank": rank, "indices": mine}
    result["log_probs"] = actor.compute_log_probs([batch["tokens"][i] for i in mine],
                                                  [batch["response_lengths"][i] for i in mine])
    args = argparse.Namespace(advantage_estimator="grpo", eps_clip=0.2, eps_clip_high=0.2, eps_clip_c=None,
                              loss_type="policy_loss", entropy_coef=0.0, use_kl_loss=False,
                              calculate_per_token_loss=False, use_tis=False, use_rollout_logprobs=False)
    loss_call = _loss_call(job.get("loss", "policy"), args)
    denominators = {"samples": float(n), "tokens": float(sum(sum(m) for m in batch["loss_masks"])),
                    "per_token": False}
    result["metrics"] = [actor.train_step(batch, mine, denominators, loss_call) for _ in range(job.get("steps", 1))]
    if job.get("save_dir"):
        actor.save_hf(job["save_dir"])  # collective: TP shards gathered, rank 0 writes
        if job.get("engine_url") and rank == 0:
            from slime.utils.weight_sync import push_to_engines

            push_to_engines([job["engine_url"]], job["save_dir"], version=1)
    result["log_probs_after"] = actor.compute_log_probs([batch["tokens"][i] for i in mine],
                                                        [batch["response_lengths"][i] for i in mine])
    Path(job["out_dir"], f"rank{rank}.json").write_text(json.dumps(result))
    actor.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
