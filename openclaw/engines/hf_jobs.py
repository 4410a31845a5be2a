"""One request inside the embedded engine: its state from submission to result, how each sampled
token advances its text (stop strings, stop tokens, length), and how items reach its caller.

The scheduler thread owns a job's state; the caller's event loop only reads its queue.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from openclaw.engines.base import FinishReason, GenerationRequest, GenerationResult, TokenEvent
from openclaw.engines.detokenize import IncrementalDetokenizer, StopStringMatcher
from openclaw.engines.sampling import RowSampling


class EngineClosed(RuntimeError):
    pass


@dataclass(eq=False)
class Job:
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


def advance_text(job: Job, tok: int) -> str:
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


def job_result(job: Job, weight_version: int) -> GenerationResult:
    text = job.final_text if job.final_text is not None else (job.detok.text[: job.emitted] if job.detok else "")
    return GenerationResult(
        request_id=job.rid, prompt_ids=tuple(job.req.input_ids), output_ids=tuple(job.output_ids), text=text,
        output_logprobs=tuple(job.logprobs), output_top_logprobs=tuple(job.top_logprobs),
        input_logprobs=job.input_logprobs, finish_reason=job.finish or FinishReason("abort", None),
        weight_version=weight_version)


def deliver(items: list[tuple[Job, object]]) -> None:
    """Hand each item to its job's caller, one thread-safe call per event loop."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[Job, object]]] = {}
    for job, item in items:
        by_loop.setdefault(job.loop, []).append((job, item))
    for loop, batch in by_loop.items():
        try:
            loop.call_soon_threadsafe(_put_all, batch)
        except RuntimeError:  # the caller's loop is closed: nobody is listening any more
            pass


def _put_all(batch: list[tuple[Job, object]]) -> None:
    for job, item in batch:
        job.queue.put_nowait(item)


async def queued_stream(owner: Any, job: Job) -> AsyncIterator[TokenEvent | GenerationResult]:
    """Put `job` in the inbox of `owner`'s scheduler thread (its `_cond`, `_inbox`, `_closed`) and
    yield what the thread delivers, through the result. Closed early (the client went away), it
    marks the job cancelled: the scheduler frees its place on its next pass."""
    with owner._cond:
        if owner._closed:
            raise EngineClosed("engine is shut down")
        owner._inbox.append(job)
        owner._cond.notify()
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
            with owner._cond:
                job.cancelled = True
                owner._cond.notify()


async def run_control(owner: Any, fn: Callable[[], object]) -> Any:
    """Run `fn` on `owner`'s scheduler thread between two steps (a weight swap, a flush) and
    return its result."""
    fut: concurrent.futures.Future = concurrent.futures.Future()
    with owner._cond:
        if owner._closed:
            raise EngineClosed("engine is shut down")
        owner._controls.append((fn, fut))
        owner._cond.notify()
    return await asyncio.wrap_future(fut)


async def close_scheduler(owner: Any) -> None:
    """Stop `owner`'s scheduler thread (it aborts what is left) and wait for it, once."""
    with owner._cond:
        if owner._closed:
            return
        owner._closed = True
        owner._cond.notify()
    await asyncio.to_thread(owner._thread.join, 30)
