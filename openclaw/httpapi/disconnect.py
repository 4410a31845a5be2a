"""Stop work that nobody waits for: a request's work is cancelled when its HTTP client goes away
(freeing, say, an engine's batch slot)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from starlette.requests import Request


async def until_disconnect(request: Request) -> None:
    """Returns when the HTTP client goes away. The body has been read already, so the next ASGI
    message the server delivers is `http.disconnect`."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def unless_disconnected(request: Request, work: Awaitable[Any]) -> tuple[bool, Any]:
    """Run `work`; cancel it if the client disconnects first. Returns (completed, value); the
    work's own exception propagates when it completed."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(until_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        try:
            await task
        except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the client is gone
            pass
        return False, None
    return True, task.result()
