"""Per-request LoRA adapters in one batch (openclaw/engines/lora_rows.py): each row is served
exactly as its own adapter alone would serve it (PEFT's merge of it on the base), whatever else is
in the batch; a name that is not loaded is refused, never served by the base; one adapter's prompt
KV is never reused for another's or the base's; and a weight push of the served model keeps every
user's adapter applied once on top of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from openclaw.engines.base import GenerationRequest, SamplingParams
from openclaw.engines.hf_engine import HFEngine

PROMPT = tuple(range(40, 80))  # 40 tokens: past the prefix cache's minimum reuse


ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _req(prompt=PROMPT, lora: str | None = None, n: int = 12) -> GenerationRequest:
    return GenerationRequest(input_ids=prompt, params=SamplingParams(max_new_tokens=n, temperature=0.0,
                                                                     ignore_eos=True),
                             return_logprob=True, lora_name=lora)


async def _alone(path: Path, prompt=PROMPT, n: int = 12):
    """What the adapter serves alone: PEFT's merged model in an engine of its own."""
    eng = HFEngine.load(str(path))
    try:
        return await eng.generate(_req(prompt, n=n))
    finally:
        await eng.shutdown()


def _same(a, b, tol: float = 2e-4) -> None:
    assert a.output_ids == b.output_ids
    assert max(abs(x - y) for x, y in zip(a.output_logprobs, b.output_logprobs, strict=True)) < tol


@pytest.fixture
def adapters(tiny_model_path, tmp_path, random_lora):
    return {name: random_lora(tiny_model_path, tmp_path / name, seed, targets=ALL_LINEAR)
            for name, seed in (("alice", 1), ("bob", 2))}


@pytest.fixture
def engine(tiny_model_path):
    eng = HFEngine.load(str(tiny_model_path), prefix_cache_tokens=4096)
    yield eng
    asyncio.run(eng.shutdown())


async def test_each_row_of_a_mixed_batch_is_served_by_its_own_adapter(engine, adapters, tiny_model_path):
    for name, path in adapters.items():
        ok, msg = await engine.load_lora_adapter(name, str(path))
        assert ok, msg
    base, alice, bob = await asyncio.gather(engine.generate(_req()), engine.generate(_req(lora="alice")),
                                            engine.generate(_req(lora="bob")))
    assert len({base.output_ids, alice.output_ids, bob.output_ids}) == 3  # the adapters really differ
    _same(alice, await _alone(adapters["alice"]))
    _same(bob, await _alone(adapters["bob"]))
    _same(base, await _alone(tiny_model_path))


async def test_a_name_that_is_not_loaded_is_refused_not_served_by_the_base(engine, adapters):
    with pytest.raises(ValueError, match="not loaded"):
        await engine.generate(_req(lora="alice"))
    ok, _ = await engine.load_lora_adapter("alice", str(adapters["alice"]))
    assert ok
    with pytest.raises(ValueError, match="not loaded"):
        await engine.generate(_req(lora="Alice"))


async def test_one_adapters_prompt_kv_is_never_reused_for_another(engine, adapters, tiny_model_path):
    await engine.load_lora_adapter("alice", str(adapters["alice"]))
    first = await engine.generate(_req(lora="alice"))
    hits = engine.prefix_cache_stats["hits"]
    # The same prompt and its continuation, on the base: the cache holds alice's KV of them.
    longer = PROMPT + tuple(first.output_ids[:-1]) + (90, 91)
    base = await engine.generate(_req(longer))
    assert engine.prefix_cache_stats["hits"] == hits
    _same(base, await _alone(tiny_model_path, longer))
    # Within alice's own space the next turn does reuse her KV, and equals a cold run.
    again = await engine.generate(_req(longer, lora="alice"))
    assert engine.prefix_cache_stats["hits"] == hits + 1
    _same(again, await _alone(adapters["alice"], longer))


async def test_a_replaced_adapter_serves_its_new_weights_and_version(engine, adapters):
    await engine.load_lora_adapter("alice", str(adapters["alice"]), weight_version=3)
    assert engine.lora_adapters == {"alice": 3}
    ok, msg = await engine.load_lora_adapter("alice", str(adapters["bob"]))
    assert ok, msg
    assert engine.lora_adapters == {"alice": 4}
    out = await engine.generate(_req(lora="alice"))
    assert out.weight_version == 4
    _same(out, await _alone(adapters["bob"]))  # no KV or weights of the replaced adapter left


async def test_a_push_of_the_served_model_keeps_each_adapter_applied_once(engine, adapters, tiny_model_path, tmp_path,
                                                                        random_lora):
    await engine.load_lora_adapter("alice", str(adapters["alice"]))
    # A zero adapter merges to the base: alice's rows must still equal alice alone, not base + 2x alice.
    zero = random_lora(tiny_model_path, tmp_path / "zero", 5, targets=ALL_LINEAR, zero=True)
    for _ in range(2):
        ok, msg = await engine.update_weights_from_disk(str(zero))
        assert ok and engine.last_weight_update["merged_in_memory"], msg
    _same(await engine.generate(_req(lora="alice")), await _alone(adapters["alice"]))


async def test_unloading_aborts_its_running_requests_and_refuses_later_ones(engine, adapters):
    await engine.load_lora_adapter("alice", str(adapters["alice"]))
    running = asyncio.ensure_future(engine.generate(_req(lora="alice", n=2000)))
    base = asyncio.ensure_future(engine.generate(_req(n=8)))
    while engine.steps < 2:  # both rows are decoding
        await asyncio.sleep(0.01)
    ok, msg = await engine.unload_lora_adapter("alice")
    assert ok, msg
    out = await running
    assert out.finish_reason.type == "abort" and len(out.output_ids) < 2000
    assert (await base).finish_reason.type == "length"
    assert engine.lora_adapters == {}
    with pytest.raises(ValueError, match="not loaded"):
        await engine.generate(_req(lora="alice"))


async def test_adapters_it_cannot_serve_per_row_are_refused_with_the_reason(engine, tiny_model_path, tmp_path,
                                                                           random_lora):
    dora = random_lora(tiny_model_path, tmp_path / "dora", 3, targets=ALL_LINEAR, use_dora=True)
    ok, msg = await engine.load_lora_adapter("carol", str(dora))
    assert not ok and "plain LoRA" in msg
    ok, msg = await engine.load_lora_adapter("carol", str(tmp_path / "missing"))
    assert not ok and "not a PEFT adapter folder" in msg
    ok, msg = await engine.load_lora_adapter("two words", str(dora))
    assert not ok and "whitespace" in msg
    assert engine.lora_adapters == {}


async def test_the_number_of_loaded_adapters_is_capped(tiny_model_path, adapters):
    eng = HFEngine.load(str(tiny_model_path), max_lora_adapters=1)
    try:
        assert (await eng.load_lora_adapter("alice", str(adapters["alice"])))[0]
        ok, msg = await eng.load_lora_adapter("bob", str(adapters["bob"]))
        assert not ok and "unload one first" in msg
        assert (await eng.load_lora_adapter("alice", str(adapters["bob"])))[0]  # replacing is not adding
    finally:
        await eng.shutdown()
