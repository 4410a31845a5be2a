"""LlamaCppEngine on the embedded model's real Q4_1 GGUF: greedy parity with llama.cpp's own
sampler, log-probs, concurrent batching, stops and streaming, LoRA pushes, abort."""

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
