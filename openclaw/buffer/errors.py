"""The buffer's own exceptions (RecordError, for a bad record, lives with the record)."""

from __future__ import annotations

import os
from pathlib import Path


class BufferFull(RuntimeError):
    """The size bound is reached and nothing fully consumed is left to evict."""


class BufferNotFoundError(FileNotFoundError):
    """`TrajectoryBuffer.open(dir, create=False)` found no buffer in `dir`. A consumer pointed
    at a mistyped path must fail loudly, not wait forever on an empty buffer it created."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)
        super().__init__(
            f"no trajectory buffer at {self.directory} (no {self.directory / 'buffer.sqlite3'}): "
            f"the server creates one with `--enable-rl-intercept --rl-buffer-dir {self.directory}`; "
            "check the path (or RL_BUFFER_DIR)"
        )
