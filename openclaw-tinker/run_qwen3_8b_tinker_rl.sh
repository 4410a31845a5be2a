#!/usr/bin/env bash
# openclaw-rl over the Tinker API (LoRA): see README.md here. Env as deploy_to_tinker.sh.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../deploy_to_tinker.sh" --method rl "$@"
