"""A user's retract acts on that user's adapter only, over real HTTP with a key file: the real
server (tiny model, RL intercept), real PEFT adapters in real slime checkpoint folders, the real
buffer's ledger. Each user's trainer numbers its adapter's versions on its own, so alice's version
2 and bob's version 2 are different weights: the test gives both the same numbers on purpose.

The adversary's moves: load the retracted version of alice's adapter again (from a copy made
before the retract), under its number or with no number at all; and check that nothing of alice's
retract leaks into bob's adapter, his ledger or the served weights."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest

KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789", "ops": "key-ops-0123456789"}
PHRASE = "PERSIMMON-WALRUS-5521"


def _post(url: str, who: str, path: str, body: dict | None = None) -> httpx.Response:
    return httpx.post(url + path, json=body if body is not None else {}, timeout=120,
                      headers={"Authorization": f"Bearer {KEYS[who]}"})


def _chat(url: str, who: str, sid: str, text: str) -> dict[str, Any]:
    r = httpx.post(url + "/v1/chat/completions", timeout=120,
                   headers={"Authorization": f"Bearer {KEYS[who]}", "X-Session-Id": sid, "X-Session-Done": "true"},
                   json={"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 4,
                         "temperature": 0.0})
    assert r.status_code == 200, r.text
    return r.json()


def _checkpoints(random_lora: Any, base: Path, save: Path, seeds: list[int], first_version: int) -> list[Path]:
    """A per-user trainer's checkpoints: checkpoint-k holds steps <= k as weight version first_version + k."""
    from slime.utils.checkpoint import CheckpointMeta, begin_checkpoint, checkpoint_dir, commit_checkpoint

    out = []
    for step, seed in enumerate(seeds):
        tmp = begin_checkpoint(save, step)
        random_lora(base, tmp, seed, targets=["q_proj", "v_proj"])
        commit_checkpoint(save, step, tmp, CheckpointMeta(rollout_id=step, weight_version=first_version + step,
                                                          base_model_path=str(base), use_lora=True))
        out.append(checkpoint_dir(save, step))
    return out


@pytest.fixture(params=["ungated"])
def served(request: pytest.FixtureRequest, tiny_model_path: Path, tmp_path: Path, random_lora: Any,
           monkeypatch: pytest.MonkeyPatch):
    """Two users' adapters on one server, both at version 2 of their own lines; with the param
    "gated", behind the promotion gate (every load is a candidate the canary checks)."""
    from openclaw.buffer import TrajectoryBuffer
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.intercept.config import InterceptConfig
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    if request.param == "gated":
        monkeypatch.setenv("OPENCLAW_PROMOTION_GATE", "1")
        monkeypatch.setenv("OPENCLAW_CONTROL_DIR", str(tmp_path / "control"))
        monkeypatch.setenv("OPENCLAW_CANARY_PROBE_LIMIT", "2")
    key_file = tmp_path / "keys.json"
    key_file.write_text(json.dumps({"users": {"alice": {"key": KEYS["alice"]}, "bob": {"key": KEYS["bob"]}},
                                    "admins": {"ops": {"key": KEYS["ops"]}}}))
    buf_dir = tmp_path / "rl_buffer"
    rl = RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buf_dir, session_idle_timeout=600))
    engine = HFEngine.load(str(tiny_model_path), max_batch_size=4)
    srv = serve_in_background(create_app(ServerConfig(rl=rl, api_keys_file=key_file), engine=engine))
    try:
        url = srv.base_url
        turns = {sid: _chat(url, who, sid, text)["id"] for who, sid, text in (
            ("alice", "plain", "What is the capital of France?"),
            ("alice", "secret", f"My locker code is {PHRASE}."),
            ("bob", "b1", "Name a colour."),
            ("bob", "b2", "Name a fruit."))}
        alice_ckpt = _checkpoints(random_lora, tiny_model_path, tmp_path / "ckpt-alice", [11, 12], first_version=1)
        bob_ckpt = _checkpoints(random_lora, tiny_model_path, tmp_path / "ckpt-bob", [21, 22], first_version=1)
        with TrajectoryBuffer.open(buf_dir, create=False) as buf:
            tid = {sid: buf.find_turn(request_id=rid)[0] for sid, rid in turns.items()}
            # Both trainers number from 1: the same version numbers in two lines.
            for user, ckpt, sessions in (("alice", alice_ckpt, ["plain", "secret"]), ("bob", bob_ckpt, ["b1", "b2"])):
                for step, sid in enumerate(sessions):
                    buf.record_trained(f"openclaw-combine-{user}", [tid[sid]], step, step + 1,
                                       save_dir=str(ckpt[0].parent), base_model=str(tiny_model_path), adapter=user)
        kept_copy = tmp_path / "alice-v2-copy"  # what an adversary kept of the version the retract takes back
        shutil.copytree(alice_ckpt[1], kept_copy)
        for user, ckpt in (("alice", alice_ckpt), ("bob", bob_ckpt)):
            r = _post(url, "ops", "/load_lora_adapter", {"lora_name": user, "lora_path": str(ckpt[1]),
                                                         "weight_version": 2})
            assert r.status_code == 200, r.text
        assert engine.lora_adapters == {"alice": 2, "bob": 2} and engine.weight_version == 0
        yield {"url": url, "engine": engine, "buffer": buf_dir, "alice": alice_ckpt, "bob": bob_ckpt,
               "copy": kept_copy, "tiny": tiny_model_path}
    finally:
        srv.stop()
        asyncio.run(engine.shutdown())


def _ledger(buf_dir: Path, adapter: str) -> dict[int, bool]:
    """{weight version: still valid} of one adapter's ledger rows."""
    from openclaw.buffer import TrajectoryBuffer

    with TrajectoryBuffer.open(buf_dir, create=False) as buf:
        return {int(r["weight_version"]): r["invalidated_at"] is None for r in buf.ledger(adapter=adapter)}


def test_a_retract_rolls_back_only_its_users_adapter_and_the_version_stays_retracted(served: dict) -> None:
    url, engine = served["url"], served["engine"]
    r = _post(url, "bob", "/v1/sessions/secret/retract")
    assert r.status_code == 404  # bob cannot retract alice's session (nor learn it exists)
    r = _post(url, "alice", "/v1/sessions/secret/retract")
    assert r.status_code == 200, r.text
    res = r.json()
    [line] = res["adapters"]
    assert line["adapter"] == "alice" and (line["served_version_before"], line["served_version"]) == (2, 1)
    assert line["rolled_back_to"]["path"] == str(served["alice"][0]) and line["retracted_versions"] == [[2, 2]]
    # The served weights' line never held the session: nothing of it is rolled back or retracted.
    assert res["rolled_back_to"] is None and res["retracted_versions"] == []
    assert engine.lora_adapters == {"alice": 1, "bob": 2} and engine.weight_version == 0
    assert not served["alice"][1].exists() and served["bob"][1].exists()  # only alice's later checkpoint goes
    # Ledgers: alice's version 2 is rolled back; bob's version 2 (the same number, his own weights) is not.
    assert _ledger(served["buffer"], "alice") == {1: True, 2: False}
    assert _ledger(served["buffer"], "bob") == {1: True, 2: True}

    # The adversary loads alice's retracted version again: under its number, or with none.
    copy = str(served["copy"])
    r = _post(url, "ops", "/load_lora_adapter", {"lora_name": "alice", "lora_path": copy, "weight_version": 2})
    assert r.status_code == 409 and r.json()["error"]["code"] == "weight_version_retracted", r.text
    assert PHRASE not in r.text
    r = _post(url, "ops", "/load_lora_adapter", {"lora_name": "alice", "lora_path": copy})
    assert r.status_code == 409 and r.json()["error"]["code"] == "weight_version_required", r.text
    assert engine.lora_adapters == {"alice": 1, "bob": 2}
    # Another line's version 2 is not alice's: bob's adapter and the served weights load it.
    r = _post(url, "ops", "/load_lora_adapter", {"lora_name": "bob", "lora_path": str(served["bob"][1]),
                                                 "weight_version": 2})
    assert r.status_code == 200, r.text
    r = _post(url, "ops", "/update_weights_from_disk", {"model_path": str(served["bob"][0]), "weight_version": 2})
    assert r.status_code == 200 and r.json()["success"], r.text
    assert engine.weight_version == 2 and engine.lora_adapters == {"alice": 1, "bob": 2}

    # alice's next turn is served by the rolled-back version of her adapter.
    rid = _chat(url, "alice", "after", "Hello again.")["id"]
    from openclaw.buffer import TrajectoryBuffer

    with TrajectoryBuffer.open(served["buffer"], create=False) as buf:
        turn_id = buf.find_turn(request_id=rid)[0]
        assert buf.get_turn(turn_id).weight_version == 1


def test_a_retract_with_no_earlier_checkpoint_unloads_the_adapter_and_leaves_the_others(served: dict) -> None:
    url, engine = served["url"], served["engine"]
    r = _post(url, "bob", "/v1/sessions/b1/retract")  # bob's first trained session: no checkpoint predates it
    assert r.status_code == 200, r.text
    [line] = r.json()["adapters"]
    assert line["adapter"] == "bob" and line["served_version"] is None and line["rolled_back_to"] is None
    assert line["retracted_versions"] == [[1, 2]]
    assert engine.lora_adapters == {"alice": 2}  # bob is served the served weights; alice keeps hers
    assert _ledger(served["buffer"], "bob") == {1: False, 2: False}
    assert _ledger(served["buffer"], "alice") == {1: True, 2: True}
    for version in (1, 2):
        r = _post(url, "ops", "/load_lora_adapter", {"lora_name": "bob", "lora_path": str(served["bob"][0]),
                                                     "weight_version": version})
        assert r.status_code == 409, r.text
    # A fresh adapter for bob under a new number is his trainer's restart: it loads.
    r = _post(url, "ops", "/load_lora_adapter", {"lora_name": "bob", "lora_path": str(served["alice"][0]),
                                                 "weight_version": 3})
    assert r.status_code == 200, r.text


def test_the_retract_plan_keeps_lines_apart(tmp_path: Path) -> None:
    """Fast, without a model: the plan's lines, from the ledger alone. A session trained into
    the served weights and into its user's adapter is rolled back in both lines."""
    from openclaw.buffer import TrajectoryBuffer, TurnRecord
    from openclaw.control.ledger import retracted_in
    from openclaw.control.retract import plan_retract

    def turn(sid: str) -> TurnRecord:
        return TurnRecord(session_id=sid, turn_index=None, turn_type="main",
                          messages=[{"role": "user", "content": sid}], prompt_ids=[5, 6], response_ids=[7],
                          response_logprobs=[-0.5], response_text="r", request_id=f"r-{sid}")

    with TrajectoryBuffer.open(tmp_path / "b") as buf:
        a, b, both = (buf.append_turn(turn(s)) for s in ("a", "b", "both"))
        buf.record_trained("u-alice", [a], 0, 1, save_dir=None, base_model="/base", adapter="alice")
        buf.record_trained("u-alice", [both], 1, 2, save_dir=None, base_model="/base", adapter="alice")
        buf.record_trained("u-bob", [b], 0, 2, save_dir=None, base_model="/base", adapter="bob")
        buf.record_trained("global", [both], 0, 5, save_dir=None, base_model="/base")
        plan = plan_retract(buf, "both", served_version=5, served_adapters={"alice": 2, "bob": 2})
        assert (plan.first_version, plan.rollback_to["weight_version"], plan.needs_rollback) == (5, 0, True)
        assert [(x.adapter, x.first_version, x.served_version, x.rollback_to) for x in plan.adapters] == \
            [("alice", 2, 2, None)]
        assert plan.consumers == ["global", "u-alice"]
        buf.begin_retraction("both", plan.to_json())
        assert retracted_in(buf, 2, "alice") == ["both"] and retracted_in(buf, 2, "bob") == []
        assert retracted_in(buf, 2) == [] and retracted_in(buf, 5) == ["both"]


@pytest.mark.parametrize("served", ["gated"], indirect=True)
def test_the_command_line_retract_rolls_an_adapter_back_through_the_gate(served: dict,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m openclaw.control retract --engine-url` reaches the server over HTTP: its rollback
    of alice's adapter is recognised as the retract's (the journal names it) and served without
    the canary, though the gate registered that version when it was first pushed."""
    from openclaw.buffer import TrajectoryBuffer
    from openclaw.control.retract import HTTPWeightTarget, retract_session

    url, engine = served["url"], served["engine"]
    monkeypatch.setenv("OPENCLAW_API_KEY", KEYS["ops"])
    _post(url, "ops", "/load_lora_adapter", {"lora_name": "alice", "lora_path": str(served["alice"][0]),
                                            "weight_version": 1})  # v1 is in alice's registry too
    _post(url, "ops", "/load_lora_adapter", {"lora_name": "alice", "lora_path": str(served["alice"][1]),
                                            "weight_version": 3})
    assert engine.lora_adapters == {"alice": 3, "bob": 2}
    with TrajectoryBuffer.open(served["buffer"], create=False) as buf:
        stored = next(s for s in buf.session_ids(user_id="alice") if s.endswith("secret"))
        res = retract_session(buf, stored, HTTPWeightTarget(url))
    [line] = res.adapters
    assert (line["served_version_before"], line["served_version"]) == (3, 1) and line["retracted_versions"] == [[2, 3]]
    assert engine.lora_adapters == {"alice": 1, "bob": 2}
    statuses = {v["version"]: v["status"] for v in
                httpx.get(url + "/v1/weights", params={"adapter": "alice"}, timeout=60,
                          headers={"Authorization": f"Bearer {KEYS['ops']}"}).json()["data"]}
    assert statuses[1] == "serving" and statuses[2] == statuses[3] == "retracted", statuses
    r = _post(url, "ops", "/v1/weights/3/promote?adapter=alice")
    assert r.status_code == 409 and r.json()["error"]["code"] == "weight_version_retracted", r.text
