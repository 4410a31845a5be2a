"""The bridge from the trajectory buffer to the trainer: what every buffer-draining method
(openclaw-rl, openclaw-opd, openclaw-combine, and the next ones) shares.

    turns    one judged turn -> one `Sample`; its signal kind; which kinds a method trains on
    source   `BufferDataSource` (`--data-source-path openclaw.bridge.BufferDataSource`), `drain`
    recorded `RecordedStepsSource`: a replay's data source, the recorded run's steps (its ledger)
    teacher  OPD's teacher log-probs (the policy shown the hint), top-k files for the top-k loss
    flags    the trainer flags of these methods (`--rl-buffer-dir`, `--buffer-*`, `--opd-*`)

A method folder keeps only its own rollout function, loss and args provider, and imports this
package as an ordinary library (no import-path edits, no lists of folders in the environment).
"""

from openclaw.bridge.recorded import RecordedStepsError, RecordedStepsSource, recorded_steps
from openclaw.bridge.source import (
    BufferDataSource,
    DrainConfig,
    Drained,
    as_groups,
    check_live_args,
    drain,
    drain_metrics,
    engine_version,
    group_size,
)
from openclaw.bridge.turns import (
    KINDS,
    METHODS,
    TurnSignal,
    loss_mask_of,
    next_state_text,
    trainable_kinds,
    turn_signal,
    turn_to_sample,
)

__all__ = [
    "KINDS", "METHODS", "BufferDataSource", "DrainConfig", "Drained", "RecordedStepsError", "RecordedStepsSource",
    "TurnSignal", "as_groups", "check_live_args", "drain", "drain_metrics", "engine_version", "group_size",
    "loss_mask_of", "next_state_text", "recorded_steps", "trainable_kinds", "turn_signal", "turn_to_sample",
]
