"""Simulated users talking to the served model through the OpenAI API, as a person would.

One interaction = one session: the user asks a training prompt, reads the reply, and answers
in natural language according to the persona ("hm, that's a wall of text" / "Thanks, perfect.").
That answer is sent as the next message of the session with `X-Session-Done` (max_tokens 1:
the session ends there), which is how the RL intercept learns the turn's next state.

Sessions are numbered 1, 2, ... in the order they START (the moment the user's first request is
sent; all users share one event loop, so the numbering is total): the order the reference's
"sessions until 3 consecutive accepted" metric reads them in (`metrics.py`).
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import httpx

from openclaw.demo.personas import Persona, PromptItem


@dataclass(frozen=True)
class Interaction:
    session_id: str
    prompt: str
    reply: str
    accepted: bool
    feedback: str
    started: int = 0  # 1-based start order over all sessions of this SimulatedUsers
    on_topic: bool = False
    meets_preference: bool = False

    def record(self) -> dict[str, Any]:
        """The session as results.json keeps it (for the sessions-to-3 metric)."""
        return {"n": self.started, "accepted": self.accepted, "meets_preference": self.meets_preference,
                "on_topic": self.on_topic}


class SimulatedUsers:
    def __init__(self, base_url: str, persona: Persona, prompts: list[PromptItem], *, seed: int = 0,
                 max_tokens: int = 100, temperature: float = 1.0, api_key: str | None = None,
                 user: str | None = None) -> None:
        """`user`: the user id these sessions belong to (`X-OpenClaw-User`, on a keyless loopback
        server); None: the server's default user."""
        self.base_url = base_url.rstrip("/")
        self.persona = persona
        self.prompts = list(prompts)
        self.rng = random.Random(seed)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if user is not None:
            self.headers["X-OpenClaw-User"] = user
        self.count = 0
        self.started = 0  # sessions whose first request has been sent

    async def _chat(self, client: httpx.AsyncClient, sid: str, messages: list[dict[str, str]], max_tokens: int,
                    done: bool = False) -> str:
        headers = dict(self.headers, **{"X-Session-Id": sid})
        if done:
            headers["X-Session-Done"] = "true"
        r = await client.post("/v1/chat/completions", headers=headers, json={
            "model": "default", "messages": messages, "max_tokens": max_tokens, "temperature": self.temperature})
        if r.status_code != 200:
            raise RuntimeError(f"chat request failed: HTTP {r.status_code}: {r.text[:300]}")
        return r.json()["choices"][0]["message"].get("content") or ""

    async def _one(self, client: httpx.AsyncClient, index: int, item: PromptItem, rng: random.Random) -> Interaction:
        sid = f"demo-user-{index}"
        question = {"role": "user", "content": item.prompt}
        # Numbered here, right before the session's first request goes out (no await in between).
        self.started += 1
        started = self.started
        reply = await self._chat(client, sid, [question], self.max_tokens)
        verdict = self.persona.judge(reply, item, rng)
        await self._chat(client, sid, [question, {"role": "assistant", "content": reply},
                                       {"role": "user", "content": verdict.feedback}], 1, done=True)
        return Interaction(sid, item.prompt, reply, verdict.accepted, verdict.feedback, started, verdict.on_topic,
                           verdict.meets_preference)

    async def drive_async(self, n: int, concurrency: int) -> list[Interaction]:
        # A fresh connection per request: a server may close an idle keep-alive connection (uvicorn
        # after 5 s) just as a request goes out on it, and the POST then fails with a ReadError
        # that cannot be retried safely (the server may have taken the turn). Loopback connects are cheap.
        limits = httpx.Limits(max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=self.base_url, timeout=1800, limits=limits) as client:
            sem = asyncio.Semaphore(max(1, concurrency))

            async def run(i: int) -> Interaction:
                item = self.rng.choice(self.prompts)
                rng = random.Random(self.rng.random())
                async with sem:
                    return await self._one(client, self.count + i, item, rng)

            out = await asyncio.gather(*(run(i) for i in range(n)))
        self.count += n
        return list(out)

    def drive(self, n: int, concurrency: int = 8) -> list[Interaction]:
        return asyncio.run(self.drive_async(n, concurrency))
