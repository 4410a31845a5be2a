"""terminal-rl's custom generate function against the real embedded engine over HTTP (tiny model):
Samples' tokens, loss masks and log-probs align, observation tokens are masked and carry the
engine's real log-probs."""

from __future__ import annotations

import argparse
import importlib
import math
import shutil
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module
from slime.utils.types import Sample

from openclaw.engines.sglang_client import SGLangClient
from openclaw.sandbox.episode import chat_prompt_ids, load_tokenizer

# terminal-rl is a plugin folder: its generate function loads the way the trainer loads it (by
# file path; the loader also makes its sibling modules importable by name).
terminal_generate = load_plugin_module("terminal-rl/terminal_generate.py")
load_tasks = importlib.import_module("terminal_tasks").load_tasks
SYSTEM_PROMPT = importlib.import_module("terminal_env").SYSTEM_PROMPT
_helpers = load_plugin_module(str(Path(__file__).resolve().parent / "track_helpers.py"))
engine_url, spans = _helpers.engine_url, _helpers.spans

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def make_args(model_path, url, **kw) -> argparse.Namespace:
    base = dict(hf_checkpoint=str(model_path), rollout_engine_urls=[url], max_steps=3, parallel_envs=2,
                prm_step_coef=0.0, sandbox="bwrap", terminal_tasks=None, command_timeout=10.0,
                rollout_max_context_len=1024)
    base.update(kw)
    return argparse.Namespace(**base)


async def test_generate_builds_aligned_masked_sample(tiny_model_path, engine_url):

    task = next(t for t in load_tasks() if t.id == "create-file")
    args = make_args(tiny_model_path, engine_url)
    sample = Sample(index=0, prompt=task.instruction, metadata={"task": task.to_dict()})
    params = {"max_new_tokens": 24, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "no_stop_trim": True,
              "sampling_seed": 7}
    out = await terminal_generate.generate(args, sample, params)
    out.validate()
    tok = load_tokenizer(str(tiny_model_path))
    prompt_len = out.prompt_length
    response = out.tokens[prompt_len:]
    assert len(response) == out.response_length == len(out.loss_mask) == len(out.rollout_log_probs)
    assert all(math.isfinite(x) and x <= 0.0 for x in out.rollout_log_probs)
    # A random tiny model never emits a command: every turn is answered with an observation, so
    # the response is turn, obs, turn, obs, turn (MAX_STEPS=3).
    model_spans, obs_spans = spans(out.loss_mask, 1), spans(out.loss_mask, 0)
    assert len(model_spans) == 3 and len(obs_spans) == 2, (model_spans, obs_spans)
    assert out.loss_mask[0] == 1 and out.loss_mask[-1] == 1
    for a, b in obs_spans:
        text = tok.decode(response[a:b])
        assert "No command found" in text and "<|im_start|>user" in text and text.endswith("<|im_start|>assistant\n")
    assert out.metadata["steps"] == 3 and out.metadata["actions"] == ["invalid"] * 3
    assert out.reward == 0.0 and out.metadata["tests_total"] == 2
    assert out.status in (Sample.Status.COMPLETED, Sample.Status.TRUNCATED)

    # Observation log-probs are the engine's own scores of those tokens: rescoring the whole
    # sequence in one prompt pass gives the same numbers (raw log-softmax, fp32).
    async with SGLangClient(engine_url) as client:
        scored = await client.generate({"input_ids": out.tokens, "sampling_params": {"max_new_tokens": 0},
                                        "return_logprob": True, "logprob_start_len": prompt_len})
    ref = [e[0] for e in scored["meta_info"]["input_token_logprobs"]]
    assert len(ref) == out.response_length
    for a, b in obs_spans:
        assert out.rollout_log_probs[a:b] == pytest.approx(ref[a:b], abs=1e-4)
    # Sampled tokens at temperature 1: the sampler's log-probs match the rescoring too.
    for a, b in model_spans:
        assert out.rollout_log_probs[a:b] == pytest.approx(ref[a:b], abs=1e-3)


async def test_generate_respects_context_budget(tiny_model_path, engine_url):

    task = next(t for t in load_tasks() if t.id == "count-lines")
    tok = load_tokenizer(str(tiny_model_path))
    messages = [{"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": task.instruction}]
    _, prompt_ids = chat_prompt_ids(tok, messages)
    budget = len(prompt_ids) + 40
    args = make_args(tiny_model_path, engine_url, max_steps=5, rollout_max_context_len=budget)
    sample = Sample(index=1, metadata={"task_id": task.id})
    out = await terminal_generate.generate(args, sample, {"max_new_tokens": 32, "temperature": 1.0,
                                                          "no_stop_trim": True})
    out.validate()
    assert len(out.tokens) <= budget
    assert out.status == Sample.Status.TRUNCATED
    assert out.metadata["task_id"] == "count-lines"


async def test_generate_rejects_unknown_task(tiny_model_path, engine_url):

    args = make_args(tiny_model_path, engine_url)
    with pytest.raises(ValueError, match="unknown task id"):
        await terminal_generate.generate(args, Sample(index=0, metadata={"task_id": "nope"}), {"max_new_tokens": 4})


async def test_trajectory_builder_scores_trailing_observation(tiny_model_path, engine_url):
    from openclaw.sandbox.episode import encode, load_tokenizer
    from openclaw.sandbox.trajectory import TrajectoryBuilder

    tok = load_tokenizer(str(tiny_model_path))
    prompt = encode(tok, "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
    async with SGLangClient(engine_url) as client:
        builder = TrajectoryBuilder(client, prompt, {"max_new_tokens": 6, "temperature": 1.0}, 512)
        turn = await builder.generate()
        assert len(turn.token_ids) == 6
        obs = encode(tok, "<|im_end|>\n<|im_start|>user\nan observation<|im_end|>\n")
        builder.append_observation(obs)
        with pytest.raises(RuntimeError, match="finalize"):
            builder.fill_sample(Sample())
        traj = await builder.finalize()  # scores the trailing observation with max_new_tokens 0
        sample = builder.fill_sample(Sample())
        sample.validate()
        assert sample.loss_mask == [1] * 6 + [0] * len(obs)
        scored = await client.generate({"input_ids": sample.tokens, "sampling_params": {"max_new_tokens": 0},
                                        "return_logprob": True, "logprob_start_len": len(prompt) + 6})
        ref = [e[0] for e in scored["meta_info"]["input_token_logprobs"]]
        assert sample.rollout_log_probs[6:] == pytest.approx(ref, abs=1e-4)
        assert traj.turns == 1 and sample.weight_version == 0
    with pytest.raises(ValueError, match="does not fit"):
        TrajectoryBuilder(client, prompt, {"max_new_tokens": 4}, len(prompt))
