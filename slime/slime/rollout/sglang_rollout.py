"""The default rollout function (`--rollout-function-path`'s default):

prompts from the data source -> engine `/generate` (n samples per prompt, all requests in flight
at once, groups spread round-robin over the engines) -> Samples with tokens, response_length,
loss_mask, rollout_log_probs (1:1 with response tokens) and weight_version -> reward via
`--rm-type` / `--custom-rm-path` -> optional group filter (`--dynamic-sampling-filter-path`),
topping up with fresh prompts until `rollout_batch_size` groups are kept. With `evaluation=True`
(slime.rollout.evaluation): every prompt of the eval datasets, with the eval sampling settings.

With --lora-adapter-name every request names the trained adapter (`lora_path`), so the policy
is the adapter the engines serve under that name, never the base model beside it.

Engine addresses come from `args.rollout_engine_urls` (set by the rollout manager), else
`args.sglang_router_ip/port` (slime's router address).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from slime.rollout.base_types import DynamicFilterOutput, RolloutFnEvalOutput, RolloutFnTrainOutput
from slime.rollout.engine_io import EngineClients, sampling_params_from_args
from slime.rollout.rm import batched_async_rm
from slime.rollout.staleness import UNREPORTED_VERSION
from slime.utils.types import Sample

log = logging.getLogger("slime.rollout")


def _tokenizer(args: Any):
    from slime.backends.fsdp.model import load_tokenizer

    return load_tokenizer(args.hf_checkpoint)


async def generate_one(args: Any, sample: Sample, sampling_params: dict[str, Any], clients: EngineClients,
                       tokenizer: Any, engine_index: int) -> Sample:
    """Default per-sample generation: one /generate call with return_logprob."""
    if sample.tokens:
        prompt_ids = list(sample.tokens)
    else:
        text = sample.prompt if isinstance(sample.prompt, str) else \
            tokenizer.apply_chat_template(sample.prompt, tokenize=False, add_generation_prompt=True)
        prompt_ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    params = dict(sampling_params)
    max_ctx = getattr(args, "rollout_max_context_len", None)
    if max_ctx:
        params["max_new_tokens"] = max(0, min(params["max_new_tokens"], max_ctx - len(prompt_ids)))
    if params["max_new_tokens"] <= 0:
        sample.status = Sample.Status.TRUNCATED
        sample.tokens, sample.response_length, sample.loss_mask, sample.rollout_log_probs = list(prompt_ids), 0, [], []
        return sample
    out = await clients.generate(engine_index, list(prompt_ids), params)
    output_ids = list(out["output_ids"])
    logprobs = [float(x[0]) for x in out["meta_info"]["output_token_logprobs"]]
    if len(logprobs) != len(output_ids):
        raise RuntimeError(f"engine returned {len(logprobs)} log-probs for {len(output_ids)} tokens")
    sample.tokens = list(prompt_ids) + output_ids
    sample.response = out.get("text", "")
    sample.response_length = len(output_ids)
    sample.loss_mask = [1] * len(output_ids)
    sample.rollout_log_probs = logprobs
    await _record_version(sample, out, clients, engine_index)
    finish = (out["meta_info"].get("finish_reason") or {}).get("type")
    sample.status = {"length": Sample.Status.TRUNCATED, "abort": Sample.Status.ABORTED}.get(finish, Sample.Status.COMPLETED)
    return sample


async def _record_version(sample: Sample, out: dict[str, Any], clients: EngineClients, engine_index: int) -> None:
    """The sample's weight version, from the engine's answer. With a named adapter only an engine
    that versions its adapters answers with the adapter's version; SGLang's answer is its base
    weights' version, which never moves while the adapter trains, so such a sample is marked and
    the rollout manager gives it the version the rollout began with (fill_unreported_versions)."""
    if clients.adapter_name is not None and not await clients.reports_adapter_versions(engine_index):
        sample.metadata[UNREPORTED_VERSION] = clients.adapter_name
        sample.weight_version = None
        return
    raw_version = out["meta_info"].get("weight_version")
    version = parse_weight_version(raw_version)
    if version is None:  # counted per rollout (rollout/weight_version_unreadable) and warned about there
        sample.metadata["weight_version_unreadable"] = repr(raw_version)
    sample.weight_version = version if version is not None else 0


async def _generate_group(args: Any, group: list[Sample], sampling_params: dict[str, Any], clients: EngineClients,
                          tokenizer: Any, engine_index: int, custom_generate, evaluation: bool) -> list[Sample]:
    async def one(sample: Sample) -> list[Sample]:
        if custom_generate is not None:
            res = await custom_generate(sample, dict(sampling_params), evaluation)
        else:
            res = await generate_one(args, sample, sampling_params, clients, tokenizer, engine_index)
        return res if isinstance(res, list) else [res]

    results = await asyncio.gather(*(one(s) for s in group))
    samples = [s for r in results for s in r]
    await assign_rewards(args, samples)
    return samples


async def assign_rewards(args: Any, samples: list[Sample]) -> None:
    pending = [s for s in samples if s.reward is None]
    if not pending:
        return
    rewards = await batched_async_rm(args, pending)
    for s, r in zip(pending, rewards, strict=True):
        s.reward = r


def _keep(filter_fn, args: Any, group: list[Sample]) -> tuple[bool, str | None]:
    if filter_fn is None:
        return True, None
    out = filter_fn(group)  # the loaded filter is bound to args (slime.utils.plugins.adapt_filter)
    if isinstance(out, DynamicFilterOutput) or hasattr(out, "keep"):
        return bool(out.keep), getattr(out, "reason", None)
    return bool(out), None


async def generate_rollout_async(args: Any, rollout_id: int, data_source: Any, clients: EngineClients,
                                 evaluation: bool = False) -> RolloutFnTrainOutput:
    from slime.rollout.plugins_io import load_optional

    tokenizer = _tokenizer(args)
    custom_generate = load_optional(args, "custom_generate_function_path", "generate")
    filter_fn = load_optional(args, "dynamic_sampling_filter_path", "filter")
    sampling_params = sampling_params_from_args(args, evaluation)
    target = int(args.rollout_batch_size)
    batch = int(getattr(args, "over_sampling_batch_size", None) or target)
    kept: list[list[Sample]] = []
    filtered: dict[str, int] = {}
    rounds = 0
    t0 = time.perf_counter()
    next_engine = 0
    while len(kept) < target:
        rounds += 1
        if rounds > 50:
            raise RuntimeError(f"dynamic sampling kept only {len(kept)}/{target} groups after 50 rounds "
                               f"(dropped: {filtered}); check --dynamic-sampling-filter-path")
        want = batch if filter_fn is not None else target - len(kept)
        groups = data_source.get_samples(want)
        tasks = []
        for g in groups:
            tasks.append(_generate_group(args, g, sampling_params, clients, tokenizer, next_engine % clients.num_engines,
                                         custom_generate, evaluation))
            next_engine += 1
        for group in await asyncio.gather(*tasks):
            keep, reason = _keep(filter_fn, args, group)
            if keep and len(kept) < target:
                kept.append(group)
            elif not keep:
                filtered[reason or "filtered"] = filtered.get(reason or "filtered", 0) + 1
    flat = [s for g in kept for s in g]
    rewards = [reward_value(args, s) for s in flat]
    metrics = {
        "rollout/time": time.perf_counter() - t0,
        "rollout/response_len_mean": sum(s.response_length for s in flat) / max(1, len(flat)),
        "rollout/truncated_frac": sum(s.status == Sample.Status.TRUNCATED for s in flat) / max(1, len(flat)),
        "rollout/raw_reward_mean": sum(rewards) / max(1, len(rewards)),
        "rollout/sampling_rounds": rounds,
    }
    for reason, count in filtered.items():
        metrics[f"rollout/filtered/{reason}"] = count
    unreadable = [s.metadata["weight_version_unreadable"] for s in flat if "weight_version_unreadable" in s.metadata]
    metrics["rollout/weight_version_unreadable"] = len(unreadable)
    if unreadable:
        # Loud, not silent: staleness (--max-staleness, train_async) treats these samples as version 0.
        log.warning("rollout %d: %d of %d samples came with weight version %s, not an integer; their staleness is "
                    "measured as if version 0 (start SGLang with --weight-version 0)", rollout_id, len(unreadable),
                    len(flat), unreadable[0])
    return RolloutFnTrainOutput(samples=kept, metrics=metrics)


def parse_weight_version(value: Any) -> int | None:
    """SGLang reports versions as strings; ours are integers ("3" -> 3). None: not an integer
    (SGLang's "default" when started without --weight-version, or missing)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def reward_value(args: Any, sample: Sample) -> float:
    """The scalar reward of a sample (`--reward-key` picks from dict rewards)."""
    from slime.utils.plugins import extract_reward

    if sample.reward is None:
        raise ValueError(f"sample {sample.index} has no reward")
    return extract_reward(sample.reward, getattr(args, "reward_key", None))


async def eval_rollout_async(args: Any, data_source: Any, clients: EngineClients) -> RolloutFnEvalOutput:
    """Every prompt of every eval dataset (`data_source`: slime.rollout.data_source.EvalDataSource),
    all in flight at once, with the eval sampling settings; no dynamic filter (a score covers the
    whole set). Rewards stay as the reward function gave them (the manager applies --eval-reward-key)."""
    from slime.rollout.plugins_io import load_optional

    if not hasattr(data_source, "groups"):
        raise TypeError(f"evaluation needs the eval prompts (EvalDataSource), got {type(data_source).__name__}")
    tokenizer = _tokenizer(args)
    custom_generate = load_optional(args, "custom_generate_function_path", "generate")
    sampling_params = sampling_params_from_args(args, evaluation=True)
    owners = [(name, group) for name in data_source.names for group in data_source.groups(name)]
    results = await asyncio.gather(*(
        _generate_group(args, group, sampling_params, clients, tokenizer, i % clients.num_engines, custom_generate, True)
        for i, (_, group) in enumerate(owners)))
    per_name: dict[str, list[Sample]] = {name: [] for name in data_source.names}
    for (name, _), samples in zip(owners, results, strict=True):
        per_name[name].extend(samples)
    return RolloutFnEvalOutput(data={
        name: {"rewards": [s.reward for s in samples], "samples": samples,
               "truncated": [s.status == Sample.Status.TRUNCATED for s in samples]}
        for name, samples in per_name.items()})


def generate_rollout(args: Any, rollout_id: int, data_source: Any,
                     evaluation: bool = False) -> RolloutFnTrainOutput | RolloutFnEvalOutput:
    """slime's contract: fn(args, rollout_id, data_source, evaluation=False); with evaluation=True
    `data_source` holds the eval datasets and the result is a RolloutFnEvalOutput."""
    async def run() -> RolloutFnTrainOutput | RolloutFnEvalOutput:
        clients = EngineClients.from_args(args)
        try:
            if evaluation:
                return await eval_rollout_async(args, data_source, clients)
            return await generate_rollout_async(args, rollout_id, data_source, clients, evaluation)
        finally:
            await clients.aclose()

    return asyncio.run(run())
