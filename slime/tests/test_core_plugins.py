"""Plugin loading and signature adaptation: slime's contracts and the reference's examples
(copied verbatim into fixtures/reference_method) run unchanged through the loader."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest
import torch
from slime.utils.arguments import parse_config
from slime.utils.plugins import (
    PluginError,
    adapt_loss,
    extract_reward,
    load_filter_fn,
    load_generate_fn,
    load_loss_fn,
    load_plugin,
    load_reward_model,
    load_rollout_fn,
    prompt_text,
)
from slime.utils.types import Sample

FIXTURES = Path(__file__).parent / "fixtures"
REF = FIXTURES / "reference_method"
LN15, LN2 = math.log(1.5), math.log(2.0)


@pytest.fixture
def slime_method(monkeypatch):
    # A package on the import path: slime's dotted plugin form (pkg.module.attr).
    monkeypatch.syspath_prepend(str(FIXTURES))
    return "slime_method.plugins"


# ---------------------------------------------------------------- locating


def test_file_path_relative_to_cwd_and_repo_root(monkeypatch, tmp_path):
    rel_from_repo = str(REF.relative_to(Path(__file__).resolve().parents[2]) / "custom_loss.py")
    monkeypatch.chdir(tmp_path)  # not found in CWD -> falls back to the repository root
    fn = load_plugin(rel_from_repo, "loss")
    assert fn.__name__ == "compute_loss"
    (tmp_path / "m").mkdir()
    shutil.copy(REF / "custom_loss.py", tmp_path / "m" / "custom_loss.py")
    local = load_plugin("./m/custom_loss.py:compute_loss")
    assert Path(local.__code__.co_filename).resolve() == (tmp_path / "m" / "custom_loss.py").resolve()


def test_dotted_paths_and_conventional_names(slime_method):
    assert load_plugin(f"{slime_method}.custom_loss").__name__ == "custom_loss"
    assert load_plugin(f"{slime_method}:reward_func").__name__ == "reward_func"
    assert load_plugin(slime_method, "rm").__name__ == "reward_func"  # module only -> conventional name
    assert load_plugin(slime_method, "rollout").__name__ == "generate_rollout"
    assert load_plugin("slime.algorithms.loss.policy_loss").__name__ == "policy_loss"


def test_missing_things_give_clear_errors(slime_method, tmp_path):
    with pytest.raises(PluginError, match="not found"):
        load_plugin("./nope/custom_loss.py")
    with pytest.raises(PluginError, match="has no attribute 'nope'"):
        load_plugin(f"{slime_method}.nope")
    with pytest.raises(PluginError, match="cannot import module"):
        load_plugin("no_such_pkg.module.fn")
    with pytest.raises(PluginError, match="conventional names"):
        load_plugin(slime_method, "data_source")
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(PluginError, match="boom"):
        load_plugin(str(broken), "loss")


# ---------------------------------------------------------------- loss


def test_reference_custom_loss_runs_unchanged(loss_batch):
    cfg = parse_config([])
    loss_fn = load_loss_fn(str(REF / "custom_loss.py"), cfg)
    batch = loss_batch()
    loss, metrics = loss_fn(batch, config=cfg, reducer=None)
    # masked tokens: (ratio, A) = (1.5, 1), (1, 1), (.5, -1); eps .2
    # -mean(min(rA, clip(r)A)) = -(1.2 + 1 - .8) / 3; KL: example default kl_coeff .01 * mean(log r)
    kl = 0.01 * (LN15 + 0.0 - LN2) / 3
    assert loss.item() == pytest.approx(-1.4 / 3 + kl, abs=1e-6)
    assert metrics["loss/total"].item() == pytest.approx(loss.item())
    loss.backward()
    g = batch["log_probs"].grad
    # only the unclipped token carries the surrogate gradient (-1/3); every masked token the KL's .01/3
    torch.testing.assert_close(g, torch.tensor([[0.01 / 3, -1 / 3 + 0.01 / 3], [0.01 / 3, 0.0]]), atol=1e-6, rtol=0)


def test_reference_custom_loss_receives_clip_and_kl_from_flags(loss_batch):
    cfg = parse_config(["--eps-clip", "0.3", "--use-kl-loss", "--kl-loss-coef", "0.1"])
    loss_fn = load_loss_fn(str(REF / "custom_loss.py"), cfg)
    loss, _ = loss_fn(loss_batch(), config=cfg, reducer=None)
    assert loss.item() == pytest.approx(-(1.3 + 1 - 0.7) / 3 + 0.1 * (LN15 - LN2) / 3, abs=1e-6)
    with pytest.raises(KeyError, match="rewards"):
        batch = loss_batch()
        del batch["rewards"]
        loss_fn(batch, config=cfg, reducer=None)


def test_slime_custom_loss_with_extra_args(loss_batch, slime_method):
    cfg = parse_config(["--extra-args-provider-path", slime_method, "--custom-scale", "2"])
    assert cfg.extras["custom_scale"] == 2.0
    from slime.algorithms import make_reducer

    batch = loss_batch()
    loss_fn = load_loss_fn(f"{slime_method}.custom_loss", cfg)
    loss, metrics = loss_fn(batch, config=cfg, reducer=make_reducer(batch["loss_masks"]))
    # -A*logp per token: s0 [-(-1+ln1.5), -(-2)] mean (1 - .405465 + 2)/2; s1 [-(1)(... )]: A=-1 -> logp = -1 - ln2
    s0 = ((1 - LN15) + 2.0) / 2
    s1 = -1.0 - LN2
    assert loss.item() == pytest.approx(2 * (s0 + s1) / 2, abs=1e-6)
    assert "loss/custom_pg" in metrics and "loss/total" in metrics


def test_bad_loss_signature_and_bad_return(loss_batch, slime_method):
    cfg = parse_config([])
    with pytest.raises(PluginError, match="fits no custom-loss contract"):
        load_loss_fn(f"{slime_method}.bad_loss", cfg)
    bad_return = adapt_loss(lambda args, batch, logits, reduce: torch.ones(3), cfg)
    with pytest.raises(PluginError, match="scalar loss"):
        bad_return(loss_batch(), config=cfg, reducer=None)


# ---------------------------------------------------------------- reward


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory, tiny_llama_path):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, num_labels=2,
        pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id,
    )
    out = tmp_path_factory.mktemp("prm")
    LlamaForSequenceClassification(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


async def test_reference_custom_rm_runs_unchanged(tiny_classifier, monkeypatch):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    monkeypatch.setenv("PRM_MODEL_PATH", str(tiny_classifier))  # the reference's env var
    cfg = parse_config([])
    assert cfg.reward.prm_model_path == str(tiny_classifier)
    rm = load_reward_model(str(REF / "custom_rm.py"), cfg)
    sample = Sample(
        prompt=[{"role": "user", "content": "What is 2+2?"}],
        response="4",
        metadata={"next_state": "User: perfect, thanks!"},
    )
    score = await rm.score(sample)
    # the same computation done independently here
    tok = AutoTokenizer.from_pretrained(tiny_classifier)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_classifier, dtype=torch.bfloat16).eval()
    text = f"Prompt: {prompt_text(sample.prompt)}nResponse: 4nOutcome: User: perfect, thanks!"
    with torch.no_grad():
        expected = torch.softmax(model(**tok(text, return_tensors="pt")).logits, dim=-1)[0, 1].item()
    assert 0.0 < score < 1.0
    assert score == pytest.approx(expected, abs=1e-6)
    group = await rm.score_group([sample, sample])
    assert group == [pytest.approx(score), pytest.approx(score)]


async def test_slime_reward_forms(slime_method):
    cfg = parse_config([])
    rm = load_reward_model(f"{slime_method}.reward_func", cfg)
    assert await rm(Sample(response=" 4 ", label="4")) == 1.0
    assert await rm.score(Sample(response="5", label="4")) == 0.0
    grouped = load_reward_model(f"{slime_method}.group_reward", parse_config(["--group-rm"]))
    samples = [Sample(response="a"), Sample(response="abc"), Sample(response="ab")]
    assert await grouped.score_group(samples) == [0.0, 1.0, 0.0]
    as_dict = load_reward_model(f"{slime_method}.dict_reward", cfg)
    value = await as_dict.score(Sample())
    assert extract_reward(value, "acc") == 1.0
    with pytest.raises(PluginError, match="--reward-key"):
        extract_reward(value, None)
    with pytest.raises(PluginError, match="fits no reward contract"):
        load_reward_model(f"{slime_method}.bad_reward", cfg)


# ---------------------------------------------------------------- generate / rollout / filter


async def test_generate_with_and_without_evaluation(slime_method):
    cfg = parse_config([])
    gen = load_generate_fn(slime_method, cfg)  # conventional name `generate`
    out = await gen(Sample(), {"temperature": 0.7}, evaluation=True)
    assert out.response == "T=0.7 eval=True"
    plain = load_generate_fn(f"{slime_method}.generate_no_eval", cfg)
    assert (await plain(Sample(), {}, evaluation=True)).response == "plain"
    with pytest.raises(PluginError, match="async fn\\(args, sample, sampling_params"):
        load_generate_fn(f"{slime_method}.bad_loss", cfg)


def test_rollout_and_filter(slime_method):
    cfg = parse_config(["--rollout-batch-size", "4"])
    rollout = load_rollout_fn(slime_method, cfg)
    assert rollout(3, "src", evaluation=True) == {"rollout_id": 3, "source": "src", "evaluation": True, "bs": 4}
    with pytest.raises(PluginError, match="rollout_id, data_source"):
        load_rollout_fn(f"{slime_method}.bad_loss", cfg)
    keep = load_filter_fn(f"{slime_method}.filter_nonzero_std", cfg)
    assert keep([Sample(reward=1.0), Sample(reward=0.0)]) is True
    assert keep([Sample(reward=1.0), Sample(reward=1.0)]) is False


def test_loaders_accept_slime_args_namespace(loss_batch):
    """The runtime passes slime's flat `args` (with private caches on it) instead of a TrainConfig."""
    ns = parse_config(["--eps-clip", "0.3"]).to_namespace()
    ns._plugin_cache = {"x": object()}
    loss_fn = load_loss_fn(str(REF / "custom_loss.py"), ns)
    loss, _ = loss_fn(loss_batch(), config=ns, reducer=None)
    assert loss.item() == pytest.approx(-(1.3 + 1 - 0.7) / 3 + 0.01 * (LN15 - LN2) / 3, abs=1e-6)
    from slime.utils.plugins import reference_loss_config

    assert "_plugin_cache" not in reference_loss_config(ns)


def test_reference_loss_weighted_by_micro_batch_share(loss_batch):
    """Under gradient accumulation the runtime sums micro-batch losses: the reference loss (a
    per-micro-batch mean) is scaled by the micro-batch's share of the global batch."""
    from slime.algorithms import make_reducer

    cfg = parse_config([])
    loss_fn = load_loss_fn(str(REF / "custom_loss.py"), cfg)
    batch = loss_batch()
    full, _ = loss_fn(batch, config=cfg, reducer=make_reducer(batch["loss_masks"]))
    half, metrics = loss_fn(batch, config=cfg, reducer=make_reducer(batch["loss_masks"], num_samples=4))
    assert half.item() == pytest.approx(full.item() / 2, abs=1e-7)  # 2 of the step's 4 samples
    assert metrics["loss/total"].item() == pytest.approx(half.item())
