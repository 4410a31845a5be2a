"""The one client for SGLang's native HTTP API (real SGLang, an sglang_router, or any server that
speaks the same protocol, such as an embedded engine). The trainer's rollout and weight sync use
it; runtimes built on slime import it from here (slime itself depends on no runtime).

`SGLangClient` is async (httpx.AsyncClient); `SyncSGLangClient` runs the same coroutines on a
private event-loop thread for synchronous callers (Ray actors, scripts). Every call has a
timeout; only requests that are safe to repeat are retried (GETs, and any request whose
connection failed before it was sent), with a bounded number of attempts.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import httpx

from slime.utils.environment import env_value

T = TypeVar("T")


class SGLangClientError(RuntimeError):
    """An SGLang endpoint answered with an error, or could not be reached."""

    def __init__(self, message: str, *, url: str = "", status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.url = url
        self.status = status
        self.body = body


# The key the serving engines require (our server's OPENCLAW_API_KEY; SGLang's --api-key takes the
# same value). Read from the environment, never from a flag: a key on a command line is visible to
# every user of the machine through /proc.
API_KEY_ENV = "OPENCLAW_API_KEY"


def engine_api_key() -> str | None:
    """The engines' API key from the environment, or None when the engines run without one."""
    return env_value(API_KEY_ENV)


def auth_headers(api_key: str | None = None) -> dict[str, str]:
    """`Authorization` for an engine request: the given key, else the environment's, else none."""
    key = api_key if api_key is not None else engine_api_key()
    return {"Authorization": f"Bearer {key}"} if key else {}


def _retryable_exc(exc: Exception) -> bool:
    # A connect error means the request never reached the server: safe to resend anything.
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.RemoteProtocolError)


class SGLangClient:
    """Async client for one SGLang-compatible server (or router) at `base_url`. Without `api_key`,
    the key in $OPENCLAW_API_KEY (if any) is sent."""

    def __init__(self, base_url: str, *, timeout: float = 600.0, connect_timeout: float = 10.0,
                 retries: int = 3, backoff: float = 0.5, api_key: str | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.retries = max(0, retries)
        self.backoff = backoff
        self._http = httpx.AsyncClient(base_url=self.base_url, headers=auth_headers(api_key),
                                       timeout=httpx.Timeout(timeout, connect=connect_timeout))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> SGLangClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    # ---- transport --------------------------------------------------------------------
    async def _request(self, method: str, path: str, *, json_body: Any = None, idempotent: bool = False,
                       ok_statuses: tuple[int, ...] = (200,)) -> httpx.Response:
        url = self.base_url + path
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                resp = await self._http.request(method, path, json=json_body)
            except httpx.HTTPError as exc:
                last = exc
                if attempt < self.retries and (idempotent or _retryable_exc(exc)):
                    await asyncio.sleep(self.backoff * (2 ** attempt))
                    continue
                raise SGLangClientError(f"{method} {url} failed: {type(exc).__name__}: {exc}", url=url) from exc
            if resp.status_code in ok_statuses:
                return resp
            if idempotent and resp.status_code >= 500 and attempt < self.retries:
                await asyncio.sleep(self.backoff * (2 ** attempt))
                continue
            raise SGLangClientError(f"{method} {url} -> HTTP {resp.status_code}: {_error_text(resp)}",
                                    url=url, status=resp.status_code, body=resp.text)
        raise SGLangClientError(f"{method} {url} failed after {self.retries + 1} attempts: {last}", url=url)

    # ---- generation -------------------------------------------------------------------
    async def generate(self, body: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
        """POST /generate with an SGLang body; returns SGLang's response dict (a list for batches)."""
        body = {k: v for k, v in body.items() if k != "stream"}
        resp = await self._request("POST", "/generate", json_body=body)
        return resp.json()

    async def generate_stream(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """POST /generate with stream=true; yields each SSE chunk (cumulative text, SGLang style)."""
        body = dict(body, stream=True)
        url = self.base_url + "/generate"
        try:
            async with self._http.stream("POST", "/generate", json=body) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    raise SGLangClientError(f"POST {url} -> HTTP {resp.status_code}: {_error_text(resp)}",
                                            url=url, status=resp.status_code, body=resp.text)
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    chunk = json.loads(data)
                    if "error" in chunk:
                        raise SGLangClientError(f"stream error from {url}: {chunk['error']}", url=url)
                    yield chunk
        except httpx.HTTPError as exc:
            raise SGLangClientError(f"POST {url} (stream) failed: {type(exc).__name__}: {exc}", url=url) from exc

    # ---- weights and control ----------------------------------------------------------
    async def update_weights_from_disk(self, model_path: str, *, weight_version: int | str | None = None,
                                       load_format: str | None = None, abort_all_requests: bool = False) -> dict[str, Any]:
        body: dict[str, Any] = {"model_path": str(model_path)}
        if weight_version is not None:
            body["weight_version"] = str(weight_version)
        if load_format:
            body["load_format"] = load_format
        if abort_all_requests:
            body["abort_all_requests"] = True
        resp = await self._request("POST", "/update_weights_from_disk", json_body=body, ok_statuses=(200, 400))
        out = resp.json()
        if not out.get("success", False):
            raise SGLangClientError(f"update_weights_from_disk({model_path}) failed: {out.get('message')}",
                                    url=self.base_url, status=resp.status_code, body=resp.text)
        return out

    async def load_lora_adapter(self, lora_name: str, lora_path: str, *,
                                weight_version: int | None = None) -> dict[str, Any]:
        """POST /load_lora_adapter: serve the PEFT adapter folder `lora_path` under `lora_name`
        (requests name it as `lora_path`). SGLangClientError, naming this engine and its message,
        unless it loaded. `weight_version` only for an engine that versions its adapters (its
        /get_server_info lists `lora_adapters`): SGLang's request has no such field."""
        body: dict[str, Any] = {"lora_name": lora_name, "lora_path": str(lora_path)}
        if weight_version is not None:
            body["weight_version"] = int(weight_version)
        return await self._lora_update("/load_lora_adapter", body, f"load_lora_adapter({lora_name!r}, {lora_path})")

    async def unload_lora_adapter(self, lora_name: str) -> dict[str, Any]:
        """POST /unload_lora_adapter; SGLangClientError unless the adapter was unloaded."""
        return await self._lora_update("/unload_lora_adapter", {"lora_name": lora_name},
                                       f"unload_lora_adapter({lora_name!r})")

    async def _lora_update(self, path: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        # Both servers answer a refusal with HTTP 400: SGLang as {success, error_message,
        # loaded_adapters}, ours as {success, message, loaded_adapters} (a malformed request as an
        # OpenAI error body). Only an explicit success counts.
        resp = await self._request("POST", path, json_body=body, ok_statuses=(200, 400))
        try:
            out = resp.json()
        except ValueError:
            out = None
        if isinstance(out, dict) and out.get("success") is True:
            return out
        reason = (out.get("error_message") or out.get("message")) if isinstance(out, dict) else None
        raise SGLangClientError(f"{what} at {self.base_url} failed (HTTP {resp.status_code}): "
                                f"{reason or _error_text(resp)}", url=self.base_url, status=resp.status_code,
                                body=resp.text)

    async def pause_generation(self, mode: str | None = None) -> dict[str, Any]:
        body = {"mode": mode} if mode else {}
        return (await self._request("POST", "/pause_generation", json_body=body)).json()

    async def continue_generation(self) -> dict[str, Any]:
        return (await self._request("POST", "/continue_generation", json_body={})).json()

    async def abort_request(self, rid: str = "", abort_all: bool = False) -> None:
        await self._request("POST", "/abort_request", json_body={"rid": rid, "abort_all": abort_all})

    async def flush_cache(self, *, deadline_s: float = 60.0, interval_s: float = 0.2) -> None:
        """POST /flush_cache until it answers 200 (it refuses while requests are pending). POST:
        SGLang answers GET and POST, and servers that refuse state changes on GET (a web page can
        make a browser GET any URL) answer only POST."""
        await self._until_ok(lambda: self._http.post("/flush_cache", json={}), deadline_s, interval_s,
                             f"flush_cache at {self.base_url} did not succeed", with_body=True)

    async def wait_healthy(self, *, deadline_s: float = 300.0, interval_s: float = 0.25,
                           path: str = "/health") -> None:
        """Poll `path` until 200, or raise after `deadline_s` naming the last failure."""
        await self._until_ok(lambda: self._http.get(path, timeout=min(10.0, max(1.0, deadline_s))), deadline_s,
                             interval_s, f"{self.base_url}{path} not healthy")

    async def _until_ok(self, send: Callable[[], Awaitable[httpx.Response]], deadline_s: float, interval_s: float,
                        failed: str, *, with_body: bool = False) -> None:
        """Send until the answer is 200; after `deadline_s`, SGLangClientError `failed` with the last
        answer (its body too with `with_body`) or transport error."""
        end = time.monotonic() + deadline_s
        last = "no answer yet"
        while True:
            try:
                resp = await send()
                if resp.status_code == 200:
                    return
                last = f"HTTP {resp.status_code}" + (f": {resp.text.strip()}" if with_body else "")
            except httpx.HTTPError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= end:
                raise SGLangClientError(f"{failed} within {deadline_s}s ({last})", url=self.base_url)
            await asyncio.sleep(interval_s)

    async def health(self) -> bool:
        try:
            return (await self._http.get("/health", timeout=5.0)).status_code == 200
        except httpx.HTTPError:
            return False

    async def get_model_info(self) -> dict[str, Any]:
        return (await self._request("GET", "/get_model_info", idempotent=True)).json()

    async def get_server_info(self) -> dict[str, Any]:
        return (await self._request("GET", "/get_server_info", idempotent=True)).json()

    async def get_weight_version(self) -> str:
        return str((await self._request("GET", "/get_weight_version", idempotent=True)).json()["weight_version"])


def _error_text(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text.strip()[:500]
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message"))
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])
    return json.dumps(body)[:500]


class SyncSGLangClient:
    """Blocking wrapper: each method runs the async client's coroutine on a private loop thread."""

    client_class: type[SGLangClient] = SGLangClient  # a subclass may wrap a richer async client

    def __init__(self, base_url: str, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="sglang-client-loop", daemon=True)
        self._thread.start()
        self._client = self._run(_make_client(self.client_class, base_url, kwargs))

    @property
    def base_url(self) -> str:
        return self._client.base_url

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def generate(self, body: dict[str, Any]) -> dict[str, Any] | list[dict[str, Any]]:
        return self._run(self._client.generate(body))

    def update_weights_from_disk(self, model_path: str, **kwargs: Any) -> dict[str, Any]:
        return self._run(self._client.update_weights_from_disk(model_path, **kwargs))

    def load_lora_adapter(self, lora_name: str, lora_path: str, **kwargs: Any) -> dict[str, Any]:
        return self._run(self._client.load_lora_adapter(lora_name, lora_path, **kwargs))

    def unload_lora_adapter(self, lora_name: str) -> dict[str, Any]:
        return self._run(self._client.unload_lora_adapter(lora_name))

    def pause_generation(self, mode: str | None = None) -> dict[str, Any]:
        return self._run(self._client.pause_generation(mode))

    def continue_generation(self) -> dict[str, Any]:
        return self._run(self._client.continue_generation())

    def abort_request(self, rid: str = "", abort_all: bool = False) -> None:
        return self._run(self._client.abort_request(rid, abort_all))

    def flush_cache(self, **kwargs: Any) -> None:
        return self._run(self._client.flush_cache(**kwargs))

    def wait_healthy(self, **kwargs: Any) -> None:
        return self._run(self._client.wait_healthy(**kwargs))

    def health(self) -> bool:
        return self._run(self._client.health())

    def get_model_info(self) -> dict[str, Any]:
        return self._run(self._client.get_model_info())

    def get_server_info(self) -> dict[str, Any]:
        return self._run(self._client.get_server_info())

    def get_weight_version(self) -> str:
        return self._run(self._client.get_weight_version())

    def close(self) -> None:
        if self._loop.is_running():
            self._run(self._client.aclose())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def __enter__(self) -> SyncSGLangClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


async def _make_client(cls: type[SGLangClient], base_url: str, kwargs: dict[str, Any]) -> SGLangClient:
    return cls(base_url, **kwargs)  # created on the loop thread that will use it
