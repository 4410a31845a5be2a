"""The `conversation` family: the personal-agent suite of the main job, as a benchmark.

Greedy replies to the held-out prompts are judged by each persona's own rule (its preference
checkers plus the on-topic check: the reply must still answer the question); the capability probe
(questions with known answers) checks general knowledge survived; KL(model || base) on the held-out
replies measures how far the model moved. Replies come through the OpenAI chat API, so the same
numbers are measured on a local checkpoint and on a remote endpoint.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openclaw.evaluation.chat import greedy_replies
from openclaw.evaluation.progress import Progress
from openclaw.evaluation.source import Target


@dataclass(frozen=True)
class ConversationConfig:
    personas: tuple[str, ...]  # names or persona files
    suite: bool  # the persona suite ("conversation")
    capability: bool
    kl: bool
    limit: int | None
    max_tokens: int = 100
    probe_max_tokens: int = 32


def bootstrap_ci(hits: list[bool], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval (over prompts) of a rate in %."""
    if not hits:
        return (0.0, 0.0)
    rng = random.Random(seed)
    n = len(hits)
    rates = sorted(100.0 * sum(hits[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return (rates[int(0.025 * resamples)], rates[min(resamples - 1, int(0.975 * resamples))])


def _rate(hits: list[bool]) -> float:
    return 100.0 * sum(hits) / max(1, len(hits))


def run_conversation(target: Target, cfg: ConversationConfig) -> dict[str, Any]:
    from openclaw.demo.evaluate import heldout_prompts, load_probe, probe_correct
    from openclaw.demo.personas import load_persona

    result: dict[str, Any] = {}
    heldout = heldout_prompts()[: cfg.limit] if cfg.suite or cfg.kl else []
    replies: list[str] = []
    if heldout:
        with Progress(f"conversation/{target.label}", len(heldout)) as progress:
            replies = greedy_replies(target, [[{"role": "user", "content": h.prompt}] for h in heldout],
                                     cfg.max_tokens, progress)
        result["seconds_replies"] = round(progress.elapsed, 1)
    if cfg.suite:
        personas: dict[str, Any] = {}
        for spec in cfg.personas:
            persona = load_persona(spec)
            rng = random.Random(0)  # the feedback text is drawn at random; the verdict is not
            verdicts = [persona.judge(reply, item, rng) for reply, item in zip(replies, heldout, strict=True)]
            accepted = [bool(v.accepted) for v in verdicts]
            lo, hi = bootstrap_ci(accepted)
            personas[persona.name] = {
                "source": spec,
                "acceptance": _rate(accepted), "acceptance_ci95": [lo, hi],
                "preference": _rate([bool(v.meets_preference) for v in verdicts]),
                "on_topic": _rate([bool(v.on_topic) for v in verdicts]), "n": len(verdicts),
            }
        result["personas"] = personas
        result["mean_words"] = sum(len(r.split()) for r in replies) / max(1, len(replies))
        result["examples"] = [{"prompt": h.prompt, "reply": r} for h, r in zip(heldout[:5], replies[:5], strict=True)]
    if cfg.capability:
        probe = load_probe()[: cfg.limit]
        with Progress(f"capability/{target.label}", len(probe)) as progress:
            answers = greedy_replies(target, [[{"role": "user", "content": q.question}] for q in probe],
                                     cfg.probe_max_tokens, progress)
        result["capability"] = {"accuracy": _rate([probe_correct(a, q) for a, q in zip(answers, probe, strict=True)]),
                                "n": len(probe)}
    if cfg.kl:
        result["kl"] = kl_result(target, [h.prompt for h in heldout], replies)
    return result


def kl_result(target: Target, prompts: list[str], replies: list[str]) -> dict[str, Any]:
    """Mean per-token KL(model || base) on the held-out replies, or why it is not available."""
    if target.weights_path is None:
        return {"kl_to_base": None, "note": "not available: the model is behind an endpoint, KL needs its "
                "weights and the base's logits over the full vocabulary (run with --model-path)"}
    if not (Path(target.weights_path) / "adapter_config.json").is_file():
        return {"kl_to_base": None, "note": "not available: a full-model folder; KL is measured for LoRA adapter "
                "checkpoints, whose base is the same model with the adapter disabled"}
    from openclaw.demo.evaluate import kl_to_base

    model, tokenizer = _peft_model(target.weights_path)
    sequences = [(_chat_prompt_ids(tokenizer, p), list(tokenizer(r, add_special_tokens=False)["input_ids"]))
                 for p, r in zip(prompts, replies, strict=True)]
    return {"kl_to_base": kl_to_base(model, sequences), "n": len(sequences), "note": None}


def _chat_prompt_ids(tokenizer: Any, text: str) -> list[int]:
    # Rendered exactly as the server renders a one-message chat request.
    from openclaw.server.prompting import ToolMode, render_prompt

    return render_prompt(tokenizer, [{"role": "user", "content": text}], None, ToolMode(parse=False)).input_ids


def _peft_model(path: str) -> tuple[Any, Any]:
    """The adapter on its base, unmerged (fp32, CPU), so the base is the same model with it disabled."""
    from peft import PeftConfig, PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from openclaw.evaluation.source import tokenizer_folder

    base = PeftConfig.from_pretrained(path).base_model_name_or_path
    model = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base, dtype="float32"), path)
    return model, AutoTokenizer.from_pretrained(tokenizer_folder(path))
