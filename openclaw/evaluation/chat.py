"""Greedy chat completions for many prompts at once, through the `openai` SDK.

Requests are sent concurrently (`concurrency` in flight): our embedded engine and SGLang batch
concurrent requests, so this is batched inference on any OpenAI-compatible server. A failed
request raises: a reply that never came is not scored as a wrong answer.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from openclaw.evaluation.progress import Progress
from openclaw.evaluation.source import EVAL_HEADERS, Target


def openai_client(target: Target, timeout_s: float = 1800.0) -> Any:
    from openai import OpenAI

    return OpenAI(base_url=target.openai_url, api_key=target.api_key, timeout=timeout_s, max_retries=2,
                  default_headers=EVAL_HEADERS)


def greedy_replies(target: Target, conversations: list[list[dict[str, str]]], max_tokens: int,
                   progress: Progress | None = None, concurrency: int = 16) -> list[str]:
    """One greedy reply (temperature 0) per conversation, in order."""
    client = openai_client(target)

    def one(messages: list[dict[str, str]]) -> str:
        out = client.chat.completions.create(model=target.model, messages=messages, max_tokens=max_tokens,
                                             temperature=0.0)
        text = out.choices[0].message.content or ""
        if progress is not None:
            progress.step(phase="replied")
        return text.strip()

    if not conversations:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(conversations)))) as pool:
        return list(pool.map(one, conversations))
