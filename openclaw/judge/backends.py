"""Build the configured judge backend."""

from __future__ import annotations

from openclaw.judge.config import JudgeConfig
from openclaw.judge.schema import Judge


def make_judge(config: JudgeConfig) -> Judge:
    if config.backend == "cpu":
        from openclaw.judge.cpu_judge import CpuJudge

        return CpuJudge(extract_hints=config.extract_hints, min_hint_chars=config.hint_min_chars)
    if config.backend == "llm":
        from openclaw.judge.llm_judge import LLMJudge

        return LLMJudge(config)
    from openclaw.judge.custom_judge import CustomJudge

    return CustomJudge(config)
