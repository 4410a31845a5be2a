#!/usr/bin/env bash
# System packages the test suite needs (Debian). Skips what is already there.
set -euo pipefail
need_apt=()
command -v bwrap >/dev/null 2>&1 || need_apt+=(bubblewrap)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "warning: missing system packages: ${need_apt[*]} (install them with apt-get as root)" >&2
  fi
fi
