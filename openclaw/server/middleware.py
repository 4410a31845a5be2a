"""Pure ASGI middlewares: API-key auth and the request body size limit.

They answer in OpenAI's error shape themselves (they run outside FastAPI's exception handlers).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openclaw.server.errors import OpenAIError

# Liveness probes work without a key; they reveal nothing but "up".
OPEN_PATHS = frozenset({"/health", "/v1/health"})


async def send_error(send: Send, err: OpenAIError, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps(err.body()).encode()
    await send({"type": "http.response.start", "status": err.status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": body})


def presented_key(scope: Scope) -> str | None:
    """`Authorization: Bearer KEY` (OpenAI SDKs) or `x-api-key: KEY` (Anthropic-style clients)."""
    auth = xkey = None
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            auth = value.decode("latin-1")
        elif name == b"x-api-key":
            xkey = value.decode("latin-1")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return xkey.strip() if xkey else None


class APIKeyMiddleware:
    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self._key = api_key.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        key = presented_key(scope)
        if key is None:
            await send_error(send, OpenAIError(401, "Missing API key: send 'Authorization: Bearer <key>' "
                                                    "or 'x-api-key: <key>'.", code="invalid_api_key"),
                             [(b"www-authenticate", b"Bearer")])
            return
        # Constant-time: no timing side channel on how much of the key matched.
        if not hmac.compare_digest(key.encode(), self._key):
            await send_error(send, OpenAIError(401, "Incorrect API key provided.", code="invalid_api_key"),
                             [(b"www-authenticate", b"Bearer")])
            return
        await self.app(scope, receive, send)


class BodyTooLarge(OpenAIError):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"Request body too large: the limit is {limit} bytes "
                              f"({limit / 1024 / 1024:g} MB; see --max-body-mb).", code="request_too_large")


class BodyLimitMiddleware:
    """Rejects bodies over `limit` bytes: up front from Content-Length, and while streaming for
    chunked bodies (or a lying Content-Length), by raising BodyTooLarge from `receive`."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await send_error(send, OpenAIError(400, "Invalid Content-Length header."))
                    return
                if declared > self.limit:
                    await send_error(send, BodyTooLarge(self.limit), [(b"connection", b"close")])
                    return
        seen = 0
        response_started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge as exc:
            # Raised outside a route's handlers (e.g. while FastAPI parsed the body itself).
            if not response_started:
                await send_error(send, exc, [(b"connection", b"close")])
