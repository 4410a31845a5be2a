"""swe-rl's custom generate function against the real embedded engine over HTTP (tiny model) and a
real shipped instance in the sandbox: tokens, loss mask and log-probs align, tool results are
masked out, and the per-test results of the episode are kept in the Sample."""

from __future__ import annotations

import argparse
import math
import os
import shutil
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
# The trainer's plugin loader puts swe-rl on the import path, as in a run; its sibling
# modules are then imported by their own names (one module object each).
load_plugin_module("swe-rl/swe_sources.py")

import swe_sources  # noqa: E402
from slime.utils.types import Sample  # noqa: E402
from swe_instances import shipped_instances  # noqa: E402

from openclaw.sandbox.episode import load_tokenizer  # noqa: E402

_helpers = load_plugin_module(str(Path(__file__).resolve().parent / "track_helpers.py"))
engine_url, spans = _helpers.engine_url, _helpers.spans

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def make_args(model_path, url, **kw) -> argparse.Namespace:
    base = dict(hf_checkpoint=str(model_path), rollout_engine_urls=[url], max_steps=3, parallel_envs=2,
                prm_step_coef=0.0, sandbox="bwrap", swe_bench_path=None, command_timeout=10.0, test_timeout=60.0,
                episode_memory_mb=1024, rollout_max_context_len=2048)
    base.update(kw)
    return argparse.Namespace(**base)


async def test_generate_builds_aligned_masked_sample_with_test_results(tiny_model_path, engine_url):
    import swe_generate

    inst = shipped_instances("train")[0]
    missing = swe_sources.missing_sources([inst.sdist])
    if missing:
        msg = f"missing: {missing}; run `bash swe-rl/setup_swe.sh`"
        pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)
    args = make_args(tiny_model_path, engine_url, prm_step_coef=0.5)
    sample = Sample(index=0, prompt=inst.problem_statement, label=inst.instance_id,
                    metadata={"instance_id": inst.instance_id})
    params = {"max_new_tokens": 24, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "no_stop_trim": True,
              "sampling_seed": 7}
    out = await swe_generate.generate(args, sample, params)
    out.validate()
    tok = load_tokenizer(str(tiny_model_path))
    response = out.tokens[out.prompt_length:]
    assert len(response) == out.response_length == len(out.loss_mask) == len(out.rollout_log_probs)
    assert all(math.isfinite(x) and x <= 0.0 for x in out.rollout_log_probs)
    # A random tiny model never calls a tool: turn, obs, turn, obs, turn (MAX_STEPS=3).
    model_spans, obs_spans = spans(out.loss_mask, 1), spans(out.loss_mask, 0)
    assert len(model_spans) == 3 and len(obs_spans) == 2, (model_spans, obs_spans)
    for a, b in obs_spans:
        text = tok.decode(response[a:b])
        assert "No tool call found" in text and text.endswith("<|im_start|>assistant\n")
    meta = out.metadata
    assert meta["instance_id"] == inst.instance_id and meta["tools"] == ["invalid"] * 3
    assert meta["patch"] == "" and not meta["resolved"]
    assert set(meta["test_results"]) == set(inst.test_ids)
    assert all(meta["test_results"][t] != "passed" for t in inst.FAIL_TO_PASS)
    assert out.reward == 0.0  # unresolved, and every step scored 0
    assert meta["setup_seconds"] > 0
