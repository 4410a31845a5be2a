"""The llama.cpp engine: the embedded model's own 4-bit GGUF served by llama.cpp on CPU.

Token ids in, token ids + log-probs out, like `HFEngine`, with the same request semantics (stop
strings and ids, seeds, SGLang log-probs, streaming text deltas, pause/continue/abort). Ids are the
HF tokenizer's (the embedded model folder's); at start the engine checks that llama.cpp's own
vocabulary tokenizes a sample of texts identically and refuses to start otherwise, because the
ids it is given go straight into the GGUF's embedding table.

Concurrent requests share one `llama_decode` per step (one KV sequence per request: see
`openclaw.engines.llamacpp_scheduler` and `openclaw.engines.llamacpp_runtime`). With
`prefix_reuse` (the default) a finished request's KV stays in its slot and a later request that
starts with its tokens decodes only the rest (`prefix_cache_stats` counts the reuse).

Weights: the base GGUF is fixed. `update_weights_from_disk` takes a PEFT LoRA adapter folder (what
the trainer pushes), converts it to a GGUF LoRA (`openclaw.engines.llamacpp_lora`) in a worker
thread and swaps it in between two decode steps; each push replaces the previous adapter. In-flight
requests keep their KV cache and finish with the new adapter, as with `HFEngine`; KV kept from
finished requests is dropped (the new adapter would compute other keys and values). A full HF folder
cannot be served (it would need a GGUF conversion and quantization) and is refused.

The served model is the Q4_1 GGUF (plus the adapter), not the fp32 model the trainer holds, so its
log-probs differ from the trainer's by the quantization error (bench/serve_vs_llamacpp.py, the
`--logprob-replies` report, measures the mean |delta log p|).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import random
import tempfile
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any

from openclaw.engines.base import EngineBase, FinishReason, GenerationRequest, GenerationResult, TokenEvent
from openclaw.engines.hf_jobs import close_scheduler, queued_stream, run_control
from openclaw.engines.llamacpp_lora import HeadLayout, write_gguf_lora
from openclaw.engines.llamacpp_runtime import LlamaRuntime, RuntimeConfig, default_threads
from openclaw.engines.llamacpp_scheduler import SlotJob, SlotScheduler
from openclaw.engines.prefix_cache import PrefixCacheStats
from openclaw.engines.weights import is_adapter_folder

log = logging.getLogger(__name__)
# Texts whose tokenization must agree between the HF tokenizer and llama.cpp's vocabulary: plain
# prose, whitespace runs, digits, code, non-Latin scripts, emoji, and the chat template's specials.
VOCAB_SAMPLES = (
    "Hello, world! How are you today?",
    "  leading spaces\tand\ttabs\n\nnew lines   ",
    "The year 2024 had 366 days; 3.14159 is pi, 1,000,000 is a million.",
    "def f(x):\n    return {'a': [x ** 2 for x in range(10)]}  # comment",
    "Größe, naïve café, Ελληνικά, русский, 日本語のテキスト, 中文, العربية",
    "emoji 🤖🎉 and symbols ©®™ ← → ∑ ∞",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
)


def load_failed_message(model_path: str) -> str:
    """One answer for every failed push, whatever the reason (logged): the reason would tell a
    caller which paths exist."""
    return (f"failed to load weights from {model_path}: not a loadable PEFT LoRA adapter folder (the llama.cpp "
            "engine serves a fixed GGUF and applies LoRA adapters only; see the server log)")


def check_vocab(tokenizer: Any, rt: LlamaRuntime, vocab_size: int) -> None:
    """Refuse to serve when llama.cpp's vocabulary is not the HF tokenizer's."""
    if rt.n_vocab != vocab_size:
        raise ValueError(f"the GGUF has {rt.n_vocab} tokens, the HF model {vocab_size}: not the same vocabulary")
    for text in VOCAB_SAMPLES:
        ours = tokenizer.encode(text, add_special_tokens=False)
        theirs = rt.tokenize(text)
        if ours != theirs:
            raise ValueError(f"the HF tokenizer and llama.cpp's vocabulary tokenize {text!r} differently "
                             f"({ours[:12]} vs {theirs[:12]}): refusing to serve token ids into the wrong embeddings")


def _eos_ids(folder: str, tokenizer: Any) -> frozenset[int]:
    from transformers import AutoConfig, GenerationConfig

    ids: set[int] = set()
    sources = [AutoConfig.from_pretrained(folder).eos_token_id, tokenizer.eos_token_id]
    if (Path(folder) / "generation_config.json").is_file():
        sources.append(GenerationConfig.from_pretrained(folder).eos_token_id)
    for src in sources:
        if isinstance(src, int):
            ids.add(src)
        elif isinstance(src, list | tuple):
            ids.update(int(i) for i in src)
    return frozenset(ids)


class LlamaCppEngine(EngineBase, SlotScheduler):
    """A GGUF model served by llama.cpp, implementing `openclaw.engines.base.Engine`."""

    weight_swap = "pause"  # the chat server may set "live" (see HFEngine.weight_swap)
    backend = "llamacpp"

    def __init__(self, rt: LlamaRuntime, tokenizer: Any, hf_folder: str, gguf_path: str,
                 eos_ids: frozenset[int], original_logprobs: bool = False,
                 served_model_name: str | None = None, prefix_reuse: bool = True) -> None:
        self._init_base(hf_folder, tokenizer, min(rt.ctx_per_slot, rt.n_ctx_train))
        self._rt = rt
        self._base_model_path = hf_folder
        self._gguf_path = gguf_path
        self._eos_ids = eos_ids
        self._vocab_size = rt.n_vocab
        self.original_logprobs = original_logprobs
        self.served_model_name = served_model_name or Path(hf_folder).name
        self.max_batch_size = rt.cfg.slots
        self._adapter: Any | None = None
        self._cond = threading.Condition()
        self._inbox: deque[SlotJob] = deque()
        self._controls: deque[tuple[Callable[[], object], concurrent.futures.Future]] = deque()
        self._paused = False
        self._closed = False
        self._running: list[SlotJob] = []
        self._free_slots = list(range(rt.cfg.slots - 1, -1, -1))
        self._prefix_reuse = prefix_reuse
        self._kept: dict[int, tuple[int, ...]] = {}
        self._kv_epoch = 0
        self._flush_kept = False
        self._reuse_stats = PrefixCacheStats()
        self._seed_rng = random.Random(int.from_bytes(os.urandom(8), "little"))
        # A thread lock, not asyncio's: the engine outlives event loops (tests, servers) and a
        # contended asyncio.Lock binds to the first loop that waits on it.
        self._update_lock = threading.Lock()
        self.steps = 0
        self.last_weight_update: dict[str, float] | None = None
        self._thread = threading.Thread(target=self._run, name="llamacpp-engine-scheduler", daemon=True)
        self._thread.start()

    @classmethod
    def load(cls, gguf_path: str | None = None, hf_folder: str | None = None, max_batch_size: int = 8,
             ctx_per_slot: int = 4096, threads: int | None = None, n_batch: int = 512,
             original_logprobs: bool = False, served_model_name: str | None = None,
             prefix_reuse: bool = True) -> LlamaCppEngine:
        """Load a GGUF (None: the embedded SmolLM2's Q4_1 file) with the HF folder whose tokenizer
        gives the ids (None: the embedded model's converted folder). `prefix_reuse=False` decodes
        every prompt whole (for comparisons)."""
        from transformers import AutoTokenizer

        from openclaw.models.embedded import gguf_file, prepare_embedded_model

        gguf = str(gguf_path or gguf_file())
        folder = str(hf_folder or prepare_embedded_model())
        cfg = RuntimeConfig(slots=max_batch_size, ctx_per_slot=ctx_per_slot, n_batch=n_batch,
                            threads=threads or default_threads())
        tokenizer = AutoTokenizer.from_pretrained(folder)
        rt = LlamaRuntime(gguf, cfg)
        try:
            from transformers import AutoConfig

            check_vocab(tokenizer, rt, int(AutoConfig.from_pretrained(folder).vocab_size))
            eos = _eos_ids(folder, tokenizer)
        except Exception:
            rt.close()
            raise
        return cls(rt, tokenizer, folder, gguf, eos, original_logprobs, served_model_name, prefix_reuse)

    # ---- properties beyond the Engine protocol's ---------------------------------------------
    @property
    def base_model_path(self) -> str:
        return self._base_model_path

    @property
    def gguf_path(self) -> str:
        return self._gguf_path

    @property
    def eos_token_ids(self) -> frozenset[int]:
        return self._eos_ids

    @property
    def is_paused(self) -> bool:
        return self._paused

    @property
    def prefix_cache_stats(self) -> dict[str, float] | None:
        """How much prompt the kept KV saved (the hf engine's keys), and the tokens kept now; None
        with prefix_reuse off."""
        if not self._prefix_reuse:
            return None
        with self._cond:
            cached = sum(len(t) for t in self._kept.values())
        return {**self._reuse_stats.as_dict(), "cached_tokens": cached}

    def num_pending(self) -> int:
        with self._cond:
            return len(self._all_jobs())

    # ---- generation ---------------------------------------------------------------------------
    def validate(self, request: GenerationRequest) -> None:
        """Raise ValueError with a clear message for a request the engine cannot run."""
        if request.image_data:
            raise ValueError("the llama.cpp engine serves a text-only model: requests with images are refused")
        self.check_request(request, self._vocab_size)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[TokenEvent | GenerationResult]:
        self.validate(request)
        job = SlotJob(req=request, rid=request.request_id or uuid.uuid4().hex,
                      loop=asyncio.get_running_loop(), queue=asyncio.Queue())
        async with aclosing(queued_stream(self, job)) as items:
            async for item in items:
                yield item

    # ---- weights --------------------------------------------------------------------------------
    async def update_weights_from_disk(self, model_path: str, weight_version: int | None = None) -> tuple[bool, str]:
        """Convert a PEFT LoRA adapter folder to GGUF and serve it from the next decode step on."""
        await asyncio.to_thread(self._update_lock.acquire)  # two pushes at once would race on the adapter set
        try:
            return await self._push_adapter(model_path, weight_version)
        finally:
            self._update_lock.release()

    async def _push_adapter(self, model_path: str, weight_version: int | None) -> tuple[bool, str]:
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="openclaw-lora-") as tmp:
            gguf = Path(tmp) / "adapter.gguf"
            try:
                if not is_adapter_folder(model_path):
                    raise ValueError(f"{model_path} is not a PEFT adapter folder (full-model pushes need a GGUF)")
                heads = HeadLayout(self._rt.n_head, self._rt.n_head_kv)
                await asyncio.to_thread(write_gguf_lora, model_path, gguf, self._rt.arch, heads)
            except Exception:  # noqa: BLE001 - reported to the caller, engine keeps serving
                log.warning("update_weights_from_disk(%r) failed", model_path, exc_info=True)
                return False, load_failed_message(model_path)
            converted_s = time.perf_counter() - start
            try:
                version, paused = await self._control(lambda: self._swap_adapter(gguf, model_path, weight_version))
            except (ValueError, RuntimeError):
                log.warning("update_weights_from_disk(%r): llama.cpp refused the adapter", model_path, exc_info=True)
                return False, load_failed_message(model_path)
        took = time.perf_counter() - start
        self.last_weight_update = {"weight_version": version, "convert_s": converted_s, "pause_s": paused,
                                   "total_s": took}
        return True, (f"Succeeded to update model weights from {model_path} (weight_version={version}, {took:.2f}s; "
                      f"decoding paused {paused * 1000:.1f} ms).")

    def _swap_adapter(self, gguf: Path, model_path: str, weight_version: int | None) -> tuple[int, float]:
        """On the scheduler thread, between two steps: load, set, free the old adapter. Loading
        here (not in a worker) because llama.cpp sizes its graphs from the model's adapter list."""
        t0 = time.perf_counter()
        adapter = self._rt.load_adapter(gguf)
        self._drop_kept_kv()  # before the set: a failed set leaves the context's adapters unknown
        try:
            self._rt.set_adapter(adapter)
        except Exception:
            self._rt.free_adapter(adapter)
            raise
        if self._adapter is not None:
            self._rt.free_adapter(self._adapter)
        self._adapter = adapter
        self._model_path = str(model_path)
        self._weight_version = weight_version if weight_version is not None else self._weight_version + 1
        return self._weight_version, time.perf_counter() - t0

    # ---- control ---------------------------------------------------------------------------------
    async def pause_generation(self, abort: bool = False) -> None:
        """Stop decoding and admitting; with abort=True, in-flight requests finish now with
        finish_reason abort (SGLang's `mode="abort"`)."""
        with self._cond:
            self._paused = True
            if abort:
                self._mark_aborted(lambda job: True, "paused with mode=abort")
            self._cond.notify()
        if abort:
            await self._control(lambda: None)  # wait until the aborted requests are flushed out

    def abort(self, rid: str | None = None, abort_all: bool = False) -> int:
        """Finish matching requests now with finish_reason abort (their callers get a result)."""
        with self._cond:
            n = self._mark_aborted(lambda job: abort_all or job.rid == rid, "aborted by request")
            self._cond.notify()
        return n

    def _mark_aborted(self, match: Callable[[SlotJob], bool], why: str) -> int:
        n = 0
        for job in self._all_jobs():
            if not job.done and job.finish is None and match(job):
                job.cancelled = True
                job.finish = FinishReason("abort", why)
                n += 1
        return n

    async def continue_generation(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify()

    def flush_cache(self) -> bool:
        """SGLang's contract: refuse while requests are generating. Else drop the KV kept from
        finished requests (the scheduler does it before it admits another request)."""
        with self._cond:
            ok = self._paused or not (self._inbox or self._running)
            if ok and self._prefix_reuse:
                self._flush_kept = True
                self._cond.notify()
            return ok

    async def shutdown(self) -> None:
        await close_scheduler(self)

    async def _control(self, fn: Callable[[], object]):
        return await run_control(self, fn)
