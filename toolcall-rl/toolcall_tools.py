"""Tools for toolcall-rl: the OpenAI tools config, a safe calculator (an AST evaluator, no eval),
and a sandboxed Python interpreter; `call_tool` dispatches a parsed tool call."""

from __future__ import annotations

import ast
import json
import math
import operator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openclaw.sandbox import SandboxSession

DEFAULT_TOOLS_CONFIG = Path(__file__).resolve().parent / "tools_config.json"
KNOWN_TOOLS = ("python", "calculator")


def load_tools_config(path: str | Path | None = None) -> list[dict[str, Any]]:
    """Read and validate an OpenAI `tools` list; every tool must be one this environment implements."""
    p = Path(path) if path else DEFAULT_TOOLS_CONFIG
    if not p.is_file():
        raise FileNotFoundError(f"TOOLS_CONFIG {str(p)!r} does not exist")
    try:
        tools = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{p}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(tools, list) or not tools:
        raise ValueError(f"{p}: expected a non-empty JSON list of tools")
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            raise ValueError(f"{p}: tool #{i} must be {{'type': 'function', 'function': {{...}}}}")
        if fn.get("name") not in KNOWN_TOOLS:
            raise ValueError(f"{p}: tool #{i} name {fn.get('name')!r} is not implemented (have {KNOWN_TOOLS})")
        params = fn.get("parameters")
        if not isinstance(params, dict) or params.get("type") != "object":
            raise ValueError(f"{p}: tool {fn['name']!r} needs a JSON-schema 'parameters' object")
    return tools


# ---- calculator ------------------------------------------------------------------------------

class CalculatorError(ValueError):
    pass


_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS = {"sqrt": math.sqrt, "abs": abs, "round": round, "min": min, "max": max, "floor": math.floor,
          "ceil": math.ceil}
_NAMES = {"pi": math.pi, "e": math.e}
_MAX_ABS = 1e100
_MAX_EXPONENT = 1000
_MAX_LEN = 500


def _check_number(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CalculatorError("only numbers are allowed")
    if isinstance(value, float) and not math.isfinite(value):
        raise CalculatorError("result is not finite")
    if abs(value) > _MAX_ABS:
        raise CalculatorError("number too large")
    return value


def _eval(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant):
        return _check_number(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise CalculatorError(f"exponent larger than {_MAX_EXPONENT}")
        try:
            return _check_number(_BINOPS[type(node.op)](left, right))
        except ZeroDivisionError:
            raise CalculatorError("division by zero") from None
        except OverflowError:
            raise CalculatorError("number too large") from None
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _check_number(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        if node.keywords or not node.args or len(node.args) > 8:
            raise CalculatorError(f"bad call to {node.func.id}()")
        try:
            return _check_number(_FUNCS[node.func.id](*[_eval(a) for a in node.args]))
        except (ValueError, TypeError) as exc:
            raise CalculatorError(f"{node.func.id}(): {exc}") from None
    raise CalculatorError(f"unsupported syntax: {type(node).__name__}")


def calculate(expression: str) -> int | float:
    """Evaluate arithmetic safely: the expression is parsed, never executed."""
    if not isinstance(expression, str) or not expression.strip():
        raise CalculatorError("expression must be a non-empty string")
    if len(expression) > _MAX_LEN:
        raise CalculatorError(f"expression longer than {_MAX_LEN} characters")
    try:
        tree = ast.parse(expression.strip().replace("^", "**"), mode="eval")
    except SyntaxError:
        raise CalculatorError("not a valid arithmetic expression") from None
    value = _eval(tree)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    return value


# ---- dispatch --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ToolOutcome:
    name: str
    ok: bool
    content: str  # what the model sees


async def call_tool(name: str, arguments_json: str, session: SandboxSession | None,
                    enabled: set[str], python_timeout_s: float = 10.0, max_chars: int = 1500) -> ToolOutcome:
    if name not in enabled:
        return ToolOutcome(name, False, f"error: unknown tool {name!r}; available: {sorted(enabled)}")
    try:
        arguments = json.loads(arguments_json) if arguments_json else {}
    except json.JSONDecodeError:
        return ToolOutcome(name, False, "error: arguments are not valid JSON")
    if not isinstance(arguments, dict):
        return ToolOutcome(name, False, "error: arguments must be a JSON object")
    if name == "calculator":
        try:
            return ToolOutcome(name, True, str(calculate(arguments.get("expression", ""))))
        except CalculatorError as exc:
            return ToolOutcome(name, False, f"error: {exc}")
    code = arguments.get("code")
    if not isinstance(code, str) or not code.strip():
        return ToolOutcome(name, False, "error: 'code' must be a non-empty string")
    if session is None:
        raise RuntimeError("the python tool needs a sandbox session")
    result = await session.run(["python3", "-c", code], timeout_s=python_timeout_s)
    text = result.stdout + (("\n" + result.stderr) if result.stderr else "")
    if len(text) > max_chars:
        text = text[:max_chars] + "\n...[truncated]"
    if result.timed_out:
        text += f"\n[timed out after {python_timeout_s:g} s]"
    return ToolOutcome(name, result.exit_code == 0 and not result.timed_out, text.strip() or "(no output)")
