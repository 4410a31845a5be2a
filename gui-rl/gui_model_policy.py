"""A model as the policy, through an OpenAI-compatible chat server (ours or SGLang's).

Text-only models get the goal and the accessibility tree; with `vision=True` the screenshot is
sent too, as an `image_url` content part with a PNG data URL (a text-only server refuses it with
a 400, which surfaces here as an error rather than a silently blind policy).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any

import httpx
from gui_env import Action, Observation, parse_action
from gui_generate import opening_messages


@dataclass
class ChatModelPolicy:
    base_url: str
    model: str
    vision: bool = False
    max_tokens: int = 48
    messages: list[dict[str, Any]] = field(default_factory=list)

    def reset(self, obs: Observation) -> None:
        self.messages = []  # the opening (system prompt, worked examples) comes with the first page

    def _user(self, obs: Observation) -> dict[str, Any]:
        if not self.vision:
            return {"role": "user", "content": obs.text()}
        url = "data:image/png;base64," + base64.b64encode(obs.screenshot).decode()
        return {"role": "user", "content": [{"type": "text", "text": obs.text()},
                                            {"type": "image_url", "image_url": {"url": url}}]}

    def act(self, obs: Observation) -> Action:
        page = self._user(obs)
        if self.messages:
            self.messages.append(page)
        else:
            self.messages = opening_messages(page["content"])
        r = httpx.post(self.base_url.rstrip("/") + "/chat/completions", timeout=300, json={
            "model": self.model, "messages": self.messages, "max_tokens": self.max_tokens, "temperature": 0})
        if r.status_code != 200:
            raise RuntimeError(f"model server answered {r.status_code}: {r.text[:500]}")
        reply = r.json()["choices"][0]["message"]["content"] or ""
        self.messages.append({"role": "assistant", "content": reply})
        return parse_action(reply)  # ActionError: the episode runner counts it and ends the episode
