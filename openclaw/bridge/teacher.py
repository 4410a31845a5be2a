"""OPD's teacher: the policy itself shown the judge's hint, scored by the rollout engine.

Shared by openclaw-opd (hinted turns only) and openclaw-combine (every turn; teacher = behaviour
policy where there is no hint). The token-level advantage the trainer computes from it is
``teacher_logp - old_logp`` (slime's `opd_advantages`), positive where the hint makes the sampled
token more likely.

Why the engine computes the teacher log-probs (SGLang's prompt log-probs: `/generate` with
`max_new_tokens: 0`, `return_logprob`, `logprob_start_len`), not the trainer's forward:
  * the engine already holds the current policy, so the teacher costs one prefill on the rollout
    side and nothing on the trainer's critical path (on GPUs: rollout GPUs, not train GPUs);
  * the trainer stays generic: samples arrive with `teacher_log_probs`, which slime's advantage
    code already consumes, so no trainer code depends on hint prompts;
  * it is the same call for SGLang and for the embedded CPU engine.
The price: the teacher is the engine's weights at rollout time (at most one sync behind).
With `--lora-adapter-name NAME` the policy is the adapter served under NAME (a per-user trainer:
that user's adapter), so every request here names it (`lora_path`): without it the engine would
answer with the base model, and the teacher would be someone else's policy.

Top-k distillation (`--opd-topk K`): the teacher's top-k per response position is written to
files keyed by the sample's token ids (`tokens_key`), where the top-k loss finds them: slime's
train batch carries per-token scalars, not per-token lists.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import os
import time
from pathlib import Path
from typing import Any, NamedTuple

from slime.utils.types import Sample

from openclaw.buffer.derived import TOPK_DIR_NAME, tokens_key


def teacher_messages(messages: list[dict[str, Any]], hint: str) -> list[dict[str, Any]]:
    """The turn's messages with the hint put in front of the last user message, as if the user
    had said it up front (a new user message when there is none).

    In front, not after: shown the hint after the question, SmolLM2-135M answers the hint (echoes
    it, apologises) instead of the question, and distilling that teacher collapsed OPD into "I'm
    sorry for any confusion." Greedy replies to 28 of the demo's training prompts with a "too
    long" hint: hint after the question -> 15 echo or apologise, 10 on topic, 4 meet the persona's
    rule; hint first -> 1, 22 and 12; no hint -> 0, 27 and 0."""
    out = [dict(m) for m in messages]
    for m in reversed(out):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            m["content"] = f"{hint}\n\n{m['content']}"
            return out
    return out + [{"role": "user", "content": hint}]


@functools.lru_cache(maxsize=4)
def _tokenizer(path: str) -> Any:
    from slime.backends.fsdp.model import load_tokenizer

    return load_tokenizer(path)


def tokenizer_for(args: Any) -> Any:
    path = getattr(args, "hf_checkpoint", None)
    if not path:
        from openclaw.models import resolve_model_path

        path = str(resolve_model_path(None))
    return _tokenizer(str(path))


def teacher_prompt_ids(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                       hint: str) -> list[int]:
    """Rendered exactly as the server renders a request (chat template, tools inline or native)."""
    from openclaw.server.prompting import ToolMode, render_prompt

    return render_prompt(tokenizer, teacher_messages(messages, hint), tools or None, ToolMode(parse=bool(tools))).input_ids


def policy_request(body: dict[str, Any], adapter: str | None) -> dict[str, Any]:
    """A /generate body asked of the policy: with a named adapter (--lora-adapter-name) it names
    it (`lora_path`, SGLang's per-request adapter field), so the base model never answers for it."""
    return body if adapter is None else {**body, "lora_path": adapter}


class ScoredResponse(NamedTuple):
    """A response's log-probs as the engine scored it, and the weight version it reported for the
    call (raw, as the engine sent it; SGLang may send none): the teacher needs the log-probs, the
    behaviour scoring of imported turns also which weights produced them."""

    logprobs: list[float]
    weight_version: Any


async def score_response(client: Any, prompt_ids: list[int], response_ids: list[int], *,
                         adapter: str | None = None) -> ScoredResponse:
    """log p(response token | prompt, earlier response tokens) from the engine's prompt log-probs."""
    out = await client.generate(policy_request({
        "input_ids": list(prompt_ids) + list(response_ids),
        "sampling_params": {"max_new_tokens": 0, "temperature": 1.0},
        "return_logprob": True,
        "logprob_start_len": len(prompt_ids),
    }, adapter))
    rows = out["meta_info"]["input_token_logprobs"]
    values = [r[0] for r in rows][-len(response_ids):]
    if len(values) != len(response_ids) or any(v is None or not math.isfinite(float(v)) for v in values):
        raise RuntimeError(f"engine returned {len(values)} usable prompt log-probs for {len(response_ids)} response tokens")
    return ScoredResponse([float(v) for v in values], out["meta_info"].get("weight_version"))


async def teacher_topk(client: Any, prompt_ids: list[int], response_ids: list[int], k: int, *,
                       adapter: str | None = None) -> tuple[list[list[int]], list[list[float]]]:
    """The teacher's top-k (ids, log-probs) at every response position.

    SGLang returns them with the prompt log-probs (`input_top_logprobs`). Engines that only report
    top-k for generated tokens (the embedded one) are asked once per position, in one batched
    call: prompt + response[:t] -> 1 token with `top_logprobs_num`."""
    n = len(response_ids)
    out = await client.generate(policy_request({
        "input_ids": list(prompt_ids) + list(response_ids),
        "sampling_params": {"max_new_tokens": 0, "temperature": 1.0},
        "return_logprob": True, "logprob_start_len": len(prompt_ids), "top_logprobs_num": k,
    }, adapter))
    rows = (out.get("meta_info") or {}).get("input_top_logprobs")
    if not rows or len(rows) < n or not rows[-1]:
        prefixes = [list(prompt_ids) + list(response_ids[:t]) for t in range(n)]
        outs = await client.generate(policy_request({
            "input_ids": prefixes, "return_logprob": True, "top_logprobs_num": k,
            "sampling_params": {"max_new_tokens": 1, "temperature": 1.0},
        }, adapter))
        rows = [o["meta_info"]["output_top_logprobs"][0] for o in outs]
    rows = rows[-n:]
    ids = [[int(e[1]) for e in row[:k]] for row in rows]
    lps = [[float(e[0]) for e in row[:k]] for row in rows]
    if len(ids) != n or any(len(r) != k for r in ids):
        raise RuntimeError(f"engine returned top-{k} for {len(ids)} of {n} response positions")
    return ids, lps


def topk_cache_dir(args: Any) -> Path:
    d = getattr(args, "opd_topk_cache_dir", None) or os.path.join(getattr(args, "rl_buffer_dir", "."), TOPK_DIR_NAME)
    return Path(d).expanduser().resolve()


def write_topk(args: Any, sample: Sample, ids: list[list[int]], lps: list[list[float]]) -> Path:
    d = topk_cache_dir(args)
    d.mkdir(parents=True, exist_ok=True)
    path = d / f"{tokens_key(sample.tokens)}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"ids": ids, "logprobs": lps}))
    os.replace(tmp, path)
    return path


async def add_teacher(args: Any, samples: list[Sample], *, copy_without_hint: bool) -> dict[str, float]:
    """Set `teacher_log_probs` of every hinted sample (engine prompt log-probs under the hinted
    prompt). Samples without a hint get a copy of their rollout log-probs when
    `copy_without_hint` (combine: teacher == behaviour policy, so the OPD term is exactly 0)."""
    from slime.rollout.engine_io import engine_urls_from_args
    from slime.rollout.sglang_client import SGLangClient

    tok = tokenizer_for(args)
    adapter = getattr(args, "lora_adapter_name", None)
    k = int(getattr(args, "opd_topk", 0) or 0)
    sem = asyncio.Semaphore(max(1, int(getattr(args, "opd_teacher_concurrency", 4) or 4)))
    hinted = [s for s in samples if s.metadata.get("hint")]
    gaps: list[float] = []
    t0 = time.perf_counter()
    async with SGLangClient(engine_urls_from_args(args)[0], timeout=600) as client:
        async def one(s: Sample) -> None:
            prompt_ids = teacher_prompt_ids(tok, s.prompt, s.metadata.get("tools"), s.metadata["hint"])
            response_ids = s.tokens[-s.response_length:]
            async with sem:
                s.teacher_log_probs = (await score_response(client, prompt_ids, response_ids, adapter=adapter)).logprobs
                if k > 0:
                    ids, lps = await teacher_topk(client, prompt_ids, response_ids, k, adapter=adapter)
                    s.metadata["teacher_topk_file"] = str(write_topk(args, s, ids, lps))
            s.metadata["teacher_prompt_len"] = len(prompt_ids)
            gaps.extend(t - o for t, o in zip(s.teacher_log_probs, s.rollout_log_probs or [], strict=True))

        await asyncio.gather(*(one(s) for s in hinted))
    for s in samples:
        if s.teacher_log_probs is None and copy_without_hint:
            s.teacher_log_probs = list(s.rollout_log_probs or [])
        s.validate()
    return {"rollout/opd_hinted": float(len(hinted)), "rollout/teacher_s": time.perf_counter() - t0,
            "rollout/opd_teacher_minus_old_mean": sum(gaps) / len(gaps) if gaps else 0.0}
