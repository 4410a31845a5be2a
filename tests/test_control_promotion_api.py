"""Weight versions over real HTTP: the trainer's push through the gate, GET /v1/weights,
promote / rollback from the API and from `python -m openclaw.control`, kept folders surviving
the trainer's clean-up, and errors in OpenAI's shape. Tiny models (fast); the harmful-update
gate test with SmolLM2 is in test_control_promotion_gate.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def gated_server(tiny_model_path, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENCLAW_PROMOTION_GATE", "1")
    monkeypatch.setenv("OPENCLAW_CONTROL_DIR", str(tmp_path / "control"))
    monkeypatch.setenv("OPENCLAW_CANARY_PROBE_LIMIT", "2")
    app = create_app(ServerConfig(engine=EngineConfig(model_path=str(tiny_model_path))))
    with serve_in_background(app) as srv, httpx.Client(base_url=srv.base_url, timeout=300) as client:
        yield client, app


def push(client: httpx.Client, folder: Path, version: int) -> dict:
    r = client.post("/update_weights_from_disk", json={"model_path": str(folder), "weight_version": str(version)})
    assert r.status_code == 200, r.text
    return r.json()


def test_push_promote_rollback_and_cli(gated_server, tiny_model_path, tiny_model_path_alt, tmp_path):
    client, app = gated_server
    listing = client.get("/v1/weights").json()
    assert listing["gate"] is True and listing["served_version"] == 0
    assert [(v["version"], v["status"]) for v in listing["data"]] == [(0, "serving")]
    # Advertised to the trainer: this engine swaps live, weight_sync skips the pause.
    assert client.get("/get_server_info").json()["weight_swap"] == "live"

    # The trainer's sync folder is deleted after the push (as slime does): the kept copy survives.
    sync = tmp_path / "sync" / "v1"
    shutil.copytree(tiny_model_path_alt, sync)
    out = push(client, sync, 1)
    shutil.rmtree(sync)
    assert out["success"] is True and out["promotion"]["status"] == "serving", out
    # Random tiny models answer no probe question: 0% vs 0% is no regression.
    assert out["promotion"]["canary"]["passed"] is True
    assert out["promotion"]["canary"]["candidate"]["seconds"] > 0  # the canary's cost is measured
    assert client.get("/health").json()["weight_version"] == 1

    push(client, tiny_model_path, 2)
    assert client.get("/health").json()["weight_version"] == 2

    # rollback from the command line (real subprocess, real HTTP)
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "openclaw.control", "--url", str(client.base_url), "rollback", "1"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["message"] == "serving weight version 1: rolled back from version 2 by the user"
    assert client.get("/health").json()["weight_version"] == 1
    statuses = {v["version"]: v["status"] for v in client.get("/v1/weights").json()["data"]}
    assert statuses == {0: "retired", 1: "serving", 2: "rolled_back"}
    # v1 was served from the kept folder (its sync folder is gone)
    kept = Path(app.state.openclaw.engine.model_path)
    assert kept.parent == tmp_path / "control" and kept.name == "v1"

    # promote from the API: the user may bring back any kept version
    r = client.post("/v1/weights/2/promote", json={})
    assert r.status_code == 200 and r.json()["served_version"] == 2
    listed = subprocess.run([sys.executable, "-m", "openclaw.control", "--url", str(client.base_url), "list"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert listed.returncode == 0 and "served version: 2" in listed.stdout, listed.stdout + listed.stderr


def test_errors_use_openai_shape(gated_server):
    client, _ = gated_server
    r = client.post("/v1/weights/7/promote", json={})
    assert r.status_code == 404
    err = r.json()["error"]
    assert err["param"] == "version" and "not known" in err["message"]
    r = client.post("/v1/weights/0/rollback", json={})
    assert r.status_code == 409 and "not older" in r.json()["error"]["message"]
    r = client.post("/update_weights_from_disk", json={"model_path": "/nonexistent/folder"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "model_path"
    r = client.post("/v1/weights/abc/promote", json={})
    assert r.status_code in (400, 422)


def test_a_version_number_is_never_reused(gated_server, tiny_model_path, tiny_model_path_alt):
    """A push under a number the registry already holds (a trainer restarted and counting from 1
    again) is refused with a 409 naming the collision; nothing is overwritten or served."""
    client, _ = gated_server
    push(client, tiny_model_path_alt, 1)
    push(client, tiny_model_path, 2)
    kept = client.get("/v1/weights").json()["data"]
    for again in (1, 2):  # a retired version and the served one
        r = client.post("/update_weights_from_disk", json={"model_path": str(tiny_model_path_alt),
                                                           "weight_version": str(again)})
        assert r.status_code == 409, r.text
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"} and err["code"] == "weight_version_exists"
        assert f"weight version {again} " in err["message"] and err["param"] == "weight_version"
    assert client.get("/v1/weights").json()["data"] == kept
    assert client.get("/health").json()["weight_version"] == 2


def test_gate_off_serves_push_directly(tiny_model_path_alt, tiny_model_path, tmp_path, monkeypatch):
    monkeypatch.delenv("OPENCLAW_PROMOTION_GATE", raising=False)
    monkeypatch.setenv("OPENCLAW_CONTROL_DIR", str(tmp_path / "control"))
    app = create_app(ServerConfig(engine=EngineConfig(model_path=str(tiny_model_path))))
    with serve_in_background(app) as srv, httpx.Client(base_url=srv.base_url, timeout=300) as client:
        assert client.get("/v1/weights").json()["gate"] is False
        r = client.post("/update_weights_from_disk", json={"model_path": str(tiny_model_path_alt)})
        assert r.status_code == 200 and r.json()["success"] is True
        assert client.get("/health").json()["weight_version"] == 1


def test_personal_agent_launchers_turn_the_gate_on(tmp_path):
    """On by default for the live (personal-agent) launchers, off when the user says so."""
    import os

    from openclaw.launch import build_plan

    env = {k: v for k, v in os.environ.items() if k not in ("OPENCLAW_PROMOTION_GATE", "MODEL_PATH", "RAY_ADDRESS")}
    env.update(OPENCLAW_DRY_RUN="1", RL_BUFFER_DIR=str(tmp_path / "buf"), CKPT_SAVE_DIR=str(tmp_path / "ckpt"),
               LOG_DIR=str(tmp_path / "logs"), CPU_PRESET_MODEL="tiny", RAY_AUTH_MODE="disabled")
    server = build_plan("openclaw-combine", [], env, REPO).server
    assert server.env["OPENCLAW_PROMOTION_GATE"] == "1"
    assert server.env["OPENCLAW_TRAIN_LOG_DIR"] == str(tmp_path / "logs")
    off = build_plan("openclaw-combine", [], {**env, "OPENCLAW_PROMOTION_GATE": "0"}, REPO).server
    assert off.env["OPENCLAW_PROMOTION_GATE"] == "0"
