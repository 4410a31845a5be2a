"""`bash openclaw-test/run_eval.sh [--model-path CKPT | --base-url URL] --eval-tasks "conversation,coding,tool-use"`

Parses the flags once into an `EvalPlan`, checks everything that can be checked before a model is
loaded (task names, personas, the base model), then evaluates each model (the checkpoint, and the
base with --compare-base) family by family and writes the report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from openclaw.environment import env_value
from openclaw.evaluation.source import ModelSpec, Target, open_target

REPO = Path(__file__).resolve().parents[2]
FAMILIES = ("conversation", "coding", "tool-use")
# `capability` and `kl` are parts of `conversation` that can also be asked for alone.
TASKS = ("conversation", "capability", "kl", "coding", "tool-use")
DEFAULT_TASKS = "conversation,coding,tool-use"


class UsageError(ValueError):
    """A bad flag combination: exit 2 before anything is loaded."""


@dataclass(frozen=True)
class EvalPlan:
    tasks: tuple[str, ...]
    models: tuple[ModelSpec, ...]  # the checkpoint first, then the base (with --compare-base)
    personas: tuple[str, ...]
    limit: int | None
    out_dir: Path
    device: str
    dtype: str
    max_batch_size: int
    max_tokens: int
    coding_max_tokens: int
    coding_timeout_s: float
    tool_max_tokens: int
    max_steps: int
    tool_transport: str
    parallel: int


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="openclaw-test/run_eval.sh",
                                description="Evaluate a checkpoint, the base model, or an OpenAI-compatible endpoint.")
    src = p.add_argument_group("model (one of; neither: the embedded SmolLM2-135M)")
    src.add_argument("--model-path", default=env_value("MODEL_PATH"),
                     help="HF folder, PEFT adapter folder or checkpoint (default: $MODEL_PATH)")
    src.add_argument("--base-url", default=None, help="an OpenAI-compatible endpoint, e.g. http://127.0.0.1:30000/v1")
    src.add_argument("--model", default=None, help="with --base-url: the model name (default: the first it lists)")
    src.add_argument("--api-key", default=env_value("OPENCLAW_API_KEY"), help="with --base-url")
    src.add_argument("--tokenizer", default=None,
                     help="with --base-url: tokenizer folder for tool-use (default: the one the endpoint reports)")
    cmp = p.add_argument_group("comparison")
    cmp.add_argument("--compare-base", action="store_true",
                     help="also evaluate the base model (a LoRA checkpoint's base, or --base-model-path)")
    cmp.add_argument("--base-model-path", default=None, help="the base to compare with (implies --compare-base)")
    p.add_argument("--eval-tasks", default=DEFAULT_TASKS, help=f"comma-separated, any of: {', '.join(TASKS)}")
    p.add_argument("--persona", action="append", default=None, metavar="NAME|FILE",
                   help="conversation: a shipped persona or a persona file (repeat; default: every shipped persona)")
    p.add_argument("--limit", type=int, default=None, help="only the first N items of each set")
    p.add_argument("--out", default=None, help="output folder (default: openclaw-test/out/<UTC timestamp>)")
    run = p.add_argument_group("inference")
    run.add_argument("--device", default="auto", help="local weights: auto (cuda when available) | cpu | cuda | cuda:N")
    run.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"),
                     help="local weights: auto = bf16 on a GPU, fp32 on CPU")
    run.add_argument("--max-batch-size", type=int, default=16, help="local weights: sequences decoded together")
    run.add_argument("--max-tokens", type=int, default=100, help="conversation: tokens per reply")
    run.add_argument("--coding-max-tokens", type=int, default=512, help="coding: tokens per completion")
    run.add_argument("--coding-timeout", type=float, default=10.0, help="coding: seconds per problem's test")
    run.add_argument("--tool-max-tokens", type=int, default=256, help="tool-use: tokens per model turn")
    run.add_argument("--max-steps", type=int, default=int(env_value("MAX_STEPS") or "3"),
                     help="tool-use: model turns per question [env MAX_STEPS]")
    run.add_argument("--tool-transport", default="auto", choices=("auto", "generate", "chat"),
                     help="tool-use: generate = toolcall-rl's token-level episodes over /generate (the training "
                          "format); chat = the same environment over the chat API; auto = generate when served")
    run.add_argument("--parallel", type=int, default=8,
                     help="sandboxes / tool-use episodes at once (episodes in flight keep the engine's batch full)")
    return p


def parse_tasks(text: str) -> tuple[str, ...]:
    tasks = tuple(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise UsageError(f"--eval-tasks: unknown task(s) {', '.join(unknown)}; supported: {', '.join(TASKS)}")
    if not tasks:
        raise UsageError(f"--eval-tasks is empty; supported: {', '.join(TASKS)}")
    return tasks


def _base_spec(args: argparse.Namespace) -> ModelSpec | None:
    if args.base_model_path:
        if not Path(args.base_model_path).exists():
            raise UsageError(f"--base-model-path {args.base_model_path} does not exist")
        return ModelSpec("base", model_path=args.base_model_path)
    if not args.compare_base:
        return None
    adapter = Path(args.model_path or "") / "adapter_config.json"
    if args.model_path and adapter.is_file():
        return ModelSpec("base", model_path=json.loads(adapter.read_text())["base_model_name_or_path"])
    raise UsageError("--compare-base: the base is known only for a LoRA adapter checkpoint; "
                     "pass --base-model-path PATH")


def plan_from_args(args: argparse.Namespace) -> EvalPlan:
    tasks = parse_tasks(args.eval_tasks)
    if args.base_url and args.model_path and args.model_path != env_value("MODEL_PATH"):
        raise UsageError("give --model-path or --base-url, not both")
    if args.base_url:
        checkpoint = ModelSpec("checkpoint", base_url=args.base_url, model=args.model, api_key=args.api_key,
                               tokenizer=args.tokenizer)
    else:
        if args.model_path and not Path(args.model_path).exists():
            raise UsageError(f"--model-path {args.model_path} does not exist")
        checkpoint = ModelSpec("checkpoint", model_path=args.model_path)
    base = _base_spec(args)
    if args.limit is not None and args.limit < 1:
        raise UsageError("--limit must be >= 1")
    personas: tuple[str, ...] = ()
    if "conversation" in tasks:
        personas = check_personas(args.persona)
    elif args.persona:
        raise UsageError("--persona applies to the conversation task, which is not in --eval-tasks")
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    out = Path(args.out) if args.out else REPO / "openclaw-test" / "out" / stamp
    return EvalPlan(tasks=tasks, models=(checkpoint, base) if base else (checkpoint,), personas=personas,
                    limit=args.limit, out_dir=out, device=args.device, dtype=args.dtype,
                    max_batch_size=args.max_batch_size, max_tokens=args.max_tokens,
                    coding_max_tokens=args.coding_max_tokens, coding_timeout_s=args.coding_timeout,
                    tool_max_tokens=args.tool_max_tokens, max_steps=args.max_steps,
                    tool_transport=args.tool_transport, parallel=args.parallel)


def check_personas(chosen: list[str] | None) -> tuple[str, ...]:
    """Every persona loads now (a typo fails before a model is loaded)."""
    from openclaw.demo.personas import load_persona, persona_names

    names = tuple(chosen) if chosen else tuple(persona_names())
    for spec in names:
        try:
            load_persona(spec)
        except (KeyError, FileNotFoundError, ValueError) as exc:
            raise UsageError(f"--persona {spec}: {exc}") from exc
    return names


def evaluate_target(target: Target, plan: EvalPlan) -> dict[str, Any]:
    """Every requested family on one served model."""
    from openclaw.evaluation.coding import CodingConfig, run_coding
    from openclaw.evaluation.conversation import ConversationConfig, run_conversation
    from openclaw.evaluation.tooluse import ToolUseConfig, run_tool_use

    families: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    conv = {"conversation", "capability", "kl"} & set(plan.tasks)
    if conv:
        t0 = time.perf_counter()
        families["conversation"] = run_conversation(target, ConversationConfig(
            personas=plan.personas, suite="conversation" in conv, capability=bool({"conversation", "capability"} & conv),
            kl=bool({"conversation", "kl"} & conv), limit=plan.limit, max_tokens=plan.max_tokens))
        seconds["conversation"] = time.perf_counter() - t0
    if "coding" in plan.tasks:
        t0 = time.perf_counter()
        families["coding"] = run_coding(target, CodingConfig(limit=plan.limit, max_tokens=plan.coding_max_tokens,
                                                             timeout_s=plan.coding_timeout_s, parallel=plan.parallel))
        seconds["coding"] = time.perf_counter() - t0
    if "tool-use" in plan.tasks:
        t0 = time.perf_counter()
        families["tool-use"] = run_tool_use(target, ToolUseConfig(limit=plan.limit, max_steps=plan.max_steps,
                                                                  max_tokens=plan.tool_max_tokens,
                                                                  parallel=plan.parallel,
                                                                  transport=plan.tool_transport))
        seconds["tool-use"] = time.perf_counter() - t0
    return {"description": target.description, "model": target.model, "device": target.device, "dtype": target.dtype,
            "families": families, "seconds": {k: round(v, 1) for k, v in seconds.items()}}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        plan = plan_from_args(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", str(min(4, os.cpu_count() or 1)))
    from openclaw.evaluation.report import format_table, summary_rows, write_outputs
    from openclaw.evaluation.tooluse import choose_transport

    t0 = time.perf_counter()
    models: dict[str, Any] = {}
    for spec in plan.models:
        with open_target(spec, device=plan.device, dtype=plan.dtype, max_batch_size=plan.max_batch_size) as target:
            if "tool-use" in plan.tasks:
                try:
                    choose_transport(target, plan.tool_transport)
                except ValueError as exc:
                    print(f"error: {exc}", file=sys.stderr)
                    return 2
            models[spec.label] = evaluate_target(target, plan)
    results = {"created": datetime.now(timezone.utc).isoformat(timespec="seconds"), "tasks": list(plan.tasks),
               "personas": list(plan.personas), "seconds_total": round(time.perf_counter() - t0, 1),
               "settings": {k: v for k, v in asdict(plan).items() if k not in ("models", "out_dir", "tasks", "personas")},
               "models": models}
    paths = write_outputs(results, plan.out_dir)
    print(format_table(summary_rows(models), list(models)))
    print(f"wrote {paths['json']}, {paths['markdown']}, {paths['png']} ({results['seconds_total']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
