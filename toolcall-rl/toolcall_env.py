"""The tool-call environment: the model calls tools (Hermes/Qwen `<tool_call>` blocks, parsed by
the server's parser) until it gives a final answer; reward = correctness (+ optional bonus)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from toolcall_tasks import MathTask, extract_answer, is_correct
from toolcall_tools import ToolOutcome, call_tool

from openclaw.sandbox import SandboxSession
from openclaw.server.toolcalls import parse_tool_calls
from openclaw.tracks import EpisodeEnv


def system_prompt(tools: list[dict[str, Any]]) -> str:
    # Hermes-style tool description in the system prompt: works with any chat template.
    listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return (
        "You solve math problems. You may call tools; their results come back in <tool_response> blocks.\n"
        f"<tools>\n{listing}\n</tools>\n"
        'To call a tool, reply with <tool_call>{"name": "<tool name>", "arguments": {...}}</tool_call>.\n'
        "When you know the result, reply with the final answer as <answer>NUMBER</answer>."
    )


@dataclass
class ToolStep:
    observation: str | None  # None when the episode is over
    done: bool
    outcomes: list[ToolOutcome] = field(default_factory=list)
    answer: str | None = None


@dataclass(eq=False)
class ToolCallEnv(EpisodeEnv[ToolStep]):
    task: MathTask
    session: SandboxSession | None
    tools: list[dict[str, Any]]
    max_steps: int = field(default=8, kw_only=True)
    max_calls_per_turn: int = 4
    python_timeout_s: float = 10.0
    answer: str | None = field(default=None, init=False)
    outcomes: list[ToolOutcome] = field(default_factory=list, init=False)

    @property
    def enabled(self) -> set[str]:
        return {t["function"]["name"] for t in self.tools}

    def reset(self) -> str:
        self.restart()
        self.answer, self.outcomes = None, []
        return self.task.question

    async def act(self, model_text: str) -> ToolStep:
        _, calls = parse_tool_calls(model_text)
        if not calls:
            self.answer = extract_answer(model_text)
            return ToolStep(None, True, answer=self.answer)
        outcomes = []
        enabled = self.enabled
        for call in calls[: self.max_calls_per_turn]:
            outcomes.append(await call_tool(call.name, call.arguments, self.session, enabled,
                                            python_timeout_s=self.python_timeout_s))
        if len(calls) > self.max_calls_per_turn:
            outcomes.append(ToolOutcome("-", False, f"error: at most {self.max_calls_per_turn} calls per turn"))
        self.outcomes += outcomes
        observation = "\n".join(
            "<tool_response>\n" + json.dumps({"name": o.name, "content": o.content}, ensure_ascii=False)
            + "\n</tool_response>" for o in outcomes
        )
        return ToolStep(observation, False, outcomes)

    @property
    def correct(self) -> bool:
        return is_correct(self.answer, self.task.answer)

    def reward(self, tool_use_bonus: float = 0.0) -> float:
        """1 for a correct final answer; the bonus is paid only on top of a correct answer that used a
        tool successfully, so calling tools can never beat answering correctly."""
        used = any(o.ok for o in self.outcomes)
        return float(self.correct) + (tool_use_bonus if self.correct and used else 0.0)
