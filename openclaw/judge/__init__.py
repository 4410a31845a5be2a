"""Judging: turn a buffered turn's next state into a reward (Binary RL) and a hint (OPD).

    from openclaw.judge import add_judge_args, JudgeConfig, start_judge_service
    add_judge_args(parser)                      # every --judge-* / --prm-* / --majority-vote-* flag
    handle = start_judge_service(JudgeConfig.from_args(args), buffer_dir)   # N daemon worker threads
    ...
    handle.stop()

Defaults (one definition, in openclaw.judge.config): DEFAULT_MAJORITY_VOTE_N (3),
DEFAULT_MAJORITY_VOTE_THRESHOLD (0.6), DEFAULT_NUM_JUDGE_WORKERS (1), DEFAULT_JUDGE_TIMEOUT_S (60 s,
a deadline for the whole call, retries included), DEFAULT_JUDGE_RETRIES (2).

Backends: `cpu` (default: MiniLM embeddings + trained head + rules, feedback-as-hint), `llm`
(any OpenAI-compatible endpoint, or a server launched from --prm-model-path), `custom`
(--custom-rm-path plugin). See openclaw/judge/README.md.
"""

from openclaw.judge.config import (
    DEFAULT_JUDGE_RETRIES,
    DEFAULT_JUDGE_TIMEOUT_S,
    DEFAULT_MAJORITY_VOTE_N,
    DEFAULT_MAJORITY_VOTE_THRESHOLD,
    DEFAULT_NUM_JUDGE_WORKERS,
    JudgeConfig,
    JudgeConfigError,
    add_judge_args,
)
from openclaw.judge.schema import JudgeFailure, JudgeInput, JudgeResult
from openclaw.judge.votes import majority_vote, parse_verdict


def start_judge_service(config: JudgeConfig, buffer_dir):  # noqa: ANN001, ANN201 - lazy import (torch)
    from openclaw.judge.worker import start_judge_service as _start

    return _start(config, buffer_dir)


__all__ = [
    "DEFAULT_JUDGE_RETRIES",
    "DEFAULT_JUDGE_TIMEOUT_S",
    "DEFAULT_MAJORITY_VOTE_N",
    "DEFAULT_MAJORITY_VOTE_THRESHOLD",
    "DEFAULT_NUM_JUDGE_WORKERS",
    "JudgeConfig",
    "JudgeConfigError",
    "JudgeFailure",
    "JudgeInput",
    "JudgeResult",
    "add_judge_args",
    "majority_vote",
    "parse_verdict",
    "start_judge_service",
]
