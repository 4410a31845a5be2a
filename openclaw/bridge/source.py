"""The buffer as a trainer data source: wait for judged turns, hand them out, commit them with
the checkpoint.

Used by the trainer as `--data-source-path openclaw.bridge.BufferDataSource` (the method
folders' rollout functions call `drain`). What a drain does:
  1. wait until `rollout_batch_size * n_samples_per_prompt` *trainable* judged main turns exist
     for this consumer (polling the buffer; `--buffer-wait-timeout` bounds the wait, a progress
     line is printed every `--buffer-progress-interval` seconds); with `--buffer-user U` only U's
     turns exist for it (the buffer's query selects them), under U's own consumer id;
  2. turn each into a Sample with the prompt ids, response ids and engine log-probs exactly as
     the server recorded them (never re-tokenised, never padded);
  3. reward = the judge's score (1 / -1 / 0), its graded score in [-1, 1] with
     `--openclaw-rl-score graded`, or `--custom-rm-path` when given (binary RL;
     `openclaw.bridge.reward`).

Only turns that carry signal for the method are trainable (`trainable_kinds`). Turns without
signal are counted (`rollout/buffer_skipped/<reason>`) and consumed without training. Turns
beyond the batch are not touched: they stay in the buffer for the next rollout. Nothing is
marked consumed here: the ids handed out are part of the data source's state, which the driver
writes into the trainer checkpoint; the buffer's `commit_consumed` runs once that checkpoint
exists (next rollout) or on resume, so a crash never loses or double-trains a turn
(`TrajectoryBuffer` documents the protocol).

Baseline: live turns are not grouped (one response per prompt), so GRPO's group mean does not
exist. Two choices, both slime flags:
  * baseline 0 (`--n-samples-per-prompt 1 --disable-rewards-normalization`): advantage = score.
  * batch mean (`--rollout-batch-size 1 --n-samples-per-prompt G`): G consecutive live turns
    form one GRPO group, so the baseline is their mean score.
Group normalisation over groups of one (every advantage 0) is refused with an explanation.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slime.utils.types import Sample

from openclaw.bridge.behaviour import add_behaviour_logprobs
from openclaw.bridge.flags import DEFAULT_PROGRESS_INTERVAL_S, check_buffer_user, check_training_method
from openclaw.bridge.reward import RlSignal, RunningBaseline
from openclaw.bridge.turns import KINDS, TurnSignal, turn_signal, turn_to_sample
from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.provenance import SERVED_WEIGHTS
from openclaw.control.ledger import record_step, register_trainer_files, weight_version_floor
from openclaw.httpapi.identity import valid_user_id
from openclaw.methods import Method, get_method

log = logging.getLogger("openclaw.bridge")


@dataclass(frozen=True)
class DrainConfig:
    buffer_dir: Path
    consumer_id: str
    batch_size: int
    wait_timeout_s: float | None  # None: wait without limit (--buffer-wait-timeout 0)
    min_batch: int
    poll_interval_s: float
    progress_interval_s: float
    max_staleness: int | None
    save_dir: str | None
    resume_from: str | None
    # --buffer-user: only this user's turns are handed out, skipped or consumed (None: every user's)
    user_id: str | None = None

    @classmethod
    def from_args(cls, args: Any, method: str | Method) -> DrainConfig:
        method = get_method(method).name  # a MethodError names the known methods
        buffer_dir = getattr(args, "rl_buffer_dir", None)
        if not buffer_dir:
            raise ValueError("no trajectory buffer: pass the method folder's --extra-args-provider-path "
                             "(e.g. openclaw-rl/openclaw_rl_args.py) and --rl-buffer-dir DIR (the server's --rl-buffer-dir)")
        timeout = getattr(args, "buffer_wait_timeout", None)
        user = check_buffer_user(getattr(args, "buffer_user", None))
        check_adapter_user(getattr(args, "lora_adapter_name", None), user)
        return cls(
            buffer_dir=Path(buffer_dir).expanduser().resolve(),
            consumer_id=getattr(args, "buffer_consumer_id", None) or default_consumer_id(method, user),
            batch_size=int(args.rollout_batch_size),
            wait_timeout_s=float(timeout) if timeout else None,
            min_batch=max(1, int(getattr(args, "buffer_min_batch", 1) or 1)),
            poll_interval_s=float(getattr(args, "buffer_poll_interval", 1.0) or 1.0),
            progress_interval_s=float(getattr(args, "buffer_progress_interval", None) or DEFAULT_PROGRESS_INTERVAL_S),
            max_staleness=getattr(args, "max_staleness", None),
            save_dir=getattr(args, "save", None),
            resume_from=getattr(args, "load", None),
            user_id=user,
        )

    def whose(self) -> str:
        """How progress and error lines name what this drain reads."""
        return f"consumer {self.consumer_id}" + (f", user {self.user_id}" if self.user_id is not None else "")


def default_consumer_id(method: str, user: str | None) -> str:
    """One cursor per method, and per user for a per-user trainer: each user's trainer has its own
    position, so one user's progress never marks another user's turns consumed."""
    return f"openclaw-{method}" if user is None else f"openclaw-{method}-{user}"


def check_adapter_user(adapter: str | None, user: str | None) -> None:
    """The server serves user U the adapter loaded under U's id, so an adapter named like a user
    is that user's model: training it on another user's turns (or on everyone's) would serve them
    to U. An adapter name no user can have is served to nobody by default and is not checked."""
    if adapter is None or adapter == user or not valid_user_id(adapter):
        return
    said = f"--buffer-user {user}" if user is not None else "no --buffer-user (every user's turns)"
    raise ValueError(f"--lora-adapter-name {adapter} with {said}: the server serves user {adapter!r} the adapter "
                     f"loaded under that id, so it must train on that user's turns only; pass --buffer-user {adapter}")


def group_size(args: Any) -> int:
    return max(1, int(getattr(args, "n_samples_per_prompt", 1) or 1))


def check_live_args(args: Any) -> None:
    """Refuse settings under which live turns silently give zero advantages, and a --config file's
    training.method that is not the loaded method."""
    check_training_method(args)
    if group_size(args) == 1 and getattr(args, "advantage_estimator", "grpo") in ("grpo", "gspo") \
            and getattr(args, "rewards_normalization", True):
        raise ValueError("live turns are single responses: GRPO over groups of one gives every advantage 0. Either "
                         "pass --disable-rewards-normalization (baseline 0, advantage = judge score) or group G "
                         "consecutive turns with --n-samples-per-prompt G (baseline = their mean score)")


def _print_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


MAX_IDS_SHOWN = 8  # turns named per skipped-turns line
# Reasons every live run hits by design (the last turn of each session has no feedback): said the
# first time with what they mean, then only counted (`rollout/buffer_skipped/<reason>`), since a
# line per poll took a third of a live run's output (36 of 116 lines).
ROUTINE_SKIP_REASONS = frozenset({"no_next_state"})
# Why a judged main turn is consumed without training, in words for the trainer's output.
SKIP_REASONS = {
    "not_trainable": "stored non-trainable (a side turn, trainable: false, or redacted)",
    "no_token_ids": "no token ids (imported text without a tokenizer)",
    "stale": "generated more than --max-staleness weight versions ago",
    "no_next_state": "no next state: the session ended here, so there is no feedback to learn from",
    "zero_score": "binary RL: the judge's score is 0 (no signal; with --openclaw-rl-score graded: a rule's 0 or no valid vote)",
    "no_hint": "OPD: the judge extracted no hint from the next state",
    "no_signal": "combine: neither a non-zero score nor a hint",
}


@dataclass
class Drained:
    records: list[Any]
    skipped: Counter = field(default_factory=Counter)
    kinds: Counter = field(default_factory=Counter)
    waited_s: float = 0.0
    skipped_turns: list[tuple[int, str, str]] = field(default_factory=list)  # (turn id, session id, reason)
    # each taken turn's signal, assembled once (judge verdict + the user's feedback) and read by the rollout
    signals: dict[int, TurnSignal] = field(default_factory=dict)

    def signal(self, rec: Any) -> TurnSignal:
        return self.signals[int(rec.turn_id)]


class BufferDataSource:
    """`--data-source-path` for buffer-draining methods. Holds the ids handed out since the last
    buffer commit (`pending`); the driver saves them in each checkpoint (`consumer_positions`)."""

    def __init__(self, args: Any, method: str | None = None,
                 progress: Callable[[str], None] = _print_progress) -> None:
        self.args = args
        self.spec = get_method(method or getattr(args, "openclaw_method", None) or "rl")
        self.method = self.spec.name
        self.cfg = DrainConfig.from_args(args, self.spec)
        # Binary RL's reward flags (checked against slime's grouping here, before any wait); the
        # running baseline is state carried across steps and saved with the checkpoint.
        # combine's binary-RL half takes the score flag too (its provider defines no baseline flags).
        self.signal = RlSignal.from_args(args) if self.spec.uses_score else RlSignal()
        self.graded = self.signal.score == "graded"
        self.reward_baseline = RunningBaseline(self.signal.decay)
        # An existing buffer only: a mistyped path fails here (BufferNotFoundError names the path
        # and the server flag that creates it) instead of creating an empty buffer to wait on.
        self.buffer = TrajectoryBuffer.open(self.cfg.buffer_dir, create=False)
        self.progress = progress
        self.pending: set[int] = set()
        self.unreported: set[int] = set()  # handed out to train, not yet in the ledger (on_trained)
        self.handed_out = 0
        self.reported_skips: set[int] = set()  # each skipped turn is said once, however often it is seen
        self.explained_routine: set[str] = set()  # routine skip reasons already said (then only counted)
        self.opened_at = time.time()  # retractions journaled after this stop this trainer (`check_retractions`)
        self.prompts: list[Any] = []  # the driver asks len(prompts): a live buffer has no fixed epoch
        # Before the first dump is written: a retract deletes the dumps that hold the session.
        register_trainer_files(self.buffer, self.cfg.consumer_id,
                               debug_rollout_data=getattr(args, "save_debug_rollout_data", None))

    # ---- driver hooks (slime.ray.driver) --------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"handed_out": self.handed_out, "reward_baseline": self.reward_baseline.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.handed_out = int(state.get("handed_out", 0))
        self.reward_baseline.load_state_dict(state.get("reward_baseline") or {})

    def consumer_positions(self) -> dict[str, Any]:
        return {self.cfg.consumer_id: {"buffer_dir": str(self.cfg.buffer_dir), "pending_turn_ids": sorted(self.pending)}}

    def load_consumer_positions(self, positions: dict[str, Any]) -> None:
        """Resume: the checkpoint holds the ids trained since the last buffer commit; commit them
        now (idempotent), so they are never trained again."""
        pos = (positions or {}).get(self.cfg.consumer_id) or {}
        ids = [int(i) for i in pos.get("pending_turn_ids", [])]
        self.check_resumed_owner(ids)
        if ids:
            tag = Path(self.cfg.resume_from).name if self.cfg.resume_from else None
            n = self.buffer.commit_consumed(self.cfg.consumer_id, ids, checkpoint_tag=tag)
            log.info("resume: committed %d/%d turn(s) recorded in the checkpoint for %s", n, len(ids), self.cfg.consumer_id)

    def check_resumed_owner(self, ids: list[int]) -> None:
        """A per-user trainer resumed from a checkpoint whose pending turns are another user's (a
        checkpoint of another trainer under the same --buffer-consumer-id) would mark them
        consumed for this cursor: refused, naming them. Purged turns have no owner left to check."""
        if self.cfg.user_id is None or not ids:
            return
        other = sorted(t for t, u in self.buffer.turn_users(ids).items() if u != self.cfg.user_id)
        if other:
            raise ValueError(f"--load {self.cfg.resume_from}: the checkpoint's pending turns of {self.cfg.consumer_id} "
                             f"include {len(other)} turn(s) of users other than {self.cfg.user_id!r} "
                             f"({other[:MAX_IDS_SHOWN]}): it is not this user's trainer's checkpoint")

    def weight_version_floor(self) -> int:
        """The driver numbers this trainer's weight pushes after this (unique across restarts)."""
        return weight_version_floor(self.buffer, getattr(self.args, "rollout_engine_urls", None) or [])

    def before_weight_push(self) -> None:
        """The driver's last call before a push: weights that hold a retracted session never leave."""
        self.check_retractions()

    def on_trained(self, indices: list[int], step: int, weight_version: int) -> None:
        """The driver's report of a trained step: provenance ledger rows (sample index = turn id)."""
        record_step(self.buffer, self.cfg.consumer_id, indices, step, weight_version,
                    save_dir=self.cfg.save_dir, base_model=getattr(self.args, "hf_checkpoint", None),
                    adapter=getattr(self.args, "lora_adapter_name", None) or SERVED_WEIGHTS)
        self.unreported.difference_update(int(i) for i in indices)

    def check_retractions(self) -> None:
        """Policy "stop there": a session this trainer trained on was retracted after it started,
        so its weights (and anything it would push next) contain retracted data. Stop with the
        checkpoint to resume from instead of training on."""
        for r in self.buffer.retractions():
            if r["started_at"] < self.opened_at:
                continue
            if self.unreported & set(r["plan"].get("turn_ids", [])):  # taken before the retract, trained since
                raise RetractedTrainingError(
                    f"session {r['session_id']!r} was retracted ({r['state']}) while this trainer trained on it: its "
                    "weights hold retracted data and are not pushed. Restart from the latest checkpoint (--load)")
            if self.cfg.consumer_id in r["plan"].get("consumers", []):
                target = r["plan"].get("rollback_to") or {}
                raise RetractedTrainingError(
                    f"session {r['session_id']!r} was retracted ({r['state']}) after this trainer trained on it: its "
                    f"weights hold retracted data. Restart from {target.get('path') or 'the base model'} "
                    f"(--load / --hf-checkpoint); the served weights were rolled back to it")

    # ---- commit ------------------------------------------------------------------------------
    def commit_checkpointed(self) -> int:
        """Mark consumed what a durable checkpoint already contains. Without --save there is no
        checkpoint to tie the position to: ids are committed once their step has trained."""
        if not self.pending:
            return 0
        if not self.cfg.save_dir:
            ids, tag = sorted(self.pending), None
        else:
            from slime.utils.checkpoint import load_meta, resolve_checkpoint

            ckpt = resolve_checkpoint(self.cfg.save_dir)
            if ckpt is None:
                return 0
            pos = load_meta(ckpt).consumer_positions.get(self.cfg.consumer_id) or {}
            ids, tag = [int(i) for i in pos.get("pending_turn_ids", []) if int(i) in self.pending], ckpt.name
        if not ids:
            return 0
        n = self.buffer.commit_consumed(self.cfg.consumer_id, ids, checkpoint_tag=tag)
        self.pending.difference_update(ids)
        return n

    # ---- take ----------------------------------------------------------------------------
    def skip_reason(self, rec: Any, engine_version: int | None, retracting: frozenset[str],
                    signal: TurnSignal) -> str | None:
        if rec.session_id in retracting:
            return "retracting"  # a retract is purging this session: never train on it
        if not rec.trainable or rec.turn_type != "main":
            return "not_trainable"
        if not rec.prompt_ids or not rec.response_ids:
            return "no_token_ids"
        # A turn without log-probs (imported text) gets them from the current policy when drained
        # (openclaw.bridge.behaviour), so it is never stale.
        if rec.response_logprobs and self.cfg.max_staleness is not None and engine_version is not None \
                and engine_version - int(rec.weight_version or 0) > self.cfg.max_staleness:
            return "stale"
        if not rec.next_state:
            return "no_next_state"  # the session ended here: no feedback, nothing to learn from
        if getattr(self.args, "custom_rm_path", None) and _scalar_only(self.spec):
            return None  # the reward comes from --custom-rm-path, not the judge
        if signal.kind not in self.spec.trains_on:
            return self.spec.skip_reason
        return None

    def take(self, n: int, engine_version: int | None = None, stop: Any = None) -> Drained:
        """Wait for `n` trainable turns not yet handed out; returns them (oldest first)."""
        self.check_retractions()
        self.commit_checkpointed()
        out = Drained(records=[])
        seen: set[int] = set()  # ids taken by this call: pending only once the call returns them
        t0 = time.monotonic()
        deadline = None if self.cfg.wait_timeout_s is None else t0 + self.cfg.wait_timeout_s
        next_progress = t0 + self.cfg.progress_interval_s
        while True:
            # The user filter is in the buffer's query (before its LIMIT): other users' turns can
            # neither fill this page nor be skipped and consumed by this user's cursor.
            recs = self.buffer.fetch_judged(self.cfg.consumer_id, limit=len(self.pending) + len(seen) + n + 256,
                                            turn_type="main", user_id=self.cfg.user_id)
            self.check_owner(recs)
            retracting = frozenset(r["session_id"] for r in self.buffer.retractions(unfinished=True))
            new_skips: dict[str, list[tuple[int, str]]] = {}  # reason -> (turn id, session id)
            for rec in recs:
                if len(out.records) >= n:
                    break  # surplus stays in the buffer
                if rec.turn_id in self.pending or rec.turn_id in seen:
                    continue
                signal = turn_signal(rec, self.graded)
                reason = self.skip_reason(rec, engine_version, retracting, signal)
                seen.add(int(rec.turn_id))
                if reason:
                    out.skipped[reason] += 1
                    out.skipped_turns.append((int(rec.turn_id), rec.session_id, reason))
                    if int(rec.turn_id) not in self.reported_skips:
                        self.reported_skips.add(int(rec.turn_id))
                        new_skips.setdefault(reason, []).append((int(rec.turn_id), rec.session_id))
                else:
                    out.records.append(rec)
                    out.signals[int(rec.turn_id)] = signal
                    out.kinds[signal.kind] += 1
            self._report_skips(new_skips)
            if len(out.records) >= n:
                break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                if len(out.records) >= min(n, self.cfg.min_batch):
                    break
                raise TimeoutError(
                    f"{len(out.records)} trainable turn(s) after {self.cfg.wait_timeout_s:g}s in {self.cfg.buffer_dir} "
                    f"({self.cfg.whose()}, skipped {dict(out.skipped)}): is the server running with "
                    "--enable-rl-intercept on this buffer, and are judge workers running? "
                    "(--buffer-wait-timeout sets the limit)")
            if now >= next_progress:
                self.progress(f"waiting for {n} judged turns: {len(out.records)} so far, {now - t0:.0f} s "
                              f"({self.cfg.buffer_dir}, {self.cfg.whose()})")
                next_progress = now + self.cfg.progress_interval_s
            if stop is not None and stop.is_set():
                raise InterruptedError("rollout stopped while waiting for judged turns")
            wait = self.cfg.poll_interval_s if deadline is None else min(self.cfg.poll_interval_s, max(0.0, deadline - now))
            if stop is not None:
                stop.wait(wait)
            else:
                time.sleep(wait)  # polling the buffer (another process writes it)
        out.waited_s = time.monotonic() - t0
        self.pending.update(seen)
        self.unreported.update(int(r.turn_id) for r in out.records)
        self.handed_out += len(out.records) + sum(out.skipped.values())
        return out

    def check_owner(self, recs: list[Any]) -> None:
        """A per-user drain hands out, skips and consumes only its user's turns: a turn of another
        user here would be trained into (or consumed away from) the wrong adapter, so it stops the
        trainer instead of being dropped."""
        user = self.cfg.user_id
        other = [(int(r.turn_id), r.user_id) for r in recs if user is not None and r.user_id != user]
        if other:
            raise RuntimeError(f"{self.cfg.buffer_dir}: the buffer returned turns of other users to user {user!r}'s "
                               f"drain ({self.cfg.consumer_id}): {other[:MAX_IDS_SHOWN]}")

    def _report_skips(self, by_reason: dict[str, list[tuple[int, str]]]) -> None:
        """Say skipped turns in the output, not only count them in a metric: once each, one line per
        reason and poll with the count and the first ids (a line per turn drowned the demo's
        progress). A routine reason is said on its first poll only, and says so."""
        for reason, turns in by_reason.items():
            if reason in self.explained_routine:
                continue
            s = "s" if len(turns) > 1 else ""
            shown = ", ".join(f"{tid} of session {sid!r}" for tid, sid in turns[:MAX_IDS_SHOWN])
            more = f", ... ({len(turns)} in all)" if len(turns) > MAX_IDS_SHOWN else ""
            then = ""
            if reason in ROUTINE_SKIP_REASONS:
                self.explained_routine.add(reason)
                then = f" (from now on only counted: rollout/buffer_skipped/{reason})"
            self.progress(f"skipped {len(turns)} turn{s} ({self.method}): {reason}: "
                          f"{SKIP_REASONS.get(reason, reason)}: turn{s} {shown}{more}{then}")

    def close(self) -> None:
        self.buffer.close()


class RetractedTrainingError(RuntimeError):
    """The trainer's weights contain a session the user retracted (policy "stop there")."""


def require_buffer_source(data_source: Any) -> BufferDataSource:
    if data_source is None or not hasattr(data_source, "take"):
        raise ValueError("the buffer rollout needs its data source: pass "
                         "--data-source-path openclaw.bridge.BufferDataSource")
    return data_source


def engine_version(args: Any) -> int | None:
    """The first engine's weight version, for --max-staleness (None when no staleness limit is
    set). An engine that cannot say its version is an error: without it the limit cannot hold."""
    if getattr(args, "max_staleness", None) is None:
        return None
    from slime.rollout.engine_io import engine_urls_from_args
    from slime.rollout.sglang_client import SyncSGLangClient

    url = engine_urls_from_args(args)[0]
    adapter = getattr(args, "lora_adapter_name", None)
    with SyncSGLangClient(url, timeout=30) as client:
        raw = client.get_weight_version() if adapter is None else adapter_version(client, url, adapter)
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise RuntimeError(f"--max-staleness {args.max_staleness}: the engine at {url} reports weight version "
                           f"{raw!r}, not an integer, so sample staleness cannot be measured; serve integer "
                           "versions (SGLang: --weight-version 0) or drop --max-staleness") from None


def adapter_version(client: Any, url: str, adapter: str) -> Any:
    """The served version of the trained adapter (--lora-adapter-name): the turns of a per-user
    trainer were served by that adapter and carry its version, while the engine's own weight
    version is the base's, which never moves while the adapter trains (every turn would look fresh)."""
    from slime.utils.weight_sync import adapter_versions, server_info

    versions = adapter_versions(server_info(client))
    if versions is None:
        raise RuntimeError(f"--max-staleness with --lora-adapter-name {adapter}: the engine at {url} versions only "
                           "its base weights (SGLang), so the adapter's version, and with it sample staleness, "
                           "cannot be measured; drop --max-staleness")
    if adapter not in versions:
        raise RuntimeError(f"--lora-adapter-name {adapter}: the engine at {url} does not serve that adapter (it serves "
                           f"{sorted(versions)}), so its version for --max-staleness is unknown")
    return versions[adapter]


def drain_metrics(drained: Drained, samples: list[Sample]) -> dict[str, float]:
    m: dict[str, float] = {"rollout/buffer_wait_s": drained.waited_s, "rollout/num_turns": float(len(samples))}
    for reason, count in drained.skipped.items():
        m[f"rollout/buffer_skipped/{reason}"] = float(count)
    for kind in KINDS[:3]:
        m[f"rollout/kind/{kind}"] = float(drained.kinds.get(kind, 0))
    if samples:
        m["rollout/response_len_mean"] = sum(s.response_length for s in samples) / len(samples)
        rewards = [float(s.reward) for s in samples]
        mean = sum(rewards) / len(rewards)
        m["rollout/raw_reward_mean"] = mean
        # spread of the batch: with a batch-mean baseline, 0 means every advantage is 0
        m["rollout/raw_reward_std"] = (sum((r - mean) ** 2 for r in rewards) / len(rewards)) ** 0.5
        versions = [s.weight_version or 0 for s in samples]
        m["rollout/weight_version_min"] = float(min(versions))
    return m


async def _custom_rewards(args: Any, samples: list[Sample]) -> None:
    from slime.utils.plugins import extract_reward, load_reward_model

    rm = load_reward_model(args.custom_rm_path, args)
    values = await rm.score_group(samples)
    for s, v in zip(samples, values, strict=True):
        s.reward = extract_reward(v, getattr(args, "reward_key", None))


def _scalar_only(method: Method) -> bool:
    """A method trained on a scalar reward alone, which `--custom-rm-path` may then replace."""
    return method.uses_score and not method.uses_teacher


def drain(args: Any, data_source: Any, method: str, stop: Any = None) -> tuple[list[Sample], dict[str, float]]:
    """Steps 1-3 of the module docstring for `method`; teacher log-probs are the caller's."""
    check_live_args(args)
    ds = require_buffer_source(data_source)
    drained = ds.take(int(args.rollout_batch_size) * group_size(args), engine_version(args), stop=stop)
    samples = [turn_to_sample(r, drained.signal(r).score) for r in drained.records]
    recomputed = asyncio.run(add_behaviour_logprobs(args, samples))
    if _scalar_only(get_method(method)) and getattr(args, "custom_rm_path", None) and samples:
        asyncio.run(_custom_rewards(args, samples))
    metrics = drain_metrics(drained, samples)
    metrics["rollout/logprobs_recomputed"] = float(recomputed)
    return samples, metrics


def as_groups(args: Any, samples: list[Sample]) -> list[list[Sample]]:
    """Consecutive turns in groups of --n-samples-per-prompt (slime lays groups out contiguously)."""
    g = group_size(args)
    if len(samples) % g:  # a short batch after --buffer-wait-timeout: groups of one (baseline 0 for them)
        return [[s] for s in samples]
    return [samples[i:i + g] for i in range(0, len(samples), g)]
