"""Measuring learning without the judge: the persona's own rule on held-out prompts, a fixed
capability probe, and KL(policy || base) on the policy's own held-out answers.

Replies come from the served engine through SGLang's native `/generate` (greedy, so every
evaluation point is deterministic), which the RL intercept never records: evaluation traffic
is never trained on. With `adapter`, the replies are that user's LoRA adapter's (the request's
`lora_path`), on a server that serves one per user.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from openclaw.control.probe import ProbeItem, load_probe, probe_correct
from openclaw.demo.personas import Persona, PromptItem, load_prompts, on_topic, words


@dataclass
class EvalPoint:
    interactions: int
    weight_version: int
    acceptance: float  # % of held-out replies the persona accepts (preference met AND on topic)
    preference: float  # % meeting the preference alone (what a length-only reward optimises)
    on_topic: float  # % carrying the prompt's reference facts
    capability: float  # % of probe questions answered correctly
    mean_words: float
    kl_to_base: float | None  # mean per-token KL(policy || base) on the held-out replies
    seconds: float = 0.0
    examples: list[dict[str, Any]] = field(default_factory=list)  # every held-out reply with its verdict
    probe_examples: list[dict[str, Any]] = field(default_factory=list)  # every probe answer, correct or not

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def chat_prompt_ids(tokenizer: Any, text: str) -> list[int]:
    from openclaw.server.prompting import user_prompt_ids

    return user_prompt_ids(tokenizer, text)


def generate_greedy(url: str, tokenizer: Any, prompts: list[str], max_tokens: int,
                    adapter: str | None = None) -> list[tuple[list[int], list[int], str]]:
    """(prompt ids, output ids, text) per prompt, one batched /generate call (by `adapter` if given)."""
    from openclaw.engines.sglang_client import SyncSGLangClient

    ids = [chat_prompt_ids(tokenizer, p) for p in prompts]
    body: dict[str, Any] = {"input_ids": ids, "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0.0,
                                                                  "skip_special_tokens": True}}
    if adapter is not None:
        body["lora_path"] = adapter
    with SyncSGLangClient(url, timeout=1800) as client:
        outs = client.generate(body)
    outs = outs if isinstance(outs, list) else [outs]
    return [(p, list(o["output_ids"]), str(o.get("text", "")).strip()) for p, o in zip(ids, outs, strict=True)]


@torch.no_grad()
def kl_to_base(model: Any, sequences: list[tuple[list[int], list[int]]], micro_batch: int = 4) -> float | None:
    """Mean over response tokens of KL(policy(.|ctx) || base(.|ctx)), full vocabulary. `model`
    is the trainer's PEFT model: the base is the same model with its adapters disabled."""
    if not hasattr(model, "disable_adapter"):
        return None
    total, count = 0.0, 0
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(sequences), micro_batch):
            chunk = [(p, r) for p, r in sequences[start:start + micro_batch] if r]
            if not chunk:
                continue
            width = max(len(p) + len(r) for p, r in chunk)
            ids = torch.zeros((len(chunk), width), dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, (p, r) in enumerate(chunk):
                ids[i, : len(p) + len(r)] = torch.tensor(p + r)
                mask[i, : len(p) + len(r)] = 1
            pol = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), -1)
            with model.disable_adapter():
                base = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), -1)
            for i, (p, r) in enumerate(chunk):
                sl = slice(len(p) - 1, len(p) + len(r) - 1)  # positions predicting the response tokens
                kl = (pol[i, sl].exp() * (pol[i, sl] - base[i, sl])).sum(-1)
                total += float(kl.sum())
                count += kl.numel()
    finally:
        model.train(was_training)
    return total / count if count else None


def evaluate(url: str, tokenizer: Any, persona: Persona, heldout: list[PromptItem], probe: list[ProbeItem], *,
             interactions: int, weight_version: int, max_tokens: int, probe_max_tokens: int = 32,
             kl_model: Any = None, adapter: str | None = None) -> EvalPoint:
    import random
    import time

    t0 = time.perf_counter()
    rng = random.Random(0)
    replies = generate_greedy(url, tokenizer, [h.prompt for h in heldout], max_tokens, adapter)
    verdicts = [persona.judge(text, item, rng) for (_, _, text), item in zip(replies, heldout, strict=True)]
    answers = generate_greedy(url, tokenizer, [q.question for q in probe], probe_max_tokens, adapter)
    correct = [probe_correct(t, q) for (_, _, t), q in zip(answers, probe, strict=True)]
    n = max(1, len(heldout))
    kl = kl_to_base(kl_model, [(p, r) for p, r, _ in replies]) if kl_model is not None else None
    return EvalPoint(
        interactions=interactions, weight_version=weight_version,
        acceptance=100.0 * sum(v.accepted for v in verdicts) / n,
        preference=100.0 * sum(v.meets_preference for v in verdicts) / n,
        on_topic=100.0 * sum(v.on_topic for v in verdicts) / n,
        capability=100.0 * sum(correct) / max(1, len(probe)),
        mean_words=sum(words(t) for _, _, t in replies) / n,
        kl_to_base=kl, seconds=time.perf_counter() - t0,
        examples=[_example(item, text, v) for (_, _, text), item, v in zip(replies, heldout, verdicts, strict=True)],
        probe_examples=[{"question": q.question, "answer": t, "correct": ok}
                        for (_, _, t), q, ok in zip(answers, probe, correct, strict=True)],
    )


def judged_by(persona: Persona, point: EvalPoint, heldout: list[PromptItem]) -> list[dict[str, Any]]:
    """`point`'s held-out replies judged by another persona (as `examples`: what each persona's
    acceptance is computed from), to see whether one user's adapter moved another user's verdicts."""
    return judge_examples(persona, point.examples, heldout)


def judge_examples(persona: Persona, examples: list[dict[str, Any]], heldout: list[PromptItem]) -> list[dict[str, Any]]:
    """Recorded held-out replies (an evaluation point's `examples`, also as read back from a
    results.json) judged afresh by `persona`."""
    import random

    rng = random.Random(0)
    if [e["prompt"] for e in examples] != [h.prompt for h in heldout]:
        raise ValueError("the point's replies are not answers to these held-out prompts")
    return [_example(item, e["reply"], persona.judge(e["reply"], item, rng))
            for e, item in zip(examples, heldout, strict=True)]


def _example(item: PromptItem, reply: str, verdict: Any) -> dict[str, Any]:
    """One held-out reply with its verdict, as an evaluation point keeps it."""
    return {"prompt": item.prompt, "reply": reply, "accepted": verdict.accepted, "on_topic": verdict.on_topic,
            "meets_preference": verdict.meets_preference}


def heldout_prompts() -> list[PromptItem]:
    return load_prompts("persona_heldout_prompts.jsonl")


def train_prompts() -> list[PromptItem]:
    return load_prompts("persona_train_prompts.jsonl")


__all__ = ["EvalPoint", "ProbeItem", "chat_prompt_ids", "evaluate", "heldout_prompts", "judge_examples", "judged_by", "kl_to_base",
           "load_probe", "on_topic",
           "probe_correct", "train_prompts"]
