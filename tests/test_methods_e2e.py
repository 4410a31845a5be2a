"""The three personal-agent methods end to end, short form: the real server (HTTP, RL intercept)
on the tiny model, the real trajectory buffer, the CPU judge, slime's training loop (in-process, as the demo runs it) with
each method's plugins (loaded by file path, from the same flags as the launch scripts), and weight
sync back into the serving engine.

One buffer serves all three methods: consumption is per consumer id, so each method drains
the same judged turns independently.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from slime.utils.plugins import load_plugin

import openclaw.bridge as base
import openclaw.bridge.teacher as opd
from openclaw.buffer import JUDGED, TrajectoryBuffer

# A method folder's module, loaded the way the trainer loads it (by file path).
combine_advantages = load_plugin("openclaw-combine/combine_loss.py:combine_advantages")

POSITIVE = "Thanks, perfect."
NEGATIVE = "No, that's too long. I asked for a short answer: one or two sentences."  # -1 and a hint
HINT_ONLY = "Too long. I wanted a brief answer, under 25 words."  # a hint (score -1 or 0: the judge's call)
FEEDBACK = [POSITIVE, NEGATIVE, HINT_ONLY] * 2


def _chat(client: httpx.Client, sid: str, messages: list[dict], max_tokens: int, done: bool = False) -> str:
    headers = {"X-Session-Id": sid, **({"X-Session-Done": "true"} if done else {})}
    r = client.post("/v1/chat/completions", headers=headers,
                    json={"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": 1.0})
    assert r.status_code == 200, r.text
    return r.json()["choices"][0]["message"].get("content") or ""


@pytest.fixture(scope="module")
def stack(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    """Server + intercept + CPU judge; six scripted sessions, all judged."""
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.intercept.config import InterceptConfig
    from openclaw.judge.config import JudgeConfig
    from openclaw.judge.worker import JudgeService
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    buf_dir = tmp_path_factory.mktemp("methods") / "rl_buffer"
    engine = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=8)
    app = create_app(ServerConfig(rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buf_dir, session_idle_timeout=600))), engine=engine)
    server = serve_in_background(app)
    judge = JudgeService(JudgeConfig(backend="cpu", batch_size=16, poll_interval_s=0.2), buf_dir).start()
    try:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            for i, feedback in enumerate(FEEDBACK):
                q = {"role": "user", "content": f"What is the capital of country number {i}?"}
                reply = _chat(client, f"sess-{i}", [q], 6)
                _chat(client, f"sess-{i}", [q, {"role": "assistant", "content": reply},
                                            {"role": "user", "content": feedback}], 1, done=True)
        deadline = time.monotonic() + 300
        with TrajectoryBuffer.open(buf_dir) as buf:
            while buf.stats()["by_state"].get(JUDGED, 0) < 2 * len(FEEDBACK):
                assert time.monotonic() < deadline, f"judge did not finish: {buf.stats()['by_state']}"
                time.sleep(0.2)  # polling the judge thread's progress
            judged = {r.session_id: r for r in buf.fetch_judged("inspect", limit=100) if r.next_state}
        yield {"url": server.base_url, "buffer": buf_dir, "engine": engine, "judged": judged}
    finally:
        judge.stop()
        server.stop()
        asyncio.run(engine.shutdown())


def _trainer(method: str, stack: dict, model: Path, tmp_path: Path, batch: int, baseline: str = "batch"):
    from openclaw.demo.presets import method_flags
    from openclaw.demo.trainer import BackgroundTrainer

    flags = method_flags(method, model_path=str(model), engine_addr=stack["url"].split("//", 1)[1],
                         buffer_dir=str(stack["buffer"]), batch_size=batch, lr=5e-2, lora_rank=8, wait_timeout=30.0,
                         extra=["--log-dir", str(tmp_path / "logs"), "--buffer-consumer-id", f"test-{method}-{tmp_path.name}"],
                         baseline=baseline)
    return BackgroundTrainer(flags)


def _lora_state(model: Any) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def _engine_logprobs(url: str, tokens: list[int], n: int) -> tuple[list[float], int]:
    r = httpx.post(url + "/generate", json={"input_ids": tokens, "return_logprob": True, "logprob_start_len": len(tokens) - n,
                                            "sampling_params": {"max_new_tokens": 0}}, timeout=120)
    r.raise_for_status()
    out = r.json()
    return [x[0] for x in out["meta_info"]["input_token_logprobs"]][-n:], int(out["meta_info"]["weight_version"])


def _check_update(trainer: Any, stack: dict, before: dict[str, torch.Tensor], sample: Any, version_before: int) -> None:
    after = _lora_state(trainer.model)
    assert any(not torch.equal(before[k], after[k]) for k in before), "no trainable weight changed"
    tokens, n = list(sample.tokens), sample.response_length
    served, version = _engine_logprobs(stack["url"], tokens, n)
    assert version == version_before + 1  # the engine loaded the pushed adapter
    mine = trainer.actor.compute_log_probs([tokens], [n])[0]
    assert max(abs(a - b) for a, b in zip(served, mine, strict=True)) < 1e-3  # and serves what the trainer has


def _restore(stack: dict, model: Path) -> None:
    from slime.utils.weight_sync import push_to_engines

    push_to_engines([stack["url"]], str(model), 0)


@contextlib.contextmanager
def _one_step(trainer: Any, stack: dict, model: Path, samples: int) -> Iterator[Any]:
    """One training step of `trainer` (of `samples` samples), its record given to the test; then the
    update must have changed the LoRA weights and reached the engine. The trainer is stopped and the
    engine given back the base weights, whatever the test did."""
    try:
        before, v0 = _lora_state(trainer.model), trainer.weight_version
        rec = trainer.step_once()
        assert rec is not None and rec.samples == samples
        yield rec
        _check_update(trainer, stack, before, rec.samples_data[0], v0)
    finally:
        trainer.stop()
        _restore(stack, model)


def test_judge_produced_signal_kinds(stack: dict) -> None:
    kinds = {base.turn_signal(r).kind for r in stack["judged"].values()}
    # Thanks -> score only; a correction -> score and hint. (Hint-only turns depend on the judge's
    # head; their rule is covered with synthetic judgements in test_methods_buffer_source.py.)
    assert {"hint+score", "score"} <= kinds, kinds


def test_openclaw_rl(stack: dict, tiny_model_path: Path, tmp_path: Path) -> None:
    from slime.algorithms.compute import compute_advantages

    trainer = _trainer("rl", stack, tiny_model_path, tmp_path, batch=3, baseline="zero")
    with _one_step(trainer, stack, tiny_model_path, samples=3) as rec:
        samples = rec.samples_data
        for s in samples:
            turn = stack["judged"][s.session_id]
            assert s.tokens == turn.prompt_ids + turn.response_ids and s.rollout_log_probs == turn.response_logprobs
            assert s.reward == base.turn_signal(turn).score != 0  # only turns with a score train
        mask = torch.ones((3, max(s.response_length for s in samples)))
        for i, s in enumerate(samples):
            mask[i, s.response_length:] = 0
        adv = compute_advantages(trainer.args, rewards=torch.tensor([s.reward for s in samples]), mask=mask, group_size=1)
        for i, s in enumerate(samples):  # baseline 0: the advantage is the score, on every token
            assert torch.all(torch.sign(adv.advantages[i, : s.response_length]) == torch.sign(torch.tensor(s.reward)))


def test_openclaw_opd(stack: dict, tiny_model_path: Path, tmp_path: Path) -> None:
    trainer = _trainer("opd", stack, tiny_model_path, tmp_path, batch=2)
    with _one_step(trainer, stack, tiny_model_path, samples=2) as rec:
        tok = trainer.actor.tokenizer
        for s in rec.samples_data:
            assert s.metadata["hint"]  # only hinted turns
            # The teacher is the base policy shown the hint: check the engine's numbers against the
            # trainer's own forward of (hinted prompt + the sampled response), before any update.
            t_prompt = opd.teacher_prompt_ids(tok, s.prompt, None, s.metadata["hint"])
            assert len(t_prompt) > s.prompt_length  # the hint is in the teacher's prompt
            assert max(abs(a - b) for a, b in zip(s.teacher_log_probs, s.rollout_log_probs, strict=True)) > 1e-6
        assert rec.metrics["rollout/buffer_skipped/no_hint"] >= 1  # counted, not silently lost
        assert rec.metrics["rollout/opd_hinted"] == 2
        assert rec.metrics["loss/total"] != 0


def test_opd_teacher_matches_trainer_forward(stack: dict, tiny_model_path: Path, tmp_path: Path) -> None:
    """Engine prompt log-probs under the hinted prompt == the trainer's forward of the same tokens."""
    trainer = _trainer("opd", stack, tiny_model_path, tmp_path, batch=1)
    try:
        samples, _ = base.drain(trainer.args, trainer.data_source, "opd")
        asyncio.run(opd.add_teacher(trainer.args, samples, copy_without_hint=False))
        s = samples[0]
        t_prompt = opd.teacher_prompt_ids(trainer.actor.tokenizer, s.prompt, None, s.metadata["hint"])
        response = s.tokens[-s.response_length:]
        mine = trainer.actor.compute_log_probs([t_prompt + response], [len(response)])[0]  # LoRA B=0: the base
        assert max(abs(a - b) for a, b in zip(s.teacher_log_probs, mine, strict=True)) < 1e-3
    finally:
        trainer.stop()


def test_openclaw_combine(stack: dict, tiny_model_path: Path, tmp_path: Path) -> None:
    trainer = _trainer("combine", stack, tiny_model_path, tmp_path, batch=4)
    with _one_step(trainer, stack, tiny_model_path, samples=4) as rec:
        samples = rec.samples_data
        kinds = [s.metadata["kind"] for s in samples]
        assert {"hint+score", "score"} <= set(kinds) <= {"hint+score", "hint", "score"}
        width = max(s.response_length for s in samples)
        pad = lambda rows: torch.tensor([r + [0.0] * (width - len(r)) for r in rows])  # noqa: E731
        mask = pad([[1.0] * s.response_length for s in samples])
        total, opd_part, rl_part = combine_advantages(
            torch.tensor([s.reward for s in samples]), pad([s.teacher_log_probs for s in samples]),
            pad([s.rollout_log_probs for s in samples]), mask, w_opd=1.0, w_rl=1.0)
        for i, s in enumerate(samples):
            n = s.response_length
            if s.metadata["kind"] == "score":  # teacher == behaviour policy: no OPD signal at all
                assert torch.all(opd_part[i, :n] == 0)
                assert torch.all(torch.sign(total[i, :n]) == torch.sign(torch.tensor(s.reward)))
            if s.metadata["kind"] == "hint":  # score 0: the OPD term alone
                assert torch.all(rl_part[i, :n] == 0) and torch.any(opd_part[i, :n] != 0)
            if s.metadata["kind"] == "hint+score":
                assert torch.all(rl_part[i, :n] == s.reward) and torch.any(opd_part[i, :n] != 0)
        for key in ("loss/binary", "loss/opd", "loss/total"):
            assert key in rec.metrics


def test_opd_topk_distillation(stack: dict, tiny_model_path: Path, tmp_path: Path) -> None:
    """The top-k variant: teacher top-k fetched from the engine per response position, reverse KL
    over top-k + tail bin as the loss, and the update reaches the engine."""
    from openclaw.demo.presets import method_flags
    from openclaw.demo.trainer import BackgroundTrainer

    flags = method_flags("opd", model_path=str(tiny_model_path), engine_addr=stack["url"].split("//", 1)[1],
                         buffer_dir=str(stack["buffer"]), batch_size=2, lr=5e-2, lora_rank=8, wait_timeout=30.0,
                         extra=["--log-dir", str(tmp_path / "logs"), "--buffer-consumer-id", f"topk-{tmp_path.name}",
                                "--opd-topk", "4", "--opd-topk-cache-dir", str(tmp_path / "topk"),
                                "--custom-loss-function-path", "openclaw-opd/topk_distillation_loss.py:topk_distillation_loss"])
    with _one_step(BackgroundTrainer(flags), stack, tiny_model_path, samples=2) as rec:
        files = sorted((tmp_path / "topk").glob("*.json"))
        assert len(files) == 2
        assert rec.metrics["loss/opd_topk_kl"] > 0 and rec.metrics["opd/topk_missing"] == 0
