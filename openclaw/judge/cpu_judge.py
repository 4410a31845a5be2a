"""The CPU default judge: MiniLM sentence embeddings + a trained logistic head + a few decisive
rules, and the feedback-as-hint extractor. ~10 ms per turn on 2 cores, no GPU, no hub."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from openclaw.judge.embedder import SentenceEmbedder
from openclaw.judge.features import build_matrix
from openclaw.judge.feedback_hint import feedback_hint
from openclaw.judge.head import CLASSES, DEFAULT_HEAD_PATH, LogisticHead
from openclaw.judge.hints import DEFAULT_MIN_HINT_CHARS, aggregate_hints
from openclaw.judge.prompts import normalize_role
from openclaw.judge.rules import decisive_rule
from openclaw.judge.schema import JudgeInput, JudgeResult, Stopwatch


class CpuJudge:
    name = "cpu"

    def __init__(self, head_path: str | Path | None = None, embedder: SentenceEmbedder | None = None,
                 use_rules: bool = True, extract_hints: bool = True,
                 min_hint_chars: int = DEFAULT_MIN_HINT_CHARS) -> None:
        self.head = LogisticHead.load(head_path or DEFAULT_HEAD_PATH)
        self.embedder = embedder or SentenceEmbedder()
        self.use_rules = use_rules
        self.extract_hints = extract_hints
        self.min_hint_chars = min_hint_chars

    def predict_proba(self, items: list[JudgeInput]) -> np.ndarray:
        responses = [i.response or "" for i in items]
        states = [i.next_state or "" for i in items]
        emb = self.embedder.embed(responses + states)
        x = build_matrix(responses, states, [i.next_state_role for i in items], emb[: len(items)], emb[len(items):])
        return self.head.predict_proba(x)

    def judge_batch(self, items: list[JudgeInput]) -> list[JudgeResult]:
        if not items:
            return []
        watch = Stopwatch()
        proba = self.predict_proba(items)
        per_item = watch.elapsed() / len(items)
        results = []
        for item, p in zip(items, proba, strict=True):
            role = normalize_role(item.next_state_role)
            rule = decisive_rule(item.next_state or "", role) if self.use_rules else None
            label = rule.label if rule else CLASSES[int(np.argmax(p))]
            probs = {str(c): round(float(v), 4) for c, v in zip(CLASSES, p, strict=True)}
            why = f"rule:{rule.rule}" if rule else f"head p={probs}"
            result = JudgeResult(
                reward=float(label), votes=[label], backend=self.name,
                rationale=f"cpu judge ({role} next state): {why}", vote_reason="single_vote",
                timings={"score_s": per_item}, extra={"proba": probs, "rule": rule.rule if rule else None},
            )
            if self.extract_hints:
                vote = feedback_hint(item.next_state, role, label, self.min_hint_chars)
                agg = aggregate_hints([vote], self.min_hint_chars)
                result.hint, result.hint_reason = agg.hint, agg.reason
                result.hint_votes = [{"accept": vote.accept, "hint": vote.hint}]
            result.timings["total_s"] = per_item
            results.append(result)
        return results

    def close(self) -> None:
        pass
