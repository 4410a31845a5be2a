"""A LoRA push merged in memory (openclaw/engines/lora_merge.py) serves exactly what PEFT's own
merge of the same adapter on the same base serves, however many pushes came before it: a layer the
previous adapter adapted and this one does not is back at its base, nothing drifts, and an adapter
the in-memory path does not know (DoRA, another base) loads the general way."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch

from openclaw.engines.hf_engine import HFEngine


def _adapter(base_path: Path, out: Path, targets: list[str], seed: int, **extra) -> torch.nn.Module:
    """Save a random (non-zero) adapter on `base_path` to `out`; return PEFT's merged model of it."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(str(base_path), dtype=torch.float32)
    torch.manual_seed(seed)
    lora = get_peft_model(base, LoraConfig(r=4, lora_alpha=16, target_modules=targets, init_lora_weights=False,
                                           **extra))
    lora.save_pretrained(out)
    return lora.merge_and_unload().eval()


def _max_weight_gap(served: torch.nn.Module, reference: torch.nn.Module) -> float:
    ref = dict(reference.named_parameters())
    return max(float((p - ref[name]).abs().max()) for name, p in served.named_parameters())


@pytest.fixture
def engine(tiny_model_path):
    eng = HFEngine.load(str(tiny_model_path))
    yield eng
    asyncio.run(eng.shutdown())


async def test_a_plain_lora_push_is_merged_in_memory_and_equals_peft(engine, tiny_model_path, tmp_path):
    merged = _adapter(tiny_model_path, tmp_path / "a", ["q_proj", "v_proj", "down_proj"], seed=1)
    ok, msg = await engine.update_weights_from_disk(str(tmp_path / "a"))
    assert ok, msg
    assert engine.last_weight_update["merged_in_memory"] is True
    assert _max_weight_gap(engine._model, merged) < 1e-6


async def test_a_layer_the_next_adapter_leaves_out_returns_to_its_base(engine, tiny_model_path, tmp_path):
    _adapter(tiny_model_path, tmp_path / "wide", ["q_proj", "k_proj", "v_proj", "o_proj"], seed=1)
    narrow = _adapter(tiny_model_path, tmp_path / "narrow", ["v_proj"], seed=2)
    for path in ("wide", "narrow"):
        ok, msg = await engine.update_weights_from_disk(str(tmp_path / path))
        assert ok, msg
    assert engine.last_weight_update["merged_in_memory"] is True
    # q/k/o carry no trace of the wide adapter: they equal the base (PEFT's merge of v only)
    assert _max_weight_gap(engine._model, narrow) < 1e-6


async def test_many_pushes_do_not_drift(engine, tiny_model_path, tmp_path):
    refs = {s: _adapter(tiny_model_path, tmp_path / str(s), ["q_proj", "o_proj", "up_proj"], seed=s) for s in (1, 2)}
    for i in range(30):
        ok, msg = await engine.update_weights_from_disk(str(tmp_path / str(1 + i % 2)), weight_version=i + 1)
        assert ok, msg
    assert engine.weight_version == 30
    assert _max_weight_gap(engine._model, refs[2]) < 1e-6  # exact base + delta, not 30 accumulated updates


async def test_an_adapter_it_does_not_know_loads_the_general_way(engine, tiny_model_path, tmp_path):
    dora = _adapter(tiny_model_path, tmp_path / "dora", ["q_proj", "v_proj"], seed=3, use_dora=True)
    ok, msg = await engine.update_weights_from_disk(str(tmp_path / "dora"))
    assert ok, msg
    assert engine.last_weight_update["merged_in_memory"] is False
    assert _max_weight_gap(engine._model, dora) < 1e-5
    # The served layers are no longer base + a kept delta: the next plain push loads from disk too.
    plain = _adapter(tiny_model_path, tmp_path / "plain", ["v_proj"], seed=4)
    ok, msg = await engine.update_weights_from_disk(str(tmp_path / "plain"))
    assert ok and engine.last_weight_update["merged_in_memory"] is False
    assert _max_weight_gap(engine._model, plain) < 1e-6


async def test_after_a_full_folder_push_an_adapter_on_the_old_base_loads_its_own_base(
        engine, tiny_model_path, tiny_model_path_alt, tmp_path):
    ok, msg = await engine.update_weights_from_disk(str(tiny_model_path_alt))
    assert ok, msg
    merged = _adapter(tiny_model_path, tmp_path / "a", ["q_proj"], seed=5)  # names the first base
    ok, msg = await engine.update_weights_from_disk(str(tmp_path / "a"))
    assert ok, msg
    assert engine.last_weight_update["merged_in_memory"] is False
    assert _max_weight_gap(engine._model, merged) < 1e-6
