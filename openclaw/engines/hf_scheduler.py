"""The embedded engine's scheduler thread: admission, prefill, decode steps, controls.

One background thread owns the model and every tensor. Requests wait in a FIFO inbox; between
two decode steps, all waiting requests that fit in `max_batch_size` are prefilled together (one
left-padded forward) and merged into the running batch, so a new request joins without waiting
for others to finish (continuous batching). Finished or cancelled rows leave the batch
immediately. Controls (a weight swap, a flush) run on this thread between two steps.

`BatchScheduler` is mixed into `HFEngine`, which sets the state declared below in its
`__init__` and starts `_run` on the thread; the methods here run on that thread only, and touch
the state shared with callers (`_inbox`, `_controls`, `_paused`, ...) only under `_cond`.
"""

from __future__ import annotations

import concurrent.futures
import logging
import random
import threading
from collections import deque
from collections.abc import Callable

import torch

from openclaw.engines.base import FinishReason, TokenEvent
from openclaw.engines.detokenize import IncrementalDetokenizer, StopStringMatcher
from openclaw.engines.hf_batch import RunningBatch, left_padded
from openclaw.engines.hf_jobs import EngineClosed, Job, advance_text, deliver, job_result
from openclaw.engines.lora_rows import RowAdapters
from openclaw.engines.prefix_cache import PrefixKVCache
from openclaw.engines.sampling import RowSampling, sample_batch, token_logprobs
from openclaw.engines.work import EngineWork

# The engine has one logger, whichever of its modules logs.
log = logging.getLogger("openclaw.engines.hf_engine")


class BatchScheduler:
    """The scheduler thread's half of `HFEngine` (see the module docstring)."""

    # Set by HFEngine.__init__.
    max_batch_size: int
    original_logprobs: bool
    steps: int
    _model: torch.nn.Module
    _tokenizer: object
    _device: torch.device
    _max_context_len: int
    _eos_ids: frozenset[int]
    _pad_id: int
    _weight_version: int
    _prefix_cache: PrefixKVCache | None
    _loras: RowAdapters
    _flush_prefix_cache: bool
    _seed_rng: random.Random
    _cond: threading.Condition
    _inbox: deque[Job]
    _controls: deque[tuple[Callable[[], object], concurrent.futures.Future]]
    _paused: bool
    _closed: bool
    _batch: RunningBatch
    _admitting: list[Job]  # taken from the inbox, being prefilled (not yet in the batch)
    work: EngineWork

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
                    admit: list[Job] = []
                    if not self._paused:
                        room = self.max_batch_size - len(self._batch.rows)
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
                        reused = self._prefix_cache.stats.reused_tokens if self._prefix_cache is not None else 0
                        with self.work.timed("prefill", sum(len(j.req.input_ids) for j in admit)):
                            self._prefill(admit)
                        if self._prefix_cache is not None:  # count the tokens run, not those a hit skipped
                            self.work.prefill_tokens -= self._prefix_cache.stats.reused_tokens - reused
                        with self._cond:
                            self._admitting = []
                    if self._batch.rows and not self._paused:
                        with self.work.timed("decode", len(self._batch.rows)):
                            self._decode_step()
                except Exception as exc:  # noqa: BLE001 - fail the batch, keep the engine alive
                    log.exception("engine step failed")
                    for job in self._batch.rows + admit:
                        if not job.done:
                            deliver([(job, exc)])
                            job.done = True
                    for _, fut in controls:
                        fut.set_exception(exc)
                    self._batch.reset()
                    with self._cond:
                        self._admitting = []
            self._abort_everything()

    def _all_jobs(self) -> list[Job]:
        """Every job not yet finished (call with self._cond held)."""
        # A job is briefly in both _admitting and the batch while its prefill merges: dedupe.
        return list(dict.fromkeys([*self._inbox, *self._admitting, *self._batch.rows]))

    def _has_work(self) -> bool:
        if self._closed or self._controls or self._flush_prefix_cache:
            return True
        if any(j.cancelled for j in self._batch.rows) or any(j.cancelled for j in self._inbox):
            return True
        if self._paused:
            return False
        return bool(self._inbox or self._batch.rows)

    def _abort_everything(self) -> None:
        with self._cond:
            jobs = list(self._inbox) + self._batch.rows
            self._inbox.clear()
            controls = list(self._controls)
            self._controls.clear()
        for job in jobs:
            if not job.done:
                deliver([(job, EngineClosed("engine shut down"))])
                job.done = True
        for _, fut in controls:
            fut.set_exception(EngineClosed("engine shut down"))
        self._batch.reset()

    def _finish_cancelled(self, job: Job) -> None:
        if job.done:
            return
        job.done = True
        if job.finish is not None:  # aborted by pause(mode=abort): the caller still gets a result
            deliver([(job, self._result(job))])

    def _drop_cancelled_rows(self) -> None:
        if any(j.cancelled for j in self._batch.rows):
            for j in self._batch.rows:
                if j.cancelled:
                    self._finish_cancelled(j)
            self._batch.remove_finished()

    # -- per-request setup
    def _setup_job(self, job: Job) -> None:
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

    def _result(self, job: Job):
        """The job's result, with the version of what served it (its adapter's, if it named one)."""
        name = job.req.lora_name
        return job_result(job, self._weight_version if name is None else self._loras.versions.get(name, -1))

    # -- model calls
    def _forward(self, input_ids, attention_mask, position_ids, cache, adapters: list[str | None],
                 logits_to_keep: int = 1):
        """The model's logits, row i served with the LoRA adapter `adapters[i]` (None: the base)."""
        with self._loras.rows(adapters):
            out = self._model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                              past_key_values=cache, use_cache=True, logits_to_keep=logits_to_keep)
        return out.logits

    def _new_cache(self):
        from transformers import DynamicCache

        return DynamicCache(config=self._model.config)

    def _prefill(self, jobs: list[Job]) -> None:
        ready = []
        for job in jobs:
            if job.cancelled:  # between admission and now: e.g. its adapter was unloaded
                self._finish_cancelled(job)
                continue
            try:
                self._setup_job(job)
            except Exception as exc:  # noqa: BLE001 - one request's bad parameters must not fail its batch
                log.warning("request %s failed its setup and was dropped alone: %s", job.rid, exc)
                deliver([(job, ValueError(f"the engine could not set up this request: {exc}"))])
                job.done = True
                continue
            ready.append(job)
        jobs = ready
        # Nothing to compute for a request that wants neither tokens nor prompt log-probs.
        idle = [j for j in jobs if j.max_new == 0 and not (j.req.return_logprob and j.req.logprob_start_len >= 0)]
        for job in idle:
            job.finish, job.done = FinishReason("length", 0), True
        if idle:
            deliver([(j, self._result(j)) for j in idle])
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

    def _prefill_group(self, jobs: list[Job], full_logits: bool) -> None:
        ids, mask, pos = left_padded([tuple(j.req.input_ids) for j in jobs], self._pad_id, self._device)
        width = ids.shape[1]
        cache = self._new_cache()
        keep = 1
        if full_logits:  # one job: logits only from the position predicting prompt[start] on
            keep = width - max(jobs[0].req.logprob_start_len - 1, 0)
        logits = self._forward(ids, mask, pos, cache, [j.req.lora_name for j in jobs], logits_to_keep=keep)
        if full_logits:
            start = jobs[0].req.logprob_start_len
            jobs[0].input_logprobs = ((None,) if start == 0 else ()) + tuple(
                token_logprobs(logits[0, :-1], ids[0, width - keep + 1:]))
        self._start_rows(jobs, cache, mask, pos[:, -1], logits[:, -1, :].float())

    def _prefill_cached(self, jobs: list[Job]) -> None:
        """Prefill through the prefix cache: the jobs of one prompt share one forward, and a prompt
        that starts with a cached one runs only the tokens after that prefix. An adapter's prompts
        share KV only with its own (the cache's space is the adapter's name)."""
        by_prompt: dict[tuple[str | None, tuple[int, ...]], list[Job]] = {}
        for job in jobs:
            by_prompt.setdefault((job.req.lora_name, tuple(job.req.input_ids)), []).append(job)
        misses = []
        for (adapter, prompt), group in by_prompt.items():
            entry, reuse = self._prefix_cache.lookup(prompt, adapter or "")
            self._prefix_cache.count_shared_forward(prompt, len(group) - 1)
            if entry is None:
                misses.append((adapter, prompt, group))
            else:
                self._prefill_after_prefix(adapter, prompt, group, entry.layers, reuse)
        if misses:
            self._prefill_distinct(misses)

    def _prefill_distinct(self, groups: list[tuple[str | None, tuple[int, ...], list[Job]]]) -> None:
        """One left-padded forward over distinct (adapter, prompt)s, each stored in the prefix cache
        and then copied to every job that asked for it."""
        prompts = [prompt for _, prompt, _ in groups]
        ids, mask, pos = left_padded(prompts, self._pad_id, self._device)
        width = ids.shape[1]
        cache = self._new_cache()
        logits = self._forward(ids, mask, pos, cache, [adapter for adapter, _, _ in groups])
        for r, (adapter, prompt, _) in enumerate(groups):
            start = width - len(prompt)
            self._prefix_cache.store(prompt, [(layer.keys[r:r + 1, :, start:], layer.values[r:r + 1, :, start:])
                                              for layer in cache.layers], adapter or "")
        jobs = [job for _, _, group in groups for job in group]
        index = torch.tensor([r for r, (_, _, group) in enumerate(groups) for _ in group], device=self._device)
        if len(jobs) > len(groups):
            cache.batch_select_indices(index)
        self._start_rows(jobs, cache, mask[index], pos[index, -1], logits[index, -1, :].float())

    def _prefill_after_prefix(self, adapter: str | None, prompt: tuple[int, ...], jobs: list[Job],
                              prefix: tuple[tuple[torch.Tensor, torch.Tensor], ...], reuse: int) -> None:
        """Run `prompt[reuse:]` on top of the cached KV of its first `reuse` tokens."""
        dev = self._device
        cache = self._new_cache()
        for layer, (keys, values) in zip(cache.layers, prefix, strict=True):
            layer.update(keys[:, :, :reuse], values[:, :, :reuse])
        n = len(prompt)
        mask = torch.ones((1, n), dtype=torch.long, device=dev)
        logits = self._forward(torch.tensor([prompt[reuse:]], dtype=torch.long, device=dev), mask,
                               torch.arange(reuse, n, device=dev).unsqueeze(0), cache, [adapter])
        self._prefix_cache.store(prompt, [(layer.keys, layer.values) for layer in cache.layers], adapter or "")
        index = torch.zeros(len(jobs), dtype=torch.long, device=dev)
        if len(jobs) > 1:
            cache.batch_select_indices(index)
        self._start_rows(jobs, cache, mask[index], torch.full((len(jobs),), n - 1, dtype=torch.long, device=dev),
                         logits[index, -1, :].float())

    def _start_rows(self, jobs: list[Job], cache, mask: torch.Tensor, pos_last: torch.Tensor,
                    last: torch.Tensor) -> None:
        """Sample each prefilled job's first token from `last` (its prompt's final logits, [B, V])
        and merge the jobs that go on into the running batch."""
        # Requests that want no tokens (scoring) finish right after the prompt forward.
        wants = [j.max_new > 0 for j in jobs]
        events: list[tuple[Job, object]] = []
        for j, w in zip(jobs, wants, strict=True):
            if not w:
                j.finish = FinishReason("length", 0)
                j.done = True
                events.append((j, self._result(j)))
        live = [i for i, w in enumerate(wants) if w]
        if live:
            sel = torch.tensor(live, device=self._device)
            rows = [jobs[i] for i in live]
            new_tokens = self._sample_and_emit(rows, last[sel] if len(live) < len(jobs) else last, events)
            if len(live) < len(jobs):
                cache.batch_select_indices(sel)
                mask, pos_last = mask[sel], pos_last[sel]
            self._batch.merge(rows, cache, mask, pos_last + 1, new_tokens)
        deliver(events)
        self._batch.remove_finished()

    def _decode_step(self) -> None:
        batch = self._batch
        mask = torch.cat([batch.mask, batch.mask.new_ones((batch.mask.shape[0], 1))], dim=1)
        # Without padding the mask is all ones: passing None lets SDPA skip building a 4-D mask.
        logits = self._forward(batch.last_tokens, mask if batch.padded else None, batch.next_pos.unsqueeze(-1),
                               batch.cache, [j.req.lora_name for j in batch.rows])
        batch.mask = mask
        batch.next_pos = batch.next_pos + 1
        self.steps += 1
        events: list[tuple[Job, object]] = []
        batch.last_tokens = self._sample_and_emit(batch.rows, logits[:, -1, :].float(), events)
        deliver(events)
        if self._prefix_cache is not None:
            self._remember_finished()
        batch.remove_finished()

    def _remember_finished(self) -> None:
        """Keep the KV of each row that finished this step in the prefix cache: its prompt and all
        of its reply but the last token (which was sampled, never run). A chat's next request starts
        with exactly these tokens (the template closes the reply with the same end token), so only
        the new message is prefilled."""
        batch = self._batch
        for r, job in enumerate(batch.rows):
            if not job.done or job.cancelled or len(job.output_ids) < 2:
                continue
            ids = tuple(job.req.input_ids) + tuple(job.output_ids[:-1])
            # Rows are left-padded: the row's own tokens are its last mask-sum columns, in order.
            n = int(batch.mask[r].sum())
            if n != len(ids):  # a layout this code does not expect: keep nothing rather than wrong KV
                log.warning("prefix cache: request %s has %d cached positions for %d tokens; not kept", job.rid, n,
                            len(ids))
                continue
            self._prefix_cache.store(ids, [(layer.keys[r:r + 1, :, -n:], layer.values[r:r + 1, :, -n:])
                                           for layer in batch.cache.layers], job.req.lora_name or "")

    def _sample_and_emit(self, rows: list[Job], logits: torch.Tensor, events: list) -> torch.Tensor:
        """Sample one token per row, queue its TokenEvent (and the result of a row it finishes) on
        `events`, and return the tokens as the next step's input [B, 1]."""
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
            delta = advance_text(job, tok)
            events.append((job, TokenEvent(token_id=tok, logprob=lp, top_logprobs=tops, text_delta=delta)))
            if job.finish is not None:
                job.done = True
                events.append((job, self._result(job)))
        return torch.tensor(out.tokens, dtype=torch.long, device=self._device).unsqueeze(-1)
