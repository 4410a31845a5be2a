"""Remote engines behind the `Engine` protocol: SGLang (launched here or attached by URL) and
vLLM (attach only).

SGLang is launched as `python -m sglang.launch_server ...` (a subprocess this object owns and
stops by PID) or attached to a running server / `sglang_router` by URL. All traffic goes through
`openclaw.engines.sglang_client`, the same client the trainer uses, so the embedded engine's
SGLang endpoints (`python -m openclaw.engines.serve`) stand in for SGLang in CI.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import re
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import httpx
from slime.rollout.sglang_command import (  # noqa: F401 - re-exported: the launch helpers live in the trainer
    SGLangLaunchConfig,
    build_router_command,
    build_sglang_launch_command,
)
from slime.utils.weight_sync import adapter_versions, check_adapter_name

from openclaw.engines.base import EngineBase, FinishReason, GenerationRequest, GenerationResult, TokenEvent
from openclaw.engines.sglang_client import SGLangClient, SGLangClientError
from openclaw.engines.sglang_protocol import finish_reason_from_sglang, request_to_body, result_from_sglang
from openclaw.proctree import stop_started_group

# SGLang's scheduler and detokenizer get this long after SIGTERM to their group, then SIGKILL.
STOP_GRACE_S = 30.0

# How SGLang words a LoRA request to a server launched without --enable-lora
# ("LoRA is not enabled. Please set `--enable-lora` to enable LoRA.").
_LORA_DISABLED = re.compile(r"enable[-_]lora|lora is not enabled", re.IGNORECASE)

T = TypeVar("T")


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run here; the message says what is needed."""


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class SGLangEngine(EngineBase):
    """`Engine` over an SGLang-compatible HTTP server (SGLang, sglang_router, or our serve module)."""

    backend = "sglang"

    def __init__(self, base_url: str, *, tokenizer, model_path: str, max_context_len: int,
                 weight_version: int = 0, process: subprocess.Popen | None = None, log_path: str | None = None,
                 timeout: float = 600.0, served_model_name: str | None = None, accepts_images: bool = False,
                 versions_adapters: bool = False, lora_adapters: dict[str, int] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        # The server serves a model that takes images (SGLang's `has_image_understanding`): requests
        # may carry `image_data` (openclaw.server.multimodal decides per request).
        self.accepts_images = accepts_images
        # The server versions its LoRA adapters itself (the embedded engine's endpoints: its
        # /get_server_info lists `lora_adapters`, a load takes `weight_version` and replaces a loaded
        # name, an answer carries the adapter's version). SGLang does none of that.
        self.versions_adapters = versions_adapters
        # The adapters this engine knows the server serves (name -> version): a request naming any
        # other is refused here, since a server might answer it with the base model.
        self._adapters: dict[str, int] = dict(lora_adapters or {})
        self._adapter_paths: dict[str, str] = {}  # of the adapters loaded through this engine
        self._lora_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._init_base(model_path, tokenizer, max_context_len, weight_version)
        self._process = process
        self.log_path = log_path
        self._timeout = timeout
        self.served_model_name = served_model_name
        self._clients: dict[asyncio.AbstractEventLoop, SGLangClient] = {}
        self._in_flight = 0
        self._paused = False

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def attach(cls, url: str, model_path: str | None = None, timeout: float = 600.0,
               health_timeout: float = 60.0, served_model_name: str | None = None, **_: Any) -> SGLangEngine:
        """Use an SGLang server (or router) that is already running at `url`."""
        from transformers import AutoTokenizer

        base = url.rstrip("/")
        deadline = time.monotonic() + health_timeout
        last = ""
        while True:
            try:
                info = httpx.get(base + "/get_model_info", timeout=10).json()
                break
            except (httpx.HTTPError, ValueError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                raise SGLangClientError(f"no SGLang server answers at {base}/get_model_info ({last})", url=base)
            time.sleep(0.5)
        try:
            server_info = httpx.get(base + "/get_server_info", timeout=10).json()
        except (httpx.HTTPError, ValueError):
            server_info = {}
        path = model_path or info.get("tokenizer_path") or info.get("model_path")
        tokenizer = AutoTokenizer.from_pretrained(path)
        ctx = int(server_info.get("context_length") or info.get("max_context_length")
                  or getattr(tokenizer, "model_max_length", 0) or 4096)
        if ctx > 10**7:  # tokenizers without a limit report a huge sentinel
            ctx = 4096
        version = _int_version(info.get("weight_version"))
        adapters = _served_adapter_versions(server_info, base)
        return cls(base, tokenizer=tokenizer, model_path=str(path), max_context_len=ctx, weight_version=version,
                   timeout=timeout, served_model_name=served_model_name or info.get("served_model_name"),
                   accepts_images=info.get("has_image_understanding") is True,
                   versions_adapters=adapters is not None, lora_adapters=adapters)

    @classmethod
    def launch(cls, cfg: SGLangLaunchConfig, *, startup_timeout: float = 900.0,
               launch_command: list[str] | None = None, env: dict[str, str] | None = None) -> SGLangEngine:
        """Start `python -m sglang.launch_server` (or `launch_command`) and attach to it.

        The process runs in its own session and is stopped (by PID/process group) on shutdown or
        when startup fails. Its output goes to a log file whose path is in the error message.
        """
        cmd = launch_command or build_sglang_launch_command(cfg)
        if launch_command is None and importlib.util.find_spec("sglang") is None:
            raise BackendUnavailable(
                "SGLang is not installed in this Python: install the GPU extras "
                "(pip install -r requirements-gpu.txt, needs CUDA GPUs), or attach to a running "
                "SGLang server with --engine-url http://HOST:PORT, or use --backend hf")
        log = tempfile.NamedTemporaryFile(prefix="sglang-", suffix=".log", delete=False)  # noqa: SIM115
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        url = f"http://{cfg.host}:{cfg.port}"
        deadline = time.monotonic() + startup_timeout
        try:
            while True:
                if proc.poll() is not None:
                    raise BackendUnavailable(f"SGLang exited with code {proc.returncode} during startup; "
                                             f"log: {log.name}\n{_tail(log.name)}")
                try:
                    if httpx.get(url + "/health", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise BackendUnavailable(f"SGLang did not become healthy at {url} within {startup_timeout}s; "
                                             f"log: {log.name}\n{_tail(log.name)}")
                time.sleep(0.5)
            engine = cls.attach(url, model_path=cfg.model_path, served_model_name=cfg.served_model_name)
        except BaseException:
            stop_started_group(proc, grace_s=STOP_GRACE_S)
            raise
        engine._process = proc
        engine.log_path = log.name
        return engine

    # ---- Engine protocol ----------------------------------------------------------------
    @property
    def is_paused(self) -> bool:
        return self._paused

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def num_pending(self) -> int:
        return self._in_flight

    def _client(self) -> SGLangClient:
        return _for_this_loop(self._clients, lambda: SGLangClient(self.base_url, timeout=self._timeout))

    def _lora_lock(self) -> asyncio.Lock:
        """Serialises this loop's adapter loads and unloads: on SGLang a replacement is an unload
        and then a load, which another load of the name must not interleave with."""
        return _for_this_loop(self._lora_locks, asyncio.Lock)

    def validate(self, request: GenerationRequest) -> None:
        self.check_prompt_fits(request)
        self.check_lora_name(request)
        if request.params.max_new_tokens < 0:
            raise ValueError("max_new_tokens must be >= 0")
        if request.image_data and not self.accepts_images:
            raise ValueError(f"the model served at {self.base_url} does not take images "
                             "(its /get_model_info reports no has_image_understanding)")

    async def stream(self, request: GenerationRequest) -> AsyncIterator[TokenEvent | GenerationResult]:
        """Stream via SSE; SGLang chunks carry cumulative (or, with incremental output,
        incremental) text/ids — both are handled."""
        self.validate(request)
        adapter_version = self._adapter_version(request)
        self._in_flight += 1
        ids: list[int] = []
        lps: list[float] = []
        tops: list[tuple[tuple[int, float], ...]] = []
        text = ""
        try:
            async for chunk in self._client().generate_stream(request_to_body(request)):
                meta = chunk.get("meta_info") or {}
                total = int(meta.get("completion_tokens", len(ids)))
                chunk_ids = list(chunk.get("output_ids") or [])
                new_ids = chunk_ids[len(ids):] if len(chunk_ids) == total else chunk_ids
                chunk_text = chunk.get("text", "")
                delta = chunk_text[len(text):] if chunk_text.startswith(text) else chunk_text
                c_lps = meta.get("output_token_logprobs") or []
                new_lps = c_lps[len(lps):] if len(c_lps) == total else c_lps
                c_tops = meta.get("output_top_logprobs") or []
                new_tops = c_tops[len(tops):] if len(c_tops) == total else c_tops
                for i, tid in enumerate(new_ids):
                    lp = float(new_lps[i][0]) if i < len(new_lps) and request.return_logprob else None
                    top = tuple((int(e[1]), float(e[0])) for e in (new_tops[i] or ())) if i < len(new_tops) else ()
                    ids.append(int(tid))
                    if lp is not None:
                        lps.append(lp)
                        tops.append(top)
                    yield TokenEvent(token_id=int(tid), logprob=lp, top_logprobs=top,
                                     text_delta=delta if i == len(new_ids) - 1 else "")
                if not new_ids and delta:
                    yield TokenEvent(token_id=ids[-1] if ids else -1, logprob=None, text_delta=delta)
                text += delta
                if meta.get("finish_reason") is not None:
                    reported = _int_version(meta.get("weight_version"), self._weight_version)
                    if request.lora_name is None:
                        self._weight_version = reported
                    in_lps = meta.get("input_token_logprobs") or []
                    yield GenerationResult(
                        request_id=str(meta.get("id", request.request_id or "")), prompt_ids=tuple(request.input_ids),
                        output_ids=tuple(ids), text=text, output_logprobs=tuple(lps) if request.return_logprob else (),
                        output_top_logprobs=tuple(tops) if request.top_logprobs_num else (),
                        input_logprobs=tuple(None if e[0] is None else float(e[0]) for e in in_lps),
                        finish_reason=finish_reason_from_sglang(meta.get("finish_reason")),
                        weight_version=self._served_version(adapter_version, reported))
                    return
            raise SGLangClientError(f"{self.base_url}/generate stream ended without a finish_reason", url=self.base_url)
        finally:
            self._in_flight -= 1

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        self.validate(request)
        adapter_version = self._adapter_version(request)
        self._in_flight += 1
        try:
            out = await self._client().generate(request_to_body(request))
        finally:
            self._in_flight -= 1
        result = result_from_sglang(out, tuple(request.input_ids))
        if request.lora_name is None:
            self._weight_version = max(self._weight_version, result.weight_version)
            return result
        return dataclasses.replace(result, weight_version=self._served_version(adapter_version, result.weight_version))

    def _adapter_version(self, request: GenerationRequest) -> int | None:
        """The version of the adapter a validated request names as it is sent (None: the base)."""
        return None if request.lora_name is None else self._adapters[request.lora_name]

    def _served_version(self, adapter_version: int | None, reported: int) -> int:
        """The version that served a finished request. The server's answer says it for a base request,
        and for a named one on a server that versions its adapters (it may replace one between two
        steps of a running request). SGLang reports only its base's version; there the adapter's
        version when the request was sent is the one that served it: a replacement unloads the name
        first (SGLang's unload waits for the requests using it) and, until the new load succeeds,
        this engine refuses requests naming it."""
        return reported if adapter_version is None or self.versions_adapters else adapter_version

    # ---- per-request LoRA adapters ------------------------------------------------------
    @property
    def lora_adapters(self) -> dict[str, int]:
        """The loaded adapters' names and versions (a copy: it changes only through load/unload)."""
        return dict(self._adapters)

    @property
    def lora_adapter_paths(self) -> dict[str, str]:
        return {n: p for n, p in self._adapter_paths.items() if n in self._adapters}

    async def load_lora_adapter(self, name: str, path: str, weight_version: int | None = None) -> tuple[bool, str]:
        """POST /load_lora_adapter. SGLang refuses a name it serves, so there a loaded name is unloaded
        first; if the new folder is then refused, the name is no longer served and leaves the map
        (the message says so). Any other failure leaves the map as it was."""
        problem = _lora_args_problem(name, path, weight_version)
        if problem:
            return False, problem
        async with self._lora_lock():
            previous = self._adapters.get(name)
            version = weight_version if weight_version is not None else (0 if previous is None else previous + 1)
            unloaded = False
            try:
                if self.versions_adapters:
                    await self._client().load_lora_adapter(name, path, weight_version=version)
                else:
                    if previous is not None:
                        await self._client().unload_lora_adapter(name)
                        del self._adapters[name]
                        unloaded = True
                    await self._client().load_lora_adapter(name, path)
            except SGLangClientError as exc:
                message = self._lora_failure(exc)
                if unloaded:
                    message += (f" (the previous adapter {name!r} was unloaded to replace it: requests naming "
                                "it are refused until a load succeeds)")
                return False, message
            self._adapters[name] = version
            self._adapter_paths[name] = path
        return True, f"LoRA adapter {name!r} loaded from {path} (version {version})"

    async def unload_lora_adapter(self, name: str) -> tuple[bool, str]:
        """POST /unload_lora_adapter; the name leaves the map only when the server unloaded it."""
        if not isinstance(name, str) or not name:
            return False, "lora_name must be a non-empty string"
        async with self._lora_lock():
            try:
                await self._client().unload_lora_adapter(name)
            except SGLangClientError as exc:
                return False, self._lora_failure(exc)
            self._adapters.pop(name, None)
        return True, f"LoRA adapter {name!r} unloaded"

    def _lora_failure(self, exc: SGLangClientError) -> str:
        """The client's message (it names the call, the server and the server's reason), with what to
        do where the server cannot serve adapters at all."""
        text = str(exc)
        if exc.status == 404:
            return (f"{text}: {self.base_url} has no such endpoint; per-request LoRA adapters need an SGLang "
                    "release with dynamic LoRA loading, launched with --enable-lora")
        if _LORA_DISABLED.search(text):
            return (f"{text}: launch SGLang with --enable-lora (and --max-lora-rank / --lora-target-modules "
                    "covering the adapters it will load) to serve per-request LoRA adapters")
        return text

    async def update_weights_from_disk(self, model_path: str, weight_version: int | None = None) -> tuple[bool, str]:
        target = weight_version if weight_version is not None else self._weight_version + 1
        try:
            out = await self._client().update_weights_from_disk(model_path, weight_version=target)
        except SGLangClientError as exc:
            return False, str(exc)
        self._weight_version = target
        return True, str(out.get("message", ""))

    async def pause_generation(self, abort: bool = False) -> None:
        await self._client().pause_generation("abort" if abort else "in_place")
        self._paused = True

    async def continue_generation(self) -> None:
        await self._client().continue_generation()
        self._paused = False

    async def flush_cache(self) -> bool:
        try:
            await self._client().flush_cache(deadline_s=0)
            return True
        except SGLangClientError:
            return False

    async def abort(self, rid: str | None = None, abort_all: bool = False) -> int:
        await self._client().abort_request(rid or "", abort_all)
        return 0

    async def shutdown(self) -> None:
        for client in list(self._clients.values()):
            try:
                await client.aclose()
            except RuntimeError:  # its loop is gone
                pass
        self._clients.clear()
        if self._process is not None:
            await asyncio.to_thread(stop_started_group, self._process, STOP_GRACE_S)
            self._process = None


def _for_this_loop(store: dict[asyncio.AbstractEventLoop, T], make: Callable[[], T]) -> T:
    """The running loop's entry in `store`, made on first use: httpx clients and asyncio locks are
    bound to one loop, and callers drive this engine from several (entries of closed loops go)."""
    loop = asyncio.get_running_loop()
    item = store.get(loop)
    if item is None:
        for old in [lp for lp in store if lp.is_closed()]:
            del store[old]
        item = store[loop] = make()
    return item


def _served_adapter_versions(server_info: dict[str, Any], url: str) -> dict[str, int] | None:
    """The adapters a server versions itself, from its /get_server_info (`lora_adapters`, name ->
    version: the embedded engine's endpoints), or None for SGLang, whose one weight_version is its
    base's. Read by the trainer's reader (one rule for both sides); a list this engine cannot read
    is an error naming the server, not an empty one."""
    try:
        return adapter_versions(server_info)
    except ValueError as exc:
        raise SGLangClientError(f"{url}: {exc}", url=url) from exc


def _lora_args_problem(name: Any, path: Any, weight_version: Any) -> str | None:
    """What is wrong with a load's arguments (None: nothing), caught before a request is sent."""
    name_problem = check_adapter_name(name)
    if name_problem:
        return f"lora_name {name_problem}"
    if not isinstance(path, str) or not path:
        return "lora_path must be a non-empty path to a PEFT adapter folder"
    if weight_version is not None and (isinstance(weight_version, bool) or not isinstance(weight_version, int)):
        return f"weight_version must be an integer, got {weight_version!r}"
    return None


def _int_version(v: Any, default: int = 0) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _tail(path: str, n: int = 4000) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def load_engine(backend: str = "sglang", model_path: str | None = None, url: str | None = None,
                dtype: str | None = None, tp_size: int = 1, mem_fraction_static: float | None = None,
                context_length: int | None = None, reasoning_parser: str | None = None,
                tool_call_parser: str | None = None, served_model_name: str | None = None,
                host: str = "127.0.0.1", port: int | None = None, extra_args: Sequence[str] = (),
                startup_timeout: float = 900.0, **_: Any):
    """Engine for `--backend sglang|vllm` (what `python -m openclaw.server` calls)."""
    if backend == "vllm":
        if not url:
            raise BackendUnavailable(
                "--backend vllm attaches to a running vLLM OpenAI-compatible server: start one with "
                "`vllm serve MODEL` (vllm is not installed here) and pass --engine-url http://HOST:PORT")
        from openclaw.engines.vllm_backend import VLLMEngine

        return VLLMEngine.attach(url, model_path=model_path, served_model_name=served_model_name)
    if backend != "sglang":
        raise ValueError(f"unknown remote backend {backend!r}; choose sglang or vllm")
    if url:
        return SGLangEngine.attach(url, model_path=model_path, served_model_name=served_model_name)
    from openclaw.models import resolve_model_path

    cfg = SGLangLaunchConfig(model_path=str(resolve_model_path(model_path)), host=host, port=port or _free_port(host),
                             tp_size=tp_size, mem_fraction_static=mem_fraction_static,
                             context_length=context_length, reasoning_parser=reasoning_parser,
                             tool_call_parser=tool_call_parser, served_model_name=served_model_name, dtype=dtype,
                             extra_args=tuple(extra_args))
    return SGLangEngine.launch(cfg, startup_timeout=startup_timeout)


__all__ = ["BackendUnavailable", "FinishReason", "SGLangEngine", "SGLangLaunchConfig", "build_router_command",
           "build_sglang_launch_command", "load_engine"]
