"""Token-level multi-turn trajectories for agent episodes (shared by the Track 2 generate functions).

The response of a multi-turn episode is: turn 1 (model) + observation 1 (environment) + turn 2 +
... + turn N. Model tokens get loss_mask 1 and the log-probs the engine reported when sampling them.
Observation tokens get loss_mask 0 and REAL log-probs: the next /generate call asks the engine to
also score its prompt from the start of the unscored observation (`logprob_start_len`), so each
observation costs no extra request (a final one, if any, is scored with `max_new_tokens: 0`).
Those are raw (temperature 1) prompt log-probs, as SGLang reports them; they are masked out of
the loss either way. Token ids are kept exactly as sampled, never re-tokenized.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

_PROBE_ASSISTANT = "PROBEASSISTANT7f3a"
_PROBE_OBS = "PROBEOBSERVATION7f3a"


class GenerateClient(Protocol):
    async def generate(self, body: dict[str, Any]) -> Any: ...


@dataclass(frozen=True)
class ObservationFormat:
    """How an environment message is wrapped between two assistant turns, from the chat template."""

    prefix: str  # e.g. "<|im_end|>\n<|im_start|>user\n" (closes the assistant turn, opens ours)
    suffix: str  # e.g. "<|im_end|>\n<|im_start|>assistant\n" (and reopens the assistant)
    end_of_turn: str  # the assistant's end-of-turn text at the start of `prefix` ("" if none)
    end_of_turn_id: int | None = None  # its token id, when it is a single token

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, role: str = "user") -> ObservationFormat:
        def render(messages: list[dict[str, str]], gen: bool) -> str:
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)

        convo = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": _PROBE_ASSISTANT}]
        full = render(convo + [{"role": role, "content": _PROBE_OBS}], gen=True)
        after = full[full.index(_PROBE_ASSISTANT) + len(_PROBE_ASSISTANT):]
        prefix, suffix = after.split(_PROBE_OBS, 1)
        eos = getattr(tokenizer, "eos_token", None) or ""
        end = eos if eos and prefix.startswith(eos) else ""
        end_id = getattr(tokenizer, "eos_token_id", None) if end else None
        return cls(prefix=prefix, suffix=suffix, end_of_turn=end, end_of_turn_id=end_id)

    def closes(self, turn_token_ids: list[int]) -> bool:
        """Whether a model turn already ended with the end-of-turn token (judged by id, not text,
        so it holds whether or not the engine trimmed the stop token from the text)."""
        return self.end_of_turn_id is not None and bool(turn_token_ids) and turn_token_ids[-1] == self.end_of_turn_id

    def text(self, observation: str, turn_closed: bool) -> str:
        """The observation chunk; `turn_closed` when the model's turn already ended with end_of_turn."""
        prefix = self.prefix[len(self.end_of_turn):] if turn_closed else self.prefix
        return prefix + observation + self.suffix


@dataclass(frozen=True)
class Turn:
    text: str
    token_ids: list[int]
    finish_type: str  # "stop" | "length" | "abort"
    weight_version: int


@dataclass
class Trajectory:
    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    log_probs: list[float | None] = field(default_factory=list)
    weight_versions: list[int] = field(default_factory=list)
    unscored_from: int | None = None  # response index of the first observation token not yet scored
    turns: int = 0

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.response_ids)


def _version(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


class TrajectoryBuilder:
    """Drives one episode's generation against an SGLang-protocol engine."""

    def __init__(self, client: GenerateClient, prompt_ids: list[int], sampling_params: dict[str, Any],
                 max_context_len: int) -> None:
        if not prompt_ids:
            raise ValueError("empty prompt")
        if max_context_len <= len(prompt_ids):
            raise ValueError(f"prompt of {len(prompt_ids)} tokens does not fit max_context_len={max_context_len}")
        self.client = client
        self.params = dict(sampling_params)
        self.max_context_len = max_context_len
        self.traj = Trajectory(prompt_ids=list(prompt_ids))

    @property
    def budget(self) -> int:
        return self.max_context_len - self.traj.length

    def _fill_observation_logprobs(self, meta: dict[str, Any]) -> None:
        t = self.traj
        start = t.unscored_from
        assert start is not None
        scored = meta.get("input_token_logprobs") or []
        want = len(t.response_ids) - start
        if len(scored) != want or any(e[0] is None for e in scored):
            raise RuntimeError(f"engine scored {len(scored)} observation tokens, expected {want}")
        for i, entry in enumerate(scored):
            if int(entry[1]) != t.response_ids[start + i]:
                raise RuntimeError("engine scored different tokens than the observation sent")
            t.log_probs[start + i] = float(entry[0])
        t.unscored_from = None

    def _scoring_fields(self) -> dict[str, Any]:
        t = self.traj
        if t.unscored_from is None:
            return {}
        return {"logprob_start_len": len(t.prompt_ids) + t.unscored_from}

    async def generate(self) -> Turn | None:
        """One model turn; None when the context budget is spent."""
        max_new = min(int(self.params.get("max_new_tokens", 128)), self.budget)
        if max_new <= 0:
            return None
        t = self.traj
        body = {
            "input_ids": t.prompt_ids + t.response_ids,
            "sampling_params": dict(self.params, max_new_tokens=max_new),
            "return_logprob": True,
            **self._scoring_fields(),
        }
        out = await self.client.generate(body)
        meta = out["meta_info"]
        if t.unscored_from is not None:
            self._fill_observation_logprobs(meta)
        ids = [int(i) for i in out["output_ids"]]
        lps = [float(e[0]) for e in meta["output_token_logprobs"]]
        if len(ids) != len(lps):
            raise RuntimeError(f"engine returned {len(lps)} log-probs for {len(ids)} tokens")
        t.response_ids += ids
        t.loss_mask += [1] * len(ids)
        t.log_probs += lps
        version = _version(meta.get("weight_version"))
        t.weight_versions.append(version)
        t.turns += 1
        finish = (meta.get("finish_reason") or {}).get("type", "stop")
        return Turn(text=out.get("text", ""), token_ids=ids, finish_type=finish, weight_version=version)

    def append_observation(self, token_ids: list[int]) -> None:
        """Environment tokens: loss_mask 0; their log-probs come with the next engine call."""
        t = self.traj
        if not token_ids:
            return
        if t.unscored_from is None:
            t.unscored_from = len(t.response_ids)
        t.response_ids += list(token_ids)
        t.loss_mask += [0] * len(token_ids)
        t.log_probs += [None] * len(token_ids)

    async def finalize(self) -> Trajectory:
        """Score any trailing observation (max_new_tokens 0) so every log-prob is real."""
        t = self.traj
        if t.unscored_from is not None:
            body = {
                "input_ids": t.prompt_ids + t.response_ids,
                "sampling_params": dict(self.params, max_new_tokens=0),
                "return_logprob": True,
                **self._scoring_fields(),
            }
            out = await self.client.generate(body)
            self._fill_observation_logprobs(out["meta_info"])
        if any(lp is None for lp in t.log_probs):
            raise RuntimeError("trajectory has unscored tokens")
        return t

    def fill_sample(self, sample: Any) -> Any:
        """Write tokens / response_length / loss_mask / rollout_log_probs / weight_version into a Sample."""
        t = self.traj
        if t.unscored_from is not None:
            raise RuntimeError("finalize() before fill_sample()")
        sample.tokens = t.prompt_ids + t.response_ids
        sample.response_length = len(t.response_ids)
        sample.loss_mask = list(t.loss_mask)
        sample.rollout_log_probs = [float(x) for x in t.log_probs]  # type: ignore[arg-type]
        # The oldest policy that contributed tokens (what off-policy corrections must assume).
        sample.weight_version = min(t.weight_versions) if t.weight_versions else None
        sample.metadata = dict(sample.metadata or {}, weight_versions=list(t.weight_versions), turns=t.turns)
        return sample


# Don't append an observation that would leave the model no room to answer it.
MIN_TURN_TOKENS = 8


async def run_agent_loop(
    builder: TrajectoryBuilder,
    tokenizer: Any,
    obs_format: ObservationFormat,
    step: Callable[[Turn], Awaitable[str | None]],
) -> str:
    """The multi-turn loop shared by the Track 2 environments.

    `step(turn)` acts on a model turn and returns the observation to append, or None when the
    episode is over. Returns "completed", "truncated" (context budget spent) or "aborted"
    (the engine aborted a request). The caller then runs `builder.finalize()`.
    """
    while True:
        turn = await builder.generate()
        if turn is None:
            return "truncated"
        if turn.finish_type == "abort":
            return "aborted"
        observation = await step(turn)
        if observation is None:
            return "completed"
        text = obs_format.text(observation, turn_closed=obs_format.closes(turn.token_ids))
        obs_ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])
        if builder.budget - len(obs_ids) < MIN_TURN_TOKENS:
            return "truncated"
        builder.append_observation(obs_ids)
