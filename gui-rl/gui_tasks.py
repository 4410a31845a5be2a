"""MiniWoB++ tasks for gui-rl: where the pages are, which tasks we train on, and the seed split.

The task pages come from the PyPI package `miniwob` (its `html/` folder); they are opened from
disk (file://), so nothing reaches the network. Any page the package ships can be evaluated by
name (`all_task_names()`); TASKS is the training list.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

# Fixed seed split: training draws seeds from TRAIN_SEEDS, evaluation uses HELDOUT_SEEDS only.
# The ranges do not overlap, so a held-out episode is never a page the policy trained on.
TRAIN_SEEDS = range(0, 100_000)
HELDOUT_SEEDS = range(1_000_000, 1_000_100)


@dataclass(frozen=True)
class GuiTask:
    name: str
    kind: str  # "one-step" (a single right action ends it) or "multi-step"


TASKS: tuple[GuiTask, ...] = (
    # one-step: a single click/focus ends the episode
    GuiTask("click-button", "one-step"),
    GuiTask("click-link", "one-step"),
    GuiTask("click-test", "one-step"),
    GuiTask("click-test-2", "one-step"),
    GuiTask("focus-text", "one-step"),
    GuiTask("focus-text-2", "one-step"),
    GuiTask("click-dialog", "one-step"),
    GuiTask("click-dialog-2", "one-step"),
    GuiTask("click-widget", "one-step"),
    # multi-step: type then submit, choose then submit, expand then click, fill a form
    GuiTask("click-button-sequence", "multi-step"),
    GuiTask("click-tab", "multi-step"),
    GuiTask("click-collapsible", "multi-step"),
    GuiTask("click-option", "multi-step"),
    GuiTask("click-checkboxes", "multi-step"),
    GuiTask("choose-list", "multi-step"),
    GuiTask("enter-text", "multi-step"),
    GuiTask("enter-text-2", "multi-step"),
    GuiTask("enter-text-dynamic", "multi-step"),
    GuiTask("enter-password", "multi-step"),
    GuiTask("login-user", "multi-step"),
    GuiTask("use-autocomplete", "multi-step"),
)
TASKS_BY_NAME = {t.name: t for t in TASKS}
ONE_STEP = tuple(t.name for t in TASKS if t.kind == "one-step")


def miniwob_html_dir() -> Path:
    """The `html/` folder of the installed `miniwob` package (found without importing it:
    importing `miniwob` needs gymnasium and selenium, which the pages do not)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the MiniWoB++ pages are missing: pip install --no-deps miniwob==1.1.0 "
                           "(or bash gui-rl/setup_gui.sh)")
    html = Path(next(iter(spec.submodule_search_locations))) / "html"
    if not (html / "miniwob").is_dir():
        raise RuntimeError(f"{html}/miniwob not found: the miniwob package is incomplete")
    return html


def all_task_names() -> list[str]:
    """Every MiniWoB++ task page the package ships (what evaluation accepts by name)."""
    return sorted(p.stem for p in (miniwob_html_dir() / "miniwob").glob("*.html"))


def task_url(name: str) -> str:
    page = miniwob_html_dir() / "miniwob" / f"{name}.html"
    if not page.is_file():
        raise ValueError(f"unknown MiniWoB++ task {name!r} (python gui-rl/gui_eval.py --list shows all)")
    return page.as_uri()


def train_seed(index: int) -> int:
    return TRAIN_SEEDS[index % len(TRAIN_SEEDS)]


def resolve_task_names(names: list[str]) -> list[str]:
    """Task names, with the shorthands all / one-step / train expanded; unknown names are errors."""
    known = all_task_names()
    groups = {"all": known, "one-step": list(ONE_STEP), "train": [t.name for t in TASKS]}
    out: list[str] = []
    for name in names:
        if name not in groups and name not in known:
            raise SystemExit(f"unknown task {name!r}; gui_eval.py --list shows the {len(known)} tasks the package ships")
        out += groups.get(name, [name])
    return list(dict.fromkeys(out))
