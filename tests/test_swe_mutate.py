"""swe-rl's procedural bugs: each mutation changes one line, still parses, and differs in behaviour."""

from __future__ import annotations

import ast
from pathlib import Path

from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
# The trainer's plugin loader puts swe-rl on the import path, as in a run; its sibling
# modules are then imported by their own names (one module object each).
load_plugin_module("swe-rl/swe_sources.py")

from swe_mutate import find_mutations  # noqa: E402

SOURCE = '''
def clamp(x, lo, hi):
    """Clamp x into [lo, hi]."""
    if x < lo:
        return lo
    total = max(x, lo)
    total += 0
    return min(total, hi)


class Box:
    def full(self, n):
        return n == 10 and True
'''


def run(source: str, *call: object) -> object:
    ns: dict = {}
    exec(compile(source, "m", "exec"), ns)
    return ns["clamp"](*call)


def test_every_kind_is_found_and_edits_one_line():
    muts = find_mutations(SOURCE)
    kinds = {m.kind for m in muts}
    assert kinds == {"flip-comparison", "change-constant", "swap-arguments", "remove-statement"}
    for m in muts:
        new = m.apply(SOURCE)
        ast.parse(new)  # still valid Python
        old_lines, new_lines = SOURCE.splitlines(), new.splitlines()
        if m.mutated_line is None:
            assert len(new_lines) == len(old_lines) - 1
        else:
            assert [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b] == [m.lineno - 1]
    assert {m.function for m in muts} >= {"clamp", "Box.full"}


def test_flip_and_swap_change_behaviour():
    muts = find_mutations(SOURCE)
    flip = next(m for m in muts if m.kind == "flip-comparison" and "x < lo" in m.original_line)
    assert flip.mutated_line.strip() == "if x >= lo:"
    assert run(SOURCE, 5, 0, 10) == 5 and run(flip.apply(SOURCE), 5, 0, 10) == 0
    swap = next(m for m in muts if m.kind == "swap-arguments" and "min(" in m.original_line)
    assert "min(hi, total)" in swap.mutated_line  # min is symmetric: the builder's tests reject such breaks


def test_docstrings_and_single_statement_blocks_are_never_removed():
    muts = find_mutations(SOURCE)
    removed = [m.original_line.strip() for m in muts if m.kind == "remove-statement"]
    assert '"""Clamp x into [lo, hi]."""' not in removed
    assert "return lo" not in removed  # the only statement of its block
    assert "total += 0" in removed
