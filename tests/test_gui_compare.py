"""gui_compare pairs two gui_eval reports by (task, seed) and brackets the change with a bootstrap CI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

gui_compare = load_plugin_module("gui-rl/gui_compare.py")


def report(successes: dict[str, list[bool]]) -> dict:
    return {"episodes": [{"task": task, "seed": 1000000 + i, "success": ok}
                         for task, oks in successes.items() for i, ok in enumerate(oks)]}


def test_change_is_paired_per_task_and_bracketed() -> None:
    before = report({"click-button": [False] * 10, "click-test": [True] * 10})
    after = report({"click-button": [True] * 4 + [False] * 6, "click-test": [True] * 9 + [False]})
    rows, delta = gui_compare.compare(before, after)
    assert rows == [("click-button", 0.0, 40.0), ("click-test", 100.0, 90.0)]
    assert delta.estimate == pytest.approx(15.0)
    assert delta.low < 15.0 < delta.high and delta.n == 20


def test_reports_over_different_episodes_are_refused() -> None:
    with pytest.raises(ValueError, match="different episodes"):
        gui_compare.compare(report({"click-button": [True] * 3}), report({"click-button": [True] * 4}))


def test_command_line_writes_the_table(tmp_path: Path) -> None:
    for name, oks in (("base", [False, False]), ("ckpt", [True, False])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps(report({"click-link": oks})))
    out = tmp_path / "compare.md"
    done = subprocess.run([sys.executable, "gui-rl/gui_compare.py", str(tmp_path / "base/report.json"),
                           str(tmp_path / "ckpt/report.json"), "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert "| click-link | 0% | 50% |" in done.stdout and "change +50.0" in done.stdout
    assert out.read_text() == done.stdout


def test_actions_show_a_policy_that_collapsed_onto_one_answer() -> None:
    base = {"episodes": [{"task": "click-dialog-2", "seed": s, "success": s % 2 == 0,
                          "actions": [f"click('e{12 + s % 3}')"]} for s in range(6)]}
    ckpt = {"episodes": [{"task": "click-dialog-2", "seed": s, "success": s < 2,
                          "actions": ["click('e15')"] if s else []} for s in range(6)]}
    assert gui_compare.frequent_actions(ckpt, 3) == {"click-dialog-2": [("click('e15')", 5), ("(none)", 1)]}
    table = gui_compare.render_actions(base, ckpt, 2, ("base", "ckpt"))
    assert table.splitlines()[2] == ("| click-dialog-2 | `click('e12')` x2, `click('e13')` x2 "
                                     "| `click('e15')` x5, `(none)` x1 |")
