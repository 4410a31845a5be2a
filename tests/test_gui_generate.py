"""gui-rl's custom generate function against the real embedded engine over HTTP (tiny model) and
real browsers: multi-turn Samples whose loss mask covers only the model's tokens, log-probs 1:1,
the page between turns masked out, screenshots kept."""

from __future__ import annotations

import argparse
import base64
import math
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module
from slime.utils.types import Sample

pytestmark = pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="chromium not installed")
pytest.importorskip("playwright")

gui_generate = load_plugin_module("gui-rl/gui_generate.py")
engine_url = load_plugin_module(str(Path(__file__).resolve().parent / "track_helpers.py")).engine_url


def make_args(model_path, url, **kw) -> argparse.Namespace:
    base = dict(hf_checkpoint=str(model_path), rollout_engine_urls=[url], max_steps=2, parallel_envs=2,
                screenshot_backend="playwright", rollout_max_context_len=1536,
                shuffle_element_ids=0.0)
    base.update(kw)
    return argparse.Namespace(**base)


async def test_generate_builds_masked_multiturn_sample(tiny_model_path, engine_url):
    from transformers import AutoTokenizer

    args = make_args(tiny_model_path, engine_url)
    params = {"max_new_tokens": 16, "temperature": 1.0, "top_p": 1.0, "top_k": -1, "no_stop_trim": True,
              "sampling_seed": 7}
    sample = Sample(index=0, prompt="click-button", label="click-button",
                    metadata={"task": "click-button", "seed": 123})
    out = await gui_generate.generate(args, sample, params)
    n = out.response_length
    assert len(out.loss_mask) == len(out.rollout_log_probs) == n == len(out.tokens) - len(out.tokens[:-n])
    assert all(math.isfinite(x) and x <= 0 for x in out.rollout_log_probs)
    assert out.metadata["steps"] == 2 and out.reward in (0.0, 1.0)
    # Turn 1 (model, 1s), the page (0s), turn 2 (model, 1s): only the model's tokens are trained.
    assert out.loss_mask[0] == 1 and out.loss_mask[-1] == 1 and 0 in out.loss_mask
    tok = AutoTokenizer.from_pretrained(str(tiny_model_path))
    response = out.tokens[-n:]
    masked = tok.decode([t for t, m in zip(response, out.loss_mask, strict=True) if m == 0])
    assert "Goal:" in masked  # the observation between the turns is the page, masked out
    assert "Goal:" not in tok.decode([t for t, m in zip(response, out.loss_mask, strict=True) if m == 1])
    assert base64.b64decode(out.metadata["screenshots"][0]).startswith(b"\x89PNG")


def test_sample_without_seed_is_an_error():
    with pytest.raises(ValueError, match="seed"):
        gui_generate.task_for_sample(Sample(index=3, metadata={"task": "click-button"}))
    with pytest.raises(ValueError, match="unknown MiniWoB"):
        gui_generate.task_for_sample(Sample(index=3, metadata={"task": "nope", "seed": 1}))


def test_action_is_read_without_the_end_of_turn_token(tiny_model_path):
    """The trainer's engine keeps the stop token in the text (no_stop_trim, special tokens kept): the
    action must still parse, or every rollout earns 0 (measured: 64 of 64 episodes before the fix)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_model_path))
    ids = tok('click("e5")', add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    raw = tok.decode(ids)
    with pytest.raises(gui_generate.ActionError):
        gui_generate.parse_action(raw)  # the engine's text: the call is not at the end of the line
    assert gui_generate.parse_action(gui_generate.action_text(tok, ids)).render() == "click('e5')"


def test_shuffled_pages_are_a_share_decided_by_the_page_and_never_in_evaluation(tiny_model_path):
    def config(share):
        return gui_generate.GuiRLConfig.from_args(make_args(tiny_model_path, "", shuffle_element_ids=share))

    pages = [(task, seed) for task in ("click-button", "click-dialog") for seed in range(200)]
    half = [config(0.5).shuffles(t, s, evaluation=False) for t, s in pages]
    assert 150 < sum(half) < 250  # about half of 400 pages
    assert half == [config(0.5).shuffles(t, s, evaluation=False) for t, s in pages]  # a group shares one
    assert all(config(1.0).shuffles(t, s, evaluation=False) for t, s in pages)
    assert not any(config(1.0).shuffles(t, s, evaluation=True) for t, s in pages)
    assert not any(config(0.0).shuffles(t, s, evaluation=False) for t, s in pages)
    with pytest.raises(ValueError, match="share in"):
        config(1.5)
