"""Server security over real HTTP: a browser page cannot drive the loopback server
(content type, Origin, Host, no state-changing GET), reload errors do not reveal which paths exist,
slow clients are dropped (request head and body deadlines), a blank API key is refused at start-up."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import httpx
import openai
import pytest

from openclaw.engines.sglang_client import SyncSGLangClient
from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background
from openclaw.server.config import ConfigError, parse_config
from openclaw.server.engine_loader import load_engine

HI = [{"role": "user", "content": "Say something."}]
EVIL = "http://evil.example"
HEADER_TIMEOUT = 1.5
BODY_TIMEOUT = 2.0


@pytest.fixture(scope="module")
def engine(tiny_model_path):
    import asyncio

    eng = load_engine(EngineConfig(model_path=str(tiny_model_path)))
    yield eng
    asyncio.run(eng.shutdown())


@pytest.fixture(scope="module")
def server(engine):
    cfg = ServerConfig(allowed_hosts=("openclaw.internal",), allowed_origins=("http://ui.example:3000",),
                       header_timeout=HEADER_TIMEOUT, body_timeout=BODY_TIMEOUT)
    with serve_in_background(create_app(cfg, engine=engine)) as srv:
        yield srv


def assert_openai_error(resp: httpx.Response, status: int, code: str | None = None) -> dict:
    assert resp.status_code == status, resp.text
    err = resp.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if code is not None:
        assert err["code"] == code, err
    return err


def version(server) -> str:
    return httpx.get(server.base_url + "/get_weight_version").json()["weight_version"]


# ---- item 2: what a web page can send --------------------------------------------------------------
STATE_CHANGING = [
    ("/update_weights_from_disk", '{"model_path": "/tmp/attacker-weights"}'),
    ("/pause_generation", "{}"),
    ("/continue_generation", "{}"),
    ("/flush_cache", "{}"),
    ("/abort_request", '{"abort_all": true}'),
    ("/generate", '{"text": "hi", "sampling_params": {"max_new_tokens": 1}}'),
    ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "forged"}], "session_id": "s1"}'),
]


@pytest.mark.parametrize("path,body", STATE_CHANGING, ids=[p for p, _ in STATE_CHANGING])
@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x", None])
def test_state_changing_posts_need_json(server, path, body, ctype):
    """A page's simple (no-preflight) POST: text/plain, a form, or no type at all -> 415."""
    before = version(server)
    headers = {"content-type": ctype} if ctype else {}
    resp = httpx.post(server.base_url + path, content=body.encode(), headers=headers, timeout=30)
    if ctype is None:  # httpx adds no type for raw content: make sure none was sent
        assert "content-type" not in resp.request.headers
    err = assert_openai_error(resp, 415, "unsupported_media_type")
    assert "application/json" in err["message"]
    assert version(server) == before


@pytest.mark.parametrize("path,body", STATE_CHANGING, ids=[p for p, _ in STATE_CHANGING])
def test_foreign_origin_is_refused(server, path, body):
    resp = httpx.post(server.base_url + path, content=body.encode(),
                      headers={"content-type": "application/json", "origin": EVIL}, timeout=30)
    assert_openai_error(resp, 403, "cross_site_request_refused")
    # `Origin: null` (sandboxed frames, file://) is foreign too; so is a GET that changes state.
    resp = httpx.post(server.base_url + path, content=body.encode(),
                      headers={"content-type": "application/json", "origin": "null"}, timeout=30)
    assert_openai_error(resp, 403, "cross_site_request_refused")
    assert_openai_error(httpx.get(server.base_url + "/flush_cache", headers={"origin": EVIL}), 403)


# A page can make the browser GET any URL without an Origin header (`<img src>`, a link): no route
# that changes state may answer GET. These are the only GET routes, and each only reads.
READ_ONLY_GETS = {"/health", "/v1/models", "/v1/models/{model_id:path}", "/v1/sessions/{session_id}/feedback",
                  "/v1/sessions", "/v1/sessions/{session_id}",
                  "/v1/retractions", "/v1/ledger", "/v1/weights", "/dashboard", "/dashboard/state",
                  "/get_weight_version", "/get_model_info", "/get_server_info", "/health_generate",
                  "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc"}  # FastAPI's docs (engine only)
LONG_PROMPT = "The prefix cache keeps the keys and values of this prompt, which is long enough to be reused. " * 3


def _get_routes(routes) -> set[str]:
    """Paths answering GET, included routers walked (FastAPI keeps them nested)."""
    out: set[str] = set()
    for r in routes:
        nested = getattr(r, "original_router", None) or getattr(r, "app", None)
        if "GET" in (getattr(r, "methods", None) or ()):
            out.add(r.path)
        elif nested is not None and hasattr(nested, "routes"):
            out |= _get_routes(nested.routes)
    return out


def test_only_read_only_routes_answer_get(engine):
    from openclaw.engines.serve import create_app as create_engine_app

    for app in (create_app(ServerConfig(), engine=engine), create_engine_app(engine)):
        gets = _get_routes(app.routes)
        assert gets <= READ_ONLY_GETS, sorted(gets - READ_ONLY_GETS)
        assert {"/health", "/get_server_info"} <= gets  # the walk reached the included routers


def _cache_hits(url: str) -> int:
    return httpx.get(url + "/get_server_info").json()["prefix_cache"]["hits"]


def _generate(url: str) -> None:
    resp = httpx.post(url + "/generate", json={"text": LONG_PROMPT, "sampling_params": {"max_new_tokens": 1}},
                      timeout=60)
    assert resp.status_code == 200, resp.text


def _flush_cache_is_post_only(url: str) -> None:
    _generate(url)  # the prompt is cached now
    hits = _cache_hits(url)
    for method in ("GET", "HEAD"):
        resp = httpx.request(method, url + "/flush_cache")
        assert resp.status_code == 405 and resp.headers["allow"] == "POST", (method, resp.status_code)
    assert_openai_error(httpx.get(url + "/flush_cache"), 405, "method_not_allowed")
    _generate(url)
    assert _cache_hits(url) == hits + 1  # nothing was flushed: the prompt hit the cache
    assert httpx.post(url + "/flush_cache", json={}).status_code == 200
    hits = _cache_hits(url)
    _generate(url)
    assert _cache_hits(url) == hits  # flushed: a miss


def test_flush_cache_refuses_get_and_changes_nothing(tiny_model_path):
    """`<img src="http://127.0.0.1:8000/flush_cache">` sends a GET without Origin: 405, cache kept."""
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.engines.serve import create_app as create_engine_app
    from openclaw.engines.serve import serve_in_thread

    eng = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=2,
                        prefix_cache_tokens=4096)
    with serve_in_background(create_app(ServerConfig(), engine=eng)) as srv:
        _flush_cache_is_post_only(srv.base_url)
        sg = SyncSGLangClient(srv.base_url, retries=0)
        try:
            sg.flush_cache(deadline_s=5)  # the trainer's client
        finally:
            sg.close()
    with serve_in_thread(create_engine_app(eng)) as url:  # shuts the engine down on exit
        _flush_cache_is_post_only(url)


def test_dns_rebinding_host_is_refused(server):
    """A rebinding page reaches 127.0.0.1 under its own name: the Host header gives it away."""
    foreign = {"host": f"evil.example:{server.port}"}
    assert_openai_error(httpx.get(server.base_url + "/v1/models", headers=foreign), 403, "host_not_allowed")
    assert_openai_error(httpx.post(server.base_url + "/pause_generation", json={}, headers=foreign), 403,
                        "host_not_allowed")
    # Loopback names, the bind address and an --allowed-host pass (with or without the port).
    for host in (f"127.0.0.1:{server.port}", f"localhost:{server.port}", "localhost", "[::1]:8000",
                 f"openclaw.internal:{server.port}", "OpenClaw.Internal"):
        assert httpx.get(server.base_url + "/v1/models", headers={"host": host}).status_code == 200, host


def test_same_origin_and_allowed_origin_pass(server):
    for origin in (f"http://127.0.0.1:{server.port}", "http://ui.example:3000"):
        resp = httpx.post(server.base_url + "/continue_generation", json={}, headers={"origin": origin})
        assert resp.status_code == 200, (origin, resp.text)
    # Same host, other port: another origin.
    resp = httpx.post(server.base_url + "/continue_generation", json={},
                      headers={"origin": f"http://127.0.0.1:{server.port + 1}"})
    assert_openai_error(resp, 403, "cross_site_request_refused")


def test_our_clients_still_work(server, tiny_model_path):
    """The openai SDK, plain httpx JSON and the trainer's SGLang client send what the guard wants."""
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0)
    reply = client.chat.completions.create(model="tiny", messages=HI, max_tokens=2, temperature=0,
                                           extra_headers={"X-Session-Id": "s-ok"})
    assert reply.usage.completion_tokens >= 1
    stream = client.chat.completions.create(model="tiny", messages=HI, max_tokens=2, stream=True)
    assert any(chunk.choices and chunk.choices[0].finish_reason for chunk in stream)
    sg = SyncSGLangClient(server.base_url, retries=0)
    try:
        sg.pause_generation()
        sg.flush_cache()
        sg.continue_generation()
        out = sg.update_weights_from_disk(str(tiny_model_path))
        assert out["success"] is True
        assert sg.generate({"text": "hi", "sampling_params": {"max_new_tokens": 1}})["output_ids"]
    finally:
        sg.close()
    assert httpx.post(server.base_url + "/v1/chat/completions",
                      json={"messages": HI, "max_tokens": 1}).status_code == 200


def test_reload_errors_do_not_reveal_paths(server, tmp_path):
    """Missing folder, a file, an empty folder, a broken config: one message (the path echoed back)."""
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "empty").mkdir()
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    messages = set()
    for name in ("missing", "a_file", "empty", "broken"):
        path = str(tmp_path / name)
        resp = httpx.post(server.base_url + "/update_weights_from_disk", json={"model_path": path}, timeout=60)
        assert resp.status_code == 400 and resp.json()["success"] is False
        messages.add(resp.json()["message"].replace(path, "<path>"))
    assert len(messages) == 1, messages
    assert "not a loadable model or adapter folder" in messages.pop()


def test_keyed_server_skips_host_check_but_not_origin(engine):
    """With a key the server may be reached under any name; a page still cannot post to it."""
    cfg = ServerConfig(api_key="k-123")
    with serve_in_background(create_app(cfg, engine=engine)) as srv:
        auth = {"authorization": "Bearer k-123"}
        assert httpx.get(srv.base_url + "/v1/models", headers={**auth, "host": "gpu-box.lan:8000"}).status_code == 200
        resp = httpx.post(srv.base_url + "/pause_generation", json={}, headers={**auth, "origin": EVIL})
        assert_openai_error(resp, 403, "cross_site_request_refused")
        resp = httpx.post(srv.base_url + "/pause_generation", content=b"{}", headers={**auth, "content-type": "text/plain"})
        assert_openai_error(resp, 415)


# ---- item 8: slow clients ------------------------------------------------------------------------
def _closed_by_server(sock: socket.socket, deadline: float, drip: bytes | None) -> tuple[bool, bytes]:
    """Drip `drip` one byte per 0.2 s until the server closes the connection or `deadline` passes;
    returns (closed, what the server sent)."""
    got = b""
    sock.settimeout(0.2)
    i = 0
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
            if not chunk:
                return True, got
            got += chunk
        except TimeoutError:
            pass
        except ConnectionResetError:
            return True, got
        if drip:
            try:
                sock.sendall(drip[i % len(drip):i % len(drip) + 1])
            except (BrokenPipeError, ConnectionResetError):
                return True, got
            i += 1
    return False, got


def test_slowloris_headers_are_cut_off(server):
    """Connections that drip their request head are closed after --header-timeout, and the server
    keeps answering others meanwhile."""
    socks = []
    t0 = time.monotonic()
    for _ in range(6):
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        socks.append(s)
    results: list[tuple[bool, bytes]] = [(False, b"")] * len(socks)

    def watch(i: int) -> None:
        results[i] = _closed_by_server(socks[i], t0 + HEADER_TIMEOUT + 6, b"X-Pad: aaaaaaaa\r\n")

    threads = [threading.Thread(target=watch, args=(i,)) for i in range(len(socks))]
    for t in threads:
        t.start()
    assert httpx.get(server.base_url + "/health", timeout=5).status_code == 200
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    for s in socks:
        s.close()
    assert all(closed for closed, _ in results), results
    assert took < HEADER_TIMEOUT + 6


def test_idle_connection_after_a_response_is_not_held(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
    closed, got = _closed_by_server(s, time.monotonic() + HEADER_TIMEOUT + 8, b"G")
    s.close()
    assert got.startswith(b"HTTP/1.1 200") and closed


def test_slow_body_gets_408_and_is_closed(server):
    s = socket.create_connection(("127.0.0.1", server.port))
    s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
              "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{".encode())
    t0 = time.monotonic()
    closed, got = _closed_by_server(s, t0 + BODY_TIMEOUT + 6, b' "messages": [] ')
    s.close()
    assert closed and time.monotonic() - t0 < BODY_TIMEOUT + 6
    head, _, body = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), got[:200]
    assert b'"code":"request_timeout"' in body.replace(b" ", b"")


# ---- item 8: a blank key --------------------------------------------------------------------------
@pytest.mark.parametrize("key", [" ", "", "\t", " abc", "abc "])
def test_blank_or_padded_api_key_is_refused(key):
    with pytest.raises(ConfigError, match="blank or starts/ends with whitespace"):
        parse_config(["--api-key", key], env={})
    if key in (" ", "\t"):  # also from the environment
        with pytest.raises(ConfigError, match="blank"):
            parse_config([], env={"OPENCLAW_API_KEY": key})


def test_blank_api_key_refused_by_the_command():
    proc = subprocess.run([sys.executable, "-m", "openclaw.server", "--api-key", " "], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert "--api-key" in proc.stderr and "blank" in proc.stderr


def test_engine_only_server_has_the_guard(tiny_model_path):
    """`python -m openclaw.engines.serve` (the trainer's CPU engine) refuses the same page requests;
    the trainer's client keeps working."""
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.engines.serve import create_app as create_engine_app
    from openclaw.engines.serve import serve_in_thread

    eng = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=2)
    with serve_in_thread(create_engine_app(eng)) as url:
        body = b'{"model_path": "/tmp/attacker-weights"}'
        assert_openai_error(httpx.post(url + "/update_weights_from_disk", content=body,
                                       headers={"content-type": "text/plain"}), 415)
        assert_openai_error(httpx.post(url + "/pause_generation", json={}, headers={"origin": EVIL}), 403)
        port = url.rsplit(":", 1)[1]
        assert_openai_error(httpx.get(url + "/get_model_info", headers={"host": f"evil.example:{port}"}), 403)
        sg = SyncSGLangClient(url, retries=0)
        try:
            sg.pause_generation()
            sg.continue_generation()
            assert sg.generate({"text": "hi", "sampling_params": {"max_new_tokens": 1}})["output_ids"]
        finally:
            sg.close()
