"""Remote engines behind the `Engine` protocol: SGLang (launched here or attached by URL) and
vLLM (attach only).

SGLang is launched as `python -m sglang.launch_server ...` (a subprocess this object owns and
stops by PID) or attached to a running server / `sglang_router` by URL. All traffic goes through
`openclaw.engines.sglang_client`, the same client the trainer uses, so the embedded engine's
SGLang endpoints (`python -m openclaw.engines.serve`) stand in for SGLang in CI.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
from slime.rollout.sglang_command import (  # noqa: F401 - re-exported: the launch helpers live in the trainer
    SGLangLaunchConfig,
    build_router_command,
    build_sglang_launch_command,
)

from openclaw.engines.base import EngineBase, FinishReason, GenerationRequest, GenerationResult, TokenEvent
from openclaw.engines.sglang_client import SGLangClient, SGLangClientError
from openclaw.engines.sglang_protocol import finish_reason_from_sglang, request_to_body, result_from_sglang
from openclaw.proctree import stop_started_group

# SGLang's scheduler and detokenizer get this long after SIGTERM to their group, then SIGKILL.
STOP_GRACE_S = 30.0


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
                 timeout: float = 600.0, served_model_name: str | None = None, accepts_images: bool = False) -> None:
        self.base_url = base_url.rstrip("/")
        # The server serves a model that takes images (SGLang's `has_image_understanding`): requests
        # may carry `image_data` (openclaw.server.multimodal decides per request).
        self.accepts_images = accepts_images
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
        return cls(base, tokenizer=tokenizer, model_path=str(path), max_context_len=ctx, weight_version=version,
                   timeout=timeout, served_model_name=served_model_name or info.get("served_model_name"),
                   accepts_images=info.get("has_image_understanding") is True)

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
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for old in [lp for lp in self._clients if lp.is_closed()]:
                del self._clients[old]
            client = self._clients[loop] = SGLangClient(self.base_url, timeout=self._timeout)
        return client

    def validate(self, request: GenerationRequest) -> None:
        self.check_prompt_fits(request)
        if request.params.max_new_tokens < 0:
            raise ValueError("max_new_tokens must be >= 0")
        if request.image_data and not self.accepts_images:
            raise ValueError(f"the model served at {self.base_url} does not take images "
                             "(its /get_model_info reports no has_image_understanding)")

    async def stream(self, request: GenerationRequest) -> AsyncIterator[TokenEvent | GenerationResult]:
        """Stream via SSE; SGLang chunks carry cumulative (or, with incremental output,
        incremental) text/ids — both are handled."""
        self.validate(request)
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
                    self._weight_version = _int_version(meta.get("weight_version"), self._weight_version)
                    in_lps = meta.get("input_token_logprobs") or []
                    yield GenerationResult(
                        request_id=str(meta.get("id", request.request_id or "")), prompt_ids=tuple(request.input_ids),
                        output_ids=tuple(ids), text=text, output_logprobs=tuple(lps) if request.return_logprob else (),
                        output_top_logprobs=tuple(tops) if request.top_logprobs_num else (),
                        input_logprobs=tuple(None if e[0] is None else float(e[0]) for e in in_lps),
                        finish_reason=finish_reason_from_sglang(meta.get("finish_reason")),
                        weight_version=self._weight_version)
                    return
            raise SGLangClientError(f"{self.base_url}/generate stream ended without a finish_reason", url=self.base_url)
        finally:
            self._in_flight -= 1

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        self.validate(request)
        self._in_flight += 1
        try:
            out = await self._client().generate(request_to_body(request))
        finally:
            self._in_flight -= 1
        result = result_from_sglang(out, tuple(request.input_ids))
        self._weight_version = max(self._weight_version, result.weight_version)
        return result

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
