"""llama.cpp through llama-cpp-python's low-level ctypes API: one model, one context with one
KV-cache sequence per request slot, one reusable `llama_batch`, LoRA adapters.

Why the low-level API and not `llama_cpp.Llama`: `Llama` drives one sequence at a time; batching
several requests into one `llama_decode` needs a `llama_batch` whose tokens carry different
`seq_id`s, each sequence with its own KV cells (`kv_unified=False`: every slot gets its own
`n_ctx_seq` cells and attends over those only, so a request's logits do not depend on the other
requests' lengths).

Not thread-safe: one thread (the engine's scheduler) calls everything here after construction.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger("openclaw.engines.llamacpp_engine")
_INSTALL_HINT = "pip install llama-cpp-python==0.3.36"


class LlamaCppUnavailable(RuntimeError):
    """llama-cpp-python is not installed."""


def import_llama_cpp() -> Any:
    """The `llama_cpp` module, or a clear error saying how to install it."""
    try:
        import llama_cpp
    except ImportError as exc:
        raise LlamaCppUnavailable(f"the llama.cpp engine needs llama-cpp-python: {_INSTALL_HINT}") from exc
    return llama_cpp


# ggml's log levels (ggml.h: NONE, DEBUG, INFO, WARN, ERROR, CONT) as Python's. llama-cpp-python's
# own forwarder maps an older numbering (it prints INFO lines as warnings), hence ours.
_GGML_LEVELS = {0: logging.CRITICAL, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
llama_log = logging.getLogger("openclaw.engines.llamacpp_engine.llama_cpp")


@functools.cache
def forward_llama_cpp_logs(lib: Any) -> Any:
    """Send llama.cpp's log lines to the `openclaw.engines.llamacpp_engine.llama_cpp` logger (a
    page of INFO per model load stays hidden by default; a refused adapter's ERROR shows). Cached:
    llama.cpp keeps the callback pointer, so the callback object must live as long as the process."""

    @lib.llama_log_callback
    def callback(level: int, text: bytes, _user: Any) -> None:
        line = text.decode("utf-8", errors="replace").rstrip("\n")
        if line:
            llama_log.log(_GGML_LEVELS.get(level, logging.DEBUG), "%s", line)

    lib.llama_log_set(callback, ctypes.c_void_p(0))
    return callback


def default_threads() -> int:
    """All cores but one. llama.cpp's threads meet at a barrier after every graph node (~1000 per
    token), so one thread that shares its core with another busy process stalls them all: measured
    on 2 cores with one taken by another process, 2 threads ran at ~3 s per token, 1 thread at
    ~20 ms. The spare core also keeps the server's own Python (HTTP, sampling) off llama.cpp's."""
    return max(1, (os.cpu_count() or 1) - 1)


@dataclass(frozen=True)
class RuntimeConfig:
    """How the context is sized. KV memory is allocated up front: slots x ctx_per_slot cells."""

    slots: int = 8  # concurrent sequences (the engine's max batch size)
    ctx_per_slot: int = 4096  # KV cells per sequence: the longest prompt + reply a request can have
    n_batch: int = 512  # tokens per llama_decode (prefill is chunked to this)
    threads: int = field(default_factory=default_threads)
    # Flash attention on (llama.cpp's own default resolves to on for CPU; llama-cpp-python's `Llama`
    # turns it off): it changes the attention kernel, so greedy outputs compare equal only between
    # runs with the same setting.
    flash_attn: bool = True


@dataclass(frozen=True)
class BatchEntry:
    """One token of a `llama_decode` call."""

    token: int
    pos: int
    seq: int
    logits: bool


class LlamaRuntime:
    """A loaded GGUF model and its multi-sequence context."""

    def __init__(self, gguf_path: str | Path, cfg: RuntimeConfig) -> None:
        lib = import_llama_cpp()
        self._lib = lib
        self.cfg = cfg
        forward_llama_cpp_logs(lib)
        lib.llama_backend_init()
        mparams = lib.llama_model_default_params()
        model = lib.llama_model_load_from_file(str(gguf_path).encode(), mparams)
        if not model:
            raise ValueError(f"llama.cpp could not load the GGUF model {gguf_path}")
        self._model = model
        cparams = lib.llama_context_default_params()
        cparams.n_ctx = cfg.slots * cfg.ctx_per_slot
        cparams.n_seq_max = cfg.slots
        cparams.n_batch = cparams.n_ubatch = cfg.n_batch
        cparams.n_threads = cparams.n_threads_batch = cfg.threads
        cparams.kv_unified = False
        cparams.flash_attn_type = lib.LLAMA_FLASH_ATTN_TYPE_ENABLED if cfg.flash_attn else lib.LLAMA_FLASH_ATTN_TYPE_DISABLED
        cparams.no_perf = True
        ctx = lib.llama_init_from_model(model, cparams)
        if not ctx:
            lib.llama_model_free(model)
            raise ValueError(f"llama.cpp could not create a context ({cfg})")
        self._ctx = ctx
        self._mem = lib.llama_get_memory(ctx)
        self._vocab = lib.llama_model_get_vocab(model)
        self.n_vocab = int(lib.llama_vocab_n_tokens(self._vocab))
        self.ctx_per_slot = int(lib.llama_n_ctx_seq(ctx))
        self.n_ctx_train = int(lib.llama_model_n_ctx_train(model))
        self.n_head = int(lib.llama_model_n_head(model))
        self.n_head_kv = int(lib.llama_model_n_head_kv(model))
        self.arch = self.meta("general.architecture")
        self._batch = lib.llama_batch_init(cfg.n_batch, 0, 1)
        self._warned_keep = False
        self._closed = False

    # ---- model facts ----------------------------------------------------------------------
    def meta(self, key: str) -> str:
        buf = ctypes.create_string_buffer(256)
        n = self._lib.llama_model_meta_val_str(self._model, key.encode(), buf, len(buf))
        if n < 0:
            raise KeyError(f"GGUF has no metadata {key!r}")
        return buf.value.decode()

    def tokenize(self, text: str) -> list[int]:
        """llama.cpp's own tokenization (special tokens parsed, none added): for the vocab check."""
        data = text.encode()
        cap = len(data) + 8
        out = (self._lib.llama_token * cap)()
        n = self._lib.llama_tokenize(self._vocab, data, len(data), out, cap, False, True)
        if n < 0:
            raise ValueError(f"llama_tokenize needs {-n} tokens, had room for {cap}")
        return list(out[:n])

    # ---- decoding -------------------------------------------------------------------------
    def decode(self, entries: list[BatchEntry]) -> np.ndarray:
        """Run one `llama_decode` over `entries`; return the logits of the entries that asked for
        them, in order, as a [n, vocab] float32 array (a copy: llama.cpp reuses its buffer)."""
        if not 0 < len(entries) <= self.cfg.n_batch:
            raise ValueError(f"a decode takes 1..{self.cfg.n_batch} tokens, got {len(entries)}")
        b = self._batch
        for i, e in enumerate(entries):
            b.token[i] = e.token
            b.pos[i] = e.pos
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = e.seq
            b.logits[i] = 1 if e.logits else 0
        b.n_tokens = len(entries)
        rc = self._lib.llama_decode(self._ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with code {rc} (1: no KV slot, -1: invalid batch)")
        n_out = sum(1 for e in entries if e.logits)
        if n_out == 0:
            return np.empty((0, self.n_vocab), dtype=np.float32)
        ptr = self._lib.llama_get_logits(self._ctx)
        return np.ctypeslib.as_array(ptr, shape=(n_out, self.n_vocab)).copy()

    def free_seq(self, seq: int) -> None:
        """Drop every KV cell of sequence `seq` (its slot is then empty for the next request)."""
        self._lib.llama_memory_seq_rm(self._mem, seq, -1, -1)

    def keep_prefix(self, seq: int, n: int) -> int:
        """Keep the KV of positions [0, n) of sequence `seq`, drop the rest; return how many
        positions it now holds from 0 on: `n`, or 0 where this model's memory cannot be cut there
        (a recurrent state, or a sliding window that already let the first positions go), in which
        case the sequence is emptied and the request decodes its whole prompt."""
        lib, mem = self._lib, self._mem
        if n > 0 and lib.llama_memory_seq_rm(mem, seq, n, -1):
            if lib.llama_memory_seq_pos_min(mem, seq) == 0 and lib.llama_memory_seq_pos_max(mem, seq) == n - 1:
                return n
        if n > 0 and not self._warned_keep:
            self._warned_keep = True
            log.warning("this model's KV cannot be cut to a prefix: requests decode their whole prompt")
        self.free_seq(seq)
        return 0

    # ---- adapters -------------------------------------------------------------------------
    def load_adapter(self, path: str | Path) -> Any:
        adapter = self._lib.llama_adapter_lora_init(self._model, str(path).encode())
        if not adapter:
            raise ValueError(f"llama.cpp refused the LoRA adapter {path} (see its log for the reason)")
        return adapter

    def set_adapter(self, adapter: Any | None) -> None:
        """Serve with `adapter` at scale 1 (None: the base model) from the next decode on."""
        lib = self._lib
        if adapter is None:
            rc = lib.llama_set_adapters_lora(self._ctx, None, 0, None)
        else:
            arr = (lib.llama_adapter_lora_p_ctypes * 1)(adapter)
            scales = (ctypes.c_float * 1)(1.0)
            rc = lib.llama_set_adapters_lora(self._ctx, arr, 1, scales)
        if rc != 0:
            raise RuntimeError(f"llama_set_adapters_lora failed with code {rc}")

    def free_adapter(self, adapter: Any) -> None:
        self._lib.llama_adapter_lora_free(adapter)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._lib.llama_batch_free(self._batch)
        self._lib.llama_free(self._ctx)
        self._lib.llama_model_free(self._model)
