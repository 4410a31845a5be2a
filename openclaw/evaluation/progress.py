"""Progress of an evaluation family on stderr: `[coding/checkpoint] 7/20 replied, 41.3 s` (a line per
step, so it reads the same in a terminal, a log file and CI output), plus a heartbeat line while a
batch is still decoding and nothing has finished (CPU runs can be quiet for minutes)."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO


class Progress:
    """Counts finished items of one family; thread-safe (replies and sandbox runs finish concurrently).
    Use as a context manager: the heartbeat stops when the block ends."""

    def __init__(self, family: str, total: int, stream: TextIO | None = None, every_s: float = 5.0,
                 heartbeat_s: float = 30.0) -> None:
        self.family = family
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.every_s = every_s  # at most one step line per this many seconds (plus the last)
        self.heartbeat_s = heartbeat_s
        self.t0 = time.perf_counter()
        self._last = -every_s
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._print(f"[{family}] 0/{total} started")
        self._beat = threading.Thread(target=self._heartbeat, name=f"progress-{family}", daemon=True)
        self._beat.start()

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stop.set()
        self._beat.join()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def step(self, n: int = 1, phase: str = "done") -> None:
        with self._lock:
            self.done += n
            now = self.elapsed
            if self.done >= self.total or now - self._last >= self.every_s:
                self._last = now
                self._print(f"[{self.family}] {self.done}/{self.total} {phase}, {now:.1f} s")

    def note(self, text: str) -> None:
        self._print(f"[{self.family}] {text}")

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            with self._lock:
                if self.elapsed - self._last >= self.heartbeat_s and self.done < self.total:
                    self._last = self.elapsed
                    self._print(f"[{self.family}] {self.done}/{self.total} done, {self.elapsed:.0f} s (working)")

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)
