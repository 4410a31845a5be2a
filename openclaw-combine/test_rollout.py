"""Collect a few real rollouts from a running OpenClaw server and write them as sessions.

    python -m openclaw_combine.test_rollout --num-samples 10 --output-dir ./debug_rollouts \\
        [--server-url http://127.0.0.1:8000] [--rl-buffer-dir ./rl_buffer] [--max-tokens 64]

Each sample is one session sent the way an agent would: a question (main turn), a side call
(`X-Turn-Type: side`, a title for the chat), and the user's follow-up (the first turn's next
state, a second main turn), closed with `X-Session-Done`. With `OPENCLAW_API_KEY` set the key is
sent as `Authorization: Bearer`. What the server's RL intercept recorded for those sessions is read
back from its buffer (`--rl-buffer-dir`, default $RL_BUFFER_DIR or ./rl_buffer: the same folder
the server was started with) and written to OUTPUT_DIR/sessions.jsonl in the pages' session
format, then summarised per session (main/side counts, as `inspect_sessions` prints them).
`OPENCLAW_DEBUG=true` / `ROLLOUT_LOG_LEVEL=DEBUG` print every request and reply.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import uuid
from pathlib import Path

import httpx

from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.errors import BufferNotFoundError
from openclaw.buffer.exchange import export_sessions
from openclaw.environment import env_value
from openclaw.httpapi.urls import server_url_from_env

log = logging.getLogger("openclaw_combine.test_rollout")

QUESTIONS = (
    "What is the capital of France?", "Give me one tip for writing clear emails.", "What does HTTP stand for?",
    "Name a prime number bigger than 10.", "How do I reverse a list in Python?", "What is photosynthesis?",
    "Suggest a name for a grey cat.", "What is 12 times 7?", "Why is the sky blue?", "What is a haiku?",
)
FOLLOW_UPS = ("Thanks, that helps.", "Can you make it shorter?", "That's not quite right, try again.")


def _headers() -> dict[str, str]:
    key = env_value("OPENCLAW_API_KEY")
    return {"Authorization": f"Bearer {key}"} if key else {}


def _chat(client: httpx.Client, model: str, sid: str, messages: list[dict], max_tokens: int, *,
          turn_type: str = "main", done: bool = False) -> str:
    headers = {"X-Session-Id": sid, "X-Turn-Type": turn_type, **({"X-Session-Done": "true"} if done else {})}
    r = client.post("/v1/chat/completions", headers=headers,
                    json={"model": model, "messages": messages, "max_tokens": max_tokens, "temperature": 1.0})
    if r.status_code != 200:
        raise RuntimeError(f"POST /v1/chat/completions -> {r.status_code}: {r.text[:500]}")
    reply = r.json()["choices"][0]["message"].get("content") or ""
    log.debug("%s %s: %r -> %r", sid, turn_type, messages[-1]["content"], reply)
    return reply


def collect(server_url: str, num_samples: int, max_tokens: int, run_id: str) -> list[str]:
    """Send `num_samples` sessions; returns their ids."""
    ids = []
    with httpx.Client(base_url=server_url, headers=_headers(), timeout=600) as client:
        r = client.get("/v1/models")
        if r.status_code != 200:
            raise RuntimeError(f"GET {server_url}/v1/models -> {r.status_code}: {r.text[:300]} "
                               "(is OPENCLAW_API_KEY the server's key?)")
        model = r.json()["data"][0]["id"]
        for i in range(num_samples):
            sid = f"test-rollout-{run_id}-{i}"
            q = {"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}
            reply = _chat(client, model, sid, [q], max_tokens)
            history = [q, {"role": "assistant", "content": reply}]
            _chat(client, model, sid, [*history, {"role": "user", "content": "Write a 3-word title for this chat."}],
                  8, turn_type="side")
            _chat(client, model, sid, [*history, {"role": "user", "content": FOLLOW_UPS[i % len(FOLLOW_UPS)]}],
                  max_tokens, done=True)
            ids.append(sid)
            print(f"collected {i + 1}/{num_samples}: {sid}", file=sys.stderr)
    return ids


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m openclaw_combine.test_rollout", description=__doc__.splitlines()[0])
    p.add_argument("--num-samples", type=int, default=10, help="sessions to collect")
    p.add_argument("--output-dir", required=True, help="where sessions.jsonl is written")
    p.add_argument("--server-url", default=None, help="default http://$OPENCLAW_HOST:$OPENCLAW_PORT (127.0.0.1:8000)")
    p.add_argument("--rl-buffer-dir", default=None,
                   help="the server's --rl-buffer-dir (default $RL_BUFFER_DIR, else ./rl_buffer)")
    p.add_argument("--max-tokens", type=int, default=64)
    args = p.parse_args(argv)
    debug = (env_value("OPENCLAW_DEBUG") or "").lower() in ("1", "true", "yes") or \
        (env_value("ROLLOUT_LOG_LEVEL") or "").upper() == "DEBUG"
    logging.basicConfig(level=logging.DEBUG if debug else logging.INFO, format="%(name)s: %(message)s")
    if args.num_samples < 1:
        p.error("--num-samples must be >= 1")
    buffer_dir = Path(args.rl_buffer_dir or env_value("RL_BUFFER_DIR") or "rl_buffer")
    try:
        # the buffer must be the server's: fail before sending anything if it is not there
        buf = TrajectoryBuffer.open(buffer_dir, create=False)
    except BufferNotFoundError as exc:  # it names the path and the server flag that creates the buffer
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        ids = collect(args.server_url or server_url_from_env(), args.num_samples, args.max_tokens, uuid.uuid4().hex[:8])
        sessions = list(export_sessions(buf, ids, tokens=False))
    except (RuntimeError, httpx.HTTPError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        buf.close()
    missing = sorted(set(ids) - {s["session_id"] for s in sessions})
    if missing:
        print(f"error: the server recorded nothing for {missing} in {buffer_dir}: is it running with "
              "--enable-rl-intercept --rl-buffer-dir on this folder?", file=sys.stderr)
        return 1
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sessions.jsonl").write_text("".join(json.dumps(s) + "\n" for s in sessions))
    from openclaw_combine.utils import inspect_sessions

    inspect_sessions(out)
    print(f"wrote {len(sessions)} session(s) to {out / 'sessions.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
