"""Pure ASGI middlewares: cross-site guard, API-key auth, per-user identity, request body size
limit and read deadline.

They answer in OpenAI's error shape themselves (they run outside FastAPI's exception handlers).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openclaw.httpapi.errors import OpenAIError
from openclaw.httpapi.identity import (
    ADMIN_DEFAULT,
    DEFAULT_USER,
    ROLE_USER,
    SCOPE_KEY,
    USER_HEADER,
    Identity,
    KeyTable,
    valid_user_id,
)
from openclaw.httpapi.urls import WILDCARD_HOSTS

log = logging.getLogger("openclaw.server")

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


def _header_values(scope: Scope, key: bytes) -> list[str]:
    return [value.decode("latin-1") for name, value in scope.get("headers", ()) if name == key]


def _unauthorized(message: str) -> OpenAIError:
    return OpenAIError(401, message, code="invalid_api_key")


class IdentityMiddleware:
    """Resolves who sends each request, once, into `scope["state"]["openclaw_user"]` (an
    `Identity`; routes read it with `openclaw.httpapi.identity.scope_identity`).

    With keys (`keys` not None) the key decides: none or an unknown one is a 401, and an
    `X-OpenClaw-User` header naming anyone but the key's user is a 403 (a name is never accepted
    and then ignored). Without keys (a loopback server) the header names the user, no header is the
    admin "default" (the one-user server it always was). A header value that is not a user id is
    a 400. A plain user reaching a route `admin_only(path)` says is refused (403)."""

    def __init__(self, app: ASGIApp, keys: KeyTable | None, admin_only: Callable[[str], bool]) -> None:
        self.app = app
        self.keys = keys
        self.admin_only = admin_only

    def _identity(self, scope: Scope) -> Identity | OpenAIError:
        named = _header_values(scope, USER_HEADER)
        if len(named) > 1:
            return OpenAIError(400, "Send X-OpenClaw-User once.", param="X-OpenClaw-User", code="invalid_user")
        header = named[0].strip() if named else None
        if header is not None and not valid_user_id(header):
            return OpenAIError(400, "X-OpenClaw-User must be a user id of 1-64 characters from [A-Za-z0-9_.-].",
                               param="X-OpenClaw-User", code="invalid_user")
        if self.keys is None:
            if header is None or header == DEFAULT_USER:
                return ADMIN_DEFAULT
            return Identity(header, ROLE_USER)
        key = presented_key(scope)
        if key is None:
            return _unauthorized("Missing API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'.")
        identity = self.keys.match(key)
        if identity is None:
            return _unauthorized("Incorrect API key provided.")
        if header is not None and header != identity.user_id:
            return OpenAIError(403, "X-OpenClaw-User names another user than the API key's: a key acts only "
                                    "as its own user.", param="X-OpenClaw-User", code="user_mismatch")
        return identity

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
            await self.app(scope, receive, send)
            return
        identity = self._identity(scope)
        if isinstance(identity, OpenAIError):
            extra = [(b"www-authenticate", b"Bearer")] if identity.status == 401 else []
            await send_error(send, identity, extra)
            return
        if not identity.is_admin and self.admin_only(scope["path"]):
            await send_error(send, OpenAIError(403, f"{scope['path']} changes the served weights: it needs an "
                                                    "admin key.", code="admin_only"))
            return
        # A fresh state dict: the identity belongs to this request only.
        scope = {**scope, "state": {**scope.get("state", {}), SCOPE_KEY: identity}}
        await self.app(scope, receive, send)


class BodyTooLarge(OpenAIError):
    def __init__(self, limit: int) -> None:
        super().__init__(413, f"Request body too large: the limit is {limit} bytes "
                              f"({limit / 1024 / 1024:g} MB; see --max-body-mb).", code="request_too_large")


class BodyLimitMiddleware:
    """Rejects bodies over `limit` bytes: up front from Content-Length, and while streaming for
    chunked bodies (or a lying Content-Length), by raising BodyTooLarge from `receive`; and bodies
    that do not arrive within `body_timeout` seconds of the request head (BodyTimeout, 408), so a
    client dripping its body cannot hold a connection for long."""

    def __init__(self, app: ASGIApp, limit: int, body_timeout: float = 60.0) -> None:
        self.app = app
        self.limit = limit
        self.body_timeout = body_timeout

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
        body_done = False
        body_failed = False
        response_started = False
        deadline = asyncio.get_running_loop().time() + self.body_timeout

        async def limited_receive() -> Message:
            nonlocal seen, body_done, body_failed
            if body_done:  # after the body only http.disconnect comes: waiting for it has no deadline
                return await receive()
            remaining = deadline - asyncio.get_running_loop().time()
            try:
                message = await asyncio.wait_for(receive(), timeout=max(remaining, 0.0))
            except TimeoutError:
                body_failed = True
                raise BodyTimeout(self.body_timeout) from None
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    body_failed = True
                    raise BodyTooLarge(self.limit)
                body_done = not message.get("more_body", False)
            else:
                body_done = True
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
                if body_failed:  # the rest of the body is unread: this connection cannot carry another request
                    message = {**message, "headers": [*message.get("headers", ()), (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except (BodyTooLarge, BodyTimeout) as exc:
            # Raised outside a route's handlers (e.g. while FastAPI parsed the body itself).
            if not response_started:
                await send_error(send, exc, [(b"connection", b"close")])


class BodyTimeout(OpenAIError):
    def __init__(self, seconds: float) -> None:
        super().__init__(408, f"The request body did not arrive within {seconds:g} seconds (see --body-timeout).",
                         code="request_timeout")


# ---- cross-site requests ----------------------------------------------------------------------
# A web page the user visits can make the browser send requests to 127.0.0.1: "simple" cross-site
# POSTs (text/plain, forms; no preflight) and, via DNS rebinding, requests under the page's own
# host name. A JSON content type forces a CORS preflight (which we never approve), browsers always
# name the page's Origin on a POST, and a rebinding page cannot change the Host header it sends.
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def host_name(value: str) -> str:
    """`example.com:8000` / `[::1]:8000` / `::1` -> the host name, lower-case, without port or brackets."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:].partition("]")[0]
    if value.count(":") > 1:  # a bare IPv6 address
        return value
    return value.partition(":")[0]


def _is_loopback_ip(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _header(scope: Scope, key: bytes) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == key:
            return value.decode("latin-1")
    return None


class CrossSiteGuard:
    """Refuses what a browser page could send on its own: a state-changing request (any method but
    GET/HEAD/OPTIONS) without `Content-Type: application/json` (415), a request with a foreign
    `Origin` (403), and, when `check_host`, a `Host` that is not the bind address, a loopback name
    or an allowed host (403: DNS rebinding)."""

    def __init__(self, app: ASGIApp, bind_host: str, allowed_hosts: Iterable[str] = (),
                 allowed_origins: Iterable[str] = (), check_host: bool = True) -> None:
        self.app = app
        names = {host_name(h) for h in allowed_hosts} | LOOPBACK_NAMES
        if bind_host not in WILDCARD_HOSTS:
            names.add(host_name(bind_host))
        self.hosts = frozenset(names)
        self.origins = frozenset(o.strip().rstrip("/").lower() for o in allowed_origins)
        self.check_host = check_host

    def _host_ok(self, host: str) -> bool:
        name = host_name(host)
        return name in self.hosts or _is_loopback_ip(name)

    def _refusal(self, scope: Scope) -> OpenAIError | None:
        host = _header(scope, b"host")
        if self.check_host and host is not None and not self._host_ok(host):
            return OpenAIError(403, f"Host {host!r} is not allowed: this server answers to its bind address and "
                                    "loopback names (add others with --allowed-host).", code="host_not_allowed")
        origin = _header(scope, b"origin")
        if origin is not None:
            origin_l = origin.strip().rstrip("/").lower()
            parts = urlsplit(origin_l) if origin_l != "null" else None
            same_origin = (parts is not None and host is not None and parts.scheme in ("http", "https")
                           and parts.netloc == host.strip().lower() and self._host_ok(parts.netloc))
            if not same_origin and origin_l not in self.origins:
                return OpenAIError(403, f"Cross-site request refused: Origin {origin!r} is not allowed "
                                        "(add it with --allowed-origin).", code="cross_site_request_refused")
        if scope["method"] not in SAFE_METHODS:
            ctype = _header(scope, b"content-type")
            media = (ctype or "").partition(";")[0].strip().lower()
            if media != "application/json":
                shown = repr(ctype) if ctype else "none"
                return OpenAIError(415, f"Unsupported Content-Type {shown}: requests that change state must send "
                                        "'Content-Type: application/json'.", code="unsupported_media_type")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        err = self._refusal(scope)
        if err is not None:
            log.warning("refused %s %s: %s", scope["method"], scope["path"], err.message)
            await send_error(send, err, [(b"connection", b"close")])
            return
        await self.app(scope, receive, send)
