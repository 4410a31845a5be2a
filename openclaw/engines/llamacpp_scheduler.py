"""The llama.cpp engine's scheduler thread: admission to KV slots, mixed prefill/decode steps,
sampling, controls.

Every step is ONE `llama_decode` over a `llama_batch` that holds the next token of every decoding
request (each on its own `seq_id`, its own KV sequence) plus, in the room left up to `n_batch`, the
next chunk of prompt tokens of requests still being prefilled. So a new request joins between two
steps without stalling the others for its whole prompt (chunked prefill), and concurrent requests
share one batched forward, the way llama.cpp's own server batches its slots.

A finished request's KV stays in its slot (its prompt and reply but the last, never-decoded token).
A new request goes to the free slot whose kept tokens share the longest prefix with its prompt; the
slot's KV past that prefix is removed and only the rest of the prompt is decoded. An agent's next
turn repeats its system prompt, tools and history, so it prefills just the new message (the hf
engine's prefix cache does the same with copies of the KV; here it stays where it was computed).
Kept KV is valid only for the weights that computed it: an adapter swap or a cache flush drops it,
and a request that ran through a swap (KV from both weights) keeps none.

Sampling reuses `openclaw.engines.sampling` on llama.cpp's fp32 logits: the same SGLang log-prob
semantics and per-request seeded generators as the HF engine, so `return_logprob` gives the served
(quantized) model's own log-probs of the tokens it sampled.

`SlotScheduler` is mixed into `LlamaCppEngine`, which sets the state declared below; the methods
here run on the scheduler thread only and touch state shared with callers only under `_cond`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import random
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from openclaw.engines.base import FinishReason, TokenEvent
from openclaw.engines.detokenize import IncrementalDetokenizer, StopStringMatcher
from openclaw.engines.hf_jobs import EngineClosed, Job, advance_text, deliver, job_result
from openclaw.engines.llamacpp_runtime import BatchEntry, LlamaRuntime
from openclaw.engines.prefix_cache import PrefixCacheStats, common_prefix_len
from openclaw.engines.sampling import RowSampling, sample_batch, token_logprobs

log = logging.getLogger("openclaw.engines.llamacpp_engine")

# A match shorter than this is a chat template's fixed opening (SmolLM2's default system prompt is
# 24 tokens), not a shared history: prefilling it costs well under 0.1 s, so a new request takes an
# empty slot rather than cut another session's kept KV down to it.
MIN_SLOT_REUSE = 64


def pick_slot(prompt: Sequence[int], limit: int, free: Sequence[int],
              kept: Mapping[int, tuple[int, ...]]) -> tuple[int, int]:
    """(slot, how many of its kept tokens to reuse) for a new request.

    `free`: the free slots, least recently released first; `kept`: the tokens whose KV a free slot
    holds (absent: empty); `limit`: the most tokens the request may reuse (positions whose logits it
    needs must be decoded). The longest shared prefix wins when it is at least MIN_SLOT_REUSE long or
    no slot is empty; else an empty slot; else the least recently released slot, from scratch."""
    best, best_n = None, 0
    for slot in free:
        n = min(common_prefix_len(kept.get(slot, ()), prompt), limit)
        if n > best_n:
            best, best_n = slot, n
    empty = [slot for slot in free if slot not in kept]
    if best is not None and (best_n >= MIN_SLOT_REUSE or not empty):
        return best, best_n
    if empty:
        return empty[-1], 0
    return free[0], 0


@dataclass(eq=False)
class SlotJob(Job):
    """A request plus where it is in llama.cpp's KV cache."""

    seq: int = -1  # its KV sequence id while it holds a slot
    fed: int = 0  # prompt tokens already decoded into the KV cache
    pending: int | None = None  # the last sampled token, fed to the model on the next step
    prompt_lps: list[float] | None = None  # prompt log-probs gathered chunk by chunk (scoring)
    kv_epoch: int = -1  # the scheduler's KV epoch when the job took its slot (a swap bumps it)

    @property
    def prefilling(self) -> bool:
        return self.fed < len(self.req.input_ids)

    def kv_tokens(self) -> tuple[int, ...]:
        """The tokens whose KV the job's sequence holds: the prompt decoded so far and, once it is
        all in, every output token but the last (sampled, fed only on the step that never came)."""
        prompt = tuple(self.req.input_ids)
        if self.prefilling:
            return prompt[:self.fed]
        return prompt + tuple(self.output_ids[:-1])

    def reuse_limit(self) -> int:
        """The most prompt tokens it may take from kept KV: the positions whose logits it needs
        (the last one, to sample; the scored ones) must be decoded."""
        return min(len(self.req.input_ids) - 1, self.first_scored_pos())

    def first_scored_pos(self) -> int:
        """The first prompt position whose logits are needed for prompt log-probs (scoring)."""
        if not (self.req.return_logprob and self.req.logprob_start_len >= 0):
            return len(self.req.input_ids)  # none: only the last position, for sampling
        return max(self.req.logprob_start_len - 1, 0)


@dataclass
class _Step:
    entries: list[BatchEntry]
    # Per logits row of the decode: the job, and for prompt rows the position they predict from.
    rows: list[tuple[SlotJob, int | None]]


class SlotScheduler:
    """The scheduler thread's half of `LlamaCppEngine` (see the module docstring)."""

    # Set by LlamaCppEngine.__init__.
    original_logprobs: bool
    steps: int
    _rt: LlamaRuntime
    _tokenizer: object
    _max_context_len: int
    _eos_ids: frozenset[int]
    _weight_version: int
    _seed_rng: random.Random
    _cond: threading.Condition
    _inbox: deque[SlotJob]
    _controls: deque[tuple[Callable[[], object], concurrent.futures.Future]]
    _paused: bool
    _closed: bool
    _running: list[SlotJob]  # jobs holding a slot, in admission order
    _free_slots: list[int]  # least recently released first
    _prefix_reuse: bool  # keep finished requests' KV for later requests
    _kept: dict[int, tuple[int, ...]]  # free slot -> the tokens whose KV it holds
    _kv_epoch: int  # bumped when kept KV goes stale (weights change)
    _flush_kept: bool  # set by flush_cache; the scheduler drops the kept KV before it admits again
    _reuse_stats: PrefixCacheStats

    def _run(self) -> None:
        # Sampling one [B, vocab] row set needs no intra-op parallelism, and torch's OpenMP workers
        # spin after each parallel op on the very cores llama.cpp computes on (measured: ~10 ms of
        # CPU per token at batch 1 on 2 cores). With OpenMP (Linux builds) this setting is per
        # thread, so it leaves the rest of the process alone.
        torch.set_num_threads(1)
        with torch.inference_mode():
            while True:
                with self._cond:
                    while not self._has_work():
                        self._cond.wait()
                    if self._closed:
                        break
                    if self._flush_kept:
                        self._flush_kept = False
                        self._drop_kept_kv()
                    controls = list(self._controls)
                    self._controls.clear()
                    admit, dropped = self._take_admissions()
                for job in dropped:
                    self._finish_cancelled(job)
                try:
                    self._drop_cancelled_rows()
                    for fn, fut in controls:  # between two steps: adapter swaps happen here
                        try:
                            fut.set_result(fn())
                        except Exception as exc:  # noqa: BLE001 - reported to the control's caller
                            fut.set_exception(exc)
                    controls = []
                    self._start(admit)
                    if self._running and not self._paused:
                        self._step()
                except Exception as exc:  # noqa: BLE001 - fail the running requests, keep the engine alive
                    log.exception("llama.cpp engine step failed")
                    self._fail_running(exc)
                    for _, fut in controls:
                        fut.set_exception(exc)
            self._abort_everything()
            self._rt.close()

    # ---- admission and bookkeeping (caller holds _cond where noted) -------------------------
    def _has_work(self) -> bool:
        if self._closed or self._controls or self._flush_kept:
            return True
        if any(j.cancelled for j in self._running) or any(j.cancelled for j in self._inbox):
            return True
        if self._paused:
            return False
        return bool(self._running or (self._inbox and self._free_slots))

    def _take_admissions(self) -> tuple[list[SlotJob], list[SlotJob]]:
        """(jobs given a slot now, cancelled jobs taken out of the inbox); call with _cond held."""
        dropped = [j for j in self._inbox if j.cancelled]
        for job in dropped:
            self._inbox.remove(job)
        admit: list[SlotJob] = []
        while not self._paused and self._inbox and self._free_slots:
            job = self._inbox.popleft()
            job.seq, job.fed = pick_slot(job.req.input_ids, job.reuse_limit(), self._free_slots, self._kept)
            job.kv_epoch = self._kv_epoch
            self._free_slots.remove(job.seq)
            self._kept.pop(job.seq, None)
            admit.append(job)
            self._running.append(job)
        return admit, dropped

    def _all_jobs(self) -> list[SlotJob]:
        """Every job not yet finished (call with _cond held). A job marked done is having its slot
        freed by the scheduler right now, before its result goes out: it no longer counts."""
        return [j for j in (*self._inbox, *self._running) if not j.done]

    def _release(self, job: SlotJob, keep: bool = True) -> None:
        """Free a finished job's slot. Its KV stays there for a later request when `keep` (it is
        known and valid), reuse is on and no weight change happened since the job took the slot."""
        if job.seq < 0:
            return
        tokens = job.kv_tokens() if keep and self._prefix_reuse and job.kv_epoch == self._kv_epoch else ()
        if not tokens:
            self._rt.free_seq(job.seq)
        with self._cond:
            if job in self._running:
                self._running.remove(job)
            self._free_slots.append(job.seq)
            if tokens:
                self._kept[job.seq] = tokens
        job.seq = -1

    def _drop_kept_kv(self) -> None:
        """Forget every kept KV (weights changed, or a flush); on the scheduler thread. Running jobs
        took their slot under the old epoch, so they will keep nothing either."""
        with self._cond:
            slots = list(self._kept)
            self._kept.clear()
            self._kv_epoch += 1
        for slot in slots:
            self._rt.free_seq(slot)

    def _resume_kept(self, job: SlotJob) -> None:
        """Cut the slot's kept KV down to the prefix the job reuses (none if the weights changed
        since it was picked) and count the reuse."""
        if job.kv_epoch != self._kv_epoch:
            job.fed, job.kv_epoch = 0, self._kv_epoch
        job.fed = self._rt.keep_prefix(job.seq, job.fed)
        stats = self._reuse_stats
        stats.lookups += 1
        stats.prompt_tokens += len(job.req.input_ids)
        if job.fed:
            stats.hits += 1
            stats.reused_tokens += job.fed

    def _finish_cancelled(self, job: SlotJob) -> None:
        out = []
        if not job.done:
            job.done = True
            if job.finish is not None:  # aborted by request/pause(mode=abort): the caller gets a result
                out.append((job, job_result(job, self._weight_version)))
        self._release(job)  # every path frees the slot before the result goes out
        deliver(out)

    def _drop_cancelled_rows(self) -> None:
        for job in [j for j in self._running if j.cancelled]:
            self._finish_cancelled(job)

    def _fail_running(self, exc: BaseException) -> None:
        for job in list(self._running):
            out = [] if job.done else [(job, exc)]
            job.done = True
            self._release(job, keep=False)  # a failed decode leaves its KV unknown
            deliver(out)

    def _abort_everything(self) -> None:
        with self._cond:
            jobs = [*self._inbox, *self._running]
            self._inbox.clear()
            controls = list(self._controls)
            self._controls.clear()
        for job in jobs:
            out = [] if job.done else [(job, EngineClosed("engine shut down"))]
            job.done = True
            self._release(job, keep=False)
            deliver(out)
        for _, fut in controls:
            fut.set_exception(EngineClosed("engine shut down"))

    # ---- per-request setup --------------------------------------------------------------------
    def _setup_job(self, job: SlotJob) -> None:
        req, p = job.req, job.req.params
        job.max_new = min(p.max_new_tokens, self._max_context_len - len(req.input_ids))
        gen = None
        if p.temperature > 0:
            gen = torch.Generator()
            gen.manual_seed(p.seed if p.seed is not None else self._seed_rng.getrandbits(63))
        job.sampling = RowSampling(p.temperature, p.top_p, p.top_k, gen,
                                   req.top_logprobs_num if req.return_logprob else 0)
        stop_ids = set(p.stop_token_ids)
        if not p.ignore_eos:
            stop_ids |= self._eos_ids
        job.stop_ids = frozenset(stop_ids)
        job.detok = IncrementalDetokenizer(self._tokenizer, p.skip_special_tokens)
        job.stops = StopStringMatcher(tuple(p.stop))
        if job.first_scored_pos() < len(req.input_ids):
            job.prompt_lps = []

    def _start(self, jobs: list[SlotJob]) -> None:
        """Set up newly admitted jobs; a job with nothing to compute finishes at once."""
        done: list[tuple[SlotJob, object]] = []
        for job in jobs:
            self._resume_kept(job)
            try:
                self._setup_job(job)
            except Exception as exc:  # noqa: BLE001 - one request's bad parameters must not fail its batch
                log.warning("request %s failed its setup and was dropped alone: %s", job.rid, exc)
                done.append((job, ValueError(f"the engine could not set up this request: {exc}")))
                job.done = True
                continue
            if job.max_new == 0 and job.prompt_lps is None:
                job.finish, job.done = FinishReason("length", 0), True
                done.append((job, job_result(job, self._weight_version)))
        for job, _ in done:  # before the results go out: a caller that has its result finds its slot freed
            self._release(job)
        deliver(done)

    # ---- one step -------------------------------------------------------------------------------
    def _plan(self) -> _Step:
        """The next decode: every decoding job's pending token, then prompt chunks up to n_batch."""
        entries: list[BatchEntry] = []
        rows: list[tuple[SlotJob, int | None]] = []
        for job in self._running:
            if not job.prefilling and job.pending is not None:
                pos = len(job.req.input_ids) + len(job.output_ids) - 1
                entries.append(BatchEntry(job.pending, pos, job.seq, True))
                rows.append((job, None))
        budget = self._rt.cfg.n_batch - len(entries)
        for job in self._running:
            if budget <= 0:
                break
            if not job.prefilling:
                continue
            prompt = job.req.input_ids
            end = min(len(prompt), job.fed + budget)
            first_scored = job.first_scored_pos()
            for pos in range(job.fed, end):
                want = pos == len(prompt) - 1 or pos >= first_scored
                entries.append(BatchEntry(prompt[pos], pos, job.seq, want))
                if want:
                    rows.append((job, pos))
            budget -= end - job.fed
            job.fed = end
        return _Step(entries, rows)

    def _step(self) -> None:
        step = self._plan()
        if not step.entries:
            return
        logits = torch.from_numpy(self._rt.decode(step.entries))
        self.steps += 1
        self._score_prompts(step, logits)
        sample_idx = [i for i, (job, pos) in enumerate(step.rows)
                      if pos is None or (pos == len(job.req.input_ids) - 1 and job.max_new > 0)]
        events: list[tuple[SlotJob, object]] = []
        self._finish_scoring(step, events)
        if sample_idx:
            jobs = [step.rows[i][0] for i in sample_idx]
            self._sample_and_emit(jobs, logits[sample_idx], events)
        for job in [j for j in self._running if j.done]:  # before the results go out, as in _start
            self._release(job)
        deliver(events)

    def _score_prompts(self, step: _Step, logits: torch.Tensor) -> None:
        """Prompt log-probs of scoring jobs: the row at position p scores prompt token p + 1."""
        by_job: dict[SlotJob, list[tuple[int, int]]] = {}
        for i, (job, pos) in enumerate(step.rows):
            if pos is not None and job.prompt_lps is not None and pos + 1 < len(job.req.input_ids):
                by_job.setdefault(job, []).append((i, pos))
        for job, items in by_job.items():
            idx = [i for i, _ in items]
            targets = torch.tensor([job.req.input_ids[pos + 1] for _, pos in items])
            job.prompt_lps.extend(token_logprobs(logits[idx], targets))

    def _finish_scoring(self, step: _Step, events: list) -> None:
        """Jobs whose prompt is fully in: record prompt log-probs; finish those wanting no tokens."""
        seen: set[int] = set()
        for job, pos in step.rows:
            if pos != len(job.req.input_ids) - 1 or id(job) in seen:
                continue
            seen.add(id(job))
            if job.prompt_lps is not None:
                start = job.req.logprob_start_len
                job.input_logprobs = ((None,) if start == 0 else ()) + tuple(job.prompt_lps)
            if job.max_new == 0:
                job.finish, job.done = FinishReason("length", 0), True
                events.append((job, job_result(job, self._weight_version)))

    def _sample_and_emit(self, jobs: list[SlotJob], logits: torch.Tensor, events: list) -> None:
        """Sample one token per job, queue its TokenEvent (and the result of a job it finishes)."""
        want_lp = any(j.req.return_logprob for j in jobs)
        out = sample_batch(logits, [j.sampling for j in jobs], want_lp, self.original_logprobs)
        for i, job in enumerate(jobs):
            tok = out.tokens[i]
            job.output_ids.append(tok)
            job.pending = tok
            lp = None
            tops: tuple[tuple[int, float], ...] = ()
            if job.req.return_logprob:
                lp, tops = out.logprobs[i], out.top_logprobs[i]
                job.logprobs.append(lp)
                if job.sampling.top_logprobs_num:
                    job.top_logprobs.append(tops)
            delta = advance_text(job, tok)
            events.append((job, TokenEvent(token_id=tok, logprob=lp, top_logprobs=tops, text_delta=delta)))
            if job.finish is not None:
                job.done = True
                events.append((job, job_result(job, self._weight_version)))
