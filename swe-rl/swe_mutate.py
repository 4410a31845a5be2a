"""Procedural bugs (SWE-smith's idea): one small, local change to one function of a project.

Each mutation edits exactly one source line (an expression span, or the whole line for a
removed statement), so the gold patch that undoes it is a one-hunk diff.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

_FLIP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_SIMPLE = (ast.Return, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr, ast.Raise, ast.Delete)


@dataclass(frozen=True)
class Mutation:
    kind: str  # flip-comparison | change-constant | swap-arguments | remove-statement
    function: str  # qualified name of the enclosing function
    lineno: int  # 1-based
    original_line: str
    mutated_line: str | None  # None: the line is removed

    def apply(self, source: str) -> str:
        lines = source.splitlines(keepends=True)
        if lines[self.lineno - 1].rstrip("\r\n") != self.original_line:
            raise ValueError(f"line {self.lineno} changed since the mutation was found")
        end = lines[self.lineno - 1][len(self.original_line):]
        if self.mutated_line is None:
            del lines[self.lineno - 1]
        else:
            lines[self.lineno - 1] = self.mutated_line + end
        return "".join(lines)


def _replace_span(line: str, node: ast.AST, text: str) -> str:
    raw = line.encode()
    return (raw[: node.col_offset] + text.encode() + raw[node.end_col_offset:]).decode()  # type: ignore[attr-defined]


def _one_line(node: ast.AST) -> bool:
    return getattr(node, "lineno", None) is not None and node.lineno == node.end_lineno  # type: ignore[attr-defined]


def _expression_mutations(node: ast.AST) -> Iterator[tuple[str, ast.AST, str]]:
    """(kind, node whose span is replaced, replacement text)."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _FLIP:
        new = ast.Compare(left=node.left, ops=[_FLIP[type(node.ops[0])]()], comparators=node.comparators)
        yield "flip-comparison", node, ast.unparse(new)
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield "change-constant", node, repr(not node.value)
    elif isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value <= 64:
        yield "change-constant", node, str(node.value + 1)
    elif (isinstance(node, ast.Call) and len(node.args) >= 2 and not node.keywords
          and not any(isinstance(a, ast.Starred) for a in node.args[:2])
          and ast.dump(node.args[0]) != ast.dump(node.args[1])):
        args = [node.args[1], node.args[0], *node.args[2:]]
        yield "swap-arguments", node, ast.unparse(ast.Call(func=node.func, args=args, keywords=[]))


def _functions(tree: ast.AST) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                yield name, child
                yield from walk(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
    yield from walk(tree, "")


def find_mutations(source: str) -> list[Mutation]:
    """Every candidate mutation in the module's functions, in source order."""
    tree = ast.parse(source)
    lines = source.splitlines()
    found: list[Mutation] = []
    seen: set[tuple[int, str | None]] = set()

    def add(kind: str, fn: str, lineno: int, new: str | None) -> None:
        if (lineno, new) in seen or (new is not None and new == lines[lineno - 1]):
            return
        if new is not None:
            try:  # the mutated line must still parse in place
                ast.parse("\n".join(lines[: lineno - 1] + [new] + lines[lineno:]))
            except SyntaxError:
                return
        seen.add((lineno, new))
        found.append(Mutation(kind, fn, lineno, lines[lineno - 1], new))

    for fn_name, fn in _functions(tree):
        body_nodes = [n for n in ast.walk(fn) if n is not fn]
        nested = {id(n) for f in body_nodes if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  for n in ast.walk(f)}
        for node in body_nodes:
            if id(node) in nested or not _one_line(node):
                continue
            if isinstance(node, ast.expr):
                if node.lineno == fn.lineno:  # defaults in the signature
                    continue
                for kind, target, text in _expression_mutations(node):
                    add(kind, fn_name, target.lineno, _replace_span(lines[target.lineno - 1], target, text))
        for block in ast.walk(fn):
            for attr in ("body", "orelse", "finalbody"):
                stmts = getattr(block, attr, None)
                if not isinstance(stmts, list) or len(stmts) < 2 or id(block) in nested:
                    continue
                for stmt in stmts:
                    if (isinstance(stmt, _SIMPLE) and _one_line(stmt)
                            and not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant))):
                        add("remove-statement", fn_name, stmt.lineno, None)
    return found
