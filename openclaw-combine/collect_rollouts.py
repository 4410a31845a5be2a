"""The second public page's rollout collector:
`python collect_rollouts.py --api-endpoint http://localhost:8000 --output-dir ./rollouts --session-aware`.

Here the collector is the server's RL intercept: every conversation `serve_model.py` serves is
grouped into sessions, classified main/side, paired with its next state and recorded in the
server's rollout folder. This command checks that the server at --api-endpoint answers (with
OPENCLAW_API_KEY when set) and that --output-dir holds the rollouts it records, then reports what
has been collected: sessions, main-line and side turns, turns waiting for their next state or the
judge. It repeats every --interval seconds until Ctrl-C (`--once`: report and exit).

    --api-endpoint URL   the server (default http://127.0.0.1:$OPENCLAW_PORT, 8000)
    --output-dir D       the folder the server records into: serve_model.py's --rollout-dir (default
                         $RL_BUFFER_DIR, else ./rollouts); train_async.py --rollout-dir D trains on it
    --session-aware      sessions are always tracked (X-Session-Id / X-Turn-Type headers, else the
                         conversation's continuity): accepted as the default it names
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import httpx

from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.exchange import export_sessions
from openclaw.buffer.schema import DB_NAME
from openclaw.environment import env_value
from openclaw.httpapi.urls import server_url_from_env
from openclaw.launch.progress import buffer_counts


def _check_server(url: str, key: str | None) -> str:
    """The served model's id; SystemExit naming what is wrong when the server cannot be used."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        r = httpx.get(f"{url}/v1/models", headers=headers, timeout=10)
    except httpx.HTTPError as exc:
        raise SystemExit(f"error: no server at {url} ({exc}); start it with python serve_model.py") from None
    if r.status_code == 401:
        raise SystemExit(f"error: {url} requires an API key: set OPENCLAW_API_KEY to the server's key")
    if r.status_code != 200:
        raise SystemExit(f"error: GET {url}/v1/models -> {r.status_code}: {r.text[:300]}")
    return str(r.json()["data"][0]["id"])


def report(out_dir: Path, *, per_session: bool) -> str:
    with TrajectoryBuffer.open(out_dir, create=False) as buf:
        sessions = {s["session_id"]: s["turns"] for s in export_sessions(buf, tokens=False)}
    main = sum(1 for turns in sessions.values() for t in turns if t["type"] == "main")
    side = sum(1 for turns in sessions.values() for t in turns if t["type"] == "side")
    waiting, ready, judged = buffer_counts(out_dir)
    lines = [f"rollouts in {out_dir}: {len(sessions)} session(s), {main} main-line turn(s), {side} side turn(s) | "
             f"{waiting} awaiting next state, {ready} waiting for the judge, {judged} judged"]
    if per_session:
        for sid, turns in sessions.items():
            lines.append(f"  session {sid}: main {sum(t['type'] == 'main' for t in turns)}, "
                         f"side {sum(t['type'] == 'side' for t in turns)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="collect_rollouts.py", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--api-endpoint", default=server_url_from_env())
    p.add_argument("--output-dir", default=env_value("RL_BUFFER_DIR") or "./rollouts")
    p.add_argument("--session-aware", action="store_true",
                   help="sessions are always tracked; accepted as the default it names")
    p.add_argument("--interval", type=float, default=30.0, help="seconds between reports")
    p.add_argument("--once", action="store_true", help="report once and exit")
    args = p.parse_args(argv)
    url = args.api_endpoint.rstrip("/")
    model = _check_server(url, env_value("OPENCLAW_API_KEY"))
    out_dir = Path(args.output_dir)
    if not (out_dir / DB_NAME).is_file():
        raise SystemExit(f"error: {out_dir} holds no rollouts: the server records into its --rollout-dir "
                         f"(serve_model.py, default ./rollouts) or --rl-buffer-dir; pass that folder as --output-dir")
    print(f"collecting from {url} (model {model}): the server's RL intercept records sessions into {out_dir}",
          flush=True)
    while True:
        print(report(out_dir, per_session=args.once), flush=True)
        if args.once:
            return 0
        try:
            time.sleep(args.interval)  # a reporting period, not synchronisation
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
