"""The embedded engine's prefix cache (`prefix_cache_tokens`): the same tokens and log-probs as a
full prefill, fewer tokens run, and nothing stale after a weight swap or a flush."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import torch

from openclaw.engines.base import GenerationRequest, SamplingParams
from openclaw.engines.hf_engine import AUTO_PREFIX_CACHE_TOKENS, HFEngine
from openclaw.engines.prefix_cache import MIN_REUSED_TOKENS, PrefixKVCache, common_prefix_len
from openclaw.engines.serve import create_app, parse_args, serve_in_thread

OPENING = ("You are an agent on a web page. Read the goal, then answer with one action such as click(e5) "
           "or type(e3, \"text\"). Example: goal Click the OK button. Elements: e1 button OK. Answer: click(e1). ")
PAGES = ["Goal: click the Submit button. Elements: e4 button Cancel, e5 button Submit.",
         "Goal: focus the text box. Elements: e2 textbox, e3 link More.",
         "Goal: click the link Home. Elements: e7 link Home, e8 link Away, e9 button Go."]


def _kv(n: int, fill: float = 0.0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.full((1, 2, n, 4), fill), torch.full((1, 2, n, 4), fill)) for _ in range(3)]


def test_lookup_finds_the_longest_shared_prefix_and_never_the_whole_prompt():
    cache = PrefixKVCache(max_tokens=1000)
    a, b = tuple(range(100)), tuple(range(60)) + tuple(range(500, 540))
    cache.store(a, _kv(len(a), 1.0))
    cache.store(b, _kv(len(b), 2.0))
    entry, reuse = cache.lookup(tuple(range(80)) + (7, 7))
    assert entry.ids == a and reuse == 80
    entry, reuse = cache.lookup(b)  # the same prompt again: all but its last token
    assert entry.ids == b and reuse == len(b) - 1
    assert cache.lookup(tuple(range(MIN_REUSED_TOKENS - 1)) + (999,) * 30) == (None, 0)
    assert cache.stats.lookups == 3 and cache.stats.hits == 2 and cache.stats.reused_tokens == 80 + len(b) - 1


def test_store_copies_and_evicts_least_recently_used_by_tokens():
    cache = PrefixKVCache(max_tokens=100)
    kv = _kv(40)
    cache.store(tuple(range(40)), kv)
    kv[0][0].fill_(5.0)  # the caller's batch tensors change later: the entry must not
    cache.store(tuple(range(100, 140)), _kv(40))
    cache.lookup(tuple(range(40)) + (1,))  # touch the first: the second is now the oldest
    cache.store(tuple(range(200, 240)), _kv(40))
    assert len(cache) == 2 and cache.tokens == 80
    entry, _ = cache.lookup(tuple(range(40)) + (1,))
    assert entry is not None and float(entry.layers[0][0].max()) == 0.0
    assert cache.lookup(tuple(range(100, 140)) + (1,)) == (None, 0)
    cache.store(tuple(range(1000, 1101)), _kv(101))  # longer than the whole budget: not kept
    assert cache.tokens == 80
    cache.clear()
    assert len(cache) == 0 and cache.tokens == 0
    with pytest.raises(ValueError, match=">= 1 token"):
        PrefixKVCache(0)


def test_common_prefix_len():
    assert common_prefix_len((1, 2, 3), (1, 2, 4, 5)) == 2
    assert common_prefix_len((), (1,)) == 0
    assert common_prefix_len((1, 2), (1, 2)) == 2


@pytest.fixture(scope="module")
def engines(tiny_model_path):
    cached = HFEngine.load(str(tiny_model_path), max_batch_size=8, prefix_cache_tokens=4096)
    plain = HFEngine.load(str(tiny_model_path), max_batch_size=8)
    yield cached, plain
    asyncio.run(cached.shutdown())
    asyncio.run(plain.shutdown())


def _request(engine: HFEngine, text: str, seed: int | None = None, n: int = 10) -> GenerationRequest:
    params = SamplingParams(max_new_tokens=n, temperature=0 if seed is None else 1.0, seed=seed, ignore_eos=True)
    return GenerationRequest(tuple(engine.tokenizer.encode(text)), params, return_logprob=True)


async def test_cached_prefill_gives_the_full_prefills_tokens_and_logprobs(engines):
    cached, plain = engines
    cached.flush_cache()
    # Sequential: a miss, then the same prompt (all but one token reused), then prompts sharing the opening.
    reqs = [_request(cached, OPENING + PAGES[0]), _request(cached, OPENING + PAGES[0]),
            _request(cached, OPENING + PAGES[1]), _request(cached, OPENING + PAGES[2], seed=3)]
    for req in reqs:
        got, want = await cached.generate(req), await plain.generate(req)
        assert got.output_ids == want.output_ids
        assert got.output_logprobs == pytest.approx(want.output_logprobs, abs=1e-4)
    stats = cached.prefix_cache_stats
    assert stats["hits"] == 3
    assert stats["reused_tokens"] >= len(reqs[1].input_ids) - 1 + 2 * len(cached.tokenizer.encode(OPENING)) - 4


async def test_a_conversations_next_turn_reuses_the_reply_it_extends(engines):
    """A finished reply's KV is kept with its prompt's: the next request of the chat (prompt, reply,
    a new message) runs only the new message, even for rows decoded in one left-padded batch with
    other lengths, and gives the full prefill's tokens and log-probs."""
    cached, plain = engines
    cached.flush_cache()
    first = [_request(cached, OPENING + PAGES[0], n=12), _request(cached, PAGES[1] + " Think first.", n=7)]
    replies = await asyncio.gather(*(cached.generate(r) for r in first))
    before = cached.prefix_cache_stats["reused_tokens"]
    follow = tuple(cached.tokenizer.encode(" That was not it; try again."))
    for req, reply in zip(first, replies, strict=True):
        turn = GenerationRequest(req.input_ids + tuple(reply.output_ids) + follow, req.params, return_logprob=True)
        got, want = await cached.generate(turn), await plain.generate(turn)
        assert got.output_ids == want.output_ids
        assert got.output_logprobs == pytest.approx(want.output_logprobs, abs=1e-4)
    reused = cached.prefix_cache_stats["reused_tokens"] - before
    assert reused == sum(len(r.input_ids) + len(o.output_ids) - 1 for r, o in zip(first, replies, strict=True))


async def test_one_prompt_sampled_n_times_in_one_batch(engines):
    """A GRPO group arriving together: one forward for the prompt, each row sampled by its own seed,
    and each row's recorded log-probs are what a full prefill gives for its tokens. They are checked
    teacher-forced (the plain engine scores prompt + the row's tokens), not by sampling the plain
    engine again: a batch of 6 and a batch of 1 differ in the last bits, which flips the random
    model's near-tie samples and says nothing about the cache."""
    cached, plain = engines
    cached.flush_cache()
    reqs = [_request(cached, OPENING + PAGES[2], seed=s) for s in range(6)]
    got = await asyncio.gather(*(cached.generate(r) for r in reqs))
    for req, g in zip(reqs, got, strict=True):
        score = GenerationRequest(req.input_ids + tuple(g.output_ids), SamplingParams(max_new_tokens=0),
                                  return_logprob=True, logprob_start_len=len(req.input_ids))
        full = await plain.generate(score)
        assert len(g.output_ids) == 10
        assert list(g.output_logprobs) == pytest.approx(list(full.input_logprobs[:len(g.output_ids)]), abs=1e-4)
    assert len({g.output_ids for g in got}) > 1, "every sample came out the same: the rows shared a generator"
    assert cached.prefix_cache_stats["reused_tokens"] >= 5 * len(reqs[0].input_ids) - 5


async def test_weight_swap_and_flush_leave_nothing_stale(tiny_model_path, tiny_model_path_alt):
    eng = HFEngine.load(str(tiny_model_path), prefix_cache_tokens=4096)
    alt = HFEngine.load(str(tiny_model_path_alt))
    try:
        req = _request(eng, OPENING + PAGES[0])
        await eng.generate(req)
        assert eng.prefix_cache_stats["cached_tokens"] == len(req.input_ids)
        ok, msg = await eng.update_weights_from_disk(str(tiny_model_path_alt))
        assert ok, msg
        assert eng.prefix_cache_stats["cached_tokens"] == 0
        after, want = await eng.generate(req), await alt.generate(req)
        assert after.output_ids == want.output_ids  # computed by the new weights, prompt included
        assert after.output_logprobs == pytest.approx(want.output_logprobs, abs=1e-4)
        hits = eng.prefix_cache_stats["hits"]
        assert eng.flush_cache()
        await eng.generate(req)
        assert eng.prefix_cache_stats["hits"] == hits  # flushed: a miss, not a hit on the old entry
    finally:
        await eng.shutdown()
        await alt.shutdown()


def test_served_engine_reports_its_prefix_cache(tiny_model_path):
    engine = HFEngine.load(str(tiny_model_path), prefix_cache_tokens=2048)
    with serve_in_thread(create_app(engine)) as url:
        body = {"text": OPENING + PAGES[1], "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
        for _ in range(2):
            assert httpx.post(f"{url}/generate", json=body, timeout=120).status_code == 200
        info = httpx.get(f"{url}/get_server_info", timeout=30).json()
        assert info["prefix_cache"]["lookups"] == 2 and info["prefix_cache"]["hits"] == 1
    asyncio.run(engine.shutdown())
    plain = HFEngine.load(str(tiny_model_path))
    with serve_in_thread(create_app(plain)) as url:
        assert httpx.get(f"{url}/get_server_info", timeout=30).json()["prefix_cache"] is None
    asyncio.run(plain.shutdown())


def test_cli_flag_and_bad_sizes(tiny_model_path):
    assert parse_args(["--prefix-cache-tokens", "8192"]).prefix_cache_tokens == 8192
    assert parse_args([]).prefix_cache_tokens == 0
    with pytest.raises(ValueError, match="prefix_cache_tokens must be >= 0"):
        HFEngine.load(str(tiny_model_path), prefix_cache_tokens=-1)


def test_sliding_window_models_are_refused(tiny_model_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_path))
    model.config.layer_types = ["sliding_attention"] * model.config.num_hidden_layers
    tok = AutoTokenizer.from_pretrained(str(tiny_model_path))
    with pytest.raises(ValueError, match="sliding-window"):
        HFEngine(model, tok, str(tiny_model_path), str(tiny_model_path), "cpu", torch.float32, prefix_cache_tokens=64)


def test_the_chat_server_caches_by_default_and_a_sliding_window_model_goes_without(tiny_model_path, tmp_path, caplog):
    from openclaw.httpapi.config import ConfigError
    from openclaw.server.config import EngineConfig, parse_config
    from openclaw.server.engine_loader import load_engine

    assert parse_config([], env={}).engine.prefix_cache_tokens is None  # automatic
    assert parse_config(["--prefix-cache-tokens", "0"], env={}).engine.prefix_cache_tokens == 0
    with pytest.raises(ConfigError, match="--prefix-cache-tokens must be >= 0"):
        parse_config(["--prefix-cache-tokens", "-5"], env={})
    engine = load_engine(EngineConfig(model_path=str(tiny_model_path)))
    try:
        assert engine.prefix_cache_stats is not None and engine._prefix_cache.max_tokens == AUTO_PREFIX_CACHE_TOKENS
    finally:
        asyncio.run(engine.shutdown())
    sliding = tmp_path / "sliding"
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_path))
    model.config.layer_types = ["sliding_attention"] * model.config.num_hidden_layers
    model.config.sliding_window = 16
    model.save_pretrained(sliding)
    AutoTokenizer.from_pretrained(str(tiny_model_path)).save_pretrained(sliding)
    with caplog.at_level("WARNING", logger="openclaw.engines.hf_engine"):
        engine = HFEngine.load(str(sliding), prefix_cache_tokens=None)
    try:
        assert engine.prefix_cache_stats is None and "prefix cache off" in caplog.text
    finally:
        asyncio.run(engine.shutdown())
