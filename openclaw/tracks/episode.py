"""One track episode as a trainer Sample: the generate() skeleton every track parameterises.

A track opens its environment (a sandbox, a browser) and hands over a `Play`: the opening messages,
how a model turn is answered, and the score once the turns are over. The rest is the same for every
track: the engine client, the token-level multi-turn loop (the model's tokens trained, observations
masked out) and the Sample's fields.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

from slime.rollout.sglang_client import SGLangClient

from openclaw.sandbox.episode import chat_prompt_ids, engine_url_for, load_tokenizer
from openclaw.sandbox.trajectory import ObservationFormat, TrajectoryBuilder, Turn, run_agent_loop


@dataclass(frozen=True)
class Score:
    reward: float
    metadata: dict[str, Any]  # merged into the Sample's metadata


@dataclass(frozen=True)
class Play:
    """An episode whose environment is ready."""

    messages: list[dict[str, Any]]  # the prompt; the model's first turn follows it
    step: Callable[[Turn], Awaitable[str | None]]  # acts on a model turn: the observation, or None when over
    # The score, given how the turns ended ("completed", "truncated", "aborted"); called while the
    # environment is still open (the tests run in the episode's sandbox).
    score: Callable[[str], Awaitable[Score]]


# The track's side: given the policy's tokenizer and how observations are wrapped, open the
# environment and yield the Play; leaving the context closes the environment.
OpenPlay = Callable[[Any, ObservationFormat], AbstractAsyncContextManager[Play]]


async def generate_episode(args: Any, sample: Any, sampling_params: dict[str, Any], open_play: OpenPlay,
                           max_context_len: int, role: str = "user") -> Any:
    """Run one episode against the sample's engine and fill `sample` with its tokens, loss mask,
    log-probs, reward, status and the track's metadata. `role`: the chat role of observations."""
    from slime.utils.types import Sample  # the trainer's type: imported when a trainer runs the track

    tokenizer = load_tokenizer(args.hf_checkpoint)
    obs_format = ObservationFormat.from_tokenizer(tokenizer, role=role)
    async with open_play(tokenizer, obs_format) as play, SGLangClient(engine_url_for(args, sample.index)) as client:
        prompt_text, prompt_ids = chat_prompt_ids(tokenizer, play.messages)
        builder = TrajectoryBuilder(client, prompt_ids, sampling_params, max_context_len)
        outcome = await run_agent_loop(builder, tokenizer, obs_format, play.step)
        await builder.finalize()
        score = await play.score(outcome)
    builder.fill_sample(sample)
    sample.prompt = prompt_text
    sample.response = tokenizer.decode(sample.tokens[len(prompt_ids):])
    sample.reward = score.reward
    sample.status = Sample.Status(outcome)
    sample.metadata.update(score.metadata)
    return sample
