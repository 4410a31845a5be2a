"""`--data-source-path openclaw.bridge.RecordedStepsSource`: replay what a trainer trained.

Every buffer consumer writes the provenance ledger: at step k it trained turns {...}. This data
source hands the trainer, at its step k, exactly the turns the recorded consumer trained at its
step k, read back from the buffer. So a replay trains on the recorded run's data in the recorded
run's batches, whatever the timing was when the run drew them (a turn whose feedback arrived late
went into a later batch than buffer order would give). Used by `python -m openclaw.demo.replay`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from openclaw.bridge.source import BufferDataSource, Drained, _print_progress
from openclaw.bridge.turns import turn_signal


class RecordedStepsError(ValueError):
    """The buffer has no single recorded run to replay."""


def recorded_steps(ledger_rows: list[dict[str, Any]], *, exclude_consumer: str) -> dict[int, list[int]]:
    """Step -> the turn ids the recorded consumer trained at it (rows of `TrajectoryBuffer.ledger`)."""
    rows = [r for r in ledger_rows if r["consumer_id"] != exclude_consumer]
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
        self.steps = recorded_steps(self.buffer.ledger(), exclude_consumer=self.cfg.consumer_id)
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
        out = Drained(records=records)
        for rec in records:
            out.signals[int(rec.turn_id)] = turn_signal(rec, self.graded)
            out.kinds[out.signals[int(rec.turn_id)].kind] += 1
        self.pending.update(ids)
        self.handed_out += len(records)
        self.step += 1
        return out
