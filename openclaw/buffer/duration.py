"""Durations on the command line: '3600', '90m', '12h', '30d' -> seconds."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(value: str | float | int, flag: str = "duration") -> float:
    """Seconds (> 0) from a number or a string with an s/m/h/d suffix; ValueError naming `flag`."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        secs = float(value)
    else:
        m = _DURATION.match(str(value))
        if not m:
            raise ValueError(f"{flag}: expected a duration like 3600, 90m, 12h or 30d, got {value!r}")
        secs = float(m.group(1)) * _UNIT[m.group(2)]
    if secs <= 0:
        raise ValueError(f"{flag}: must be > 0")
    return secs
