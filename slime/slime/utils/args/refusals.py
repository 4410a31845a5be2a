"""Flags the public pages document that this trainer deliberately does not take, each refused with its
reason, and the message for a flag nobody knows (with the closest known spelling)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

JUDGE_SETTING = (
    "is a judge setting: a reward judge scores the turns, the trainer never does. Give it to the judge "
    "(a launcher that starts one routes it there)"
)
CRITIC_FREE = (
    "does not apply: the methods here are critic-free (GRPO / OPD advantages come from group-normalised rewards "
    "and teacher log-probs), so there is no value function to clip and no GAE"
)
# Flags the public pages document that this trainer deliberately does not take, with the reason.
# Checked only for flags nobody registered (a method folder may define its own --max-turns).
REFUSED_FLAGS: dict[str, str] = {
    "--majority-vote-n": JUDGE_SETTING,
    "--majority-vote-threshold": JUDGE_SETTING,
    "--num-judge-workers": JUDGE_SETTING,
    "--reward-aggregation": JUDGE_SETTING + " (majority aggregation is --majority-vote-n N there)",
    "--num-judges": JUDGE_SETTING + " (as --majority-vote-n)",
    "--value-clip": CRITIC_FREE,
    "--value-clip-ratio": CRITIC_FREE,
    "--gae-lambda": CRITIC_FREE,
    "--lambd": CRITIC_FREE,
    "--max-turns": (
        "is an agent-environment limit: an agent environment's args provider bounds an episode with its own flag "
        "(--max-steps, MAX_STEPS, in this repository's agent tracks); a conversation method trains on the turns "
        "users have"
    ),
    "--parallel-envs": (
        "is an agent-environment setting: an agent environment's args provider declares it (PARALLEL_ENVS in "
        "this repository's agent tracks); a conversation method trains on as many sessions as users have"
    ),
    "--async-collection": (
        "is always the case here: the server collects rollouts while the trainer trains; for asynchronous "
        "training run slime/train_async.py"
    ),
}


def refusal(flag: str) -> str | None:
    """`--flag <reason>` for a flag this trainer refuses, else None."""
    flag = "--" + flag.lstrip("-").replace("_", "-")
    reason = REFUSED_FLAGS.get(flag)
    return f"{flag} {reason}" if reason else None


def unknown_message(flag: str, candidates: Iterable[str]) -> str:
    """Why `flag` is not taken: its refusal, or unknown with the closest of `candidates`."""
    flag = flag if flag.startswith("-") else "--" + flag
    refused = refusal(flag)
    if refused:
        return refused
    close = difflib.get_close_matches(flag, sorted(set(candidates)), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else "; see --help for the list of flags"
    return f"unknown flag {flag}{hint}"
