"""Classification metrics for `python -m openclaw.judge eval` (pure functions)."""

from __future__ import annotations

from dataclasses import dataclass

LABELS: tuple[int, ...] = (1, 0, -1)


@dataclass(frozen=True)
class EvalReport:
    n: int
    accuracy: float
    precision: dict[int, float]
    recall: dict[int, float]
    confusion: dict[int, dict[int, int]]  # gold -> predicted -> count

    def format(self) -> str:
        lines = [f"n={self.n}  accuracy={self.accuracy:.3f}", "", "label  precision  recall  support"]
        for lab in LABELS:
            support = sum(self.confusion[lab].values())
            lines.append(f"{lab:>5}  {self.precision[lab]:>9.3f}  {self.recall[lab]:>6.3f}  {support:>7}")
        lines += ["", "confusion (rows = gold, cols = predicted)", "gold\\pred " + "".join(f"{p:>6}" for p in LABELS)]
        for g in LABELS:
            lines.append(f"{g:>9} " + "".join(f"{self.confusion[g][p]:>6}" for p in LABELS))
        return "\n".join(lines)


def evaluate_predictions(gold: list[int], pred: list[int]) -> EvalReport:
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold labels but {len(pred)} predictions")
    for v in list(gold) + list(pred):
        if v not in LABELS:
            raise ValueError(f"label {v!r} is not one of {LABELS}")
    conf = {g: {p: 0 for p in LABELS} for g in LABELS}
    for g, p in zip(gold, pred, strict=True):
        conf[g][p] += 1
    n = len(gold)
    correct = sum(conf[lab][lab] for lab in LABELS)
    precision, recall = {}, {}
    for lab in LABELS:
        predicted = sum(conf[g][lab] for g in LABELS)
        actual = sum(conf[lab].values())
        precision[lab] = conf[lab][lab] / predicted if predicted else 0.0
        recall[lab] = conf[lab][lab] / actual if actual else 0.0
    return EvalReport(n, correct / n if n else 0.0, precision, recall, conf)
