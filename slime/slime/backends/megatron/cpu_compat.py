"""Run megatron-core 0.16 on CPU over gloo: the one place where CUDA-only calls are replaced.

megatron-core assumes a GPU in a handful of places that matter for a dense GPT model with the
"local" (non-TransformerEngine) layer spec. On a machine without CUDA these raise
"Torch not compiled with CUDA enabled". `apply_cpu_compat()` replaces exactly these, and only
when `torch.cuda.is_available()` is False, so a GPU run never goes through this module:

1. `torch.cuda.current_device()` -> `torch.device("cpu")`.
   megatron allocates buffers with `device=torch.cuda.current_device()` (rotary `inv_freq`,
   pipeline p2p receive buffers, DDP grad buffers, the loss-scale / grad-norm scalars of the
   optimizer). Returning the CPU device makes those allocations land on CPU. Without CUDA the
   original function can only raise, so nothing that worked before changes meaning.
2. `torch.Tensor.cuda()` -> identity when CUDA is absent.
   With tied embeddings and PP>1, `LanguageModule.setup_embeddings_and_output_layer` does
   `weight.data = weight.data.cuda()` before all-reducing the first and last stage's copies
   (also `tensor_parallel.broadcast_data`); on CPU the tensor already is where it has to be.
3. The CUDA RNG tracker (`megatron.core.tensor_parallel.random`).
   Megatron keeps named CUDA generator states (data-parallel, model-parallel, expert) and
   forks them around dropout and weight init in parallel regions. On CPU we keep the same
   named states, but of the CPU default generator: `_get_cuda_rng_state`/`_set_cuda_rng_state`
   read/write `torch.get_rng_state()`, and the tracker class seeds a state with
   `torch.manual_seed` instead of `torch.cuda.manual_seed`. Its `fork` drops the upstream
   "CPU RNG state changed within GPU RNG context" warning, which is by construction always
   true here (the tracked state *is* the CPU state).
4. `megatron.core.transformer.utils.get_default_causal_mask` (also bound by name in
   `megatron.core.fusions.fused_softmax`): the unfused softmax path builds its causal mask
   with a hard-coded `device="cuda"`; the replacement builds the same upper-triangular mask
   on CPU.

Not patched, on purpose: megatron's optimizer (`get_megatron_optimizer`, grad scaler,
`clip_grads`) and pipeline schedules (`schedules.forward_backward_*`) hard-code
`device="cuda"` in many places; on CPU the Megatron actor uses `torch.optim` with a
tensor-parallel-aware grad-norm clip and its own pipeline schedule instead (see `optim.py`
and `pipeline.py`), which keeps this shim to the four replacements above.

Everything else a CPU run needs is configuration, not patching (see `model_builder.py`):
the local layer spec (no TransformerEngine), `use_cpu_initialization=True`, and every
CUDA-fused kernel switched off (`bias_dropout_fusion`, `apply_rope_fusion`,
`masked_softmax_fusion`, `gradient_accumulation_fusion`, `persist_layer_norm`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

_APPLIED_FLAG = "_slime_cpu_compat_applied"


def cuda_absent() -> bool:
    return not torch.cuda.is_available()


def _cpu_current_device() -> torch.device:
    return torch.device("cpu")


def _identity_cuda(self, *args, **kwargs):  # noqa: ANN001 - mirrors Tensor.cuda
    return self


def _get_cpu_rng_state(device=None, clone: bool = False, graph_safe: bool = False) -> torch.Tensor:
    state = torch.get_rng_state()
    return state.clone() if clone else state


def _set_cpu_rng_state(new_state: torch.Tensor, device: int = -1, graph_safe: bool = False) -> None:
    torch.set_rng_state(new_state)


def _make_cpu_tracker_class(base: type) -> type:
    from megatron.core.tensor_parallel import random as mrandom

    class CpuRNGStatesTracker(base):  # type: ignore[misc, valid-type]
        """Megatron's named RNG states, kept for the CPU default generator."""

        def add(self, name: str, seed: int) -> None:
            self._is_initialized = True
            if seed in self.seeds_:
                raise Exception(f"seed {seed} already exists")
            self.seeds_.add(seed)
            if name in self.states_:
                raise Exception(f"rng state {name} already exists")
            orig = torch.get_rng_state()
            torch.manual_seed(seed)
            self.states_[name] = torch.get_rng_state()
            torch.set_rng_state(orig)

        @contextlib.contextmanager
        def fork(self, name: str = mrandom._MODEL_PARALLEL_RNG_TRACKER_NAME) -> Iterator[None]:
            if name not in self.states_:
                raise Exception(f"rng state {name} is not added")
            orig_state = torch.get_rng_state()
            orig_name = self._current_state_name
            if orig_name != "default-rng":
                self.states_[orig_name] = orig_state
            torch.set_rng_state(self.states_[name])
            self._current_state_name = name
            try:
                yield
            finally:
                self.states_[name] = torch.get_rng_state()
                if orig_name != "default-rng":
                    orig_state = self.states_[orig_name]
                torch.set_rng_state(orig_state)
                self._current_state_name = orig_name

    return CpuRNGStatesTracker


def _cpu_default_causal_mask(sq: int) -> torch.Tensor:
    return torch.triu(torch.ones(sq, sq, dtype=torch.bool), diagonal=1)


def apply_cpu_compat() -> bool:
    """Install the replacements above if CUDA is absent. Idempotent; returns True if active."""
    if not cuda_absent():
        return False
    if getattr(torch.cuda, _APPLIED_FLAG, False):
        return True
    torch.cuda.current_device = _cpu_current_device
    torch.Tensor.cuda = _identity_cuda

    from megatron.core.tensor_parallel import random as mrandom

    mrandom._get_cuda_rng_state = _get_cpu_rng_state
    mrandom._set_cuda_rng_state = _set_cpu_rng_state
    # initialize_rng_tracker() instantiates the module-level name `CudaRNGStatesTracker`;
    # pointing that name at the CPU subclass keeps isinstance checks in megatron valid.
    if not getattr(mrandom.CudaRNGStatesTracker, "_slime_cpu", False):
        cpu_cls = _make_cpu_tracker_class(mrandom.CudaRNGStatesTracker)
        cpu_cls._slime_cpu = True
        mrandom.CudaRNGStatesTracker = cpu_cls
    mrandom.initialize_rng_tracker(force_reset=True)

    from megatron.core.fusions import fused_softmax
    from megatron.core.transformer import utils as mutils

    mutils.get_default_causal_mask = _cpu_default_causal_mask
    fused_softmax.get_default_causal_mask = _cpu_default_causal_mask
    setattr(torch.cuda, _APPLIED_FLAG, True)
    return True
