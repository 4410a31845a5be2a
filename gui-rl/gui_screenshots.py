"""SCREENSHOT_BACKEND: playwright (default) or selenium.

Screenshots are taken by Playwright on the page the episode drives. `selenium` is accepted only
where Selenium and a chromedriver are installed; otherwise the run stops at once and says what to
install (no silent fallback to Playwright).
"""

from __future__ import annotations

import importlib.util
import shutil


def check_screenshot_backend(name: str) -> None:
    if name == "playwright":
        if importlib.util.find_spec("playwright") is None:
            raise RuntimeError("SCREENSHOT_BACKEND=playwright needs pip install playwright==1.65.2 "
                               "(bash gui-rl/setup_gui.sh)")
        return
    if name == "selenium":
        missing = []
        if importlib.util.find_spec("selenium") is None:
            missing.append("pip install selenium")
        if shutil.which("chromedriver") is None:
            missing.append("apt-get install -y chromium-driver")
        if missing:
            raise RuntimeError("SCREENSHOT_BACKEND=selenium needs Selenium and a chromedriver: " + "; ".join(missing)
                               + " (or use SCREENSHOT_BACKEND=playwright)")
        raise RuntimeError("SCREENSHOT_BACKEND=selenium: Selenium and chromedriver are installed, but the "
                           "Selenium screenshot path is not implemented yet; use SCREENSHOT_BACKEND=playwright")
    raise ValueError(f"SCREENSHOT_BACKEND must be playwright or selenium, got {name!r}")
