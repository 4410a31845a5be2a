"""SCREENSHOT_BACKEND: playwright (default) or selenium — who owns each environment's browser and
takes its screenshots.

- `playwright`: Playwright launches Chromium, reads the tree, acts and takes the PNG (gui_env).
- `selenium`: Chromium is driven through Selenium + chromedriver, which takes the PNG; Playwright
  attaches to the same tab for the tree and the actions (gui_selenium). Same observation contract.

`shared_pool` keeps one pool of browsers per process, made for the backend asked for.

A backend whose parts are missing stops the run at once, saying what to install (no silent
fallback to the other backend).
"""

from __future__ import annotations

import importlib.util
import os
import threading

from gui_env import BrowserPool
from gui_selenium import SeleniumBrowserPool, chromedriver_path

BACKENDS = ("playwright", "selenium")


def check_screenshot_backend(name: str) -> None:
    if name not in BACKENDS:
        raise ValueError(f"SCREENSHOT_BACKEND must be {' or '.join(BACKENDS)}, got {name!r}")
    if importlib.util.find_spec("playwright") is None:  # both backends read the tree through it
        raise RuntimeError(f"SCREENSHOT_BACKEND={name} needs pip install playwright==1.65.2 "
                           "(bash gui-rl/setup_gui.sh)")
    if name == "selenium":
        missing = []
        if importlib.util.find_spec("selenium") is None:
            missing.append("pip install selenium==4.50.0")
        driver = chromedriver_path()
        if driver is None or not os.access(driver, os.X_OK):
            missing.append("apt-get install -y chromium-driver"
                           + (f" (OPENCLAW_CHROMEDRIVER={driver} is not executable)" if driver else ""))
        if missing:
            raise RuntimeError("SCREENSHOT_BACKEND=selenium needs Selenium and a chromedriver: " + "; ".join(missing)
                               + " (bash gui-rl/setup_gui.sh installs both; or use SCREENSHOT_BACKEND=playwright)")


def make_pool(size: int, backend: str) -> BrowserPool:
    """The `PARALLEL_ENVS` browsers for a backend (checked first: a missing part stops here)."""
    check_screenshot_backend(backend)
    if backend == "selenium":
        return SeleniumBrowserPool(size)
    return BrowserPool(size)


_POOL: BrowserPool | None = None
_POOL_LOCK = threading.Lock()


def shared_pool(size: int, backend: str = "playwright") -> BrowserPool:
    """The process-wide pool (PARALLEL_ENVS browsers), shared by every rollout of a trainer."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.size != size or _POOL.backend != backend:
            if _POOL is not None:
                _POOL.close()
            _POOL = make_pool(size, backend)
        return _POOL
