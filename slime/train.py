"""Synchronous RL training (slime's train.py):

    for rollout_id in range(start, num_rollout):
        rollout -> train -> push weights (every --update-weights-interval) -> save (every --save-interval)

Run locally:            python slime/train.py --hf-checkpoint M --prompt-data P.jsonl ...
Run on a Ray cluster:   ray job submit --address http://HEAD:8265 --working-dir . -- python slime/train.py ...
"""

from __future__ import annotations

import sys

from slime.ray.loop import train_main


def main(argv: list[str] | None = None) -> int:
    return train_main(argv, mode="sync")


if __name__ == "__main__":
    sys.exit(main())
