"""Evaluate a checkpoint, the base model or an OpenAI-compatible endpoint (see README.md):

    python openclaw-test/run_eval.py --model-path $CKPT_SAVE_DIR/checkpoint-latest \
        --eval-tasks "conversation,coding,tool-use" [--compare-base] [--limit N] [--out DIR]

The harness lives in the `openclaw.evaluation` package (one module per family); this file is the
command's entry point.
"""

from __future__ import annotations

import sys

from openclaw.evaluation.cli import main

if __name__ == "__main__":
    sys.exit(main())
