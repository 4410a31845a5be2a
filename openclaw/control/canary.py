"""The canary check a new weight version passes before it is served.

Two measurements, each taken for the candidate and for the version being served, on a private
engine instance (never the serving one, so chat keeps being answered at full speed by the
serving weights while the candidate is evaluated):

* **capability probe**: `openclaw/control/data/capability_probe.jsonl` answered greedily, checked
  with `openclaw.control.probe.probe_correct` (% correct);
* **the user's own recent sessions**: main turns the user rated (explicit feedback, else the
  judge's score) and, preferably, that no trainer has consumed yet (held out from training).
  Each recorded reply is replayed teacher-forced through the model: mean per-token log-prob of
  the replies rated good minus that of the replies rated bad ("prefers what the user liked").
  Teacher forcing rather than a fresh generation scored by the judge: it needs no judge call,
  it is deterministic in fp32, and it costs one forward per turn.

A candidate is refused when the probe accuracy drops by more than `max_probe_drop` points or
the sessions score drops by more than `max_sessions_drop` nats/token. The cost (seconds, tokens)
of every check is measured and returned with the result.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from openclaw.control.probe import load_probe, probe_correct

log = logging.getLogger("openclaw.control.canary")


@dataclass(frozen=True)
class CanaryConfig:
    probe_max_tokens: int = 16
    probe_limit: int | None = None  # None: every probe question
    max_probe_drop: float = 10.0  # percentage points of probe accuracy
    max_sessions_drop: float = 0.5  # nats/token of the sessions score
    session_turns: int = 16  # most recent rated turns replayed


@dataclass(frozen=True)
class RatedTurn:
    """A recorded reply and the user's verdict on it (+1 good, -1 bad)."""

    turn_id: int
    prompt_ids: tuple[int, ...]
    response_ids: tuple[int, ...]
    verdict: int
    source: str  # "feedback" | "judge"
    unseen: bool  # not consumed by any trainer yet (held out from training)


@dataclass
class CanaryScores:
    model_path: str
    probe_accuracy: float
    probe_answers: list[str]
    sessions_score: float | None  # mean logp(good) - mean logp(bad); None without rated turns
    rated_turns: int
    seconds: float
    tokens: int  # tokens generated + teacher-forced

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CanaryResult:
    passed: bool
    reasons: list[str]
    candidate: CanaryScores
    incumbent: CanaryScores
    seconds: float  # wall time of the whole check (incumbent scores may come from a cache)
    config: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "reasons": self.reasons, "candidate": self.candidate.to_dict(),
                "incumbent": self.incumbent.to_dict(), "seconds": self.seconds, "config": self.config}


def rated_turns_from_buffer(buffer: Any, limit: int, user_id: str | None = None) -> list[RatedTurn]:
    """The newest main turns with a verdict (of one user's sessions with `user_id`), unseen by
    trainers first. Explicit feedback outranks the judge's score (the rule of `openclaw.control.feedback`)."""
    from openclaw.buffer.users import session_owner

    positions = [buffer.consumer_position(c["consumer_id"]) for c in buffer.stats()["consumers"]]
    seen = max((int(p.get("max_turn_id") or 0) for p in positions if p), default=0)
    recs = [r for r in reversed(buffer.latest_turns(max(limit * 8, 64)))
            if r.turn_type == "main" and r.prompt_ids and r.response_ids
            and (user_id is None or session_owner(r.session_id) == user_id)]
    feedback = buffer.feedback_for([int(r.turn_id) for r in recs]) if hasattr(buffer, "feedback_for") else {}
    out: list[RatedTurn] = []
    for rec in recs:
        fb = feedback.get(int(rec.turn_id))
        if fb is not None:
            score, source = float(fb["score"]), "feedback"
        elif isinstance((rec.judgement or {}).get("score"), int | float):
            score, source = float(rec.judgement["score"]), "judge"
        else:
            continue
        if score == 0:
            continue
        out.append(RatedTurn(int(rec.turn_id), tuple(rec.prompt_ids), tuple(rec.response_ids),
                             1 if score > 0 else -1, source, unseen=int(rec.turn_id) > seen))
    out.sort(key=lambda t: (not t.unseen, -t.turn_id))
    return out[:limit]


class Canary:
    """Scores a model folder on a private engine. `rated_turns` is read at every check."""

    def __init__(self, config: CanaryConfig, tokenizer: Any, dtype: Any, device: str, base_model_path: str,
                 prompt_ids: Callable[[str], list[int]], rated_turns: Callable[[], list[RatedTurn]] = list) -> None:
        """`prompt_ids` renders a user question as the server renders a chat turn (the server's own
        template, passed in by the server: the canary must ask what users' turns look like)."""
        self.config = config
        self._tokenizer = tokenizer
        self._dtype = dtype
        self._device = device
        self._base = base_model_path
        self._rated_turns = rated_turns
        probe = load_probe()
        self._probe = probe[: config.probe_limit] if config.probe_limit else probe
        self._probe_ids = [tuple(prompt_ids(q.question)) for q in self._probe]

    def score(self, model_path: str) -> CanaryScores:
        """Load `model_path` (full folder or adapter over the serving base) and measure it."""
        return asyncio.run(self._score(model_path, self._rated_turns()))

    def check(self, candidate_path: str, incumbent: CanaryScores | None, incumbent_path: str) -> CanaryResult:
        t0 = time.perf_counter()
        turns = self._rated_turns()
        inc = incumbent if incumbent is not None and incumbent.rated_turns == len(turns) else None
        if inc is None:  # the sessions part moves with new feedback: re-score the incumbent on the same turns
            inc = asyncio.run(self._score(incumbent_path, turns))
        cand = asyncio.run(self._score(candidate_path, turns))
        reasons = []
        drop = inc.probe_accuracy - cand.probe_accuracy
        if drop > self.config.max_probe_drop:
            reasons.append(f"capability probe {cand.probe_accuracy:.1f}% vs {inc.probe_accuracy:.1f}% served "
                           f"(-{drop:.1f} points > {self.config.max_probe_drop:g} allowed)")
        if cand.sessions_score is not None and inc.sessions_score is not None:
            sdrop = inc.sessions_score - cand.sessions_score
            if sdrop > self.config.max_sessions_drop:
                reasons.append(f"your rated sessions: score {cand.sessions_score:.3f} vs {inc.sessions_score:.3f} "
                               f"served (-{sdrop:.3f} nats/token > {self.config.max_sessions_drop:g} allowed)")
        return CanaryResult(passed=not reasons, reasons=reasons, candidate=cand, incumbent=inc,
                            seconds=time.perf_counter() - t0, config=asdict(self.config))

    async def _score(self, model_path: str, turns: list[RatedTurn]) -> CanaryScores:
        from openclaw.engines.base import GenerationRequest, SamplingParams
        from openclaw.engines.hf_engine import HFEngine
        from openclaw.engines.weights import load_model

        t0 = time.perf_counter()
        loaded = await asyncio.to_thread(load_model, model_path, self._dtype, self._device, self._base)
        engine = HFEngine(loaded.model, self._tokenizer, model_path, loaded.base_model_path, self._device,
                          self._dtype, max_batch_size=8)
        try:
            greedy = SamplingParams(max_new_tokens=self.config.probe_max_tokens, temperature=0.0)
            answers = await asyncio.gather(*(engine.generate(GenerationRequest(ids, greedy))
                                             for ids in self._probe_ids))
            correct = sum(probe_correct(a.text, q) for a, q in zip(answers, self._probe, strict=True))
            tokens = sum(len(a.output_ids) for a in answers)
            good, bad = [], []
            for turn in turns:
                res = await engine.generate(GenerationRequest(
                    turn.prompt_ids + turn.response_ids, SamplingParams(max_new_tokens=0, temperature=0.0),
                    return_logprob=True, logprob_start_len=len(turn.prompt_ids)))
                lps = [lp for lp in res.input_logprobs if lp is not None]
                tokens += len(turn.prompt_ids) + len(turn.response_ids)
                (good if turn.verdict > 0 else bad).append(sum(lps) / max(1, len(lps)))
        finally:
            await engine.shutdown()
        sessions = None
        if good or bad:
            sessions = (sum(good) / len(good) if good else 0.0) - (sum(bad) / len(bad) if bad else 0.0)
        return CanaryScores(model_path=model_path, probe_accuracy=100.0 * correct / max(1, len(self._probe)),
                            probe_answers=[a.text for a in answers], sessions_score=sessions,
                            rated_turns=len(turns), seconds=time.perf_counter() - t0, tokens=tokens)
