"""Run the app under uvicorn: in the foreground (`python -m openclaw.server`) or in a background
thread on a free port (tests, benchmarks, examples)."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("openclaw.server")
DEFAULT_HEADER_TIMEOUT = 10.0


class HeaderDeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol plus a deadline for each request head.

    uvicorn bounds idle keep-alive connections but not a client that sends its request line and
    headers a byte at a time (slowloris): such connections would be held forever. The deadline
    starts when the connection opens and again when a response completes (the next request's
    head), and is cleared once the head has been parsed; the body has its own deadline in
    `BodyLimitMiddleware`.
    """

    header_timeout: float = DEFAULT_HEADER_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._arm_head_deadline()

    def _arm_head_deadline(self) -> None:
        self._disarm_head_deadline()
        self._cycle_before_head = self.cycle
        self._head_timer = self.loop.call_later(self.header_timeout, self._head_deadline_passed)

    def _disarm_head_deadline(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_deadline_passed(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            log.info("closing a connection from %s: no complete request head within %gs (--header-timeout)",
                     self.client, self.header_timeout)
            self.transport.close()

    def handle_events(self) -> None:
        super().handle_events()
        if self._head_timer is not None and self.cycle is not self._cycle_before_head:
            self._disarm_head_deadline()  # a new request's head was parsed

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)


def h11_with_header_timeout(seconds: float) -> type[H11Protocol]:
    return type("H11WithHeaderDeadline", (HeaderDeadlineH11Protocol,), {"header_timeout": seconds})


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
