"""`python -m openclaw.control {list,promote,rollback}`: the weight-version commands of the
server's API (`GET /v1/weights`, `POST /v1/weights/{version}/promote|rollback`) from a shell.

The server is `--url` (default `http://$OPENCLAW_HOST:$OPENCLAW_PORT`, 127.0.0.1:8000); the key
is `$OPENCLAW_API_KEY` (an env var, never a flag: flags show in `ps`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

import httpx


def _default_url() -> str:
    host = os.environ.get("OPENCLAW_HOST") or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    return f"http://{host}:{os.environ.get('OPENCLAW_PORT') or 8000}"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m openclaw.control", description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=_default_url(), help="the OpenClaw-RL server (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the server")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="weight versions, their status and canary results")
    for name, what in (("promote", "serve this kept version now (the user's decision: no canary)"),
                       ("rollback", "serve this older kept version; later versions become rolled_back")):
        sp = sub.add_parser(name, help=what)
        sp.add_argument("version", type=int)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    key = os.environ.get("OPENCLAW_API_KEY")
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
