"""Built-in rewards (`--rm-type`): verifiable, rule-based scores of a Sample.

math / gsm8k / exact : extracted answer (last \\boxed{...}, else "#### x", else the last number)
                       equals the label after normalisation -> 1.0 else 0.0
keyword              : 1.0 when the label (comma-separated words allowed: any) occurs in the response
length               : min(1, response_length / label) with label = target length in tokens
"""

from __future__ import annotations

import re
from typing import Any

from slime.utils.types import Sample

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:/\d+)?")


def last_boxed(text: str) -> str | None:
    """Content of the last \\boxed{...} (balanced braces), or None."""
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j]
    return None


def extract_answer(text: str) -> str | None:
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    if "####" in text:
        return text.rsplit("####", 1)[1].strip().split("\n")[0]
    numbers = _NUMBER.findall(text)
    return numbers[-1] if numbers else None


def label_answer(label: str) -> str:
    """The reference answer inside a label: \\boxed{..} or GSM8K's "#### x", else the label itself."""
    boxed = last_boxed(label)
    if boxed is not None:
        return boxed
    if "####" in label:
        return label.rsplit("####", 1)[1].strip().split("\n")[0]
    return label


def normalize_answer(answer: str) -> str:
    a = answer.strip().strip("$").strip()
    a = a.replace(",", "").replace("\\!", "").replace(" ", "")
    a = re.sub(r"\\text\{(.*?)\}", r"\1", a)
    a = a.rstrip(".")
    try:
        value = float(a)
        return str(int(value)) if value == int(value) else str(value)
    except ValueError:
        return a.lower()


def math_reward(response: str, label: str | None) -> float:
    if label is None:
        raise ValueError("rm-type math needs a label (--label-key)")
    got = extract_answer(response)
    expected = label_answer(label)
    return 1.0 if got is not None and normalize_answer(got) == normalize_answer(expected) else 0.0


def keyword_reward(response: str, label: str | None) -> float:
    if not label:
        raise ValueError("rm-type keyword needs a label (the keyword)")
    words = [w.strip().lower() for w in label.split(",") if w.strip()]
    text = response.lower()
    return 1.0 if any(w in text for w in words) else 0.0


def length_reward(sample: Sample) -> float:
    target = float(sample.label) if sample.label else 1.0
    return min(1.0, sample.response_length / max(1.0, target))


RM_TYPES = ("math", "gsm8k", "exact", "keyword", "length")


def builtin_reward(rm_type: str, sample: Sample) -> float:
    if rm_type in ("math", "gsm8k", "exact"):
        return math_reward(sample.response, sample.label)
    if rm_type == "keyword":
        return keyword_reward(sample.response, sample.label)
    if rm_type == "length":
        return length_reward(sample)
    raise ValueError(f"unknown --rm-type {rm_type!r}; choose one of {', '.join(RM_TYPES)} or pass --custom-rm-path")


async def async_rm(args: Any, sample: Sample) -> float | dict[str, Any]:
    """slime's `async_rm(args, sample)`: the custom RM plugin if given, else the built-in."""
    from slime.rollout.plugins_io import load_optional

    rm = load_optional(args, "custom_rm_path", "rm")
    if rm is not None:
        return await rm.score(sample)
    rm_type = getattr(args, "rm_type", None)
    if not rm_type:
        raise ValueError("no reward: pass --rm-type or --custom-rm-path")
    return builtin_reward(rm_type, sample)


async def batched_async_rm(args: Any, samples: list[Sample]) -> list[float | dict[str, Any]]:
    """Rewards for one group: one call with --group-rm (custom RM), else one per sample."""
    from slime.rollout.plugins_io import load_optional

    rm = load_optional(args, "custom_rm_path", "rm")
    if rm is not None:
        return await rm.score_group(samples)
    return [await async_rm(args, s) for s in samples]
