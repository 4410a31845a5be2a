"""A bounded OpenAI-compatible chat client for judges: every call has a timeout, transport
errors / 5xx / 429 are retried a bounded number of times, and the API key never appears in
logs or exception messages."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

log = logging.getLogger(__name__)
_RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


class JudgeCallError(RuntimeError):
    """A judge call that failed after its retries (message safe to store: no key)."""


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
        # One pooled client, shared by worker threads (httpx.Client is thread-safe).
        self._http = httpx.Client(timeout=httpx.Timeout(timeout_s), headers=headers,
                                  limits=httpx.Limits(max_connections=64, max_keepalive_connections=16))
        self._model = model

    def model(self) -> str:
        if self._model is None:
            try:
                r = self._http.get(f"{self.base_url}/models")
                r.raise_for_status()
                data = r.json().get("data") or []
                self._model = str(data[0]["id"]) if data else "default"
            except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as e:
                raise JudgeCallError(f"cannot list models at {self.base_url}/models: {type(e).__name__}") from None
        return self._model

    def chat(self, messages: list[dict[str, str]], temperature: float, max_tokens: int,
             seed: int | None = None) -> Completion:
        body: dict = {"model": self.model(), "messages": messages, "temperature": temperature,
                      "max_tokens": max_tokens, "stream": False}
        if seed is not None:
            body["seed"] = seed
        t0 = time.perf_counter()
        last = ""
        for attempt in range(1, self.retries + 2):
            try:
                r = self._http.post(f"{self.base_url}/chat/completions", json=body)
            except httpx.TimeoutException:
                last = f"timeout after {self.timeout_s:g}s"
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
                time.sleep(min(2.0, 0.25 * 2 ** (attempt - 1)))  # backoff between bounded retries
        raise JudgeCallError(f"judge call failed after {self.retries + 1} attempt(s): {last}")

    def close(self) -> None:
        self._http.close()
