"""Evaluate a model on SWE instances: resolved rate, with a log and the patch of every instance.

    python swe-rl/swe_eval.py --model-path $CKPT_SAVE_DIR/checkpoint-latest      # a checkpoint (embedded engine)
    python swe-rl/swe_eval.py --base-url http://host:8000/v1 --model NAME          # any OpenAI-compatible endpoint
    python swe-rl/swe_eval.py --benchmark swe-bench-lite                            # says what local data to provide

Default instances: the shipped held-out split. --swe-bench-path (env SWE_BENCH_PATH) evaluates a
user's SWE-bench file instead. Writes OUT/<instance_id>/{patch.diff,log.json} and OUT/results.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from swe_bench import BENCHMARKS, SweBenchPath, benchmark_help
from swe_generate import Episode, SweRLConfig, initial_messages, swe_run
from swe_instances import Instance, shipped_instances

from openclaw.environment import env_value
from openclaw.sandbox.episode import chat_prompt_ids, load_tokenizer
from openclaw.sandbox.trajectory import ObservationFormat, TrajectoryBuilder, run_agent_loop


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--model-path", help="HF folder or checkpoint (full or LoRA adapter); default: embedded SmolLM2")
    src.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    ap.add_argument("--model", default="default", help="model name sent to --base-url")
    ap.add_argument("--api-key", default=env_value("OPENCLAW_API_KEY") or "EMPTY")
    ap.add_argument("--benchmark", default="heldout", help=f"heldout | train | {' | '.join(BENCHMARKS)}")
    ap.add_argument("--swe-bench-path", default=env_value("SWE_BENCH_PATH"))
    ap.add_argument("--limit", type=int, default=0, help="first N instances only (0: all)")
    ap.add_argument("--max-steps", type=int, default=int(env_value("MAX_STEPS") or "20"))
    ap.add_argument("--parallel-envs", type=int, default=int(env_value("PARALLEL_ENVS") or "8"))
    ap.add_argument("--max-new-tokens", type=int, default=256)
    ap.add_argument("--max-context-len", type=int, default=4096)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--command-timeout", type=float, default=30.0)
    ap.add_argument("--test-timeout", type=float, default=120.0)
    ap.add_argument("--sandbox", default=env_value("OPENCLAW_SANDBOX") or "bwrap", choices=["bwrap", "none"])
    ap.add_argument("--out", default="./logs/swe-eval")
    return ap.parse_args(argv)


def select_instances(args: argparse.Namespace) -> tuple[list[Instance], str | None]:
    if args.swe_bench_path:
        source = SweBenchPath.parse(args.swe_bench_path)
        rows, mirrors = source.load(), source.mirrors
    elif args.benchmark in ("heldout", "train"):
        rows, mirrors = shipped_instances(args.benchmark), None
    else:
        raise SystemExit(benchmark_help(args.benchmark))
    return (rows[: args.limit] if args.limit else rows), mirrors


def config(args: argparse.Namespace) -> SweRLConfig:
    return SweRLConfig(max_steps=args.max_steps, parallel_envs=args.parallel_envs, sandbox=args.sandbox,
                       command_timeout=args.command_timeout, test_timeout=args.test_timeout,
                       rollout_max_context_len=args.max_context_len)


async def episode_on_engine(cfg: SweRLConfig, inst: Instance, url: str, tokenizer: Any, params: dict[str, Any],
                            mirrors: str | None) -> Episode:
    """A checkpoint: the same token-level loop as training, against the embedded engine."""
    from openclaw.engines.sglang_client import SGLangClient

    _, prompt_ids = chat_prompt_ids(tokenizer, initial_messages(inst))
    obs_format = ObservationFormat.from_tokenizer(tokenizer, role="user")
    async with SGLangClient(url) as client, swe_run(cfg, inst, mirrors) as run:
        builder = TrajectoryBuilder(client, prompt_ids, params, cfg.rollout_max_context_len)
        outcome = await run_agent_loop(builder, tokenizer, obs_format, lambda turn: run.step(turn.text))
        await builder.finalize()
        return await run.finish(outcome)


async def episode_on_endpoint(cfg: SweRLConfig, inst: Instance, client: Any, model: str, params: dict[str, Any],
                              mirrors: str | None) -> Episode:
    """An OpenAI-compatible endpoint: chat messages, one tool call per assistant turn."""
    messages = initial_messages(inst)
    async with swe_run(cfg, inst, mirrors) as run:
        while True:
            reply = await client.chat.completions.create(model=model, messages=messages, **params)
            text = reply.choices[0].message.content or ""
            messages.append({"role": "assistant", "content": text})
            observation = await run.step(text)
            if observation is None:
                break
            messages.append({"role": "user", "content": observation})
        return await run.finish("completed")


def write_logs(out: Path, episode: Episode) -> None:
    d = out / episode.instance_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "patch.diff").write_text(episode.patch)
    log = dict(episode.metadata(), reward=episode.reward, outcome=episode.outcome, transcript=episode.transcript)
    (d / "log.json").write_text(json.dumps(log, indent=2))


async def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    instances, mirrors = select_instances(args)
    cfg = config(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    params = {"max_new_tokens": args.max_new_tokens, "temperature": args.temperature, "top_p": 1.0}
    t0 = time.monotonic()
    async with contextlib.AsyncExitStack() as stack:
        if args.base_url:
            from openai import AsyncOpenAI

            client = AsyncOpenAI(base_url=args.base_url, api_key=args.api_key)
            chat = {"max_tokens": args.max_new_tokens, "temperature": args.temperature}
            run = lambda inst: episode_on_endpoint(cfg, inst, client, args.model, chat, mirrors)  # noqa: E731
        else:
            from openclaw.engines.hf_engine import HFEngine
            from openclaw.engines.serve import create_app, serve_in_thread
            from openclaw.models import resolve_model_path

            path = str(resolve_model_path(args.model_path))
            engine = HFEngine.load(path, dtype="float32", device="cpu", max_batch_size=args.parallel_envs)
            url = stack.enter_context(serve_in_thread(create_app(engine)))
            tokenizer = load_tokenizer(path)
            run = lambda inst: episode_on_engine(cfg, inst, url, tokenizer, params, mirrors)  # noqa: E731

        async def one(inst: Instance) -> Episode | None:
            try:
                episode = await run(inst)
            except Exception as exc:  # one broken episode must not hide the others' results
                print(f"ERROR    {inst.instance_id}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
                errors[inst.instance_id] = f"{type(exc).__name__}: {exc}"
                return None
            write_logs(out, episode)
            print(f"{'RESOLVED' if episode.resolved else 'failed  '} {inst.instance_id} steps={episode.steps} "
                  f"tools={','.join(episode.tools)}", flush=True)
            return episode

        errors: dict[str, str] = {}
        done = await asyncio.gather(*(one(i) for i in instances))
    episodes = [e for e in done if e is not None]
    elapsed = time.monotonic() - t0
    resolved = sum(e.resolved for e in episodes)
    summary = {
        "instances": len(instances), "errors": errors, "resolved": resolved, "resolved_rate": resolved / max(1, len(instances)),
        "seconds": round(elapsed, 1), "episodes_per_minute": round(60 * len(episodes) / elapsed, 2),
        "mean_setup_seconds": round(sum(e.setup_seconds for e in episodes) / max(1, len(episodes)), 3),
        "mean_test_seconds": round(sum(e.test_seconds for e in episodes) / max(1, len(episodes)), 3),
        "parallel_envs": cfg.envs(), "max_steps": cfg.max_steps,
        "model": args.base_url or args.model_path or "embedded SmolLM2-135M-Instruct",
        "per_instance": {e.instance_id: e.resolved for e in episodes},
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2))
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    summary = asyncio.run(evaluate(args))
    print(f"resolved {summary['resolved']}/{summary['instances']} = {summary['resolved_rate']:.3f} "
          f"({summary['episodes_per_minute']} episodes/min, setup {summary['mean_setup_seconds']} s/episode) "
          f"-> {args.out}/results.json")
    if summary["errors"]:
        print(f"{len(summary['errors'])} instance(s) errored (counted as unresolved): {sorted(summary['errors'])}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
