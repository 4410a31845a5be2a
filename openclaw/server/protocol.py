"""Request models for `POST /v1/chat/completions` (pydantic v2), OpenAI's field names and limits.

Unknown top-level fields are ignored (clients send vendor extras); unknown roles, content part
types and malformed values are rejected so the server answers 400 naming the field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from openclaw.engines.base import SEED_MAX, SEED_MIN


def _not_bool(value: Any) -> Any:
    # pydantic's lax mode reads true as 1; OpenAI refuses a boolean where a number belongs, and so do we.
    if isinstance(value, bool):
        raise ValueError("expected a number, not a boolean")
    return value


Int = Annotated[int, BeforeValidator(_not_bool)]
Num = Annotated[float, BeforeValidator(_not_bool)]
# The seeds the engines accept (torch.Generator's range); outside it a seed is a 400 up front, not
# an error inside a shared batch.


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ImageURL(_Strict):
    url: str
    detail: str | None = None


class TextPart(_Strict):
    type: Literal["text", "input_text"]
    text: str


class ImagePart(_Strict):
    type: Literal["image_url"]
    image_url: ImageURL | str


class AudioPart(_Strict):
    type: Literal["input_audio"]
    input_audio: dict[str, Any]


class FilePart(_Strict):
    type: Literal["file"]
    file: dict[str, Any]


class RefusalPart(_Strict):
    type: Literal["refusal"]
    refusal: str


ContentPart = Annotated[TextPart | ImagePart | AudioPart | FilePart | RefusalPart, Field(discriminator="type")]
Content = str | list[ContentPart]


class FunctionCall(_Strict):
    name: str
    arguments: str | dict[str, Any] = "{}"


class ToolCall(_Strict):
    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class Message(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: Content | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None

    @model_validator(mode="after")
    def _content_rules(self) -> Message:
        if self.role in ("system", "developer", "user") and self.content is None:
            raise ValueError(f"a '{self.role}' message needs 'content'")
        if self.role == "assistant" and self.content is None and not self.tool_calls:
            # OpenAI accepts an empty assistant turn only with tool_calls; be lenient: treat as "".
            self.content = ""
        if self.role in ("tool", "function") and self.content is None:
            raise ValueError(f"a '{self.role}' message needs 'content'")
        return self


class FunctionDef(_Strict):
    name: str = Field(pattern=r"^[a-zA-Z0-9_.\-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class Tool(_Strict):
    type: Literal["function"]
    function: FunctionDef


class NamedFunction(_Strict):
    name: str


class NamedToolChoice(_Strict):
    type: Literal["function"]
    function: NamedFunction


class StreamOptions(_Strict):
    include_usage: bool = False


class ChatCompletionRequest(_Strict):
    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    temperature: Num | None = Field(default=None, ge=0.0, le=2.0)
    top_p: Num | None = Field(default=None, gt=0.0, le=1.0)
    top_k: Int | None = Field(default=None, ge=-1)  # extension (SGLang/vLLM); -1 disables
    max_tokens: Int | None = Field(default=None, ge=1)
    max_completion_tokens: Int | None = Field(default=None, ge=1)
    stop: str | list[str] | None = None
    seed: Int | None = Field(default=None, ge=SEED_MIN, le=SEED_MAX)
    n: Int = 1  # one choice per request (n>1 is rejected with 400)
    stream: bool = False
    stream_options: StreamOptions | None = None
    logprobs: bool = False
    top_logprobs: Int | None = Field(default=None, ge=0, le=20)
    tools: list[Tool] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool | None = None
    user: str | None = None

    @field_validator("n")
    @classmethod
    def _one_choice(cls, v: int) -> int:
        if v != 1:
            raise ValueError("only n=1 is supported (send parallel requests for more samples)")
        return v

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, v: str | list[str] | None) -> str | list[str] | None:
        if isinstance(v, list):
            if len(v) > 16:
                raise ValueError("at most 16 stop sequences")
            if any(s == "" for s in v):
                raise ValueError("stop sequences must be non-empty")
        return v

    @model_validator(mode="after")
    def _cross_field(self) -> ChatCompletionRequest:
        if self.top_logprobs and not self.logprobs:
            raise ValueError("'top_logprobs' requires 'logprobs' to be true")
        if isinstance(self.tool_choice, NamedToolChoice) or self.tool_choice == "required":
            if not self.tools:
                raise ValueError("'tool_choice' other than 'none'/'auto' requires 'tools'")
        if isinstance(self.tool_choice, NamedToolChoice):
            names = {t.function.name for t in self.tools or ()}
            if self.tool_choice.function.name not in names:
                raise ValueError(f"tool_choice names function {self.tool_choice.function.name!r}, "
                                 f"which is not in 'tools'")
        return self

    def stop_list(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def requested_max_tokens(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens
