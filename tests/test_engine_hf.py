"""HFEngine on real (tiny random / embedded SmolLM2) models: batching, log-probs, stops, seeds,
cancellation, weight reloads."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch

from openclaw.engines.base import GenerationRequest, GenerationResult, SamplingParams, TokenEvent
from openclaw.engines.hf_engine import HFEngine

PROMPTS = ["Hello there, how are you today?", "The quick brown fox", "1 2 3 4 5 6 7 8 9 10 11 12",
           "Write a poem about the sea and the sky and the stars"]


@pytest.fixture(scope="module")
def engine(tiny_model_path):
    eng = HFEngine.load(str(tiny_model_path), max_batch_size=8)
    yield eng
    asyncio.run(eng.shutdown())


def _ids(engine, text: str) -> tuple[int, ...]:
    return tuple(engine.tokenizer.encode(text))


def _greedy(engine, text: str, n: int = 12, **kw) -> GenerationRequest:
    return GenerationRequest(_ids(engine, text), SamplingParams(max_new_tokens=n, temperature=0, ignore_eos=True),
                             return_logprob=True, **kw)


def _forward_logprobs(model, prompt: tuple[int, ...], output: tuple[int, ...]) -> list[float]:
    ids = torch.tensor([list(prompt) + list(output)])
    with torch.inference_mode():
        logits = model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    n = len(prompt)
    return [float(logp[n - 1 + i, tok]) for i, tok in enumerate(output)]


async def _collect(engine, req) -> tuple[list[TokenEvent], GenerationResult]:
    events, result = [], None
    async for item in engine.stream(req):
        if isinstance(item, TokenEvent):
            events.append(item)
        else:
            result = item
    return events, result


async def test_batched_equals_unbatched_greedy(engine):
    reqs = [_greedy(engine, p) for p in PROMPTS]
    single = [await engine.generate(r) for r in reqs]
    batched = await asyncio.gather(*(engine.generate(r) for r in reqs))
    for a, b in zip(single, batched, strict=True):
        assert a.output_ids == b.output_ids
        assert len(a.output_ids) == 12 and a.finish_reason.type == "length"
        assert a.output_logprobs == pytest.approx(b.output_logprobs, abs=1e-4)


async def test_logprobs_match_direct_forward(engine):
    for prompt in PROMPTS[:2]:
        res = await engine.generate(_greedy(engine, prompt, n=10))
        ref = _forward_logprobs(engine._model, res.prompt_ids, res.output_ids)
        assert len(res.output_logprobs) == len(res.output_ids) == 10
        assert res.output_logprobs == pytest.approx(ref, abs=1e-4)


async def test_sampled_logprobs_are_temperature_scaled_like_sglang(engine):
    req = GenerationRequest(_ids(engine, PROMPTS[0]), SamplingParams(max_new_tokens=6, temperature=0.5, seed=3,
                                                                     ignore_eos=True),
                            return_logprob=True, top_logprobs_num=3)
    res = await engine.generate(req)
    ids = torch.tensor([list(res.prompt_ids) + list(res.output_ids)])
    with torch.inference_mode():
        logits = engine._model(input_ids=ids).logits[0].float()
    logp = torch.log_softmax(logits / 0.5, dim=-1)
    n = len(res.prompt_ids)
    ref = [float(logp[n - 1 + i, t]) for i, t in enumerate(res.output_ids)]
    assert res.output_logprobs == pytest.approx(ref, abs=1e-4)
    top = res.output_top_logprobs[0]
    assert len(top) == 3 and top[0][1] >= top[1][1] >= top[2][1]
    assert top[0][1] == pytest.approx(float(logp[n - 1].max()), abs=1e-4)


async def test_fp32_logprobs_bitwise_deterministic(engine):
    req = _greedy(engine, PROMPTS[2], n=8)
    a, b = await engine.generate(req), await engine.generate(req)
    assert a.output_ids == b.output_ids and a.output_logprobs == b.output_logprobs


async def test_request_joins_running_batch(engine):
    long_req = _greedy(engine, PROMPTS[3], n=60)
    short_req = _greedy(engine, PROMPTS[1], n=5)
    alone = await engine.generate(short_req)
    first_token = asyncio.Event()
    long_done_before_short = []

    async def run_long():
        async for item in engine.stream(long_req):
            first_token.set()
            if isinstance(item, GenerationResult):
                long_done_before_short.append(True)
                return item

    long_task = asyncio.create_task(run_long())
    await first_token.wait()
    short = await engine.generate(short_req)  # joins while the long request is decoding
    assert not long_done_before_short, "the short request waited for the long one (no continuous batching)"
    assert short.output_ids == alone.output_ids
    assert short.output_logprobs == pytest.approx(alone.output_logprobs, abs=1e-4)
    long_res = await long_task
    assert len(long_res.output_ids) == 60


async def test_stop_string_trimmed_and_streamed_consistently(engine):
    base = await engine.generate(_greedy(engine, PROMPTS[0], n=16))
    text = base.text
    assert len(text) > 8
    stop = text[5:8]
    cut = text.find(stop)
    params = SamplingParams(max_new_tokens=16, temperature=0, ignore_eos=True, stop=(stop,))
    events, res = await _collect(engine, GenerationRequest(base.prompt_ids, params))
    assert res.finish_reason.type == "stop" and res.finish_reason.matched == stop
    assert res.text == text[:cut]
    assert "".join(e.text_delta for e in events) == res.text
    kept = await engine.generate(GenerationRequest(base.prompt_ids, SamplingParams(
        max_new_tokens=16, temperature=0, ignore_eos=True, stop=(stop,), no_stop_trim=True)))
    assert kept.text == text[:cut + len(stop)]


async def test_stop_token_ids(engine):
    base = await engine.generate(_greedy(engine, PROMPTS[1], n=10))
    stop_id = base.output_ids[3]
    first = base.output_ids.index(stop_id)
    params = SamplingParams(max_new_tokens=10, temperature=0, ignore_eos=True, stop_token_ids=(stop_id,))
    res = await engine.generate(GenerationRequest(base.prompt_ids, params, return_logprob=True))
    assert res.output_ids == base.output_ids[:first + 1]  # SGLang keeps the stop token in output_ids
    assert res.finish_reason.type == "stop" and res.finish_reason.matched == stop_id
    assert res.text == engine.tokenizer.decode(base.output_ids[:first])  # ...but not in the text
    assert len(res.output_logprobs) == len(res.output_ids)


async def test_seed_determinism_alone_and_in_batch(engine):
    def req(seed, text=PROMPTS[0]):
        return GenerationRequest(_ids(engine, text), SamplingParams(max_new_tokens=10, temperature=1.0, seed=seed,
                                                                    ignore_eos=True), return_logprob=True)
    a = await engine.generate(req(42))
    b = await engine.generate(req(42))
    assert a.output_ids == b.output_ids
    batch = await asyncio.gather(engine.generate(req(7, PROMPTS[1])), engine.generate(req(42)),
                                 engine.generate(req(9, PROMPTS[2])))
    assert batch[1].output_ids == a.output_ids
    c = await engine.generate(req(43))
    assert c.output_ids != a.output_ids


async def test_top_k_one_is_greedy(engine):
    greedy = await engine.generate(_greedy(engine, PROMPTS[2], n=8))
    params = SamplingParams(max_new_tokens=8, temperature=0.8, top_k=1, seed=1, ignore_eos=True)
    res = await engine.generate(GenerationRequest(greedy.prompt_ids, params))
    assert res.output_ids == greedy.output_ids
    params = SamplingParams(max_new_tokens=8, temperature=0.8, top_p=1e-6, seed=2, ignore_eos=True)
    res = await engine.generate(GenerationRequest(greedy.prompt_ids, params))
    assert res.output_ids == greedy.output_ids


async def test_prompt_logprobs_scoring_path(engine):
    prompt = _ids(engine, PROMPTS[3])
    req = GenerationRequest(prompt, SamplingParams(max_new_tokens=0), return_logprob=True, logprob_start_len=0)
    res = await engine.generate(req)
    assert res.output_ids == () and res.finish_reason.type == "length"
    assert len(res.input_logprobs) == len(prompt) and res.input_logprobs[0] is None
    ref = _forward_logprobs(engine._model, prompt[:1], prompt[1:])
    assert list(res.input_logprobs[1:]) == pytest.approx(ref, abs=1e-5)
    tail = await engine.generate(GenerationRequest(prompt, SamplingParams(max_new_tokens=0), return_logprob=True,
                                                   logprob_start_len=4))
    assert list(tail.input_logprobs) == pytest.approx(ref[3:], abs=1e-5)
    last = await engine.generate(GenerationRequest(prompt, SamplingParams(max_new_tokens=2, temperature=0),
                                                   return_logprob=True, logprob_start_len=len(prompt) - 1))
    assert list(last.input_logprobs) == pytest.approx(ref[-1:], abs=1e-5) and len(last.output_ids) >= 1


async def test_invalid_requests_raise_clear_errors(engine):
    with pytest.raises(ValueError, match="empty"):
        await engine.generate(GenerationRequest(()))
    with pytest.raises(ValueError, match="context length"):
        await engine.generate(GenerationRequest((1,) * engine.max_context_len))
    with pytest.raises(ValueError, match="top_p"):
        await engine.generate(GenerationRequest((1, 2), SamplingParams(top_p=0)))
    with pytest.raises(ValueError, match="out of range"):
        await engine.generate(GenerationRequest((1, 10**9)))


async def _wait_until(cond, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached before the deadline"
        await asyncio.sleep(0.01)


async def test_cancellation_frees_the_slot(tiny_model_path):
    eng = HFEngine.load(str(tiny_model_path), max_batch_size=1)
    try:
        long_req = GenerationRequest((1, 2, 3), SamplingParams(max_new_tokens=3000, temperature=0, ignore_eos=True))
        agen = eng.stream(long_req)
        for _ in range(2):
            assert isinstance(await agen.__anext__(), TokenEvent)
        assert eng.num_pending() == 1
        await agen.aclose()
        await _wait_until(lambda: eng.num_pending() == 0)
        res = await asyncio.wait_for(eng.generate(GenerationRequest((4, 5), SamplingParams(max_new_tokens=3))), 60)
        assert len(res.output_ids) >= 1
    finally:
        await eng.shutdown()


async def test_pause_and_continue(engine):
    await engine.pause_generation()
    try:
        task = asyncio.create_task(engine.generate(_greedy(engine, PROMPTS[0], n=4)))
        await _wait_until(lambda: engine.num_pending() == 1)
        steps = engine.steps
        done, _ = await asyncio.wait({task}, timeout=0.3)
        assert not done and engine.steps == steps, "paused engine made progress"
    finally:
        await engine.continue_generation()
    res = await asyncio.wait_for(task, 60)
    assert len(res.output_ids) == 4


async def test_abort_returns_partial_result(engine):
    agen = engine.stream(GenerationRequest((1, 2, 3), SamplingParams(max_new_tokens=3000, temperature=0, ignore_eos=True),
                                           request_id="to-abort"))
    assert isinstance(await agen.__anext__(), TokenEvent)
    assert engine.abort(rid="to-abort") == 1
    last = None
    async for item in agen:
        last = item
    assert isinstance(last, GenerationResult) and last.finish_reason.type == "abort"
    assert 1 <= len(last.output_ids) < 3000


def _greedy_reference(path, prompt: tuple[int, ...], n: int) -> list[int]:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    with torch.inference_mode():
        out = model.generate(torch.tensor([list(prompt)]), max_new_tokens=n, do_sample=False,
                             eos_token_id=None, pad_token_id=0, min_new_tokens=n)
    return out[0, len(prompt):].tolist()


async def test_reload_full_folder_while_streaming(tiny_model_path, tiny_model_path_alt):
    eng = HFEngine.load(str(tiny_model_path))
    try:
        prompt = tuple(eng.tokenizer.encode(PROMPTS[0]))
        req = GenerationRequest(prompt, SamplingParams(max_new_tokens=10, temperature=0, ignore_eos=True))
        before = await eng.generate(req)
        flight = eng.stream(GenerationRequest(prompt, SamplingParams(max_new_tokens=400, temperature=0,
                                                                     ignore_eos=True)))
        assert isinstance(await flight.__anext__(), TokenEvent)
        ok, msg = await eng.update_weights_from_disk(str(tiny_model_path_alt))
        assert ok, msg
        assert eng.weight_version == 1
        items = [item async for item in flight]
        assert isinstance(items[-1], GenerationResult) and len(items[-1].output_ids) == 400
        assert items[-1].weight_version == 1
        after = await eng.generate(req)
        assert after.output_ids != before.output_ids
        assert list(after.output_ids) == _greedy_reference(tiny_model_path_alt, prompt, 10)
        assert after.weight_version == 1
        ok, _ = await eng.update_weights_from_disk(str(tiny_model_path), weight_version=7)
        assert ok and eng.weight_version == 7
        assert (await eng.generate(req)).output_ids == before.output_ids
        ok, msg = await eng.update_weights_from_disk("/nonexistent/model")
        assert not ok and "nonexistent" in msg and eng.weight_version == 7
    finally:
        await eng.shutdown()


async def test_reload_peft_adapter(tiny_model_path, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(tiny_model_path), dtype=torch.float32)
    torch.manual_seed(0)
    lora = get_peft_model(base, LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj", "o_proj"],
                                           init_lora_weights=False))
    adapter_dir = tmp_path / "adapter"
    lora.save_pretrained(adapter_dir)
    merged = lora.merge_and_unload().eval()

    eng = HFEngine.load(str(tiny_model_path))
    try:
        prompt = tuple(eng.tokenizer.encode(PROMPTS[1]))
        req = GenerationRequest(prompt, SamplingParams(max_new_tokens=10, temperature=0, ignore_eos=True),
                                return_logprob=True)
        before = await eng.generate(req)
        flight = eng.stream(GenerationRequest(prompt, SamplingParams(max_new_tokens=300, temperature=0,
                                                                     ignore_eos=True)))
        assert isinstance(await flight.__anext__(), TokenEvent)
        ok, msg = await eng.update_weights_from_disk(str(adapter_dir))
        assert ok, msg
        items = [item async for item in flight]
        assert isinstance(items[-1], GenerationResult) and len(items[-1].output_ids) == 300
        after = await eng.generate(req)
        assert eng.weight_version == 1 and after.weight_version == 1
        assert after.output_ids != before.output_ids
        ref = _forward_logprobs(merged, prompt, after.output_ids)
        assert after.output_logprobs == pytest.approx(ref, abs=1e-4)
    finally:
        await eng.shutdown()


async def test_embedded_smollm2_knows_paris(embedded_model_path):
    eng = HFEngine.load(None)
    try:
        assert eng.model_path == str(embedded_model_path)
        tok = eng.tokenizer
        ids = tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                      add_generation_prompt=True, tokenize=True, return_dict=False)
        res = await eng.generate(GenerationRequest(tuple(ids), SamplingParams(max_new_tokens=24, temperature=0),
                                                   return_logprob=True))
        assert "Paris" in res.text
        assert res.finish_reason.type == "stop" and res.finish_reason.matched in eng.eos_token_ids
        ref = _forward_logprobs(eng._model, res.prompt_ids, res.output_ids)
        assert res.output_logprobs == pytest.approx(ref, abs=1e-4)
    finally:
        await eng.shutdown()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
async def test_cuda_engine_matches_cpu(tiny_model_path, engine):
    gpu = HFEngine.load(str(tiny_model_path), device="cuda")
    try:
        reqs = [_greedy(gpu, p, n=8) for p in PROMPTS]
        on_gpu = await asyncio.gather(*(gpu.generate(r) for r in reqs))
        on_cpu = [await engine.generate(r) for r in reqs]
        for g, c in zip(on_gpu, on_cpu, strict=True):
            assert g.output_ids == c.output_ids
            assert g.output_logprobs == pytest.approx(c.output_logprobs, abs=1e-3)
    finally:
        await gpu.shutdown()
