"""Attach to a running vLLM OpenAI-compatible server (`vllm serve MODEL`) as an `Engine`.

Generation goes through vLLM's `/v1/completions` with token-id prompts and
`return_tokens_as_token_ids`, so token ids and per-token log-probs come back exactly. vLLM's
OpenAI server has no `/update_weights_from_disk`: weight updates report failure with a message
saying so (use SGLang or the embedded engine for RL weight sync).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from openclaw.engines.base import EngineBase, FinishReason, GenerationRequest, GenerationResult, TokenEvent


def completions_body(req: GenerationRequest, model: str, stream: bool) -> dict[str, Any]:
    """vLLM `/v1/completions` body for one engine request."""
    p = req.params
    body: dict[str, Any] = {"model": model, "prompt": list(req.input_ids), "max_tokens": p.max_new_tokens,
                            "temperature": p.temperature, "top_p": p.top_p, "stream": stream,
                            "skip_special_tokens": p.skip_special_tokens, "ignore_eos": p.ignore_eos,
                            "include_stop_str_in_output": p.no_stop_trim, "return_tokens_as_token_ids": True}
    if p.top_k > 0:
        body["top_k"] = p.top_k
    body.update(p.stop_and_seed("seed"))
    if req.return_logprob:
        body["logprobs"] = max(1, req.top_logprobs_num)
    return body


def _token_id(tok: str) -> int:
    if not tok.startswith("token_id:"):
        raise ValueError(f"vLLM returned token {tok!r} without an id; it needs return_tokens_as_token_ids support")
    return int(tok.split(":", 1)[1])


def _finish(choice: dict[str, Any]) -> FinishReason | None:
    reason = choice.get("finish_reason")
    if reason is None:
        return None
    if reason == "length":
        return FinishReason("length", None)
    if reason == "abort":
        return FinishReason("abort", None)
    return FinishReason("stop", choice.get("stop_reason"))


class VLLMEngine(EngineBase):
    backend = "vllm"

    def __init__(self, base_url: str, model: str, tokenizer, max_context_len: int, timeout: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.served_model_name = model
        # vLLM names a model by what it serves; its OpenAI server cannot swap weights (version 0)
        self._init_base(model, tokenizer, max_context_len)
        self._timeout = timeout
        self._in_flight = 0

    @classmethod
    def attach(cls, url: str, model_path: str | None = None, served_model_name: str | None = None,
               timeout: float = 600.0, **_: Any) -> VLLMEngine:
        from transformers import AutoTokenizer

        base = url.rstrip("/")
        try:
            models = httpx.get(base + "/v1/models", timeout=10).json()["data"]
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise RuntimeError(f"no vLLM OpenAI server answers at {base}/v1/models ({exc}); "
                               "start one with `vllm serve MODEL`") from exc
        card = next((m for m in models if m["id"] == served_model_name), models[0]) if models else None
        if card is None:
            raise RuntimeError(f"vLLM at {base} serves no model")
        tokenizer = AutoTokenizer.from_pretrained(model_path or card.get("root") or card["id"])
        ctx = int(card.get("max_model_len") or 4096)
        return cls(base, card["id"], tokenizer, ctx, timeout)

    def num_pending(self) -> int:
        return self._in_flight

    def validate(self, request: GenerationRequest) -> None:
        self.check_prompt_fits(request)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[TokenEvent | GenerationResult]:
        self.validate(request)
        ids: list[int] = []
        lps: list[float] = []
        tops: list[tuple[tuple[int, float], ...]] = []
        text = ""
        self._in_flight += 1
        try:
            async with httpx.AsyncClient(base_url=self.base_url, timeout=self._timeout) as http:
                async with http.stream("POST", "/v1/completions",
                                       json=completions_body(request, self._model_path, True)) as resp:
                    if resp.status_code != 200:
                        await resp.aread()
                        raise RuntimeError(f"vLLM /v1/completions -> HTTP {resp.status_code}: {resp.text[:500]}")
                    async for line in resp.aiter_lines():
                        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                            continue
                        choice = json.loads(line[5:])["choices"][0]
                        lp = choice.get("logprobs") or {}
                        toks = [_token_id(t) for t in lp.get("tokens") or []]
                        for i, tid in enumerate(toks):
                            val = lp["token_logprobs"][i] if request.return_logprob else None
                            top = tuple((_token_id(k), float(v)) for k, v in
                                        ((lp.get("top_logprobs") or [{}] * len(toks))[i] or {}).items())
                            top = top[: request.top_logprobs_num]
                            ids.append(tid)
                            if val is not None:
                                lps.append(float(val))
                                tops.append(top)
                            yield TokenEvent(tid, None if val is None else float(val), top,
                                             choice.get("text", "") if i == len(toks) - 1 else "")
                        text += choice.get("text", "")
                        fin = _finish(choice)
                        if fin is not None:
                            yield GenerationResult(request.request_id or "", tuple(request.input_ids), tuple(ids),
                                                   text, tuple(lps), tuple(tops) if request.top_logprobs_num else (),
                                                   (), fin, 0)
                            return
            raise RuntimeError("vLLM stream ended without a finish_reason")
        finally:
            self._in_flight -= 1

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        async for item in self.stream(request):
            if isinstance(item, GenerationResult):
                return item
        raise RuntimeError("vLLM stream ended without a result")

    async def update_weights_from_disk(self, model_path: str, weight_version: int | None = None) -> tuple[bool, str]:
        return False, ("vLLM's OpenAI server has no update_weights_from_disk endpoint; restart vLLM with the new "
                       "checkpoint, or serve with --backend sglang / hf for live weight sync")

    async def pause_generation(self, abort: bool = False) -> None:
        raise NotImplementedError("pause_generation is not available with --backend vllm")

    async def continue_generation(self) -> None:
        raise NotImplementedError("continue_generation is not available with --backend vllm")

    async def flush_cache(self) -> bool:
        return self._in_flight == 0

    async def abort(self, rid: str | None = None, abort_all: bool = False) -> int:
        return 0

    async def shutdown(self) -> None:
        return None
