"""Files other components derive from buffered turns and keep beside the buffer, named here once so
that a retract finds and deletes them (their writers live higher up: the OPD teacher writes top-k)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# The OPD teacher's top-k distributions, one file per sample, under the buffer folder by default.
TOPK_DIR_NAME = "opd_topk"


def tokens_key(tokens: Any) -> str:
    """Content address of a sample's token ids (the top-k loss finds the teacher top-k by it)."""
    ids = [int(t) for t in (tokens.tolist() if hasattr(tokens, "tolist") else tokens)]
    return hashlib.sha1(json.dumps(ids).encode()).hexdigest()
