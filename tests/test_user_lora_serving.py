"""One server, an adapter per user, over real HTTP with a key file (the `openai` SDK for chats):
a user with an adapter loaded under their id is served by it and nobody else is; a plain user can
neither load, unload nor name another user's adapter (the refusal reads like a missing adapter's),
and a user without an adapter gets the served model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

KEYS = {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789", "ops": "key-ops-0123456789"}
QUESTION = [{"role": "user", "content": "Name three colours of the rainbow."}]


def _start(engine: Any, root: Path) -> Any:
    from openclaw.intercept.config import InterceptConfig
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    key_file = root / "keys.json"
    key_file.write_text(json.dumps({"users": {"alice": {"key": KEYS["alice"]}, "bob": {"key": KEYS["bob"]}},
                                    "admins": {"ops": {"key": KEYS["ops"]}}}))
    rl = RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=root / "rl_buffer", session_idle_timeout=600))
    return serve_in_background(create_app(ServerConfig(rl=rl, api_keys_file=key_file), engine=engine))


@pytest.fixture(scope="module")
def server(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory, random_lora):
    from openclaw.engines.hf_engine import HFEngine

    root = tmp_path_factory.mktemp("user-lora")
    engine = HFEngine.load(str(tiny_model_path), max_batch_size=4)
    srv = _start(engine, root)
    try:
        adapter = random_lora(tiny_model_path, root / "alice-lora", 1, targets=["q_proj", "v_proj", "up_proj",
                                                                                "down_proj"])
        yield {"url": srv.base_url, "alice_adapter": adapter,
               "base": str(tiny_model_path)}
    finally:
        srv.stop()
        asyncio.run(engine.shutdown())


def _post(server: dict, user: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(server["url"] + path, json=body, timeout=120,
                      headers={"Authorization": f"Bearer {KEYS[user]}"})


def _reply(server: dict, user: str) -> tuple[str, list[float]]:
    from openai import OpenAI

    client = OpenAI(base_url=server["url"] + "/v1", api_key=KEYS[user])
    out = client.chat.completions.create(model="m", messages=QUESTION, max_tokens=16, temperature=0.0, logprobs=True,
                                         extra_headers={"X-Session-Id": f"{user}-q"})
    return out.choices[0].message.content, [t.logprob for t in out.choices[0].logprobs.content]


def _alone(path: Path) -> str:
    """alice's adapter served alone: PEFT's merge of it, in an engine of its own, on the prompt the
    server renders (the model's own chat template)."""
    from openclaw.engines.base import GenerationRequest, SamplingParams
    from openclaw.engines.hf_engine import HFEngine

    async def run() -> str:
        eng = HFEngine.load(str(path))
        try:
            ids = eng.tokenizer.apply_chat_template(QUESTION, add_generation_prompt=True, tokenize=True)
            ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
            params = SamplingParams(max_new_tokens=16, temperature=0.0)
            return (await eng.generate(GenerationRequest(input_ids=tuple(ids), params=params))).text
        finally:
            await eng.shutdown()

    return asyncio.run(run())


def test_a_plain_user_cannot_load_or_unload_adapters(server):
    for user in ("alice", "bob"):
        r = _post(server, user, "/load_lora_adapter", {"lora_name": user, "lora_path": str(server["alice_adapter"])})
        assert r.status_code == 403, r.text
        assert "error" in r.json()
        assert _post(server, user, "/unload_lora_adapter", {"lora_name": "alice"}).status_code == 403


def test_each_user_is_served_by_their_own_adapter_and_nobody_elses(server):
    _post(server, "ops", "/unload_lora_adapter", {"lora_name": "alice"})  # whichever test ran first
    before_alice, before_bob = _reply(server, "alice"), _reply(server, "bob")
    assert before_alice[0] == before_bob[0]  # no adapters yet: both get the served model
    r = _post(server, "ops", "/load_lora_adapter", {"lora_name": "alice", "lora_path": str(server["alice_adapter"])})
    assert r.status_code == 200 and r.json()["success"], r.text
    alice, bob = _reply(server, "alice"), _reply(server, "bob")
    assert alice[0] != before_alice[0]
    assert alice[0] == _alone(server["alice_adapter"])
    assert bob == before_bob  # bob is untouched by alice's adapter, token for token and log-prob for log-prob
    info = httpx.get(server["url"] + "/get_server_info", headers={"Authorization": f"Bearer {KEYS['ops']}"}).json()
    assert info["lora_adapters"] == {"alice": 0}


def test_naming_another_users_adapter_reads_like_a_missing_one(server):
    _post(server, "ops", "/load_lora_adapter", {"lora_name": "alice", "lora_path": str(server["alice_adapter"])})
    body = {"text": "Hello", "sampling_params": {"max_new_tokens": 2, "temperature": 0}}
    theirs = _post(server, "bob", "/generate", {**body, "lora_path": "alice"})
    missing = _post(server, "bob", "/generate", {**body, "lora_path": "zed"})
    assert theirs.status_code == missing.status_code == 400
    assert theirs.text.replace("alice", "X") == missing.text.replace("zed", "X")
    own = _post(server, "alice", "/generate", {**body, "lora_path": "alice"})
    assert own.status_code == 200, own.text
    assert _post(server, "ops", "/generate", {**body, "lora_path": "alice"}).status_code == 200  # the admin may
