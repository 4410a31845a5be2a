"""Trainer runtime pieces without engines or Ray: batching, data source, rewards, checkpoints,
the FSDP actor's log-probs / train step / LoRA reference / save format (tiny real model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from slime.backends.fsdp import ActorConfig, FSDPTrainActor
from slime.backends.fsdp.batching import make_micro_batches, partition_dynamic
from slime.backends.fsdp.model import lr_lambda
from slime.backends.fsdp.train_loop import build_loss_call, step_slices, train_rollout
from slime.rollout.data_source import DataSourceConfig, RolloutDataSource
from slime.rollout.rm import builtin_reward, extract_answer
from slime.utils import checkpoint as ck
from slime.utils.arguments import parse_config
from slime.utils.types import Sample


# ----------------------------------------------------------------------------- batching
def test_dynamic_partition_respects_padded_budget():
    lengths = [5, 100, 7, 60, 61, 3, 30, 200]
    groups = partition_dynamic(lengths, max_tokens=128)
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    for g in groups:
        if len(g) > 1:
            assert len(g) * max(lengths[i] for i in g) <= 128
    # the over-long sample is alone
    assert [7] in groups


def test_dynamic_partition_keeps_a_prompt_group_together():
    # two GRPO groups of 4, interleaved and with overlapping lengths: sorting by length alone
    # would mix them; each fits the budget (4 x 30 = 120), both together do not
    lengths = [30, 12, 29, 11, 28, 10, 27, 9]
    keys = ["a", "b", "b", "a", "a", "b", "b", "a"]
    groups = partition_dynamic(lengths, max_tokens=128, keys=keys)
    assert sorted(map(sorted, groups)) == [[0, 3, 4, 7], [1, 2, 5, 6]]
    # without keys the four longest rows (two of each prompt) share a micro-batch
    assert sorted(map(sorted, partition_dynamic(lengths, max_tokens=128))) == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_dynamic_partition_splits_a_group_larger_than_the_budget_into_its_own_micro_batches():
    lengths = [40, 39, 38, 37, 5, 6]
    groups = partition_dynamic(lengths, max_tokens=100, keys=["a", "a", "a", "a", "b", "c"])
    assert sorted(map(sorted, groups)) == [[0, 1], [2, 3], [4, 5]]  # "a" in two, the unique prompts packed


def test_dynamic_partition_does_not_mix_groups_that_would_fit_together():
    lengths = [10, 11, 12, 13]
    assert sorted(map(sorted, partition_dynamic(lengths, max_tokens=1000, keys=["a", "b", "a", "b"]))) == [[0, 2], [1, 3]]
    assert partition_dynamic(lengths, max_tokens=1000) == [[3, 2, 1, 0]]


def test_dynamic_micro_batches_share_each_groups_prompt():
    prompt_a, prompt_b = [1, 2, 3, 4, 5, 6], [1, 2, 3, 7, 8]
    tokens, resp = [], []
    for n in range(4):  # interleaved rows of two prompts, responses of 1-4 tokens
        for prompt in (prompt_a, prompt_b):
            tokens.append(prompt + [20 + k for k in range(n + 1)])
            resp.append(n + 1)
    mbs = make_micro_batches(tokens, resp, pad_id=0, dynamic=True, max_tokens=40, micro_batch_size=1)
    assert sorted(sorted(mb.indices) for mb in mbs) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    assert sorted(mb.shared_prompt_length() for mb in mbs) == [5, 6]


def test_micro_batches_pad_right_and_track_prompt_lengths():
    tokens = [[1, 2, 3, 4], [5, 6], [7, 8, 9]]
    mbs = make_micro_batches(tokens, [2, 1, 1], pad_id=0, dynamic=False, max_tokens=0, micro_batch_size=2)
    assert [mb.indices for mb in mbs] == [[0, 1], [2]]
    assert mbs[0].input_ids.tolist() == [[1, 2, 3, 4], [5, 6, 0, 0]]
    assert mbs[0].attention_mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 0]]
    assert mbs[0].prompt_lengths == [2, 1]


def test_step_slices_cover_all_samples_once():
    assert step_slices(10, 3) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert step_slices(4, 1) == [[0, 1, 2, 3]]


def test_lr_schedule_warmup_then_cosine():
    cfg = ActorConfig(model_path="x", lr=1.0, min_lr=0.1, lr_warmup_iters=2, lr_decay_style="cosine", lr_decay_iters=6)
    f = lr_lambda(cfg)
    assert f(0) == pytest.approx(0.5) and f(1) == pytest.approx(1.0)
    assert f(2) == pytest.approx(1.0) and f(6) == pytest.approx(0.1)
    assert 0.1 < f(4) < 1.0


# ----------------------------------------------------------------------------- data source
def _write_prompts(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"question": f"q{i}", "answer": str(i)}) + "\n" for i in range(n)))
    return path


def test_data_source_shuffle_is_seeded_and_resumable(tmp_path):
    cfg = DataSourceConfig(prompt_data=str(_write_prompts(tmp_path / "p.jsonl", 5)), input_key="question",
                           label_key="answer", rollout_shuffle=True, seed=3, n_samples_per_prompt=2)
    a = RolloutDataSource(cfg)
    first = a.get_samples(3)
    assert [len(g) for g in first] == [2, 2, 2]
    assert first[0][0].prompt == first[0][1].prompt and first[0][0].index != first[0][1].index
    state = a.state_dict()
    rest = [g[0].prompt for g in a.get_samples(6)]  # crosses into epoch 1
    b = RolloutDataSource(cfg)
    b.load_state_dict(json.loads(json.dumps(state)))
    assert [g[0].prompt for g in b.get_samples(6)] == rest
    epoch0 = [g[0].prompt for g in first] + rest[:2]
    assert sorted(epoch0) == [f"q{i}" for i in range(5)]  # an epoch is a permutation
    again = RolloutDataSource(cfg).get_samples(3)
    assert [g[0].prompt for g in again] == [g[0].prompt for g in first]


def test_data_source_errors_are_clear(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"other": 1}\n')
    with pytest.raises(ValueError, match="missing input key 'question'"):
        RolloutDataSource(DataSourceConfig(prompt_data=str(bad), input_key="question"))
    with pytest.raises(FileNotFoundError):
        RolloutDataSource(DataSourceConfig(prompt_data=str(tmp_path / "nope.jsonl")))


def test_chat_template_applied(tmp_path, tiny_model_path):
    from slime.backends.fsdp.model import load_tokenizer

    p = tmp_path / "p.jsonl"
    p.write_text(json.dumps({"input": "hello"}) + "\n")
    ds = RolloutDataSource(DataSourceConfig(prompt_data=str(p), apply_chat_template=True),
                           load_tokenizer(tiny_model_path))
    prompt = ds.get_samples(1)[0][0].prompt
    assert prompt.startswith("<|im_start|>") and prompt.endswith("<|im_start|>assistant\n") and "hello" in prompt


# ----------------------------------------------------------------------------- rewards
@pytest.mark.parametrize("response,label,expected", [
    ("so the answer is \\boxed{42}.", "42", 1.0),
    ("\\boxed{\\frac{1}{2}} is it", "\\frac{1}{2}", 1.0),
    ("first 3 then 1,250 apples", "1250", 1.0),
    ("total: 7.0", "7", 1.0),
    ("I think 8", "#### 9", 0.0),
    ("no number here", "3", 0.0),
])
def test_math_reward(response, label, expected):
    assert builtin_reward("math", Sample(response=response, label=label)) == expected


def test_gsm8k_label_and_keyword_and_length():
    assert extract_answer("work...\n#### 18") == "18"
    assert builtin_reward("gsm8k", Sample(response="it is 18", label="blah #### 18")) == 1.0
    assert builtin_reward("keyword", Sample(response="Paris is nice", label="london,paris")) == 1.0
    assert builtin_reward("keyword", Sample(response="Rome", label="paris")) == 0.0
    assert builtin_reward("length", Sample(response_length=5, label="10")) == 0.5
    with pytest.raises(ValueError, match="unknown --rm-type"):
        builtin_reward("nope", Sample())


# ----------------------------------------------------------------------------- checkpoints
def test_checkpoint_atomic_commit_latest_and_crash(tmp_path):
    save = tmp_path / "ckpt"
    tmp = ck.begin_checkpoint(save, 1)
    (tmp / "weights.bin").write_text("v1")
    ck.commit_checkpoint(save, 1, tmp, ck.CheckpointMeta(rollout_id=1, data_source={"offset": 4}))
    assert (save / "checkpoint-latest").is_symlink()
    assert ck.resolve_checkpoint(save) == (save / "checkpoint-1").resolve()
    # a crash mid-save: temp folder written, never committed
    crashed = ck.begin_checkpoint(save, 2)
    (crashed / "weights.bin").write_text("partial")
    assert ck.resolve_checkpoint(save) == (save / "checkpoint-1").resolve()
    assert ck.load_meta(save / "checkpoint-latest").data_source == {"offset": 4}
    assert not (save / "checkpoint-2").exists()
    # the next save cleans the stale temp folder and moves the pointer
    tmp3 = ck.begin_checkpoint(save, 3)
    assert not crashed.exists()
    ck.commit_checkpoint(save, 3, tmp3, ck.CheckpointMeta(rollout_id=3), keep_last=1)
    assert ck.load_meta(save / "checkpoint-latest").rollout_id == 3
    assert [p.name for p in ck.list_checkpoints(save)] == ["checkpoint-3"]
    assert ck.resolve_checkpoint(tmp_path / "empty") is None
    with pytest.raises(FileNotFoundError):
        ck.load_meta(tmp_path)


# ----------------------------------------------------------------------------- actor
def _args(model: Path, *extra: str):
    return parse_config(["--hf-checkpoint", str(model), "--rollout-batch-size", "2", "--n-samples-per-prompt", "2",
                         "--lr", "1e-2", "--weight-decay", "0", *extra]).to_namespace()


def _samples(n: int = 4) -> list[Sample]:
    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(n):
        prompt = torch.randint(10, 2000, (3 + i,), generator=g).tolist()
        resp = torch.randint(10, 2000, (2 + 2 * i,), generator=g).tolist()
        out.append(Sample(index=i, group_index=i // 2, tokens=prompt + resp, response_length=len(resp),
                          loss_mask=[1] * len(resp), reward=float(i % 2)))
    return out


def _reference_log_probs(model, s: Sample) -> list[float]:
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([s.tokens])).logits[0].float()
    lsm = torch.log_softmax(logits, -1)
    p = len(s.tokens) - s.response_length
    return [lsm[p - 1 + t, s.tokens[p + t]].item() for t in range(s.response_length)]


def test_log_probs_padded_dynamic_and_fixed_match_unpadded_forward(tiny_model_path):
    args = _args(tiny_model_path)
    samples = _samples()
    toks, lens = [s.tokens for s in samples], [s.response_length for s in samples]
    fixed = FSDPTrainActor(ActorConfig.from_args(args), args)
    dyn = FSDPTrainActor(ActorConfig.from_args(_args(tiny_model_path, "--use-dynamic-batch-size",
                                                     "--max-tokens-per-gpu", "24")), args)
    a = fixed.compute_log_probs(toks, lens)
    b = dyn.compute_log_probs(toks, lens)
    for s, x, y in zip(samples, a, b, strict=True):
        ref = _reference_log_probs(fixed.model, s)
        assert len(x) == s.response_length
        assert max(abs(u - v) for u, v in zip(x, ref, strict=True)) < 1e-5
        assert max(abs(u - v) for u, v in zip(y, ref, strict=True)) < 1e-5


def _group_samples(n: int = 4, prompt_len: int = 5) -> list[Sample]:
    """One GRPO group: the same prompt, responses of different lengths (right padding)."""
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(10, 2000, (prompt_len,), generator=g).tolist()
    out = []
    for i in range(n):
        resp = torch.randint(10, 2000, (3 + 2 * i,), generator=g).tolist()
        out.append(Sample(index=i, group_index=0, tokens=prompt + resp, response_length=len(resp),
                          loss_mask=[1] * len(resp), reward=float(i % 2)))
    return out


def test_shared_prompt_forward_matches_padded_forward_values_and_training(tiny_model_path):
    """A GRPO group in one micro-batch runs its prompt once; log-probs, reference log-probs and
    the trained LoRA weights must equal the plain padded forward's."""
    flags = ("--use-dynamic-batch-size", "--max-tokens-per-gpu", "256", "--use-lora", "--lora-rank", "4",
             "--rollout-batch-size", "1", "--n-samples-per-prompt", "4")
    shared_args = _args(tiny_model_path, *flags)
    plain_args = _args(tiny_model_path, *flags, "--disable-shared-prompt-forward")
    shared = FSDPTrainActor(ActorConfig.from_args(shared_args), shared_args)
    plain = FSDPTrainActor(ActorConfig.from_args(plain_args), plain_args)
    assert shared.cfg.shared_prompt_forward and not plain.cfg.shared_prompt_forward
    samples = _group_samples()
    toks, lens = [s.tokens for s in samples], [s.response_length for s in samples]
    (mb,) = shared._micro_batches(toks, lens)
    assert mb.shared_prompt_length() == 5
    before = _assert_same_log_probs_and_update(shared, shared_args, plain, plain_args, _group_samples)
    changed = shared.compute_log_probs(toks, lens)
    assert any(abs(u - v) > 1e-4 for x, y in zip(changed, before, strict=True) for u, v in zip(x, y, strict=True))


def _assert_same_log_probs_and_update(fast: FSDPTrainActor, fast_args, plain: FSDPTrainActor, plain_args,
                                      make_samples) -> list[list[float]]:
    """`fast` (a forward that skips repeated work) and `plain` (the padded forward) must give the
    same log-probs, reference log-probs, gradient and trained LoRA weights on `make_samples()`.
    Returns fast's log-probs before training."""
    samples = make_samples()
    toks, lens = [s.tokens for s in samples], [s.response_length for s in samples]
    before: list[list[float]] = []
    for reference in (False, True):
        a = fast.compute_log_probs(toks, lens, reference=reference)
        b = plain.compute_log_probs(toks, lens, reference=reference)
        if not reference:
            before = a
        for s, x, y in zip(samples, a, b, strict=True):
            assert len(x) == s.response_length
            assert max(abs(u - v) for u, v in zip(x, y, strict=True)) < 1e-5
    m_fast = train_rollout(fast, fast_args, samples, build_loss_call(fast_args))
    m_plain = train_rollout(plain, plain_args, make_samples(), build_loss_call(plain_args))
    assert m_fast["gradient/norm"] > 0
    assert abs(m_fast["gradient/norm"] - m_plain["gradient/norm"]) < 1e-4 * m_plain["gradient/norm"]
    trained = {n: p for n, p in fast.model.named_parameters() if p.requires_grad}
    for n, p in plain.model.named_parameters():
        if p.requires_grad:
            assert torch.allclose(trained[n], p, atol=1e-6), n
    return before


def _samples_with_one_opening(opening_len: int = 20) -> list[Sample]:
    """Three GRPO groups of 2 whose prompts all open with the same `opening_len` tokens (a system
    prompt and few-shot turns), then differ; responses of different lengths."""
    g = torch.Generator().manual_seed(2)
    opening = torch.randint(10, 2000, (opening_len,), generator=g).tolist()
    out = []
    for group in range(3):
        prompt = opening + torch.randint(10, 2000, (4 + group,), generator=g).tolist()
        for k in range(2):
            resp = torch.randint(10, 2000, (2 + k,), generator=g).tolist()
            out.append(Sample(index=len(out), group_index=group, tokens=prompt + resp, response_length=len(resp),
                              loss_mask=[1] * len(resp), reward=float(k)))
    return out


def test_common_prefix_length_stops_one_short_of_the_shortest_prompt():
    from slime.backends.fsdp.step_prefix import common_prefix_length

    assert common_prefix_length([[1, 2, 3, 4, 9], [1, 2, 3, 5, 9]], [1, 1]) == 3
    assert common_prefix_length([[1, 2, 3, 4, 9], [1, 2, 3, 4, 8]], [1, 1]) == 3  # prompts equal: 4 - 1
    assert common_prefix_length([[1, 2, 3, 4, 9], [7, 2, 3, 4, 8]], [1, 1]) == 0
    assert common_prefix_length([], []) == 0


@pytest.mark.parametrize(("batching", "num_micro_batches"), [
    (("--use-dynamic-batch-size", "--max-tokens-per-gpu", "256"), 3),  # a micro-batch per group (shared prompt)
    (("--use-dynamic-batch-size", "--max-tokens-per-gpu", "30"), 6),  # a micro-batch per row
    (("--micro-batch-size", "3"), 2),  # rows of different prompts padded together
])
def test_step_prefix_matches_padded_forward_values_and_training(tiny_model_path, batching, num_micro_batches):
    """Rows that all open with the same tokens run them once per step; log-probs, reference
    log-probs, the gradient and the trained LoRA weights must equal the plain padded forward's."""
    flags = (*batching, "--use-lora", "--lora-rank", "4", "--rollout-batch-size", "3", "--n-samples-per-prompt", "2")
    step_args = _args(tiny_model_path, *flags)
    plain_args = _args(tiny_model_path, *flags, "--disable-shared-prompt-forward", "--disable-step-prefix-forward")
    step = FSDPTrainActor(ActorConfig.from_args(step_args), step_args)
    plain = FSDPTrainActor(ActorConfig.from_args(plain_args), plain_args)
    samples = _samples_with_one_opening()
    toks, lens = [s.tokens for s in samples], [s.response_length for s in samples]
    mbs = step._micro_batches(toks, lens)
    assert len(mbs) == num_micro_batches
    prefix = step._step_prefix(step.model, toks, lens, len(mbs))
    assert prefix is not None and prefix.length == 20
    assert plain._step_prefix(plain.model, toks, lens, len(mbs)) is None
    _assert_same_log_probs_and_update(step, step_args, plain, plain_args, _samples_with_one_opening)


def test_step_prefix_refuses_an_fsdp2_model(tiny_model_path):
    """FSDP2 frees the gathered weights after a forward; the prefix's backward, run after the
    micro-batches, would read them (an illegal memory access on an H100; on the CPU, "storage of
    size 0"). A real FSDP2 model over a one-rank gloo group is refused with what to do instead."""
    import torch.distributed as dist
    from slime.backends.fsdp.model import apply_fsdp2
    from slime.backends.fsdp.step_prefix import run_step_prefix
    from transformers import AutoModelForCausalLM

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)  # one rank: no port needed
    try:
        model = apply_fsdp2(AutoModelForCausalLM.from_pretrained(str(tiny_model_path)))
        with pytest.raises(ValueError, match="cannot run under FSDP2"):
            run_step_prefix(model, list(range(100, 120)), torch.device("cpu"))
    finally:
        dist.destroy_process_group()


def test_shared_prompt_length_needs_identical_prompts():
    from slime.backends.fsdp.batching import pad_micro_batch

    same = pad_micro_batch([0, 1], [[1, 2, 3, 4], [1, 2, 3, 5, 6]], [1, 2], pad_id=0)
    assert same.shared_prompt_length() == 3
    differ = pad_micro_batch([0, 1], [[1, 2, 3, 4], [1, 9, 3, 5, 6]], [1, 2], pad_id=0)
    assert differ.shared_prompt_length() == 0
    lengths = pad_micro_batch([0, 1], [[1, 2, 3, 4], [1, 2, 3, 5, 6]], [1, 3], pad_id=0)
    assert lengths.shared_prompt_length() == 0
    single = pad_micro_batch([0], [[1, 2, 3, 4]], [1], pad_id=0)
    assert single.shared_prompt_length() == 0


def test_train_step_improves_rewarded_samples_and_state_roundtrip(tiny_model_path, tmp_path):
    args = _args(tiny_model_path, "--use-dynamic-batch-size", "--max-tokens-per-gpu", "64", "--num-steps-per-rollout", "2")
    actor = FSDPTrainActor(ActorConfig.from_args(args), args)
    samples = _samples()
    toks, lens = [s.tokens for s in samples], [s.response_length for s in samples]
    before = actor.compute_log_probs(toks, lens)
    metrics = train_rollout(actor, args, samples, build_loss_call(args))
    after = actor.compute_log_probs(toks, lens)
    assert metrics["train/num_steps"] == 2 and metrics["gradient/norm"] > 0
    for s, b, a in zip(samples, before, after, strict=True):  # reward 1 -> up, reward 0 -> down (GRPO, groups of 2)
        delta = sum(a) - sum(b)
        assert delta > 0 if s.reward == 1.0 else delta < 0
    state = actor.trainer_state()
    torch.save(state, tmp_path / "s.pt")
    fresh = FSDPTrainActor(ActorConfig.from_args(args), args)
    fresh.load_trainer_state(torch.load(tmp_path / "s.pt", weights_only=False))
    assert fresh.global_step == actor.global_step == 2
    assert fresh.scheduler.state_dict()["last_epoch"] == actor.scheduler.state_dict()["last_epoch"]
    assert torch.equal(torch.get_rng_state(), state["rng"]["torch"])


def test_lora_reference_is_base_model_and_adapter_loads(tiny_model_path, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    args = _args(tiny_model_path, "--use-lora", "--lora-rank", "4", "--lora-alpha", "8",
                 "--lora-target-modules", "q_proj", "v_proj", "--use-kl-loss", "--kl-loss-coef", "0.1")
    actor = FSDPTrainActor(ActorConfig.from_args(args), args)
    samples = _samples()
    toks, lens = [s.tokens for s in samples], [s.response_length for s in samples]
    metrics = train_rollout(actor, args, samples, build_loss_call(args))
    assert "loss/kl" in metrics
    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_path), dtype=torch.float32)
    ref = actor.compute_log_probs(toks, lens, reference=True)
    cur = actor.compute_log_probs(toks, lens)
    for s, r, c in zip(samples, ref, cur, strict=True):
        expected = _reference_log_probs(base, s)
        assert max(abs(u - v) for u, v in zip(r, expected, strict=True)) < 1e-5  # adapters disabled == base
        assert max(abs(u - v) for u, v in zip(c, expected, strict=True)) > 1e-4  # the adapter did train
    # no second copy of the weights: one set of base parameters, only LoRA ones trainable
    trainable = {n for n, p in actor.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    actor.save_hf(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_config.json").is_file()
    assert not (tmp_path / "adapter" / "model.safetensors").exists()
    loaded = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tiny_model_path)), tmp_path / "adapter")
    again = _reference_log_probs(loaded, samples[1])
    assert max(abs(u - v) for u, v in zip(again, cur[1], strict=True)) < 1e-5
    via_auto = AutoModelForCausalLM.from_pretrained(str(tmp_path / "adapter"))  # base + adapter by path
    assert max(abs(u - v) for u, v in zip(_reference_log_probs(via_auto, samples[1]), cur[1], strict=True)) < 1e-5


def test_custom_loss_plugin_reference_form_runs(tiny_model_path, tmp_path):
    plugin = tmp_path / "custom_loss.py"
    plugin.write_text(
        "import torch\n"
        "def compute_loss(policy_logits, reference_logits, rewards, advantages, config):\n"
        "    log_ratio = policy_logits - reference_logits\n"
        "    ratio = torch.exp(log_ratio)\n"
        "    clip_range = config.get('clip_range', 0.2)\n"
        "    clipped = torch.clamp(ratio, 1 - clip_range, 1 + clip_range)\n"
        "    loss = -torch.min(ratio * advantages, clipped * advantages).mean()\n"
        "    return loss + config.get('kl_coeff', 0.01) * log_ratio.mean()\n")
    args = _args(tiny_model_path, "--custom-loss-function-path", str(plugin))
    actor = FSDPTrainActor(ActorConfig.from_args(args), args)
    metrics = train_rollout(actor, args, _samples(), build_loss_call(args))
    assert metrics["gradient/norm"] > 0 and "loss/total" in metrics


def test_full_finetune_kl_uses_frozen_initial_reference(tiny_model_path):
    args = _args(tiny_model_path, "--use-kl-loss", "--kl-loss-coef", "0.5")
    actor = FSDPTrainActor(ActorConfig.from_args(args), args)
    samples = _samples()
    toks, lens = [s.tokens for s in samples], [s.response_length for s in samples]
    first = train_rollout(actor, args, samples, build_loss_call(args))
    assert first["loss/kl"] == pytest.approx(0.0, abs=1e-6)  # policy == reference before the update
    second = train_rollout(actor, args, samples, build_loss_call(args))
    assert second["loss/kl"] != pytest.approx(0.0, abs=1e-6)
    ref = actor.compute_log_probs(toks, lens, reference=True)
    for s, r in zip(samples, ref, strict=True):
        assert max(abs(u - v) for u, v in zip(r, _reference_log_probs(actor.ref_model, s), strict=True)) < 1e-5
    assert not any(p.requires_grad for p in actor.ref_model.parameters())


# ----------------------------------------------------------------------------- sample filter, reward post-process
def _three_groups() -> list[Sample]:
    """Groups of 2 with rewards (0, 1), (1, 1), (0, 1): the middle group has no reward spread."""
    samples = _samples(6)
    for s, r in zip(samples, (0.0, 1.0, 1.0, 1.0, 0.0, 1.0), strict=True):
        s.reward = r
    return samples


def test_removed_samples_are_not_run_and_leave_the_other_groups_update_unchanged(tiny_model_path):
    from slime.rollout.filters import remove_zero_std_groups

    flags = ("--rollout-batch-size", "3", "--use-dynamic-batch-size", "--max-tokens-per-gpu", "64",
             "--use-lora", "--lora-rank", "4")
    args_all, args_rm = _args(tiny_model_path, *flags), _args(tiny_model_path, *flags)
    torch.manual_seed(0)
    everything = FSDPTrainActor(ActorConfig.from_args(args_all), args_all)
    torch.manual_seed(0)
    removed = FSDPTrainActor(ActorConfig.from_args(args_rm), args_rm)
    kept = _three_groups()
    remove_zero_std_groups(args_rm, [kept[i:i + 2] for i in range(0, 6, 2)])
    assert [s.remove_sample for s in kept] == [False, False, True, True, False, False]
    m_all = train_rollout(everything, args_all, _three_groups(), build_loss_call(args_all))
    m_rm = train_rollout(removed, args_rm, kept, build_loss_call(args_rm))
    assert m_rm["train/removed_samples"] == 2 and m_all["train/removed_samples"] == 0
    # the removed group's rows were not run
    assert m_rm["perf/train_tokens"] == m_all["perf/train_tokens"] - sum(len(s.tokens) for s in kept[2:4])
    # a group with no reward spread has zero GRPO advantage: the gradient is the same without it
    # (compared before Adam, whose first step turns fp-rounding-sized gradients into +-lr)
    assert m_rm["gradient/norm"] > 0
    assert m_rm["gradient/norm"] == pytest.approx(m_all["gradient/norm"], rel=1e-5)
    grads = {n: p.grad for n, p in removed.model.named_parameters() if p.requires_grad}
    for name, p in everything.model.named_parameters():
        if p.requires_grad:
            assert torch.allclose(grads[name], p.grad, atol=1e-6 * m_all["gradient/norm"]), name


def test_a_step_whose_samples_are_all_removed_changes_nothing(tiny_model_path):
    args = _args(tiny_model_path)
    actor = FSDPTrainActor(ActorConfig.from_args(args), args)
    before = {n: p.detach().clone() for n, p in actor.model.named_parameters()}
    samples = _samples()
    for s in samples:
        s.remove_sample = True
    metrics = train_rollout(actor, args, samples, build_loss_call(args))
    assert metrics["perf/train_tokens"] == 0 and metrics["gradient/norm"] == 0
    for n, p in actor.model.named_parameters():
        assert torch.equal(before[n], p), n


def test_reward_post_process_replaces_the_group_normalisation(tiny_model_path, tmp_path):
    from slime.utils.plugins import PluginError

    plugin = tmp_path / "post.py"
    plugin.write_text("def post_process_rewards(args, samples):\n"
                      "    raw = [s.reward for s in samples]\n"
                      "    return raw, [2.0 * r - 1.0 for r in raw]\n"
                      "def short(args, samples):\n"
                      "    return [0.0], [0.0]\n")
    plain = _args(tiny_model_path)
    custom = _args(tiny_model_path, "--custom-reward-post-process-path", str(plugin))
    m_plain = train_rollout(FSDPTrainActor(ActorConfig.from_args(plain), plain), plain, _samples(),
                            build_loss_call(plain))
    m_custom = train_rollout(FSDPTrainActor(ActorConfig.from_args(custom), custom), custom, _samples(),
                             build_loss_call(custom))
    assert m_plain["train/advantage_abs_mean"] == pytest.approx(0.5 ** 0.5, rel=1e-4)  # (r - mean) / std, groups (0, 1)
    assert m_custom["train/advantage_abs_mean"] == pytest.approx(1.0)  # the plugin's +-1, not normalised again
    bad = _args(tiny_model_path, "--custom-reward-post-process-path", f"{plugin}:short")
    with pytest.raises(PluginError, match="returned 1 raw rewards and 1 rewards for 4 samples"):
        train_rollout(FSDPTrainActor(ActorConfig.from_args(bad), bad), bad, _samples(), build_loss_call(bad))


def test_rollout_manager_applies_the_sample_filter_and_counts_it(tmp_path):
    from slime.ray.rollout_manager import RolloutManager

    rollout = tmp_path / "rollout.py"
    rollout.write_text("from slime.utils.types import Sample\n"
                       "def generate_rollout(args, rollout_id, data_source, evaluation=False):\n"
                       "    rewards = [(1.0, 1.0), (0.0, 1.0)]\n"
                       "    return [[Sample(index=2 * g + k, tokens=[1, 2, 3], response_length=1, reward=r)\n"
                       "             for k, r in enumerate(group)] for g, group in enumerate(rewards)]\n")
    cfg = parse_config(["--hf-checkpoint", "unused", "--rollout-function-path", f"{rollout}:generate_rollout",
                        "--rollout-sample-filter-path", "slime.rollout.filters:remove_zero_std_groups",
                        "--rollout-batch-size", "2", "--n-samples-per-prompt", "2"])
    samples, metrics = RolloutManager(cfg, "unused", log_dir=str(tmp_path)).generate(0)
    assert [s.remove_sample for s in samples] == [True, True, False, False]
    assert metrics["rollout/removed_samples"] == 2


@pytest.mark.parametrize("flag", ["--buffer-filter-path", "--custom-convert-samples-to-train-data-path",
                                  "--rollout-data-postprocess-path"])
def test_upstream_hooks_this_trainer_has_no_place_for_are_refused(flag):
    from slime.utils.arguments import ConfigError

    with pytest.raises(ConfigError, match=f"{flag} is not supported: "):
        parse_config(["--hf-checkpoint", "x", flag, "my_hooks.py:fn"])
