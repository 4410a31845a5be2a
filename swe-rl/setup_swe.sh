#!/usr/bin/env bash
# Download the pinned sdists of swe-rl/projects.txt and the pinned pytest runtime into the cache
# (OPENCLAW_SWE_CACHE, default ~/.cache/openclaw/swe). Needs PyPI once; everything after is offline.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec "${PYTHON:-python}" swe-rl/swe_build.py fetch "$@"
