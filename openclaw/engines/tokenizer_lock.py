"""One lock per tokenizer for encoding from several threads.

transformers' fast tokenizers switch a flag on the shared Rust tokenizer before each encode
(`split_special_tokens` sets `encode_special_tokens`), and encode without holding the GIL. Two
threads encoding at once can therefore encode user text with the other call's setting (a typed
`<|im_end|>` becoming a real control token) or fail with "Already borrowed". Prompt rendering runs
off the event loop, in threads, so every encode of request text takes this lock.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

_locks: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_guard = threading.Lock()


def tokenizer_lock(tokenizer: Any) -> threading.Lock:
    with _guard:
        lock = _locks.get(tokenizer)
        if lock is None:
            lock = _locks[tokenizer] = threading.Lock()
        return lock
