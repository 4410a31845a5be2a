"""Several LoRA adapters in one batch: every row of a forward gets its own adapter's delta.

One server learns each of its users separately (an adapter per user) and still decodes all of them
together, as S-LoRA/Punica do on GPU: the served model stays as it is, and a forward hook on each
adapted linear layer adds row b's `scale * (x_b @ A_u^T) @ B_u^T` for its adapter u.

How, on a CPU where a decode step is bound by reading weights: the adapters present in the batch
are concatenated per layer once (A^T side by side, B^T stacked), and a layer then costs two
matmuls, `x @ [A_1^T .. A_U^T]` and, after zeroing each row's columns of the other adapters,
`@ [B_1^T; ..; B_U^T]`: every active adapter's weights are read once per step and nothing is
gathered per row. The concatenation is rebuilt only when the set of adapters in the batch changes
(a user joins or leaves it), not every step.

Why not peft's mixed-batch forward (`adapter_names=`): it needs the served model wrapped as a
PeftModel with every adapter injected into its layers, while this engine serves a plain model that
it replaces whole on a weight push (lora_merge.py), and it loops over the adapters present, one
sub-batch each. Hooks leave the served model and its swap untouched.

Only the engine's scheduler thread calls these methods, so they take no lock; `versions` is read
from other threads, so the adapter table is replaced, never mutated.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch

from openclaw.engines.lora_merge import LoRALayer

_MARK = "_openclaw_lora_rows"  # set on our hook functions, so a model copied with them can be cleaned


@dataclass(frozen=True)
class Adapter:
    layers: dict[str, tuple[torch.Tensor, torch.Tensor]]  # layer -> A^T [in, r], scale * B^T [r, out]
    version: int

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for pair in self.layers.values() for t in pair)


def check_fits(model: torch.nn.Module, layers: dict[str, LoRALayer]) -> str | None:
    """Why `layers` cannot be applied to `model` (None: it can): every layer must be a linear layer
    of the model with the adapter's input and output sizes."""
    modules = dict(model.named_modules())
    for name, lora in layers.items():
        mod = modules.get(name)
        if not isinstance(mod, torch.nn.Linear):
            return f"the served model has no linear layer {name!r}"
        if lora.a.shape[1] != mod.in_features or lora.b.shape[0] != mod.out_features:
            return (f"layer {name!r} is {mod.in_features}->{mod.out_features}, the adapter's is "
                    f"{lora.a.shape[1]}->{lora.b.shape[0]}")
    return None


class RowAdapters:
    """The adapters loaded by name, and the hooks that apply them row by row."""

    def __init__(self, dtype: torch.dtype, device: torch.device) -> None:
        self._dtype, self._device = dtype, device
        self._adapters: dict[str, Adapter] = {}
        self._layers: tuple[str, ...] = ()  # every layer some adapter adapts (each hooked)
        self._generation = 0  # bumped on every load/unload: the concatenation is stale then
        # The adapters of the running forward, concatenated per layer: A^T [in, U*r], B^T [U*r, out].
        self._cat_key: tuple[int, tuple[str, ...]] | None = None
        # ..., and r (the block width); None where no active adapter adapts the layer
        self._cat: dict[str, tuple[torch.Tensor, torch.Tensor, int] | None] = {}
        self._masks: dict[int, torch.Tensor] = {}  # r -> [B, 1, U*r]: 1 on each row's own adapter's block
        self._active = False
        self._handles: list[torch.utils.hooks.RemovableHandle] = []

    @property
    def versions(self) -> dict[str, int]:
        return {name: a.version for name, a in self._adapters.items()}

    def nbytes(self) -> int:
        """Memory held for the adapters: their own tensors and the concatenation a batch reads."""
        return sum(a.nbytes for a in self._adapters.values()) + sum(
            c[0].numel() * c[0].element_size() + c[1].numel() * c[1].element_size()
            for c in self._cat.values() if c is not None)

    def put(self, name: str, layers: dict[str, LoRALayer], version: int, model: torch.nn.Module) -> None:
        """Load or replace `name`, and hook `model` (the served one) for it."""
        own = {layer: (lora.a.t().to(self._dtype, copy=True).contiguous(),
                       (lora.b.t() * lora.scale).to(self._dtype).contiguous())
               for layer, lora in layers.items()}
        self._adapters = {**self._adapters, name: Adapter(own, version)}
        self._changed(model)

    def remove(self, name: str, model: torch.nn.Module) -> None:
        self._adapters = {n: a for n, a in self._adapters.items() if n != name}
        self._changed(model)

    def install(self, model: torch.nn.Module) -> None:
        """Hook the adapted layers of `model` (a newly swapped-in served model) and no others."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for module in model.modules():  # a deep copy of a hooked model carries our hooks along
            for key, fn in list(module._forward_hooks.items()):
                if getattr(fn, _MARK, False):
                    del module._forward_hooks[key]
        modules = dict(model.named_modules())
        for name in self._layers:
            self._handles.append(modules[name].register_forward_hook(self._hook(name)))

    @contextmanager
    def rows(self, names: list[str | None]) -> Iterator[None]:
        """Within the block, forwards apply row i's adapter `names[i]` (None: the base model)."""
        active = tuple(sorted({n for n in names if n is not None}))
        self._active = bool(active)
        if active:
            self._prepare(active, names)
        try:
            yield
        finally:
            self._active = False

    def _changed(self, model: torch.nn.Module) -> None:
        self._generation += 1
        self._cat_key, self._cat = None, {}
        self._layers = tuple(sorted({layer for a in self._adapters.values() for layer in a.layers}))
        self.install(model)

    def _prepare(self, active: tuple[str, ...], names: list[str | None]) -> None:
        key = (self._generation, active)
        if key != self._cat_key:
            self._cat_key, self._cat = None, {}  # the old concatenation is freed before the new one is built
            self._cat = {layer: self._concat(layer, active) for layer in self._layers}
            self._cat_key = key
        block = {n: i for i, n in enumerate(active)}
        widths = {c[2] for c in self._cat.values() if c is not None}
        self._masks = {}
        for r in widths:
            mask = torch.zeros((len(names), 1, len(active) * r), dtype=self._dtype, device=self._device)
            for row, n in enumerate(names):
                if n is not None:
                    mask[row, 0, block[n] * r:(block[n] + 1) * r] = 1
            self._masks[r] = mask

    def _concat(self, layer: str, active: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor, int] | None:
        pairs = [self._adapters[n].layers.get(layer) for n in active]
        present = [p for p in pairs if p is not None]
        if not present:
            return None
        r = max(p[0].shape[1] for p in present)
        at = torch.zeros((present[0][0].shape[0], len(active) * r), dtype=self._dtype, device=self._device)
        bt = torch.zeros((len(active) * r, present[0][1].shape[1]), dtype=self._dtype, device=self._device)
        for i, pair in enumerate(pairs):
            if pair is not None:
                k = pair[0].shape[1]
                at[:, i * r:i * r + k] = pair[0]
                bt[i * r:i * r + k, :] = pair[1]
        return at, bt, r

    def _hook(self, layer: str):
        def hook(module: torch.nn.Module, args: tuple, out: torch.Tensor) -> torch.Tensor | None:
            if not self._active:
                return None
            entry = self._cat[layer]
            if entry is None:
                return None
            at, bt, r = entry
            mask = self._masks[r]
            x = args[0].reshape(mask.shape[0], -1, at.shape[0])
            delta = torch.matmul(torch.matmul(x, at).mul_(mask), bt)
            return out + delta.view_as(out)

        setattr(hook, _MARK, True)
        return hook
