"""Per-request LoRA adapters through SGLangEngine, at the HTTP level.

The server here is a minimal SGLang over real HTTP that records every request: it answers
/load_lora_adapter and /unload_lora_adapter as SGLang does ({success, error_message,
loaded_adapters}, HTTP 400 on a refusal, a loaded name refused, "LoRA is not enabled" without
--enable-lora, no `weight_version` field) and reports only its base weights' version. By default it
answers a /generate naming an adapter it does not have with the base model, the worst a server can
do: the engine's own refusal is then the only thing between a user and another model, which is what
the first test checks. The last test drives the embedded engine's SGLang endpoints (which version
their adapters) with a real adapter."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from openclaw.engines.base import GenerationRequest, GenerationResult, SamplingParams
from openclaw.engines.sglang_backend import SGLangEngine, _served_adapter_versions
from openclaw.engines.sglang_client import SGLangClientError

NOT_ENABLED = "LoRA is not enabled. Please set `--enable-lora` to enable LoRA."
PROMPT = (3, 4, 5)


@dataclass
class FakeSGLang:
    """One SGLang server's LoRA state and every request it got (path, JSON body)."""

    enable_lora: bool = True
    serve_unknown_as_base: bool = True  # False: refuse an unknown lora_path, as SGLang does
    refuse_paths: dict[str, str] = field(default_factory=dict)  # adapter folder -> SGLang's refusal
    fail_status: int | None = None  # every load/unload answers this status (a broken server)
    adapters: dict[str, str] = field(default_factory=dict)  # name -> folder
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def posts(self, path: str) -> list[dict[str, Any]]:
        return [body for p, body in self.requests if p == path]

    def post(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        if path == "/generate":
            return self._generate(body)
        if path in ("/load_lora_adapter", "/unload_lora_adapter"):
            if self.fail_status is not None:
                return self.fail_status, {"detail": "internal error"}
            if not self.enable_lora:  # TokenizerManager.load_lora_adapter / unload_lora_adapter
                return 400, {"success": False, "error_message": NOT_ENABLED, "loaded_adapters": None}
            return self._load(body) if path == "/load_lora_adapter" else self._unload(body)
        return 404, {"detail": "Not Found"}

    def _answer(self, ok: bool, error: str = "") -> tuple[int, dict[str, Any]]:
        return (200 if ok else 400), {"success": ok, "error_message": error, "loaded_adapters": dict(self.adapters)}

    def _load(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if set(body) != {"lora_name", "lora_path"}:
            return 422, {"detail": f"unexpected fields {sorted(set(body) - {'lora_name', 'lora_path'})}"}
        name, path = body["lora_name"], body["lora_path"]
        if path in self.refuse_paths:
            return self._answer(False, self.refuse_paths[path])
        if name in self.adapters:  # LoRAManager.validate_new_adapter
            return self._answer(False, f"Failed to load LoRA adapter {name} because it is already loaded")
        self.adapters[name] = path
        return self._answer(True)

    def _unload(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = body["lora_name"]
        if name not in self.adapters:
            return self._answer(False, f"LoRA adapter {name} is not loaded")
        del self.adapters[name]
        return self._answer(True)

    def _generate(self, body: dict[str, Any]) -> tuple[int, Any]:
        name = body.get("lora_path")
        if name is not None and name not in self.adapters and not self.serve_unknown_as_base:
            return 400, {"error": {"message": f"The following requested LoRA adapters are not loaded: {name}"}}
        served = self.adapters.get(name, "base") if name is not None else "base"
        out = {"text": f"served by {served}", "output_ids": [7, 8],
               "meta_info": {"id": body.get("rid", "r"), "finish_reason": {"type": "length", "length": 2},
                             "prompt_tokens": len(body["input_ids"]), "completion_tokens": 2,
                             "weight_version": "default"}}  # SGLang's base version before any update
        if body.get("stream"):
            return 200, [{**out, "text": out["text"][:8], "output_ids": [7],
                          "meta_info": {**out["meta_info"], "finish_reason": None, "completion_tokens": 1}}, out]
        return 200, out


def _handler(fake: FakeSGLang) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
            fake.requests.append((self.path, body))
            status, payload = fake.post(self.path, body)
            if isinstance(payload, list):  # an SSE stream of chunks
                out = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in payload) + b"data: [DONE]\n\n"
                kind = "text/event-stream"
            else:
                out, kind = json.dumps(payload).encode(), "application/json"
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def sglang(http_server: Callable[[type[BaseHTTPRequestHandler]], str]) -> Callable[..., tuple[FakeSGLang, SGLangEngine]]:
    """`sglang(**fake_fields)`: a fake SGLang server and an SGLangEngine attached to it."""

    def start(**kwargs: Any) -> tuple[FakeSGLang, SGLangEngine]:
        fake = FakeSGLang(**kwargs)
        url = http_server(_handler(fake))
        return fake, SGLangEngine(url, tokenizer=None, model_path="fake-base", max_context_len=4096)

    return start


def _req(lora_name: str | None = None) -> GenerationRequest:
    return GenerationRequest(PROMPT, SamplingParams(max_new_tokens=2, temperature=0), lora_name=lora_name)


async def _streamed(engine: SGLangEngine, req: GenerationRequest) -> GenerationResult:
    items = [item async for item in engine.stream(req)]
    assert isinstance(items[-1], GenerationResult)
    return items[-1]


async def test_an_unloaded_adapter_is_never_served_by_the_base(sglang):
    """The server would answer any unknown adapter name with the base model: a request naming an
    adapter the engine has not loaded (never loaded, unloaded, or whose load failed) is refused
    before it is sent, on both paths."""
    fake, engine = sglang(serve_unknown_as_base=True, refuse_paths={"/bad": "rank 128 exceeds --max-lora-rank 64"})
    try:
        for name in ("ghost", ""):
            with pytest.raises(ValueError, match=f"LoRA adapter {name!r} is not loaded"):
                await engine.generate(_req(name))
            with pytest.raises(ValueError, match=f"LoRA adapter {name!r} is not loaded"):
                await _streamed(engine, _req(name))
        assert (await engine.load_lora_adapter("alice", "/a"))[0]
        assert (await engine.unload_lora_adapter("alice"))[0]
        assert not (await engine.load_lora_adapter("bob", "/bad"))[0]
        for name in ("alice", "bob"):
            with pytest.raises(ValueError, match="is not loaded"):
                await engine.generate(_req(name))
        assert fake.posts("/generate") == [] and engine.num_pending() == 0
        assert (await engine.generate(_req())).text == "served by base"  # the base itself still serves
    finally:
        await engine.shutdown()


async def test_the_adapter_name_reaches_generate(sglang):
    fake, engine = sglang(serve_unknown_as_base=False)
    try:
        ok, msg = await engine.load_lora_adapter("alice", "/adapters/alice")
        assert ok and "alice" in msg and engine.lora_adapters == {"alice": 0}
        plain, named = await engine.generate(_req()), await engine.generate(_req("alice"))
        streamed = await _streamed(engine, _req("alice"))
        bodies = fake.posts("/generate")
        assert "lora_path" not in bodies[0] and bodies[1]["lora_path"] == bodies[2]["lora_path"] == "alice"
        assert bodies[2]["stream"] is True and bodies[1]["input_ids"] == list(PROMPT)
        assert plain.text == "served by base"
        assert named.text == streamed.text == "served by /adapters/alice"
        # SGLang reports its base's version; a named request's version is its adapter's
        assert named.weight_version == streamed.weight_version == 0
        await engine.load_lora_adapter("alice", "/adapters/alice-2", weight_version=5)
        assert (await engine.generate(_req("alice"))).weight_version == 5
        assert engine.weight_version == 0
    finally:
        await engine.shutdown()


async def test_load_and_unload_round_trip(sglang):
    fake, engine = sglang()
    try:
        assert await engine.load_lora_adapter("alice", "/a0") == (True, "LoRA adapter 'alice' loaded from /a0 "
                                                                        "(version 0)")
        assert (await engine.load_lora_adapter("bob", "/b", weight_version=7))[0]
        assert engine.lora_adapters == {"alice": 0, "bob": 7}
        # SGLang refuses a loaded name: a replacement is an unload, then a load
        fake.requests.clear()
        assert (await engine.load_lora_adapter("alice", "/a1"))[0]
        assert [(p, b) for p, b in fake.requests] == [("/unload_lora_adapter", {"lora_name": "alice"}),
                                                     ("/load_lora_adapter", {"lora_name": "alice", "lora_path": "/a1"})]
        assert engine.lora_adapters == {"alice": 1, "bob": 7} and fake.adapters == {"alice": "/a1", "bob": "/b"}
        assert (await engine.load_lora_adapter("bob", "/b2"))[0] and engine.lora_adapters["bob"] == 8
        ok, msg = await engine.unload_lora_adapter("bob")
        assert ok and engine.lora_adapters == {"alice": 1} and fake.adapters == {"alice": "/a1"}
        assert (await engine.load_lora_adapter("bob", "/b3"))[0] and engine.lora_adapters["bob"] == 0  # a fresh start
        snapshot = engine.lora_adapters
        snapshot["carol"] = 1  # a copy: the engine's map changes only through load/unload
        assert "carol" not in engine.lora_adapters
    finally:
        await engine.shutdown()


async def test_a_failure_leaves_the_map_unchanged(sglang):
    fake, engine = sglang(refuse_paths={"/too-big": "rank 128 exceeds --max-lora-rank 64"})
    try:
        assert (await engine.load_lora_adapter("alice", "/a"))[0]
        ok, msg = await engine.load_lora_adapter("bob", "/too-big")
        assert not ok and "rank 128 exceeds --max-lora-rank 64" in msg and "bob" in msg
        ok, msg = await engine.unload_lora_adapter("nobody")
        assert not ok and "nobody" in msg
        for bad in ((" ", "/a"), ("c" * 129, "/c"), ("carol", ""), ("carol", "/c", True), ("carol", "/c", "3")):
            ok, msg = await engine.load_lora_adapter(*bad)
            assert not ok, bad
        assert (await engine.load_lora_adapter(" ", "/a"))[1] == "lora_name must be 1-128 characters without whitespace, got ' '"
        assert fake.posts("/load_lora_adapter") == [{"lora_name": "alice", "lora_path": "/a"},
                                                     {"lora_name": "bob", "lora_path": "/too-big"}]  # refused here
        assert engine.lora_adapters == {"alice": 0} and fake.adapters == {"alice": "/a"}
        fake.fail_status = 500
        ok, msg = await engine.load_lora_adapter("dave", "/d")
        assert not ok and "500" in msg
        ok, msg = await engine.unload_lora_adapter("alice")
        assert not ok and "500" in msg
        assert engine.lora_adapters == {"alice": 0}
        assert (await engine.generate(_req("alice"))).text == "served by /a"
    finally:
        await engine.shutdown()


async def test_a_failed_replacement_is_no_longer_served(sglang):
    """Replacing on SGLang unloads first; if the new folder is then refused, the name is gone from
    the server, and the engine says so and refuses the name rather than claim it still serves."""
    fake, engine = sglang(refuse_paths={"/too-big": "rank 128 exceeds --max-lora-rank 64"})
    try:
        assert (await engine.load_lora_adapter("alice", "/a"))[0]
        ok, msg = await engine.load_lora_adapter("alice", "/too-big")
        assert not ok and "rank 128" in msg and "unloaded" in msg
        assert engine.lora_adapters == {} and fake.adapters == {}
        with pytest.raises(ValueError, match="not loaded"):
            await engine.generate(_req("alice"))
    finally:
        await engine.shutdown()


async def test_sglang_without_enable_lora_says_how_to_launch_it(sglang):
    fake, engine = sglang(enable_lora=False)
    try:
        for ok, msg in (await engine.load_lora_adapter("alice", "/a"), await engine.unload_lora_adapter("alice")):
            assert not ok and "launch SGLang with --enable-lora" in msg and NOT_ENABLED in msg
        assert engine.lora_adapters == {}
    finally:
        await engine.shutdown()


async def test_against_the_embedded_engine(tiny_model_path: Path, tmp_path: Path, random_lora):
    """The embedded engine's SGLang endpoints version their adapters: attach sees that, the version
    goes with the load, and a named request is answered by the adapter exactly as in-process."""
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.engines.serve import create_app, serve_in_thread

    local = HFEngine.load(str(tiny_model_path), max_batch_size=4)
    adapter = random_lora(tiny_model_path, tmp_path / "alice", 1, targets=["q_proj", "v_proj"])
    try:
        assert (await local.load_lora_adapter("preloaded", str(adapter), 3))[0]
        with serve_in_thread(create_app(local)) as url:
            remote = SGLangEngine.attach(url)
            try:
                assert remote.lora_adapters == {"preloaded": 3}
                ok, msg = await remote.load_lora_adapter("alice", str(adapter), weight_version=4)
                assert ok, msg
                assert remote.lora_adapters == local.lora_adapters == {"preloaded": 3, "alice": 4}
                req = GenerationRequest(PROMPT, SamplingParams(max_new_tokens=6, temperature=0, ignore_eos=True),
                                        lora_name="alice")
                direct, served = await local.generate(req), await remote.generate(req)
                base = await remote.generate(GenerationRequest(req.input_ids, req.params))
                assert served.output_ids == direct.output_ids != base.output_ids
                assert served.weight_version == 4 and remote.weight_version == base.weight_version == 0
                assert (await remote.load_lora_adapter("alice", str(adapter)))[0]  # replaced in place
                assert local.lora_adapters["alice"] == remote.lora_adapters["alice"] == 5
                assert (await remote.unload_lora_adapter("alice"))[0] and "alice" not in local.lora_adapters
                with pytest.raises(ValueError, match="not loaded"):
                    await remote.generate(req)
            finally:
                await remote.shutdown()
    finally:
        await local.shutdown()


def test_an_unreadable_adapter_list_names_the_server():
    """attach reads /get_server_info's `lora_adapters` with the trainer's reader: absent means SGLang
    (no adapter versions), a list it cannot read is an error naming the server, not an empty list."""
    assert _served_adapter_versions({"weight_version": "0"}, "http://e") is None
    assert _served_adapter_versions({"lora_adapters": {"alice": 3}}, "http://e") == {"alice": 3}
    for bad in ([], {"alice": True}, {"alice": "3"}, {1: 3}):
        with pytest.raises(SGLangClientError, match=r"^http://e: /get_server_info's lora_adapters") as got:
            _served_adapter_versions({"lora_adapters": bad}, "http://e")
        assert got.value.url == "http://e"
