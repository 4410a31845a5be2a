"""A GUI-RL-shaped rollout through the embedded engine, SmolLM2-135M on CPU, fp32: with the prefix
cache (`--prefix-cache-tokens`) against full prefills (the default), both engines in one process.

The requests are what one gui-rl rollout sends: 8 prompts x 8 samples (a GRPO group each), every
prompt a 280-token opening shared by all (instructions and worked examples) followed by a
~110-token page, 4 requests in flight at a time (PARALLEL_ENVS=4), temperature 1 with a seed per
sample, 12 new tokens (an action). The two engines get the same requests in the same order, one
rollout after the other, and alternate over N repetitions (median, after a warm-up each). Also
reported: how many sampled tokens came out the same (the cached prefill's logits differ from the
full prefill's in the last bits, so a near-tie can sample differently) and the largest log-prob
difference on those.

    python bench/prefix_cache.py [--reps 3] [--groups 8] [--model-path PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from openclaw.engines.base import GenerationRequest, GenerationResult, SamplingParams  # noqa: E402
from openclaw.engines.hf_engine import HFEngine  # noqa: E402

GROUPS, PER_GROUP, OPENING, PAGE, IN_FLIGHT, NEW_TOKENS = 8, 8, 280, 110, 4, 12


def rollout_requests(vocab: int, seed: int, groups: int = GROUPS) -> list[GenerationRequest]:
    rnd = random.Random(seed)
    opening = [rnd.randrange(100, vocab - 1) for _ in range(OPENING)]
    requests = []
    for g in range(groups):
        prompt = tuple(opening + [rnd.randrange(100, vocab - 1) for _ in range(PAGE + 3 * g)])
        for i in range(PER_GROUP):
            params = SamplingParams(max_new_tokens=NEW_TOKENS, temperature=1.0, seed=seed * 1000 + g * 10 + i,
                                    ignore_eos=True)
            requests.append(GenerationRequest(prompt, params, return_logprob=True))
    return requests


async def run_rollout(engine: HFEngine, requests: list[GenerationRequest]) -> tuple[float, list[GenerationResult]]:
    engine.flush_cache()  # a rollout starts after a weight push, which empties the cache
    gate = asyncio.Semaphore(IN_FLIGHT)

    async def one(req: GenerationRequest) -> GenerationResult:
        async with gate:
            return await engine.generate(req)

    start = time.perf_counter()
    results = await asyncio.gather(*(one(r) for r in requests))
    return time.perf_counter() - start, results


async def main(reps: int, groups: int = GROUPS, model_path: str | None = None) -> None:
    cached = HFEngine.load(model_path, prefix_cache_tokens=8192)
    plain = HFEngine.load(model_path)
    vocab = int(plain.tokenizer.vocab_size)
    model = "SmolLM2-135M" if model_path is None else Path(model_path).name
    print(f"{model} fp32, torch threads {__import__('torch').get_num_threads()}, {platform.processor() or 'cpu'}, "
          f"load {os.getloadavg()[0]:.2f}; {groups} prompts x {PER_GROUP} samples, {IN_FLIGHT} in flight", flush=True)
    warm = rollout_requests(vocab, seed=99)[:IN_FLIGHT]
    await run_rollout(cached, warm)
    await run_rollout(plain, warm)
    times: dict[str, list[float]] = {"prefix cache": [], "full prefill": []}
    same = total = 0
    worst = 0.0
    for rep in range(reps):
        requests = rollout_requests(vocab, seed=rep, groups=groups)
        t_cached, with_cache = await run_rollout(cached, requests)
        t_plain, without = await run_rollout(plain, requests)
        times["prefix cache"].append(t_cached)
        times["full prefill"].append(t_plain)
        for a, b in zip(with_cache, without, strict=True):
            total += 1
            if a.output_ids == b.output_ids:
                same += 1
                worst = max([worst, *(abs(x - y) for x, y in zip(a.output_logprobs, b.output_logprobs, strict=True))])
        print(f"rep {rep + 1}/{reps}: prefix cache {t_cached:.2f} s, full prefill {t_plain:.2f} s", flush=True)
    stats = cached.prefix_cache_stats
    print(f"prompt tokens whose forward the cache skipped: {stats['reused_fraction']:.1%} "
          f"({stats['hits']} hits in {stats['lookups']} lookups)")
    print(f"same samples: {same}/{total}; largest log-prob difference on those: {worst:.2e}")
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"median rollout ({groups * PER_GROUP} requests): prefix cache {med['prefix cache']:.2f} s, "
          f"full prefill {med['full prefill']:.2f} s, load {os.getloadavg()[0]:.2f}")
    await cached.shutdown()
    await plain.shutdown()
    print(f"prefix cache / full prefill = {med['prefix cache'] / med['full prefill']:.3f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--groups", type=int, default=GROUPS, help="prompts per rollout (GRPO groups of 8)")
    parser.add_argument("--model-path", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    a = parser.parse_args()
    asyncio.run(main(a.reps, a.groups, a.model_path))
