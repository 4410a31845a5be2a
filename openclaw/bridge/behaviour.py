"""Behaviour log-probs for turns recorded without them (offline data imported from session JSON).

A served turn carries the engine's log-probs of the tokens it sampled: the behaviour policy is the
policy that produced the reply. Imported text has none, and the policy that wrote it (a person,
another model, an older checkpoint) cannot be asked. The behaviour policy of an imported turn is
therefore the *current* policy: the weights the rollout engine serves when the turn is drained
(one prefill, SGLang's prompt log-probs, the same call as OPD's teacher). Training then sees a
PPO ratio of 1 on the first step (the trainer's weights are the engine's), so the first update on
an imported turn is the on-policy policy-gradient step on that text, clipping included; nothing is
padded or invented (a zero log-prob would be a fake signal).

With `--lora-adapter-name NAME` the current policy is the adapter served under NAME (a per-user
trainer: that user's adapter), so the request names it (`lora_path`). Only an engine that versions
its adapters (its /get_server_info lists `lora_adapters`) answers with the adapter's version; from
SGLang the answer is the base's, so such a sample is marked as slime's rollout marks its own and the
rollout manager gives it the version the rollout began with.
"""

from __future__ import annotations

import asyncio
from typing import Any

from slime.rollout.staleness import UNREPORTED_VERSION
from slime.utils.types import Sample
from slime.utils.weight_sync import adapter_versions

from openclaw.bridge.teacher import score_response


async def add_behaviour_logprobs(args: Any, samples: list[Sample]) -> int:
    """Fill `rollout_log_probs` of every sample that has none, from the serving engine; returns how
    many were filled. Each filled sample records the engine's weight version it was scored under."""
    missing = [s for s in samples if s.rollout_log_probs is None]
    if not missing:
        return 0
    from slime.rollout.engine_io import engine_urls_from_args
    from slime.rollout.sglang_client import SGLangClient

    sem = asyncio.Semaphore(max(1, int(getattr(args, "opd_teacher_concurrency", 4) or 4)))
    adapter = getattr(args, "lora_adapter_name", None)
    async with SGLangClient(engine_urls_from_args(args)[0], timeout=600) as client:
        unreported = adapter is not None and not await _versions_adapters(client)

        async def one(s: Sample) -> None:
            prompt_ids, response_ids = s.tokens[:-s.response_length], s.tokens[-s.response_length:]
            async with sem:
                s.rollout_log_probs, version = await score_response(client, prompt_ids, response_ids, adapter=adapter)
            s.metadata["behaviour_logprobs"] = "current_policy"
            if unreported:  # the base's version says nothing of the adapter that scored it
                s.metadata[UNREPORTED_VERSION] = adapter
                s.weight_version = None
            elif isinstance(version, int) or (isinstance(version, str) and version.isdigit()):
                s.weight_version = int(version)  # scored under these weights (SGLang may report none)
            s.validate()

        await asyncio.gather(*(one(s) for s in missing))
    return len(missing)


async def _versions_adapters(client: Any) -> bool:
    """Does the engine version its adapters? Asked as slime's rollout asks (an engine without
    /get_server_info is treated as SGLang, which does not) and read by slime's one reader, so an
    unreadable `lora_adapters` is an error naming the engine, never taken for SGLang."""
    from slime.rollout.sglang_client import SGLangClientError

    try:
        info = await client.get_server_info()
    except SGLangClientError:
        return False
    if not isinstance(info, dict):
        return False
    try:
        return adapter_versions(info) is not None
    except ValueError as exc:
        raise ValueError(f"behaviour log-probs for imported turns: the engine at {client.base_url}: {exc}") from exc
