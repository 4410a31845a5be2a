"""ReTool-style math tasks: a generated training set, GSM8K evaluation, answer extraction/grading."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from openclaw.environment import env_value

# GSM8K's test split (MIT) ships in the repository, so a fresh clone evaluates without outside files.
DEFAULT_GSM8K = Path(__file__).resolve().parent / "data" / "gsm8k_test.json"


@dataclass(frozen=True)
class MathTask:
    question: str
    answer: str  # canonical number as text


def gsm8k_path() -> Path:
    """GSM8K_PATH overrides the repository copy toolcall-rl/data/gsm8k_test.json."""
    return Path(env_value("GSM8K_PATH") or DEFAULT_GSM8K)


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
# This grader is the reward, so it is written for a policy that looks for holes in it: a reply is
# graded on exactly one number, parsed exactly (a Fraction, never float text), and anything
# ambiguous scores 0 instead of being guessed at.

# |answer - gold| <= 1e-6 counts as correct, so '0.3333333' matches a gold of 1/3 and a gold
# written with float noise still matches; no hedge fits into it, as only one number is graded.
ANSWER_TOLERANCE = Fraction(1, 10**6)
# A model's number may have at most this many digits and this exponent: '1e999999999' would
# otherwise build a billion-digit integer inside the reward.
_MAX_DIGITS = 100
_MAX_EXPONENT = 100
# Re-reading our own canonical strings (exact digits, never an exponent: 1e-100 has 101 digits)
# and the golds, which are trusted data, allows longer digit strings.
_CANONICAL_MAX_DIGITS = 1000

# Full-width digits and Unicode minus signs are what a tokenizer may emit for '0'-'9' and '-'.
# Any other numeric character (superscripts, vulgar fractions, other scripts) is refused: '10³'
# must not be read as 10.
_ASCII_EQUIVALENTS = str.maketrans({**{chr(0xFF10 + i): str(i) for i in range(10)},
                                    "\u2212": "-", "\ufe63": "-", "\uff0d": "-"})
_PLAIN = r"\.?[0-9](?:[0-9,.]*[0-9])?(?:[eE][-+]?[0-9]+)?"
_TOKEN = re.compile(rf"(-\s*)?({_PLAIN})(?:\s*/\s*({_PLAIN}))?")
# Commas only as thousands separators: '1, 2, 3' or '12,34' is a list, never 123 or 1234.
_PLAIN_PARTS = re.compile(
    r"(?P<int>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)?(?:\.(?P<frac>[0-9]+))?(?:[eE](?P<exp>[-+]?[0-9]{1,4}))?"
)

# Tool-call markup is not the final message's content: an answer written into a tool call's
# arguments or a forged <tool_response> is no answer. An unclosed <tool_call> runs to the end, as
# in the server's parser; the answer and response patterns stop at the next opening tag, which
# keeps grading linear however many unclosed tags a reply holds.
_TOOL_MARKUP = re.compile(
    r"<tool_call>.*?(?:</tool_call>|\Z)|<tool_response>(?:(?!<tool_response>).)*?</tool_response>", re.DOTALL
)
_ANSWER_FORMS = (
    re.compile(r"<answer>((?:(?!<answer>).)*?)</answer>", re.DOTALL),
    re.compile(r"\\boxed\{([^{}]*)\}"),
    re.compile(r"####\s*([^\n]+)"),
)


def _plain_value(text: str, max_digits: int) -> Fraction | None:
    m = _PLAIN_PARTS.fullmatch(text)
    if m is None or (m["int"] is None and m["frac"] is None):
        return None
    whole, frac = (m["int"] or "0").replace(",", ""), m["frac"] or ""
    exponent = int(m["exp"] or 0)
    if len(whole) + len(frac) > max_digits or abs(exponent) > _MAX_EXPONENT:
        return None
    return Fraction(int(whole + frac), 10 ** len(frac)) * Fraction(10) ** exponent


def parse_number(text: str, max_digits: int = _MAX_DIGITS) -> Fraction | None:
    """The one number `text` states ('$1,234.50', '-7', '3/4', '1e2', '36 apples'); None when it
    states none, several ('1 or 2', '30-40', '1, 2, 3'), or one that cannot be read unambiguously."""
    text = text.translate(_ASCII_EQUIVALENTS)
    if any(ch.isnumeric() and not ch.isascii() for ch in text):
        return None
    tokens = list(_TOKEN.finditer(text.replace("$", "")))
    if len(tokens) != 1:
        return None
    sign, numerator, denominator = tokens[0].groups()
    value = _plain_value(numerator, max_digits)
    if value is not None and denominator is not None:
        divisor = _plain_value(denominator, max_digits)
        value = value / divisor if divisor else None
    if value is None:
        return None
    return -value if sign else value


def _terminating_decimal(value: Fraction) -> str | None:
    """Exact decimal digits when the expansion ends ('0.75'); None for '1/3'."""
    rest, twos, fives = value.denominator, 0, 0
    while rest % 2 == 0:
        rest, twos = rest // 2, twos + 1
    while rest % 5 == 0:
        rest, fives = rest // 5, fives + 1
    if rest != 1:
        return None
    places = max(twos, fives)
    digits = str(abs(value.numerator) * 10**places // value.denominator).rjust(places + 1, "0")
    return ("-" if value < 0 else "") + f"{digits[:-places]}.{digits[-places:]}".rstrip("0")


def canonical_number(value: Fraction) -> str:
    """'36', '1234.5' or '1/3': exact, so it parses back to the same value (float text did not:
    the repr of 1e20 + 0.5 is '1e+20', and stripping its zeros made it '1e+2')."""
    if value.denominator == 1:
        return str(value.numerator)
    return _terminating_decimal(value) or f"{value.numerator}/{value.denominator}"


def normalize_number(text: str) -> str | None:
    """'$1,234.50' -> '1234.5', '36.0' -> '36', '3/4' -> '0.75'; None unless exactly one number."""
    value = parse_number(text)
    return None if value is None else canonical_number(value)


def answer_fields(text: str) -> list[str]:
    """The answer fields of a final message outside tool-call markup, all in the first form it
    uses: <answer>..</answer>, else \\boxed{..}, else '#### ..'."""
    visible = _TOOL_MARKUP.sub(" ", text)
    for pattern in _ANSWER_FORMS:
        found = pattern.findall(visible)
        if found:
            return found
    return []


def extract_answer(text: str) -> str | None:
    """The model's final answer: exactly one number. Restating it ('\\boxed{36} ... <answer>36</answer>')
    is fine; fields that disagree, or a field with no number or several, give None (a hedge)."""
    values = {parse_number(field) for field in answer_fields(text)}
    if len(values) != 1 or None in values:
        return None
    return canonical_number(values.pop())


def is_correct(predicted: str | None, truth: str) -> bool:
    """Both texts are one number each, and they differ by at most ANSWER_TOLERANCE."""
    if predicted is None:
        return False
    p, t = (parse_number(x, _CANONICAL_MAX_DIGITS) for x in (predicted, truth))
    return p is not None and t is not None and abs(p - t) <= ANSWER_TOLERANCE
