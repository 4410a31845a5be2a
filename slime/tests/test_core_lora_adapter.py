"""--lora-adapter-name: the trained adapter is served under a name beside the base model, the way
SGLang serves per-request LoRA adapters. A push is POST /load_lora_adapter and nothing else (the
base weights are never replaced), every /generate slime sends names the adapter, and a sample's
version is the adapter's.

The engines here are minimal SGLang-protocol servers over real HTTP, in two kinds: the embedded
engine's side (its /get_server_info lists `lora_adapters`, loading a loaded name replaces it, a
request naming an adapter reports that adapter's version) and SGLang's (a loaded name is refused,
`weight_version` in a load is refused as an unknown field, answers carry only the base's version)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from slime.ray.driver import Run
from slime.ray.rollout_manager import RolloutManager
from slime.ray.setup import load_initial_adapter
from slime.rollout.sglang_client import SGLangClient, SGLangClientError, SyncSGLangClient
from slime.utils.arguments import ConfigError, parse_config
from slime.utils.weight_sync import WeightVersions, adapter_versions, check_adapter_name, push_to_engines

NO_ENV: dict[str, str] = {}
# What only a full-weights push sends: a push with an adapter name must send none of it.
BASE_WEIGHT_ROUTES = {"/pause_generation", "/update_weights_from_disk", "/flush_cache", "/continue_generation"}


@dataclass
class FakeEngine:
    """One engine's state and every request it got (path, JSON body)."""

    versions_adapters: bool  # True: the embedded engine's side; False: SGLang's
    refuse_load: str | None = None  # a load refused with this message (a real failure)
    base_path: str = "base-model"
    base_version: str = "0"
    adapters: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> {"path", "version"}
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    url: str = ""

    def posts(self, path: str | None = None) -> list[tuple[str, dict[str, Any]]]:
        return [(p, b) for p, b in self.requests if p != "/get_server_info" and (path is None or p == path)]

    # -- routes: (status, body)
    def get(self, path: str) -> tuple[int, dict[str, Any]]:
        if path == "/get_server_info":
            info: dict[str, Any] = {"model_path": self.base_path, "weight_version": self.base_version}
            if self.versions_adapters:
                info["lora_adapters"] = {n: a["version"] for n, a in self.adapters.items()}
            return 200, info
        if path == "/get_weight_version":
            return 200, {"weight_version": self.base_version}
        return 404, {"error": {"message": f"no route {path}"}}

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path == "/load_lora_adapter":
            return self._load(body)
        if path == "/unload_lora_adapter":
            if body["lora_name"] not in self.adapters:
                return self._refused(f"LoRA with name {body['lora_name']} does not exist.")
            del self.adapters[body["lora_name"]]
            return 200, {"success": True, "error_message": "", "loaded_adapters": self._loaded()}
        if path == "/generate":
            return self._generate(body)
        if path == "/update_weights_from_disk":
            self.base_path, self.base_version = body["model_path"], str(body.get("weight_version", "1"))
        return 200, {"success": True, "message": "ok"}

    def _loaded(self) -> dict[str, str]:
        return {n: a["path"] for n, a in self.adapters.items()}

    def _refused(self, message: str) -> tuple[int, dict[str, Any]]:
        key = "message" if self.versions_adapters else "error_message"
        return 400, {"success": False, key: message, "loaded_adapters": self._loaded()}

    def _load(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = body["lora_name"]
        if self.refuse_load is not None:
            return self._refused(self.refuse_load)
        if self.versions_adapters:
            version = body.get("weight_version", self.adapters.get(name, {}).get("version", 0) + 1)
            assert isinstance(version, int) and not isinstance(version, bool)
            self.adapters[name] = {"path": body["lora_path"], "version": version}  # replaces a loaded name
            return 200, {"success": True, "message": "loaded", "loaded_adapters": self._loaded()}
        if set(body) != {"lora_name", "lora_path"}:
            return 400, {"detail": f"unknown fields {sorted(set(body) - {'lora_name', 'lora_path'})}"}
        if name in self.adapters:  # SGLang's LoRAManager.validate_new_adapter
            return self._refused(f"Failed to load LoRA adapter {name} because it is already loaded")
        self.adapters[name] = {"path": body["lora_path"], "version": None}
        return 200, {"success": True, "error_message": "", "loaded_adapters": self._loaded()}

    def _generate(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = body.get("lora_path")
        if name is not None and name not in self.adapters:
            return 400, {"error": {"message": f"LoRA adapter {name!r} is not loaded on this server"}}
        version = self.base_version
        if name is not None and self.versions_adapters:
            version = str(self.adapters[name]["version"])  # the embedded engine: the adapter's version
        return 200, {"text": "ab", "output_ids": [5, 6], "meta_info": {
            "id": "r", "finish_reason": {"type": "stop"}, "prompt_tokens": len(body["input_ids"]),
            "completion_tokens": 2, "output_token_logprobs": [[-0.1, 5, None], [-0.2, 6, None]],
            "weight_version": version}}


class _Handler(BaseHTTPRequestHandler):
    server: Any

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        out = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.server.engine.requests.append((self.path, {}))
        self._answer(*self.server.engine.get(self.path))

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        self.server.engine.requests.append((self.path, body))
        self._answer(*self.server.engine.post(self.path, body))

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def engines() -> Iterator[Callable[..., FakeEngine]]:
    servers: list[ThreadingHTTPServer] = []

    def start(versions_adapters: bool, **kwargs: Any) -> FakeEngine:
        engine = FakeEngine(versions_adapters, **kwargs)
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.engine = engine  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        engine.url = f"http://127.0.0.1:{server.server_address[1]}"
        return engine

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _adapter(tmp_path: Path, version: int) -> Path:
    folder = tmp_path / f"v{version}"
    folder.mkdir()
    (folder / "adapter_config.json").write_text("{}")
    return folder


# ---------------------------------------------------------------------------- the push
@pytest.mark.parametrize("ours", [True, False], ids=["embedded", "sglang"])
def test_a_named_push_never_touches_the_base_weights(engines, tmp_path, ours):
    engine = engines(ours)
    for version in (1, 2):
        push_to_engines([engine.url], _adapter(tmp_path, version), version, adapter_name="alice")
    assert not {p for p, _ in engine.requests} & BASE_WEIGHT_ROUTES
    assert {p for p, _ in engine.posts()} <= {"/load_lora_adapter", "/unload_lora_adapter"}
    assert (engine.base_path, engine.base_version) == ("base-model", "0")
    assert engine.adapters["alice"]["path"] == str(tmp_path / "v2")


def test_the_embedded_engine_gets_one_load_with_the_version(engines, tmp_path):
    engine = engines(True, adapters={"bob": {"path": "/bob", "version": 9}})
    push_to_engines([engine.url], _adapter(tmp_path, 3), 3, adapter_name="alice")
    assert engine.posts() == [("/load_lora_adapter", {"lora_name": "alice", "lora_path": str(tmp_path / "v3"),
                                                       "weight_version": 3})]
    push_to_engines([engine.url], _adapter(tmp_path, 4), 4, adapter_name="alice")  # replaces, one request
    assert [p for p, _ in engine.posts()] == ["/load_lora_adapter"] * 2
    assert engine.adapters == {"bob": {"path": "/bob", "version": 9},
                               "alice": {"path": str(tmp_path / "v4"), "version": 4}}


def test_sglang_gets_no_weight_version_and_a_served_name_is_unloaded_then_loaded(engines, tmp_path):
    engine = engines(False)
    push_to_engines([engine.url], _adapter(tmp_path, 1), 1, adapter_name="alice")
    assert engine.posts() == [("/load_lora_adapter", {"lora_name": "alice", "lora_path": str(tmp_path / "v1")})]
    engine.requests.clear()
    push_to_engines([engine.url], _adapter(tmp_path, 2), 2, adapter_name="alice")
    assert engine.posts() == [("/load_lora_adapter", {"lora_name": "alice", "lora_path": str(tmp_path / "v2")}),
                              ("/unload_lora_adapter", {"lora_name": "alice"}),
                              ("/load_lora_adapter", {"lora_name": "alice", "lora_path": str(tmp_path / "v2")})]
    assert engine.adapters["alice"]["path"] == str(tmp_path / "v2")


@pytest.mark.parametrize("ours", [True, False], ids=["embedded", "sglang"])
def test_a_failed_load_raises_naming_the_engine_and_leaves_the_served_adapter(engines, tmp_path, ours):
    ok = engines(ours)
    served = {"alice": {"path": "/old", "version": 1 if ours else None}}
    failing = engines(ours, refuse_load="rank 128 exceeds --max-lora-rank 64", adapters=dict(served))
    with pytest.raises(SGLangClientError) as err:
        push_to_engines([ok.url, failing.url], _adapter(tmp_path, 2), 2, adapter_name="alice")
    assert failing.url in str(err.value) and "rank 128 exceeds --max-lora-rank 64" in str(err.value)
    assert not failing.posts("/unload_lora_adapter") and failing.adapters == served


def test_a_failed_reload_after_the_unload_says_the_adapter_is_gone(engines, tmp_path):
    engine = engines(False, adapters={"alice": {"path": "/old", "version": None}})
    original = engine.post

    def refuse_second_load(path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path == "/load_lora_adapter" and "alice" not in engine.adapters:
            return engine._refused("adapter_config.json: no such file")
        return original(path, body)

    engine.post = refuse_second_load  # type: ignore[method-assign]
    with pytest.raises(SGLangClientError, match="no such file.*was unloaded from"):
        push_to_engines([engine.url], _adapter(tmp_path, 2), 2, adapter_name="alice")


def test_the_clients_load_and_unload_sync_and_async(engines, tmp_path):
    engine = engines(False)
    with SyncSGLangClient(engine.url, timeout=10) as client:
        assert client.load_lora_adapter("alice", "/a")["loaded_adapters"] == {"alice": "/a"}
        assert client.unload_lora_adapter("alice")["loaded_adapters"] == {}
        with pytest.raises(SGLangClientError, match="does not exist"):
            client.unload_lora_adapter("alice")

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:
        async with SGLangClient(engine.url, timeout=10) as client:
            return await client.load_lora_adapter("bob", "/b"), await client.unload_lora_adapter("bob")

    loaded, unloaded = asyncio.run(both())
    assert loaded["success"] and unloaded["success"] and engine.adapters == {}


# ---------------------------------------------------------------------------- the flag
def test_the_flag_needs_lora():
    with pytest.raises(ConfigError, match="--lora-adapter-name 'alice'.*needs --use-lora"):
        parse_config(["--lora-adapter-name", "alice"], env=NO_ENV)
    with pytest.raises(ConfigError, match="needs --use-lora"):
        parse_config(["--lora-adapter-name", "alice", "--lora-rank", "8", "--no-use-lora"], env=NO_ENV)
    with pytest.raises(ConfigError, match="--lora-adapter-name must be 1-128 characters without whitespace, "
                                          "got 'two words'"):
        parse_config(["--lora-adapter-name", "two words", "--use-lora"], env=NO_ENV)
    with pytest.raises(ConfigError, match="got 129 characters"):
        parse_config(["--lora-adapter-name", "a" * 129, "--use-lora"], env=NO_ENV)
    cfg = parse_config(["--lora-adapter-name", "alice", "--lora-rank", "8"], env=NO_ENV)  # --lora-rank turns LoRA on
    assert cfg.lora.use_lora and cfg.lora.lora_adapter_name == "alice"
    assert parse_config([], env=NO_ENV).lora.lora_adapter_name is None


def test_one_rule_for_adapter_names():
    """1-128 characters without whitespace, the same wherever a name enters (flag, SGLang load,
    embedded load); the answer says what is wrong."""
    for good in ("alice", "a" * 128, "user-7_lora.v2", "ü"):
        assert check_adapter_name(good) is None, good
    assert check_adapter_name("") == "must be 1-128 characters without whitespace, got an empty name"
    assert "129 characters" in check_adapter_name("a" * 129)
    for spaced in ("two words", "tab\there", "new\nline", "\u00a0nbsp"):
        assert check_adapter_name(spaced) == f"must be 1-128 characters without whitespace, got {spaced!r}"
    for not_str in (None, 3, b"alice", ["alice"]):
        assert check_adapter_name(not_str).startswith("must be a string of 1-128 characters"), not_str


def test_the_adapter_version_reader_is_strict():
    """Absent: the engine does not version adapters (SGLang). Present but unreadable: ValueError
    naming what is wrong, never read as "no versions" (the engine would pass for SGLang)."""
    assert adapter_versions({"weight_version": "3"}) is None
    assert adapter_versions({"lora_adapters": {}}) == {}
    listed = {"alice": 3, "bob": 0}
    got = adapter_versions({"lora_adapters": listed})
    assert got == listed and got is not listed  # a copy: the caller's answer stays as it came
    for bad, says in (([["alice", 3]], "must map adapter names to integer versions, got list"),
                      (None, "got NoneType"), ("alice=3", "got str"),
                      ({1: 3}, "names an adapter 1, not a string"),
                      ({"alice": True}, r"lora_adapters\['alice'\] is True, not an integer"),
                      ({"alice": "3"}, r"lora_adapters\['alice'\] is '3', not an integer"),
                      ({"alice": 3.0}, r"is 3.0, not an integer"), ({"alice": None}, "is None, not an integer")):
        with pytest.raises(ValueError, match=says):
            adapter_versions({"lora_adapters": bad})


def test_the_flag_in_a_config_file(tmp_path):
    yml = tmp_path / "c.yaml"
    yml.write_text("lora:\n  use_lora: true\n  lora_adapter_name: alice\n")
    assert parse_config(["--config", str(yml)], env=NO_ENV).to_namespace().lora_adapter_name == "alice"


# ---------------------------------------------------------------------------- the rollout manager
def _manager(tmp_path: Path, model: Path, url: str, *extra: str) -> RolloutManager:
    rows = [json.dumps({"input": "Count to 3:", "label": "3"})]
    (tmp_path / "prompts.jsonl").write_text("\n".join(rows) + "\n")
    cfg = parse_config(["--hf-checkpoint", str(model), "--prompt-data", str(tmp_path / "prompts.jsonl"),
                        "--label-key", "label", "--rm-type", "length", "--rollout-batch-size", "1",
                        "--n-samples-per-prompt", "2", "--rollout-max-response-len", "4", "--use-lora",
                        "--lora-adapter-name", "alice", "--rollout-backend", "external",
                        "--rollout-external-engine-addrs", url, "--log-dir", str(tmp_path / "logs"), *extra],
                       env=NO_ENV)
    manager = RolloutManager(cfg, str(model), log_dir=str(tmp_path / "logs"))
    manager.start_engines()
    return manager


@pytest.mark.parametrize("ours", [True, False], ids=["embedded", "sglang"])
def test_rollout_requests_name_the_adapter_and_samples_carry_its_version(engines, tmp_path, tiny_model_path, ours):
    engine = engines(ours)
    manager = _manager(tmp_path, tiny_model_path, engine.url)
    try:
        manager.update_weights(str(_adapter(tmp_path, 5)), 5)
        samples, metrics = manager.generate(0)
    finally:
        manager.shutdown()
    bodies = [b for _, b in engine.posts("/generate")]
    assert len(bodies) == 2 and all(b["lora_path"] == "alice" for b in bodies)
    # the engine's base is at "0" throughout: only the adapter's version may count
    assert [s.weight_version for s in samples] == [5, 5]
    assert metrics["rollout/weight_version_unreadable"] == 0


def test_evaluation_requests_name_the_adapter(engines, tmp_path, tiny_model_path):
    engine = engines(True)
    (tmp_path / "eval.jsonl").write_text(json.dumps({"input": "Say 1:", "label": "1"}) + "\n")
    manager = _manager(tmp_path, tiny_model_path, engine.url, "--eval-prompt-data", "ev", str(tmp_path / "eval.jsonl"),
                       "--eval-interval", "1")
    try:
        manager.update_weights(str(_adapter(tmp_path, 1)), 1)
        metrics = manager.evaluate(0)
    finally:
        manager.shutdown()
    bodies = [b for _, b in engine.posts("/generate")]
    assert metrics["eval/ev/samples"] == 1.0 and [b["lora_path"] for b in bodies] == ["alice"]


@pytest.mark.parametrize("ours", [True, False], ids=["embedded", "sglang"])
def test_weights_from_another_node_report_the_adapters_version(engines, tmp_path, tiny_model_path, ours,
                                                               monkeypatch):
    monkeypatch.setenv("SLIME_WEIGHT_SYNC_DIR", str(tmp_path / "sync"))
    engine = engines(ours)
    manager = _manager(tmp_path, tiny_model_path, engine.url)
    try:
        report = manager.update_weights_from_files({"adapter_config.json": b"{}"}, 7)
    finally:
        manager.shutdown()
    assert not {p for p, _ in engine.requests} & BASE_WEIGHT_ROUTES
    assert report["served_versions"] == (["7"] if ours else ["alice: not reported (the engine versions only its base)"])


# ---------------------------------------------------------------------------- before the first rollout
class _Train:
    def save_hf(self, folder: Path) -> None:
        Path(folder).mkdir(parents=True)
        (Path(folder) / "adapter_config.json").write_text("{}")


class _Rollout:
    def __init__(self) -> None:
        self.pushed: list[int] = []

    def update_weights(self, path: str, version: int) -> int:
        self.pushed.append(version)
        return version


@pytest.mark.parametrize("argv,pushed", [
    (["--use-lora", "--lora-adapter-name", "alice"], [4]),
    (["--use-lora"], []),  # the engines start from the model being trained: nothing to load
    (["--use-lora", "--lora-adapter-name", "alice", "--debug-train-only", "--load-debug-rollout-data", "/x"], []),
])
def test_the_trainers_adapter_is_loaded_before_the_first_rollout(tmp_path, argv, pushed):
    cfg = parse_config(argv, env=NO_ENV)
    run = Run(cfg=cfg, args=cfg.to_namespace(), model_path="/m", start_rollout_id=0, num_rollout=1,
              weights=WeightVersions(root=tmp_path / "sync", version=3), train=_Train(), rollout=_Rollout())
    load_initial_adapter(run)
    assert run.rollout.pushed == pushed and run.weights.version == (4 if pushed else 3)
