"""Server-sent events for OpenAI-style streaming."""

from __future__ import annotations

import json
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


def sse_event(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False, separators=(',', ':'))}\n\n"


class ClosingStreamingResponse(StreamingResponse):
    """A StreamingResponse that always closes its body generator when the response ends.

    Starlette cancels the sending task when the client disconnects but leaves the generator
    to the garbage collector; closing it here runs its `finally`/`aclosing` blocks at once,
    which cancels the engine request and frees its batch slot deterministically.
    """

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                with anyio.CancelScope(shield=True):
                    await aclose()
