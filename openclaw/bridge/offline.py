"""Offline conversation data (`DATA_PATH`) into the trajectory buffer, for any of the three methods.

    python -m openclaw.bridge.offline --rl-buffer-dir DIR [--tokenizer MODEL] DATA_PATH [DATA_PATH ...]

DATA_PATH is a session file in the public pages' format (`{"session_id", "turns": [{"type":
"main"|"side", "prompt", "response", "next_state", "trainable"}]}`; a list of sessions, or JSONL with
one per line) or a directory of `.json` / `.jsonl` files (sorted by name, subdirectories included).
What happens to each turn is printed, never only counted:
  * sessions keep their ids; a session id already in the buffer is not imported again, so the same
    file imported twice trains once (the buffer's per-method consumers see each turn once);
  * main turns are tokenised with the model's chat template (`--tokenizer`, default $MODEL_PATH or
    the embedded model), so they train; side turns and `trainable: false` turns are stored as
    context and said to be not trained; a main turn without `next_state` is said to have no feedback
    (each method skips it when draining: no score, no hint);
  * log-probs: imported text has none; the trainer's drain takes them from the current policy
    (`openclaw.bridge.behaviour` says why that is the behaviour policy).
The judge scores the imported main turns from their `next_state` like live ones.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.exchange import ImportFormatError, import_sessions, parse_sessions
from openclaw.environment import env_value

SESSION_SUFFIXES = (".json", ".jsonl")


def session_files(data_path: str | os.PathLike[str]) -> list[Path]:
    """The session files DATA_PATH names: the file itself, or every .json/.jsonl under a directory."""
    p = Path(data_path).expanduser()
    if p.is_file():
        return [p]
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.is_file() and f.suffix in SESSION_SUFFIXES)
        if not files:
            raise FileNotFoundError(f"DATA_PATH {str(p)!r} is a directory with no .json or .jsonl session files")
        return files
    raise FileNotFoundError(f"DATA_PATH {str(p)!r} does not exist")


@dataclass
class OfflineImport:
    files: list[Path] = field(default_factory=list)
    sessions: int = 0
    turns: int = 0
    already_imported: list[str] = field(default_factory=list)  # session ids found in the buffer
    not_trained: list[tuple[str, int, str]] = field(default_factory=list)  # (session id, turn #, why)


def _why_not_trained(rec: Any) -> str | None:
    if rec.turn_type == "side":
        return "side turn: context, not the policy's trainable output"
    if not rec.trainable:
        if (rec.metadata or {}).get("untrainable_reason") == "redacted":
            return "a secret was redacted from its text, so its tokens are not what the model saw"
        if not rec.response_ids:
            return "no token ids (import with --tokenizer MODEL to tokenise it)"
        return "marked trainable: false in the file"
    if not rec.next_state:
        return "no next_state: no feedback, so no method has a signal for it (skipped when training)"
    return None


def import_data_path(buffer_dir: str | os.PathLike[str], data_paths: list[str], *, tokenizer: Any = None,
                     redact: bool = True, say: Callable[[str], None] = print) -> OfflineImport:
    """Import every session file of `data_paths` into the buffer at `buffer_dir` (created if absent:
    this is the buffer the server will also write), saying what happens to each session and turn."""
    redactor = None
    if redact:
        from openclaw.buffer.redact import Redactor

        redactor = Redactor()
    out = OfflineImport()
    with TrajectoryBuffer.open(buffer_dir, create=True) as buf:
        for path in [f for d in data_paths for f in session_files(d)]:
            try:
                sessions = parse_sessions(path.read_text())
            except ImportFormatError as exc:
                raise ImportFormatError(f"{path}: {exc}") from None
            known = set(buf.session_ids())
            fresh = [s for s in sessions if s["session_id"] not in known]
            for s in sessions:
                if s["session_id"] in known:
                    out.already_imported.append(s["session_id"])
                    say(f"{path}: session {s['session_id']!r} is already in the buffer: not imported again "
                        "(each session trains once)")
            rep = import_sessions(buf, fresh, tokenizer=tokenizer, redactor=redactor)
            out.files.append(path)
            out.sessions += rep.sessions
            out.turns += rep.turns
            for s in fresh:
                for j, rec in enumerate(buf.session_turns(s["session_id"])):
                    why = _why_not_trained(rec)
                    if why:
                        out.not_trained.append((s["session_id"], j, why))
                        say(f"{path}: session {s['session_id']!r} turn #{j}: not trained: {why}")
            say(f"{path}: imported {rep.sessions} session(s), {rep.turns} turn(s)")
    return out


def load_tokenizer(path: str | None) -> Any:
    from transformers import AutoTokenizer

    from openclaw.models import resolve_model_path

    return AutoTokenizer.from_pretrained(resolve_model_path(path or env_value("MODEL_PATH")))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m openclaw.bridge.offline", description=__doc__.splitlines()[0])
    p.add_argument("data_path", nargs="+", help="session file(s) or directories of .json/.jsonl files")
    p.add_argument("--rl-buffer-dir", required=True, help="the trajectory buffer (the server's --rl-buffer-dir)")
    p.add_argument("--tokenizer", default=None, help="model folder whose chat template tokenises the turns "
                   "(default: $MODEL_PATH, else the embedded model)")
    p.add_argument("--no-redact", action="store_true", help="do not redact secrets in the imported text")
    args = p.parse_args(argv)
    try:
        for path in args.data_path:
            session_files(path)  # a wrong DATA_PATH fails before the tokenizer loads
        report = import_data_path(args.rl_buffer_dir, args.data_path, tokenizer=load_tokenizer(args.tokenizer),
                                  redact=not args.no_redact)
    except (FileNotFoundError, ImportFormatError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"DATA_PATH: {report.sessions} session(s), {report.turns} turn(s) from {len(report.files)} file(s); "
          f"{len(report.already_imported)} already imported; {len(report.not_trained)} turn(s) not trained")
    return 0


if __name__ == "__main__":
    sys.exit(main())
