"""The buffer-to-trainer bridge (`openclaw.bridge`) on a real SQLite buffer: selection rules per
method, surplus left in the buffer, the consumer position committed together with trainer
checkpoints, and no silent fallback (missing buffer, endless wait, unreadable engine version)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slime.utils.checkpoint import CheckpointMeta, begin_checkpoint, commit_checkpoint
from slime.utils.plugins import load_plugin_module

import openclaw.bridge as M
from openclaw.bridge.flags import DEFAULT_WAIT_TIMEOUT_S, add_buffer_arguments
from openclaw.bridge.source import SKIP_REASONS
from openclaw.buffer import BufferNotFoundError, TrajectoryBuffer, TurnRecord

_json_http = load_plugin_module(str(Path(__file__).resolve().parent / "helpers" / "json_http.py"))

# (score, hint): one turn of each signal kind, twice.
SIGNALS = [(1.0, None), (-1.0, "be brief"), (0.0, "keep it short"), (0.0, None)] * 2


def _fill(buf_dir: Path, signals: list[tuple[float, str | None]], no_next_state: int = 0, prefix: str = "") -> list[int]:
    ids = []
    with TrajectoryBuffer.open(buf_dir) as buf:
        for i, _signal in enumerate(signals):
            rec = TurnRecord(session_id=f"{prefix}s{i}", turn_index=0, turn_type="main",
                             messages=[{"role": "user", "content": f"question {i}"}],
                             prompt_ids=[1, 2, 3 + i], response_ids=[7, 8, 9], response_logprobs=[-0.5, -1.0, -0.25],
                             response_text="an answer", weight_version=2)
            tid = buf.append_turn(rec)
            buf.attach_next_state(f"{prefix}s{i}", {"role": "user", "content": "feedback"})
            ids.append(tid)
        for j in range(no_next_state):
            rec = TurnRecord(session_id=f"{prefix}end{j}", turn_index=0, turn_type="main", messages=[{"role": "user", "content": "x"}],
                             prompt_ids=[1], response_ids=[2], response_logprobs=[-0.1])
            ids.append(buf.append_turn(rec))
            buf.finalize_session(f"{prefix}end{j}")
        claimed = buf.claim_for_judging("w", limit=100)
        by_id = dict(zip(ids, signals, strict=False))  # ids also holds the no-next-state turns
        for rec in claimed:
            score, hint = by_id.get(rec.turn_id, (0.0, None))
            assert buf.write_judgement(rec.turn_id, {"score": score, "hint": hint}, worker_id="w")
    return ids


def _args(buf_dir: Path, method: str, batch: int, save: Path | None = None, load: Path | None = None, **kw: Any):
    return argparse.Namespace(rl_buffer_dir=str(buf_dir), buffer_consumer_id=None, rollout_batch_size=batch,
                              buffer_wait_timeout=kw.get("timeout", 5.0), buffer_min_batch=kw.get("min_batch", 1),
                              buffer_poll_interval=0.05, buffer_progress_interval=kw.get("progress", 30.0),
                              max_staleness=kw.get("max_staleness"), save=str(save) if save else None,
                              load=str(load) if load else None, openclaw_method=method, custom_rm_path=None,
                              n_samples_per_prompt=1, advantage_estimator="grpo", rewards_normalization=False)


@pytest.mark.parametrize("method,kinds", [("rl", {"hint+score", "score"}), ("opd", {"hint+score", "hint"}),
                                          ("combine", {"hint+score", "hint", "score"})])
def test_selection_rules_and_surplus(tmp_path: Path, method: str, kinds: set[str]) -> None:
    _fill(tmp_path / "buf", SIGNALS, no_next_state=1)
    ds = M.BufferDataSource(_args(tmp_path / "buf", method, batch=2))
    got = ds.take(2)
    assert len(got.records) == 2
    assert {M.turn_signal(r).kind for r in got.records} <= kinds
    samples = [M.turn_to_sample(r, M.turn_signal(r).score) for r in got.records]
    for s, r in zip(samples, got.records, strict=True):
        assert s.tokens == r.prompt_ids + r.response_ids and s.rollout_log_probs == r.response_logprobs
        assert s.response_length == 3 and s.loss_mask == [1, 1, 1] and s.weight_version == 2
    # The rest of the batch-worth stays in the buffer: a second take gets the next ones, oldest first.
    more = ds.take(10)
    all_ids = [r.turn_id for r in got.records + more.records]
    assert len(set(all_ids)) == len(all_ids)
    assert len(all_ids) == sum(1 for s in SIGNALS if M.TurnSignal(*s).kind in kinds)
    assert sum(more.skipped.values()) + sum(got.skipped.values()) == len(SIGNALS) + 1 - len(all_ids)
    assert more.skipped["no_next_state"] + got.skipped["no_next_state"] == 1


def test_wait_timeout_keeps_nothing_pending(tmp_path: Path) -> None:
    _fill(tmp_path / "buf", SIGNALS[:2])
    ds = M.BufferDataSource(_args(tmp_path / "buf", "rl", batch=5, timeout=0.3, min_batch=5))
    with pytest.raises(TimeoutError, match="trainable turn"):
        ds.take(5)
    assert ds.pending == set()  # nothing handed out: the next take sees the same turns
    ds.cfg = M.DrainConfig(**{**ds.cfg.__dict__, "min_batch": 1})
    assert len(ds.take(5).records) == 2


def test_consumer_position_follows_checkpoints(tmp_path: Path) -> None:
    buf_dir, save = tmp_path / "buf", tmp_path / "ckpt"
    _fill(buf_dir, SIGNALS)
    ds = M.BufferDataSource(_args(buf_dir, "combine", batch=2, save=save))
    first = ds.take(2)
    consumer = ds.cfg.consumer_id
    state = ds.consumer_positions()
    assert sorted(state[consumer]["pending_turn_ids"]) == sorted(ds.pending)
    # No checkpoint yet: nothing is committed, the next rollout still excludes what it handed out.
    second = ds.take(2)
    assert not {r.turn_id for r in first.records} & {r.turn_id for r in second.records}
    with TrajectoryBuffer.open(buf_dir) as buf:
        assert buf.consumer_position(consumer) is None
    # The driver saves a checkpoint holding the positions; the next rollout commits exactly those.
    tmp = begin_checkpoint(save, 0)
    commit_checkpoint(save, 0, tmp, CheckpointMeta(rollout_id=0, consumer_positions=ds.consumer_positions()))
    handed = set(ds.pending)
    ds.take(1)
    with TrajectoryBuffer.open(buf_dir) as buf:
        pos = buf.consumer_position(consumer)
        assert pos["checkpoint_tag"] == "checkpoint-0" and pos["consumed"] == len(handed)
        left = {r.turn_id for r in buf.fetch_judged(consumer, limit=100)}
    assert not left & handed


def test_resume_commits_checkpointed_ids(tmp_path: Path) -> None:
    """A trainer that crashed after its checkpoint but before the buffer commit: on resume the
    checkpoint's ids are committed, so they are never trained twice; later ones come back."""
    buf_dir, save = tmp_path / "buf", tmp_path / "ckpt"
    _fill(buf_dir, SIGNALS)
    ds = M.BufferDataSource(_args(buf_dir, "combine", batch=2, save=save))
    trained = {r.turn_id for r in ds.take(2).records}
    tmp = begin_checkpoint(save, 3)
    final = commit_checkpoint(save, 3, tmp, CheckpointMeta(rollout_id=3, consumer_positions=ds.consumer_positions()))
    lost = {r.turn_id for r in ds.take(2).records}  # handed out after the checkpoint, then the crash
    ds.close()
    resumed = M.BufferDataSource(_args(buf_dir, "combine", batch=10, save=save, load=final))
    from slime.utils.checkpoint import load_meta

    resumed.load_consumer_positions(load_meta(final).consumer_positions)
    again = {r.turn_id for r in resumed.take(10).records}
    assert not again & trained
    assert lost <= again


def test_live_args_are_checked() -> None:
    ns = argparse.Namespace(n_samples_per_prompt=1, advantage_estimator="grpo", rewards_normalization=True)
    with pytest.raises(ValueError, match="disable-rewards-normalization"):
        M.check_live_args(ns)
    ns.n_samples_per_prompt = 4  # four consecutive turns form one group: baseline = their mean
    M.check_live_args(ns)
    samples = [M.turn_to_sample(_rec(i), float(i % 2)) for i in range(8)]
    groups = M.as_groups(ns, samples)
    assert [len(g) for g in groups] == [4, 4] and [s.index for g in groups for s in g] == list(range(8))
    assert [len(g) for g in M.as_groups(ns, samples[:6])] == [1] * 6  # a short batch: groups of one


def _rec(i: int) -> TurnRecord:
    return TurnRecord(session_id=f"s{i}", turn_index=0, turn_type="main", messages=[], prompt_ids=[1], response_ids=[2],
                      response_logprobs=[-0.5], turn_id=i, judgement={"score": 1.0})


def test_rollout_needs_buffer_source(tmp_path: Path) -> None:
    args = _args(tmp_path / "buf", "rl", batch=1)
    with pytest.raises(ValueError, match="--data-source-path"):
        M.drain(args, None, "rl")


# ---- no silent fallback ---------------------------------------------------------------------


def test_missing_buffer_is_an_error_naming_the_path_and_the_server_flag(tmp_path: Path) -> None:
    """A mistyped --rl-buffer-dir used to create an empty buffer and wait on it forever."""
    wrong = tmp_path / "rl_bufer"
    with pytest.raises(BufferNotFoundError) as err:
        M.BufferDataSource(_args(wrong, "rl", batch=1))
    assert str(wrong) in str(err.value) and "--enable-rl-intercept --rl-buffer-dir" in str(err.value)
    assert not wrong.exists()  # nothing created on the way


def test_wait_is_finite_by_default_and_reports_progress(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_buffer_arguments(parser)
    defaults = parser.parse_args([])
    assert defaults.buffer_wait_timeout == DEFAULT_WAIT_TIMEOUT_S and DEFAULT_WAIT_TIMEOUT_S < float("inf")
    assert parser.parse_args(["--buffer-wait-timeout", "0"]).buffer_wait_timeout == 0  # 0: no limit, on request
    _fill(tmp_path / "buf", SIGNALS[:2])  # two trainable turns for rl
    lines: list[str] = []
    ds = M.BufferDataSource(_args(tmp_path / "buf", "rl", batch=8, timeout=0.6, min_batch=8, progress=0.1),
                            progress=lines.append)
    with pytest.raises(TimeoutError, match="--buffer-wait-timeout"):
        ds.take(8)
    assert lines and all(line.startswith("waiting for 8 judged turns: 2 so far, ") for line in lines), lines


class _VersionHandler(_json_http.JsonHandler):
    version = "default"  # what SGLang reports when started without --weight-version

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_json({"weight_version": self.version})


def test_unreadable_engine_version_is_an_error_under_max_staleness(http_server: Callable[[type], str]) -> None:
    """It used to turn the staleness check off silently."""
    url = http_server(_VersionHandler)
    try:
        args = argparse.Namespace(max_staleness=1, rollout_engine_urls=[url])
        with pytest.raises(RuntimeError, match="--max-staleness 1: the engine at .* reports weight version 'default'"):
            M.engine_version(args)
        assert M.engine_version(argparse.Namespace(max_staleness=None)) is None  # no limit asked: no question
        _VersionHandler.version = "7"
        assert M.engine_version(args) == 7
    finally:
        _VersionHandler.version = "default"


def test_skipped_turns_are_said_once_per_reason(tmp_path: Path) -> None:
    """Every skipped turn is named in the output exactly once, grouped by reason: not one line per
    turn (a live run skips the last turn of every session), and not only counted in a metric."""
    ids = _fill(tmp_path / "buf", SIGNALS, no_next_state=2)
    lines: list[str] = []
    ds = M.BufferDataSource(_args(tmp_path / "buf", "rl", batch=2), progress=lines.append)
    got = ds.take(10)
    zero = [f"{ids[i]} of session 's{i}'" for i, (score, _) in enumerate(SIGNALS) if score == 0.0]
    assert sorted(line for line in lines if line.startswith("skipped")) == [
        f"skipped 2 turns (rl): no_next_state: {SKIP_REASONS['no_next_state']}: "
        f"turns {ids[-2]} of session 'end0', {ids[-1]} of session 'end1' "
        "(from now on only counted: rollout/buffer_skipped/no_next_state)",
        f"skipped 4 turns (rl): zero_score: {SKIP_REASONS['zero_score']}: turns {', '.join(zero)}",
    ]
    assert got.skipped == {"zero_score": 4, "no_next_state": 2}


def test_skipped_turns_are_not_repeated_while_waiting(tmp_path: Path) -> None:
    ids = _fill(tmp_path / "buf", SIGNALS[:4])  # scores 1, -1, 0, 0: two turns binary RL skips
    lines: list[str] = []
    ds = M.BufferDataSource(_args(tmp_path / "buf", "rl", batch=5, timeout=0.3, min_batch=5), progress=lines.append)
    with pytest.raises(TimeoutError):
        ds.take(5)  # polls the buffer several times before giving up
    assert [line for line in lines if line.startswith("skipped")] == [
        f"skipped 2 turns (rl): zero_score: {SKIP_REASONS['zero_score']}: "
        f"turns {ids[2]} of session 's2', {ids[3]} of session 's3'"]
    ds.cfg = M.DrainConfig(**{**ds.cfg.__dict__, "min_batch": 1})
    assert len(ds.take(5).records) == 2
    assert sum(line.startswith("skipped") for line in lines) == 1  # the retry names them no more


def test_sessions_ending_is_said_once_then_only_counted(tmp_path: Path) -> None:
    """Every live session's last turn has no feedback: that is said with its meaning the first time,
    then only counted, while a reason that points at a problem (zero_score) is said every time."""
    _fill(tmp_path / "buf", SIGNALS[:4], no_next_state=1)
    lines: list[str] = []
    ds = M.BufferDataSource(_args(tmp_path / "buf", "rl", batch=2, timeout=0.3), progress=lines.append)
    first = ds.take(3)  # 2 trainable turns exist: it takes them when the wait ends
    assert len(first.records) == 2 and first.skipped == {"zero_score": 2, "no_next_state": 1}
    _fill(tmp_path / "buf", [(0.0, None), (1.0, None)], no_next_state=1, prefix="r2-")  # one more 0, one more end
    second = ds.take(2)  # 1 trainable turn: it takes it when the wait ends, past the ended session
    assert second.skipped == {"zero_score": 1, "no_next_state": 1}  # still counted (the step's metric)
    said = [line.split(":")[1].strip() for line in lines if line.startswith("skipped")]
    assert sorted(said) == ["no_next_state", "zero_score", "zero_score"]


def test_recorded_steps_source_hands_out_each_recorded_step_in_turn(tmp_path: Path) -> None:
    """A replay's data source: step k gets exactly the turns the recorded trainer's ledger says it
    trained at step k (not buffer order), and the end of the recording ends the replay."""
    ids = _fill(tmp_path / "buf", SIGNALS)
    with TrajectoryBuffer.open(tmp_path / "buf") as buf:  # a recorded run that took turns out of buffer order
        buf.record_trained("openclaw-combine", [ids[5], ids[0]], step=0, weight_version=1, save_dir=None, base_model=None)
        buf.record_trained("openclaw-combine", [ids[1], ids[4]], step=1, weight_version=2, save_dir=None, base_model=None)
    args = _args(tmp_path / "buf", "combine", batch=2)
    args.buffer_consumer_id = "openclaw-replay"
    ds = M.RecordedStepsSource(args)
    assert [r.turn_id for r in ds.take(2).records] == sorted([ids[5], ids[0]])
    ds.on_trained(sorted([ids[5], ids[0]]), step=0, weight_version=1)  # the replay's own ledger rows
    assert [r.turn_id for r in ds.take(2).records] == sorted([ids[1], ids[4]])
    with pytest.raises(TimeoutError, match="the recorded run trained no step 2"):
        ds.take(2)


def test_recorded_steps_source_refuses_an_unusable_recording(tmp_path: Path) -> None:
    ids = _fill(tmp_path / "buf", SIGNALS[:2])
    args = _args(tmp_path / "buf", "combine", batch=1)
    args.buffer_consumer_id = "openclaw-replay"
    with pytest.raises(M.RecordedStepsError, match="records no trained step"):
        M.RecordedStepsSource(args)
    with TrajectoryBuffer.open(tmp_path / "buf") as buf:
        buf.record_trained("openclaw-rl", [ids[0]], step=0, weight_version=1, save_dir=None, base_model=None)
        buf.record_trained("openclaw-opd", [ids[1]], step=0, weight_version=1, save_dir=None, base_model=None)
    with pytest.raises(M.RecordedStepsError, match="several trainers' steps"):
        M.RecordedStepsSource(args)
