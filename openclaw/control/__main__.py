"""`python -m openclaw.control {list,promote,rollback,retract}`: the weight-version commands of the
server's API (`GET /v1/weights`, `POST /v1/weights/{version}/promote|rollback`) from a shell, and
`retract`, which removes a session everywhere and rolls the served weights back
(`retract --dir BUFFER --session ID [--engine-url URL]`; `--pending` finishes what a crash interrupted).

The server is `--url` (default `http://$OPENCLAW_HOST:$OPENCLAW_PORT`, 127.0.0.1:8000); the key
is `$OPENCLAW_API_KEY` (an env var, never a flag: flags show in `ps`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

import httpx

from openclaw.buffer.location import buffer_dir_from_env
from openclaw.environment import env_value
from openclaw.httpapi.urls import server_url_from_env


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m openclaw.control", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=server_url_from_env(), help="the OpenClaw-RL server (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the server")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="weight versions, their status and canary results")
    for name, what in (("promote", "serve this kept version now (the user's decision: no canary)"),
                       ("rollback", "serve this older kept version; later versions become rolled_back")):
        sp = sub.add_parser(name, help=what)
        sp.add_argument("version", type=int)
    s = sub.add_parser("retract",
                       help="remove a session everywhere (buffer, exports, hints, judge records, feedback) and roll "
                            "the served weights back to a checkpoint that predates it (openclaw/control/README.md)")
    s.add_argument("--dir", "--rl-buffer-dir", dest="dir", default=buffer_dir_from_env(),
                   help="buffer directory (env RL_BUFFER_DIR; default ./rl_buffer)")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--session", default=None, help="session id")
    g.add_argument("--pending", action="store_true", help="finish retracts a crash interrupted")
    s.add_argument("--engine-url", default=env_value("OPENCLAW_ENGINE_URL"),
                   help="the serving engine / OpenClaw server (SGLang API), needed when the session was trained "
                        "on (env OPENCLAW_ENGINE_URL)")
    s.add_argument("--policy", default="stop", choices=("stop", "requeue"),
                   help="after rolling back, trainers that used the session stop; 'stop' drops the training after "
                        "the rollback point, 'requeue' gives its other turns back to them (re-applied when the "
                        "trainer restarts from the rollback checkpoint)")
    return p


def retract(args: argparse.Namespace) -> int:
    from openclaw.buffer import BufferNotFoundError, TrajectoryBuffer
    from openclaw.control.retract import HTTPWeightTarget, RetractError, complete_pending, retract_session

    engine = HTTPWeightTarget(args.engine_url) if args.engine_url else None
    try:
        buffer = TrajectoryBuffer.open(args.dir, create=False)
    except BufferNotFoundError as e:
        print(f"openclaw.control: error: {e}", file=sys.stderr)
        return 2
    with buffer as b:
        try:
            results = complete_pending(b, engine) if args.pending else [retract_session(b, args.session, engine,
                                                                                         args.policy)]
        except RetractError as e:
            print(f"openclaw.control: error: {e}", file=sys.stderr)
            return 1
    for r in results:
        print(json.dumps(r.to_json(), indent=1))
    if args.pending and not results:
        print("no unfinished retract", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "retract":
        return retract(args)
    key = env_value("OPENCLAW_API_KEY")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    base = args.url.rstrip("/")
    try:
        if args.command == "list":
            resp = httpx.get(f"{base}/v1/weights", headers=headers, timeout=args.timeout)
        else:
            resp = httpx.post(f"{base}/v1/weights/{args.version}/{args.command}", headers=headers, json={},
                              timeout=args.timeout)
    except httpx.HTTPError as exc:
        print(f"error: cannot reach the server at {base}: {exc}", file=sys.stderr)
        return 2
    body = resp.json() if resp.headers.get("content-type", "").startswith("application/json") else {"raw": resp.text}
    if resp.status_code >= 400:
        print(f"error: {body.get('error', {}).get('message', resp.text)}", file=sys.stderr)
        return 1
    if args.command == "list":
        print(f"served version: {body['served_version']}  (promotion gate {'on' if body['gate'] else 'off'})")
        for v in body["data"]:
            canary = v.get("canary")
            verdict = "" if not canary else ("canary passed" if canary["passed"] else "canary refused: "
                                             + "; ".join(canary["reasons"]))
            print(f"v{v['version']:<4} {v['status']:<12} {verdict}")
    else:
        print(json.dumps(body, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
