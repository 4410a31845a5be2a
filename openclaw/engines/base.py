"""The engine contract shared by the OpenAI server, the RL intercept and the trainer.

Token ids in, token ids + log-probs out. Chat templating and tool parsing live above this
layer (openclaw.server); SGLang's HTTP shapes live beside it (openclaw.engines.sglang_api).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Literal, Protocol

FinishType = Literal["stop", "length", "abort"]
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1  # what torch.Generator.manual_seed accepts


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int = 128
    temperature: float = 1.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = -1  # -1: disabled (SGLang's convention)
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    seed: int | None = None

    def stop_and_seed(self, seed_key: str) -> dict[str, Any]:
        """The stop strings, stop token ids and seed that are set, as an HTTP body carries them
        (`seed_key`: SGLang calls the seed `sampling_seed`, vLLM `seed`)."""
        out: dict[str, Any] = {}
        if self.stop:
            out["stop"] = list(self.stop)
        if self.stop_token_ids:
            out["stop_token_ids"] = list(self.stop_token_ids)
        if self.seed is not None:
            out[seed_key] = self.seed
        return out


@dataclass(frozen=True)
class GenerationRequest:
    input_ids: tuple[int, ...]
    params: SamplingParams = field(default_factory=SamplingParams)
    return_logprob: bool = False
    top_logprobs_num: int = 0
    # With return_logprob, log-probs of prompt tokens from this position on are returned
    # (-1: none). With max_new_tokens=0 this is how a teacher scores a given response.
    logprob_start_len: int = -1
    request_id: str | None = None
    # Images for a vision-language model, as data URLs in prompt order. With images, `text` is the
    # rendered prompt holding the model's image placeholder once per image (the engine expands
    # each into the image's patch tokens; `input_ids` is that text's unexpanded tokenisation, for
    # accounting). An engine that cannot take images must refuse such a request, never drop them.
    image_data: tuple[str, ...] = ()
    text: str | None = None
    # The loaded LoRA adapter to serve this request with (SGLang's per-request `lora_path`, which
    # names an adapter loaded by `load_lora_adapter`); None: the base model. An engine refuses a
    # name it has not loaded, never serving the base in its place.
    lora_name: str | None = None


@dataclass(frozen=True)
class TokenEvent:
    """One generated token, streamed as soon as it is sampled.

    The `text_delta`s of a request concatenate exactly to its `GenerationResult.text`: text
    that might still turn out to be the start of a stop string is withheld until ruled out, and
    the last event carries whatever remains (already trimmed at the stop string)."""

    token_id: int
    logprob: float | None
    top_logprobs: tuple[tuple[int, float], ...] = ()
    text_delta: str = ""  # detokenized increment (may be "" while a multi-byte char is incomplete)


@dataclass(frozen=True)
class FinishReason:
    type: FinishType
    matched: int | str | None = None  # the stop token id or stop string that ended generation


@dataclass(frozen=True)
class GenerationResult:
    """A finished request: its prompt, what it produced (with log-probs when asked for), why it
    stopped, and the weight version it finished under."""

    request_id: str
    prompt_ids: tuple[int, ...]
    output_ids: tuple[int, ...]
    text: str
    output_logprobs: tuple[float, ...]  # 1:1 with output_ids when return_logprob, else ()
    output_top_logprobs: tuple[tuple[tuple[int, float], ...], ...]
    input_logprobs: tuple[float | None, ...]  # from logprob_start_len on; first prompt token: None
    finish_reason: FinishReason
    # The version of what served it when it finished: the engine's (see update_weights_from_disk),
    # or, for a request with a `lora_name`, that adapter's (see load_lora_adapter).
    weight_version: int


class Engine(Protocol):
    """What the server and trainer need from an inference engine."""

    @property
    def weight_version(self) -> int: ...

    @property
    def model_path(self) -> str: ...

    @property
    def tokenizer(self): ...  # a transformers tokenizer

    @property
    def max_context_len(self) -> int: ...

    def stream(self, request: GenerationRequest) -> AsyncIterator[TokenEvent | GenerationResult]:
        """Yield TokenEvents, then exactly one GenerationResult. Closing the iterator early
        (client disconnect) cancels the request and frees its batch slot."""
        ...

    async def generate(self, request: GenerationRequest) -> GenerationResult: ...

    async def update_weights_from_disk(self, model_path: str, weight_version: int | None = None) -> tuple[bool, str]:
        """Load a full HF folder or a PEFT adapter folder without a restart; in-flight requests
        finish (pause, swap, continue). Bumps weight_version."""
        ...

    async def load_lora_adapter(self, name: str, path: str, weight_version: int | None = None) -> tuple[bool, str]:
        """Load the PEFT adapter folder `path` as `name` (replacing a loaded one of that name between
        two steps), for requests whose `lora_name` is `name`; the base and other adapters keep serving.
        Its version is `weight_version`, else one more than the replaced one's (0 before any)."""
        ...

    async def unload_lora_adapter(self, name: str) -> tuple[bool, str]: ...

    @property
    def lora_adapters(self) -> dict[str, int]:
        """The loaded adapters' names and versions."""
        ...

    @property
    def lora_adapter_paths(self) -> dict[str, str]:
        """The folder each loaded adapter was loaded from (those the engine knows)."""
        ...

    async def pause_generation(self) -> None: ...

    async def continue_generation(self) -> None: ...

    def num_pending(self) -> int: ...

    async def shutdown(self) -> None: ...


class EngineBase:
    """What every engine answers alike: the protocol's read-only properties, from the fields it
    sets in `__init__`, and the prompt checks it makes before its own. An engine overrides only
    what it derives differently."""

    backend: str  # the server's --backend name of this engine (reported by /get_server_info)
    _weight_version: int
    _model_path: str
    _tokenizer: Any  # a transformers tokenizer
    _max_context_len: int

    weight_version = property(attrgetter("_weight_version"))
    model_path = property(attrgetter("_model_path"))
    tokenizer = property(attrgetter("_tokenizer"))
    max_context_len = property(attrgetter("_max_context_len"))

    def _init_base(self, model_path: str, tokenizer: Any, max_context_len: int, weight_version: int = 0) -> None:
        """Set the fields the protocol's properties read (each engine's `__init__` calls it first)."""
        self._model_path = model_path
        self._tokenizer = tokenizer
        self._max_context_len = int(max_context_len)
        self._weight_version = int(weight_version)

    @property
    def lora_adapters(self) -> dict[str, int]:
        """An engine without per-request adapters has none loaded (it overrides this and the three below)."""
        return {}

    @property
    def lora_adapter_paths(self) -> dict[str, str]:
        return {}

    async def load_lora_adapter(self, name: str, path: str, weight_version: int | None = None) -> tuple[bool, str]:
        return False, f"the {self.backend} engine serves one model: it has no per-request LoRA adapters"

    async def unload_lora_adapter(self, name: str) -> tuple[bool, str]:
        return False, f"the {self.backend} engine serves one model: it has no per-request LoRA adapters"

    def check_lora_name(self, request: GenerationRequest) -> None:
        """Refuse a request naming an adapter that is not loaded (serving the base instead would
        hand one user's request to another model without a word)."""
        if request.lora_name is not None and request.lora_name not in self.lora_adapters:
            raise ValueError(f"LoRA adapter {request.lora_name!r} is not loaded on this server")

    def check_request(self, request: GenerationRequest, vocab_size: int) -> None:
        """What an in-process engine refuses before queueing a request (ValueError, a clear message):
        a prompt that does not fit, ids outside the vocabulary, sampling values out of range, an
        adapter that is not loaded."""
        self.check_prompt_fits(request)
        self.check_lora_name(request)
        n = len(request.input_ids)
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in request.input_ids):
            raise ValueError("input_ids must be a list of integers")
        bad = [t for t in request.input_ids if not 0 <= t < vocab_size]
        if bad:
            raise ValueError(f"token ids out of range [0, {vocab_size}): {bad[:5]}")
        p = request.params
        if p.max_new_tokens < 0:
            raise ValueError("max_new_tokens must be >= 0")
        if p.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < p.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if p.top_k == 0 or p.top_k < -1:
            raise ValueError("top_k must be -1 (disabled) or >= 1")
        if p.seed is not None and (isinstance(p.seed, bool) or not isinstance(p.seed, int)
                                   or not SEED_MIN <= p.seed <= SEED_MAX):
            raise ValueError(f"seed must be an integer in [{SEED_MIN}, {SEED_MAX}] (what torch.Generator accepts)")
        if not 0 <= request.top_logprobs_num <= vocab_size:
            raise ValueError(f"top_logprobs_num must be in [0, {vocab_size}]")
        if request.logprob_start_len >= n:
            raise ValueError(f"logprob_start_len {request.logprob_start_len} must be < prompt length {n}")

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """The stream's result (its token events dropped)."""
        agen = self.stream(request)  # type: ignore[attr-defined]
        try:
            async for item in agen:
                if isinstance(item, GenerationResult):
                    return item
        finally:
            await agen.aclose()
        raise RuntimeError("engine stream ended without a result")

    def check_prompt_fits(self, request: GenerationRequest) -> None:
        """Raise ValueError for an empty prompt or one that leaves no room to generate."""
        n = len(request.input_ids)
        if n == 0:
            raise ValueError("input_ids is empty")
        if n >= self._max_context_len:
            raise ValueError(f"prompt has {n} tokens; the model's context length is {self._max_context_len}")
