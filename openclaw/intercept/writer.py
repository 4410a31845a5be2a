"""Group commit: one thread owns the buffer's writes; everything queued while a transaction
(and its fsync) runs goes into the next one. A burst of 32 concurrent turns costs a couple of
fsyncs instead of 32, and the event loop never blocks on disk."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.store import Op

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
    def __init__(self, buffer: TrajectoryBuffer, max_batch: int = 256):
        self.buffer = buffer
        self.max_batch = max_batch
        self._q: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="rl-buffer-writer", daemon=True)
        self._thread.start()
        self.commits = 0  # transactions committed (for the benchmark / stats)

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

    def _run(self) -> None:
        while True:
            item = self._q.get()
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
