"""OpenAI-shaped errors: `{"error": {"message", "type", "param", "code"}}` with the right status.

Client mistakes map to 4xx here; only unexpected exceptions become a 500 (logged with a
traceback), so a 500 always means a server fault.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("openclaw.server")

_TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    503: "service_unavailable_error",
}


class OpenAIError(Exception):
    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 type: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type or _TYPE_BY_STATUS.get(status, "server_error" if status >= 500 else "invalid_request_error")

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.param, self.code)


def error_body(message: str, type: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def error_response(status: int, message: str, *, param: str | None = None, code: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    err = OpenAIError(status, message, param=param, code=code)
    return JSONResponse(err.body(), status_code=status, headers=headers)


def _loc_to_param(loc: tuple[Any, ...]) -> str | None:
    parts = [p for p in loc if p not in ("body",)]
    if not parts:
        return None
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


def validation_error(exc: ValidationError | RequestValidationError) -> OpenAIError:
    """The first pydantic error as a readable 400 naming the offending `param`."""
    errors = exc.errors()
    if not errors:
        return OpenAIError(400, "Invalid request body.")
    first = errors[0]
    param = _loc_to_param(tuple(first.get("loc", ())))
    msg = first.get("msg", "invalid value")
    more = f" (and {len(errors) - 1} more error(s))" if len(errors) > 1 else ""
    where = f"'{param}'" if param else "request body"
    return OpenAIError(400, f"Invalid value for {where}: {msg}{more}", param=param, code="invalid_value")


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(OpenAIError)
    async def _openai_error(_: Request, exc: OpenAIError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        err = validation_error(exc)
        return JSONResponse(err.body(), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = None
        if exc.status_code == 404:
            message = f"Unknown route: {request.method} {request.url.path}"
        elif exc.status_code == 405:
            allowed = (getattr(exc, "headers", None) or {}).get("Allow")
            message = f"Method {request.method} is not allowed on {request.url.path}" + (
                f"; use {allowed}" if allowed else "")
            code = "method_not_allowed"
        else:
            message = str(exc.detail)
        status = exc.status_code
        err = OpenAIError(status, message, code=code)
        return JSONResponse(err.body(), status_code=status, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error on %s %s", request.method, request.url.path)
        return JSONResponse(error_body(f"Internal server error: {type(exc).__name__}", "server_error"),
                            status_code=500)
