"""swe-rl's environment on a real shipped instance in the real sandbox: the four tools, the
patch, the 0/1 reward from the project's own tests, and the sandbox probes (no reading or
writing outside the episode copy, no network, nothing outlives the episode)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest
from slime.utils.plugins import load_plugin_module

ROOT = Path(__file__).resolve().parents[1]
# The trainer's plugin loader puts swe-rl on the import path, as in a run; its sibling
# modules are then imported by their own names (one module object each).
load_plugin_module("swe-rl/swe_sources.py")

import swe_sources  # noqa: E402
from swe_env import SweEnv, parse_action  # noqa: E402
from swe_instances import Instance, base_repo, shipped_instances, tree_hash  # noqa: E402

from openclaw.sandbox import Limits, SandboxConfig, SandboxPool  # noqa: E402
from openclaw.sandbox.uids import pids_with_marker  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


def call(name: str, **arguments: object) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": arguments}) + "</tool_call>"


@pytest.fixture(scope="module")
def instance() -> Instance:
    inst = next(i for i in shipped_instances("train") if i.mutation["kind"] != "remove-statement")
    missing = swe_sources.missing_sources([inst.sdist])
    if missing:
        msg = f"missing in {swe_sources.cache_dir()}: {missing}; run `bash swe-rl/setup_swe.sh`"
        pytest.fail(msg) if os.environ.get("CI") else pytest.skip(msg)
    return inst


def gold_lines(inst: Instance) -> tuple[str, str]:
    lines = inst.patch.splitlines()
    minus = next(ln[1:] for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    plus = next(ln[1:] for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    return minus, plus


def make_env(inst: Instance, sb, **kw) -> SweEnv:
    return SweEnv(inst, sb, base_repo(inst), swe_sources.pytest_runtime_dir(), **kw)


def pool() -> SandboxPool:
    return SandboxPool(SandboxConfig(limits=Limits(wall_timeout_s=60, cpu_seconds=60)), size=2)


def test_parse_action_forms():
    assert parse_action(call("view", path="a.py")).tool == "view"
    assert parse_action("```bash\nls -la\n```").arguments == {"command": "ls -la"}
    assert parse_action(call("rm_rf")).tool == "invalid"
    assert parse_action("<tool_call>{not json}</tool_call>").tool == "invalid"
    assert parse_action("I think the bug is in line 3.").tool == "invalid"
    first = parse_action("```bash\nls\n```\n" + call("submit"))
    assert first.tool == "bash"


async def test_tools_fix_the_bug_and_the_tests_reward_it(instance):
    minus, plus = gold_lines(instance)
    path = instance.mutation["file"]
    async with pool().session() as sb:
        env = make_env(instance, sb, max_steps=6)
        assert await env.reset() == instance.problem_statement
        seen = await env.step(call("view", path=path, start_line=instance.mutation["line"],
                                   end_line=instance.mutation["line"]))
        assert minus.strip() in seen.observation and seen.step_score == 1.0
        bad = await env.step(call("str_replace", path=path, old_str="no such text 123", new_str="x"))
        assert "occurs 0 times" in bad.observation and bad.step_score == 0.0
        fixed = await env.step(call("str_replace", path=path, old_str=minus, new_str=plus))
        assert fixed.step_score == 1.0, fixed.observation
        shell = await env.step("```bash\ngit status --short\n```")
        assert path in shell.observation
        done = await env.step(call("submit"))
        assert done.done and env.steps == 5
        result = await env.evaluate()
    assert result.resolved and result.reward == 1.0
    assert set(result.tests) == set(instance.test_ids) and all(o == "passed" for o in result.tests.values())
    assert f"+{plus}" in result.patch and f"-{minus}" in result.patch


async def test_deleting_or_editing_the_tests_does_not_earn_the_reward(instance):
    async with pool().session() as sb:
        env = make_env(instance, sb, max_steps=3)
        await env.reset()
        files = " ".join(instance.test_files)
        await env.step(f"```bash\nrm -f {files}\n```")
        await env.step(f"```bash\nmkdir -p tests && echo 'def test_ok(): pass' > {instance.test_files[0]}\n```")
        result = await env.evaluate()
    assert not result.resolved and result.reward == 0.0
    assert result.fail_to_pass_passed == 0  # the tests were restored from the base before running


async def test_model_commands_stay_inside_their_episode_copy(instance, tmp_path):
    secret = "s3cr3t-" + uuid.uuid4().hex
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(secret)
    os.chmod(tmp_path, 0o755)
    secret_file.chmod(0o644)  # world-readable: only the sandbox's mount namespace stands in the way
    base = base_repo(instance)
    before = tree_hash(base)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    accepted: list[object] = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    token = f"{1000 + uuid.uuid4().int % 100000}.{uuid.uuid4().int % 10**6:06d}"
    async with pool().session() as sb:
        env = make_env(instance, sb, max_steps=8, command_timeout_s=10)
        await env.reset()
        read = await env.step(f"```bash\ncat {secret_file}; ls {base}; cat /etc/shadow\n```")
        viewed = await env.step(call("view", path=str(secret_file)))
        wrote = await env.step(f"```bash\necho pwned > {tmp_path}/evil; echo pwned > /usr/evil; "
                               f"echo pwned > /base/evil; echo $?\n```")
        edit_out = await env.step(call("str_replace", path=str(base / instance.mutation["file"]), old_str="a",
                                       new_str="b"))
        net = await env.step("```bash\npython3 -c \"import socket; s=socket.create_connection(('127.0.0.1', "
                             f"{port}), timeout=3); print('CONNECTED')\"\n```")
        await env.step(f"```bash\n(setsid sleep {token} &) ; nohup sleep {token} >/dev/null 2>&1 &\necho started\n```")
        uid = sb.uid
    assert secret not in read.observation + viewed.observation
    assert viewed.step_score == 0.0 and edit_out.step_score == 0.0
    assert not (tmp_path / "evil").exists() and not Path("/usr/evil").exists()
    assert "pwned" not in wrote.observation.split("\n")[-1]
    assert "CONNECTED" not in net.observation
    listener.close()
    assert not accepted
    assert tree_hash(base) == before  # the shared base copy is untouched
    deadline = time.monotonic() + 5
    while pids_with_marker(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pids_with_marker(token) == [], f"episode processes outlived it (uid {uid})"
