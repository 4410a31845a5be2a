"""What a live run shows instead of an ETA against `--num-rollout 1000000`.

A live run has no end: the useful numbers are the buffer's (turns waiting for their next state,
waiting for the judge, judged), the trainer's (steps done, last reward: `metrics.jsonl`), the
server's (weight version it serves: `/v1/models`), and where to chat (printed once with the
server's own provider snippet). One line every `OPENCLAW_PROGRESS_INTERVAL` seconds (default 30).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

BANNER_START = "OpenClaw-RL server ready"


@dataclass(frozen=True)
class Progress:
    awaiting_next_state: int | None
    waiting_for_judge: int | None
    judged: int | None
    steps: int
    last_reward: float | None
    weight_version: str | None
    problem: str | None = None  # why a number is missing (shown, never hidden)

    def line(self, name: str) -> str:
        def show(v: Any) -> str:
            return "?" if v is None else str(v)

        reward = "-" if self.last_reward is None else f"{self.last_reward:+.3f}"
        return (f"{name}: turns {show(self.awaiting_next_state)} awaiting next state, "
                f"{show(self.waiting_for_judge)} waiting for the judge, {show(self.judged)} judged | "
                f"steps {self.steps} | last reward {reward} | serving weights v{show(self.weight_version)}"
                + (f" | warning: {self.problem}" if self.problem else ""))


def buffer_counts(buffer_dir: Path) -> tuple[int | None, int | None, int | None]:
    """(awaiting next state, ready for the judge, judged) from the buffer's public stats."""
    from openclaw.buffer import TrajectoryBuffer

    if not buffer_dir.is_dir():
        return None, None, None
    buf = TrajectoryBuffer.open(buffer_dir)
    try:
        by_state = buf.stats()["by_state"]
    finally:
        buf.close()
    return by_state.get("awaiting_next_state", 0), by_state.get("ready", 0), by_state.get("judged", 0)


def trainer_counts(log_dir: Path) -> tuple[int, float | None]:
    """(steps logged, last `reward/mean`) from the trainer's metrics.jsonl."""
    path = log_dir / "metrics.jsonl"
    if not path.is_file():
        return 0, None
    steps, reward = 0, None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written right now
        if "step" in row:
            steps += 1
            if isinstance(row.get("reward/mean"), (int, float)):
                reward = float(row["reward/mean"])
    return steps, reward


def served_weight_version(base_url: str, api_key: str | None) -> str | None:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        r = httpx.get(f"{base_url}/v1/models", headers=headers, timeout=5)
        r.raise_for_status()
        data = r.json()["data"]
    except (httpx.HTTPError, KeyError, ValueError):
        return None
    return str(data[0].get("weight_version")) if data else None


def snapshot(buffer_dir: Path, log_dir: Path, base_url: str, api_key: str | None) -> Progress:
    """One status reading. A status that cannot be read must not stop the run it reports on: the
    reason is shown in the line instead."""
    problem = None
    try:
        waiting_ns, waiting_judge, judged = buffer_counts(buffer_dir)
    except Exception as exc:  # noqa: BLE001 - sqlite busy, a buffer being migrated, ...: shown, not fatal
        waiting_ns = waiting_judge = judged = None
        problem = f"buffer stats unreadable ({type(exc).__name__}: {exc})"
    steps, reward = trainer_counts(log_dir)
    version = served_weight_version(base_url, api_key)
    if version is None:
        problem = (problem + "; " if problem else "") + f"no weight version from {base_url}/v1/models"
    return Progress(waiting_ns, waiting_judge, judged, steps, reward, version, problem)


def server_banner(server_log: Path) -> str | None:
    """The server's ready banner (base URL, provider snippet) from its log, as the server printed it."""
    if not server_log.is_file():
        return None
    text = server_log.read_text(encoding="utf-8", errors="replace")
    start = text.rfind(BANNER_START)
    if start < 0:
        return None
    lines, depth, seen_json = [], 0, False
    for line in text[start:].splitlines():
        lines.append(line)
        depth += line.count("{") - line.count("}")
        seen_json = seen_json or "{" in line
        if seen_json and depth == 0:
            return "\n".join(lines)
    return None
