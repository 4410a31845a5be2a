"""Per-user training data (`--buffer-user U`): U's trainer hands out, skips and consumes only U's
judged turns, on a real SQLite buffer, however many turns other users have ahead; its ledger rows
are U's turns only; the teacher and behaviour scoring ask U's adapter (`lora_path`), never the base.

Adversarial first: alice's session holds a planted phrase and 1000+ judged turns ahead of bob's
(half of them ones a drain would skip and consume), and bob's drain must never touch one."""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from slime.rollout.staleness import UNREPORTED_VERSION
from slime.utils.plugins import load_plugin_module
from slime.utils.types import Sample

import openclaw.bridge as M
from openclaw.bridge.behaviour import add_behaviour_logprobs
from openclaw.bridge.flags import add_buffer_arguments
from openclaw.bridge.recorded import RecordedStepsError, recorded_steps
from openclaw.bridge.teacher import score_response, teacher_topk
from openclaw.buffer import TrajectoryBuffer, TurnRecord
from openclaw.buffer.schema import DB_NAME
from openclaw.buffer.users import session_owner, stored_session_id
from openclaw.control.ledger import adapter_ledger, user_ledger

_json_http = load_plugin_module(str(Path(__file__).resolve().parent / "helpers" / "json_http.py"))

PHRASE = "alice's door code is 4417-PLANTED"
ALICE_AHEAD = 1000  # judged turns of alice's stored before any of bob's


def _record(user: str, session: str, i: int, *, next_state: bool, text: str) -> TurnRecord:
    return TurnRecord(session_id=stored_session_id(user, session), turn_index=i, turn_type="main", user_id=user,
                      messages=[{"role": "user", "content": f"{text} (turn {i})"}],
                      prompt_ids=[1, 2, 3 + i % 50], response_ids=[7, 8, 9], response_logprobs=[-0.5, -1.0, -0.25],
                      response_text=f"reply to {text}", weight_version=2,
                      next_state={"role": "user", "content": f"{text}: thanks"} if next_state else None)


def _store(buf: TrajectoryBuffer, user: str, session: str, scores: list[float | None], text: str) -> list[int]:
    """One session of `user`: a turn per score (None: the session ended there, no next state)."""
    ids = buf.append_turns([_record(user, session, i, next_state=s is not None, text=text)
                            for i, s in enumerate(scores)])
    if any(s is None for s in scores):
        buf.finalize_session(stored_session_id(user, session))
    return ids


def _judge(buf: TrajectoryBuffer, scores: dict[int, float]) -> None:
    claimed = buf.claim_for_judging("judge", limit=len(scores) + 10)
    assert {int(r.turn_id) for r in claimed} == set(scores)
    for rec in claimed:
        assert buf.write_judgement(int(rec.turn_id), {"score": scores[int(rec.turn_id)], "hint": None}, "judge")


@pytest.fixture()
def world(tmp_path: Path) -> dict[str, Any]:
    """alice: 1000 judged turns holding the phrase (500 scored 0, which a drain skips and consumes,
    then 500 scored 1) and 10 with no next state, all ahead of bob's 4 (a 0, an ended session, two
    1s); then 20 more of alice's behind bob's."""
    buf_dir = tmp_path / "buf"
    with TrajectoryBuffer.open(buf_dir, durability="normal") as buf:
        ahead = [0.0] * (ALICE_AHEAD // 2) + [1.0] * (ALICE_AHEAD // 2)
        alice = _store(buf, "alice", "secret", ahead, PHRASE) + _store(buf, "alice", "ended", [None] * 10, PHRASE)
        bob_zero = _store(buf, "bob", "chat", [0.0], "bob asks about the weather")
        bob_end = _store(buf, "bob", "ended", [None], "bob says bye")
        bob_good = _store(buf, "bob", "chat2", [1.0, 1.0], "bob asks for a poem")
        behind = _store(buf, "alice", "later", [1.0] * 20, PHRASE)
        scores = {**dict(zip(alice, ahead + [0.0] * 10, strict=True)), bob_zero[0]: 0.0, bob_end[0]: 0.0,
                  **dict.fromkeys(bob_good, 1.0), **dict.fromkeys(behind, 1.0)}
        _judge(buf, scores)
    return {"dir": buf_dir, "alice": set(alice + behind), "bob": set(bob_zero + bob_end + bob_good),
            "bob_good": bob_good, "bob_skipped": bob_zero + bob_end,
            "alice_good": alice[ALICE_AHEAD // 2:ALICE_AHEAD] + behind}


def _args(buf_dir: Path, user: str | None, method: str = "rl", **kw: Any) -> argparse.Namespace:
    return argparse.Namespace(rl_buffer_dir=str(buf_dir), buffer_consumer_id=kw.get("consumer"), buffer_user=user,
                              rollout_batch_size=2, buffer_wait_timeout=kw.get("timeout", 5.0), buffer_min_batch=1,
                              buffer_poll_interval=0.05, buffer_progress_interval=30.0, max_staleness=None,
                              save=None, load=None, openclaw_method=method, custom_rm_path=None,
                              n_samples_per_prompt=1, advantage_estimator="grpo", rewards_normalization=False,
                              lora_adapter_name=kw.get("adapter"))


def _consumed(buf_dir: Path, consumer: str) -> set[int]:
    with sqlite3.connect(f"file:{buf_dir / DB_NAME}?mode=ro", uri=True) as c:
        return {int(r[0]) for r in c.execute("SELECT turn_id FROM consumed WHERE consumer_id=?", (consumer,))}


def _text(rec: TurnRecord) -> str:
    return json.dumps([rec.messages, rec.response_text, rec.next_state, rec.session_id])


# ---------------------------------------------------------------------------------- adversarial
def test_bobs_drain_never_touches_alices_turns(world: dict[str, Any]) -> None:
    """1000+ of alice's judged turns ahead of bob's (more than a drain's page): bob's drain still
    gets bob's turns, skips and consumes only bob's, and its output never names alice's sessions."""
    lines: list[str] = []
    ds = M.BufferDataSource(_args(world["dir"], "bob", timeout=0.3), progress=lines.append)
    assert ds.cfg.consumer_id == "openclaw-rl-bob" and ds.cfg.user_id == "bob"
    got = ds.take(2)
    assert [int(r.turn_id) for r in got.records] == world["bob_good"]
    assert sorted(t for t, _, _ in got.skipped_turns) == sorted(world["bob_skipped"])
    assert got.skipped == {"zero_score": 1, "no_next_state": 1}
    assert ds.pending == world["bob"]  # handed out or skipped: all bob's, nothing of alice's
    assert all(r.user_id == "bob" and PHRASE not in _text(r) for r in got.records)
    # Nothing of bob's is left; waiting does not fall back to alice's turns: it times out.
    with pytest.raises(TimeoutError, match="user bob"):
        ds.take(1)
    assert _consumed(world["dir"], "openclaw-rl-bob") == world["bob"]  # committed by that take
    assert ds.pending == set()
    assert lines and not any("alice" in line or PHRASE in line for line in lines), lines


def test_user_filter_is_in_the_query_not_after_its_limit(world: dict[str, Any]) -> None:
    """A page of 4 of bob's judged turns, with 1010 of alice's older ones unconsumed: the LIMIT
    applies to bob's turns, so alice's flood neither starves nor shadows them."""
    with TrajectoryBuffer.open(world["dir"], create=False) as buf:
        page = buf.fetch_judged("openclaw-rl-bob", limit=4, user_id="bob")
        assert {int(r.turn_id) for r in page} == world["bob"]
        assert all(int(r.turn_id) in world["alice"] for r in buf.fetch_judged("openclaw-rl-bob", limit=4))


def test_bobs_ledger_holds_only_bobs_turns(world: dict[str, Any]) -> None:
    ds = M.BufferDataSource(_args(world["dir"], "bob"))
    got = ds.take(2)
    ds.on_trained(sorted(int(r.turn_id) for r in got.records), step=0, weight_version=1)
    with TrajectoryBuffer.open(world["dir"], create=False) as buf:
        mine = adapter_ledger(buf, "openclaw-rl-bob")
        assert mine == buf.ledger(consumer_id="openclaw-rl-bob", valid_only=True)
        assert sorted(r["turn_id"] for r in mine) == world["bob_good"]
        assert all(session_owner(r["session_id"]) == "bob" for r in mine)
        assert all(PHRASE not in _text(buf.get_turn(r["turn_id"])) for r in mine)
        assert user_ledger(buf, "bob") == mine and user_ledger(buf, "alice") == []
        assert buf.ledger(consumer_id="openclaw-rl-alice") == []


def test_alices_turns_stay_for_alices_drain(world: dict[str, Any]) -> None:
    bob = M.BufferDataSource(_args(world["dir"], "bob", timeout=0.2))
    bob.take(2)
    with pytest.raises(TimeoutError):
        bob.take(1)  # commits bob's turns
    alice = M.BufferDataSource(_args(world["dir"], "alice"))
    assert alice.cfg.consumer_id == "openclaw-rl-alice"
    with TrajectoryBuffer.open(world["dir"], create=False) as buf:
        left = {int(r.turn_id) for r in buf.fetch_judged("openclaw-rl-alice", limit=5000, user_id="alice")}
    assert left == world["alice"]
    got = alice.take(len(world["alice_good"]))
    assert [int(r.turn_id) for r in got.records] == world["alice_good"]
    assert got.skipped == {"zero_score": ALICE_AHEAD // 2, "no_next_state": 10}
    assert alice.pending == world["alice"] and not alice.pending & world["bob"]
    assert _consumed(world["dir"], "openclaw-rl-bob") == world["bob"]  # bob's cursor took none of alice's


def test_resume_refuses_another_users_checkpoint(world: dict[str, Any]) -> None:
    """A checkpoint whose pending ids are alice's (another trainer's, under a shared consumer id)
    would mark alice's turns consumed for bob's cursor: refused, nothing committed."""
    ds = M.BufferDataSource(_args(world["dir"], "bob"))
    alices = sorted(world["alice"])[:3]
    with pytest.raises(ValueError, match="users other than 'bob'"):
        ds.load_consumer_positions({"openclaw-rl-bob": {"pending_turn_ids": alices + world["bob_good"]}})
    assert _consumed(world["dir"], "openclaw-rl-bob") == set()
    ds.load_consumer_positions({"openclaw-rl-bob": {"pending_turn_ids": world["bob_good"]}})
    assert _consumed(world["dir"], "openclaw-rl-bob") == set(world["bob_good"])


def test_replay_of_one_user_replays_that_users_trainer() -> None:
    rows = [{"consumer_id": "openclaw-rl-bob", "turn_id": 5, "session_id": "bob~s", "step": 0},
            {"consumer_id": "openclaw-rl-alice", "turn_id": 3, "session_id": "alice~s", "step": 0}]
    assert recorded_steps(rows, exclude_consumer="replay", user_id="bob") == {0: [5]}
    with pytest.raises(RecordedStepsError, match="several trainers"):
        recorded_steps(rows, exclude_consumer="replay")
    shared = [{**r, "consumer_id": "openclaw-rl"} for r in rows]
    with pytest.raises(RecordedStepsError, match="other users"):
        recorded_steps(shared, exclude_consumer="replay", user_id="bob")


# ---------------------------------------------------------------------------------- unchanged
def test_without_a_user_every_users_turns_drain_as_before(world: dict[str, Any]) -> None:
    ds = M.BufferDataSource(_args(world["dir"], None))
    assert ds.cfg.consumer_id == "openclaw-rl" and ds.cfg.user_id is None
    got = ds.take(3)
    assert [int(r.turn_id) for r in got.records] == world["alice_good"][:3]  # oldest first, any user
    assert got.skipped == {"zero_score": ALICE_AHEAD // 2}
    named = M.BufferDataSource(_args(world["dir"], "bob", method="opd", consumer="mine"))
    assert named.cfg.consumer_id == "mine" and named.cfg.user_id == "bob"  # an explicit id is kept
    assert M.BufferDataSource(_args(world["dir"], "bob", method="opd")).cfg.consumer_id == "openclaw-opd-bob"


# ---------------------------------------------------------------------------------- flags
def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="train")
    add_buffer_arguments(p)
    return p


@pytest.mark.parametrize("bad", ["", "bob~x", "bob smith", "../bob", "x" * 65, "bob/alice"])
def test_flag_refuses_a_bad_user_id(bad: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        _parser().parse_args(["--buffer-user", bad])
    assert "--buffer-user" in capsys.readouterr().err
    with pytest.raises(ValueError, match="is not a user id"):
        M.DrainConfig.from_args(_args(tmp_path, bad), "rl")  # a --config value skips argparse's type


def test_flag_parses_a_user_id() -> None:
    assert _parser().parse_args(["--buffer-user", "bob.b-2_x"]).buffer_user == "bob.b-2_x"
    assert _parser().parse_args([]).buffer_user is None


def test_adapter_named_like_a_user_trains_that_users_turns_only(tmp_path: Path) -> None:
    """The server serves user U the adapter loaded under U's id: training it on other turns would
    serve them to U."""
    with pytest.raises(ValueError, match="--lora-adapter-name alice with --buffer-user bob"):
        M.DrainConfig.from_args(_args(tmp_path, "bob", adapter="alice"), "rl")
    with pytest.raises(ValueError, match="no --buffer-user"):
        M.DrainConfig.from_args(_args(tmp_path, None, adapter="alice"), "rl")
    assert M.DrainConfig.from_args(_args(tmp_path, "alice", adapter="alice"), "rl").user_id == "alice"
    assert M.DrainConfig.from_args(_args(tmp_path, None, adapter="team/shared"), "rl").user_id is None


# ---------------------------------------------------------------------------------- the user's own model
class _Client:
    """Records /generate bodies; answers with prompt log-probs (and top-k) of every input token."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    async def generate(self, body: dict[str, Any]) -> Any:
        self.bodies.append(body)
        if isinstance(body["input_ids"][0], list):  # the per-position top-k fallback
            return [{"meta_info": {"output_top_logprobs": [[[-0.1, 4, None]]]}} for _ in body["input_ids"]]
        return {"meta_info": {"input_token_logprobs": [[-0.3, t, None] for t in body["input_ids"]]}}


@pytest.mark.parametrize("adapter", ["bob", None])
def test_teacher_asks_the_users_adapter(adapter: str | None) -> None:
    client = _Client()
    scored = asyncio.run(score_response(client, [1, 2], [3, 4], adapter=adapter))
    assert scored.logprobs == [-0.3, -0.3] and scored.weight_version is None  # this engine reports none
    ids, _ = asyncio.run(teacher_topk(client, [1, 2], [3, 4], 1, adapter=adapter))
    assert ids == [[4], [4]] and len(client.bodies) == 3  # score, top-k, then the per-position fallback
    assert all(b.get("lora_path") == adapter for b in client.bodies)
    assert adapter is not None or all("lora_path" not in b for b in client.bodies)


class _Engine(_json_http.JsonHandler):
    info: dict[str, Any] = {}
    bodies: list[dict[str, Any]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_json(self.info)

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.read_body())
        type(self).bodies.append(body)
        n = len(body["input_ids"]) - body["logprob_start_len"]
        self.send_json({"meta_info": {"input_token_logprobs": [[-0.7, 1, None]] * n, "weight_version": "9"}})


def _imported() -> Sample:
    return Sample(index=1, tokens=[1, 2, 3, 4, 5], response_length=2, loss_mask=[1, 1], reward=1.0,
                  rollout_log_probs=None, weight_version=0, status=Sample.Status.COMPLETED)


@pytest.mark.parametrize("versions_adapters", [True, False])
def test_behaviour_logprobs_ask_the_users_adapter(http_server: Callable[[type], str], versions_adapters: bool) -> None:
    """Imported turns get their behaviour log-probs from the user's adapter; the reply's version is
    the adapter's only from an engine that versions adapters (else marked for slime to fill)."""
    _Engine.info = {"lora_adapters": {"bob": 9}} if versions_adapters else {"weight_version": "0"}
    _Engine.bodies = []
    url = http_server(_Engine)
    args = argparse.Namespace(rollout_engine_urls=[url], lora_adapter_name="bob", opd_teacher_concurrency=2)
    sample = _imported()
    assert asyncio.run(add_behaviour_logprobs(args, [sample])) == 1
    assert [b["lora_path"] for b in _Engine.bodies] == ["bob"]
    assert sample.rollout_log_probs == [-0.7, -0.7]
    if versions_adapters:
        assert sample.weight_version == 9 and UNREPORTED_VERSION not in sample.metadata
    else:
        assert sample.weight_version is None and sample.metadata[UNREPORTED_VERSION] == "bob"


@pytest.mark.parametrize("listed", [["bob"], {"bob": "9"}, {"bob": True}])
def test_behaviour_logprobs_refuse_an_unreadable_adapter_list(http_server: Callable[[type], str], listed: Any) -> None:
    """An engine whose `lora_adapters` cannot be read is not taken for SGLang (its answers' versions
    would be dropped): the error names the engine and what is wrong, and nothing is scored."""
    _Engine.info = {"lora_adapters": listed}
    _Engine.bodies = []
    url = http_server(_Engine)
    args = argparse.Namespace(rollout_engine_urls=[url], lora_adapter_name="bob", opd_teacher_concurrency=2)
    sample = _imported()
    with pytest.raises(ValueError, match=rf"the engine at {url}: /get_server_info's lora_adapters"):
        asyncio.run(add_behaviour_logprobs(args, [sample]))
    assert _Engine.bodies == [] and sample.rollout_log_probs is None


def test_staleness_reads_the_adapters_version(http_server: Callable[[type], str]) -> None:
    _Engine.info = {"weight_version": "0", "lora_adapters": {"bob": 4, "alice": 11}}
    url = http_server(_Engine)
    assert M.engine_version(argparse.Namespace(max_staleness=1, rollout_engine_urls=[url],
                                               lora_adapter_name="bob")) == 4
    _Engine.info = {"weight_version": "0"}  # SGLang: versions only its base
    with pytest.raises(RuntimeError, match="versions only its base weights"):
        M.engine_version(argparse.Namespace(max_staleness=1, rollout_engine_urls=[url], lora_adapter_name="bob"))
