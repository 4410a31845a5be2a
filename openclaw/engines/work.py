"""What the embedded engine's scheduler thread spent its time on: seconds in model calls and the
tokens they processed, for a profile to divide (openclaw.demo.profile).

Wall and CPU seconds are both kept: the thread's own CPU time (`time.thread_time`) falls below its
wall time when other threads share the cores, which is how a profile tells contention from work.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass


@dataclass
class EngineWork:
    prefill_s: float = 0.0
    prefill_cpu_s: float = 0.0
    prefill_tokens: int = 0
    decode_s: float = 0.0
    decode_cpu_s: float = 0.0
    decode_tokens: int = 0
    decode_steps: int = 0
    weight_loads: int = 0
    weight_loads_merged_in_memory: int = 0  # of those, LoRA pushes merged from kept base weights
    weight_load_s: float = 0.0

    @contextmanager
    def timed(self, phase: str, tokens: int) -> Iterator[None]:
        """Add the block's wall and thread-CPU seconds and `tokens` to `phase` ("prefill" or "decode")."""
        wall, cpu = time.perf_counter(), time.thread_time()
        try:
            yield
        finally:
            setattr(self, f"{phase}_s", getattr(self, f"{phase}_s") + time.perf_counter() - wall)
            setattr(self, f"{phase}_cpu_s", getattr(self, f"{phase}_cpu_s") + time.thread_time() - cpu)
            setattr(self, f"{phase}_tokens", getattr(self, f"{phase}_tokens") + tokens)
            if phase == "decode":
                self.decode_steps += 1

    def snapshot(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}
