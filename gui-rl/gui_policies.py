"""Reference policies: a scripted one that reads the goal and acts right, and a random one.

Both act only through what a model sees (the goal and the accessibility tree with element ids),
so the scripted policy's success proves observation, ids and actions are wired right. Neither
looks at the page's source. The scripted policy has plans for PLANNED_TASKS only and refuses any
other task (NoPlanError), so its 0% on a task it cannot do is never mistaken for a measurement.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from gui_env import Action, Observation
from gui_tasks import TASKS

# The tasks plan() was written for. Other pages can phrase their goal the same way
# (login-user-popup reads like login-user, but a popup covers the form; click-checkboxes-soft
# reads like click-checkboxes, but asks for words *similar to* those named), so a plan that
# matches the goal is not a plan for the task.
PLANNED_TASKS: frozenset[str] = frozenset(t.name for t in TASKS) - {"use-autocomplete"}

_NODE = re.compile(r"^- '?(\w+)(?: \"((?:[^\"\\]|\\.)*)\")?(.*?)\[ref=(e\d+)\]")
_ORDINALS = {"1st": 0, "2nd": 1, "3rd": 2}
_WIDGET_ROLE = {"checkbox": "checkbox", "radio": "radio", "text": "textbox", "textarea": "textbox",
                "button": "button"}


@dataclass(frozen=True)
class Node:
    role: str
    name: str
    ref: str


def nodes(axtree: str) -> list[Node]:
    out = []
    for line in axtree.splitlines():
        m = _NODE.match(line.strip())
        if m:
            out.append(Node(m.group(1), m.group(2) or "", m.group(4)))
    return out


def _quoted(goal: str) -> list[str]:
    return re.findall(r'"([^"]*)"', goal)


@dataclass
class Step:
    """One planned action, resolved against the tree when it is taken (ids may change)."""

    action: str
    role: str
    name: str | None = None  # match by accessible name ...
    index: int = 0  # ... or take the index-th element of the role
    value: str | None = None


def plan(goal: str) -> list[Step]:
    """The actions that solve a goal, from the goal text alone (MiniWoB++'s phrasings)."""
    q = _quoted(goal)
    submit = Step("click", "button", "Submit")
    if m := re.match(r'Click on the "(.*)" button\.', goal):
        return [Step("click", "button", m.group(1))]
    if m := re.match(r'Click on the link "(.*)"\.', goal):
        return [Step("click", "link", m.group(1))]
    if goal == "Click the button.":
        return [Step("click", "button")]
    if m := re.match(r"Click button (\w+), then click button (\w+)\.", goal):
        return [Step("click", "button", m.group(1)), Step("click", "button", m.group(2))]
    if m := re.match(r"Click button (\w+)\.", goal):
        return [Step("click", "button", m.group(1))]
    if goal == "Focus into the textbox.":
        return [Step("click", "textbox")]
    if m := re.match(r"Focus into the (\w+) input textbox\.", goal):
        return [Step("click", "textbox", index=_ORDINALS[m.group(1)])]
    if goal.startswith("Close the dialog box"):
        return [Step("click", "button", "Close")]
    if m := re.match(r'Click the button in the dialog box labeled "(.*)"\.', goal):
        return [Step("click", "button", "Close" if m.group(1) == "x" else m.group(1))]
    if m := re.match(r'Click on a "(.*)" widget\.', goal):
        return [Step("click", _WIDGET_ROLE[m.group(1)], index=1 if m.group(1) == "textarea" else 0)]
    if m := re.match(r"Click on Tab #(\d)\.", goal):
        return [Step("click", "link", f"Tab #{m.group(1)}")]
    if goal.startswith("Expand the section"):
        return [Step("click", "tab"), submit]
    if m := re.match(r"Select (.*) from the list and click Submit\.", goal):
        return [Step("select_option", "combobox", value=m.group(1)), submit]
    if m := re.match(r"Select (.*) and click Submit\.", goal):
        words = [] if m.group(1) == "nothing" else re.split(r",\s*", m.group(1))
        role = "checkbox" if "," in m.group(1) or m.group(1) == "nothing" else "radio-or-checkbox"
        return [Step("click", role, w.strip()) for w in words if w.strip()] + [submit]
    if goal.startswith("Type") and q:
        text = q[0].upper() if "upper case" in goal else q[0].lower() if "lower case" in goal else q[0]
        return [Step("fill", "textbox", value=text), submit]
    if goal.startswith("Enter the password") and q:
        return [Step("fill", "textbox", index=0, value=q[0]), Step("fill", "textbox", index=1, value=q[0]), submit]
    if goal.startswith("Enter the username") and len(q) >= 2:
        return [Step("fill", "textbox", index=0, value=q[0]), Step("fill", "textbox", index=1, value=q[1]),
                Step("click", "button", "Login")]
    if m := re.match(r'Enter "(.*)" into the text field and press Submit\.', goal):
        return [Step("fill", "textbox", value=m.group(1)), submit]
    return []


def resolve(step: Step, tree: list[Node]) -> Action | None:
    roles = {"radio-or-checkbox": ("radio", "checkbox")}.get(step.role, (step.role,))
    cands = [n for n in tree if n.role in roles and (step.name is None or n.name == step.name)]
    if len(cands) <= step.index:
        return None
    ref = cands[step.index].ref
    if step.action == "click":
        return Action("click", (ref,))
    return Action(step.action, (ref, step.value or ""))


class NoPlanError(ValueError):
    """The scripted policy has no plan for this task or goal: its episodes would measure nothing,
    so callers report the task as unplanned instead of counting failures."""


def check_planned(task: str) -> None:
    """Refuse, up front, a task the scripted policy has no plan for."""
    if task not in PLANNED_TASKS:
        raise NoPlanError(f"no scripted plan for {task}")


@dataclass
class ScriptedPolicy:
    """Reads the goal once, then takes the planned steps in order. A goal it has no plan for
    (use-autocomplete, click-tab-2, enter-date, ...) is refused at reset with NoPlanError."""

    steps: list[Step] = field(default_factory=list)
    taken: int = 0

    def reset(self, obs: Observation) -> None:
        self.steps, self.taken = plan(obs.goal), 0
        if not self.steps:
            raise NoPlanError(f"no scripted plan for the goal {obs.goal!r}")

    def act(self, obs: Observation) -> Action:
        if self.taken >= len(self.steps):
            return Action("done")
        action = resolve(self.steps[self.taken], nodes(obs.axtree))
        self.taken += 1
        return action or Action("done")


@dataclass
class RandomPolicy:
    """Clicks, fills or presses Enter on a uniformly random element of the tree."""

    rng: random.Random = field(default_factory=lambda: random.Random(0))

    def reset(self, obs: Observation) -> None:
        pass

    def act(self, obs: Observation) -> Action:
        tree = nodes(obs.axtree)
        if not tree:
            return Action("done")
        ref = self.rng.choice(tree).ref
        kind = self.rng.choice(["click", "click", "fill", "press"])
        if kind == "fill":
            return Action("fill", (ref, self.rng.choice(["a", "hello", "Submit", "1"])))
        if kind == "press":
            return Action("press", (ref, "Enter"))
        return Action("click", (ref,))
