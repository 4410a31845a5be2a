"""Asynchronous (one-step off-policy) RL training: rollout k+1 is generated while the trainer
trains on rollout k; weights are pushed to the engines as soon as a step finishes (the engines
pause, swap and continue mid-rollout). `--max-staleness N` drops (or, with
`--staleness-policy downweight`, down-weights) samples more than N weight versions old; the
counts are logged as staleness/dropped, staleness/mean, staleness/max.

    python slime/train_async.py --hf-checkpoint M --prompt-data P.jsonl --max-staleness 1 ...
"""

from __future__ import annotations

import sys

from slime.ray.loop import train_main

# The second public page's form (`train_async.py --rollout-dir --checkpoint-dir --method --gpus`) is
# the OpenClaw method launcher's: slime never imports openclaw, so it is refused here with the way to it.
PAGE_FLAGS = ("--rollout-dir", "--checkpoint-dir", "--method", "--gpus")


def _page_form(argv: list[str]) -> str | None:
    used = [f for f in PAGE_FLAGS if any(a == f or a.startswith(f + "=") for a in argv)]
    if not used:
        return None
    return (f"{' '.join(used)}: the second public page's train_async.py is openclaw-combine/train_async.py "
            "(python openclaw-combine/train_async.py --rollout-dir ./rollouts --checkpoint-dir ./checkpoints "
            "--method combine --gpus 2,3): it trains a method (binary/opd/combine) on a server's recorded rollouts. "
            "slime/train_async.py is the generic trainer: --rl-buffer-dir with the method's data source, --save DIR, "
            "--actor-num-gpus-per-node N")


def main(argv: list[str] | None = None) -> int:
    page = _page_form(list(sys.argv[1:] if argv is None else argv))
    if page:
        print(f"error: {page}", file=sys.stderr)
        return 2
    return train_main(argv, mode="async")


if __name__ == "__main__":
    sys.exit(main())
