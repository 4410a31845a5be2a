"""`--custom-rm-path`: a user reward plugin replaces the scorer.

Loaded and adapted by the trainer's plugin loader (slime.utils.plugins), so the same file works
for the judge and for the trainer, in both contracts:
  * reference: `get_reward_model(config)` -> object with `.score(prompt, response, next_state)`
  * slime:     `async fn(args, sample) -> float | dict` (dict: "score" or "reward" is the reward)
Each call is bounded by --judge-timeout (a hung plugin yields a recorded failure, not a hang).
Hints come from the default feedback extractor (the plugin only scores).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import threading
from collections.abc import Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import fields

from openclaw.judge.config import JudgeConfig
from openclaw.judge.feedback_hint import feedback_hint
from openclaw.judge.prompts import normalize_role
from openclaw.judge.rules import decisive_rule, lexicon_hits
from openclaw.judge.schema import JudgeFailure, JudgeInput, JudgeResult, Stopwatch

REWARD_KEYS = ("score", "reward")


def plugin_namespace(config: JudgeConfig) -> argparse.Namespace:
    """What the plugin sees as `args` / `config`: every judge setting under its flag name."""
    ns = {f.name: getattr(config, f.name) for f in fields(config)}
    ns.update(majority_vote_n=config.m, prm_m=config.m, majority_vote_threshold=config.threshold,
              judge_model_path=config.prm_model_path, group_rm=False)
    return argparse.Namespace(**ns)


def _scalar(value: object) -> float:
    """The plugin's reward as a finite float; anything else is an error (recorded as a failure),
    never a silent 0."""
    if isinstance(value, Mapping):
        for k in REWARD_KEYS:
            if k in value:
                return _scalar(value[k])
        raise ValueError(f"reward dict has none of the keys {REWARD_KEYS}: {sorted(value)}")
    if isinstance(value, bool) or value is None:
        raise ValueError(f"reward must be a number, got {value!r}")
    reward = float(value)  # type: ignore[arg-type]  # ValueError/TypeError for text: recorded
    if not math.isfinite(reward):
        raise ValueError(f"reward must be finite, got {reward}")
    return reward


def _feedback_label(next_state: str, role: str) -> int:
    rule = decisive_rule(next_state, role)
    if rule:
        return rule.label
    hits = lexicon_hits(next_state)
    return -1 if hits["negative"] + hits["redo"] + hits["correction"] > hits["positive"] else 0


class CustomJudge:
    name = "custom"

    def __init__(self, config: JudgeConfig) -> None:
        from slime.utils.plugins import load_reward_model  # the trainer's loader: one contract

        self.config = config
        self.rm = load_reward_model(config.custom_rm_path, plugin_namespace(config))
        # Calls run on daemon threads (a hung plugin must not block interpreter exit, which a
        # ThreadPoolExecutor would); at most this many may be in flight, hung ones included.
        self._slots = threading.BoundedSemaphore(max(4, 4 * config.batch_size * config.num_workers))

    def _submit(self, item: JudgeInput) -> Future:
        fut: Future = Future()
        if not self._slots.acquire(blocking=False):
            fut.set_exception(RuntimeError("too many custom reward model calls still running (hung plugin?)"))
            return fut

        def run() -> None:
            try:
                fut.set_result(self._score_one(item))
            except BaseException as e:  # noqa: BLE001 - delivered to the waiting worker
                fut.set_exception(e)
            finally:
                self._slots.release()

        threading.Thread(target=run, name="custom-rm-call", daemon=True).start()
        return fut

    def _score_one(self, item: JudgeInput) -> object:
        from slime.utils.types import Sample

        sample = Sample(prompt=item.prompt if item.prompt is not None else "", response=item.response,
                        metadata={"next_state": item.next_state, "next_state_role": item.next_state_role})
        return asyncio.run(self.rm.score(sample))

    def judge_batch(self, items: list[JudgeInput]) -> list[JudgeResult | JudgeFailure]:
        futures = [self._submit(it) for it in items]
        out: list[JudgeResult | JudgeFailure] = []
        for item, fut in zip(items, futures, strict=True):
            watch = Stopwatch()
            try:
                raw = fut.result(timeout=self.config.timeout_s)
                reward = _scalar(raw)
            except FutureTimeout:
                out.append(JudgeFailure(f"custom reward model timed out after {self.config.timeout_s:g}s"))
                continue
            except Exception as e:  # noqa: BLE001 - user code: any error is recorded, never fatal
                out.append(JudgeFailure(f"custom reward model failed: {type(e).__name__}: {e}"[:500]))
                continue
            role = normalize_role(item.next_state_role)
            result = JudgeResult(reward=reward, votes=[], backend=self.name,
                                 rationale=f"custom reward model {self.config.custom_rm_path}",
                                 vote_reason="custom", timings={"score_s": watch.elapsed()},
                                 extra={"raw": raw if isinstance(raw, (int, float)) else dict(raw)})
            if self.config.extract_hints:
                vote = feedback_hint(item.next_state, role, _feedback_label(item.next_state, role),
                                     self.config.hint_min_chars)
                result.hint = vote.hint if vote.accept else None
                result.hint_reason = "accepted" if result.hint else "rejected"
                result.hint_votes = [{"accept": vote.accept, "hint": vote.hint}]
            out.append(result)
        return out

    def close(self) -> None:
        pass  # nothing owned: in-flight calls are daemon threads
