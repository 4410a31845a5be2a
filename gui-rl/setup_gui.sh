#!/usr/bin/env bash
# gui-rl's system and Python parts: Debian's Chromium, Playwright (which drives it; its own
# browser download is not used) and the MiniWoB++ task pages. Idempotent.
#
#   bash gui-rl/setup_gui.sh
#
# Playwright and miniwob are installed with --no-deps: playwright needs only greenlet (installed
# here); the miniwob package's Python side (gymnasium + Selenium environment) is not used, only
# its html/ pages, which load without importing it. BrowserGym is NOT installed: see README.md.
set -euo pipefail
if ! [ -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "error: /usr/bin/chromium missing: run as root: apt-get install -y chromium" >&2
    exit 1
  fi
fi
PY=${PYTHON:-python}
"$PY" -m pip install -q --no-deps "greenlet==3.5.6" "playwright==1.65.2" "miniwob==1.1.0"
echo "gui-rl ready: chromium, playwright, $("$PY" gui-rl/gui_eval.py --list | wc -l) MiniWoB++ task pages"
