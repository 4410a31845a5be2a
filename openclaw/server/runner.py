"""Run the app under uvicorn: in the foreground (`python -m openclaw.server`) or in a background
thread on a free port (tests, benchmarks, examples)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI

from openclaw.httpapi.h11 import DEFAULT_HEADER_TIMEOUT, HeaderDeadlineH11Protocol, h11_with_header_timeout

__all__ = ["DEFAULT_HEADER_TIMEOUT", "BackgroundServer", "HeaderDeadlineH11Protocol", "bind_socket",
           "h11_with_header_timeout", "serve_forever", "serve_in_background", "uvicorn_config"]


class _Server(uvicorn.Server):
    """uvicorn.Server that calls `on_ready` once the socket is listening."""

    def __init__(self, config: uvicorn.Config, on_ready: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self._on_ready is not None:
            self._on_ready()


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def uvicorn_config(app: FastAPI, log_level: str = "warning") -> uvicorn.Config:
    state = getattr(app.state, "openclaw", None)
    header_timeout = state.config.header_timeout if state is not None else DEFAULT_HEADER_TIMEOUT
    return uvicorn.Config(app, log_level=log_level, access_log=False, timeout_graceful_shutdown=5,
                          lifespan="on", http=h11_with_header_timeout(header_timeout))


def serve_forever(app: FastAPI, host: str, port: int, log_level: str = "info",
                  on_ready: Callable[[int], None] | None = None) -> None:
    """Serve until SIGINT/SIGTERM. `on_ready(port)` runs once listening (port 0 picks a free one)."""
    sock = bind_socket(host, port)
    actual = sock.getsockname()[1]
    server = _Server(uvicorn_config(app, log_level), (lambda: on_ready(actual)) if on_ready else None)
    server.run(sockets=[sock])


@dataclass
class BackgroundServer:
    app: FastAPI
    host: str
    port: int
    _server: _Server
    _thread: threading.Thread

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self, timeout: float = 30.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError("server thread did not stop in time")

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_in_background(app: FastAPI, host: str = "127.0.0.1", port: int = 0,
                        startup_timeout: float = 120.0, log_level: str = "warning") -> BackgroundServer:
    """Start uvicorn in a daemon thread on `port` (0: a free one) and wait until it accepts
    connections (or raise, with the thread's error, if it failed to start)."""
    sock = bind_socket(host, port)
    actual_port = sock.getsockname()[1]
    server = _Server(uvicorn_config(app, log_level))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # noqa: BLE001 - surfaced to the caller below
            errors.append(exc)
        finally:
            sock.close()

    thread = threading.Thread(target=run, name=f"openclaw-server-{actual_port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if errors or not thread.is_alive():
            raise RuntimeError(f"server failed to start: {errors[0] if errors else 'thread exited'}")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError(f"server did not start within {startup_timeout}s")
        time.sleep(0.01)  # polling a condition with a deadline, not synchronising by sleep
    return BackgroundServer(app=app, host=host, port=actual_port, _server=server, _thread=thread)
