"""`python -m openclaw.buffer [--dir DIR] stats|tail|export|import|verify|purge ...`

  stats                         counts by state/type, sessions, consumers, bytes, counters
  tail [-n N] [--follow]        the latest turns, one line each (or --json)
  export [--format json|jsonl] [--session ID ...] [--user ID] [--text-only] [-o FILE]
  import FILE [--tokenizer PATH] [--no-redact]
  verify                        SQLite integrity_check + buffer invariants (exit 1 on problems)
  purge --session ID | --older-than 30d
  retract                                   moved: python -m openclaw.control retract
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

from openclaw.buffer.duration import parse_duration
from openclaw.buffer.errors import BufferNotFoundError
from openclaw.buffer.exchange import ImportFormatError, export_sessions, import_sessions, parse_sessions
from openclaw.buffer.files import wal_problems
from openclaw.buffer.location import buffer_dir_from_env
from openclaw.buffer.records import TurnRecord
from openclaw.buffer.schema import DB_NAME
from openclaw.buffer.store import TrajectoryBuffer


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", "--rl-buffer-dir", dest="dir", default=argparse.SUPPRESS,
                        help="buffer directory (env RL_BUFFER_DIR; default ./rl_buffer)")
    p = argparse.ArgumentParser(prog="python -m openclaw.buffer", parents=[common],
                                description="Inspect and maintain the RL trajectory buffer.")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stats", parents=[common], help="counts, sizes, consumers, counters")
    s.add_argument("--json", action="store_true")
    s = sub.add_parser("tail", parents=[common], help="latest turns")
    s.add_argument("-n", type=int, default=20)
    s.add_argument("--session", default=None)
    s.add_argument("--follow", "-f", action="store_true", help="keep printing new turns (Ctrl-C to stop)")
    s.add_argument("--json", action="store_true", help="one JSON object per turn (reference turn format)")
    s = sub.add_parser("export", parents=[common], help="sessions in the reference JSON format")
    s.add_argument("--format", choices=("json", "jsonl"), default="json")
    s.add_argument("--session", action="append", default=None, help="only this session (repeatable)")
    s.add_argument("--text-only", action="store_true", help="leave out token ids and log-probs")
    s.add_argument("--user", default=None, help="only this user's sessions (per-user servers: --api-keys-file)")
    s.add_argument("-o", "--out", default="-", help="output file (default stdout); written 0600")
    s = sub.add_parser("import", parents=[common], help="sessions from reference JSON / JSONL")
    s.add_argument("file", help="JSON or JSONL file ('-' for stdin)")
    s.add_argument("--tokenizer", default=None,
                   help="HF tokenizer/model folder to tokenize text-only trainable turns (else stored non-trainable)")
    s.add_argument("--no-redact", action="store_true", help="do not redact secrets in the imported text")
    sub.add_parser("verify", parents=[common], help="integrity check (exit 1 on problems)")
    s = sub.add_parser("purge", parents=[common], help="delete a session completely, or everything older than a TTL")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--session", action="append", default=None, help="session id (repeatable)")
    g.add_argument("--older-than", default=None, help="duration: 3600, 90m, 12h, 30d")
    # retract rolls served weights back too, which is the control layer's: a name never ignored
    sub.add_parser("retract", help="moved: python -m openclaw.control retract (same flags)")
    return p


def _dir(args: argparse.Namespace) -> Path:
    return Path(getattr(args, "dir", None) or buffer_dir_from_env())


def _open(args: argparse.Namespace, *, create: bool = False) -> TrajectoryBuffer:
    try:
        return TrajectoryBuffer.open(_dir(args), create=create)
    except BufferNotFoundError as e:
        raise SystemExit(f"openclaw.buffer: error: {e}") from None


def _short(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _line(t: TurnRecord) -> str:
    resp = t.content if t.content is not None else t.response_text
    ns = "" if t.next_state is None else f" => {_short(str(t.next_state.get('content', '')), 30)!r}"
    return (f"#{t.turn_id} {_short(t.session_id, 40)}[{t.turn_index}] {t.turn_type:<4} {t.state:<19} "
            f"v{t.weight_version} {len(t.response_ids):>4}tok  {_short(t.prompt_text, 40)!r} -> {_short(resp or '', 40)!r}{ns}")


def cmd_stats(args: argparse.Namespace) -> int:
    with _open(args) as b:
        st = b.stats()
    if args.json:
        print(json.dumps(st, indent=2))
        return 0
    print(f"buffer      {st['dir']}")
    print(f"turns       {st['turns']}  ({', '.join(f'{k}={v}' for k, v in st['by_type'].items()) or 'none'})")
    for k, v in st["by_state"].items():
        print(f"  {k:<20} {v}")
    print(f"sessions    {st['sessions']} ({st['open_sessions']} open)")
    print(f"leased      {st['leased']}")
    mb = st["max_bytes"]
    print(f"size        {st['used_bytes'] / 1e6:.2f} MB live, file {st['file_bytes'] / 1e6:.2f} MB, "
          f"wal {st['wal_bytes'] / 1e6:.2f} MB" + (f", bound {mb / 1e6:.2f} MB" if mb else ""))
    for c in st["consumers"]:
        print(f"consumer    {c['consumer_id']}: {c['consumed']} consumed, checkpoint {c['checkpoint_tag']}")
    for k, v in sorted(st["counters"].items()):
        print(f"counter     {k} = {v}")
    return 0


def cmd_tail(args: argparse.Namespace) -> int:
    from openclaw.buffer.exchange import export_turn

    with _open(args) as b:
        def latest(after: int, n: int) -> list[TurnRecord]:
            return b.latest_turns(n, after_turn_id=after, session_id=args.session)

        def show(ts: list[TurnRecord]) -> int:
            for t in ts:
                print(json.dumps({"session_id": t.session_id, **export_turn(t, tokens=False)}) if args.json else _line(t),
                      flush=True)
            return ts[-1].turn_id if ts else 0

        last = show(latest(0, args.n))
        while args.follow:
            time.sleep(1.0)  # a human-facing follow mode polls the file once a second
            last = show(latest(last, 1000)) or last
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    with _open(args) as b:
        sessions = list(export_sessions(b, args.session, tokens=not args.text_only, user_id=args.user))
        if args.out != "-":  # recorded before the file exists: a retract can always find (and rewrite) it
            b.record_export(args.out, [s["session_id"] for s in sessions])
    if args.format == "json":
        text = json.dumps(sessions[0] if args.session and len(sessions) == 1 else sessions, indent=1, ensure_ascii=False)
    else:
        text = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in sessions)
    if args.out == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # conversations are private
        with os.fdopen(fd, "w") as f:
            f.write(text)
    print(f"exported {len(sessions)} session(s), {sum(len(s['turns']) for s in sessions)} turn(s)", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    try:
        sessions = parse_sessions(text)
    except ImportFormatError as e:
        print(f"openclaw.buffer: error: {args.file}: {e}", file=sys.stderr)
        return 2
    tok = None
    if args.tokenizer:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.tokenizer)
    redactor = None
    if not args.no_redact:
        from openclaw.buffer.redact import Redactor

        redactor = Redactor()
    with _open(args, create=True) as b:
        try:
            rep = import_sessions(b, sessions, tokenizer=tok, redactor=redactor)
        except ImportFormatError as e:
            print(f"openclaw.buffer: error: {e}", file=sys.stderr)
            return 2
    print(f"imported {rep.sessions} session(s), {rep.turns} turn(s); skipped {rep.skipped_sessions} existing "
          f"session(s); {rep.redacted} turn(s) redacted")
    if rep.untrainable_no_tokens:
        print(f"note: {rep.untrainable_no_tokens} trainable turn(s) had no token ids and were stored non-trainable "
              "(pass --tokenizer MODEL to tokenize them)")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    try:
        with _open(args) as b:
            problems = b.verify()
            n = b.stats()["turns"]
    except sqlite3.DatabaseError as e:
        # A database SQLite cannot even open (e.g. a live writer's WAL was deleted under it):
        # still say which process writes where, then fail.
        problems = [f"cannot open the database: {e}", *wal_problems(_dir(args) / DB_NAME)]
        n = 0
    if problems:
        for p in problems:
            print(p)
        print(f"FAILED: {len(problems)} problem(s) in {n} turn(s)")
        return 1
    print(f"ok: {n} turn(s), integrity_check ok, invariants hold")
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    with _open(args) as b:
        if args.session:
            for sid in args.session:
                print(f"purged session {sid!r}: {b.purge_session(sid)} turn(s)")
        else:
            try:
                secs = parse_duration(args.older_than, "--older-than")
            except ValueError as e:
                print(f"openclaw.buffer: error: {e}", file=sys.stderr)
                return 2
            print(f"purged {b.purge_older_than(secs)} turn(s) older than {args.older_than}")
    return 0


def cmd_retract(args: argparse.Namespace) -> int:
    print("openclaw.buffer: error: retract is `python -m openclaw.control retract` (the same flags: --dir, --session "
          "or --pending, --engine-url, --policy): it rolls the served weights back as well", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    args, rest = _parser().parse_known_args(argv)
    if rest and args.cmd != "retract":  # retract's own flags are the control CLI's: refused there by name
        _parser().parse_args(argv)  # the usual error naming the unrecognized arguments
    return {"stats": cmd_stats, "tail": cmd_tail, "export": cmd_export, "import": cmd_import,
            "verify": cmd_verify, "purge": cmd_purge, "retract": cmd_retract}[args.cmd](args)


def run(argv: list[str] | None = None) -> int:
    """`main` for a shell: `... stats | head` closes the pipe early, which ends the command
    quietly (status 141, as a process killed by SIGPIPE) instead of with a traceback."""
    try:
        rc = main(argv)
        sys.stdout.flush()  # a closed pipe surfaces here, inside the handler, not at exit
        return rc
    except BrokenPipeError:
        # Python flushes stdout again at exit; point it at /dev/null so that flush is silent.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 128 + 13


if __name__ == "__main__":
    sys.exit(run())
