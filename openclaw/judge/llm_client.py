"""A bounded OpenAI-compatible chat client for judges.

Every call has ONE deadline, `timeout_s`, for the whole call: listing the model, every attempt,
the backoff between attempts and reading the body. httpx's own timeouts apply per socket
operation, so an endpoint that drips a byte every few seconds never trips them; the deadline is
therefore enforced by asyncio (`asyncio.timeout` cancels the request and closes its connection).
Transport errors / 5xx / 429 are retried a bounded number of times within the deadline, and the
API key never appears in logs or exception messages.

The client is used from judge worker threads: it runs its own event loop on one daemon thread
and the synchronous `chat()` submits to it (one connection pool shared by all workers).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx

log = logging.getLogger(__name__)
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
# How long a caller waits beyond the deadline for the event loop to hand the outcome back
# (the deadline itself is enforced inside the loop; this only guards against a wedged loop).
_HANDBACK_SLACK_S = 5.0
T = TypeVar("T")


class JudgeCallError(RuntimeError):
    """A judge call that failed after its retries or ran past its deadline (message safe to
    store: no key)."""


def normalize_base_url(url: str) -> str:
    """`http://h:p` -> `http://h:p/v1`; a URL with a path is kept as given (minus a trailing /)."""
    url = url.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"judge URL must be http(s)://host[:port][/path], got {url!r}")
    if parts.path in ("", "/"):
        url += "/v1"
    return url


@dataclass(frozen=True)
class Completion:
    text: str
    latency_s: float
    attempts: int


class ChatClient:
    def __init__(self, base_url: str, api_key: str | None, timeout_s: float, retries: int,
                 model: str | None = None) -> None:
        self.base_url = normalize_base_url(base_url)
        self.timeout_s = timeout_s
        self.retries = retries
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), headers=headers,
                                       limits=httpx.Limits(max_connections=64, max_keepalive_connections=16))
        self._model = model
        self._model_lock: asyncio.Lock | None = None  # created on the loop
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="judge-http", daemon=True)
        self._thread.start()
        self._closed = False

    # ------------------------------------------------------------------ sync API (worker threads)
    def model(self) -> str:
        return self._submit(self._with_deadline(self._model_name(), "listing models", []))

    def chat(self, messages: list[dict[str, str]], temperature: float, max_tokens: int,
             seed: int | None = None) -> Completion:
        progress: list[str] = []  # what the call got to, for the deadline's error message
        call = self._chat(messages, temperature, max_tokens, seed, progress)
        return self._submit(self._with_deadline(call, "the judge call", progress))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(_HANDBACK_SLACK_S)
        except (concurrent.futures.TimeoutError, RuntimeError):
            log.warning("judge HTTP client did not shut down cleanly")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(_HANDBACK_SLACK_S)
        if not self._thread.is_alive():
            self._loop.close()

    # ------------------------------------------------------------------ on the loop
    def _submit(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._closed:
            coro.close()
            raise JudgeCallError("judge client is closed")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(self.timeout_s + _HANDBACK_SLACK_S)
        except concurrent.futures.CancelledError:
            raise JudgeCallError("judge call cancelled: the judge is shutting down") from None
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise JudgeCallError(f"timeout: the judge call did not return within {self.timeout_s:g}s") from None

    async def _with_deadline(self, coro: Coroutine[Any, Any, T], what: str, progress: list[str]) -> T:
        try:
            async with asyncio.timeout(self.timeout_s):
                return await coro
        except TimeoutError:
            detail = f" ({progress[-1]})" if progress else ""
            raise JudgeCallError(f"timeout: {what} did not finish within its {self.timeout_s:g}s deadline"
                                 f"{detail}") from None

    async def _model_name(self) -> str:
        if self._model is None:
            if self._model_lock is None:
                self._model_lock = asyncio.Lock()
            async with self._model_lock:  # one listing, however many calls wait for it
                if self._model is None:
                    try:
                        r = await self._http.get(f"{self.base_url}/models")
                        r.raise_for_status()
                        data = r.json().get("data") or []
                        self._model = str(data[0]["id"]) if data else "default"
                    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as e:
                        raise JudgeCallError(
                            f"cannot list models at {self.base_url}/models: {type(e).__name__}") from None
        return self._model

    async def _chat(self, messages: list[dict[str, str]], temperature: float, max_tokens: int,
                    seed: int | None, progress: list[str]) -> Completion:
        body: dict[str, Any] = {"model": await self._model_name(), "messages": messages,
                                "temperature": temperature, "max_tokens": max_tokens, "stream": False}
        if seed is not None:
            body["seed"] = seed
        t0 = time.perf_counter()
        last = ""
        for attempt in range(1, self.retries + 2):
            progress.append(f"attempt {attempt}/{self.retries + 1}" + (f", previous: {last}" if last else ""))
            try:
                r = await self._http.post(f"{self.base_url}/chat/completions", json=body)
            except httpx.TimeoutException:
                last = "timeout"
            except httpx.HTTPError as e:
                last = f"{type(e).__name__}: {e}"
            else:
                if r.status_code == 200:
                    try:
                        text = r.json()["choices"][0]["message"].get("content") or ""
                    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
                        raise JudgeCallError("judge endpoint returned a malformed completion") from None
                    return Completion(text, time.perf_counter() - t0, attempt)
                last = f"HTTP {r.status_code}: {r.text[:200]}"
                if r.status_code not in _RETRY_STATUS:
                    break
            if attempt <= self.retries:
                log.warning("judge call failed (attempt %d/%d): %s", attempt, self.retries + 1, last)
                await asyncio.sleep(min(2.0, 0.25 * 2 ** (attempt - 1)))  # backoff, inside the deadline
        raise JudgeCallError(f"judge call failed after {self.retries + 1} attempt(s): {last}")

    async def _shutdown(self) -> None:
        """Cancel calls still in flight (their callers get a JudgeCallError), close the pool."""
        me = asyncio.current_task()
        pending = [t for t in asyncio.all_tasks() if t is not me]
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self._http.aclose()
