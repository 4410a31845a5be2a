"""Group commit: one thread owns the buffer's writes; everything queued while a transaction
(and its fsync) runs goes into the next one. A burst of 32 concurrent turns costs a couple of
fsyncs instead of 32, and the event loop never blocks on disk. The same thread runs periodic
maintenance (retention) on a timer from the moment it starts, with or without requests."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from openclaw.buffer import Op, TrajectoryBuffer

log = logging.getLogger("openclaw.intercept")

_STOP = object()


def _resolve(fut: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    if fut.cancelled():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


class GroupCommitWriter:
    """`periodic(buffer)` (if given) runs on the writer thread every `period_s` seconds, between
    group commits; an error in it is logged and counted in `periodic_failures`, and the next
    period retries."""

    def __init__(self, buffer: TrajectoryBuffer, max_batch: int = 256,
                 periodic: Callable[[TrajectoryBuffer], Any] | None = None, period_s: float = 5.0):
        if periodic is not None and not period_s > 0:
            raise ValueError(f"period_s must be > 0, got {period_s}")
        self.buffer = buffer
        self.max_batch = max_batch
        self._periodic = periodic
        self._period_s = period_s
        self._next_due = time.monotonic() + period_s
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.commits = 0  # transactions committed (for the benchmark / stats)
        self.periodic_runs = 0
        self.periodic_failures = 0
        self._thread = threading.Thread(target=self._run, name="rl-buffer-writer", daemon=True)
        self._thread.start()

    def submit(self, ops: Sequence[Op]) -> asyncio.Future:
        """Queue ops (applied in order, in one transaction with whatever else is queued);
        the future resolves to the per-op results once they are durable."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._q.put(("ops", list(ops), fut, loop))
        return fut

    def call(self, fn: Callable[[TrajectoryBuffer], Any]) -> asyncio.Future:
        """Run `fn(buffer)` on the writer thread (maintenance: retention purge, idle finalize)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._q.put(("call", fn, fut, loop))
        return fut

    def close(self, timeout: float = 30.0) -> None:
        self._q.put(_STOP)
        self._thread.join(timeout)

    def _next(self) -> Any:
        """The next queued item; runs the periodic job whenever it is due (also under load)."""
        while True:
            if self._periodic is not None:
                wait = self._next_due - time.monotonic()
                if wait <= 0:
                    self._run_periodic()
                    continue
                try:
                    return self._q.get(timeout=wait)
                except queue.Empty:
                    continue
            return self._q.get()

    def _run_periodic(self) -> None:
        assert self._periodic is not None
        try:
            self._periodic(self.buffer)
            self.periodic_runs += 1
        except Exception:  # noqa: BLE001 - maintenance must not stop the writer; the next period retries
            self.periodic_failures += 1
            log.exception("trajectory buffer maintenance failed (%d failure(s) so far)", self.periodic_failures)
        self._next_due = time.monotonic() + self._period_s

    def _run(self) -> None:
        while True:
            item = self._next()
            if item is _STOP:
                return
            if item[0] == "call":
                self._do_call(item)
                continue
            batch = [item]
            stop = False
            while len(batch) < self.max_batch:
                try:
                    nxt = self._q.get_nowait()
                except queue.Empty:
                    break
                if nxt is _STOP:
                    stop = True
                    break
                if nxt[0] == "call":
                    self._commit(batch)
                    batch = []
                    self._do_call(nxt)
                    continue
                batch.append(nxt)
            if batch:
                self._commit(batch)
            if stop:
                return

    def _commit(self, batch: list[Any]) -> None:
        ops: list[Op] = []
        spans = []
        for _, item_ops, _fut, _loop in batch:
            spans.append((len(ops), len(ops) + len(item_ops)))
            ops.extend(item_ops)
        try:
            results = self.buffer.write_ops(ops)
            err: BaseException | None = None
            self.commits += 1
        except BaseException as e:  # noqa: BLE001 - every waiter must hear about it
            log.exception("trajectory buffer write failed")
            results, err = [], e
        for (start, end), (_, _ops, fut, loop) in zip(spans, batch, strict=True):
            _notify(loop, fut, results[start:end] if err is None else None, err)

    def _do_call(self, item: Any) -> None:
        _, fn, fut, loop = item
        try:
            res, err = fn(self.buffer), None
        except BaseException as e:  # noqa: BLE001
            res, err = None, e
        _notify(loop, fut, res, err)


def _notify(loop: asyncio.AbstractEventLoop, fut: asyncio.Future, result: Any, exc: BaseException | None) -> None:
    try:
        loop.call_soon_threadsafe(_resolve, fut, result, exc)
    except RuntimeError:  # the loop is closed (shutdown): nobody is waiting any more
        pass
