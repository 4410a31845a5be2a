"""Session tracker, message helpers, redaction and config: the pure logic, on real inputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from openclaw.buffer import TurnRecord
from openclaw.buffer.redact import Redactor
from openclaw.intercept.config import InterceptConfig
from openclaw.intercept.messages import INTERNAL_BEGIN, INTERNAL_END, next_state_from, runtime_session_id
from openclaw.intercept.sessions import SessionTracker
from openclaw.server.hooks import RLControl


def observe(tr: SessionTracker, messages: list[dict], content: str = "ok", tool_calls=None, control=None,
            tools=None, now: float = 0.0):
    d = tr.observe(control=control or RLControl(), messages=messages, tools=tools, content=content,
                   tool_calls=tool_calls, now=now)
    rec = TurnRecord(session_id=d.session_id, turn_index=None, turn_type=d.turn_type, messages=messages)
    tr.recorded(d, rec if d.store else None)
    return d, rec


def test_continuity_tolerates_edited_reply_and_internal_context() -> None:
    tr = SessionTracker(InterceptConfig())
    m1 = [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"},
          {"role": "user", "content": f"{INTERNAL_BEGIN}\nstuff\n{INTERNAL_END}"}]
    d1, r1 = observe(tr, m1, content="<think>x</think>Hello!")
    # the client strips the reasoning from the echoed reply: the loose key still matches
    m2 = m1[:2] + [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": "next"}]
    d2, _ = observe(tr, m2)
    assert d2.session_id == d1.session_id and d2.source == "continuity"
    assert d2.attach_to is r1 and d2.next_state["content"] == "next"


def test_same_opening_two_sessions_tie_broken_by_system_prompt() -> None:
    tr = SessionTracker(InterceptConfig())
    a, _ = observe(tr, [{"role": "system", "content": "A"}, {"role": "user", "content": "hi"}], now=1)
    b, _ = observe(tr, [{"role": "system", "content": "B"}, {"role": "user", "content": "hi"}], now=2)
    assert a.session_id != b.session_id
    follow = [{"role": "system", "content": "A"}, {"role": "user", "content": "hi"},
              {"role": "assistant", "content": "ok"}, {"role": "user", "content": "again"}]
    d, _ = observe(tr, follow, now=3)
    assert d.session_id == a.session_id


def test_side_rules_do_not_touch_the_main_thread() -> None:
    cfg = InterceptConfig(side_system_patterns=(r"(?i)generate a short title",), side_no_history_without_tools=True)
    tr = SessionTracker(cfg)
    tools = [{"type": "function", "function": {"name": "f"}}]
    m1 = [{"role": "user", "content": "hi"}]
    d1, r1 = observe(tr, m1, tools=tools)
    assert d1.turn_type == "main"
    side, _ = observe(tr, [{"role": "system", "content": "Generate a short title"}, {"role": "user", "content": "hi"}])
    assert side.turn_type == "side" and side.attach_to is None
    util, _ = observe(tr, [{"role": "user", "content": "summarize: blah"}])  # no tools, no history
    assert util.turn_type == "side"
    d2, _ = observe(tr, m1 + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}], tools=tools)
    assert d2.session_id == d1.session_id and d2.attach_to is r1


def test_explicit_turn_type_and_done() -> None:
    tr = SessionTracker(InterceptConfig())
    d, _ = observe(tr, [{"role": "user", "content": "x"}], control=RLControl(session_id="s", turn_type="side"))
    assert d.turn_type == "side" and d.session_id == "s"
    d, _ = observe(tr, [{"role": "user", "content": "x"}], control=RLControl(session_id="s", session_done=True))
    assert d.finalize and "s" not in tr


def test_idle_expiry() -> None:
    tr = SessionTracker(InterceptConfig())
    d, _ = observe(tr, [{"role": "user", "content": "x"}], now=100.0)
    assert tr.expire(150.0, 60.0) == [] and tr.expire(161.0, 60.0) == [d.session_id]
    d2, _ = observe(tr, [{"role": "user", "content": "x"}, {"role": "assistant", "content": "ok"},
                         {"role": "user", "content": "y"}], now=170.0)
    assert d2.session_id != d.session_id and d2.attach_to is None  # expired: a new session


def test_runtime_line_and_next_state() -> None:
    msgs = [{"role": "user", "content": "hello\n\nRuntime: agent=main | session=agent:main:x | sessionId=abc-123 | host=vm"}]
    assert runtime_session_id(msgs) == "abc-123"
    assert runtime_session_id([{"role": "assistant", "content": "sessionId=nope"}]) is None
    # user text imitating the line: control characters never reach a session id
    assert runtime_session_id([{"role": "user", "content": "sessionId=ab\x00cd"}]) == "ab"
    assert runtime_session_id([{"role": "user", "content": "sessionId=\x00\n" + "y" * 10_000}]) is None
    tool_loop = [{"role": "user", "content": "q"},
                 {"role": "assistant", "content": "", "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": "a", "content": "r1"}, {"role": "tool", "tool_call_id": "b", "content": "r2"},
                 {"role": "user", "content": f"{INTERNAL_BEGIN}x{INTERNAL_END}"}]
    ns = next_state_from(tool_loop)
    assert ns["role"] == "tool" and ns["content"] == "r1\n\nr2" and len(ns["messages"]) == 2
    assert next_state_from([{"role": "user", "content": "only"}])["content"] == "only"
    assert next_state_from([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]) is None


@pytest.mark.parametrize("secret,kind,needle", [
    ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345", "openai_key", "uvwxyz012345"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "github_token", "0123456789"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", "github_token", "abcdefghijk"),
    ("AKIAIOSFODNN7EXAMPLE", "aws_access_key", "IOSFODNN7"),
    ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret", "bPxRfiCY"),
    ("xoxb-1234567890-abcdefghij", "slack_token", "abcdefghij"),
    ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "google_api_key", "abcdefghijkl"),
    ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_token", "ABCDEFGH"),
    ("Authorization: Bearer abcdef0123456789", "bearer", "abcdef0123456789"),
    ("https://bob:pa55word@git.example.com/repo.git", "url_credentials", "pa55word"),
    ("DB_PASSWORD='hunter2hunter2'", "assignment", "hunter2"),
    ("api_key: 0123456789abcdef", "assignment", "0123456789abcdef"),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----", "private_key", "MIIEvQ"),
    ("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIIrYSSNQFaA2Hwf1duRSxKtLYX5CB04fSeQ6\n(truncated", "private_key", "MHcCAQ"),
])
def test_redaction_patterns(secret: str, kind: str, needle: str) -> None:
    out, n = Redactor().redact_text(f"before {secret} after")
    assert n >= 1 and f"[REDACTED:{kind}]" in out and out.startswith("before ")
    assert needle not in out


@pytest.mark.parametrize("text", [
    "the key to success is practice", "use sklearn (sk-learn) for this", "reset your password via the link",
    "see https://example.com/path?a=b", "Bearer of bad news", "ask-me-anything-about-python-please",
])
def test_redaction_leaves_normal_text(text: str) -> None:
    assert Redactor().redact_text(text) == (text, 0)


def test_redaction_recurses_and_counts() -> None:
    r = Redactor(extra=[re.compile(r"ACME-\d{4}")])
    obj = {"messages": [{"role": "user", "content": [{"type": "text", "text": "id ACME-1234"}]}],
           "args": '{"token": "ghp_abcdefghijklmnopqrstuvwxyz0123456789"}'}
    out, n = r.redact(obj)
    assert n == 2 and "ACME-1234" not in str(out) and "ghp_" not in str(out)


def test_config_from_server_flags(tmp_path: Path) -> None:
    """The server parses the intercept's flags once into its typed InterceptConfig: repeated
    flags keep every value (no JSON lists), bad values are errors naming the flag."""
    from openclaw.server.config import ConfigError, parse_config

    rules = tmp_path / "side.txt"
    rules.write_text("# comment\n(?i)title\n")
    cfg = InterceptConfig.from_server_config(parse_config([
        "--enable-rl-intercept", "--rl-buffer-dir", str(tmp_path), "--rl-buffer-max-mb", "5",
        "--session-idle-timeout", "30", "--rl-retention-ttl", "30d", "--rl-redact-pattern", r"A\d+",
        "--rl-side-rules-file", str(rules), "--rl-redact-pattern", r"B\d+", "--rl-durability", "normal"], env={}))
    assert cfg.retention_ttl == 30 * 86400 and cfg.session_idle_timeout == 30 and cfg.buffer_max_mb == 5
    assert cfg.extra_redact_patterns == (r"A\d+", r"B\d+") and cfg.side_system_patterns == ("(?i)title",)
    assert cfg.durability == "normal"
    with pytest.raises(ConfigError, match="--rl-bogus"):
        parse_config(["--enable-rl-intercept", "--rl-bogus", "1"], env={})
    with pytest.raises(ConfigError, match="invalid regular expression"):
        parse_config(["--enable-rl-intercept", "--rl-redact-pattern", "(unclosed"], env={})
    with pytest.raises(ConfigError, match="duration"):
        parse_config(["--enable-rl-intercept", "--rl-retention-ttl", "forever"], env={})


def test_add_intercept_args_round_trip(tmp_path: Path) -> None:
    import argparse

    from openclaw.intercept import add_intercept_args

    p = argparse.ArgumentParser()
    add_intercept_args(p)
    ns = p.parse_args(["--rl-buffer-dir", str(tmp_path), "--session-idle-timeout", "90m",
                       "--rl-side-user-pattern", "^/title", "--rl-side-user-pattern", "^/summarize"])
    cfg = InterceptConfig.from_args(ns)
    assert cfg.session_idle_timeout == 5400 and cfg.side_user_patterns == ("^/title", "^/summarize")
