#!/usr/bin/env bash
# Stand-in for `uv run [uv options] -m MODULE ARGS` as skyrl's Tinker API server uses it: the
# server is started as `uv run --extra tinker --extra jax -m skyrl.tinker.api ...`, reads its
# parent's command line (this script's) and starts its engine as `uv run <the same options> -m
# skyrl.tinker.engine ...`. Here both run with the python of the venv this shim lives in. The
# module runs as a child (not exec) so that the server finds this command line as its parent's;
# TERM/INT are passed on to it.
set -uo pipefail
VENV="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    run|--) shift ;;
    --extra|--with|--group|--project|--directory|--python) shift 2 ;;
    --*) shift ;;
    *) break ;;
  esac
done
"$VENV/bin/python" "$@" &
child=$!
trap 'kill -TERM "$child" 2>/dev/null' TERM INT
wait "$child"
status=$?
# A trapped signal interrupts the first wait; wait again for the child's real exit status.
if kill -0 "$child" 2>/dev/null; then wait "$child"; status=$?; fi
exit "$status"
