"""LlamaCppEngine on the embedded model's real Q4_1 GGUF: greedy parity with llama.cpp's own
sampler, log-probs, concurrent batching, stops and streaming, LoRA pushes, abort, and the reuse of
a finished request's KV by the next request that starts with its tokens."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import numpy as np
import pytest

from openclaw.engines.base import GenerationRequest, GenerationResult, SamplingParams, TokenEvent
from openclaw.engines.llamacpp_engine import LlamaCppEngine, check_vocab
from openclaw.engines.llamacpp_lora import HeadLayout, peft_to_gguf_tensors, permute_rows
from openclaw.engines.llamacpp_scheduler import MIN_SLOT_REUSE, pick_slot

PROMPTS = ["What is the capital of France?", "Write a haiku about the sea.", "List three prime numbers.",
           "Explain why the sky is blue."]


@pytest.fixture(scope="module")
def engine(embedded_model_path):
    eng = LlamaCppEngine.load(hf_folder=str(embedded_model_path), max_batch_size=4, ctx_per_slot=1024)
    yield eng
    asyncio.run(eng.shutdown())


@pytest.fixture(scope="module")
def adapter_dir(embedded_model_path, tmp_path_factory) -> Path:
    """A PEFT LoRA of the embedded model on every projection, non-zero random weights."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear",
                                                  init_lora_weights=False))
    out = tmp_path_factory.mktemp("lora") / "checkpoint-1"
    peft_model.save_pretrained(out)
    return out


def _chat(engine, text: str) -> tuple[int, ...]:
    return tuple(engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                      tokenize=True, return_dict=False))


def _greedy(engine, text: str, n: int = 24, **kw) -> GenerationRequest:
    return GenerationRequest(_chat(engine, text), SamplingParams(max_new_tokens=n, temperature=0), return_logprob=True,
                             **kw)


async def _collect(engine, req) -> tuple[list[TokenEvent], GenerationResult]:
    events, result = [], None
    async for item in engine.stream(req):
        if isinstance(item, TokenEvent):
            events.append(item)
        else:
            result = item
    return events, result


def _llama_cpp_greedy(gguf: str, prompt: tuple[int, ...], n: int, eos: frozenset[int]) -> list[int]:
    """llama.cpp's own greedy decoding (its high-level API and greedy sampler), with flash attention
    on like the engine: the attention kernel, not the engine, would otherwise decide near-ties."""
    from llama_cpp import Llama

    llm = Llama(model_path=gguf, n_ctx=1024, n_threads=1, verbose=False, flash_attn=True)
    try:
        out: list[int] = []
        for tok in llm.generate(list(prompt), temp=0.0, reset=True):
            out.append(int(tok))
            if tok in eos or len(out) >= n:
                return out
        return out
    finally:
        llm.close()


async def test_greedy_matches_llama_cpp_and_logprobs_are_finite(engine):
    req = _greedy(engine, PROMPTS[0], n=24)
    result = await engine.generate(req)
    ref = _llama_cpp_greedy(engine.gguf_path, req.input_ids, 24, engine.eos_token_ids)
    assert list(result.output_ids) == ref
    assert len(result.output_logprobs) == len(result.output_ids) > 0
    assert all(math.isfinite(lp) and lp <= 0 for lp in result.output_logprobs)


async def test_concurrent_requests_batch_and_match_solo(engine):
    reqs = [_greedy(engine, p, n=16) for p in PROMPTS[:3]]
    solo = [await engine.generate(r) for r in reqs]
    steps0 = engine.steps
    together = await asyncio.gather(*(engine.generate(r) for r in reqs))
    for a, b in zip(solo, together, strict=True):
        assert a.output_ids == b.output_ids
        np.testing.assert_allclose(a.output_logprobs, b.output_logprobs, atol=1e-3)
    # Batched: far fewer decode calls than the sum of the outputs (one call per step, all rows in it).
    assert engine.steps - steps0 < sum(len(r.output_ids) for r in together)


async def test_stream_deltas_concatenate_and_stop_string_trims(engine):
    req = GenerationRequest(_chat(engine, "Count from 1 to 20, separated by commas."),
                            SamplingParams(max_new_tokens=64, temperature=0, stop=("5",)))
    events, result = await _collect(engine, req)
    assert "".join(e.text_delta for e in events) == result.text
    assert result.finish_reason.type == "stop" and result.finish_reason.matched == "5"
    assert "5" not in result.text


async def test_seeded_sampling_is_reproducible(engine):
    def req(seed):
        return GenerationRequest(_chat(engine, PROMPTS[1]), SamplingParams(max_new_tokens=16, temperature=1.0,
                                                                          top_p=0.9, top_k=40, seed=seed))
    a, b = await engine.generate(req(7)), await engine.generate(req(7))
    assert a.output_ids == b.output_ids


async def test_prompt_logprobs_for_scoring(engine):
    prompt = _chat(engine, PROMPTS[2])
    res = await engine.generate(GenerationRequest(prompt, SamplingParams(max_new_tokens=0), return_logprob=True,
                                                  logprob_start_len=0))
    assert res.output_ids == () and res.input_logprobs[0] is None
    assert len(res.input_logprobs) == len(prompt)
    assert all(math.isfinite(lp) for lp in res.input_logprobs[1:])


async def test_abort_frees_the_slot(embedded_model_path):
    eng = LlamaCppEngine.load(hf_folder=str(embedded_model_path), max_batch_size=1, ctx_per_slot=512)
    try:
        prompt = _chat(eng, PROMPTS[3])
        long_req = GenerationRequest(prompt, SamplingParams(max_new_tokens=400, temperature=0, ignore_eos=True),
                                     request_id="long")
        task = asyncio.create_task(eng.generate(long_req))
        while eng.steps < 3:
            await asyncio.sleep(0.01)
        assert eng.abort("long") == 1
        res = await task
        assert res.finish_reason.type == "abort" and len(res.output_ids) < 400
        nxt = await asyncio.wait_for(eng.generate(_greedy(eng, PROMPTS[0], n=4)), 60)
        assert len(nxt.output_ids) == 4 and eng.num_pending() == 0
    finally:
        await eng.shutdown()


async def test_adapter_push_changes_output_and_bumps_version(embedded_model_path, adapter_dir):
    eng = LlamaCppEngine.load(hf_folder=str(embedded_model_path), max_batch_size=2, ctx_per_slot=512)
    try:
        req = _greedy(eng, PROMPTS[0], n=12)
        before = await eng.generate(req)
        ok, msg = await eng.update_weights_from_disk(str(adapter_dir))
        assert ok, msg
        assert eng.weight_version == 1 and eng.model_path == str(adapter_dir)
        after = await eng.generate(req)
        assert after.weight_version == 1
        assert after.output_logprobs != before.output_logprobs
    finally:
        await eng.shutdown()


async def test_adapter_matches_the_merged_hf_model(embedded_model_path, adapter_dir):
    """The converted LoRA (q/k rows permuted, scaling folded in) is the PEFT adapter: llama.cpp's
    log-probs of a reply stay as close to the merged fp32 model's as the base's do to fp32's."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    eng = LlamaCppEngine.load(hf_folder=str(embedded_model_path), max_batch_size=1, ctx_per_slot=512)
    try:
        ok, msg = await eng.update_weights_from_disk(str(adapter_dir))
        assert ok, msg
        res = await eng.generate(_greedy(eng, PROMPTS[3], n=24))
    finally:
        await eng.shutdown()
    base = AutoModelForCausalLM.from_pretrained(embedded_model_path, dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, str(adapter_dir)).merge_and_unload().eval()
    ids = torch.tensor([list(res.prompt_ids) + list(res.output_ids)])
    with torch.inference_mode():
        logp = torch.log_softmax(merged(input_ids=ids).logits[0].float(), dim=-1)
    n = len(res.prompt_ids)
    ref = [float(logp[n - 1 + i, t]) for i, t in enumerate(res.output_ids)]
    delta = float(np.mean(np.abs(np.array(ref) - np.array(res.output_logprobs))))
    assert delta < 0.3, f"mean |delta log p| {delta:.3f} vs the merged HF model"


async def test_full_model_push_is_refused(engine, embedded_model_path):
    version = engine.weight_version
    ok, msg = await engine.update_weights_from_disk(str(embedded_model_path))
    assert not ok and "LoRA adapter" in msg
    assert engine.weight_version == version


def test_vocab_mismatch_refuses_to_start(engine):
    class OtherVocab:
        n_vocab = engine._rt.n_vocab

        @staticmethod
        def tokenize(text: str) -> list[int]:
            return [1] * 3

    with pytest.raises(ValueError, match="tokenize"):
        check_vocab(engine.tokenizer, OtherVocab(), engine._rt.n_vocab)


def test_permute_rows_interleaves_rotary_halves():
    w = np.arange(8, dtype=np.float32).reshape(8, 1)  # one head of dim 8: halves [0..3], [4..7]
    assert permute_rows(w, 1)[:, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]


def test_unsupported_adapters_are_refused(adapter_dir, tmp_path):
    bad = tmp_path / "dora"
    bad.mkdir()
    cfg = json.loads((adapter_dir / "adapter_config.json").read_text())
    (bad / "adapter_config.json").write_text(json.dumps({**cfg, "use_dora": True}))
    (bad / "adapter_model.safetensors").write_bytes((adapter_dir / "adapter_model.safetensors").read_bytes())
    with pytest.raises(ValueError, match="DoRA"):
        peft_to_gguf_tensors(bad, HeadLayout(9, 3))


# ---- the KV of a finished request, reused by the next request that starts with its tokens ----------
def _next_turn(engine, first: GenerationResult, text: str) -> tuple[int, ...]:
    """A chat's next prompt as ids: the previous prompt, the reply as generated, then a new user
    message (ids, not re-rendered text: so exactly prompt + reply is shared)."""
    tail = engine.tokenizer.encode(f"\n<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n",
                                   add_special_tokens=False)
    return tuple(first.prompt_ids) + tuple(first.output_ids) + tuple(tail)


def _kept_len(result: GenerationResult) -> int:
    """The tokens whose KV a finished request leaves: its prompt and reply, less the last sampled token
    (sampled, never decoded)."""
    return len(result.prompt_ids) + len(result.output_ids) - 1


def _reused(engine) -> int:
    return int(engine.prefix_cache_stats["reused_tokens"])


def _same(a: GenerationResult, b: GenerationResult) -> None:
    assert a.output_ids == b.output_ids
    np.testing.assert_allclose(a.output_logprobs, b.output_logprobs, rtol=0, atol=1e-5)


# ggml's CPU flash attention runs a ubatch of >= 64 query rows of a sequence on a tiled F32 kernel and
# fewer on a per-row kernel that rounds q to F16: a reply's KV (decoded a token at a time) and the same
# tokens prefilled in one 512-token chunk differ by ~0.07 nats per token, either as far from the fp32
# model as the other. Decode calls under 64 tokens keep every position on the per-row kernel, so a
# warm run must equal a cold one to the last bit: any wrong position or stale cell would show.
EXACT_BATCH = 32


def _pair(path, slots: int, **kw) -> tuple[LlamaCppEngine, LlamaCppEngine]:
    """(an engine that reuses kept KV, one that prefills every prompt whole), on the per-row kernel."""
    kw = dict(hf_folder=str(path), max_batch_size=slots, ctx_per_slot=1024, n_batch=EXACT_BATCH) | kw
    return LlamaCppEngine.load(**kw), LlamaCppEngine.load(**kw, prefix_reuse=False)


def test_pick_slot_continues_a_session_in_its_own_slot():
    kept = {0: (1, 2, 3) * 40, 1: (9,) * 100}
    prompt = (1, 2, 3) * 40 + (7, 7)
    assert pick_slot(prompt, len(prompt) - 1, [0, 1, 2], kept) == (0, 120)


def test_pick_slot_caps_reuse_below_the_last_prompt_token_and_the_scored_positions():
    kept = {0: tuple(range(200))}
    same = tuple(range(200))
    assert pick_slot(same, len(same) - 1, [0], kept) == (0, 199)  # the last token's logits sample
    assert pick_slot(same, 150, [0], kept) == (0, 150)  # scoring from 151 on needs those rows' logits


def test_pick_slot_keeps_another_session_when_only_a_short_opening_is_shared():
    opening = tuple(range(MIN_SLOT_REUSE - 1))
    kept = {0: opening + (5,) * 300}
    prompt = opening + (6,) * 10
    assert pick_slot(prompt, len(prompt) - 1, [0, 1], kept) == (1, 0)  # the empty slot, slot 0 kept
    # No empty slot: the short match is still better than evicting the least recently used slot blind.
    kept2 = {0: opening + (5,) * 300, 1: (8,) * 50}
    assert pick_slot(prompt, len(prompt) - 1, [1, 0], kept2) == (0, MIN_SLOT_REUSE - 1)


def test_pick_slot_without_a_match_evicts_the_least_recently_released():
    kept = {3: (1,) * 80, 2: (2,) * 80}
    assert pick_slot((5,) * 90, 89, [3, 2], kept) == (3, 0)


async def test_next_turn_reuses_prompt_and_reply_and_matches_a_cold_run(embedded_model_path):
    """Two sessions in two slots, their second turns together: each reuses exactly its own first
    turn's prompt + reply (less the last token), and gives the tokens and log-probs of an engine that
    reuses nothing."""
    warm, cold = _pair(embedded_model_path, 2)
    try:
        assert cold.prefix_cache_stats is None
        a1 = await warm.generate(_greedy(warm, PROMPTS[0], n=24))
        b1 = await warm.generate(_greedy(warm, PROMPTS[1], n=24))
        assert _reused(warm) == 0  # only the template's opening is shared: B took the empty slot
        params = SamplingParams(max_new_tokens=24, temperature=0)
        a2_req = GenerationRequest(_next_turn(warm, a1, "And of Italy?"), params, return_logprob=True)
        b2_req = GenerationRequest(_next_turn(warm, b1, "Another one, please."), params, return_logprob=True)
        a2, b2 = await asyncio.gather(warm.generate(a2_req), warm.generate(b2_req))
        assert _reused(warm) == _kept_len(a1) + _kept_len(b1)
        _same(a2, await cold.generate(a2_req))
        _same(b2, await cold.generate(b2_req))
        # A third turn continues from the second's KV, which itself started from reused KV.
        a3_req = GenerationRequest(_next_turn(warm, a2, "Thanks."), params, return_logprob=True)
        before = _reused(warm)
        a3 = await warm.generate(a3_req)
        assert _reused(warm) - before == _kept_len(a2)
        _same(a3, await cold.generate(a3_req))
    finally:
        await warm.shutdown()
        await cold.shutdown()


async def test_repeated_prompt_reuses_all_but_its_last_token(embedded_model_path):
    """Also with an empty slot free: a prompt this long is worth more than keeping that slot empty."""
    eng = LlamaCppEngine.load(hf_folder=str(embedded_model_path), max_batch_size=2, ctx_per_slot=1024,
                              n_batch=EXACT_BATCH)
    try:
        req = _greedy(eng, " ".join(PROMPTS * 4), n=16)
        assert len(req.input_ids) > MIN_SLOT_REUSE
        first = await eng.generate(req)
        again = await eng.generate(req)
        assert _reused(eng) == len(req.input_ids) - 1
        _same(first, again)
    finally:
        await eng.shutdown()


async def test_adapter_swap_drops_the_kept_kv(embedded_model_path, adapter_dir):
    """KV computed before a push is stale after it: the next turn reuses nothing and matches a cold
    engine serving the same adapter."""
    warm, cold = _pair(embedded_model_path, 2)
    try:
        first = await warm.generate(_greedy(warm, PROMPTS[0], n=16))
        for eng in (warm, cold):
            ok, msg = await eng.update_weights_from_disk(str(adapter_dir))
            assert ok, msg
        req = GenerationRequest(_next_turn(warm, first, "And of Italy?"), SamplingParams(max_new_tokens=16,
                                temperature=0), return_logprob=True)
        after = await warm.generate(req)
        assert _reused(warm) == 0
        _same(after, await cold.generate(req))
    finally:
        await warm.shutdown()
        await cold.shutdown()


async def test_request_running_through_a_swap_leaves_no_kv(embedded_model_path, adapter_dir):
    """A request in flight during a push has KV from both weights: it must not be kept."""
    eng = LlamaCppEngine.load(hf_folder=str(embedded_model_path), max_batch_size=2, ctx_per_slot=1024)
    try:
        long_req = GenerationRequest(_chat(eng, PROMPTS[3]), SamplingParams(max_new_tokens=300, temperature=0,
                                                                            ignore_eos=True))
        task = asyncio.create_task(eng.generate(long_req))
        while eng.steps < 3:
            await asyncio.sleep(0.01)
        ok, msg = await eng.update_weights_from_disk(str(adapter_dir))
        assert ok, msg
        first = await task
        assert first.weight_version == 1 and len(first.output_ids) == 300  # it did run through the swap
        await eng.generate(GenerationRequest(_next_turn(eng, first, "More."), SamplingParams(max_new_tokens=2)))
        assert _reused(eng) == 0
    finally:
        await eng.shutdown()


async def test_aborted_prefill_keeps_only_what_was_decoded(embedded_model_path):
    """A request aborted halfway through its prompt leaves the chunks decoded so far; a later request
    with that prompt reuses at most those and matches a cold run."""
    warm, cold = _pair(embedded_model_path, 1, n_batch=16)
    try:
        prompt = _chat(warm, " ".join([PROMPTS[3]] * 20))
        assert len(prompt) > 10 * 16
        task = asyncio.create_task(warm.generate(GenerationRequest(prompt, SamplingParams(max_new_tokens=4),
                                                                   request_id="cut")))
        while warm.steps < 2:
            await asyncio.sleep(0.001)
        warm.abort("cut")
        assert (await task).finish_reason.type == "abort"
        req = GenerationRequest(prompt, SamplingParams(max_new_tokens=12, temperature=0), return_logprob=True)
        res = await warm.generate(req)
        assert 0 < _reused(warm) < len(prompt)
        _same(res, await cold.generate(req))
    finally:
        await warm.shutdown()
        await cold.shutdown()


async def test_flush_cache_drops_the_kept_kv(embedded_model_path):
    eng = LlamaCppEngine.load(hf_folder=str(embedded_model_path), max_batch_size=1, ctx_per_slot=1024)
    try:
        req = _greedy(eng, PROMPTS[2], n=8)
        await eng.generate(req)
        assert eng.prefix_cache_stats["cached_tokens"] > 0
        assert eng.flush_cache()
        await eng.generate(req)
        assert _reused(eng) == 0
    finally:
        await eng.shutdown()


async def test_scoring_request_runs_every_scored_position(embedded_model_path):
    """Prompt log-probs need the logits of every scored position: a kept prefix covering them must
    not be reused past the first scored one."""
    eng, cold = _pair(embedded_model_path, 1)
    try:
        first = await eng.generate(_greedy(eng, PROMPTS[1], n=16))
        ids = tuple(first.prompt_ids) + tuple(first.output_ids)
        start = len(first.prompt_ids) - 5
        req = GenerationRequest(ids, SamplingParams(max_new_tokens=0), return_logprob=True, logprob_start_len=start)
        res = await eng.generate(req)
        assert _reused(eng) == start - 1
        ref = await cold.generate(req)
        assert len(res.input_logprobs) == len(ids) - start
        np.testing.assert_allclose(res.input_logprobs, ref.input_logprobs, rtol=0, atol=1e-5)
    finally:
        await eng.shutdown()
        await cold.shutdown()


def test_server_flag_turns_reuse_off_and_refuses_a_token_budget():
    """`--prefix-cache-tokens 0` reaches the llama.cpp engine as prefix_reuse off (the flag is
    never accepted and ignored); a token budget, which this engine has no use for, is refused."""
    import asyncio as _asyncio

    from openclaw.server.config import ConfigError, parse_config
    from openclaw.server.engine_loader import load_engine

    with pytest.raises(ConfigError, match="takes only 0"):
        parse_config(["--backend", "llamacpp", "--prefix-cache-tokens", "4096"], env={})
    with pytest.raises(ConfigError, match="does not take it"):
        parse_config(["--backend", "vllm", "--prefix-cache-tokens", "0", "--engine-url", "http://127.0.0.1:1"], env={})
    for flag, on in ((["--prefix-cache-tokens", "0"], False), ([], True)):
        cfg = parse_config(["--backend", "llamacpp", "--context-length", "512", *flag], env={}).engine
        engine = load_engine(cfg)
        try:
            assert (engine.prefix_cache_stats is not None) is on
        finally:
            _asyncio.run(engine.shutdown())
