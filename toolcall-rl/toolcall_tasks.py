"""ReTool-style math tasks: a generated training set, GSM8K evaluation, answer extraction/grading."""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

# GSM8K's test split (MIT) ships in the repository, so a fresh clone evaluates without outside files.
DEFAULT_GSM8K = Path(__file__).resolve().parent / "data" / "gsm8k_test.json"


@dataclass(frozen=True)
class MathTask:
    question: str
    answer: str  # canonical number as text


def gsm8k_path() -> Path:
    """GSM8K_PATH overrides the repository copy toolcall-rl/data/gsm8k_test.json."""
    return Path(os.environ.get("GSM8K_PATH") or DEFAULT_GSM8K)


def load_gsm8k(path: str | Path | None = None, limit: int | None = None) -> list[MathTask]:
    """[{"question", "ground_truth_answer"}] (the shipped copy) or GSM8K's own {"question", "answer": "... #### N"}."""
    p = Path(path) if path else gsm8k_path()
    if not p.is_file():
        raise FileNotFoundError(f"GSM8K file {str(p)!r} not found; set GSM8K_PATH")
    text = p.read_text()
    rows = json.loads(text) if text.lstrip().startswith("[") else [json.loads(x) for x in text.splitlines() if x.strip()]
    tasks = []
    for i, row in enumerate(rows):
        if "ground_truth_answer" in row:
            answer = str(row["ground_truth_answer"])
        elif "answer" in row:
            answer = str(row["answer"]).split("####")[-1]
        else:
            raise ValueError(f"{p}: row {i} has no ground_truth_answer/answer")
        norm = normalize_number(answer)
        if norm is None:
            raise ValueError(f"{p}: row {i}: answer {answer!r} is not a number")
        tasks.append(MathTask(str(row["question"]), norm))
        if limit is not None and len(tasks) >= limit:
            break
    return tasks


# ---- training set: templated multi-step word problems (numbers make a calculator useful) -----

def _t_shop(r: random.Random) -> MathTask:
    n, price, paid = r.randint(3, 40), r.randint(2, 90), 0
    paid = (n * price // 100 + 1) * 100
    return MathTask(f"A shop sells notebooks for ${price} each. Maya buys {n} notebooks and pays with "
                    f"${paid}. How much change, in dollars, does she get?", str(paid - n * price))


def _t_speed(r: random.Random) -> MathTask:
    speed, hours, extra = r.randint(35, 95), r.randint(2, 9), r.randint(10, 120)
    return MathTask(f"A train travels at {speed} km per hour for {hours} hours, then another {extra} km. "
                    f"How many kilometres does it travel in total?", str(speed * hours + extra))


def _t_boxes(r: random.Random) -> MathTask:
    per, boxes, broken = r.randint(6, 48), r.randint(12, 250), r.randint(1, 30)
    return MathTask(f"A warehouse has {boxes} boxes with {per} bottles in each. {broken} bottles are broken. "
                    f"How many unbroken bottles are there?", str(per * boxes - broken))


def _t_split(r: random.Random) -> MathTask:
    people, each = r.randint(3, 15), r.randint(11, 300)
    return MathTask(f"{people} friends share a bill of ${people * each} equally. How many dollars does each "
                    f"friend pay?", str(each))


def _t_percent(r: random.Random) -> MathTask:
    price, pct = r.randint(2, 60) * 20, r.choice([5, 10, 15, 20, 25, 30, 40, 50])
    return MathTask(f"A jacket costs ${price}. It is discounted by {pct}%. What is the sale price in dollars?",
                    normalize_number(str(Fraction(price * (100 - pct), 100))) or "")


def _t_area(r: random.Random) -> MathTask:
    w, h, cost = r.randint(3, 40), r.randint(3, 40), r.randint(2, 25)
    return MathTask(f"A rectangular floor is {w} m by {h} m. Tiles cost ${cost} per square metre. How many "
                    f"dollars do the tiles for the whole floor cost?", str(w * h * cost))


def _t_savings(r: random.Random) -> MathTask:
    start, weekly, weeks, spend = r.randint(10, 500), r.randint(5, 60), r.randint(4, 52), r.randint(5, 100)
    return MathTask(f"Leo has ${start}. He saves ${weekly} every week for {weeks} weeks and then spends ${spend}. "
                    f"How many dollars does he have now?", str(start + weekly * weeks - spend))


def _t_power(r: random.Random) -> MathTask:
    base, exp, sub = r.randint(2, 9), r.randint(3, 9), r.randint(1, 999)
    return MathTask(f"What is {base} to the power of {exp}, minus {sub}?", str(base**exp - sub))


TEMPLATES: tuple[Callable[[random.Random], MathTask], ...] = (
    _t_shop, _t_speed, _t_boxes, _t_split, _t_percent, _t_area, _t_savings, _t_power,
)


def generate_train_set(n: int, seed: int = 0) -> list[MathTask]:
    r = random.Random(seed)
    return [TEMPLATES[i % len(TEMPLATES)](r) for i in range(n)]


# ---- answers ---------------------------------------------------------------------------------

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def normalize_number(text: str) -> str | None:
    """'$1,234.50' -> '1234.5', '36.0' -> '36', '3/4' -> '0.75'; None if no number."""
    m = _NUMBER.search(text.replace("$", "").replace(" ", ""))
    if not m:
        return None
    raw = m.group(0).replace(",", "")
    try:
        value = Fraction(raw)
    except (ValueError, ZeroDivisionError):
        return None
    if value.denominator == 1:
        return str(value.numerator)
    return repr(float(value)).rstrip("0").rstrip(".")


_ANSWER_FORMS = (
    re.compile(r"<answer>(.*?)</answer>", re.DOTALL),
    re.compile(r"\\boxed\{([^{}]*)\}"),
    re.compile(r"####\s*([^\n]+)"),
)


def extract_answer(text: str) -> str | None:
    """The model's final answer: <answer>..</answer>, \\boxed{..} or '#### ..' (last one wins)."""
    for pattern in _ANSWER_FORMS:
        found = pattern.findall(text)
        if found:
            return normalize_number(found[-1])
    return None


def is_correct(predicted: str | None, truth: str) -> bool:
    if predicted is None:
        return False
    try:
        return abs(float(Fraction(predicted)) - float(Fraction(truth))) < 1e-6
    except (ValueError, ZeroDivisionError):
        return predicted == truth
