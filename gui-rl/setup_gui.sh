#!/usr/bin/env bash
# gui-rl's system and Python parts: Debian's Chromium and its chromedriver, Playwright (which
# drives it; its own browser download is not used), Selenium (SCREENSHOT_BACKEND=selenium) and the
# MiniWoB++ task pages. Idempotent; scripts/setup.sh calls it, so CI has all of them.
#
#   bash gui-rl/setup_gui.sh
#
# Python packages are installed with --no-deps and their runtime dependencies pinned here:
# - playwright needs only greenlet;
# - miniwob: its Python side (gymnasium + Selenium environment) is not used, only its html/ pages,
#   which load without importing it;
# - selenium 4.50.0 needs urllib3[socks] (PySocks), certifi, typing_extensions (already pinned by
#   the project), websocket-client, and trio + trio-websocket (wsproto) for its async CDP/BiDi
#   client. 4.50 is the newest whose certifi floor (>=2026.2.25) the installed certifi meets.
# BrowserGym is NOT installed: see README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
need_apt=()
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
# Debian's chromedriver is built from the same source as its chromium, so the versions match.
[ -x /usr/bin/chromedriver ] || need_apt+=(chromium-driver)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "error: missing ${need_apt[*]}: run as root: apt-get install -y ${need_apt[*]}" >&2
    exit 1
  fi
fi
PY=${PYTHON:-python3}
"$PY" -m pip install -q --no-deps "greenlet==3.5.6" "playwright==1.65.2" "miniwob==1.1.0"
"$PY" -m pip install -q --no-deps "selenium==4.50.0" "trio==0.35.0" "trio-websocket==0.12.2" \
  "wsproto==1.3.2" "websocket-client==1.9.2" "PySocks==1.7.1"
echo "gui-rl ready: $(/usr/bin/chromium --version 2>/dev/null), $(/usr/bin/chromedriver --version | cut -d' ' -f1-2)," \
     "playwright, selenium, $("$PY" gui-rl/gui_eval.py --list | wc -l) MiniWoB++ task pages"
