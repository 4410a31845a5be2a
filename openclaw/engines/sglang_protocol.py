"""SGLang's native `/generate` shapes <-> the engine dataclasses (both directions).

Used by the embedded engine's SGLang endpoints (server side) and by the shared client (to turn
an SGLang response back into a `GenerationResult`). Field names follow SGLang's
`GenerateReqInput` / `meta_info` as slime consumes them.
"""

from __future__ import annotations

from typing import Any

from openclaw.engines.base import FinishReason, GenerationRequest, GenerationResult, SamplingParams

_SAMPLING_KEYS = {"max_new_tokens", "temperature", "top_p", "top_k", "stop", "stop_token_ids", "ignore_eos",
                  "skip_special_tokens", "no_stop_trim", "sampling_seed", "seed",
                  # accepted and ignored (SGLang knobs the embedded engine does not implement)
                  "min_p", "min_new_tokens", "frequency_penalty", "presence_penalty", "repetition_penalty",
                  "spaces_between_special_tokens", "n", "json_schema", "regex", "ebnf", "logit_bias",
                  "custom_params", "stream_interval"}
_UNSUPPORTED_ACTIVE = {"json_schema", "regex", "ebnf"}


class ProtocolError(ValueError):
    """A malformed SGLang request; `param` names the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def _num(d: dict, key: str, kind: type, default):
    v = d.get(key, default)
    if v is None:
        return default
    if kind is float and isinstance(v, int | float) and not isinstance(v, bool):
        return float(v)
    if kind is int and isinstance(v, int) and not isinstance(v, bool):
        return v
    raise ProtocolError(f"sampling_params.{key} must be a {kind.__name__}, got {v!r}", f"sampling_params.{key}")


def parse_sampling_params(d: dict[str, Any] | None) -> SamplingParams:
    d = d or {}
    if not isinstance(d, dict):
        raise ProtocolError("sampling_params must be an object", "sampling_params")
    unknown = set(d) - _SAMPLING_KEYS
    if unknown:
        raise ProtocolError(f"unknown sampling_params: {sorted(unknown)}", "sampling_params")
    active = [k for k in _UNSUPPORTED_ACTIVE if d.get(k)]
    if active:
        raise ProtocolError(f"constrained decoding ({active[0]}) is not supported by this engine", f"sampling_params.{active[0]}")
    stop = d.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, list | tuple) or not all(isinstance(s, str) for s in stop):
        raise ProtocolError("sampling_params.stop must be a string or a list of strings", "sampling_params.stop")
    stop_ids = d.get("stop_token_ids") or ()
    if isinstance(stop_ids, int):
        stop_ids = (stop_ids,)
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in stop_ids):
        raise ProtocolError("sampling_params.stop_token_ids must be a list of integers", "sampling_params.stop_token_ids")
    seed = d.get("sampling_seed", d.get("seed"))
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise ProtocolError("sampling_params.sampling_seed must be an integer", "sampling_params.sampling_seed")
    top_k = _num(d, "top_k", int, -1)
    return SamplingParams(
        max_new_tokens=_num(d, "max_new_tokens", int, 128),
        temperature=_num(d, "temperature", float, 1.0),
        top_p=_num(d, "top_p", float, 1.0),
        top_k=-1 if top_k == 0 else top_k,  # SGLang treats 0 / -1 / huge as "disabled"
        stop=tuple(stop), stop_token_ids=tuple(stop_ids),
        ignore_eos=bool(d.get("ignore_eos", False)),
        skip_special_tokens=bool(d.get("skip_special_tokens", True)),
        no_stop_trim=bool(d.get("no_stop_trim", False)),
        seed=seed)


def sampling_params_to_dict(p: SamplingParams) -> dict[str, Any]:
    return {"max_new_tokens": p.max_new_tokens, "temperature": p.temperature, "top_p": p.top_p,
            "top_k": p.top_k, "skip_special_tokens": p.skip_special_tokens,
            "no_stop_trim": p.no_stop_trim, "ignore_eos": p.ignore_eos, **p.stop_and_seed("sampling_seed")}


def request_to_body(req: GenerationRequest, stream: bool = False) -> dict[str, Any]:
    """A `/generate` body for one engine request (what the client sends).

    With images the prompt goes as `text` (with the model's image placeholders) plus `image_data`,
    not as `input_ids`: SGLang's multimodal processor finds the placeholders in the text and
    expands each into as many image tokens as that image's size needs (a count only it knows).
    Current SGLang would decode `input_ids` back to text for that, older releases need the text,
    and `text` is what SGLang's own OpenAI server sends for vision-language models. A request naming a
    LoRA adapter carries it as `lora_path` (the engine checks beforehand that it is loaded)."""
    if req.image_data:
        if not req.text:
            raise ValueError("a request with image_data needs its rendered prompt text (GenerationRequest.text)")
        prompt: dict[str, Any] = {"text": req.text, "image_data": list(req.image_data)}
    else:
        prompt = {"input_ids": list(req.input_ids)}
    body: dict[str, Any] = {**prompt, "sampling_params": sampling_params_to_dict(req.params),
                            "return_logprob": req.return_logprob, "stream": stream}
    if req.return_logprob:
        body["logprob_start_len"] = req.logprob_start_len
        body["top_logprobs_num"] = req.top_logprobs_num
    if req.request_id:
        body["rid"] = req.request_id
    if req.lora_name is not None:
        # SGLang's per-request adapter field takes the name an adapter was loaded under
        body["lora_path"] = req.lora_name
    return body


def finish_reason_to_sglang(fr: FinishReason | None) -> dict[str, Any] | None:
    if fr is None:
        return None
    if fr.type == "length":
        return {"type": "length", "length": fr.matched}
    if fr.type == "abort":
        return {"type": "abort", "message": fr.matched}
    return {"type": "stop", "matched": fr.matched}


def finish_reason_from_sglang(d: dict[str, Any] | None) -> FinishReason:
    if not d:
        return FinishReason("abort", "no finish_reason")
    kind = d.get("type", "abort")
    if kind == "length":
        return FinishReason("length", d.get("length"))
    if kind == "abort":
        return FinishReason("abort", d.get("message"))
    return FinishReason("stop", d.get("matched"))


def _tok_text(tokenizer, tid: int, with_text: bool) -> str | None:
    return tokenizer.decode([tid]) if with_text and tokenizer is not None else None


def meta_info(result: GenerationResult, *, tokenizer=None, return_logprob: bool = False,
              return_text_in_logprobs: bool = False, top_logprobs_num: int = 0, finished: bool = True,
              e2e_latency: float | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "id": result.request_id,
        "finish_reason": finish_reason_to_sglang(result.finish_reason) if finished else None,
        "prompt_tokens": len(result.prompt_ids),
        "completion_tokens": len(result.output_ids),
        "cached_tokens": 0,
        "weight_version": str(result.weight_version),
    }
    if e2e_latency is not None:
        meta["e2e_latency"] = e2e_latency
    if return_logprob:
        w = return_text_in_logprobs
        meta["output_token_logprobs"] = [[lp, tid, _tok_text(tokenizer, tid, w)]
                                         for lp, tid in zip(result.output_logprobs, result.output_ids, strict=False)]
        n_in = len(result.input_logprobs)
        start = len(result.prompt_ids) - n_in
        meta["input_token_logprobs"] = [[lp, tid, _tok_text(tokenizer, tid, w)]
                                        for lp, tid in zip(result.input_logprobs, result.prompt_ids[start:], strict=True)]
        if top_logprobs_num > 0:
            meta["output_top_logprobs"] = [[[lp, tid, _tok_text(tokenizer, tid, w)] for tid, lp in pos]
                                           for pos in result.output_top_logprobs]
            meta["input_top_logprobs"] = [None] * n_in
    return meta


def result_to_sglang(result: GenerationResult, **kw) -> dict[str, Any]:
    return {"text": result.text, "output_ids": list(result.output_ids), "meta_info": meta_info(result, **kw)}


def _as_int_version(v: Any) -> int:
    """SGLang reports the string "default" until the first weight update: that is version 0.
    Anything else that is not an integer is an engine we do not understand, and the staleness
    check would be blind to it: refuse rather than guess."""
    if v is None or v == "default":
        return 0
    try:
        return int(v)
    except (TypeError, ValueError):
        raise ValueError(f"unreadable weight_version {v!r} from the engine: expected an integer "
                         f"(or SGLang's initial 'default')") from None


def result_from_sglang(d: dict[str, Any], prompt_ids: tuple[int, ...] = ()) -> GenerationResult:
    """Turn a `/generate` response (one item) into a GenerationResult."""
    meta = d.get("meta_info") or {}
    out_ids = tuple(d.get("output_ids") or ())
    out_lps = meta.get("output_token_logprobs") or []
    if out_lps and not out_ids:
        out_ids = tuple(int(e[1]) for e in out_lps)
    in_lps = meta.get("input_token_logprobs") or []
    if in_lps and not prompt_ids:
        prompt_ids = tuple(int(e[1]) for e in in_lps)
    tops = tuple(tuple((int(e[1]), float(e[0])) for e in (pos or ())) for pos in (meta.get("output_top_logprobs") or ()))
    return GenerationResult(
        request_id=str(meta.get("id", "")), prompt_ids=tuple(prompt_ids), output_ids=out_ids, text=d.get("text", ""),
        output_logprobs=tuple(float(e[0]) for e in out_lps), output_top_logprobs=tops,
        input_logprobs=tuple(None if e[0] is None else float(e[0]) for e in in_lps),
        finish_reason=finish_reason_from_sglang(meta.get("finish_reason")),
        weight_version=_as_int_version(meta.get("weight_version")))
