"""`TinkerEngine`: the Engine protocol served from a Tinker sampling client.

With `python -m openclaw.server --backend tinker` the OpenAI endpoint's completions come from the
Tinker API (the hosted service, or any server that speaks it, e.g. skyrl-tx): token ids and
per-token log-probs come back from Tinker's `sample`, so the RL intercept records the same fields
as with the local engines and the buffer stays backend-agnostic.

Weights: `update_weights_from_disk(model_path)` takes a Tinker sampler path
(`tinker://.../sampler_weights/...`, what `save_weights_for_sampler` returns) and swaps in a new
sampling client for it; the trainer calls it through the usual `/update_weights_from_disk` after
each step, so the served policy is the trained one. A local folder is refused: Tinker cannot load
weights from this machine's disk.

Not streamed token by token: Tinker's `sample` returns a whole sequence, so `stream` yields the
tokens once the sequence is done (the SSE shape is the same; the latency is not).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from openclaw.engines.base import EngineBase, FinishReason, GenerationRequest, GenerationResult, TokenEvent
from openclaw.environment import env_value

log = logging.getLogger(__name__)

SAMPLER_PATH_PREFIX = "tinker://"


class TinkerUnavailable(RuntimeError):
    """The SDK is missing or the Tinker service cannot be reached / refuses the key."""


def tinker_service_client(base_url: str | None, api_key: str | None, project_id: str | None = None) -> Any:
    """A `tinker.ServiceClient` for `base_url` (env `TINKER_ENDPOINT`, else the SDK's own
    `TINKER_BASE_URL`/default) and `api_key` (env `TINKER_API_KEY`)."""
    try:
        import tinker
    except ImportError as exc:  # the SDK is in requirements.txt; a bare install may lack it
        raise TinkerUnavailable("--backend tinker needs the Tinker SDK: pip install tinker==0.24.1") from exc
    key = api_key or env_value("TINKER_API_KEY")
    if not key:
        raise TinkerUnavailable("--backend tinker needs an API key: set TINKER_API_KEY "
                                "(any non-empty value for a local skyrl-tx server)")
    url = base_url or env_value("TINKER_ENDPOINT")
    return tinker.ServiceClient(base_url=url, api_key=key,
                                project_id=project_id or env_value("TINKER_PROJECT_ID"))


async def prompt_logprobs(sampling_client: Any, ids: list[int]) -> list[float | None]:
    """log p(ids[i] | ids[:i]) for every position, None for the first (SGLang's shape). The hosted
    service returns one entry per token (None first); skyrl returns one per scored token (n - 1)."""
    import tinker

    lps = list(await sampling_client.compute_logprobs_async(tinker.ModelInput.from_ints(ids)))
    if len(lps) == len(ids) - 1:
        lps = [None, *lps]
    if len(lps) != len(ids):
        raise RuntimeError(f"Tinker returned {len(lps)} prompt log-probs for {len(ids)} tokens")
    return [None if i == 0 or x is None else float(x) for i, x in enumerate(lps)]


class TinkerEngine(EngineBase):
    """Serve a base model or a trained LoRA through a Tinker sampling client."""

    backend = "tinker"

    def __init__(self, service: Any, sampling_client: Any, base_model: str, tokenizer: Any,
                 max_context_len: int, weight_version: int = 0, sampler_path: str | None = None) -> None:
        self._service = service
        self._sampling = sampling_client
        self._base_model = base_model
        self._init_base(base_model, tokenizer, max_context_len, weight_version)
        self.sampler_path = sampler_path
        self._in_flight = 0
        self._running = asyncio.Event()
        self._running.set()

    @classmethod
    def load(cls, base_model: str, *, base_url: str | None = None, api_key: str | None = None,
             tokenizer_path: str | None = None, sampler_path: str | None = None,
             max_context_len: int | None = None) -> TinkerEngine:
        """`base_model` is the name Tinker knows the model by (for skyrl-tx: the HF folder it
        was started with). The tokenizer is read from `tokenizer_path` (default: `base_model`,
        which works when it is a local folder) since the chat template is applied here."""
        from transformers import AutoConfig, AutoTokenizer

        service = tinker_service_client(base_url, api_key)
        if sampler_path:
            sampling = service.create_sampling_client(model_path=sampler_path)
        else:
            sampling = service.create_sampling_client(base_model=base_model)
        tok_src = tokenizer_path or base_model
        tokenizer = AutoTokenizer.from_pretrained(tok_src)
        if max_context_len is None:
            cfg = AutoConfig.from_pretrained(tok_src)
            max_context_len = int(getattr(cfg, "max_position_embeddings", 0) or 4096)
        return cls(service, sampling, base_model, tokenizer, max_context_len, sampler_path=sampler_path)

    # -- Engine protocol: properties ---------------------------------------------------------
    @property
    def model_path(self) -> str:
        return self.sampler_path or self._base_model

    def num_pending(self) -> int:
        return self._in_flight

    def validate(self, request: GenerationRequest) -> None:
        self.check_prompt_fits(request)
        if request.top_logprobs_num:
            raise ValueError("top_logprobs is not supported with --backend tinker")

    # -- generation ----------------------------------------------------------------------------
    async def generate(self, request: GenerationRequest) -> GenerationResult:
        self.validate(request)
        await self._running.wait()
        self._in_flight += 1
        try:
            if request.params.max_new_tokens == 0:
                return await self._score_prompt(request)
            return await self._sample(request)
        finally:
            self._in_flight -= 1

    async def stream(self, request: GenerationRequest) -> AsyncIterator[TokenEvent | GenerationResult]:
        result = await self.generate(request)
        # The sequence arrives whole, so the text goes out with the last token: the deltas still
        # concatenate exactly to `result.text` (already trimmed at a stop string).
        last = len(result.output_ids) - 1
        for i, tid in enumerate(result.output_ids):
            lp = result.output_logprobs[i] if result.output_logprobs else None
            yield TokenEvent(token_id=tid, logprob=lp, text_delta=result.text if i == last else "")
        yield result

    async def _sample(self, request: GenerationRequest) -> GenerationResult:
        import tinker

        p = request.params
        # Tinker's `stop` is strings or token ids, not both. The chat path sends strings; EOS and
        # stop ids are enforced here on the returned tokens, which every Tinker server honours.
        params = tinker.SamplingParams(max_tokens=p.max_new_tokens, temperature=p.temperature, top_p=p.top_p,
                                       top_k=p.top_k, seed=p.seed, stop=list(p.stop) or None)
        resp = await self._sampling.sample_async(prompt=tinker.ModelInput.from_ints(list(request.input_ids)),
                                                 num_samples=1, sampling_params=params)
        seq = resp.sequences[0]
        ids, lps = list(seq.tokens), [float(x) for x in (seq.logprobs or [])]
        if request.return_logprob and len(lps) != len(ids):
            raise RuntimeError(f"Tinker returned {len(lps)} log-probs for {len(ids)} tokens")
        finish = FinishReason("stop") if seq.stop_reason == "stop" else FinishReason("length")
        stop_ids = set(p.stop_token_ids) | ({self._tokenizer.eos_token_id} if not p.ignore_eos else set())
        stop_ids.discard(None)
        for i, tid in enumerate(ids):
            if tid in stop_ids:
                ids, lps, finish = ids[: i + 1], lps[: i + 1], FinishReason("stop", matched=tid)
                break
        text = self._tokenizer.decode(ids, skip_special_tokens=p.skip_special_tokens)
        for s in p.stop:
            cut = text.find(s)
            if cut >= 0:
                text, finish = (text if p.no_stop_trim else text[:cut]), FinishReason("stop", matched=s)
                break
        return GenerationResult(
            request_id=request.request_id or uuid.uuid4().hex, prompt_ids=tuple(request.input_ids),
            output_ids=tuple(ids), text=text, output_logprobs=tuple(lps) if request.return_logprob else (),
            output_top_logprobs=(), input_logprobs=(), finish_reason=finish, weight_version=self._weight_version)

    async def _score_prompt(self, request: GenerationRequest) -> GenerationResult:
        """`max_new_tokens: 0` + `logprob_start_len`: prompt log-probs (how a teacher scores a
        response), from Tinker's `compute_logprobs`."""

        start = request.logprob_start_len
        lps: tuple[float | None, ...] = ()
        if request.return_logprob and start >= 0:
            lps = tuple(await prompt_logprobs(self._sampling, list(request.input_ids)))[start:]
        return GenerationResult(
            request_id=request.request_id or uuid.uuid4().hex, prompt_ids=tuple(request.input_ids), output_ids=(),
            text="", output_logprobs=(), output_top_logprobs=(), input_logprobs=lps,
            finish_reason=FinishReason("length"), weight_version=self._weight_version)

    # -- weights -------------------------------------------------------------------------------
    async def update_weights_from_disk(self, model_path: str, weight_version: int | None = None) -> tuple[bool, str]:
        if not model_path.startswith(SAMPLER_PATH_PREFIX):
            return False, (f"--backend tinker loads Tinker sampler weights ({SAMPLER_PATH_PREFIX}...), "
                           f"not a local folder: {model_path!r}")
        try:
            sampling = await self._service.create_sampling_client_async(model_path=model_path)
        except Exception as exc:  # the service's refusal goes back to the caller as SGLang's shape
            log.warning("tinker: loading %s failed: %s", model_path, exc)
            return False, f"Tinker could not load {model_path}: {exc}"
        self._sampling, self.sampler_path = sampling, model_path
        self._weight_version = self._weight_version + 1 if weight_version is None else int(weight_version)
        return True, f"serving {model_path} as weight version {self._weight_version}"

    async def pause_generation(self, abort: bool = False) -> None:
        if abort:
            raise NotImplementedError("abort is not available with --backend tinker")
        self._running.clear()

    async def continue_generation(self) -> None:
        self._running.set()

    async def flush_cache(self) -> bool:
        return self._in_flight == 0

    async def shutdown(self) -> None:
        return None
