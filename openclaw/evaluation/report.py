"""The evaluation's outputs: a printed table, results.json, results.md and results.png (base vs
checkpoint per family), all in one folder."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Row:
    family: str
    metric: str
    values: dict[str, float | None]  # model label -> value (None: not measured / not available)
    percent: bool = True


def summary_rows(models: dict[str, dict[str, Any]]) -> list[Row]:
    """One row per headline number, in family order, for every evaluated model."""
    labels = list(models)
    fams = {label: models[label]["families"] for label in labels}

    def pick(path: tuple[str, ...]) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for label in labels:
            node: Any = fams[label]
            for key in path:
                node = node.get(key) if isinstance(node, dict) else None
            out[label] = float(node) if isinstance(node, int | float) else None
        return out

    rows: list[Row] = []
    first = fams[labels[0]]
    conversation = first.get("conversation", {})
    for persona in conversation.get("personas", {}):
        for metric, name in (("acceptance", "acceptance %"), ("preference", "preference %"), ("on_topic", "on topic %")):
            rows.append(Row(f"conversation/{persona}", name, pick(("conversation", "personas", persona, metric))))
    if "capability" in conversation:
        rows.append(Row("capability", "accuracy %", pick(("conversation", "capability", "accuracy"))))
    if "kl" in conversation:
        rows.append(Row("kl", "KL to base (nats/token)", pick(("conversation", "kl", "kl_to_base")), percent=False))
    if "coding" in first:
        rows.append(Row("coding", "HumanEval pass@1 %", pick(("coding", "pass_at_1"))))
    if "tool-use" in first:
        rows.append(Row("tool-use", "GSM8K accuracy %", pick(("tool-use", "accuracy"))))
    return rows


def _fmt(value: float | None, percent: bool) -> str:
    if value is None:
        return "n/a"
    return f"{value:.1f}" if percent else f"{value:.4f}"


def table_lines(rows: list[Row], labels: list[str]) -> list[list[str]]:
    header = ["family", "metric", *labels] + (["delta"] if len(labels) == 2 else [])
    lines = [header]
    for r in rows:
        cells = [r.family, r.metric, *(_fmt(r.values[label], r.percent) for label in labels)]
        if len(labels) == 2:
            a, b = (r.values[label] for label in labels)
            cells.append("n/a" if a is None or b is None else f"{a - b:+.1f}" if r.percent else f"{a - b:+.4f}")
        lines.append(cells)
    return lines


def format_table(rows: list[Row], labels: list[str]) -> str:
    lines = table_lines(rows, labels)
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))]
    text = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def markdown(results: dict[str, Any], rows: list[Row]) -> str:
    labels = list(results["models"])
    lines = table_lines(rows, labels)
    out = ["# openclaw-test results", ""]
    for label, model in results["models"].items():
        out.append(f"- **{label}**: `{model['description']}`" + (f" ({model['device']}, {model['dtype']})"
                                                                   if model.get("device") else ""))
    out += [f"- tasks: {', '.join(results['tasks'])}; limit: {results['settings']['limit']}", "",
            "| " + " | ".join(lines[0]) + " |", "|" + "---|" * len(lines[0])]
    out += ["| " + " | ".join(line) + " |" for line in lines[1:]]
    out += ["", "| model | family | seconds |", "|---|---|---|"]
    for label, model in results["models"].items():
        for family, secs in model.get("seconds", {}).items():
            out.append(f"| {label} | {family} | {secs:.1f} |")
    notes = [f"- {label} KL: {m['families']['conversation']['kl']['note']}" for label, m in results["models"].items()
             if (m["families"].get("conversation", {}).get("kl") or {}).get("note")]
    if notes:
        out += ["", *notes]
    return "\n".join(out) + "\n"


def plot(rows: list[Row], labels: list[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r.percent]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(shown) + 2), 4.5))
    width = 0.8 / max(1, len(labels))
    order = sorted(labels, key=lambda label: label != "base")  # base first, as the "before" bar
    for k, label in enumerate(order):
        xs = [i + (k - (len(order) - 1) / 2) * width for i in range(len(shown))]
        ys = [r.values[label] or 0.0 for r in shown]
        bars = ax.bar(xs, ys, width, label=label)
        ax.bar_label(bars, labels=[_fmt(r.values[label], True) for r in shown], fontsize=7)
        for bar, r in zip(bars, shown, strict=True):
            if r.values[label] is None:
                bar.set_hatch("//")
    ax.set_xticks(range(len(shown)))
    ax.set_xticklabels([f"{r.family}\n{r.metric}" for r in shown], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("%")
    ax.set_ylim(0, 110)  # room for the value labels above a 100% bar
    ax.set_yticks(range(0, 101, 20))
    ax.set_title("openclaw-test: " + " vs ".join(order))
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_outputs(results: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = summary_rows(results["models"])
    labels = list(results["models"])
    results = dict(results, summary=[{"family": r.family, "metric": r.metric, "values": r.values} for r in rows])
    paths = {"json": out_dir / "results.json", "markdown": out_dir / "results.md", "png": out_dir / "results.png"}
    paths["json"].write_text(json.dumps(results, indent=2))
    paths["markdown"].write_text(markdown(results, rows))
    plot(rows, labels, paths["png"])
    return paths
