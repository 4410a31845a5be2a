"""No outage during weight swaps: chat requests keep being answered (no 503, none failed) while
the trainer's push (`slime.utils.weight_sync.push_to_engines`) loads full weights and LoRA
adapters into the serving engine; the chat server tells the trainer it swaps live, so the push
does not pause generation, and the engine's own pause per swap is measured."""

from __future__ import annotations

import threading

import httpx
from slime.utils.weight_sync import push_to_engines

from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background


class ChatLoad:
    """Clients sending chat requests back to back until stopped; every outcome is kept."""

    def __init__(self, url: str, clients: int = 3) -> None:
        self.url = url
        self.results: list[tuple[int, str]] = []
        self.first_done = threading.Barrier(clients + 1)
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(clients)]

    def _run(self) -> None:
        first = True
        with httpx.Client(base_url=self.url, timeout=120) as client:
            while not self.stop.is_set():
                r = client.post("/v1/chat/completions", json={
                    "model": "m", "messages": [{"role": "user", "content": "Tell me a story."}],
                    "max_tokens": 12, "temperature": 0})
                self.results.append((r.status_code, r.text[:200]))
                if first:
                    first = False
                    self.first_done.wait(120)

    def __enter__(self) -> ChatLoad:
        for t in self.threads:
            t.start()
        self.first_done.wait(120)  # every client is answering before the first swap
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(120)


def test_chat_keeps_answering_while_full_and_lora_weights_swap(tiny_model_path, tiny_model_path_alt, tiny_adapter,
                                                                tmp_path, monkeypatch):
    monkeypatch.setenv("OPENCLAW_CONTROL_DIR", str(tmp_path / "control"))
    app = create_app(ServerConfig(engine=EngineConfig(model_path=str(tiny_model_path))))
    engine = app.state.openclaw.engine
    pauses: list[dict[str, float]] = []
    pause_calls: list[bool] = []
    real_pause = engine.pause_generation

    def counting_pause(abort: bool = False):
        pause_calls.append(abort)
        return real_pause(abort=abort)

    engine.pause_generation = counting_pause
    with serve_in_background(app) as srv:
        assert httpx.get(srv.base_url + "/get_server_info").json()["weight_swap"] == "live"
        with ChatLoad(srv.base_url) as load:
            before = len(load.results)
            for version, folder in enumerate([tiny_model_path_alt, tiny_adapter, tiny_model_path, tiny_adapter], 1):
                push_to_engines([srv.base_url], folder, version)
                pauses.append(dict(engine.last_weight_update))
            during = len(load.results) - before
        assert engine.weight_version == 4
    failed = [r for r in load.results if r[0] != 200]
    assert not failed, failed[:3]
    assert during > 0, "requests must have been answered while the weights were being swapped"
    assert pause_calls == [], "the live push must not pause generation"
    # The only stop of decoding is the swap between two steps: a pointer change, not a load.
    assert all(p["pause_s"] < 0.25 for p in pauses), pauses
    assert all(p["load_s"] > p["pause_s"] for p in pauses), pauses
