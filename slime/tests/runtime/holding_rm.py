"""A reward plugin that holds the trainer at a known point, for the interrupt test only.

The sync loop writes checkpoint N before it generates rollout N+1, so the first reward call of
rollout N+1 runs strictly after that checkpoint exists. There this plugin consumes an "arm" file
(one rename: exactly one call, in exactly one run, wins), writes a "held" file the test waits for,
and then never returns: the rollout, and with it the trainer, stays at that point until the test
interrupts the run (the rollout actor is killed on shutdown). Without the arm file it is the plain
even-token reward, so the resumed run goes through.

The paths and the first sample index of the rollout to hold come from a JSON file beside the
copy of this module the test writes (`<module>.json`), since the plugin runs in a Ray actor.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

_CONFIG = json.loads(Path(__file__).with_suffix(".json").read_text())


def _claim_hold() -> bool:
    try:
        os.rename(_CONFIG["arm"], _CONFIG["arm"] + ".taken")
    except FileNotFoundError:
        return False  # disarmed, or another call of this rollout already holds the trainer
    return True


async def reward_func(args, sample):
    if sample.index >= _CONFIG["hold_from_index"] and _claim_hold():
        held = Path(_CONFIG["held"])
        tmp = held.with_suffix(".tmp")
        tmp.write_text(json.dumps({"index": sample.index, "pid": os.getpid()}))
        os.replace(tmp, held)  # atomic: the test never reads a half-written file
        await asyncio.Event().wait()  # nothing sets it: held until the process is interrupted/killed
    resp = sample.tokens[len(sample.tokens) - sample.response_length:]
    return sum(1 for t in resp if t % 2 == 0) / max(1, len(resp))
