"""Evaluate a judge backend on a labeled JSONL file."""

from __future__ import annotations

from pathlib import Path

from openclaw.judge.config import JudgeConfig
from openclaw.judge.dataset import load_labeled
from openclaw.judge.metrics import EvalReport, evaluate_predictions
from openclaw.judge.schema import Judge, JudgeFailure


def evaluate_judge(judge: Judge, data: str | Path, batch_size: int = 32) -> tuple[EvalReport, int]:
    """(report, failures). A failed turn counts as a prediction of 0 (and is counted)."""
    items, gold = load_labeled(data)
    pred: list[int] = []
    failures = 0
    for start in range(0, len(items), batch_size):
        for res in judge.judge_batch(items[start : start + batch_size]):
            if isinstance(res, JudgeFailure):
                failures += 1
                pred.append(0)
            else:
                pred.append(1 if res.reward > 0 else -1 if res.reward < 0 else 0)
    return evaluate_predictions(gold, pred), failures


def run_eval(config: JudgeConfig, data: str | Path) -> EvalReport:
    from openclaw.judge.backends import make_judge

    judge = make_judge(config.with_(extract_hints=False))
    try:
        report, failures = evaluate_judge(judge, data, batch_size=max(config.batch_size, 8))
    finally:
        judge.close()
    print(f"judge backend: {judge.name}   data: {data}")
    print(report.format())
    if failures:
        print(f"\n{failures} turn(s) could not be judged (counted as 0)")
    return report
