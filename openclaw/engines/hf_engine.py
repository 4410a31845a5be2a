"""The embedded inference engine: transformers on CPU or GPU with continuous batching.

Scheduling (one background thread owns the model and every tensor) is in
`openclaw.engines.hf_scheduler`; the running batch, ONE left-padded KV cache whose decode step is
a single [B, 1] forward, in `openclaw.engines.hf_batch`. Why that layout on CPU: a single batched
matmul per layer is what makes batch 8 ~5x faster than batch 1 on two cores, and it is exactly
what `model.generate` does, so we pay no extra attention cost.

Log-probs follow SGLang (see `openclaw.engines.sampling`): temperature-scaled
`log_softmax`, no top-p/top-k truncation; raw `log_softmax` for greedy rows; prompt log-probs
(`logprob_start_len` >= 0) are raw. In fp32 with a fixed batch composition results are
bitwise deterministic; a request alone is deterministic regardless of what ran before it.

Per-request LoRA adapters (`load_lora_adapter`, a request's `lora_name`): each row of a batch is
served with its own adapter on top of the served model (openclaw.engines.lora_rows), so one server
decodes many users' adapters together; a request without one gets the served model itself.

Weight updates (`update_weights_from_disk`) load the new model in a worker thread while decoding
continues, then the scheduler swaps models between two steps. Requests in flight keep their KV
cache (computed by the old weights) and produce their remaining tokens with the new weights;
their result reports the `weight_version` current when they finished, and `TokenEvent`s do not
carry versions. RL callers that need single-version samples pause (or drain) first, as slime
does with SGLang.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path

import torch
from slime.utils.weight_sync import check_adapter_name

from openclaw.engines.base import EngineBase, FinishReason, GenerationRequest, GenerationResult, TokenEvent
from openclaw.engines.hf_batch import RunningBatch
from openclaw.engines.hf_jobs import Job, close_scheduler, queued_stream, run_control
from openclaw.engines.hf_scheduler import BatchScheduler
from openclaw.engines.lora_merge import BaseWeights, read_lora
from openclaw.engines.lora_rows import RowAdapters, check_fits
from openclaw.engines.prefix_cache import PrefixKVCache
from openclaw.engines.weights import (
    LoadedModel,
    is_adapter_folder,
    load_model,
    parse_dtype,
    resolve_adapter_base,
)
from openclaw.engines.work import EngineWork
from openclaw.environment import env_value

log = logging.getLogger(__name__)
# torch.Generator.manual_seed accepts exactly this range; anything else raises inside the batch loop.


# A chat's or an agent's whole prompt and reply (the OpenClaw CLI's trimmed 7,168-token prompt fits).
AUTO_PREFIX_CACHE_TOKENS = 8192
# Per-request adapters loaded at once: SmolLM2-135M's r16 all-linear adapter takes ~40 MB (its
# tensors and its slot in the stacks), so 64 users cost ~2.5 GB.
MAX_LORA_ADAPTERS = 64


def unloadable_message(model_path: str) -> str:
    """The one answer for a folder that cannot be loaded, whatever the reason: the reason (missing
    folder, unreadable file, bad config, other vocabulary) would tell a caller which paths exist."""
    return f"failed to load weights from {model_path}: not a loadable model or adapter folder (see the server log)"


class HFEngine(EngineBase, BatchScheduler):
    """Continuous-batching transformers engine implementing `openclaw.engines.base.Engine`."""

    # "pause": callers pause around a weight update (slime's RL sequence, single-version samples);
    # "live": a server answering users sets this so that the trainer's push does not pause it
    # (slime.utils.weight_sync reads it from /get_server_info). The swap itself is the same.
    weight_swap = "pause"
    backend = "hf"

    def __init__(self, model: torch.nn.Module, tokenizer, model_path: str, base_model_path: str,
                 device: str, dtype: torch.dtype, max_batch_size: int = 16,
                 original_logprobs: bool = False, served_model_name: str | None = None,
                 prefix_cache_tokens: int = 0, max_lora_adapters: int = MAX_LORA_ADAPTERS) -> None:
        if max_batch_size < 1:
            raise ValueError("max_batch_size must be >= 1")
        if prefix_cache_tokens < 0:
            raise ValueError(f"prefix_cache_tokens must be >= 0 (0: off), got {prefix_cache_tokens}")
        self._model = model
        self._tokenizer = tokenizer
        self._model_path = model_path
        self._base_model_path = base_model_path
        self._device = torch.device(device)
        self._dtype = dtype
        self.max_batch_size = max_batch_size
        self.original_logprobs = original_logprobs
        self.served_model_name = served_model_name or Path(model_path).name
        self._weight_version = 0
        cfg = model.config
        self._max_context_len = int(getattr(cfg, "max_position_embeddings", 0) or 2048)
        self._vocab_size = int(cfg.vocab_size)
        self._eos_ids = self._find_eos_ids(model, tokenizer)
        self._prefix_cache = PrefixKVCache(prefix_cache_tokens) if prefix_cache_tokens else None
        if self._prefix_cache is not None and _has_sliding_window(cfg):
            raise ValueError("the prefix cache reuses full-attention KV; this model has sliding-window layers "
                             "(run it with prefix_cache_tokens=0)")
        self.max_lora_adapters = max_lora_adapters
        self._loras = RowAdapters(dtype, self._device)
        self._lora_paths: dict[str, str] = {}  # written by the scheduler thread with the adapter it names
        self._flush_prefix_cache = False  # set by flush_cache, done by the scheduler before it admits again
        self._pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (min(self._eos_ids) if self._eos_ids else 0)
        # Scheduler state (scheduler thread only, except where guarded by _cond).
        self._cond = threading.Condition()
        self._inbox: deque[Job] = deque()
        self._controls: deque[tuple[Callable[[], object], concurrent.futures.Future]] = deque()
        self._paused = False
        self._closed = False
        self._batch = RunningBatch()
        self._admitting: list[Job] = []
        self._seed_rng = random.Random(int.from_bytes(os.urandom(8), "little"))
        self.steps = 0  # decode steps run (for tests/metrics)
        self.last_weight_update: dict[str, float] | None = None  # {"load_s", "pause_s", ...} of the last swap
        self.work = EngineWork()
        # Set while the served model is a full folder's weights plus in-memory LoRA merges only.
        self._lora_base = BaseWeights(base_model_path) if model_path == base_model_path else None
        self._push_lock = asyncio.Lock()  # one weight update at a time
        self._thread = threading.Thread(target=self._run, name="hf-engine-scheduler", daemon=True)
        self._thread.start()

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def load(cls, model_path: str | None = None, dtype: str = "float32", device: str | None = None,
             max_batch_size: int = 16, original_logprobs: bool | None = None,
             served_model_name: str | None = None, prefix_cache_tokens: int | None = 0,
             max_lora_adapters: int = MAX_LORA_ADAPTERS) -> HFEngine:
        """Load a full HF folder or PEFT adapter folder (None: the embedded SmolLM2).
        `prefix_cache_tokens` None: AUTO_PREFIX_CACHE_TOKENS, or off (with a warning) for a model with
        sliding-window layers, whose KV the cache cannot reuse."""
        from transformers import AutoTokenizer

        from openclaw.models import resolve_model_path

        path = str(resolve_model_path(model_path))
        dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch_dtype = parse_dtype(dtype)
        loaded = load_model(path, torch_dtype, dev)
        tokenizer = AutoTokenizer.from_pretrained(loaded.tokenizer_path)
        if prefix_cache_tokens is None:
            sliding = _has_sliding_window(loaded.model.config)
            if sliding:
                log.warning("prefix cache off: %s has sliding-window layers (the cache reuses full-attention KV)", path)
            prefix_cache_tokens = 0 if sliding else AUTO_PREFIX_CACHE_TOKENS
        if original_logprobs is None:
            original_logprobs = (env_value("SGLANG_RETURN_ORIGINAL_LOGPROB") or "").lower() in ("1", "true")
        return cls(loaded.model, tokenizer, path, loaded.base_model_path, dev, torch_dtype, max_batch_size,
                   original_logprobs, served_model_name, prefix_cache_tokens, max_lora_adapters)

    @staticmethod
    def _find_eos_ids(model, tokenizer) -> frozenset[int]:
        ids: set[int] = set()
        gen_cfg = getattr(model, "generation_config", None)
        for src in (getattr(gen_cfg, "eos_token_id", None), model.config.eos_token_id, tokenizer.eos_token_id):
            if isinstance(src, int):
                ids.add(src)
            elif isinstance(src, list | tuple):
                ids.update(int(i) for i in src)
        return frozenset(ids)

    # ---- properties beyond the Engine protocol's -----------------------------------------
    @property
    def base_model_path(self) -> str:
        return self._base_model_path

    @property
    def eos_token_ids(self) -> frozenset[int]:
        return self._eos_ids

    @property
    def device(self) -> torch.device:
        return self._device

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def is_paused(self) -> bool:
        return self._paused

    def num_pending(self) -> int:
        with self._cond:
            return len(self._all_jobs())

    # ---- Engine protocol: generation ----------------------------------------------------
    def validate(self, request: GenerationRequest) -> None:
        """Raise ValueError with a clear message for a request the engine cannot run."""
        self.check_request(request, self._vocab_size)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[TokenEvent | GenerationResult]:
        self.validate(request)
        job = Job(req=request, rid=request.request_id or uuid.uuid4().hex,
                  loop=asyncio.get_running_loop(), queue=asyncio.Queue())
        async with aclosing(queued_stream(self, job)) as items:
            async for item in items:
                yield item

    # ---- Engine protocol: control -------------------------------------------------------
    async def update_weights_from_disk(self, model_path: str, weight_version: int | None = None) -> tuple[bool, str]:
        """Load a full folder or PEFT adapter (merged) and swap it in between two decode steps."""
        async with self._push_lock:
            return await self._update_weights(model_path, weight_version)

    def _load_for_swap(self, model_path: str) -> tuple[LoadedModel, bool]:
        """The model to swap in, and whether it was merged in memory (a plain LoRA adapter on the
        served base: lora_merge.py) rather than loaded from disk."""
        base = self._lora_base
        if base is not None and is_adapter_folder(model_path):
            same_base = Path(resolve_adapter_base(Path(model_path), base.base_path)).resolve() == Path(base.base_path).resolve()
            layers = read_lora(model_path) if same_base else None
            model = base.merged_copy(self._model, layers) if layers is not None else None
            if model is not None:
                return LoadedModel(model=model, tokenizer_path=base.base_path, base_model_path=base.base_path), True
        return load_model(model_path, self._dtype, str(self._device), self._base_model_path), False

    async def _update_weights(self, model_path: str, weight_version: int | None) -> tuple[bool, str]:
        start = time.perf_counter()
        try:
            loaded, merged = await asyncio.to_thread(self._load_for_swap, model_path)
        except Exception:  # noqa: BLE001 - reported to the caller, engine keeps serving
            log.warning("update_weights_from_disk(%r) failed", model_path, exc_info=True)
            return False, unloadable_message(model_path)
        old_vocab = self._vocab_size
        new_vocab = int(loaded.model.config.vocab_size)
        if new_vocab != old_vocab:
            log.warning("update_weights_from_disk(%r) refused: vocab size %d, serving %d", model_path, new_vocab,
                        old_vocab)
            return False, unloadable_message(model_path)

        loaded_s = time.perf_counter() - start

        retired: list[torch.nn.Module] = []

        def swap() -> tuple[int, float]:
            # Runs on the scheduler thread between two decode steps: the only time decoding stops.
            t0 = time.perf_counter()
            retired.append(self._model)  # freed below, off the scheduler thread (~0.1 s for 135M fp32)
            self._model = loaded.model
            self._loras.install(self._model)  # the users' adapters apply on top of the new served model
            self._model_path = str(model_path)
            if not is_adapter_folder(model_path):
                self._base_model_path = loaded.base_model_path
                self._lora_base = BaseWeights(loaded.base_model_path)  # the new full weights are the base now
            elif not merged:  # merged from disk: the base values of its layers are not kept
                self._lora_base = None
            self._weight_version = weight_version if weight_version is not None else self._weight_version + 1
            if self._prefix_cache is not None:  # its KV came from the old weights
                self._prefix_cache.clear()
            return self._weight_version, time.perf_counter() - t0

        version, paused = await self._control(swap)
        await asyncio.to_thread(retired.clear)
        took = time.perf_counter() - start
        self.last_weight_update = {"weight_version": version, "load_s": loaded_s, "pause_s": paused, "total_s": took,
                                   "merged_in_memory": merged}
        self.work.weight_loads += 1
        self.work.weight_loads_merged_in_memory += int(merged)
        self.work.weight_load_s += took
        return True, (f"Succeeded to update model weights from {model_path} (weight_version={version}, {took:.2f}s; "
                      f"decoding paused {paused * 1000:.1f} ms).")

    @property
    def lora_adapters(self) -> dict[str, int]:
        return self._loras.versions

    @property
    def lora_adapter_paths(self) -> dict[str, str]:
        return dict(self._lora_paths)

    @property
    def lora_adapter_bytes(self) -> int:
        """Memory the loaded adapters take (their tensors and the stacks a batch reads)."""
        return self._loras.nbytes()

    async def load_lora_adapter(self, name: str, path: str, weight_version: int | None = None) -> tuple[bool, str]:
        """Load a plain PEFT LoRA folder (linear layers; no DoRA, no modules saved whole) trained on
        the served base as adapter `name`; it replaces a loaded one of that name between two steps."""
        problem = check_adapter_name(name)
        if problem:
            return False, f"lora_name {problem}"
        async with self._push_lock:
            if name not in self._loras.versions and len(self._loras.versions) >= self.max_lora_adapters:
                return False, (f"{self.max_lora_adapters} LoRA adapters are loaded (the engine's max_lora_adapters): "
                               "unload one first")
            try:
                layers = await asyncio.to_thread(self._read_adapter, path)
            except Exception as exc:  # noqa: BLE001 - reported to the caller, engine keeps serving
                log.warning("load_lora_adapter(%r, %r) failed: %s", name, path, exc)
                return False, f"failed to load LoRA adapter {name!r} from {path}: {exc}"
            start = time.perf_counter()

            def put() -> int:
                old = self._loras.versions.get(name)
                version = weight_version if weight_version is not None else (0 if old is None else old + 1)
                self._loras.put(name, layers, version, self._model)
                self._lora_paths[name] = str(path)
                if self._prefix_cache is not None:  # its KV came from the replaced adapter
                    self._prefix_cache.clear_space(name)
                return version

            version = await self._control(put)
        return True, (f"Succeeded to load LoRA adapter {name!r} from {path} (version {version}, "
                      f"{time.perf_counter() - start:.2f}s).")

    def _read_adapter(self, path: str):
        folder = Path(path)
        if not is_adapter_folder(folder):
            raise ValueError("not a PEFT adapter folder (no adapter_config.json)")
        base = Path(resolve_adapter_base(folder, self._base_model_path)).resolve()
        if base != Path(self._base_model_path).resolve():
            raise ValueError(f"the adapter was trained on {base}, this engine serves {self._base_model_path}")
        layers = read_lora(folder)
        if layers is None:
            raise ValueError("only plain LoRA adapters (linear layers; no DoRA, bias or modules saved whole) are "
                             "served per request")
        problem = check_fits(self._model, layers)
        if problem:
            raise ValueError(problem)
        return layers

    async def unload_lora_adapter(self, name: str) -> tuple[bool, str]:
        """Unload `name`; its requests still running finish now with finish_reason abort."""
        async with self._push_lock:
            if name not in self._loras.versions:
                return False, f"LoRA adapter {name!r} is not loaded"

            def remove() -> int:
                with self._cond:
                    jobs = [j for j in self._all_jobs() if j.req.lora_name == name and not j.done]
                    for job in jobs:
                        job.cancelled = True
                        job.finish = FinishReason("abort", f"LoRA adapter {name!r} was unloaded")
                self._drop_cancelled_rows()
                self._loras.remove(name, self._model)
                self._lora_paths.pop(name, None)
                if self._prefix_cache is not None:
                    self._prefix_cache.clear_space(name)
                return len(jobs)

            aborted = await self._control(remove)
        return True, f"Succeeded to unload LoRA adapter {name!r} ({aborted} running requests aborted)."

    async def pause_generation(self, abort: bool = False) -> None:
        """Stop running decode steps and admitting requests; with abort=True, in-flight requests
        finish now with finish_reason abort (SGLang's `mode="abort"`)."""
        with self._cond:
            self._paused = True
            if abort:
                for job in self._all_jobs():
                    if not job.done and job.finish is None:
                        job.cancelled = True
                        job.finish = FinishReason("abort", "paused with mode=abort")
            self._cond.notify()
        if abort:
            await self._control(lambda: None)  # wait until the aborted rows are flushed out

    def abort(self, rid: str | None = None, abort_all: bool = False) -> int:
        """Finish matching requests now with finish_reason abort (their callers get a result)."""
        n = 0
        with self._cond:
            for job in self._all_jobs():
                if not job.done and job.finish is None and (abort_all or job.rid == rid):
                    job.cancelled = True
                    job.finish = FinishReason("abort", "aborted by request")
                    n += 1
            self._cond.notify()
        return n

    async def continue_generation(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify()

    def flush_cache(self) -> bool:
        """SGLang's contract: refuse (callers retry) while requests are being generated.

        The only KV kept across requests is the prefix cache, which a weight swap already clears;
        a flush empties it before any later request is admitted. While paused nothing is admitted,
        so the flush succeeds even with requests parked in place (this keeps slime's pause ->
        update -> flush -> continue sequence from stalling behind a live chat request)."""
        with self._cond:
            ok = self._paused or not (self._inbox or self._admitting or self._batch.rows)
            if ok and self._prefix_cache is not None:
                self._flush_prefix_cache = True
                self._cond.notify()
            return ok

    @property
    def prefix_cache_stats(self) -> dict[str, float] | None:
        """Lookups, hits and prompt tokens whose forward was skipped (None: the cache is off)."""
        if self._prefix_cache is None:
            return None
        return {**self._prefix_cache.stats.as_dict(), "cached_tokens": self._prefix_cache.tokens}

    async def shutdown(self) -> None:
        await close_scheduler(self)

    async def _control(self, fn: Callable[[], object]):
        return await run_control(self, fn)


def _has_sliding_window(config) -> bool:
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    layer_types = getattr(text, "layer_types", None) or ()
    return "sliding_attention" in layer_types or bool(getattr(text, "use_sliding_window", False))
