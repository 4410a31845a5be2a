"""openclaw.proctree against real processes: a group whose leader exits first, leaving a member
that keeps writing into a directory, as Chromium's helpers do with its profile (measured)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys

from openclaw.proctree import (
    descendants,
    live_group_members,
    pid_exists,
    stop_child,
    stop_process_group,
    stop_started_group,
)

HELPER_OUTLIVES_LEADER = """
import subprocess, sys
writer = ("import itertools, pathlib, sys, time\\n"
          "for i in itertools.count():\\n"
          "    (pathlib.Path(sys.argv[1]) / f'f{i}').write_text('x'); time.sleep(0.01)")
helper = subprocess.Popen([sys.executable, "-c", writer, sys.argv[1]], stdout=subprocess.DEVNULL)
print(helper.pid, flush=True)
"""


def test_stopping_a_group_ends_members_that_outlive_its_leader(tmp_path):
    profile = tmp_path / "profile"
    profile.mkdir()
    leader = subprocess.Popen([sys.executable, "-c", HELPER_OUTLIVES_LEADER, str(profile)],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        helper = int(leader.communicate(timeout=30)[0])
        assert live_group_members(leader.pid) == [helper]
        stop_process_group(leader.pid)
        assert live_group_members(leader.pid) == []
        shutil.rmtree(profile)  # nothing writes into it any more
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)


def test_descendants_are_found_by_parentage():
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                               "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                               "print(c.pid, flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        child = int(parent.stdout.readline())
        assert descendants(parent.pid) == {child}
        assert parent.pid not in descendants(parent.pid)
    finally:
        stop_process_group(parent.pid)
        parent.wait(timeout=30)
        parent.stdout.close()


def test_a_started_group_is_stopped_after_its_leader_was_reaped(tmp_path):
    """The engines' and judges' stop used to return as soon as the group leader had exited, leaving its
    children (SGLang's scheduler, a server's workers) running."""
    leader = subprocess.Popen([sys.executable, "-c", HELPER_OUTLIVES_LEADER, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        helper = int(leader.communicate(timeout=30)[0])
        assert leader.returncode == 0 and live_group_members(leader.pid) == [helper]
        stop_started_group(leader, grace_s=10)
        assert live_group_members(leader.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(leader.pid, signal.SIGKILL)


def test_a_group_that_ignores_sigterm_is_killed_after_the_grace():
    ignores = ("import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
               "print('ready', flush=True); time.sleep(120)")
    proc = subprocess.Popen([sys.executable, "-c", ignores], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"  # the handler is installed
        stop_started_group(proc, grace_s=0.5)
        assert proc.returncode == -signal.SIGKILL
        assert live_group_members(proc.pid) == []
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()


def test_a_pid_exists_until_its_process_is_reaped():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, left unreaped: a zombie
        assert pid_exists(proc.pid)
        proc.wait()
        assert not pid_exists(proc.pid)
    finally:
        proc.kill()  # nothing to do once it is reaped
    assert pid_exists(os.getpid())


def test_a_child_is_stopped_with_sigterm_or_killed_after_the_grace():
    for handler, grace_s, returncode in (("SIG_DFL", 10.0, -signal.SIGTERM), ("SIG_IGN", 0.5, -signal.SIGKILL)):
        script = (f"import signal, time; signal.signal(signal.SIGTERM, signal.{handler}); "
                  "print('ready', flush=True); time.sleep(120)")
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline().strip() == "ready"  # the handler is installed
            stop_child(proc, grace_s)
            assert proc.returncode == returncode and not pid_exists(proc.pid)  # and reaped
        finally:
            proc.kill()  # nothing to do once it is reaped
            proc.stdout.close()
