"""FSDP2 code path of the FSDP backend (needs a CUDA GPU; skipped elsewhere)."""

from __future__ import annotations

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_fsdp2_train_step_logprobs_and_save(tiny_model_path, tmp_path, lora):
    import torch.distributed as dist
    from slime.backends.fsdp import ActorConfig, FSDPTrainActor
    from slime.backends.fsdp.train_loop import build_loss_call, train_rollout
    from slime.utils.arguments import parse_config
    from slime.utils.types import Sample
    from transformers import AutoModelForCausalLM

    flags = ["--hf-checkpoint", str(tiny_model_path), "--rollout-batch-size", "2", "--n-samples-per-prompt", "2",
             "--lr", "1e-2", "--bf16"]
    if lora:
        flags += ["--use-lora", "--lora-rank", "4"]
    args = parse_config(flags).to_namespace()
    actor = FSDPTrainActor(ActorConfig.from_args(args), args)
    try:
        assert actor.use_fsdp2 and dist.is_initialized()
        samples = [Sample(index=i, tokens=list(range(10 + i, 20 + 2 * i)), response_length=4, loss_mask=[1] * 4,
                          reward=float(i % 2)) for i in range(4)]
        before = actor.compute_log_probs([s.tokens for s in samples], [4] * 4)
        metrics = train_rollout(actor, args, samples, build_loss_call(args))
        after = actor.compute_log_probs([s.tokens for s in samples], [4] * 4)
        assert metrics["gradient/norm"] > 0 and before != after
        actor.save_hf(tmp_path / "out")
        AutoModelForCausalLM.from_pretrained(str(tmp_path / "out"))
    finally:
        actor.shutdown()


def test_fsdp2_train_step_with_rows_sharing_an_opening(tiny_model_path):
    """Rows that all open with the same 20 tokens, over two micro-batches: on the CPU the step
    prefix runs that opening once; under FSDP2 it must not (step_prefix.py), and the step trains."""
    from slime.backends.fsdp import ActorConfig, FSDPTrainActor
    from slime.backends.fsdp.train_loop import build_loss_call, train_rollout
    from slime.utils.arguments import parse_config
    from slime.utils.types import Sample

    args = parse_config(["--hf-checkpoint", str(tiny_model_path), "--rollout-batch-size", "2",
                         "--n-samples-per-prompt", "2", "--micro-batch-size", "2", "--lr", "1e-2",
                         "--bf16"]).to_namespace()
    actor = FSDPTrainActor(ActorConfig.from_args(args), args)
    try:
        opening = list(range(100, 120))
        samples = [Sample(index=i, group_index=i // 2, tokens=opening + [200 + i // 2] * 3 + [300 + i] * 4,
                          response_length=4, loss_mask=[1] * 4, reward=float(i % 2)) for i in range(4)]
        toks, lens = [s.tokens for s in samples], [4] * 4
        assert actor._step_prefix(actor.model, toks, lens, 2) is None
        metrics = train_rollout(actor, args, samples, build_loss_call(args))
        assert metrics["gradient/norm"] > 0
    finally:
        actor.shutdown()
