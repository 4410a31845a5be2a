"""Serving throughput: the OpenAI server (embedded engine, real HTTP) vs raw `transformers`.

    python bench/serve_throughput.py [--max-tokens 64] [--rounds 2]

One process, same model (embedded SmolLM2-135M-Instruct, fp32 unless --dtype), same chat
prompts, greedy decoding:
  * concurrency 8: 8 concurrent /v1/chat/completions requests vs one batched (left-padded)
    `model.generate` over the same 8 prompts;
  * concurrency 1: the prompts one at a time vs single-sequence `model.generate`;
  * overhead: median latency of a 1-token completion through HTTP minus the median of
    `model.generate(max_new_tokens=1)` on the same prompt.
Tokens/s counts real completion tokens (up to and including EOS) on both sides. Server and
raw runs are interleaved round by round so background load hits both alike; the headline ratio
is the median of the per-round ratios, and a CPU-time ratio (tokens per process CPU second) is
printed too because it is insensitive to other processes. The ratios are printed last. Results go to bench/results/serve_throughput.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import torch

PROMPTS = [
    "Write a long story about a dragon who learns to paint.",
    "Explain in detail how a car engine works.",
    "Describe the ocean and the creatures that live in it.",
    "Tell me about the history of the Roman Empire.",
    "Write a poem about autumn leaves falling in a quiet park.",
    "Explain how computers store and retrieve data.",
    "Describe your ideal vacation, day by day.",
    "What makes a good friend? Give many examples.",
]
TARGET_C8 = 0.85
TARGET_C1 = 0.90


@dataclass
class Run:
    tokens: int
    seconds: float
    cpu_seconds: float = 0.0  # process CPU time (all threads) spent in this phase

    @property
    def tps(self) -> float:
        return self.tokens / self.seconds


def _count_until_eos(row: list[int], eos: set[int]) -> int:
    for i, t in enumerate(row):
        if t in eos:
            return i + 1
    return len(row)


class Raw:
    """Plain transformers generation on the same weights (a separate copy of the model)."""

    def __init__(self, path: str, dtype: torch.dtype, tokenizer, eos: set[int]) -> None:
        from transformers import AutoModelForCausalLM

        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
        self.tok = tokenizer
        self.eos = eos
        self.pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(eos)

    @torch.inference_mode()
    def batched(self, prompts: list[list[int]], max_new: int) -> Run:
        width = max(len(p) for p in prompts)
        ids = torch.tensor([[self.pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
        start = time.perf_counter()
        out = self.model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=max_new, do_sample=False,
                                  pad_token_id=self.pad, eos_token_id=sorted(self.eos))
        secs = time.perf_counter() - start
        return Run(sum(_count_until_eos(row, self.eos) for row in out[:, width:].tolist()), secs)

    @torch.inference_mode()
    def single(self, prompt: list[int], max_new: int) -> Run:
        start = time.perf_counter()
        out = self.model.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                                  max_new_tokens=max_new, do_sample=False, pad_token_id=self.pad,
                                  eos_token_id=sorted(self.eos))
        secs = time.perf_counter() - start
        return Run(_count_until_eos(out[0, len(prompt):].tolist(), self.eos), secs)


async def _chat(client: httpx.AsyncClient, model: str, prompt: str, max_tokens: int) -> int:
    resp = await client.post("/v1/chat/completions", json={
        "model": model, "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": max_tokens})
    resp.raise_for_status()
    return int(resp.json()["usage"]["completion_tokens"])


async def server_concurrent(client, model: str, prompts: list[str], max_tokens: int) -> Run:
    start = time.perf_counter()
    counts = await asyncio.gather(*(_chat(client, model, p, max_tokens) for p in prompts))
    return Run(sum(counts), time.perf_counter() - start)


async def server_sequential(client, model: str, prompts: list[str], max_tokens: int) -> Run:
    total, secs = 0, 0.0
    for p in prompts:
        start = time.perf_counter()
        total += await _chat(client, model, p, max_tokens)
        secs += time.perf_counter() - start
    return Run(total, secs)


def _build_app(engine):
    """The real OpenAI server app (openclaw.server) around our engine."""
    from openclaw.server.app import create_app
    from openclaw.server.config import ServerConfig

    return create_app(ServerConfig(), engine=engine)


def _sum(runs: list[Run]) -> Run:
    return Run(sum(r.tokens for r in runs), sum(r.seconds for r in runs), sum(r.cpu_seconds for r in runs))


class _Cpu:
    """Process CPU time of a phase: robust to other processes competing for the cores (wall
    time is not), so it shows the engine's own overhead even on a loaded machine."""

    def __enter__(self) -> _Cpu:
        self.start = time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.seconds = time.process_time() - self.start


def _timed(run_and_cpu: tuple[Run, _Cpu]) -> Run:
    run, cpu = run_and_cpu
    run.cpu_seconds = cpu.seconds
    return run


async def main_async(args: argparse.Namespace) -> int:
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.engines.serve import serve_in_thread

    engine = HFEngine.load(args.model_path, dtype=args.dtype, device="cpu", max_batch_size=16)
    tok = engine.tokenizer
    eos = set(engine.eos_token_ids)
    raw = Raw(engine.model_path, engine.dtype, tok, eos)
    chat_ids = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                        tokenize=True, return_dict=False) for p in PROMPTS]
    c1_prompts = PROMPTS[: args.c1_prompts]
    load_before = os.getloadavg()
    app = _build_app(engine)
    model_name = app.state.openclaw.served_model_name
    results: dict[str, list[Run]] = {"server_c8": [], "raw_c8": [], "server_c1": [], "raw_c1": []}
    with serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=600) as client:
            # Warm-up (first-call allocations, tokenizer caches) on both sides.
            await _chat(client, model_name, PROMPTS[0], 4)
            raw.single(chat_ids[0], 4)
            for rnd in range(args.rounds):
                with _Cpu() as cpu:
                    run = await server_concurrent(client, model_name, PROMPTS, args.max_tokens)
                results["server_c8"].append(_timed((run, cpu)))
                with _Cpu() as cpu:
                    run = raw.batched(chat_ids, args.max_tokens)
                results["raw_c8"].append(_timed((run, cpu)))
                with _Cpu() as cpu:
                    run = await server_sequential(client, model_name, c1_prompts, args.max_tokens)
                results["server_c1"].append(_timed((run, cpu)))
                with _Cpu() as cpu:
                    run = _sum([raw.single(chat_ids[i], args.max_tokens) for i in range(len(c1_prompts))])
                results["raw_c1"].append(_timed((run, cpu)))
                print(f"round {rnd + 1}: " + "  ".join(f"{k}={v[-1].tps:.1f} tok/s" for k, v in results.items()),
                      flush=True)
            server_lat, raw_lat = [], []
            for _ in range(args.overhead_samples):
                start = time.perf_counter()
                await _chat(client, model_name, PROMPTS[1], 1)
                server_lat.append(time.perf_counter() - start)
                raw_lat.append(raw.single(chat_ids[1], 1).seconds)
    load_after = os.getloadavg()
    totals = {k: _sum(v) for k, v in results.items()}

    def ratios(kind: str) -> tuple[float, float, float]:
        """(median per-round wall ratio, total wall ratio, CPU-time ratio) server/raw."""
        per_round = [s.tps / r.tps for s, r in zip(results[f"server_{kind}"], results[f"raw_{kind}"], strict=True)]
        srv, raw_ = totals[f"server_{kind}"], totals[f"raw_{kind}"]
        cpu = (raw_.cpu_seconds / raw_.tokens) / (srv.cpu_seconds / srv.tokens)
        return statistics.median(per_round), srv.tps / raw_.tps, cpu

    r8, r8_total, r8_cpu = ratios("c8")
    r1, r1_total, r1_cpu = ratios("c1")
    s_med, r_med = statistics.median(server_lat), statistics.median(raw_lat)
    overhead_ms = (s_med - r_med) * 1000
    lines = [
        f"model: {engine.model_path} ({args.dtype}), max_tokens={args.max_tokens}, rounds={args.rounds}, "
        f"torch threads={torch.get_num_threads()}, cpus={os.cpu_count()}",
        f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f} (other processes share the CPUs)",
        f"concurrency 8: server {totals['server_c8'].tps:.1f} tok/s ({totals['server_c8'].tokens} tok) | "
        f"raw batched generate {totals['raw_c8'].tps:.1f} tok/s ({totals['raw_c8'].tokens} tok)",
        f"concurrency 1: server {totals['server_c1'].tps:.1f} tok/s ({totals['server_c1'].tokens} tok) | "
        f"raw single generate {totals['raw_c1'].tps:.1f} tok/s ({totals['raw_c1'].tokens} tok)",
        f"1-token completion: server median {s_med * 1000:.1f} ms, raw generate median {r_med * 1000:.1f} ms, "
        f"median server overhead {overhead_ms:.1f} ms",
        f"server/raw over all rounds (wall): concurrency 8 {r8_total:.3f}, concurrency 1 {r1_total:.3f}",
        f"server/raw per CPU-second (tokens per process CPU second, insensitive to other load): "
        f"concurrency 8 {r8_cpu:.3f}, concurrency 1 {r1_cpu:.3f}",
    ]
    for line in lines:
        print(line)
    ratio_line = (f"RATIO (median per round, wall clock) concurrency8 server/raw = {r8:.3f} (target >= {TARGET_C8}) | "
                  f"concurrency1 server/raw = {r1:.3f} (target >= {TARGET_C1})")
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = "python bench/serve_throughput.py " + " ".join(sys.argv[1:])
        per_round = "\n".join(
            f"| {i + 1} | " + " | ".join(f"{results[k][i].tps:.1f}" for k in results) + " |" for i in range(args.rounds))
        out.write_text(
            "# serve_throughput\n\n"
            f"Command: `{cmd.strip()}`\n\n"
            f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
            f"{torch.get_num_threads()} torch threads. Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n\n"
            + "\n".join(f"- {line}" for line in lines)
            + f"\n- **{ratio_line}**\n\n"
            "Per round (tok/s):\n\n| round | server c8 | raw c8 | server c1 | raw c1 |\n|---|---|---|---|---|\n"
            + per_round + "\n")
    print(ratio_line)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-path", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--c1-prompts", type=int, default=4, help="prompts run one at a time per round")
    p.add_argument("--overhead-samples", type=int, default=15)
    p.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's choice)")
    p.add_argument("--out", default="bench/results/serve_throughput.md")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
