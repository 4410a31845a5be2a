"""Inspect collected sessions: a trajectory buffer directory or a session export (file or directory).

    from openclaw_combine.utils import inspect_sessions
    sessions = inspect_sessions("./rollouts")      # {session_id: [turn dicts with "type": main|side, ...]}

The turns are in the pages' session format (`type`, `prompt`, `response`, `next_state`,
`trainable`, plus what the buffer exports). Prints, per session, its total, main-line and side
turn counts (the page's "Check session classification" loop), unless `show=False`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from openclaw.bridge.offline import session_files
from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.exchange import export_sessions, parse_sessions
from openclaw.buffer.schema import DB_NAME


def load_sessions(path: str | os.PathLike[str]) -> dict[str, list[dict[str, Any]]]:
    """{session_id: turns} from a buffer directory (the server's --rl-buffer-dir) or from session
    JSON / JSONL (a file, or a directory of them: `openclaw.buffer export`, test_rollout's output)."""
    p = Path(path).expanduser()
    if (p / DB_NAME).is_file():
        with TrajectoryBuffer.open(p, create=False) as buf:
            return {s["session_id"]: s["turns"] for s in export_sessions(buf, tokens=False)}
    out: dict[str, list[dict[str, Any]]] = {}
    for f in session_files(p):
        for s in parse_sessions(f.read_text()):
            out.setdefault(s["session_id"], []).extend(s["turns"])
    return out


def inspect_sessions(path: str | os.PathLike[str], *, show: bool = True) -> dict[str, list[dict[str, Any]]]:
    sessions = load_sessions(path)
    if show:
        for session_id, data in sessions.items():
            print(f"Session {session_id}:")
            print(f"  Total turns: {len(data)}")
            print(f"  Main-line turns: {sum(1 for i in data if i['type'] == 'main')}")
            print(f"  Side turns: {sum(1 for i in data if i['type'] == 'side')}")
    return sessions
