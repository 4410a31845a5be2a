"""The personal-agent methods: `get_method("combine")`, or a method file of one's own by its path.

Each built-in method is one module here defining `METHOD`; a new method is one more such file (or a
file anywhere, named by path: `python -m openclaw.launch path/to/my_method.py`) plus its plugins.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import pkgutil
from functools import cache
from pathlib import Path

from openclaw.methods.method import BASELINES, KINDS, EmbeddedPreset, Method, Variant

__all__ = ["BASELINES", "DEFAULT_METHOD", "KINDS", "EmbeddedPreset", "Method", "MethodError", "Variant", "builtin_methods",
           "get_method", "method_arg", "method_names"]


# The recommended method: the default of every entry point that takes --method.
DEFAULT_METHOD = "combine"


class MethodError(ValueError):
    """An unknown method name or a method file without a `METHOD`."""


@cache
def builtin_methods() -> dict[str, Method]:
    found: dict[str, Method] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name == "method":
            continue
        method = getattr(importlib.import_module(f"{__name__}.{info.name}"), "METHOD", None)
        if isinstance(method, Method):
            found[method.name] = method
    order = {name: i for i, name in enumerate(("rl", "opd", "combine"))}
    return dict(sorted(found.items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])))


def method_names() -> tuple[str, ...]:
    return tuple(builtin_methods())


@cache
def _from_file(path: str) -> Method:
    file = Path(path)
    if not file.is_file():
        raise MethodError(f"method file {path} does not exist")
    spec = importlib.util.spec_from_file_location(f"openclaw_method_{abs(hash(str(file.resolve())))}", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    method = getattr(module, "METHOD", None)
    if not isinstance(method, Method):
        raise MethodError(f"{path} defines no METHOD = openclaw.methods.Method(...)")
    return method


def get_method(name_or_path: str | Method) -> Method:
    """A built-in method by name (rl, opd, combine), or the `METHOD` of a `.py` file by its path."""
    if isinstance(name_or_path, Method):
        return name_or_path
    if name_or_path.endswith(".py"):
        return _from_file(str(Path(name_or_path).resolve()))
    try:
        return builtin_methods()[name_or_path]
    except KeyError:
        raise MethodError(f"unknown method {name_or_path!r}: one of {', '.join(method_names())}, or the path of "
                          "a method file (.py defining METHOD)") from None


def method_arg(text: str) -> str:
    """argparse `type=` for a method flag: the name or path as given, once it names a method."""
    try:
        get_method(text)
    except MethodError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text
