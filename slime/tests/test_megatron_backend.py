"""Megatron backend vs the HF/FSDP backend on tiny models, with real multi-process gloo jobs.

Each job runs slime/tests/megatron_worker.py as WORLD_SIZE real subprocesses on 127.0.0.1;
the reference side is the FSDP actor (plain HF model) in this process on the same batch.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

WORKER = Path(__file__).with_name("megatron_worker.py")
ACTOR = {"lr": 1e-3, "clip_grad": 1.0, "weight_decay": 0.0, "global_batch_size": 4, "micro_batch_size": 2}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_megatron_job(tmp: Path, world: int, **job) -> list[dict]:
    """Run one job over `world` gloo ranks; returns the per-rank results (rank order)."""
    out = tmp / "out"
    out.mkdir(parents=True, exist_ok=True)
    job = {"out_dir": str(out), "actor": ACTOR, **job}
    job_file = tmp / "job.json"
    job_file.write_text(json.dumps(job))
    port = _free_port()
    procs = []
    for rank in range(world):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1")  # slime: an installed package
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(job_file)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + 240
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
    for rank, (p, log) in enumerate(zip(procs, logs, strict=True)):
        assert p.returncode == 0, f"rank {rank} failed:\n{log[-4000:]}"
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


def make_batch(vocab: int, seed: int = 0) -> dict:
    """Two GRPO groups of two samples, varied prompt/response lengths, one masked observation."""
    g = torch.Generator().manual_seed(seed)
    tokens, resp, masks, adv = [], [], [], []
    for i, (p, r) in enumerate([(5, 4), (7, 6), (4, 7), (6, 3)]):
        tokens.append(torch.randint(3, vocab, (p + r,), generator=g).tolist())
        resp.append(r)
        m = [1] * r
        if i == 1:
            m[2] = 0  # a tool observation inside the response: never trained on
        masks.append(m)
        adv.append([(1.0 if i % 2 == 0 else -1.0)] * r)
    return {"tokens": tokens, "response_lengths": resp, "loss_masks": masks, "advantages": adv,
            "rewards": [1.0, 0.0, 1.0, 0.0]}


def merge_rank_log_probs(results: list[dict], key: str, n: int) -> list[list[float]]:
    merged: dict[int, list[float]] = {}
    for r in results:
        merged.update(zip(r["indices"], r[key], strict=True))
    return [merged[i] for i in range(n)]


def reference_run(model_path: Path, batch: dict, loss: str = "policy") -> dict:
    """The same step on the FSDP actor (HF model) in this process."""
    import argparse

    from slime.backends.fsdp.actor import FSDPTrainActor
    from slime.backends.fsdp.config import ActorConfig
    from slime.backends.fsdp.train_loop import build_loss_call

    actor = FSDPTrainActor(ActorConfig(model_path=str(model_path), **ACTOR))
    n = len(batch["tokens"])
    lp = actor.compute_log_probs(batch["tokens"], batch["response_lengths"])
    args = argparse.Namespace(advantage_estimator="grpo", eps_clip=0.2, eps_clip_high=0.2, eps_clip_c=None,
                              loss_type="policy_loss", entropy_coef=0.0, use_kl_loss=False,
                              calculate_per_token_loss=False, use_tis=False, use_rollout_logprobs=False)
    if loss == "custom":
        args.custom_loss_function_path = str(Path(__file__).with_name("megatron_custom_loss.py")) + ":custom_loss"
        args.loss_type = "custom_loss"
    denominators = {"samples": float(n), "tokens": float(sum(sum(m) for m in batch["loss_masks"])), "per_token": False}
    metrics = actor.train_step(batch, list(range(n)), denominators, build_loss_call(args))
    after = actor.compute_log_probs(batch["tokens"], batch["response_lengths"])
    return {"log_probs": lp, "metrics": metrics, "log_probs_after": after,
            "state": {k: v.detach().clone() for k, v in actor.model.state_dict().items()}}


def _max_abs(a: list[list[float]], b: list[list[float]]) -> float:
    return max(max(abs(x - y) for x, y in zip(ra, rb, strict=True)) for ra, rb in zip(a, b, strict=True))


def check_against_fsdp(tmp_path: Path, model_path: Path, world: int, loss: str = "policy", steps: int = 1,
                       **job_extra) -> tuple[dict, list[dict]]:
    """Run the FSDP reference and a Megatron job on the same batch; assert they agree."""
    from safetensors.torch import load_file

    vocab = json.loads((model_path / "config.json").read_text())["vocab_size"]
    batch = make_batch(vocab)
    n = len(batch["tokens"])
    # old log-probs from the HF model, as the train loop would set them before the step
    from slime.backends.fsdp.actor import FSDPTrainActor
    from slime.backends.fsdp.config import ActorConfig

    batch["old_log_probs"] = FSDPTrainActor(ActorConfig(model_path=str(model_path), **ACTOR)).compute_log_probs(
        batch["tokens"], batch["response_lengths"])
    ref = reference_run(model_path, batch, loss)
    save = tmp_path / "exported"
    results = run_megatron_job(tmp_path, world, model_path=str(model_path), batch=batch, loss=loss, steps=steps,
                               save_dir=str(save), **job_extra)
    lp = merge_rank_log_probs(results, "log_probs", n)
    assert _max_abs(lp, ref["log_probs"]) < 1e-4
    m_meg, m_ref = results[0]["metrics"][0], ref["metrics"]
    assert abs(m_meg["loss/total"] - m_ref["loss/total"]) < 1e-5, (m_meg, m_ref)
    assert m_meg["gradient/norm"] == pytest.approx(m_ref["gradient/norm"], rel=1e-4)
    assert m_meg["perf/train_tokens"] == m_ref["perf/train_tokens"]
    for r in results[1:]:  # every rank reports the same step
        assert r["metrics"][0]["loss/total"] == pytest.approx(m_meg["loss/total"], abs=1e-7)
    exported = load_file(str(save / "model.safetensors"))
    assert set(exported) <= set(ref["state"]) and len(exported) >= len(ref["state"]) - 1
    for name, t in exported.items():
        # one Adam step moves each weight by ~lr*sign(grad); entries whose grad is ~0 may
        # round to a different sign, so the bound is 2*lr, and almost all must agree tightly
        diff = (t - ref["state"][name]).abs()
        assert diff.max() <= 2 * ACTOR["lr"] + 1e-6, name
        assert (diff > 1e-5).float().mean() < 0.01, name
    after = merge_rank_log_probs(results, "log_probs_after", n)
    assert _max_abs(after, ref["log_probs_after"]) < 2e-3
    return ref, results


@pytest.mark.slow  # the default suite covers TP=1 with the tied + custom-loss test below
def test_tp1_matches_hf_and_fsdp_step(tmp_path, tiny_model_path):
    check_against_fsdp(tmp_path, tiny_model_path, world=1, tp=1)


@pytest.mark.slow  # the default suite covers TP=2 in test_megatron_weight_sync.py (same checks + sync)
def test_tp2_matches_hf_and_fsdp_step(tmp_path, tiny_model_path):
    check_against_fsdp(tmp_path, tiny_model_path, world=2, tp=2)


@pytest.fixture(scope="session")
def tiny_tied_path() -> Path:
    from openclaw.models import build_tiny_model

    return build_tiny_model("qwen3", seed=0, tie_word_embeddings=True)


def test_tied_embeddings_with_custom_loss(tmp_path, tiny_tied_path):
    _, results = check_against_fsdp(tmp_path, tiny_tied_path, world=1, tp=1, loss="custom")
    # the custom plugin ran inside the Megatron actor and saw full-vocabulary logits
    vocab = json.loads((tiny_tied_path / "config.json").read_text())["vocab_size"]
    assert results[0]["metrics"][0]["custom/logits_vocab"] == pytest.approx(2 * vocab)  # summed over 2 micro-batches


@pytest.mark.slow
def test_pp2_tied_matches_fsdp_step(tmp_path, tiny_tied_path):
    check_against_fsdp(tmp_path, tiny_tied_path, world=2, pp=2)


@pytest.mark.slow
def test_llama_tp2_sequence_parallel_matches_fsdp_step(tmp_path, tiny_llama_path):
    check_against_fsdp(tmp_path, tiny_llama_path, world=2, tp=2, sequence_parallel=True)


@pytest.mark.slow
def test_optimizer_cpu_offload_and_recompute_match_fsdp_step(tmp_path, tiny_model_path):
    check_against_fsdp(tmp_path, tiny_model_path, world=1, tp=1, optimizer_cpu_offload=True,
                       recompute_activations=True)


@pytest.mark.slow
def test_bf16_pp2_close_to_fp32(tmp_path, tiny_model_path):
    """--bf16: bf16 weights/activations (fp32 master weights); PP=2 exchanges bf16 activations."""
    vocab = json.loads((tiny_model_path / "config.json").read_text())["vocab_size"]
    batch = make_batch(vocab)
    from slime.backends.fsdp.actor import FSDPTrainActor
    from slime.backends.fsdp.config import ActorConfig

    batch["old_log_probs"] = FSDPTrainActor(ActorConfig(model_path=str(tiny_model_path), **ACTOR)).compute_log_probs(
        batch["tokens"], batch["response_lengths"])
    ref = reference_run(tiny_model_path, batch)
    results = run_megatron_job(tmp_path, 2, model_path=str(tiny_model_path), batch=batch, pp=2,
                               actor={**ACTOR, "bf16": True}, save_dir=str(tmp_path / "bf16"))
    lp = merge_rank_log_probs(results, "log_probs", len(batch["tokens"]))
    assert 0 < _max_abs(lp, ref["log_probs"]) < 2e-2  # bf16 rounding, not fp32-exact
    assert results[0]["metrics"][0]["gradient/norm"] == pytest.approx(ref["metrics"]["gradient/norm"], rel=2e-2)
    from safetensors.torch import load_file

    assert load_file(str(tmp_path / "bf16" / "model.safetensors"))["model.norm.weight"].dtype == torch.bfloat16


@pytest.mark.slow
def test_data_parallel_two_replicas_match_fsdp_step(tmp_path, tiny_model_path):
    """TP=1 x 2 ranks = two data-parallel replicas: disjoint samples, gradient all-reduce."""
    check_against_fsdp(tmp_path, tiny_model_path, world=2, tp=1)
