"""Against a real embedded engine process (`python -m openclaw.engines.serve`, tiny model):
the default rollout function and its plugin hooks, and weight sync trainer -> engine."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import torch
from slime.backends.fsdp import ActorConfig, FSDPTrainActor
from slime.backends.fsdp.train_loop import build_loss_call, train_rollout
from slime.rollout.data_source import DataSourceConfig, RolloutDataSource
from slime.rollout.sglang_rollout import generate_rollout
from slime.utils.arguments import parse_config
from slime.utils.types import Sample
from slime.utils.weight_sync import WeightVersions, push_to_engines


def _prompts(tmp_path: Path, n: int = 6) -> Path:
    p = tmp_path / "prompts.jsonl"
    p.write_text("".join(json.dumps({"input": f"Count to {i}:", "label": str(i)}) + "\n" for i in range(n)))
    return p


def _args(model, tmp_path, *extra):
    ns = parse_config(["--hf-checkpoint", str(model), "--prompt-data", str(_prompts(tmp_path)),
                       "--label-key", "label", "--rollout-batch-size", "2", "--n-samples-per-prompt", "3",
                       "--rollout-max-response-len", "6", *extra]).to_namespace()
    return ns


def _generate(url: str, input_ids: list[int], max_new: int = 8) -> dict:
    r = httpx.post(url + "/generate", json={"input_ids": input_ids, "return_logprob": True,
                                            "sampling_params": {"max_new_tokens": max_new, "temperature": 0.0,
                                                                "ignore_eos": True}}, timeout=120)
    r.raise_for_status()
    return r.json()


def test_default_rollout_builds_aligned_samples(engine, tiny_model_path, tmp_path):
    args = _args(tiny_model_path, tmp_path, "--rm-type", "length")
    args.rollout_engine_urls = [engine.url]
    ds = RolloutDataSource(DataSourceConfig.from_args(args))
    out = generate_rollout(args, 0, ds)
    assert len(out.samples) == 2 and all(len(g) == 3 for g in out.samples)
    indices = [s.index for g in out.samples for s in g]
    assert len(set(indices)) == 6
    for g in out.samples:
        assert len({s.group_index for s in g}) == 1
        for s in g:
            s.validate()
            assert 0 < s.response_length <= 6
            assert len(s.rollout_log_probs) == s.response_length and all(lp < 0 for lp in s.rollout_log_probs)
            assert s.loss_mask == [1] * s.response_length
            assert isinstance(s.weight_version, int)
            assert s.reward == pytest.approx(min(1.0, s.response_length / float(s.label)) if float(s.label) else s.reward)
    assert ds.state_dict()["offset"] == 2


def test_rollout_plugins_generate_filter_and_rm(engine, tiny_model_path, tmp_path):
    plugins = tmp_path / "plugins.py"
    plugins.write_text(
        "import httpx\n"
        "async def custom_rm(args, sample):\n"
        "    return float(sample.group_index % 2 == 0)\n"
        "def keep_rewarded(args, samples, **kw):\n"
        "    return any(s.reward > 0 for s in samples)\n"
        "async def my_generate(args, sample, sampling_params):\n"
        "    from transformers import AutoTokenizer\n"
        "    tok = AutoTokenizer.from_pretrained(args.hf_checkpoint)\n"
        "    ids = tok(sample.prompt)['input_ids']\n"
        "    async with httpx.AsyncClient() as c:\n"
        "        r = (await c.post(args.rollout_engine_urls[0] + '/generate', json={'input_ids': ids,\n"
        "             'sampling_params': sampling_params, 'return_logprob': True}, timeout=120)).json()\n"
        "    sample.tokens = ids + r['output_ids']\n"
        "    sample.response_length = len(r['output_ids'])\n"
        "    sample.response = r['text']\n"
        "    sample.rollout_log_probs = [x[0] for x in r['meta_info']['output_token_logprobs']]\n"
        "    sample.loss_mask = [1] * sample.response_length\n"
        "    sample.metadata['custom'] = True\n"
        "    return sample\n")
    args = _args(tiny_model_path, tmp_path, "--n-samples-per-prompt", "2",
                 "--custom-rm-path", f"{plugins}:custom_rm",
                 "--dynamic-sampling-filter-path", f"{plugins}:keep_rewarded",
                 "--custom-generate-function-path", f"{plugins}:my_generate")
    args.rollout_engine_urls = [engine.url]
    ds = RolloutDataSource(DataSourceConfig.from_args(args))
    out = generate_rollout(args, 0, ds)
    assert [g[0].group_index for g in out.samples] == [0, 2]  # odd groups filtered, topped up
    assert out.metrics["rollout/filtered/filtered"] == 2
    assert ds.state_dict()["offset"] == 4
    assert all(s.metadata.get("custom") and s.reward == 1.0 for g in out.samples for s in g)


def _sft_samples(tokenizer, target: list[int]) -> list[Sample]:
    out = []
    for i, text in enumerate(["Hello there", "What is up", "Tell me a story", "Count to three"]):
        prompt = tokenizer(text)["input_ids"]
        out.append(Sample(index=i, tokens=prompt + target, response_length=len(target), loss_mask=[1] * len(target),
                          reward=1.0))
    return out


@pytest.mark.parametrize("lora", [False, True], ids=["full", "lora"])
def test_weight_sync_engine_follows_trainer(engine, tiny_model_path, tmp_path, lora):
    extra = ["--loss-type", "sft_loss", "--lr", "3e-2", "--weight-decay", "0", "--use-dynamic-batch-size",
             "--max-tokens-per-gpu", "512"]
    if lora:
        # the tiny model's frozen lm_head caps logit gaps, so the adapter also covers lm_head
        extra += ["--use-lora", "--lora-rank", "8", "--lora-alpha", "16", "--lora-target-modules", "q_proj", "v_proj", "lm_head"]
    args = _args(tiny_model_path, tmp_path, *extra)
    actor = FSDPTrainActor(ActorConfig.from_args(args), args)
    tok = actor.tokenizer
    target = tok(" blue sky blue sky")["input_ids"]
    probe = tok("Hello there")["input_ids"]
    before = _generate(engine.url, probe, len(target))
    assert before["output_ids"] != target
    loss = build_loss_call(args)
    for _ in range(30):
        metrics = train_rollout(actor, args, _sft_samples(tok, target), loss)
        greedy = actor.model.generate(torch.tensor([probe]), max_new_tokens=len(target), do_sample=False)
        if greedy[0, len(probe):].tolist() == target:
            break
    else:
        pytest.fail(f"SFT did not reach the target; last loss {metrics['loss/total']}")
    versions = WeightVersions(root=tmp_path / "sync")
    folder = versions.next_folder()
    actor.save_hf(folder)
    assert (folder / ("adapter_config.json" if lora else "model.safetensors")).is_file()
    push_to_engines([engine.url], folder, versions.version + 1)
    assert versions.committed(folder) == 1
    after = _generate(engine.url, probe, len(target))
    assert after["output_ids"] == target  # the engine now generates what the trainer learned
    assert int(after["meta_info"]["weight_version"]) >= 1
    engine_lp = [x[0] for x in after["meta_info"]["output_token_logprobs"]]
    trainer_lp = actor.compute_log_probs([probe + target], [len(target)])[0]
    assert max(abs(a - b) for a, b in zip(engine_lp, trainer_lp, strict=True)) < 1e-4
    # restore the base weights for the other tests using this engine
    push_to_engines([engine.url], str(tiny_model_path), versions.version + 1)
