"""A small multinomial logistic-regression head (numpy inference, torch L-BFGS training), saved
as a .npz next to this file so the CPU judge needs no training at run time."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CLASSES: tuple[int, ...] = (-1, 0, 1)
DEFAULT_HEAD_PATH = Path(__file__).resolve().parent / "data" / "head.npz"


@dataclass
class LogisticHead:
    weight: np.ndarray  # (n_classes, n_features)
    bias: np.ndarray  # (n_classes,)
    mean: np.ndarray  # feature standardisation
    std: np.ndarray
    meta: dict

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        z = ((x - self.mean) / self.std) @ self.weight.T + self.bias
        z = z - z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def save(self, path: str | Path) -> None:
        np.savez_compressed(path, weight=self.weight.astype(np.float32), bias=self.bias.astype(np.float32),
                            mean=self.mean.astype(np.float32), std=self.std.astype(np.float32),
                            meta=np.array(json.dumps(self.meta)))

    @classmethod
    def load(cls, path: str | Path = DEFAULT_HEAD_PATH) -> LogisticHead:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"judge head weights not found at {path}: run `python -m openclaw.judge train-head`")
        with np.load(path, allow_pickle=False) as z:
            return cls(z["weight"], z["bias"], z["mean"], z["std"], json.loads(str(z["meta"])))


def train_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, max_iter: int = 500,
                   class_weight: bool = True, meta: dict | None = None) -> LogisticHead:
    """Fit softmax regression with L2 on standardised features. y holds labels from CLASSES."""
    import torch

    mean = x.mean(axis=0)
    std = x.std(axis=0) + 1e-6
    xs = torch.tensor((x - mean) / std, dtype=torch.float64)
    idx = torch.tensor([CLASSES.index(int(v)) for v in y])
    counts = torch.bincount(idx, minlength=len(CLASSES)).double().clamp(min=1)
    cw = (len(y) / (len(CLASSES) * counts)) if class_weight else torch.ones(len(CLASSES), dtype=torch.float64)
    w = torch.zeros((len(CLASSES), x.shape[1]), dtype=torch.float64, requires_grad=True)
    b = torch.zeros(len(CLASSES), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([w, b], max_iter=max_iter, line_search_fn="strong_wolfe")
    n = len(y)

    def closure():
        opt.zero_grad()
        logits = xs @ w.T + b
        loss = torch.nn.functional.cross_entropy(logits, idx, weight=cw) + l2 / (2 * n) * (w * w).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return LogisticHead(w.detach().numpy(), b.detach().numpy(), mean, std, dict(meta or {}))
