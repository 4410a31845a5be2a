"""uvicorn's h11 protocol with a deadline for each request head (slowloris protection), for every
openclaw service that runs under uvicorn."""

from __future__ import annotations

import asyncio
import logging

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
