"""SCREENSHOT_BACKEND=selenium with the real parts: Debian's chromium and chromedriver, Selenium,
Playwright attached to the same tab. The screenshots Selenium takes match the page (pixel for pixel
the Playwright backend's on the same seed, and the page after an action), episodes earn the page's
own reward, and no chromium/chromedriver PID we started survives close, Ctrl-C or a killed worker.

`bash gui-rl/setup_gui.sh` (run by scripts/setup.sh) installs every part, so in CI nothing here
skips; the skip below names what a machine without the setup lacks."""

from __future__ import annotations

import importlib
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from PIL import Image, ImageChops
from slime.utils.plugins import load_plugin_module

from openclaw.proctree import descendants

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(
    not (Path("/usr/bin/chromium").exists() and shutil.which("chromedriver")),
    reason="needs chromium and chromium-driver (bash gui-rl/setup_gui.sh)")
pytest.importorskip("playwright")
pytest.importorskip("selenium")

load_plugin_module("gui-rl/gui_screenshots.py")  # puts gui-rl/ on the path, as the trainer does
# By their bare names, as gui-rl's modules import each other (one copy of each class).
gui_screenshots = importlib.import_module("gui_screenshots")
gui_env = importlib.import_module("gui_env")
gui_selenium = importlib.import_module("gui_selenium")
gui_policies = importlib.import_module("gui_policies")
gui_eval = importlib.import_module("gui_eval")


@pytest.fixture(scope="module")
def pool():
    pool = gui_screenshots.make_pool(2, "selenium")
    assert isinstance(pool, gui_selenium.SeleniumBrowserPool)
    yield pool
    pool.close()


def png_image(data: bytes) -> Image.Image:
    assert data.startswith(b"\x89PNG\r\n\x1a\n")
    return Image.open(io.BytesIO(data)).convert("RGB")


def test_missing_chromedriver_says_what_to_install(monkeypatch):
    monkeypatch.setenv("OPENCLAW_CHROMEDRIVER", "/nonexistent/chromedriver")
    with pytest.raises(RuntimeError, match="apt-get install -y chromium-driver"):
        gui_screenshots.make_pool(1, "selenium")
    with pytest.raises(ValueError, match="playwright or selenium"):
        gui_screenshots.check_screenshot_backend("x11")


def test_screenshots_come_from_selenium_and_match_the_page(pool):
    reference = gui_screenshots.make_pool(1, "playwright")
    try:
        with reference.env_sync() as env:
            playwright_png = env.reset("click-button", 1_000_000).screenshot
    finally:
        reference.close()
    with pool.env_sync() as env:
        obs = env.reset("click-button", 1_000_000)
        assert obs.goal == 'Click on the "Okay" button.'
        shot = png_image(obs.screenshot)
        assert shot.size == png_image(playwright_png).size == (160, 210)  # the task area, #wrap
        assert ImageChops.difference(shot, png_image(playwright_png)).getbbox() is None  # same page
        # The observation's PNG is Selenium's: WebDriver's element screenshot of the same tab now.
        selenium = env.env.selenium
        assert selenium.driver.session_id and selenium.screenshot_png("#wrap") == obs.screenshot
        box = re.search(r"textbox \[ref=(e\d+)\]", obs.axtree).group(1)
        typed = env.step(gui_env.Action("fill", (box, "hello")))
        after = png_image(typed.observation.screenshot)
        assert ImageChops.difference(after, shot).getbbox() is not None  # the page changed; so did the PNG
        ref = re.search(r'button "Okay" \[ref=(e\d+)\]', obs.axtree).group(1)
        result = env.step(gui_env.Action("click", (ref,)))
        assert (result.reward, result.done, result.error) == (1.0, True, None)
        # The last PNG is the page as the episode left it (no START cover over it), taken after the click.
        assert selenium.screenshot_png("#wrap") == result.observation.screenshot
        last = png_image(result.observation.screenshot)
        cover = sum(n for n, colour in last.getcolors(1 << 16) if colour == (17, 17, 17))  # the cover's #111
        assert cover < 0.01 * last.width * last.height
        assert env.screenshots == [obs.screenshot, typed.observation.screenshot, result.observation.screenshot]


def test_scripted_episodes_under_selenium(pool):
    with pool.env_sync() as env:
        for task in ("enter-text", "choose-list", "click-link"):  # multi-step and one-step
            result = gui_eval.run_episode(env, gui_policies.ScriptedPolicy(), task, 1_000_001, max_steps=6)
            assert result.success, (task, result)
    assert pool.launched == 1  # one browser reused across episodes


# --- leaks: PIDs from /proc, a deadline (not a sleep) for processes to exit -----------------------

WORKER = """
import threading
from slime.utils.plugins import load_plugin_module
gui_screenshots = load_plugin_module("gui-rl/gui_screenshots.py")
pool = gui_screenshots.make_pool(2, "selenium")
with pool.env_sync() as a, pool.env_sync() as b:  # Ctrl-C leaves these blocks, then atexit closes
    for env in (a, b):
        env.reset("click-test", 1_000_000)
    print("ready", a.env.selenium.profile, b.env.selenium.profile, flush=True)
    threading.Event().wait()  # until interrupted or killed
"""




def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and comm(pid).startswith("chrom")


def wait_gone(pids: set[int], timeout: float = 30.0) -> set[int]:
    deadline = time.monotonic() + timeout
    left = {p for p in pids if alive(p)}
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = {p for p in left if alive(p)}
    return left


def start_worker() -> tuple[subprocess.Popen[str], set[int], list[Path]]:
    proc = subprocess.Popen([sys.executable, "-c", WORKER], cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().split()  # blocks until both browsers are up (or the worker died)
    assert line[:1] == ["ready"], proc.stderr.read() if proc.stderr else line
    started = {p for p in descendants(proc.pid) if comm(p).startswith("chrom")}
    assert sum(comm(p) == "chromedriver" for p in started) == 2
    assert sum(comm(p) == "chromium" for p in started) >= 2
    return proc, started, [Path(p) for p in line[1:]]


def test_close_stops_chromium_and_chromedriver_by_pid():
    pool = gui_screenshots.make_pool(1, "selenium")
    with pool.env_sync() as env:
        env.reset("click-test", 1_000_000)
        profile = env.env.selenium.profile
    # This pool's chromium and chromedriver, and Chromium's helpers (other tests' browsers aside).
    ours = set(pool.browser_pids())
    assert {comm(p) for p in ours} == {"chromium", "chromedriver"}
    started = ours | {p for pid in ours for p in descendants(pid)}
    pool.close()
    assert wait_gone(started) == set()
    assert not profile.exists()


def test_ctrl_c_leaves_no_browser():
    proc, started, profiles = start_worker()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    assert wait_gone(started) == set()
    assert not any(p.exists() for p in profiles)


def test_killed_worker_leaves_no_browser():
    proc, started, profiles = start_worker()
    proc.kill()  # SIGKILL: no Python cleanup runs; the parent-death signal ends both processes
    proc.wait(timeout=30)
    assert wait_gone(started) == set()
    for p in profiles:  # nothing removed them; the test does
        shutil.rmtree(p, ignore_errors=True)
