"""The server's RL intercept and judge options, parsed once into typed frozen configs, and one
definition of the judge defaults."""

from __future__ import annotations

import argparse
import dataclasses
import re
from pathlib import Path

import pytest

import openclaw.judge.config as jc
from openclaw.intercept.config import DEFAULT_BUFFER_DIR, DEFAULT_IDLE_TIMEOUT_S, InterceptConfig
from openclaw.judge.config import JudgeConfig, add_judge_args
from openclaw.server.config import ConfigError, RLConfig, parse_config

REPO = Path(__file__).resolve().parents[1]


def judge_cli_config(argv: list[str], env: dict[str, str] | None = None) -> JudgeConfig:
    """What `python -m openclaw.judge` builds from `argv` (its own parser)."""
    return JudgeConfig.from_args(add_judge_args(argparse.ArgumentParser(), env or {}).parse_args(argv))


def test_configs_are_typed_and_frozen() -> None:
    cfg = parse_config(["--enable-rl-intercept", "--judge-workers", "2"], env={})
    assert isinstance(cfg.rl, RLConfig) and isinstance(cfg.rl.intercept, InterceptConfig)
    assert isinstance(cfg.rl.judge, JudgeConfig)
    for obj in (cfg.rl, cfg.rl.intercept, cfg.rl.judge):
        with pytest.raises(dataclasses.FrozenInstanceError):
            obj.enabled = False  # type: ignore[misc, union-attr]
    assert not hasattr(cfg.rl, "options")  # no dict of strings left for anyone to re-parse


def test_repeated_list_flags_keep_every_value() -> None:
    cfg = parse_config(["--enable-rl-intercept", "--rl-redact-pattern", "A", "--rl-side-user-pattern", "^/t",
                        "--rl-redact-pattern", "B", "--rl-redact-pattern=C", "--rl-side-user-pattern", "^/s"], env={})
    assert cfg.rl.intercept.extra_redact_patterns == ("A", "B", "C")
    assert cfg.rl.intercept.side_user_patterns == ("^/t", "^/s")
    assert [p.pattern for p in cfg.rl.intercept.compiled_redact] == ["A", "B", "C"]
    # A JSON list is not a list syntax: it is one (literal) regular expression.
    assert parse_config(["--enable-rl-intercept", "--rl-redact-pattern", '["A", "B"]'],
                        env={}).rl.intercept.extra_redact_patterns == ('["A", "B"]',)


@pytest.mark.parametrize("argv,message", [
    (["--enable-rl-intercept", "--rl-redact-patern", "x"], "--rl-redact-patern (did you mean --rl-redact-pattern?)"),
    (["--enable-rl-intercept", "--rl-retension-ttl=30d"], "--rl-retension-ttl=30d (did you mean --rl-retention-ttl?)"),
    (["--enable-rl-intercept", "--judge-workers", "1", "--judge-timout", "3"],
     "--judge-timout (did you mean --judge-timeout?)"),
    (["--majority-vote-m", "5"], "--majority-vote-m (did you mean --majority-vote-n?)"),
    (["--rl-whatever-this-is"], "unrecognized argument: --rl-whatever-this-is"),
])
def test_unknown_rl_and_judge_flags_are_errors_naming_the_flag(argv: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(argv, env={})
    assert message in str(exc.value)


def test_judge_flags_without_judge_workers_are_refused_not_ignored() -> None:
    with pytest.raises(ConfigError, match=r"--prm-m/--majority-vote-n need --judge-workers N"):
        parse_config(["--enable-rl-intercept", "--majority-vote-n", "5"], env={})
    with pytest.raises(ConfigError, match="--judge-workers needs --enable-rl-intercept"):
        parse_config(["--judge-workers", "1"], env={})
    # Environment defaults are not flags: they never make a server refuse to start.
    assert parse_config(["--enable-rl-intercept"], env={"MAJORITY_VOTE_N": "5"}).rl.judge is None


def test_bad_values_are_config_errors_not_exits() -> None:
    for argv, message in [(["--enable-rl-intercept", "--judge-workers", "1", "--majority-vote-n", "many"],
                           "invalid int value: 'many'"),
                          (["--enable-rl-intercept", "--rl-durability", "maybe"], "invalid choice: 'maybe'"),
                          (["--enable-rl-intercept", "--session-idle-timeout", "soon"], "--session-idle-timeout"),
                          (["--enable-rl-intercept", "--judge-workers", "1", "--judge-backend", "llm"], "--judge-url")]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            parse_config(argv, env={})
    with pytest.raises(ConfigError, match="MAJORITY_VOTE_N='many'"):
        parse_config([], env={"MAJORITY_VOTE_N": "many"})


def test_judge_defaults_have_one_definition() -> None:
    expected = (jc.DEFAULT_MAJORITY_VOTE_N, jc.DEFAULT_MAJORITY_VOTE_THRESHOLD, jc.DEFAULT_NUM_JUDGE_WORKERS,
                jc.DEFAULT_JUDGE_TIMEOUT_S, jc.DEFAULT_JUDGE_RETRIES)
    assert expected == (3, 0.6, 1, 60.0, 2)  # what the READMEs promise

    def key(c: JudgeConfig) -> tuple:
        return (c.m, c.threshold, c.num_workers, c.timeout_s, c.retries)

    server = parse_config(["--enable-rl-intercept", "--judge-workers", str(jc.DEFAULT_NUM_JUDGE_WORKERS)], env={}).rl.judge
    assert server is not None
    assert key(JudgeConfig()) == key(judge_cli_config([])) == key(server) == expected
    assert server == judge_cli_config([]) == JudgeConfig()  # every other field agrees too
    # The reference's env vars set the same defaults in both.
    env = {"MAJORITY_VOTE_N": "5", "MAJORITY_VOTE_THRESHOLD": "0.8"}
    server = parse_config(["--enable-rl-intercept", "--judge-workers", "1"], env=env).rl.judge
    assert server is not None and (server.m, server.threshold) == (5, 0.8) == \
        (judge_cli_config([], env).m, judge_cli_config([], env).threshold)


def test_readmes_state_the_judge_defaults_of_the_code() -> None:
    """The judge README's defaults table: each constant's row shows the constant's value."""
    rows = {m.group(1): m.group(2) for m in re.finditer(r"\| `(DEFAULT_[A-Z_]+)` \| ([^|]+) \|",
                                                        (REPO / "openclaw/judge/README.md").read_text())}
    assert set(rows) == {"DEFAULT_MAJORITY_VOTE_N", "DEFAULT_MAJORITY_VOTE_THRESHOLD", "DEFAULT_NUM_JUDGE_WORKERS",
                         "DEFAULT_JUDGE_TIMEOUT_S", "DEFAULT_JUDGE_RETRIES"}
    for name, shown in rows.items():
        assert shown.split()[0] == f"{getattr(jc, name):g}", (name, shown)


def test_intercept_defaults_have_one_definition() -> None:
    cfg = parse_config(["--enable-rl-intercept"], env={}).rl.intercept
    assert cfg == InterceptConfig()
    assert (cfg.buffer_dir, cfg.session_idle_timeout) == (DEFAULT_BUFFER_DIR, DEFAULT_IDLE_TIMEOUT_S)
    assert parse_config([], env={"RL_BUFFER_DIR": "/tmp/x"}).rl.buffer_dir == Path("/tmp/x")


def test_no_systemexit_control_flow_in_judge_or_server_config() -> None:
    for path in [*(REPO / "openclaw/judge").glob("*.py"), REPO / "openclaw/server/config.py",
                 REPO / "openclaw/server/judge_loader.py", REPO / "openclaw/intercept/config.py"]:
        assert "SystemExit" not in path.read_text(), path


def test_server_cli_names_an_unknown_flag_and_exits_2() -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "openclaw.server", "--enable-rl-intercept", "--rl-redact-patern", "x"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "unrecognized argument: --rl-redact-patern (did you mean --rl-redact-pattern?)" in proc.stderr
