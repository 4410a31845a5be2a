"""The cost of serving every user their own LoRA adapter: 8 users' adapters in one batch vs the base alone.

    python bench/multi_user_serving.py [--users 8] [--max-tokens 64] [--rounds 3] [--rank 16]

One process, one server (the embedded SmolLM2-135M-Instruct, fp32, real HTTP, a key file of
`--users` users and an admin). Each round runs two phases in alternating order, each `--users`
concurrent /v1/chat/completions (one per user, greedy):
  * base: no adapter loaded, every user gets the served model;
  * adapters: each user has an adapter of their own loaded under their id (rank `--rank` on every
    linear layer, what the trainer trains), so the batch mixes `--users` adapters row by row.
Adapters are loaded and unloaded between phases, untimed. Tokens/s counts the completion tokens
the server reports. Memory per extra user: the engine's adapter bytes over the users, and the
process's resident memory before loading them and after serving them. The ratio (median per round) is printed
last.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from serve_throughput import PROMPTS  # the same chats as the other serving benches

TARGET = 0.7
ADMIN_KEY = "bench-admin-key-0123456789"


def _key(user: str) -> str:
    return f"bench-key-{user}-0123456789"


def make_adapters(base: str, out: Path, users: list[str], rank: int) -> dict[str, Path]:
    """A random adapter per user, each on every linear layer (seeded: the same each run)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    paths = {}
    for i, user in enumerate(users):
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
        torch.manual_seed(i)
        lora = get_peft_model(model, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules="all-linear",
                                                init_lora_weights=False))
        with torch.no_grad():  # PEFT's random B is large; trained adapters move the model a little
            for name, p in lora.named_parameters():
                if "lora_B" in name:
                    p.mul_(0.01)
        paths[user] = out / user
        lora.save_pretrained(paths[user])
    return paths


async def phase(url: str, users: list[str], max_tokens: int) -> tuple[int, float]:
    """Every user's chat at once: (completion tokens, seconds)."""
    async def one(client: httpx.AsyncClient, i: int, user: str) -> int:
        r = await client.post("/v1/chat/completions", headers={"Authorization": f"Bearer {_key(user)}"},
                              json={"model": "m", "messages": [{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
                                    "max_tokens": max_tokens, "temperature": 0.0})
        r.raise_for_status()
        return int(r.json()["usage"]["completion_tokens"])

    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        start = time.perf_counter()
        tokens = await asyncio.gather(*(one(client, i, u) for i, u in enumerate(users)))
        return sum(tokens), time.perf_counter() - start


async def admin(url: str, path: str, body: dict) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        r = await client.post(path, json=body, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        if r.status_code != 200:
            raise RuntimeError(f"{path} {body}: {r.status_code} {r.text}")


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def main_async(args: argparse.Namespace) -> int:
    import torch

    from openclaw.engines.hf_engine import HFEngine
    from openclaw.engines.serve import serve_in_thread
    from openclaw.models import resolve_model_path
    from openclaw.server.app import create_app
    from openclaw.server.config import ServerConfig

    torch.set_num_threads(args.threads)
    base = str(resolve_model_path(args.model_path))
    users = [f"user{i}" for i in range(args.users)]
    work = Path(tempfile.mkdtemp(prefix="multi-user-bench-"))
    print(f"making {len(users)} rank-{args.rank} adapters in {work}", flush=True)
    adapters = make_adapters(base, work, users, args.rank)
    keys = work / "keys.json"
    keys.write_text(json.dumps({"users": {u: {"key": _key(u)} for u in users},
                                "admins": {"bench": {"key": ADMIN_KEY}}}))
    engine = HFEngine.load(base, max_batch_size=max(8, len(users)), prefix_cache_tokens=0)
    app = create_app(ServerConfig(api_keys_file=keys), engine=engine)
    load_before = os.getloadavg()
    rates: dict[str, list[float]] = {"base": [], "adapters": []}
    rss: list[tuple[float, float]] = []
    held: list[int] = []  # adapter bytes the engine holds while serving them
    with serve_in_thread(app) as url:
        await phase(url, users[:1], 4)  # warm-up

        async def run_phase(kind: str) -> None:
            if kind == "adapters":
                before = _rss_mb()
                for u in users:
                    await admin(url, "/load_lora_adapter", {"lora_name": u, "lora_path": str(adapters[u])})
            tokens, secs = await phase(url, users, args.max_tokens)
            rates[kind].append(tokens / secs)
            if kind == "adapters":
                rss.append((before, _rss_mb()))
                held.append(engine.lora_adapter_bytes)
                for u in users:
                    await admin(url, "/unload_lora_adapter", {"lora_name": u})

        for rnd in range(args.rounds):
            order = ("base", "adapters") if rnd % 2 == 0 else ("adapters", "base")
            for kind in order:
                await run_phase(kind)
            print(f"round {rnd + 1}: base {rates['base'][-1]:.1f} tok/s, {len(users)} adapters "
                  f"{rates['adapters'][-1]:.1f} tok/s", flush=True)
    await engine.shutdown()
    load_after = os.getloadavg()
    ratio = statistics.median(a / b for a, b in zip(rates["adapters"], rates["base"], strict=True))
    rss_per_user = statistics.median((after - before) / len(users) for before, after in rss)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"model {base}, threads {args.threads}, max_tokens {args.max_tokens}, rank {args.rank}, rounds {args.rounds}, "
          f"cpus {os.cpu_count()}, load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print(f"memory per extra user while served: {statistics.median(held) / len(users) / 2**20:.1f} MB held by the "
          f"engine (its adapter and its block of the batch's concatenation), {rss_per_user:.1f} MB more resident "
          f"(median over rounds); peak resident {peak:.0f} MB")
    print(f"median tok/s: base {statistics.median(rates['base']):.1f}, {len(users)} adapters "
          f"{statistics.median(rates['adapters']):.1f} (target >= {TARGET})")
    print(f"RATIO (median per round) {len(users)} users' adapters / base at concurrency {len(users)} = {ratio:.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-path", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--users", type=int, default=8, help="users, each with an adapter; also the concurrency")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rank", type=int, default=16, help="adapter rank (the trainer's default LoRA rank)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads")
    args = p.parse_args(argv)
    if args.users < 1 or args.rounds < 1 or args.max_tokens < 1 or args.rank < 1:
        p.error("--users, --rounds, --max-tokens and --rank must be positive")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
