"""Judged turns per second through the real judge workers on a real trajectory buffer.

    python bench/judge_throughput.py [--cpu-turns 400] [--llm-turns 24] [--llm-m 3] [--workers 1,2,4]
                                     [--llm-model-path PATH] [--out bench/results/judge_throughput.md]

1. CPU default judge (MiniLM embeddings + trained head): turns/s for each worker count.
2. LLM judge on SmolLM2-135M-Instruct served by our own server (`openclaw.server`, hf backend,
   real HTTP), m votes per turn: turns/s and the share of parseable votes, per worker count.
Turns come from the shipped dev set (openclaw/judge/data/dev.jsonl), repeated as needed.
The last line is each judge's turns/s with the most workers over that with the fewest.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

from openclaw.buffer import JUDGED, TrajectoryBuffer, TurnRecord
from openclaw.judge.config import JudgeConfig
from openclaw.judge.dataset import DEV_PATH
from openclaw.judge.worker import JudgeService

REPO = Path(__file__).resolve().parents[1]


def dev_rows() -> list[dict]:
    return [json.loads(line) for line in DEV_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]


def fill_buffer(d: Path, n: int) -> list[int]:
    rows = dev_rows()
    ids = []
    with TrajectoryBuffer.open(d, durability="normal") as buf:
        for k in range(n):
            r = rows[k % len(rows)]
            sid = f"bench-{k}"
            ids.append(buf.append_turn(TurnRecord(
                session_id=sid, turn_index=None, turn_type="main", messages=[{"role": "user", "content": "help"}],
                prompt_ids=[1, 2], response_ids=[3], response_text=r["response"], content=r["response"])))
            buf.attach_next_state(sid, {"role": r["next_state_role"], "content": r["next_state"]})
    return ids


def run_service(config: JudgeConfig, n_turns: int, judge=None, timeout: float = 1800.0) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="judge-bench-"))
    try:
        ids = fill_buffer(tmp / "buf", n_turns)
        buf = TrajectoryBuffer.open(tmp / "buf")
        t0 = time.perf_counter()
        svc = JudgeService(config, tmp / "buf", judge=judge, buffer=buf).start()
        deadline = time.monotonic() + timeout
        while buf.stats()["by_state"].get(JUDGED, 0) + buf.stats()["by_state"].get("judge_failed", 0) < len(ids):
            if time.monotonic() > deadline:
                raise TimeoutError("benchmark did not finish")
            time.sleep(0.05)
        elapsed = time.perf_counter() - t0
        svc.stop()
        votes = [v for t in ids for v in (buf.get_turn(t).judgement or {}).get("votes", [])]
        buf.close()
        snap = svc.stats.snapshot()
        return {"turns": len(ids), "seconds": elapsed, "turns_per_s": len(ids) / elapsed,
                "failed": snap["failed"], "valid_votes": (sum(v is not None for v in votes) / len(votes)) if votes else None}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--cpu-turns", type=int, default=400)
    p.add_argument("--llm-turns", type=int, default=24)
    p.add_argument("--llm-m", type=int, default=3)
    p.add_argument("--llm-max-tokens", type=int, default=48)
    p.add_argument("--workers", default="1,2,4")
    p.add_argument("--skip-llm", action="store_true")
    p.add_argument("--llm-model-path", default=None, help="the LLM judge's model (default: the embedded SmolLM2)")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "judge_throughput.md")
    args = p.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    lines = ["# Judge throughput", "", f"Command: `python bench/judge_throughput.py {' '.join(sys.argv[1:])}`".rstrip(),
             f"Machine: {platform.machine()}, {os.cpu_count()} CPU cores, Python {platform.python_version()}, "
             "no GPU; other jobs may share the cores.", ""]

    from openclaw.judge.cpu_judge import CpuJudge

    cpu = CpuJudge()  # loaded once; shared by the workers as in the service
    rates: dict[str, dict[int, float]] = {"cpu": {}, "llm": {}}
    lines += ["## CPU default judge (MiniLM-L6 embeddings + logistic head + rules)", "",
              f"{args.cpu_turns} turns from the dev set, batch size 16, hints on.", "",
              "| workers | turns | seconds | judged turns/s |", "|---|---|---|---|"]
    for w in workers:
        cfg = JudgeConfig(num_workers=w, batch_size=16, poll_interval_s=0.02)
        r = run_service(cfg, args.cpu_turns, judge=cpu)
        print(f"cpu workers={w}: {r}", flush=True)
        rates["cpu"][w] = r["turns_per_s"]
        lines.append(f"| {w} | {r['turns']} | {r['seconds']:.2f} | {r['turns_per_s']:.1f} |")

    if not args.skip_llm:
        from openclaw.models import prepare_embedded_model
        from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

        model = str(args.llm_model_path or prepare_embedded_model())
        name = "SmolLM2-135M-Instruct" if args.llm_model_path is None else Path(model).name
        lines += ["", f"## LLM judge: {name} through `openclaw.server` (hf backend, fp32, CPU), m={args.llm_m}",
                  "", f"{args.llm_turns} turns, max_tokens={args.llm_max_tokens}, temperature 0.6, PRM votes only "
                  "(hints off), batch size 4 per worker; valid = share of completions with a parseable \\boxed{} verdict.",
                  "", "| workers | turns | seconds | judged turns/s | valid votes |", "|---|---|---|---|---|"]
        srv_cfg = ServerConfig(engine=EngineConfig(model_path=model, max_batch_size=32))
        with serve_in_background(create_app(srv_cfg)) as srv:
            for w in workers:
                cfg = JudgeConfig(backend="llm", judge_url=srv.base_url, m=args.llm_m, max_tokens=args.llm_max_tokens,
                                  extract_hints=False, num_workers=w, batch_size=4, timeout_s=600, poll_interval_s=0.05)
                r = run_service(cfg, args.llm_turns)
                print(f"llm workers={w}: {r}", flush=True)
                rates["llm"][w] = r["turns_per_s"]
                # no recorded votes: every turn ended judge_failed (no parseable verdict, retries spent)
                valid = "-" if r["valid_votes"] is None else f"{r['valid_votes']:.0%}"
                lines.append(f"| {w} | {r['turns']} | {r['seconds']:.1f} | {r['turns_per_s']:.2f} | {valid} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))
    lo, hi = min(workers), max(workers)
    print("RATIO judged turns/s, " + " | ".join(
        f"{kind} judge {hi} workers / {lo} = {r[hi] / r[lo]:.3f} ({r[hi]:.2f} vs {r[lo]:.2f} turns/s)"
        for kind, r in rates.items() if r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
