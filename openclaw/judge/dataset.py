"""Labeled judge data: JSONL with response, next_state, next_state_role, label in {1, -1, 0}."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from openclaw.judge.schema import JudgeInput

DATA_DIR = Path(__file__).resolve().parent / "data"
DEV_PATH = DATA_DIR / "dev.jsonl"
TRAIN_PATH = DATA_DIR / "train.jsonl"


def _parse_label(value: object) -> int | None:
    """1, -1, 0 as ints, integral floats or strings ("+1" too); anything else is None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if isinstance(value, (int, float)) and float(value).is_integer() and int(value) in (1, -1, 0):
        return int(value)
    return None


def _json_objects(path: Path) -> Iterator[tuple[int, dict]]:
    """Each non-blank line of a JSONL file as an object, with its line number."""
    # split on "\n" only, as iterating the file does: str.splitlines would also split inside a JSON
    # string holding a raw U+2028
    for lineno, line in enumerate(path.read_text(encoding="utf-8").split("\n"), 1):
        if line.strip():
            yield lineno, _json_object(line, f"{path}:{lineno}")


def _json_object(line: str, where: str) -> dict:
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: invalid JSON ({e.msg})") from None
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: expected a JSON object")
    return rec


def _labeled(rec: dict, where: str, lineno: int) -> tuple[JudgeInput, int]:
    for key in ("response", "next_state", "label"):
        if key not in rec:
            raise ValueError(f"{where}: missing field {key!r}")
    label = _parse_label(rec["label"])
    if label is None:
        raise ValueError(f"{where}: label must be 1, -1 or 0, got {rec['label']!r}")
    item = JudgeInput(
        response=str(rec["response"] or ""), next_state=str(rec["next_state"] or ""),
        next_state_role=str(rec.get("next_state_role") or "user"), prompt=rec.get("prompt"),
        turn_id=rec.get("id", lineno),
    )
    return item, label


def load_labeled(path: str | Path) -> tuple[list[JudgeInput], list[int]]:
    """Parse and validate; raises ValueError naming the file and line on bad input."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such data file: {path}")
    items, labels = [], []
    for lineno, rec in _json_objects(path):
        item, label = _labeled(rec, f"{path}:{lineno}", lineno)
        items.append(item)
        labels.append(label)
    if not items:
        raise ValueError(f"{path}: no records")
    return items, labels
