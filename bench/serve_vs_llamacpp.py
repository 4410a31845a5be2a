"""Serving throughput on llama.cpp: the OpenAI server (LlamaCppEngine, real HTTP) vs raw llama.cpp.

    python bench/serve_vs_llamacpp.py [--max-tokens 64] [--rounds 3] [--threads 2]

One process, the same GGUF (the embedded SmolLM2-135M-Instruct Q4_1 file unless --gguf), the same
chat prompts, greedy decoding, the same llama.cpp thread count on both sides:
  * concurrency 8: 8 concurrent /v1/chat/completions requests vs a raw multi-sequence greedy loop
    (one `llama_decode` per step over the 8 sequences, argmax in numpy: what llama.cpp itself can do
    with these prompts, with no server, scheduler or sampler of ours);
  * concurrency 1: the prompts one at a time vs `llama_cpp.Llama.generate` (llama.cpp's own API).
Tokens/s counts completion tokens up to and including EOS on both sides. Server and raw runs are
interleaved round by round so background load hits both alike; the headline ratios are medians of
the per-round ratios, printed LAST. With --logprob-replies N it also reports the mean |delta log p|
per token between the engine's recorded log-probs and the fp32 HF model's (teacher-forced) on N
sampled replies: how far the served 4-bit model is from the one the trainer holds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

import httpx
import numpy as np

# A script's own folder is first on sys.path: the server-side helpers are serve_throughput's.
from serve_throughput import (
    PROMPTS,
    Run,
    _build_app,
    _chat,
    _Cpu,
    _sum,
    _timed,
    server_concurrent,
    server_sequential,
)


def _count_until_eos(row: list[int], eos: frozenset[int]) -> int:
    for i, t in enumerate(row):
        if t in eos:
            return i + 1
    return len(row)


class RawLlamaCpp:
    """llama.cpp on the same GGUF with nothing of ours on top (its own context, same threads)."""

    def __init__(self, gguf: str, threads: int, slots: int, eos: frozenset[int]) -> None:
        from llama_cpp import Llama

        from openclaw.engines.llamacpp_runtime import LlamaRuntime, RuntimeConfig

        self.eos = eos
        # Flash attention on, as in the engine (RuntimeConfig.flash_attn): the same kernels on both sides.
        self.llm = Llama(model_path=gguf, n_ctx=2048, n_threads=threads, n_threads_batch=threads, verbose=False,
                         flash_attn=True)
        self.rt = LlamaRuntime(gguf, RuntimeConfig(slots=slots, ctx_per_slot=1024, threads=threads))

    def single(self, prompt: list[int], max_new: int) -> Run:
        start = time.perf_counter()
        out: list[int] = []
        for tok in self.llm.generate(prompt, temp=0.0, reset=True):
            out.append(int(tok))
            if tok in self.eos or len(out) >= max_new:
                break
        return Run(len(out), time.perf_counter() - start)

    def batched(self, prompts: list[list[int]], max_new: int) -> Run:
        """Greedy over all prompts at once: one prefill decode, then one decode per step."""
        from openclaw.engines.llamacpp_runtime import BatchEntry

        start = time.perf_counter()
        entries = [BatchEntry(t, pos, seq, pos == len(p) - 1) for seq, p in enumerate(prompts) for pos, t in enumerate(p)]
        logits = self.rt.decode(entries)
        outs: list[list[int]] = [[int(t)] for t in logits.argmax(-1)]
        live = [s for s in range(len(prompts)) if outs[s][-1] not in self.eos]
        while live and len(outs[live[0]]) < max_new:
            logits = self.rt.decode([BatchEntry(outs[s][-1], len(prompts[s]) + len(outs[s]) - 1, s, True) for s in live])
            for s, t in zip(live, logits.argmax(-1), strict=True):
                outs[s].append(int(t))
            live = [s for s in live if outs[s][-1] not in self.eos]
        secs = time.perf_counter() - start
        for s in range(len(prompts)):
            self.rt.free_seq(s)
        return Run(sum(_count_until_eos(o, self.eos) for o in outs), secs)

    def close(self) -> None:
        self.llm.close()
        self.rt.close()


async def logprob_delta(engine, hf_folder: str, prompts: list[str], max_tokens: int) -> tuple[float, float, int]:
    """(mean |delta log p|, max, tokens): engine log-probs at temperature 1 vs fp32 HF teacher forcing."""
    import torch
    from transformers import AutoModelForCausalLM

    from openclaw.engines.base import GenerationRequest, SamplingParams

    tok = engine.tokenizer
    model = AutoModelForCausalLM.from_pretrained(hf_folder, dtype=torch.float32).eval()
    deltas: list[float] = []
    for i, text in enumerate(prompts):
        ids = tuple(tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                            tokenize=True, return_dict=False))
        res = await engine.generate(GenerationRequest(ids, SamplingParams(max_new_tokens=max_tokens, temperature=1.0,
                                                                          seed=i), return_logprob=True))
        full = torch.tensor([list(ids) + list(res.output_ids)])
        with torch.inference_mode():
            logp = torch.log_softmax(model(input_ids=full).logits[0].float(), dim=-1)
        ref = [float(logp[len(ids) - 1 + j, t]) for j, t in enumerate(res.output_ids)]
        deltas.extend(abs(a - b) for a, b in zip(ref, res.output_logprobs, strict=True))
    return float(np.mean(deltas)), float(np.max(deltas)), len(deltas)


def _cpu_ratio(server: Run, raw: Run) -> float:
    """Tokens per process CPU second, server over raw: less sensitive than wall time to other
    processes on the cores (llama.cpp's threads spin while they wait, so not immune)."""
    return (raw.cpu_seconds / raw.tokens) / (server.cpu_seconds / server.tokens)


async def main_async(args: argparse.Namespace) -> int:
    from openclaw.engines.llamacpp_engine import LlamaCppEngine
    from openclaw.engines.serve import serve_in_thread

    engine = LlamaCppEngine.load(args.gguf, max_batch_size=len(PROMPTS), ctx_per_slot=1024, threads=args.threads)
    tok = engine.tokenizer
    raw = RawLlamaCpp(engine.gguf_path, args.threads, len(PROMPTS), engine.eos_token_ids)
    chat_ids = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                        tokenize=True, return_dict=False) for p in PROMPTS]
    c1 = PROMPTS[: args.c1_prompts]
    load_before = os.getloadavg()
    app = _build_app(engine)
    name = app.state.openclaw.served_model_name
    results: dict[str, list[Run]] = {"server_c8": [], "raw_c8": [], "server_c1": [], "raw_c1": []}
    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=600) as client:
            await _chat(client, name, PROMPTS[0], 4)
            raw.single(chat_ids[0], 4)
            for rnd in range(args.rounds):
                with _Cpu() as cpu:
                    run = await server_concurrent(client, name, PROMPTS, args.max_tokens)
                results["server_c8"].append(_timed((run, cpu)))
                with _Cpu() as cpu:
                    run = raw.batched(chat_ids, args.max_tokens)
                results["raw_c8"].append(_timed((run, cpu)))
                with _Cpu() as cpu:
                    run = await server_sequential(client, name, c1, args.max_tokens)
                results["server_c1"].append(_timed((run, cpu)))
                with _Cpu() as cpu:
                    run = _sum([raw.single(chat_ids[i], args.max_tokens) for i in range(len(c1))])
                results["raw_c1"].append(_timed((run, cpu)))
                print(f"round {rnd + 1}: " + "  ".join(f"{k}={v[-1].tps:.1f} tok/s" for k, v in results.items()),
                      flush=True)
        if args.logprob_replies:
            mean, worst, n = await logprob_delta(engine, engine.base_model_path, PROMPTS[: args.logprob_replies],
                                                 args.max_tokens)
            print(f"log-prob mismatch vs fp32 HF (teacher-forced, temperature 1, {args.logprob_replies} replies, "
                  f"{n} tokens): mean |delta log p| {mean:.4f}, max {worst:.4f}")
    raw.close()
    load_after = os.getloadavg()
    totals = {k: _sum(v) for k, v in results.items()}

    def ratio(kind: str) -> float:
        return statistics.median(s.tps / r.tps for s, r in zip(results[f"server_{kind}"], results[f"raw_{kind}"],
                                                                strict=True))

    print(f"gguf: {engine.gguf_path}, threads={args.threads}, max_tokens={args.max_tokens}, rounds={args.rounds}, "
          f"cpus={os.cpu_count()}, load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    for kind, what in (("c8", "raw multi-sequence llama_decode"), ("c1", "raw Llama.generate")):
        s, r = totals[f"server_{kind}"], totals[f"raw_{kind}"]
        print(f"concurrency {kind[1:]}: server {s.tps:.1f} tok/s ({s.tokens} tok) | {what} {r.tps:.1f} tok/s "
              f"({r.tokens} tok) | server/raw per process CPU second {_cpu_ratio(s, r):.3f}")
    print(f"RATIO (median per round, wall clock) server/llama.cpp concurrency8 = {ratio('c8'):.3f} | "
          f"concurrency1 = {ratio('c1'):.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gguf", default=None, help="default: the embedded SmolLM2-135M-Instruct Q4_1 GGUF")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--c1-prompts", type=int, default=4, help="prompts run one at a time per round")
    p.add_argument("--threads", type=int, default=None,
                   help="llama.cpp threads, both sides (default: the engine's, all cores but one)")
    p.add_argument("--logprob-replies", type=int, default=8, help="replies for the log-prob mismatch (0: skip)")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.threads is None:
        from openclaw.engines.llamacpp_runtime import default_threads

        args.threads = default_threads()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
