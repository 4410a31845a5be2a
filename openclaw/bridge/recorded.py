"""`--data-source-path openclaw.bridge.RecordedStepsSource`: replay what a trainer trained.

Every buffer consumer writes the provenance ledger: at step k it trained turns {...}. This data
source hands the trainer, at its step k, exactly the turns the recorded consumer trained at its
step k, read back from the buffer. So a replay trains on the recorded run's data in the recorded
run's batches, whatever the timing was when the run drew them (a turn whose feedback arrived late
went into a later batch than buffer order would give). Used by `python -m openclaw.demo.replay`.
With `--buffer-user U` the recorded run is U's own trainer (the consumer that trained U's turns),
and it must have trained U's turns only: a per-user replay never trains another user's turn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openclaw.bridge.source import BufferDataSource, Drained, _print_progress
from openclaw.bridge.turns import turn_signal
from openclaw.buffer.users import session_owner


class RecordedStepsError(ValueError):
    """The buffer has no single recorded run to replay."""


def recorded_steps(ledger_rows: list[dict[str, Any]], *, exclude_consumer: str,
                   user_id: str | None = None) -> dict[int, list[int]]:
    """Step -> the turn ids the recorded consumer trained at it (rows of `TrajectoryBuffer.ledger`).
    With `user_id`: the consumer that trained that user's turns (the owner is read from the
    stored session id, which outlives the turns), refused if it also trained another user's."""
    rows = [r for r in ledger_rows if r["consumer_id"] != exclude_consumer]
    if user_id is not None:
        theirs = {r["consumer_id"] for r in rows if session_owner(r["session_id"]) == user_id}
        rows = [r for r in rows if r["consumer_id"] in theirs]
        other = sorted({int(r["turn_id"]) for r in rows if session_owner(r["session_id"]) != user_id})
        if other:
            raise RecordedStepsError(f"the trainer that trained user {user_id!r}'s turns ({sorted(theirs)}) also "
                                     f"trained {len(other)} turn(s) of other users ({other[:8]}): a per-user "
                                     "replay replays a per-user trainer")
    consumers = sorted({r["consumer_id"] for r in rows})
    if len(consumers) > 1:
        raise RecordedStepsError(f"the buffer's ledger holds several trainers' steps ({consumers}); "
                                 "replay a buffer one trainer consumed")
    steps: dict[int, list[int]] = {}
    for r in rows:
        steps.setdefault(int(r["step"]), []).append(int(r["turn_id"]))
    return {step: sorted(ids) for step, ids in sorted(steps.items())}


class RecordedStepsSource(BufferDataSource):
    def __init__(self, args: Any, method: str | None = None,
                 progress: Callable[[str], None] = _print_progress) -> None:
        super().__init__(args, method, progress)
        self.steps = recorded_steps(self.buffer.ledger(), exclude_consumer=self.cfg.consumer_id,
                                    user_id=self.cfg.user_id)
        if not self.steps:
            raise RecordedStepsError(f"{self.cfg.buffer_dir}: the provenance ledger records no trained step to replay")
        self.step = 0

    def take(self, n: int, engine_version: int | None = None, stop: Any = None) -> Drained:
        """The turns the recorded run trained at this step (`n` is the recorded run's business: a
        step that took fewer turns, after a wait timed out, is replayed with as many)."""
        ids = self.steps.get(self.step)
        if ids is None:
            # The trainer loop's signal for "nothing to train on" (the demo's trainer stops on it).
            raise TimeoutError(f"the recorded run trained no step {self.step} ({len(self.steps)} recorded)")
        records = [self.buffer.get_turn(i) for i in ids]
        missing = [i for i, r in zip(ids, records, strict=True) if r is None]
        if missing:
            raise RecordedStepsError(f"step {self.step}: turns {missing} are in the ledger but no longer in the "
                                     "buffer (purged or retracted since)")
        self.check_owner(records)
        out = Drained(records=records)
        for rec in records:
            out.signals[int(rec.turn_id)] = turn_signal(rec, self.graded)
            out.kinds[out.signals[int(rec.turn_id)].kind] += 1
        self.pending.update(ids)
        self.handed_out += len(records)
        self.step += 1
        return out
