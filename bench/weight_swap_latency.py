"""Chat latency while weights change: a steady chat load against the real server (embedded
SmolLM2 on CPU by default), first without weight updates, then with an update every few seconds
(alternating a LoRA adapter and a full folder, pushed the way the trainer pushes them:
`slime.utils.weight_sync.push_to_engines`). Same process, same load, same server; quiet and
updating windows alternate so that other work on the machine hits both alike.

Prints p50/p99 latency and failed requests of both phases, the engine's pause per update
(decoding stopped while the scheduler swaps models) and its load time, LoRA and full apart,
and last the ratio p99(with updates) / p99(without). Target: ratio <= 1.5, zero failures.

    python bench/weight_swap_latency.py [--rounds 4] [--window 16] [--update-every 4] [--clients 3]
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

PROMPTS = ["What is the capital of France?", "Give me a tip for sleeping better.", "Name three fruits.",
           "How many legs does a spider have?", "What is 12 times 12?", "Say hello in Spanish."]


def make_adapter(base: str, out: Path) -> Path:
    """A LoRA adapter over the base with non-zero weights (so the merge does real work)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    peft_model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                                  init_lora_weights=False))
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_B" in name:
                p.mul_(1e-3)  # small: the adapter changes the weights, not the model's sanity
    peft_model.save_pretrained(out)
    return out


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


class Load:
    """`clients` threads sending chat requests back to back until stopped; every request is
    kept as (started, seconds, error or None)."""

    def __init__(self, url: str, clients: int, max_tokens: int) -> None:
        self.url, self.clients, self.max_tokens = url, clients, max_tokens
        self.requests: list[tuple[float, float, str | None]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]

    def _client(self, i: int) -> None:
        with httpx.Client(base_url=self.url, timeout=300) as client:
            n = i
            while not self._stop.is_set():
                body = {"model": "m", "messages": [{"role": "user", "content": PROMPTS[n % len(PROMPTS)]}],
                        "max_tokens": self.max_tokens, "temperature": 0}
                n += 1
                t0 = time.monotonic()
                why = None
                try:
                    r = client.post("/v1/chat/completions", json=body)
                    if r.status_code != 200 or r.json()["choices"][0]["message"] is None:
                        why = f"HTTP {r.status_code}: {r.text[:200]}"
                except httpx.HTTPError as exc:
                    why = repr(exc)
                with self._lock:
                    self.requests.append((t0, time.monotonic() - t0, why))

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def window(self, start: float, end: float) -> tuple[list[float], list[str]]:
        """Latencies and errors of the requests that started in [start, end)."""
        with self._lock:
            rows = [r for r in self.requests if start <= r[0] < end]
        return [r[1] for r in rows if r[2] is None], [r[2] for r in rows if r[2] is not None]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-path", default=None, help="default: the embedded SmolLM2 (python -m openclaw.models path)")
    p.add_argument("--rounds", type=int, default=4, help="quiet + updating window pairs")
    p.add_argument("--window", type=float, default=16.0, help="seconds per window")
    p.add_argument("--update-every", type=float, default=4.0, help="seconds between two weight updates")
    p.add_argument("--warmup", type=float, default=8.0, help="seconds of load before measuring")
    p.add_argument("--clients", type=int, default=3, help="concurrent chat clients")
    p.add_argument("--max-tokens", type=int, default=16)
    args = p.parse_args()

    from slime.utils.weight_sync import push_to_engines

    from openclaw.models import resolve_model_path
    from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

    base = str(resolve_model_path(args.model_path))
    work = Path(tempfile.mkdtemp(prefix="weight-swap-bench-"))
    atexit.register(shutil.rmtree, work, ignore_errors=True)  # the adapter and control files are the run's own
    os.environ.setdefault("OPENCLAW_CONTROL_DIR", str(work / "control"))
    adapter = make_adapter(base, work / "adapter")
    app = create_app(ServerConfig(engine=EngineConfig(model_path=base, dtype="float32")))
    engine = app.state.openclaw.engine
    load1 = os.getloadavg()[0]
    quiet_lat: list[float] = []
    busy_lat: list[float] = []
    failures: list[str] = []
    updates: dict[str, list[dict[str, float]]] = {"lora": [], "full": []}
    with serve_in_background(app) as srv:
        url = srv.base_url
        load = Load(url, args.clients, args.max_tokens)
        load.start()
        time.sleep(args.warmup)  # warm-up: first forwards allocate; not measured
        version = engine.weight_version
        # Quiet and updating windows alternate, so that the other load on a shared machine
        # falls on both alike.
        for _ in range(args.rounds):
            t0 = time.monotonic()
            time.sleep(args.window)  # the schedule of the benchmark, not a synchronisation
            t1 = time.monotonic()
            lat, err = load.window(t0, t1)
            quiet_lat += lat
            failures += err
            while time.monotonic() + args.update_every <= t1 + args.window:
                time.sleep(args.update_every)
                kind = ("lora", "full")[version % 2]
                version += 1
                try:
                    push_to_engines([url], adapter if kind == "lora" else base, version)
                    updates[kind].append(dict(engine.last_weight_update))
                except Exception as exc:  # noqa: BLE001 - counted and printed
                    failures.append(f"update {version}: {exc!r}")
            time.sleep(max(0.0, t1 + args.window - time.monotonic()))
            lat, err = load.window(t1, time.monotonic())
            busy_lat += lat
            failures += err
        load.stop()
        failures += [r[2] for r in load.requests if r[2] is not None and r[0] >= t1 + args.window]
    load2 = os.getloadavg()[0]

    def line(name: str, lat: list[float]) -> str:
        return (f"{name:<16} requests {len(lat):4d}  p50 {percentile(lat, 50):6.3f}s  p99 {percentile(lat, 99):6.3f}s  "
                f"mean {statistics.fmean(lat) if lat else float('nan'):6.3f}s")

    print(f"model {base}; {args.clients} clients x {args.max_tokens} tokens; {args.rounds} rounds of "
          f"{args.window:g}s quiet + {args.window:g}s with an update every {args.update_every:g}s; "
          f"cpu count {os.cpu_count()}, load average {load1:.1f} -> {load2:.1f}")
    print(line("no updates", quiet_lat))
    print(line("with updates", busy_lat))
    for kind, rows in updates.items():
        if rows:
            print(f"{kind:<5} updates {len(rows):3d}: engine pause per update mean "
                  f"{1000 * statistics.fmean(r['pause_s'] for r in rows):.1f} ms, max "
                  f"{1000 * max(r['pause_s'] for r in rows):.1f} ms; load (beside decoding) mean "
                  f"{statistics.fmean(r['load_s'] for r in rows):.2f}s")
    for why in failures[:5]:
        print("failure:", why)
    failed = len(failures)
    ratio = percentile(busy_lat, 99) / percentile(quiet_lat, 99)
    print(f"p99 ratio with/without updates: {ratio:.2f} (target <= 1.5), failed requests: {failed}")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
