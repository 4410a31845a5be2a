"""RL intercept overhead: the same server with the intercept on vs off.

    python bench/intercept_overhead.py [--history-tokens 8000] [--e2e-requests 16] [--records 1500]

Two measurements, both with ~8k-token histories and 1-token completions:

  A. End to end over HTTP: one engine (the tiny model, its position limit raised to fit 8k
     tokens), two apps on it — intercept off and on — at concurrency 1 and 32. Added latency =
     p50/p99 of (on) minus (off). On 2 cores the 8k-token prefill dominates and its jitter is
     larger than the intercept, so B is the precise number.
  B. The intercept alone, as the server calls it: `await observer.on_turn(turn)` (redaction,
     session identification, next-state pairing, durable group commit with synchronous=FULL)
     with real 8k-token CompletedTurns from 32 (or 1) concurrent sessions. That await is
     exactly what the server adds before it delivers a response. Also the sustained main-turn
     records/s.

Results are printed and written to bench/results/intercept_overhead.md (or --out); the last printed
line is the headline: B's p50 added latency and records/s against their targets, and A's on/off p50.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from openclaw.buffer import TrajectoryBuffer
from openclaw.intercept import InterceptConfig, build_observer
from openclaw.server.hooks import CompletedTurn, RLControl

WORDS = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river mountain cloud "
         "stone forest paper window garden engine signal vector matrix kernel socket thread buffer "
         "record session turn judge trainer policy reward value gradient batch token model").split()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def make_history(tok: Any, target_tokens: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    msgs: list[dict[str, str]] = [{"role": "system", "content": f"You are assistant #{seed}."}]
    total = 0
    while total < target_tokens:
        text = " ".join(rng.choice(WORDS) for _ in range(200))
        msgs.append({"role": "user" if len(msgs) % 2 else "assistant", "content": text})
        total += len(tok(text, add_special_tokens=False)["input_ids"]) + 4
    if msgs[-1]["role"] != "user":
        msgs.append({"role": "user", "content": "continue"})
    return msgs


# ----------------------------------------------------------------------------- A: end to end
async def e2e_run(base: str, histories: list[list[dict]], concurrency: int, n: int) -> list[float]:
    lat: list[float] = []
    sem = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=base, timeout=600, limits=httpx.Limits(max_connections=64)) as c:
        async def one(i: int) -> None:
            async with sem:
                msgs = histories[i % len(histories)] + [{"role": "user", "content": f"question {i}"}]
                t = time.perf_counter()
                r = await c.post("/v1/chat/completions", json={"model": "m", "messages": msgs, "max_tokens": 1,
                                                               "temperature": 0})
                lat.append(time.perf_counter() - t)
                assert r.status_code == 200, r.text

        await asyncio.gather(*(one(i) for i in range(n)))
    return lat


def bench_e2e(model: Path, tok: Any, hist_tokens: int, n: int, workdir: Path) -> dict[str, Any]:
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    engine = HFEngine.load(str(model), dtype="float32", device="cpu", max_batch_size=8)
    histories = [make_history(tok, hist_tokens, seed) for seed in range(32)]
    out: dict[str, Any] = {}
    try:
        off = create_app(ServerConfig(), engine=engine)
        rl = RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=workdir / "e2e_buf"))
        on = create_app(ServerConfig(rl=rl), engine=engine)
        with serve_in_background(off) as s_off, serve_in_background(on) as s_on:
            asyncio.run(e2e_run(s_off.base_url, histories, 4, 8))  # warm-up
            asyncio.run(e2e_run(s_on.base_url, histories, 4, 8))
            for conc in (1, 32):
                k = n if conc == 1 else 2 * n
                # interleave off/on rounds so machine-load drift hits both alike
                lat_off: list[float] = []
                lat_on: list[float] = []
                for _ in range(2):
                    lat_off += asyncio.run(e2e_run(s_off.base_url, histories, conc, k // 2))
                    lat_on += asyncio.run(e2e_run(s_on.base_url, histories, conc, k // 2))
                out[conc] = {"n": len(lat_on), "off_p50": pct(lat_off, 50), "off_p99": pct(lat_off, 99),
                             "on_p50": pct(lat_on, 50), "on_p99": pct(lat_on, 99)}
        with TrajectoryBuffer.open(workdir / "e2e_buf") as b:
            out["records"] = b.stats()["turns"]
            out["verify"] = b.verify()
    finally:
        asyncio.run(engine.shutdown())
    return out


# ----------------------------------------------------------------------------- B: the intercept
def make_turns(tok: Any, hist_tokens: int, sessions: int, turns_per_session: int) -> list[list[CompletedTurn]]:
    """Per session, a growing conversation as a real client sends it: each turn's messages =
    previous messages + reply + a new user message, and its prompt ids = the previous prompt
    ids + the reply's ids + the new message's ids (what a chat template produces)."""
    rng = random.Random(0)
    out = []
    for s in range(sessions):
        msgs = make_history(tok, hist_tokens, 1000 + s)
        enc = tok.apply_chat_template(msgs, tokenize=True, add_generation_prompt=True)
        prompt = [int(x) for x in (enc["input_ids"] if hasattr(enc, "keys") else enc)]
        seq = []
        for t in range(turns_per_session):
            reply = f"reply {s}.{t}"
            out_id = rng.randrange(49152)
            now = time.time()
            seq.append(CompletedTurn(
                request_id=f"req-{s}-{t}", control=RLControl(), messages=list(msgs), tools=None, served_model="tiny",
                prompt_ids=list(prompt), output_ids=[out_id], output_logprobs=[-rng.random()], text=reply,
                content=reply, tool_calls=None, finish_reason="length", weight_version=0, created_at=now,
                finished_at=now,
            ))
            user = f"next {s}.{t}"
            msgs = msgs + [{"role": "assistant", "content": reply}, {"role": "user", "content": user}]
            prompt = prompt + [out_id] + [rng.randrange(49152) for _ in range(12)]
        out.append(seq)
    return out


async def drive(observer: Any, sessions: list[list[CompletedTurn]], concurrency: int) -> tuple[list[float], float]:
    """`concurrency` sessions at a time, each sending its turns one after another (a turn
    only follows the previous turn's response, as a real client does)."""
    lat: list[float] = []
    queue = list(range(len(sessions)))

    async def client() -> None:
        while queue:
            seq = sessions[queue.pop()]
            for turn in seq:
                t = time.perf_counter()
                await observer.on_turn(turn)
                lat.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    return lat, time.perf_counter() - t0


def bench_observer(tok: Any, hist_tokens: int, records: int, workdir: Path, durability: str = "full") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for conc in (1, 32):
        n_sessions = conc * 2 if conc > 1 else 4
        per = max(2, (records if conc > 1 else records // 4) // n_sessions)
        sessions = make_turns(tok, hist_tokens, n_sessions, per)
        d = workdir / f"obs_buf_c{conc}"
        observer = build_observer(InterceptConfig(buffer_dir=d, durability=durability))

        async def run(observer: Any = observer, sessions: list = sessions, conc: int = conc) -> tuple[list[float], float]:
            try:
                return await drive(observer, sessions, conc)
            finally:
                await observer.aclose()

        cpu0 = time.process_time()
        lat, wall = asyncio.run(run())
        cpu = time.process_time() - cpu0
        with TrajectoryBuffer.open(d) as b:
            st = b.stats()
            problems = b.verify()
        out[conc] = {"n": len(lat), "p50": pct(lat, 50), "p99": pct(lat, 99), "records_per_s": len(lat) / wall,
                     "stored": st["turns"], "sessions": st["sessions"], "ready": st["by_state"]["ready"],
                     "mb": st["file_bytes"] / 1e6, "verify": problems,
                     "prompt_tokens": len(sessions[0][0].prompt_ids), "cpu_ms_per_record": cpu / len(lat) * 1000}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--history-tokens", type=int, default=8000)
    ap.add_argument("--e2e-requests", type=int, default=16, help="requests per arm at concurrency 1 (x2 at 32)")
    ap.add_argument("--records", type=int, default=1500, help="records for the observer throughput run")
    ap.add_argument("--skip-e2e", action="store_true")
    ap.add_argument("--durability", choices=("full", "normal"), default="full",
                    help="full: fsync per group commit (default); normal: crash-safe, not power-loss-safe")
    ap.add_argument("--workdir", default=None, help="where the buffers go (default: a temp dir on the same disk)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results/intercept_overhead.md"))
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from openclaw.models import build_tiny_model

    tiny = build_tiny_model("qwen3", seed=0)
    tok = AutoTokenizer.from_pretrained(tiny)
    # a --workdir the user gave may hold their files: only what this run created there is removed
    own_dir = args.workdir is None
    workdir = Path(args.workdir) / f"intercept_bench_{os.getpid()}" if args.workdir else \
        Path(tempfile.mkdtemp(prefix="intercept_bench_"))
    workdir.mkdir(parents=True, exist_ok=own_dir)
    model = workdir / "tiny32k"
    if not model.exists():
        shutil.copytree(tiny, model)
        cfg = json.loads((model / "config.json").read_text())
        cfg["max_position_embeddings"] = 32768
        (model / "config.json").write_text(json.dumps(cfg))
    try:
        obs = bench_observer(tok, args.history_tokens, args.records, workdir, args.durability)
        e2e = None if args.skip_e2e else bench_e2e(model, tok, args.history_tokens, args.e2e_requests, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    ms = 1000.0
    lines = [
        "# RL intercept overhead",
        "",
        f"Command: `python bench/intercept_overhead.py --history-tokens {args.history_tokens} "
        f"--e2e-requests {args.e2e_requests} --records {args.records} --durability {args.durability}"
        f"{' --skip-e2e' if args.skip_e2e else ''}`",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average at the end "
        f"{os.getloadavg()[0]:.1f} (other jobs shared the cores), Python {platform.python_version()}, "
        f"buffer on {workdir.parent} (ext4), durability={args.durability}.",
        "",
        "## B. The intercept as the server awaits it (`on_turn`: redact, identify, pair, durable commit)",
        "",
        "| concurrency | turns | prompt tokens | added latency p50 | p99 | main-turn records/s | CPU per record |"
        " stored | verify |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for conc, r in obs.items():
        lines.append(f"| {conc} | {r['n']} | {r['prompt_tokens']} | {r['p50'] * ms:.2f} ms | {r['p99'] * ms:.2f} ms | "
                     f"{r['records_per_s']:.0f} | {r['cpu_ms_per_record']:.2f} ms | {r['stored']} in {r['sessions']} "
                     f"sessions, {r['mb']:.1f} MB | {'ok' if not r['verify'] else r['verify'][:3]} |")
    if e2e is not None:
        lines += [
            "",
            "## A. End to end over HTTP (tiny model, 1-token completions), intercept off vs on",
            "",
            "| concurrency | requests/arm | off p50 | on p50 | added p50 | off p99 | on p99 | added p99 |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for conc in (1, 32):
            r = e2e[conc]
            lines.append(f"| {conc} | {r['n']} | {r['off_p50'] * ms:.1f} ms | {r['on_p50'] * ms:.1f} ms | "
                         f"{(r['on_p50'] - r['off_p50']) * ms:+.1f} ms | {r['off_p99'] * ms:.1f} ms | "
                         f"{r['on_p99'] * ms:.1f} ms | {(r['on_p99'] - r['off_p99']) * ms:+.1f} ms |")
        lines.append("")
        lines.append(f"Records stored by the 'on' server: {e2e['records']}, verify: "
                     f"{'ok' if not e2e['verify'] else e2e['verify'][:3]}.")
    lines += ["", "Targets (2 cores): p50 overhead <= 5 ms, >= 300 main-turn records/s."]
    text = "\n".join(lines) + "\n"
    print(text)
    headline = (f"HEADLINE added latency p50 at concurrency 1 = {obs[1]['p50'] * ms:.2f} ms (target <= 5) | "
                f"main-turn records/s at concurrency 32 = {obs[32]['records_per_s']:.1f} (target >= 300)")
    if e2e is not None:
        headline += f" | end to end on/off p50 at concurrency 1 = {e2e[1]['on_p50'] / e2e[1]['off_p50']:.3f}"
    print(headline)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
