"""A Ray actor holding one training rank (FSDP or Megatron actor, by --train-backend) for the whole run."""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from pathlib import Path
from typing import Any

import ray
import torch

from slime.algorithms.kl import AdaptiveKLCoef
from slime.ray.placement_group import node_info
from slime.utils.environment import env_value
from slime.utils.types import Sample

KL_WEIGHT_KEY = "adaptive_kl_loss_coef"  # in a rank's trainer state, so a resumed run keeps its weight


class TrainRayActor:
    """Created by RayTrainGroup with RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT in its env."""

    def __init__(self) -> None:
        self.actor = None
        self.args = None
        self.loss_call = None
        self.kl_weight: AdaptiveKLCoef | None = None  # with --kl-loss-target: the KL loss weight now

    def node_address(self) -> tuple[str, int]:
        """An address and free port on this node for the torch.distributed rendezvous."""
        ip = ray.util.get_node_ip_address()
        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return ip, int(port)

    def init(self, config: Any, rank: int, world_size: int, master_addr: str, master_port: int,
             model_path: str | None = None, trainer_state_dir: str | None = None) -> int:
        from slime.backends.fsdp import ActorConfig, FSDPTrainActor
        from slime.backends.fsdp.train_loop import build_loss_call

        os.environ.update(MASTER_ADDR=master_addr, MASTER_PORT=str(master_port), RANK=str(rank),
                          WORLD_SIZE=str(world_size))
        if torch.cuda.is_available():
            torch.cuda.set_device(0)  # Ray exposes exactly the bundle's GPU as device 0
        self.args = config.to_namespace()
        acfg = ActorConfig.from_args(self.args)
        if model_path:
            from dataclasses import replace

            acfg = replace(acfg, model_path=str(model_path))
        if getattr(self.args, "train_backend", "fsdp") == "megatron":
            from slime.backends.megatron.actor import MegatronTrainActor

            self.actor = MegatronTrainActor(acfg, self.args, rank=rank, world_size=world_size)
        else:
            self.actor = FSDPTrainActor(acfg, self.args, rank=rank, world_size=world_size)
        self.loss_call = build_loss_call(self.args)
        if getattr(self.args, "kl_loss_target", None) is not None:
            self.kl_weight = AdaptiveKLCoef(float(self.args.kl_loss_coef), float(self.args.kl_loss_target),
                                            float(self.args.kl_loss_horizon))
        if trainer_state_dir:
            from slime.utils.checkpoint import rank_state_path

            path = rank_state_path(trainer_state_dir, rank)
            if not path.is_file():
                path = rank_state_path(trainer_state_dir, 0)  # replicated DP: rank 0's state fits all
            if path.is_file():
                state = torch.load(path, weights_only=False)
                if self.kl_weight is not None and KL_WEIGHT_KEY in state:
                    self.kl_weight.coef = float(state[KL_WEIGHT_KEY])
                self.actor.load_trainer_state(state)
        return self.actor.global_step

    def train(self, rollout_id: int, samples: list[Sample], sample_weights: list[float] | None = None) -> dict[str, float]:
        from slime.backends.fsdp.train_loop import train_rollout

        if self.kl_weight is None:
            return train_rollout(self.actor, self.args, samples, self.loss_call, sample_weights)
        weight = self.kl_weight.coef
        metrics = train_rollout(self.actor, self.args, samples, self.loss_call.with_flags(kl_loss_coef=weight),
                                sample_weights)
        if "loss/kl" not in metrics:
            raise RuntimeError("--kl-loss-target: the loss logged no loss/kl to steer the KL weight on; a custom "
                               "loss must log its KL term as loss/kl")
        # Every rank got the same step metrics, so every rank's weight moves the same way.
        metrics["loss/kl_coef"] = weight
        self.kl_weight.update(float(metrics["loss/kl"]))
        return metrics

    def compute_log_probs(self, tokens: list[list[int]], response_lengths: list[int], reference: bool = False) -> list[list[float]]:
        return self.actor.compute_log_probs(tokens, response_lengths, reference)

    def current_global_step(self) -> int:
        return int(self.actor.global_step)

    def save_hf(self, folder: str) -> None:
        self.actor.save_hf(folder)

    def save_hf_files(self) -> dict[str, bytes]:
        """Save as `save_hf` does, into a private folder on this node, and return its files
        (relative path -> bytes) for a rollout manager on another node; the folder is removed.
        Every rank takes part (the save is collective); only rank 0's answer has files."""
        parent = env_value("SLIME_WEIGHT_SYNC_DIR")  # where weights may go when /tmp is too small
        if parent:
            Path(parent).mkdir(parents=True, exist_ok=True)
        folder = tempfile.mkdtemp(prefix="slime-weights-send-", dir=parent)
        try:
            self.actor.save_hf(folder)
            return read_weight_files(folder)
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def node_info(self) -> dict[str, Any]:
        return node_info()

    def save_trainer_state(self, folder: str) -> None:
        from slime.utils.checkpoint import rank_state_path

        path = rank_state_path(folder, self.actor.rank)
        path.parent.mkdir(parents=True, exist_ok=True)
        state = self.actor.trainer_state()
        if self.kl_weight is not None:
            state[KL_WEIGHT_KEY] = self.kl_weight.coef
        torch.save(state, path)

    def gpu_ids(self) -> list[str]:
        return [str(int(g)) for g in ray.get_gpu_ids()]

    def offload(self) -> None:
        self.actor.offload()

    def onload(self) -> None:
        self.actor.onload()

    def shutdown(self) -> None:
        if self.actor is not None:
            self.actor.shutdown()


def read_weight_files(folder: str | Path) -> dict[str, bytes]:
    """Every file under a saved weights folder (safetensors, config, tokenizer; with LoRA only the
    adapter's), keyed by its path relative to the folder."""
    root = Path(folder)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


TrainRayActorRemote = ray.remote(TrainRayActor)
