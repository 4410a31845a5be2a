"""Atomic training checkpoints: `$save/checkpoint-<step>/` plus a `checkpoint-latest` symlink.

Layout of one checkpoint (the folder itself is an HF model folder, or a PEFT adapter folder whose
adapter_config.json names the base, so `--model-path $save/checkpoint-latest` loads it):

    config.json, model.safetensors, tokenizer files   (full fine-tuning)
    adapter_config.json, adapter_model.safetensors     (LoRA)
    trainer_state/rank_<r>.pt   optimizer, scheduler, RNG of each data-parallel rank
    slime_meta.json             rollout id, data-source state, buffer consumer positions, weight
                                version, metrics-logger step (written last, fsync'ed)

Atomicity: everything is written into `$save/.tmp-checkpoint-<step>-<pid>` and renamed into
place only after meta is durable, then the `checkpoint-latest` link is swapped with an atomic
`os.replace` of a fresh symlink. A crash at any point leaves the previous checkpoint and the
previous link intact; stray temp folders are removed by the next save.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

META_FILE = "slime_meta.json"
LATEST = "checkpoint-latest"
PREFIX = "checkpoint-"


@dataclass
class CheckpointMeta:
    rollout_id: int  # the last completed rollout; training resumes at rollout_id + 1
    data_source: dict[str, Any] = field(default_factory=dict)
    consumer_positions: dict[str, Any] = field(default_factory=dict)
    weight_version: int = 0
    global_step: int = 0
    base_model_path: str | None = None
    use_lora: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CheckpointMeta:
        known = {k: data[k] for k in cls.__dataclass_fields__ if k in data}
        return cls(**known)


def checkpoint_dir(save_dir: str | Path, step: int) -> Path:
    return Path(save_dir) / f"{PREFIX}{step}"


def begin_checkpoint(save_dir: str | Path, step: int) -> Path:
    """Create (and return) an empty temp folder for checkpoint `step`; clears old temp folders."""
    root = Path(save_dir)
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(".tmp-checkpoint-*"):
        shutil.rmtree(stale, ignore_errors=True)
    tmp = root / f".tmp-{PREFIX}{step}-{os.getpid()}"
    tmp.mkdir()
    (tmp / "trainer_state").mkdir()
    return tmp


def rank_state_path(folder: str | Path, rank: int) -> Path:
    return Path(folder) / "trainer_state" / f"rank_{rank}.pt"


def _fsync_write(path: Path, text: str) -> None:
    with path.open("w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def commit_checkpoint(save_dir: str | Path, step: int, tmp: str | Path, meta: CheckpointMeta,
                      keep_last: int | None = None) -> Path:
    """Write meta into `tmp`, rename it to checkpoint-<step>, repoint checkpoint-latest."""
    root, tmp = Path(save_dir), Path(tmp)
    _fsync_write(tmp / META_FILE, json.dumps(meta.to_json(), indent=2, default=str))
    final = checkpoint_dir(root, step)
    if final.exists():  # re-saving the same step (e.g. after a resume): replace it
        old = root / f".tmp-old-{PREFIX}{step}-{os.getpid()}"
        os.rename(final, old)
        os.rename(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, final)
    link_tmp = root / f".tmp-latest-{os.getpid()}"
    if link_tmp.is_symlink() or link_tmp.exists():
        link_tmp.unlink()
    os.symlink(final.name, link_tmp)  # relative: the save dir can be moved
    os.replace(link_tmp, root / LATEST)
    if keep_last:
        for old_ckpt in list_checkpoints(root)[:-keep_last]:
            shutil.rmtree(old_ckpt, ignore_errors=True)
    return final


def list_checkpoints(save_dir: str | Path) -> list[Path]:
    """Complete checkpoints (meta present), oldest first."""
    root = Path(save_dir)
    found = []
    for p in root.glob(f"{PREFIX}*"):
        suffix = p.name[len(PREFIX):]
        if suffix.isdigit() and (p / META_FILE).is_file() and not p.is_symlink():
            found.append((int(suffix), p))
    return [p for _, p in sorted(found)]


def resolve_checkpoint(path: str | Path) -> Path | None:
    """`path` may be a checkpoint folder, the latest link, or a save dir (-> its latest valid
    checkpoint). Returns None when a save dir holds no checkpoint yet (fresh start)."""
    p = Path(path)
    if (p / META_FILE).is_file():
        return p.resolve()
    if (p / LATEST / META_FILE).is_file():
        return (p / LATEST).resolve()
    if p.is_dir():
        ckpts = list_checkpoints(p)
        return ckpts[-1].resolve() if ckpts else None
    if p.exists() or p.is_symlink():
        raise ValueError(f"{p} is not a checkpoint folder or save dir")
    return None


def load_meta(folder: str | Path) -> CheckpointMeta:
    path = Path(folder) / META_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{folder} is not a complete slime checkpoint (no {META_FILE})")
    return CheckpointMeta.from_json(json.loads(path.read_text()))


def capture_rng_state() -> dict[str, Any]:
    """Every RNG a training step draws from (python, numpy, torch, cuda), for a checkpoint."""
    import random

    import numpy as np
    import torch

    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def rank_state(optimizer: Any, scheduler: Any, global_step: int, **extra: Any) -> dict[str, Any]:
    """A training rank's resumable state (torch.save-able): optimizer, scheduler, step and RNG, plus
    what the backend adds (`extra`)."""
    return {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(), "global_step": global_step,
            **extra, "rng": capture_rng_state()}


def restore_rng_state(rng: dict[str, Any] | None) -> None:
    """Inverse of capture_rng_state; entries that are missing (older checkpoints) are left alone."""
    import random

    import numpy as np
    import torch

    rng = rng or {}
    if rng.get("python") is not None:
        random.setstate(rng["python"])
    if rng.get("numpy") is not None:
        np.random.set_state(rng["numpy"])
    if rng.get("torch") is not None:
        torch.set_rng_state(rng["torch"])
    if rng.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])
