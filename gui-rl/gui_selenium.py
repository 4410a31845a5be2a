"""SCREENSHOT_BACKEND=selenium: each environment's browser is driven through Selenium.

One environment = one Chromium process we launch ourselves (`/usr/bin/chromium`, the same
no-network flags as `gui_env.CHROMIUM_FLAGS`, DevTools on a loopback port), with two clients on
its one tab:
- Selenium (`/usr/bin/chromedriver`, attached with `debuggerAddress`) takes the screenshots: the
  PNG of the task area (`#wrap`) through WebDriver's element screenshot;
- Playwright (`connect_over_cdp`) reads the accessibility tree and performs the actions, so the
  policy sees the same tree, ids and actions under either backend (a policy trained with one
  backend runs under the other).
The episode is `gui_env.GuiEnv`'s; only the browser's owner and the screenshot source change.

Why we launch Chromium and not chromedriver: a chromedriver killed outright leaves the Chromium it
launched running (measured). Here Chromium and chromedriver are both our children, started from
the environment's own thread with PR_SET_PDEATHSIG=SIGKILL, so a killed worker takes them down
(Chromium's helper processes exit with their browser), and `close()` stops both by PID.

Not reused: the `miniwob` package's own Selenium environment (`miniwob.environment`). It needs
gymnasium, its observations are its own DOM-element list and its actions its own space, and it
lets chromedriver launch Chromium (which outlives a killed worker); gui-rl's observation contract
is `gui_env.Observation(goal, axtree, screenshot)` with BrowserGym-style actions.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from gui_env import CHROMIUM, CHROMIUM_FLAGS, BrowserPool, GuiEnv

from openclaw.environment import env_value
from openclaw.proctree import stop_process_group

T = TypeVar("T")
PR_SET_PDEATHSIG = 1
# Chromium writes its DevTools port here once it listens; this long is a broken browser.
DEVTOOLS_START_TIMEOUT_S = 30.0
log = logging.getLogger(__name__)


def chromedriver_path() -> str | None:
    """`OPENCLAW_CHROMEDRIVER`, else `chromedriver` on PATH (Debian: /usr/bin/chromedriver)."""
    return env_value("OPENCLAW_CHROMEDRIVER") or shutil.which("chromedriver")


def _die_with_parent_thread(parent_pid: int) -> Callable[[], None]:
    """preexec_fn: SIGKILL this child when the thread that started it ends (the worker killed,
    or the environment closed without cleaning up)."""

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before fork: the child only calls it

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
            os._exit(121)
        if os.getppid() != parent_pid:  # the parent died before prctl: nobody would stop us
            os._exit(122)

    return preexec


def _wait_devtools_port(profile: Path, proc: subprocess.Popen[bytes]) -> int:
    """The port Chromium chose (`--remote-debugging-port=0`), from its DevToolsActivePort file."""
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + DEVTOOLS_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{CHROMIUM} exited with code {proc.returncode} before opening DevTools")
        lines = marker.read_text().splitlines() if marker.exists() else []
        if lines and lines[0].strip().isdigit():
            return int(lines[0])
        time.sleep(0.05)  # polling a file Chromium writes; bounded by the deadline above
    raise RuntimeError(f"{CHROMIUM} did not open DevTools within {DEVTOOLS_START_TIMEOUT_S:.0f} s")


@dataclass
class SeleniumBrowser:
    """Chromium + chromedriver + a Selenium session on it; every call runs on `thread`, the thread
    that started both processes (their parent-death signal is bound to it)."""

    thread: concurrent.futures.ThreadPoolExecutor
    chromium: subprocess.Popen[bytes]
    profile: Path
    port: int
    driver: Any  # selenium.webdriver.Chrome

    @classmethod
    def start(cls, viewport: tuple[int, int], thread: concurrent.futures.ThreadPoolExecutor) -> SeleniumBrowser:
        """Runs on `thread` (the processes' parent-death signal is bound to the starting thread)."""
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        driver_exe = chromedriver_path()
        if driver_exe is None:
            raise RuntimeError("SCREENSHOT_BACKEND=selenium needs chromedriver: apt-get install -y chromium-driver")
        profile = Path(tempfile.mkdtemp(prefix="gui-selenium-"))
        preexec = _die_with_parent_thread(os.getpid())
        chromium = subprocess.Popen(
            [CHROMIUM, *CHROMIUM_FLAGS, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", f"--window-size={viewport[0]},{viewport[1]}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            preexec_fn=preexec, start_new_session=True)  # own group: Ctrl-C reaches us, not it
        try:
            port = _wait_devtools_port(profile, chromium)
            options = webdriver.ChromeOptions()
            options.binary_location = CHROMIUM
            options.debugger_address = f"127.0.0.1:{port}"
            service = Service(driver_exe, popen_kw={"preexec_fn": preexec, "start_new_session": True})
            driver = webdriver.Chrome(service=service, options=options)
        except BaseException:
            _stop_process(chromium)
            stop_process_group(chromium.pid)
            _remove_profile(profile)
            raise
        return cls(thread, chromium, profile, port, driver)

    @property
    def pids(self) -> list[int]:
        """chromium's and chromedriver's PIDs (Chromium's helpers are chromium's children)."""
        return [self.chromium.pid, self.driver.service.process.pid]

    def screenshot_png(self, css_selector: str) -> bytes:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css_selector).screenshot_as_png

    def stop(self) -> None:
        """End chromedriver (Selenium's Service, by PID), Chromium (by PID) and its helpers (by its
        process group), then the profile. With `debuggerAddress`, `quit()` ends the session and
        chromedriver, not the browser."""
        with contextlib.suppress(Exception):
            self.driver.quit()
        _stop_process(self.driver.service.process)
        _stop_process(self.chromium)
        stop_process_group(self.chromium.pid)  # its helpers outlive it and write into the profile
        _remove_profile(self.profile)


def _stop_process(proc: subprocess.Popen[Any] | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _remove_profile(profile: Path) -> None:
    try:
        shutil.rmtree(profile)
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("could not remove the Chromium profile %s: %s", profile, exc)


@dataclass
class SeleniumGuiEnv(GuiEnv):
    """`GuiEnv` whose browser Selenium owns and whose screenshots Selenium takes."""

    selenium: SeleniumBrowser | None = None

    async def _on_thread(self, fn: Callable[..., T], *args: Any) -> T:
        assert self.selenium is not None
        return await asyncio.wrap_future(self.selenium.thread.submit(fn, *args))

    async def screenshot(self, task_area: dict[str, float]) -> bytes:
        """Selenium's element screenshot of the task area (the Playwright connection reads the tree)."""
        assert self.selenium is not None
        return await self._on_thread(self.selenium.screenshot_png, "#wrap")

    async def shutdown(self) -> None:
        with contextlib.suppress(Exception):
            await self.browser.close()  # Playwright's CDP connection only
        if self.selenium is not None:
            # Called directly, not on the browser's thread: at interpreter exit (Ctrl-C) that
            # thread may be gone already (its parent-death signal has then killed both
            # processes, and stop() only removes the profile).
            self.selenium.stop()
            self.selenium.thread.shutdown(wait=False)


async def launch_selenium_env(playwright: Any, viewport: tuple[int, int]) -> SeleniumGuiEnv:
    """Start Chromium + chromedriver on a new thread, then attach Playwright to the same tab."""
    thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="gui-selenium")
    try:
        sel = await asyncio.wrap_future(thread.submit(SeleniumBrowser.start, viewport, thread))
    except BaseException:
        thread.shutdown(wait=False)
        raise
    try:
        browser = await playwright.chromium.connect_over_cdp(f"http://127.0.0.1:{sel.port}")
        page = browser.contexts[0].pages[0]
    except BaseException:
        sel.stop()
        thread.shutdown(wait=False)
        raise
    return SeleniumGuiEnv(browser, page, selenium=sel)


class SeleniumBrowserPool(BrowserPool):
    """`BrowserPool` whose browsers are `SeleniumGuiEnv`s (SCREENSHOT_BACKEND=selenium)."""

    backend = "selenium"

    async def _launch(self) -> GuiEnv:
        from playwright.async_api import async_playwright

        if self._playwright is None:
            self._playwright = await async_playwright().start()
        env = await launch_selenium_env(self._playwright, self.viewport)
        self._envs.append(env)
        return env

    async def _close(self) -> None:
        for env in self._envs:
            if isinstance(env, SeleniumGuiEnv):
                with contextlib.suppress(Exception):
                    await env.shutdown()
        self._envs.clear()
        await super()._close()  # stops Playwright

    def browser_pids(self) -> list[int]:
        return [pid for env in self._envs if isinstance(env, SeleniumGuiEnv) and env.selenium
                for pid in env.selenium.pids]
