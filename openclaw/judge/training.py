"""`python -m openclaw.judge train-head`: fit the CPU judge's logistic head on train.jsonl and
report dev accuracy with ablations (embedding only, lexicon only, both, with/without rules)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from openclaw.judge.dataset import DEV_PATH, TRAIN_PATH, load_labeled
from openclaw.judge.embedder import EMBEDDING_MODEL_ID, SentenceEmbedder
from openclaw.judge.features import build_matrix, side_feature_names
from openclaw.judge.head import CLASSES, DEFAULT_HEAD_PATH, LogisticHead, train_logistic
from openclaw.judge.metrics import evaluate_predictions
from openclaw.judge.prompts import normalize_role
from openclaw.judge.rules import decisive_rule
from openclaw.judge.schema import JudgeInput

DEFAULT_L2 = 1.0


def featurize(embedder: SentenceEmbedder, items: list[JudgeInput]) -> np.ndarray:
    responses = [i.response for i in items]
    states = [i.next_state for i in items]
    emb = embedder.embed(responses + states)
    return build_matrix(responses, states, [i.next_state_role for i in items], emb[: len(items)], emb[len(items):])


def predict(head: LogisticHead, x: np.ndarray, items: list[JudgeInput], use_rules: bool) -> list[int]:
    proba = head.predict_proba(x)
    out = []
    for item, p in zip(items, proba, strict=True):
        rule = decisive_rule(item.next_state, normalize_role(item.next_state_role)) if use_rules else None
        out.append(rule.label if rule else CLASSES[int(np.argmax(p))])
    return out


def _columns(x: np.ndarray, dim: int, which: str) -> np.ndarray:
    if which == "embedding":
        return x[:, :dim]
    if which == "lexicon":
        return x[:, dim:]
    return x


def train_head(train_path: Path = TRAIN_PATH, dev_path: Path | None = DEV_PATH,
               out_path: Path = DEFAULT_HEAD_PATH, l2: float = DEFAULT_L2) -> dict[str, float]:
    embedder = SentenceEmbedder()
    tr_items, tr_y = load_labeled(train_path)
    x_tr = featurize(embedder, tr_items)
    y_tr = np.array(tr_y)
    meta = {"embedding_model": EMBEDDING_MODEL_ID, "embedding_dim": embedder.dim,
            "side_features": side_feature_names(), "l2": l2, "train_records": len(tr_y),
            "train_file": Path(train_path).name}
    head = train_logistic(x_tr, y_tr, l2=l2, meta=meta)
    head.save(out_path)
    print(f"saved head ({head.weight.shape[1]} features, {len(tr_y)} training records) to {out_path}")
    scores: dict[str, float] = {}
    tr_acc = float(np.mean(np.array(predict(head, x_tr, tr_items, True)) == y_tr))
    print(f"train accuracy (with rules): {tr_acc:.3f}")
    if dev_path is None:
        return scores
    dev_items, dev_y = load_labeled(dev_path)
    x_dev = featurize(embedder, dev_items)
    print(f"dev ablations on {len(dev_y)} records (head refit per feature set on the training set):")
    for which in ("embedding", "lexicon", "all"):
        sub_head = head if which == "all" else train_logistic(_columns(x_tr, embedder.dim, which), y_tr, l2=l2)
        for use_rules in (False, True):
            pred = predict(sub_head, _columns(x_dev, embedder.dim, which), dev_items, use_rules)
            acc = evaluate_predictions(dev_y, pred).accuracy
            key = f"{which}{'+rules' if use_rules else ''}"
            scores[key] = acc
            print(f"  {key:<18} {acc:.3f}")
    return scores
