"""A chat request in one session of the RL intercept, as the OpenClaw CLI sends it."""

from __future__ import annotations

from typing import Any

import httpx


def session_chat(client: httpx.Client, sid: str, messages: list[dict], *, max_tokens: int,
                 done: bool = False) -> dict[str, Any]:
    """POST one sampled chat turn of session `sid` (`done` ends the session) and return the response."""
    headers = {"X-Session-Id": sid, **({"X-Session-Done": "true"} if done else {})}
    r = client.post("/v1/chat/completions", headers=headers,
                    json={"model": "m", "messages": messages, "max_tokens": max_tokens, "temperature": 1.0})
    assert r.status_code == 200, r.text
    return r.json()
