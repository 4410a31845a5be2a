"""Assemble train.jsonl and dev.jsonl from the hand-written pools (pools_train.py, pools_dev.py).

    python -m openclaw.judge.data.build_sets

Each record: response, next_state, next_state_role ("user" | "tool"), label (1, -1, 0) and a
category. The two splits share no next-state text (checked here), so dev accuracy measures
generalisation to unseen phrasings, not memorisation.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import ModuleType

from openclaw.judge.data import pools_dev, pools_train

DATA_DIR = Path(__file__).resolve().parent


def _rec(response: str, next_state: str, role: str, label: int, category: str) -> dict:
    return {"response": response, "next_state": next_state, "next_state_role": role,
            "label": label, "category": category}


def build_split(pools: ModuleType, seed: int, generic_passes: int) -> list[dict]:
    rng = random.Random(seed)
    topics = pools.TOPICS
    responses = [t[0] for t in topics]
    out: list[dict] = []
    for i, (resp, restate, correct, cont) in enumerate(topics):
        out.append(_rec(resp, cont, "user", 1, "acceptance_continuation"))
        out.append(_rec(resp, restate, "user", -1, "restatement"))
        out.append(_rec(resp, correct, "user", -1, "correction"))
        # The same request after an unrelated reply is a new topic, not a restatement.
        if i % 2 == 0 or generic_passes > 1:
            other = responses[(i + 1 + rng.randrange(len(topics) - 1)) % len(topics)]
            out.append(_rec(other, restate, "user", 0, "unrelated_followup"))
    generic = [
        (pools.POSITIVE_USER, 1, "thanks_acceptance"),
        (pools.REDO_USER, -1, "redo_retry"),
        (pools.NEGATIVE_USER, -1, "complaint_error_report"),
        (pools.CORRECTION_USER, -1, "correction"),
        (pools.UNRELATED_USER, 0, "unrelated_followup"),
        (pools.SILENCE_USER, 0, "silence"),
        (pools.NEUTRAL_USER, 0, "no_signal"),
    ]
    for _ in range(generic_passes):
        for texts, label, cat in generic:
            for text in texts:
                out.append(_rec(rng.choice(responses), text, "user", label, cat))
    for resp, output in pools.TOOL_SUCCESS:
        out.append(_rec(resp, output, "tool", 1, "tool_success"))
    for resp, output in pools.TOOL_ERROR:
        out.append(_rec(resp, output, "tool", -1, "tool_error"))
    for text in pools.TOOL_NEUTRAL:
        out.append(_rec(rng.choice([r for r, _ in pools.TOOL_SUCCESS]), text, "tool", 0, "silence"))
    rng.shuffle(out)
    return out


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def check_disjoint(train: list[dict], dev: list[dict]) -> None:
    # Silence markers ("", whitespace) are unavoidable in both splits; everything else must differ.
    train_ns = {_norm(r["next_state"]) for r in train if len(_norm(r["next_state"])) > 0}
    overlap = sorted({_norm(r["next_state"]) for r in dev} & train_ns)
    if overlap:
        raise ValueError(f"dev next states also in train: {overlap[:5]}")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main() -> None:
    train = build_split(pools_train, seed=1, generic_passes=2)
    dev = build_split(pools_dev, seed=2, generic_passes=1)
    check_disjoint(train, dev)
    write_jsonl(DATA_DIR / "train.jsonl", train)
    write_jsonl(DATA_DIR / "dev.jsonl", dev)
    for name, rows in (("train", train), ("dev", dev)):
        counts = {lab: sum(1 for r in rows if r["label"] == lab) for lab in (1, -1, 0)}
        print(f"{name}: {len(rows)} records, labels {counts}")


if __name__ == "__main__":
    main()
