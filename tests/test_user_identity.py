"""Several users on one server, tested as an adversary would: the real server (tiny model, RL
intercept) over real HTTP with a key file of two users and an admin, and a keyless loopback
server where `X-OpenClaw-User` names the user.

User B must never read, rate, retract or export user A's sessions (the answer is the 404 of a
session that does not exist, byte for byte but the id), never land in A's session by reusing its
id or continuing its conversation, and never act as A by naming A in a header."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from openclaw.buffer import DB_NAME, AppendOp, TrajectoryBuffer, TurnRecord
from openclaw.buffer.schema import SCHEMA_VERSION
from openclaw.httpapi.config import ConfigError

KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789", "ops": "key-ops-0123456789"}
PLANTED = "PLANTED-zebra-quartz-7731"  # text only alice ever sends


def _auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[user]}"}


def _start(engine: Any, buf_dir: Path, **config: Any) -> Any:
    from openclaw.intercept.config import InterceptConfig
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    rl = RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buf_dir, session_idle_timeout=600))
    return serve_in_background(create_app(ServerConfig(rl=rl, **config), engine=engine))


@pytest.fixture(scope="module")
def engine(tiny_model_path: Path):
    from openclaw.engines.hf_engine import HFEngine

    eng = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=4)
    yield eng
    asyncio.run(eng.shutdown())


@pytest.fixture(scope="module")
def keyed(engine: Any, tmp_path_factory: pytest.TempPathFactory):
    """A server with per-user keys: alice and bob are users, ops is an admin."""
    root = tmp_path_factory.mktemp("users")
    key_file = root / "keys.json"
    key_file.write_text(json.dumps({"users": {"alice": {"key": KEYS["alice"]}, "bob": {"key": KEYS["bob"]}},
                                    "admins": {"ops": {"key": KEYS["ops"]}}}))
    srv = _start(engine, root / "rl_buffer", api_keys_file=key_file)
    try:
        with httpx.Client(base_url=srv.base_url, timeout=120) as client:
            yield {"client": client, "buffer": root / "rl_buffer", **_alice_history(client)}
    finally:
        srv.stop()


def _chat(client: httpx.Client, user: str | None, messages: list[dict], *, sid: str | None = None,
          headers: dict[str, str] | None = None) -> httpx.Response:
    h = {**(_auth(user) if user else {}), **({"X-Session-Id": sid} if sid else {}), **(headers or {})}
    return client.post("/v1/chat/completions", headers=h,
                       json={"model": "m", "messages": messages, "max_tokens": 4, "temperature": 1.0})


def _alice_history(client: httpx.Client) -> dict[str, Any]:
    """Alice's two sessions: `shared` (a chosen id, holding PLANTED) and one bob later tries to continue
    (bob sends its text himself, so it holds no PLANTED)."""
    q1 = {"role": "user", "content": f"My code word is {PLANTED}. Repeat it."}
    r = _chat(client, "alice", [q1], sid="shared")
    assert r.status_code == 200, r.text
    first = r.json()
    q2 = {"role": "user", "content": "Continuity check: say hi."}
    r = _chat(client, "alice", [q2])
    assert r.status_code == 200, r.text
    reply = r.json()["choices"][0]["message"]
    return {"alice_cid": first["id"], "continuity_prefix": [q2, {"role": "assistant", "content": reply["content"]}]}


def _same_but_id(a: httpx.Response, b: httpx.Response, id_a: str, id_b: str) -> None:
    """Two answers identical (status, body shape, message) except for the id each names."""
    assert a.status_code == b.status_code == 404, (a.text, b.text)
    assert set(a.json()) == set(b.json()) == {"error"}
    assert a.text.replace(id_a, "ID") == b.text.replace(id_b, "ID"), (a.text, b.text)


def _sessions(client: httpx.Client, user: str, **kw: Any) -> dict[str, dict]:
    r = client.get("/v1/sessions", headers={**_auth(user), **kw.get("headers", {})})
    assert r.status_code == 200, r.text
    return {s["session_id"]: s for s in r.json()["data"]}


# ---- the adversary: bob against alice's sessions ------------------------------------------------------
def test_b_cannot_read_rate_retract_or_export_a_sessions(keyed: dict) -> None:
    c, bob = keyed["client"], _auth("bob")
    # read a session's feedback
    _same_but_id(c.get("/v1/sessions/shared/feedback", headers=bob), c.get("/v1/sessions/nope/feedback", headers=bob),
                 "shared", "nope")
    # export it
    _same_but_id(c.get("/v1/sessions/shared", headers=bob), c.get("/v1/sessions/nope", headers=bob), "shared", "nope")
    _same_but_id(c.get("/v1/sessions/alice~shared", headers=bob), c.get("/v1/sessions/nope", headers=bob),
                 "alice~shared", "nope")
    # rate a turn, by session + index and by completion id
    _same_but_id(c.post("/v1/feedback", headers=bob, json={"session_id": "shared", "turn_index": 0, "rating": "down"}),
                 c.post("/v1/feedback", headers=bob, json={"session_id": "nope", "turn_index": 0, "rating": "down"}),
                 "shared", "nope")
    _same_but_id(c.post("/v1/feedback", headers=bob, json={"id": keyed["alice_cid"], "rating": "down"}),
                 c.post("/v1/feedback", headers=bob, json={"id": "chatcmpl-nope", "rating": "down"}),
                 keyed["alice_cid"], "chatcmpl-nope")
    # retract it
    _same_but_id(c.post("/v1/sessions/shared/retract", headers=bob, json={}),
                 c.post("/v1/sessions/nope/retract", headers=bob, json={}), "shared", "nope")
    _same_but_id(c.post("/v1/sessions/alice~shared/retract", headers=bob, json={}),
                 c.post("/v1/sessions/nope/retract", headers=bob, json={}), "alice~shared", "nope")
    # alice's session is whole, unrated, and hers alone
    mine = _sessions(c, "alice")
    assert mine["shared"]["turns"] == 1 and mine["shared"]["user_id"] == "alice"
    assert c.get("/v1/sessions/shared/feedback", headers=_auth("alice")).json()["data"] == []
    # lists: bob's views name none of alice's sessions
    assert not any("alice" in s or s == "shared" for s in _sessions(c, "bob"))
    for path in ("/v1/ledger", "/v1/retractions", "/dashboard/state"):
        r = c.get(path, headers=bob)
        assert r.status_code == 200 and PLANTED not in r.text and "alice" not in r.text, (path, r.text)


def test_b_reusing_a_session_id_or_continuing_a_text_gets_its_own_session(keyed: dict) -> None:
    c = keyed["client"]
    before = _sessions(c, "alice")
    r = _chat(c, "bob", [{"role": "user", "content": "Hello from bob."}], sid="shared")
    assert r.status_code == 200, r.text
    # alice's conversation text, sent by bob as if he continued it
    r = _chat(c, "bob", [*keyed["continuity_prefix"], {"role": "user", "content": "And then?"}])
    assert r.status_code == 200, r.text
    assert _sessions(c, "alice") == before  # not one turn more in any of alice's sessions
    bobs = _sessions(c, "bob")
    assert bobs["shared"]["turns"] == 1 and bobs["shared"]["user_id"] == "bob"
    exported = [c.get(f"/v1/sessions/{sid}", headers=_auth("bob")).json() for sid in bobs]
    sources = sorted(t["metadata"]["session_source"] for s in exported for t in s["turns"])
    assert sources == ["header", "new"], sources  # the continued text did not match alice's session
    # bob rates and reads his own "shared", never alice's
    r = c.post("/v1/feedback", headers=_auth("bob"), json={"session_id": "shared", "turn_index": 0, "rating": "up"})
    assert r.status_code == 200 and r.json()["session_id"] == "shared", r.text
    assert c.get("/v1/sessions/shared/feedback", headers=_auth("alice")).json()["data"] == []


def test_a_header_naming_another_user_is_refused(keyed: dict) -> None:
    c = keyed["client"]
    for user, named in (("bob", "alice"), ("ops", "alice"), ("bob", "default")):
        r = _chat(c, user, [{"role": "user", "content": "hi"}], headers={"X-OpenClaw-User": named})
        assert r.status_code == 403, r.text
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["code"] == "user_mismatch"
        assert err["type"] == "permission_error"
    assert _chat(c, "bob", [{"role": "user", "content": "hi"}], headers={"X-OpenClaw-User": "bob"}).status_code == 200
    assert c.get("/v1/sessions", headers={**_auth("bob"), "X-OpenClaw-User": "bad user"}).status_code == 400
    assert c.get("/v1/sessions").status_code == 401
    assert c.get("/v1/sessions", headers={"Authorization": "Bearer key-mallory"}).status_code == 401


def test_an_admin_key_sees_both_and_only_admins_change_weights(keyed: dict) -> None:
    c, ops = keyed["client"], _auth("ops")
    every = _sessions(c, "ops")
    assert {"alice~shared", "bob~shared"} <= set(every)
    assert {every["alice~shared"]["user_id"], every["bob~shared"]["user_id"]} == {"alice", "bob"}
    assert c.get("/v1/sessions/alice~shared/feedback", headers=ops).status_code == 200
    assert PLANTED in c.get("/v1/sessions/alice~shared", headers=ops).text
    state = c.get("/dashboard/state", headers=ops).json()
    assert {"alice~shared", "bob~shared"} <= {s["session_id"] for s in state["sessions"]}
    assert state["buffer"] is not None
    for path, body in (("/v1/weights/1/promote", {}), ("/v1/weights/1/rollback", {}),
                       ("/update_weights_from_disk", {"model_path": "/nonexistent"}), ("/pause_generation", {}),
                       ("/abort_request", {"rid": "x"})):
        r = c.post(path, headers=_auth("bob"), json=body)
        assert r.status_code == 403 and r.json()["error"]["code"] == "admin_only", (path, r.text)
    for path, body in (("/v1/weights/1/promote", {}), ("/update_weights_from_disk", {"model_path": "/nonexistent"})):
        assert c.post(path, headers=ops, json=body).status_code != 403, path


def test_a_planted_phrase_is_in_no_record_of_b(keyed: dict) -> None:
    c, ops = keyed["client"], _auth("ops")
    bob_sessions = [sid for sid, s in _sessions(c, "ops").items() if s["user_id"] == "bob"]
    assert bob_sessions
    for sid in bob_sessions:
        export = c.get(f"/v1/sessions/{sid}", headers=ops)
        assert export.status_code == 200 and export.json()["user_id"] == "bob"
        assert PLANTED not in export.text, sid
    assert PLANTED in c.get("/v1/sessions/alice~shared", headers=ops).text  # where alice put it
    # and in the database itself, read by another process: every turn row of bob is bob's session's
    code = ("import json, sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(json.dumps(c.execute("
            "'SELECT t.user_id, s.user_id, t.session_id FROM turns t JOIN sessions s USING (session_id)').fetchall()))")
    rows = json.loads(subprocess.run([sys.executable, "-c", code, str(keyed["buffer"] / DB_NAME)],
                                     capture_output=True, text=True, check=True).stdout)
    assert rows and all(t == s for t, s, _ in rows)
    assert {sid for u, _, sid in rows if u == "bob"} == set(bob_sessions)


# ---- the start-up errors of a key file -------------------------------------------------------------------
@pytest.mark.parametrize(("content", "expected"), [
    ({"users": {"alice": {"key": "same"}, "bob": {"key": "same"}}}, "users.bob.key' repeats the key of 'users.alice.key'"),
    ({"users": {"alice": {"key": "   "}}}, "users.alice.key' is blank"),
    ({"users": {"alice": {"key": "a b"}}}, "users.alice.key' contains whitespace"),
    ({"users": {"al ice": {"key": "k1"}}}, "user id 'al ice' in 'users' must match"),
    ({"users": {"a" * 65: {"key": "k1"}}}, "must match [A-Za-z0-9_.-]{1,64}"),
    ({"users": {"alice": "k1"}}, "'users.alice' must be an object with exactly one field"),
    ({"users": {"default": {"key": "k1"}}}, "'users.default': the user id 'default' is reserved"),
    ({"people": {}}, "expected a JSON object with 'users' and/or 'admins'"),
    ({"users": {}}, "no keys"),
    ("{not json", "not valid JSON"),
])
def test_a_malformed_key_file_is_a_clear_start_error(tmp_path: Path, content: Any, expected: str) -> None:
    from openclaw.server.config import parse_config

    path = tmp_path / "keys.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ConfigError) as info:
        parse_config(["--api-keys-file", str(path)], env={})
    assert str(path) in str(info.value) and expected in str(info.value), str(info.value)


def test_key_file_flag_env_and_single_key(tmp_path: Path) -> None:
    from openclaw.server.config import parse_config

    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"users": {"alice": {"key": "k-alice"}}}))
    config = parse_config([], env={"OPENCLAW_API_KEYS_FILE": str(path), "OPENCLAW_API_KEY": "k-admin"})
    table = config.key_table()
    assert table.match("k-alice").user_id == "alice" and not table.match("k-alice").is_admin
    assert table.match("k-admin").user_id == "default" and table.match("k-admin").is_admin
    assert table.match("k-nobody") is None
    with pytest.raises(ConfigError, match="repeats the key"):
        parse_config(["--api-keys-file", str(path), "--api-key", "k-alice"], env={})
    with pytest.raises(ConfigError, match="cannot read it"):
        parse_config(["--api-keys-file", str(tmp_path / "missing.json")], env={})
    # a key file is a key: a public bind is allowed with it alone
    assert parse_config(["--api-keys-file", str(path), "--host", "0.0.0.0"], env={}).has_keys


# ---- keyless loopback: the header names the user ------------------------------------------------------------
def test_unauthenticated_loopback_header_mode(engine: Any, tmp_path: Path) -> None:
    srv = _start(engine, tmp_path / "rl_buffer")
    try:
        with httpx.Client(base_url=srv.base_url, timeout=120) as c:
            carol = {"X-OpenClaw-User": "carol"}
            assert _chat(c, None, [{"role": "user", "content": f"carol {PLANTED}"}], sid="s1",
                         headers=carol).status_code == 200
            assert _chat(c, None, [{"role": "user", "content": "no header"}], sid="s1").status_code == 200
            listed = c.get("/v1/sessions", headers=carol).json()["data"]
            assert [(s["session_id"], s["user_id"]) for s in listed] == [("s1", "carol")]
            everyone = {s["session_id"]: s["user_id"] for s in c.get("/v1/sessions").json()["data"]}
            assert everyone == {"carol~s1": "carol", "s1": "default"}  # no header: the admin "default"
            assert PLANTED not in c.get("/v1/sessions/s1").text
            dave = {"X-OpenClaw-User": "dave"}
            _same_but_id(c.get("/v1/sessions/s1/feedback", headers=dave),
                         c.get("/v1/sessions/nope/feedback", headers=dave), "s1", "nope")
            for bad in ("", "bad user", "x" * 65, "caröl".encode("latin-1"), "a/b", "carol~x"):
                r = c.get("/v1/sessions", headers={"X-OpenClaw-User": bad})
                assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_user", (bad, r.text)
            r = c.get("/v1/sessions", headers=[("X-OpenClaw-User", "carol"), ("X-OpenClaw-User", "dave")])
            assert r.status_code == 400
            r = c.post("/v1/weights/1/promote", headers=carol, json={})
            assert r.status_code == 403 and r.json()["error"]["code"] == "admin_only"
    finally:
        srv.stop()


# ---- an old buffer ---------------------------------------------------------------------------------------------
def test_a_version_4_buffer_opens_and_migrates(tmp_path: Path) -> None:
    d = tmp_path / "old"
    with TrajectoryBuffer.open(d) as buf:
        buf.append_turn(TurnRecord(session_id="s", turn_index=None, turn_type="main",
                                   messages=[{"role": "user", "content": "hi"}], prompt_ids=[1, 2],
                                   response_ids=[3], response_logprobs=[-0.5], request_id="chatcmpl-old"))
        buf.record_trained("old-trainer", [buf.find_turn(request_id="chatcmpl-old")[0]], 0, 1, save_dir=None,
                           base_model=None)
    # the version-4 layout, made in a child process (this one must not open the file outside SQLite)
    code = ("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
            "[c.execute(f'DROP INDEX {i}') for i in ('turns_user', 'sessions_user')]; "
            "[c.execute(f'ALTER TABLE {t} DROP COLUMN user_id') for t in ('turns', 'sessions')]; "
            "c.execute('ALTER TABLE ledger DROP COLUMN adapter'); "
            "c.execute('PRAGMA user_version=4'); c.commit(); c.close()")
    subprocess.run([sys.executable, "-c", code, str(d / DB_NAME)], check=True)
    with TrajectoryBuffer.open(d, create=False) as buf:
        assert buf._q1("PRAGMA user_version")[0] == SCHEMA_VERSION == 6
        assert buf.session_turns("s")[0].user_id == "default" and buf.session_user("s") == "default"
        # an old ledger row trained the served weights (there were no adapters by name)
        assert [(r["consumer_id"], r["adapter"]) for r in buf.ledger()] == [("old-trainer", "")]
        assert buf.ledger(adapter="") and not buf.ledger(adapter="alice")
        buf.append_turn(TurnRecord(session_id="alice~s", turn_index=None, turn_type="side", trainable=False,
                                   messages=[{"role": "user", "content": "hi"}], user_id="alice"))
        assert buf.session_ids(user_id="alice") == ["alice~s"] and buf.session_ids(user_id="default") == ["s"]
        # a turn of another user into a session is refused by the buffer itself
        res = buf.write_ops([AppendOp(TurnRecord(
            session_id="alice~s", turn_index=None, turn_type="side", trainable=False,
            messages=[{"role": "user", "content": "x"}], user_id="bob"))])
        assert "belongs to another user" in str(res[0])
        plan = buf._conn.execute("EXPLAIN QUERY PLAN SELECT turn_id FROM turns WHERE user_id=? AND state=? "
                                 "ORDER BY turn_id", ("alice", "judged")).fetchall()
        assert any("turns_user" in str(row) for row in plan), plan
        assert buf.verify() == []
