"""Gated promotion and rollback per user, over real HTTP with a key file: each user's adapter is a
weight line of its own (its registry, its canary on that user's own rated turns, its promote and
rollback), and nothing done to one user's line moves another's or the served weights.

The canary is set to refuse any candidate that has rated turns to be judged on
(OPENCLAW_CANARY_MAX_SESSIONS_DROP=-100): alice rated a turn, bob did not, so the same gate
refuses alice's push and passes bob's. A leak of alice's ratings into bob's canary would refuse
bob's too."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789", "ops": "key-ops-0123456789"}


def _req(url: str, who: str, method: str, path: str, body: dict | None = None, **params: Any) -> httpx.Response:
    return httpx.request(method, url + path, json=body, params=params, timeout=300,
                         headers={"Authorization": f"Bearer {KEYS[who]}"})


@pytest.fixture()
def gated(tiny_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, random_lora: Any):
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.intercept.config import InterceptConfig
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    monkeypatch.setenv("OPENCLAW_PROMOTION_GATE", "1")
    monkeypatch.setenv("OPENCLAW_CONTROL_DIR", str(tmp_path / "control"))
    monkeypatch.setenv("OPENCLAW_CANARY_PROBE_LIMIT", "2")
    monkeypatch.setenv("OPENCLAW_CANARY_MAX_SESSIONS_DROP", "-100")
    key_file = tmp_path / "keys.json"
    key_file.write_text(json.dumps({"users": {"alice": {"key": KEYS["alice"]}, "bob": {"key": KEYS["bob"]}},
                                    "admins": {"ops": {"key": KEYS["ops"]}}}))
    rl = RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=tmp_path / "rl_buffer", session_idle_timeout=600))
    engine = HFEngine.load(str(tiny_model_path), max_batch_size=4)
    srv = serve_in_background(create_app(ServerConfig(rl=rl, api_keys_file=key_file), engine=engine))
    targets = ["q_proj", "v_proj"]
    folders = {f"{who}{n}": str(random_lora(tiny_model_path, tmp_path / f"{who}{n}", seed, targets=targets))
               for who, n, seed in (("alice", 1, 1), ("alice", 2, 2), ("bob", 1, 3))}
    try:
        r = httpx.post(srv.base_url + "/v1/chat/completions", timeout=120,
                       headers={"Authorization": f"Bearer {KEYS['alice']}", "X-Session-Id": "rated",
                                "X-Session-Done": "true"},
                       json={"model": "m", "messages": [{"role": "user", "content": "Say hi."}], "max_tokens": 4})
        assert r.status_code == 200, r.text
        r = _req(srv.base_url, "alice", "POST", "/v1/feedback", {"id": r.json()["id"], "rating": "down"})
        assert r.status_code == 200, r.text
        yield {"url": srv.base_url, "engine": engine, "folders": folders, "control": tmp_path / "control",
               "base": str(tiny_model_path)}
    finally:
        srv.stop()
        asyncio.run(engine.shutdown())


def _load(g: dict, name: str, folder: str, version: int) -> dict:
    r = _req(g["url"], "ops", "POST", "/load_lora_adapter", {"lora_name": name, "lora_path": g["folders"][folder],
                                                             "weight_version": version})
    assert r.status_code == 200 and r.json()["success"], r.text
    return r.json()["promotion"]


def _statuses(g: dict, adapter: str, who: str = "ops") -> dict[int, str]:
    r = _req(g["url"], who, "GET", "/v1/weights", adapter=adapter)
    assert r.status_code == 200, r.text
    return {v["version"]: v["status"] for v in r.json()["data"]}


def test_each_users_adapter_has_its_own_gate_promote_and_rollback(gated: dict) -> None:
    url, engine = gated["url"], gated["engine"]
    # The same gate: alice's push is judged on her rated turn and refused; bob has none, his passes.
    out = _load(gated, "alice", "alice1", 1)
    assert out["status"] == "refused" and "your rated sessions" in out["message"], out
    assert out["canary"]["candidate"]["rated_turns"] == 1
    out = _load(gated, "bob", "bob1", 1)
    assert out["status"] == "serving" and out["canary"]["candidate"]["rated_turns"] == 0, out
    assert engine.lora_adapters == {"bob": 1}
    # The user decides: promote over the canary's refusal, on alice's line only.
    r = _req(url, "ops", "POST", "/v1/weights/1/promote", {}, adapter="alice")
    assert r.status_code == 200 and r.json()["adapter"] == "alice" and r.json()["served_version"] == 1, r.text
    assert engine.lora_adapters == {"alice": 1, "bob": 1}
    _req(url, "ops", "POST", "/v1/weights/1/promote", {}, adapter="alice")  # already served: no change
    assert _load(gated, "alice", "alice2", 2)["status"] == "refused"
    r = _req(url, "ops", "POST", "/v1/weights/2/promote", {}, adapter="alice")
    assert r.status_code == 200 and engine.lora_adapters == {"alice": 2, "bob": 1}
    # The folders served are the kept copies in alice's own registry.
    kept = Path(engine.lora_adapter_paths["alice"])
    assert kept.parent == gated["control"] / "adapters" / "a-alice" and kept.name == "v2"

    # Rollback on alice's line: to her version 1, then to no adapter at all (-1: the served weights).
    r = _req(url, "ops", "POST", "/v1/weights/1/rollback", {}, adapter="alice")
    assert r.status_code == 200 and engine.lora_adapters == {"alice": 1, "bob": 1}, r.text
    assert _statuses(gated, "alice") == {-1: "retired", 1: "serving", 2: "rolled_back"}
    r = _req(url, "ops", "POST", "/v1/weights/-1/rollback", {}, adapter="alice")
    assert r.status_code == 200 and engine.lora_adapters == {"bob": 1}, r.text
    # bob's line and the served weights' line never moved.
    assert _statuses(gated, "bob") == {-1: "retired", 1: "serving"}
    assert {v["version"]: v["status"] for v in _req(url, "ops", "GET", "/v1/weights").json()["data"]} == {0: "serving"}
    assert engine.weight_version == 0


def test_a_user_sees_only_their_own_line_and_cannot_change_it(gated: dict) -> None:
    url = gated["url"]
    _load(gated, "bob", "bob1", 1)
    assert _statuses(gated, "bob", who="bob") == {-1: "retired", 1: "serving"}
    r = _req(url, "alice", "GET", "/v1/weights", adapter="bob")
    assert r.status_code == 404 and r.json()["error"]["code"] == "adapter_not_found"
    none = _req(url, "alice", "GET", "/v1/weights", adapter="nobody")  # reads exactly like bob's
    assert none.status_code == 404 and none.json()["error"] == {**r.json()["error"], "message":
                                                                 r.json()["error"]["message"].replace("bob", "nobody")}
    for who in ("alice", "bob"):  # changing weights is an admin's, on any line
        r = _req(url, who, "POST", "/v1/weights/-1/rollback", {}, adapter="bob")
        assert r.status_code == 403, r.text
    assert gated["engine"].lora_adapters == {"bob": 1}
    r = _req(url, "ops", "POST", "/load_lora_adapter", {"lora_name": "a b", "lora_path": gated["folders"]["bob1"]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "lora_name", r.text
    # A name that reads as a path keeps its versions inside the adapters folder all the same.
    r = _req(url, "ops", "POST", "/load_lora_adapter", {"lora_name": "../escape", "lora_path": gated["folders"]["bob1"],
                                                        "weight_version": 1})
    assert r.status_code == 200, r.text
    # (no user has that name, so its canary replays every user's rated turns: alice's refuses it)
    assert r.json()["promotion"]["status"] == "refused" and "../escape" not in gated["engine"].lora_adapters
    [kept] = [Path(v["path"]).resolve() for v in _req(url, "ops", "GET", "/v1/weights", adapter="../escape").json()["data"]
              if v["version"] == 1]
    assert kept.parent.parent == (gated["control"] / "adapters").resolve()
    assert not (gated["control"] / "escape").exists()
