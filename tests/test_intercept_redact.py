"""Secret redaction: the kinds added for Stripe, GitLab, payment cards (Luhn),
e-mail addresses and passwords in prose, their near-misses, and repeated `--rl-redact-pattern`
flags all applying behind the real server (the bytes of the SQLite file and its WAL grepped)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openclaw.buffer import TrajectoryBuffer
from openclaw.buffer.redact import Redactor, SessionSecrets, luhn_valid
from openclaw.server.config import parse_config


@pytest.mark.parametrize("text,kind,secret", [
    ("pay with sk_live_51HxYzAbCdEfGhIjKlMnOp now", "stripe_key", "51HxYzAbCdEfGhIjKlMnOp"),
    ("restricted rk_live_abcdefghijklmnop1234", "stripe_key", "abcdefghijklmnop1234"),
    ("token glpat-abcdefghij0123456789xy ok", "gitlab_token", "abcdefghij0123456789xy"),
    ("card 4111 1111 1111 1111 exp 12/27", "payment_card", "4111 1111 1111 1111"),
    ("card 5500-0055-5555-5559 please", "payment_card", "5500-0055-5555-5559"),
    ("amex 378282246310005.", "payment_card", "378282246310005"),
    ("mail bob.smith+x@example.co.uk today", "email", "bob.smith+x@example.co.uk"),
    ("my password is hunter2", "password", "hunter2"),
    ("My Password Is Hunter2!", "password", "Hunter2"),
    ("pw is abc123, don't share", "password", "abc123"),
    ("my pwd: s3cr3t", "password", "s3cr3t"),
    ("the password for the VPN is 'correct horse battery'", "password", "correct horse battery"),
    ("the passphrase was \"open sesame\" ok", "password", "open sesame"),
    ("password is now Tr0ub4dor&3", "password", "Tr0ub4dor&3"),
    # AWS secret access keys: the CLI's JSON, env/credentials files, `aws configure`, prose, CSV.
    ('{"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7"}', "aws_secret", "wJalrXUtnFEMI"),
    ("export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7", "aws_secret", "wJalrXUtnFEMI"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7", "aws_secret", "wJalrXUtnFEMI"),
    ("secretAccessKey: 'wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7'", "aws_secret", "wJalrXUtnFEMI"),
    ("AWS Secret Access Key [None]: wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7", "aws_secret", "wJalrXUtnFEMI"),
    ("aws secret access key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7", "aws_secret", "wJalrXUtnFEMI"),
    ("my AWS secret is wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7.", "aws_secret", "wJalrXUtnFEMI"),
    ("the aws secret key for prod is wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7", "aws_secret", "wJalrXUtnFEMI"),
    ("Access key ID,Secret access key\nAKIAIOSFODNN7EXAMPLE,wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9Q2w8E4r7",
     "aws_secret", "wJalrXUtnFEMI"),
    ('"SessionToken": "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQ=="', "aws_session_token",
     "IQoJb3JpZ2luX2VjEJr"),
])
def test_each_kind_is_redacted(text: str, kind: str, secret: str) -> None:
    out, n = Redactor().redact_text(text)
    assert n >= 1 and f"[REDACTED:{kind}]" in out and secret not in out, out


@pytest.mark.parametrize("text", [
    "order 4111 1111 1111 1112 shipped",  # 16 digits, Luhn fails
    "tracking 1234567890123456",  # Luhn fails
    "id 12345678901234567890123",  # longer than any card
    "call +1 415 555 0100",
    "timestamp 1700000000000 ms",
    "I forgot my password.",
    "password is required",
    "What is a good password?",
    "reset your password via the link",
    "the password is wrong, try again",
    "the password is being reset",
    "sk_live_ alone", "glpat- alone",
    "matrix a@b.T and @decorator",
    "upwards pw",
    "commit 3f786850e387550fdab836ed7e6dc881de23001b",  # 40 characters, no AWS cue
    "the aws secret is stored in the vault",
    "rotate the secret access key every 90 days",
])
def test_near_misses_are_kept(text: str) -> None:
    assert Redactor().redact_text(text) == (text, 0)


def test_remembered_values_are_redacted_without_their_cue() -> None:
    """What a pattern recognised only by its cue is remembered; the repeat is redacted, as a whole
    word, in any case and spacing, also in strings too short for any pattern."""
    r, memory = Redactor(), SessionSecrets()
    found = r.secrets_in(["my vault passphrase is 'correct  horse battery'", "pw: Xy7", "api_key=abcdef123",
                          "see https://bob:s3cretpw@host/x", "key sk-abcdefghijklmnopqrstu", "bob@example.org"])
    assert sorted(found) == [("assignment", "abcdef123"), ("password", "Xy7"),
                             ("password", "correct  horse battery"), ("url_credentials", "s3cretpw")]
    memory.learn("s1", found)
    known = memory.known("s1")
    assert memory.known("s2") is None
    assert r.redact_text("to confirm: CORRECT horse\nbattery, and xy7!", known) == (
        "to confirm: [REDACTED:password], and [REDACTED:password]!", 2)
    assert r.redact_text("Xy7", known) == ("[REDACTED:password]", 1)
    assert r.redact_text("abcdef123 and s3cretpw", known) == ("[REDACTED:assignment] and [REDACTED:url_credentials]", 2)
    assert r.redact_text("Xy70 and aXy7 stay", known) == ("Xy70 and aXy7 stay", 0)  # whole words only
    assert r.redact({"k": ["Xy7"]}, known) == ({"k": ["[REDACTED:password]"]}, 1)
    memory.learn("s2", [("password", "hunter22")])
    assert r.redact_text("Xy7 hunter22", memory.known_anywhere()) == ("[REDACTED:password] [REDACTED:password]", 2)


def test_session_memory_is_bounded_least_recent_first() -> None:
    memory = SessionSecrets(max_sessions=2)
    for sid in ("a", "b"):
        memory.learn(sid, [("password", f"secret-{sid}")])
    assert memory.known("a") is not None  # "a" used: "b" is now the least recent
    memory.learn("c", [("password", "secret-c")])
    assert len(memory) == 2 and memory.known("b") is None and memory.known("a") is not None


def test_luhn() -> None:
    assert luhn_valid("4111 1111 1111 1111") and luhn_valid("378282246310005")
    assert not luhn_valid("4111 1111 1111 1112") and not luhn_valid("")


# ---- real server: two custom patterns, both applied --------------------------------------------
FIRST, SECOND = "ALPHA-SECRET-90210", "BRAVO-KEY-55512"
BUILTIN = ["sk_live_51HxYzAbCdEfGhIjKlMnOp", "glpat-abcdefghij0123456789xy", "4111 1111 1111 1111",
           "alice.w@example.org", "hunter2hunter"]


@pytest.fixture(scope="module")
def engine(tiny_model_path: Path) -> Iterator[Any]:
    from openclaw.engines.hf_engine import HFEngine

    eng = HFEngine.load(str(tiny_model_path), dtype="float32", device="cpu", max_batch_size=4)
    yield eng
    asyncio.run(eng.shutdown())


def test_repeated_custom_patterns_all_apply_on_disk(engine: Any, tmp_path: Path) -> None:
    from openclaw.server.app import create_app
    from openclaw.server.runner import serve_in_background

    d = tmp_path / "buf"
    cfg = parse_config(["--enable-rl-intercept", "--rl-buffer-dir", str(d),
                        "--rl-redact-pattern", r"ALPHA-SECRET-\d+", "--rl-redact-pattern", r"BRAVO-KEY-\d+"], env={})
    messages = [{"role": "user", "content": f"first {FIRST}, second {SECOND}; also {', '.join(BUILTIN[:4])}"
                                            f" and my password is {BUILTIN[4]}"}]
    with serve_in_background(create_app(cfg, engine=engine)) as srv, \
            httpx.Client(base_url=srv.base_url, timeout=60) as client:
        r = client.post("/v1/chat/completions", headers={"X-Session-Id": "leak"},
                        json={"model": "m", "messages": messages, "max_tokens": 4, "temperature": 0})
        assert r.status_code == 200, r.text
        r = client.post("/v1/chat/completions", headers={"X-Session-Id": "leak"},
                        json={"model": "m", "max_tokens": 4, "temperature": 0, "messages": messages + [
                            {"role": "assistant", "content": r.json()["choices"][0]["message"]["content"] or ""},
                            {"role": "user", "content": f"again: {SECOND} {FIRST}"}]})
        assert r.status_code == 200, r.text
        live = {p.name: p.read_bytes() for p in d.iterdir() if p.is_file()}
        assert any(name.endswith("-wal") for name in live)  # the WAL is there, and grepped, while serving
        raw = b"".join(live.values())
        for needle in [FIRST, SECOND, *BUILTIN]:
            assert needle.encode() not in raw, needle
    raw = b"".join(p.read_bytes() for p in d.rglob("*") if p.is_file())
    for needle in [FIRST, SECOND, *BUILTIN]:
        assert needle.encode() not in raw, needle
    with TrajectoryBuffer.open(d) as buf:
        turns = buf.session_turns("leak")
    text = turns[0].messages[0]["content"]
    assert "[REDACTED:custom0]" in text and "[REDACTED:custom1]" in text and "[REDACTED:password]" in text
    assert "[REDACTED:custom1]" in turns[0].next_state["content"]
    assert all(not t.trainable for t in turns)
