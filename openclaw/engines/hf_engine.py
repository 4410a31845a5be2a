"""The embedded inference engine: transformers on CPU or GPU with continuous batching.

Scheduling (one background thread owns the model and every tensor):

* Requests wait in a FIFO inbox. Between two decode steps, all waiting requests that fit in
  `max_batch_size` are prefilled together (one left-padded forward) and their KV caches are
  merged into the running batch, so a new request joins without waiting for others to finish
  (continuous batching).
* The running batch is ONE left-padded `DynamicCache` [B, heads, T, dim] plus a 2-D attention
  mask and per-row position ids. A decode step is one forward of [B, 1] tokens. Why this layout
  on CPU: a single batched matmul per layer is what makes batch 8 ~5x faster than batch 1 on
  two cores, and it is exactly what `model.generate` does, so we pay no extra attention cost.
  Per-request caches would need a gather/pad every step; a left-padded batch only needs work
  when membership changes (merge on join, `index_select` on leave, and dropping leading columns
  that are padding for every remaining row).
* Finished or cancelled rows leave the batch immediately, freeing their slot.

Log-probs follow SGLang (see `openclaw.engines.sampling`): temperature-scaled
`log_softmax`, no top-p/top-k truncation; raw `log_softmax` for greedy rows; prompt log-probs
(`logprob_start_len` >= 0) are raw. In fp32 with a fixed batch composition results are
bitwise deterministic; a request alone is deterministic regardless of what ran before it.

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
import itertools
import logging
import os
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from openclaw.engines.base import FinishReason, GenerationRequest, GenerationResult, TokenEvent
from openclaw.engines.detokenize import IncrementalDetokenizer, StopStringMatcher
from openclaw.engines.prefix_cache import PrefixKVCache
from openclaw.engines.sampling import RowSampling, sample_batch
from openclaw.engines.weights import is_adapter_folder, load_model, parse_dtype

log = logging.getLogger(__name__)
# torch.Generator.manual_seed accepts exactly this range; anything else raises inside the batch loop.
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1


def unloadable_message(model_path: str) -> str:
    """The one answer for a folder that cannot be loaded, whatever the reason: the reason (missing
    folder, unreadable file, bad config, other vocabulary) would tell a caller which paths exist."""
    return f"failed to load weights from {model_path}: not a loadable model or adapter folder (see the server log)"


class EngineClosed(RuntimeError):
    pass


@dataclass(eq=False)
class _Job:
    """One request, from submission until its GenerationResult is delivered."""

    req: GenerationRequest
    rid: str
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue
    cancelled: bool = False
    done: bool = False
    # Scheduler-owned state:
    max_new: int = 0
    sampling: RowSampling | None = None
    stop_ids: frozenset[int] = frozenset()
    detok: IncrementalDetokenizer | None = None
    stops: StopStringMatcher | None = None
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    top_logprobs: list[tuple[tuple[int, float], ...]] = field(default_factory=list)
    input_logprobs: tuple[float | None, ...] = ()
    emitted: int = 0  # characters of detok.text already streamed
    final_text: str | None = None
    finish: FinishReason | None = None


class HFEngine:
    """Continuous-batching transformers engine implementing `openclaw.engines.base.Engine`."""

    # "pause": callers pause around a weight update (slime's RL sequence, single-version samples);
    # "live": a server answering users sets this so that the trainer's push does not pause it
    # (slime.utils.weight_sync reads it from /get_server_info). The swap itself is the same.
    weight_swap = "pause"

    def __init__(self, model: torch.nn.Module, tokenizer, model_path: str, base_model_path: str,
                 device: str, dtype: torch.dtype, max_batch_size: int = 16,
                 original_logprobs: bool = False, served_model_name: str | None = None,
                 prefix_cache_tokens: int = 0) -> None:
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
        self._flush_prefix_cache = False  # set by flush_cache, done by the scheduler before it admits again
        self._pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (min(self._eos_ids) if self._eos_ids else 0)
        # Scheduler state (scheduler thread only, except where guarded by _cond).
        self._cond = threading.Condition()
        self._inbox: deque[_Job] = deque()
        self._controls: deque[tuple[Callable[[], object], concurrent.futures.Future]] = deque()
        self._paused = False
        self._closed = False
        self._rows: list[_Job] = []
        self._admitting: list[_Job] = []  # taken from the inbox, being prefilled (not yet in _rows)
        self._cache = None
        self._mask: torch.Tensor | None = None  # [B, T] long
        self._next_pos: torch.Tensor | None = None  # [B] long
        self._last_tokens: torch.Tensor | None = None  # [B, 1] long
        self._padded = False  # does any row of the running batch have left padding?
        self._seed_rng = random.Random(int.from_bytes(os.urandom(8), "little"))
        self._ids = itertools.count()
        self.steps = 0  # decode steps run (for tests/metrics)
        self.last_weight_update: dict[str, float] | None = None  # {"load_s", "pause_s", ...} of the last swap
        self._thread = threading.Thread(target=self._run, name="hf-engine-scheduler", daemon=True)
        self._thread.start()

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def load(cls, model_path: str | None = None, dtype: str = "float32", device: str | None = None,
             max_batch_size: int = 16, original_logprobs: bool | None = None,
             served_model_name: str | None = None, prefix_cache_tokens: int = 0) -> HFEngine:
        """Load a full HF folder or PEFT adapter folder (None: the embedded SmolLM2)."""
        from transformers import AutoTokenizer

        from openclaw.models import resolve_model_path

        path = str(resolve_model_path(model_path))
        dev = device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch_dtype = parse_dtype(dtype)
        loaded = load_model(path, torch_dtype, dev)
        tokenizer = AutoTokenizer.from_pretrained(loaded.tokenizer_path)
        if original_logprobs is None:
            original_logprobs = os.environ.get("SGLANG_RETURN_ORIGINAL_LOGPROB", "").lower() in ("1", "true")
        return cls(loaded.model, tokenizer, path, loaded.base_model_path, dev, torch_dtype, max_batch_size,
                   original_logprobs, served_model_name, prefix_cache_tokens)

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

    # ---- Engine protocol: properties ----------------------------------------------------
    @property
    def weight_version(self) -> int:
        return self._weight_version

    @property
    def model_path(self) -> str:
        return self._model_path

    @property
    def base_model_path(self) -> str:
        return self._base_model_path

    @property
    def tokenizer(self):
        return self._tokenizer

    @property
    def max_context_len(self) -> int:
        return self._max_context_len

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
        n = len(request.input_ids)
        if n == 0:
            raise ValueError("input_ids is empty")
        if n >= self._max_context_len:
            raise ValueError(f"prompt has {n} tokens; the model's context length is {self._max_context_len}")
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in request.input_ids):
            raise ValueError("input_ids must be a list of integers")
        bad = [t for t in request.input_ids if not 0 <= t < self._vocab_size]
        if bad:
            raise ValueError(f"token ids out of range [0, {self._vocab_size}): {bad[:5]}")
        p = request.params
        if p.max_new_tokens < 0:
            raise ValueError("max_new_tokens must be >= 0")
        if p.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < p.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if p.top_k == 0 or p.top_k < -1:
            raise ValueError("top_k must be -1 (disabled) or >= 1")
        if p.seed is not None and (isinstance(p.seed, bool) or not isinstance(p.seed, int)
                                   or not SEED_MIN <= p.seed <= SEED_MAX):
            raise ValueError(f"seed must be an integer in [{SEED_MIN}, {SEED_MAX}] (what torch.Generator accepts)")
        if not 0 <= request.top_logprobs_num <= self._vocab_size:
            raise ValueError(f"top_logprobs_num must be in [0, {self._vocab_size}]")
        if request.logprob_start_len >= n:
            raise ValueError(f"logprob_start_len {request.logprob_start_len} must be < prompt length {n}")

    async def stream(self, request: GenerationRequest) -> AsyncIterator[TokenEvent | GenerationResult]:
        self.validate(request)
        job = _Job(req=request, rid=request.request_id or uuid.uuid4().hex,
                   loop=asyncio.get_running_loop(), queue=asyncio.Queue())
        with self._cond:
            if self._closed:
                raise EngineClosed("engine is shut down")
            self._inbox.append(job)
            self._cond.notify()
        try:
            while True:
                item = await job.queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, GenerationResult):
                    return
        finally:
            if not job.done:
                # Closed early (client went away): the scheduler drops the row on its next pass.
                with self._cond:
                    job.cancelled = True
                    self._cond.notify()

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        agen = self.stream(request)
        try:
            async for item in agen:
                if isinstance(item, GenerationResult):
                    return item
        finally:
            await agen.aclose()
        raise RuntimeError("engine stream ended without a result")

    # ---- Engine protocol: control -------------------------------------------------------
    async def update_weights_from_disk(self, model_path: str, weight_version: int | None = None) -> tuple[bool, str]:
        """Load a full folder or PEFT adapter (merged) and swap it in between two decode steps."""
        start = time.perf_counter()
        try:
            loaded = await asyncio.to_thread(load_model, model_path, self._dtype, str(self._device),
                                             self._base_model_path)
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
            self._model_path = str(model_path)
            if not is_adapter_folder(model_path):
                self._base_model_path = loaded.base_model_path
            self._weight_version = weight_version if weight_version is not None else self._weight_version + 1
            if self._prefix_cache is not None:  # its KV came from the old weights
                self._prefix_cache.clear()
            return self._weight_version, time.perf_counter() - t0

        version, paused = await self._control(swap)
        await asyncio.to_thread(retired.clear)
        took = time.perf_counter() - start
        self.last_weight_update = {"weight_version": version, "load_s": loaded_s, "pause_s": paused, "total_s": took}
        return True, (f"Succeeded to update model weights from {model_path} (weight_version={version}, {took:.2f}s; "
                      f"decoding paused {paused * 1000:.1f} ms).")

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
            ok = self._paused or not (self._inbox or self._admitting or self._rows)
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
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify()
        await asyncio.to_thread(self._thread.join, 30)

    async def _control(self, fn: Callable[[], object]):
        fut: concurrent.futures.Future = concurrent.futures.Future()
        with self._cond:
            if self._closed:
                raise EngineClosed("engine is shut down")
            self._controls.append((fn, fut))
            self._cond.notify()
        return await asyncio.wrap_future(fut)

    # ---- scheduler thread ---------------------------------------------------------------
    def _run(self) -> None:
        with torch.inference_mode():
            while True:
                with self._cond:
                    while not self._has_work():
                        self._cond.wait()
                    if self._closed:
                        break
                    controls = list(self._controls)
                    self._controls.clear()
                    if self._flush_prefix_cache:
                        self._flush_prefix_cache = False
                        self._prefix_cache.clear()
                    admit: list[_Job] = []
                    if not self._paused:
                        room = self.max_batch_size - len(self._rows)
                        while self._inbox and room > 0:
                            job = self._inbox.popleft()
                            if not job.cancelled:
                                admit.append(job)
                                room -= 1
                            else:
                                self._finish_cancelled(job)
                        drop_waiting = []
                        self._admitting = list(admit)
                    else:
                        drop_waiting = [j for j in self._inbox if j.cancelled]
                        for j in drop_waiting:
                            self._inbox.remove(j)
                for job in drop_waiting:
                    self._finish_cancelled(job)
                try:
                    self._drop_cancelled_rows()
                    for fn, fut in controls:  # between two steps: weight swaps happen here
                        try:
                            fut.set_result(fn())
                        except Exception as exc:  # noqa: BLE001
                            fut.set_exception(exc)
                    controls = []
                    if admit:
                        self._prefill(admit)
                        with self._cond:
                            self._admitting = []
                    if self._rows and not self._paused:
                        self._decode_step()
                except Exception as exc:  # noqa: BLE001 - fail the batch, keep the engine alive
                    log.exception("engine step failed")
                    for job in self._rows + admit:
                        if not job.done:
                            self._deliver([(job, exc)])
                            job.done = True
                    for _, fut in controls:
                        fut.set_exception(exc)
                    self._reset_batch()
                    with self._cond:
                        self._admitting = []
            self._abort_everything()

    def _all_jobs(self) -> list[_Job]:
        """Every job not yet finished (call with self._cond held)."""
        # A job is briefly in both _admitting and _rows while its prefill merges: dedupe.
        return list(dict.fromkeys([*self._inbox, *self._admitting, *self._rows]))

    def _has_work(self) -> bool:
        if self._closed or self._controls or self._flush_prefix_cache:
            return True
        if any(j.cancelled for j in self._rows) or any(j.cancelled for j in self._inbox):
            return True
        if self._paused:
            return False
        return bool(self._inbox or self._rows)

    def _abort_everything(self) -> None:
        with self._cond:
            jobs = list(self._inbox) + self._rows
            self._inbox.clear()
            controls = list(self._controls)
            self._controls.clear()
        for job in jobs:
            if not job.done:
                self._deliver([(job, EngineClosed("engine shut down"))])
                job.done = True
        for _, fut in controls:
            fut.set_exception(EngineClosed("engine shut down"))
        self._reset_batch()

    def _reset_batch(self) -> None:
        self._rows, self._cache = [], None
        self._mask = self._next_pos = self._last_tokens = None

    # -- delivery
    @staticmethod
    def _deliver(items: list[tuple[_Job, object]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, object]]] = {}
        for job, item in items:
            by_loop.setdefault(job.loop, []).append((job, item))
        for loop, batch in by_loop.items():
            try:
                loop.call_soon_threadsafe(_put_all, batch)
            except RuntimeError:  # the caller's loop is closed: nobody is listening any more
                pass

    def _finish_cancelled(self, job: _Job) -> None:
        if job.done:
            return
        job.done = True
        if job.finish is not None:  # aborted by pause(mode=abort): the caller still gets a result
            self._deliver([(job, self._result(job))])

    # -- per-request setup
    def _setup_job(self, job: _Job) -> None:
        req, p = job.req, job.req.params
        job.max_new = min(p.max_new_tokens, self._max_context_len - len(req.input_ids))
        gen = None
        if p.temperature > 0:
            gen = torch.Generator(device=self._device)
            gen.manual_seed(p.seed if p.seed is not None else self._seed_rng.getrandbits(63))
        job.sampling = RowSampling(p.temperature, p.top_p, p.top_k, gen,
                                   req.top_logprobs_num if req.return_logprob else 0)
        stop_ids = set(p.stop_token_ids)
        if not p.ignore_eos:
            stop_ids |= self._eos_ids
        job.stop_ids = frozenset(stop_ids)
        job.detok = IncrementalDetokenizer(self._tokenizer, p.skip_special_tokens)
        job.stops = StopStringMatcher(tuple(p.stop))

    # -- model calls
    def _forward(self, input_ids, attention_mask, position_ids, cache, logits_to_keep: int = 1):
        out = self._model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                          past_key_values=cache, use_cache=True, logits_to_keep=logits_to_keep)
        return out.logits

    def _new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self._model.config)

    def _prefill(self, jobs: list[_Job]) -> None:
        ready = []
        for job in jobs:
            try:
                self._setup_job(job)
            except Exception as exc:  # noqa: BLE001 - one request's bad parameters must not fail its batch
                log.warning("request %s failed its setup and was dropped alone: %s", job.rid, exc)
                self._deliver([(job, ValueError(f"the engine could not set up this request: {exc}"))])
                job.done = True
                continue
            ready.append(job)
        jobs = ready
        # Nothing to compute for a request that wants neither tokens nor prompt log-probs.
        idle = [j for j in jobs if j.max_new == 0 and not (j.req.return_logprob and j.req.logprob_start_len >= 0)]
        for job in idle:
            job.finish, job.done = FinishReason("length", 0), True
        if idle:
            self._deliver([(j, self._result(j)) for j in idle])
            jobs = [j for j in jobs if not j.done]
        # Teacher-scoring requests need logits at every prompt position: run them alone.
        scoring = [j for j in jobs if j.req.return_logprob and j.req.logprob_start_len >= 0]
        plain = [j for j in jobs if j not in scoring]
        for job in scoring:
            self._prefill_group([job], full_logits=True)
        if plain and self._prefix_cache is not None:
            self._prefill_cached(plain)
        elif plain:
            self._prefill_group(plain, full_logits=False)

    def _left_padded(self, prompts: list[tuple[int, ...]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Prompts as one left-padded batch: ids, attention mask and position ids, each [B, T]."""
        dev = self._device
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), self._pad_id, dtype=torch.long, device=dev)
        mask = torch.zeros((len(prompts), width), dtype=torch.long, device=dev)
        for i, prompt in enumerate(prompts):
            ids[i, width - len(prompt):] = torch.tensor(prompt, dtype=torch.long, device=dev)
            mask[i, width - len(prompt):] = 1
        return ids, mask, (mask.cumsum(-1) - 1).clamp_(min=0)

    def _prefill_group(self, jobs: list[_Job], full_logits: bool) -> None:
        ids, mask, pos = self._left_padded([tuple(j.req.input_ids) for j in jobs])
        width = ids.shape[1]
        cache = self._new_cache()
        keep = 1
        if full_logits:  # one job: logits only from the position predicting prompt[start] on
            keep = width - max(jobs[0].req.logprob_start_len - 1, 0)
        logits = self._forward(ids, mask, pos, cache, logits_to_keep=keep)
        if full_logits:
            start = jobs[0].req.logprob_start_len
            jobs[0].input_logprobs = ((None,) if start == 0 else ()) + tuple(
                _token_logprobs(logits[0, :-1], ids[0, width - keep + 1:]))
        self._start_rows(jobs, cache, mask, pos[:, -1], logits[:, -1, :].float())

    def _prefill_cached(self, jobs: list[_Job]) -> None:
        """Prefill through the prefix cache: the jobs of one prompt share one forward, and a prompt
        that starts with a cached one runs only the tokens after that prefix."""
        by_prompt: dict[tuple[int, ...], list[_Job]] = {}
        for job in jobs:
            by_prompt.setdefault(tuple(job.req.input_ids), []).append(job)
        misses = []
        for prompt, group in by_prompt.items():
            entry, reuse = self._prefix_cache.lookup(prompt)
            self._prefix_cache.count_shared_forward(prompt, len(group) - 1)
            if entry is None:
                misses.append((prompt, group))
            else:
                self._prefill_after_prefix(prompt, group, entry.layers, reuse)
        if misses:
            self._prefill_distinct(misses)

    def _prefill_distinct(self, groups: list[tuple[tuple[int, ...], list[_Job]]]) -> None:
        """One left-padded forward over distinct prompts, each stored in the prefix cache and then
        copied to every job that asked for it."""
        prompts = [prompt for prompt, _ in groups]
        ids, mask, pos = self._left_padded(prompts)
        width = ids.shape[1]
        cache = self._new_cache()
        logits = self._forward(ids, mask, pos, cache)
        for r, prompt in enumerate(prompts):
            start = width - len(prompt)
            self._prefix_cache.store(prompt, [(layer.keys[r:r + 1, :, start:], layer.values[r:r + 1, :, start:])
                                              for layer in cache.layers])
        jobs = [job for _, group in groups for job in group]
        index = torch.tensor([r for r, (_, group) in enumerate(groups) for _ in group], device=self._device)
        if len(jobs) > len(groups):
            cache.batch_select_indices(index)
        self._start_rows(jobs, cache, mask[index], pos[index, -1], logits[index, -1, :].float())

    def _prefill_after_prefix(self, prompt: tuple[int, ...], jobs: list[_Job],
                              prefix: tuple[tuple[torch.Tensor, torch.Tensor], ...], reuse: int) -> None:
        """Run `prompt[reuse:]` on top of the cached KV of its first `reuse` tokens."""
        dev = self._device
        cache = self._new_cache()
        for layer, (keys, values) in zip(cache.layers, prefix, strict=True):
            layer.update(keys[:, :, :reuse], values[:, :, :reuse])
        n = len(prompt)
        mask = torch.ones((1, n), dtype=torch.long, device=dev)
        logits = self._forward(torch.tensor([prompt[reuse:]], dtype=torch.long, device=dev), mask,
                               torch.arange(reuse, n, device=dev).unsqueeze(0), cache)
        self._prefix_cache.store(prompt, [(layer.keys, layer.values) for layer in cache.layers])
        index = torch.zeros(len(jobs), dtype=torch.long, device=dev)
        if len(jobs) > 1:
            cache.batch_select_indices(index)
        self._start_rows(jobs, cache, mask[index], torch.full((len(jobs),), n - 1, dtype=torch.long, device=dev),
                         logits[index, -1, :].float())

    def _start_rows(self, jobs: list[_Job], cache, mask: torch.Tensor, pos_last: torch.Tensor,
                    last: torch.Tensor) -> None:
        """Sample each prefilled job's first token from `last` (its prompt's final logits, [B, V])
        and merge the jobs that go on into the running batch."""
        dev = self._device
        # Requests that want no tokens (scoring) finish right after the prompt forward.
        wants = [j.max_new > 0 for j in jobs]
        events: list[tuple[_Job, object]] = []
        for j, w in zip(jobs, wants, strict=True):
            if not w:
                j.finish = FinishReason("length", 0)
                j.done = True
                events.append((j, self._result(j)))
        live = [i for i, w in enumerate(wants) if w]
        if live:
            sel = torch.tensor(live, device=dev)
            rows = [jobs[i] for i in live]
            new_tokens = self._sample_and_emit(rows, last[sel] if len(live) < len(jobs) else last, events)
            if len(live) < len(jobs):
                cache.batch_select_indices(sel)
                mask, pos_last = mask[sel], pos_last[sel]
            self._merge(rows, cache, mask, pos_last + 1, new_tokens)
        self._deliver(events)
        self._remove_finished()

    def _decode_step(self) -> None:
        mask = torch.cat([self._mask, self._mask.new_ones((self._mask.shape[0], 1))], dim=1)
        # Without padding the mask is all ones: passing None lets SDPA skip building a 4-D mask.
        logits = self._forward(self._last_tokens, mask if self._padded else None, self._next_pos.unsqueeze(-1),
                               self._cache)
        self._mask = mask
        self._next_pos = self._next_pos + 1
        self.steps += 1
        events: list[tuple[_Job, object]] = []
        self._last_tokens = self._sample_and_emit(self._rows, logits[:, -1, :].float(), events)
        self._deliver(events)
        self._remove_finished()

    # -- sampling, stop handling, events
    def _sample_and_emit(self, rows: list[_Job], logits: torch.Tensor, events: list) -> torch.Tensor:
        want_lp = any(j.req.return_logprob for j in rows)
        out = sample_batch(logits, [j.sampling for j in rows], want_lp, self.original_logprobs)
        for i, job in enumerate(rows):
            tok = out.tokens[i]
            job.output_ids.append(tok)
            lp = None
            tops: tuple[tuple[int, float], ...] = ()
            if job.req.return_logprob:
                lp = out.logprobs[i]
                tops = out.top_logprobs[i]
                job.logprobs.append(lp)
                if job.sampling.top_logprobs_num:
                    job.top_logprobs.append(tops)
            delta = self._advance_text(job, tok)
            events.append((job, TokenEvent(token_id=tok, logprob=lp, top_logprobs=tops, text_delta=delta)))
            if job.finish is not None:
                job.done = True
                events.append((job, self._result(job)))
        return torch.tensor(out.tokens, dtype=torch.long, device=self._device).unsqueeze(-1)

    def _advance_text(self, job: _Job, tok: int) -> str:
        """Update detokenized text, detect stops/length, and return the streamable delta."""
        p = job.req.params
        is_stop_token = tok in job.stop_ids
        if is_stop_token and not p.no_stop_trim:
            pass  # the stop token's own text is not part of the output (SGLang trims it)
        else:
            before = len(job.detok.text)
            job.detok.push(tok)
            hit = job.stops.find(job.detok.text, len(job.detok.text) - before)
            if hit is not None:
                idx, stop = hit
                job.final_text = job.detok.text[: idx + len(stop)] if p.no_stop_trim else job.detok.text[:idx]
                job.finish = FinishReason("stop", stop)
        if job.finish is None and is_stop_token:
            job.finish = FinishReason("stop", tok)
        if job.finish is None and len(job.output_ids) >= job.max_new:
            job.finish = FinishReason("length", len(job.output_ids))
        if job.finish is not None:
            if job.final_text is None:
                job.detok.flush()
                job.final_text = job.detok.text
            delta = job.final_text[job.emitted:]
            job.emitted = len(job.final_text)
            return delta
        safe = job.stops.safe_len(job.detok.text)
        if safe <= job.emitted:
            return ""
        delta = job.detok.text[job.emitted:safe]
        job.emitted = safe
        return delta

    def _result(self, job: _Job) -> GenerationResult:
        text = job.final_text if job.final_text is not None else (job.detok.text[: job.emitted] if job.detok else "")
        return GenerationResult(
            request_id=job.rid, prompt_ids=tuple(job.req.input_ids), output_ids=tuple(job.output_ids), text=text,
            output_logprobs=tuple(job.logprobs), output_top_logprobs=tuple(job.top_logprobs),
            input_logprobs=job.input_logprobs, finish_reason=job.finish or FinishReason("abort", None),
            weight_version=self._weight_version)

    # -- batch membership
    def _merge(self, rows: list[_Job], cache, mask: torch.Tensor, next_pos: torch.Tensor,
               last_tokens: torch.Tensor) -> None:
        if not self._rows:
            self._rows, self._cache, self._mask = list(rows), cache, mask
            self._next_pos, self._last_tokens = next_pos, last_tokens
            self._padded = not bool(mask.all())
            return
        t_old, t_new = self._mask.shape[1], mask.shape[1]
        width = max(t_old, t_new)
        for old_layer, new_layer in zip(self._cache.layers, cache.layers, strict=True):
            old_layer.keys = torch.cat([_pad_left(old_layer.keys, width), _pad_left(new_layer.keys, width)], dim=0)
            old_layer.values = torch.cat([_pad_left(old_layer.values, width), _pad_left(new_layer.values, width)], dim=0)
        self._mask = torch.cat([_pad_left(self._mask, width, dim=1), _pad_left(mask, width, dim=1)], dim=0)
        self._next_pos = torch.cat([self._next_pos, next_pos])
        self._last_tokens = torch.cat([self._last_tokens, last_tokens])
        self._rows.extend(rows)
        self._padded = not bool(self._mask.all())

    def _drop_cancelled_rows(self) -> None:
        if any(j.cancelled for j in self._rows):
            for j in self._rows:
                if j.cancelled:
                    self._finish_cancelled(j)
            self._remove_finished()

    def _remove_finished(self) -> None:
        keep = [i for i, j in enumerate(self._rows) if not j.done]
        if len(keep) == len(self._rows):
            return
        if not keep:
            self._reset_batch()
            return
        sel = torch.tensor(keep, device=self._device)
        self._cache.batch_select_indices(sel)
        self._mask = self._mask[sel]
        self._next_pos = self._next_pos[sel]
        self._last_tokens = self._last_tokens[sel]
        self._rows = [self._rows[i] for i in keep]
        # Drop leading columns that are padding for every remaining row.
        first = int(self._mask.any(dim=0).nonzero()[0])
        if first > 0:
            self._mask = self._mask[:, first:]
            for layer in self._cache.layers:
                layer.keys = layer.keys[:, :, first:]
                layer.values = layer.values[:, :, first:]
        self._padded = not bool(self._mask.all())


def _token_logprobs(logits: torch.Tensor, targets: torch.Tensor, chunk: int = 256) -> list[float]:
    """log_softmax(logits[i])[targets[i]] in fp32, a chunk of positions at a time (a full
    [L, vocab] fp32 log-softmax of a long prompt would double the memory of the logits)."""
    out: list[float] = []
    for i in range(0, logits.shape[0], chunk):
        logp = torch.log_softmax(logits[i:i + chunk].float(), dim=-1)
        out.extend(logp.gather(-1, targets[i:i + chunk].unsqueeze(-1)).squeeze(-1).tolist())
    return out


def _has_sliding_window(config) -> bool:
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    layer_types = getattr(text, "layer_types", None) or ()
    return "sliding_attention" in layer_types or bool(getattr(text, "use_sliding_window", False))


def _pad_left(t: torch.Tensor, width: int, dim: int = 2) -> torch.Tensor:
    cur = t.shape[dim]
    if cur == width:
        return t
    shape = list(t.shape)
    shape[dim] = width - cur
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def _put_all(batch: list[tuple[_Job, object]]) -> None:
    for job, item in batch:
        job.queue.put_nowait(item)
