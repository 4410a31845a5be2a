"""Request text the tokenizer and the buffer cannot take: lone UTF-16 surrogates.

JSON's `\\ud800` escapes decode to Python strings that cannot be encoded as UTF-8, so such a
string fails later, far from its request (tokenising, or writing the shared buffer commit). It is
found here, up front, so only the request that carries it fails.
"""

from __future__ import annotations

import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate_path(obj: Any, path: str = "") -> str | None:
    """The JSON path (`messages[0].name`, `tools[0].function.parameters.properties.<key>`) of the first
    string, key included, that holds a lone surrogate; None when there is none."""
    stack: list[tuple[Any, str]] = [(obj, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return where or "body"
        elif isinstance(value, dict):
            for key, item in value.items():
                here = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and _SURROGATE.search(key):
                    return (f"{where}.<key>" if where else "<key>")
                stack.append((item, here))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))
    return None
