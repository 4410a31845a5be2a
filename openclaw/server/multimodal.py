"""Image content parts (`{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`).

Promise: a model that takes images gets them decoded, checked (a data URL of a real PNG, JPEG,
GIF or WebP; remote URLs are refused, the server fetches nothing) and passed on to its engine; a
text-only model refuses any image with a 400 in OpenAI's error shape, instead of silently
answering without it.

A served model takes images when its HF config has a `vision_config` (Qwen-VL, LLaVA, ... as
SGLang serves them) AND its engine declares `accepts_images = True` (the SGLang backend does when
the server's `/get_model_info` reports `has_image_understanding`); the embedded CPU engines serve
text-only models, so for them images are always refused.

Pass-through (SGLang): the chat template renders each image part as the model's placeholder
(Qwen2-VL: `<|vision_start|><|image_pad|><|vision_end|>`); the engine request carries that prompt
as text plus the images as data URLs in the same order (`GenerationRequest.text`/`image_data`,
sent to `/generate` as `text` + `image_data`), and SGLang expands each placeholder into the
image's patch tokens. Our token counts (context check, usage) see the unexpanded placeholders.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openclaw.engines.base import GenerationRequest
from openclaw.server.errors import OpenAIError
from openclaw.server.prompting import RenderedPrompt, flatten_content
from openclaw.server.protocol import ImagePart, Message, TextPart

MAX_IMAGE_BYTES = 20 * 1024 * 1024
_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


@dataclass(frozen=True)
class DecodedImage:
    mime: str
    data: bytes
    width: int
    height: int


@functools.lru_cache(maxsize=8)
def model_config(model_path: str) -> dict[str, Any]:
    """The HF config.json of a model folder, or of a hub id already in the local cache ({} if
    neither: nothing is downloaded here)."""
    config = Path(model_path) / "config.json"
    if not config.is_file():
        from huggingface_hub import try_to_load_from_cache

        if Path(model_path).is_absolute() or model_path.startswith(".") or model_path.count("/") != 1:
            return {}  # a local path without a config, not a hub id
        try:
            cached = try_to_load_from_cache(model_path, "config.json")
        except ValueError:  # not a valid repo id
            return {}
        if not isinstance(cached, str):
            return {}
        config = Path(cached)
    return json.loads(config.read_text())


def config_has_vision(model_path: str) -> bool:
    """Whether the HF config of a model describes a vision tower."""
    return "vision_config" in model_config(model_path)


def takes_images(engine: Any) -> bool:
    return bool(getattr(engine, "accepts_images", False)) and config_has_vision(str(engine.model_path))


def _image_url(part: ImagePart) -> str:
    return part.image_url if isinstance(part.image_url, str) else part.image_url.url


def decode_data_url(url: str, param: str) -> DecodedImage:
    from PIL import Image, UnidentifiedImageError

    if not url.startswith("data:"):
        raise OpenAIError(400, "Only data URLs (data:image/png;base64,...) are accepted for images: this "
                               "server fetches nothing from the network.", param=param, code="invalid_image_url")
    header, _, payload = url.partition(",")
    if not header.endswith(";base64"):
        raise OpenAIError(400, "Image data URLs must be base64-encoded.", param=param, code="invalid_image_url")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise OpenAIError(400, "The image data URL is not valid base64.", param=param, code="invalid_image_url") from None
    if len(data) > MAX_IMAGE_BYTES:
        raise OpenAIError(400, f"Image is larger than {MAX_IMAGE_BYTES} bytes.", param=param, code="image_too_large")
    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt, size = img.format, img.size
            img.verify()
    except (UnidentifiedImageError, OSError, SyntaxError):
        raise OpenAIError(400, "The image could not be decoded.", param=param, code="invalid_image") from None
    if fmt not in _FORMATS:
        raise OpenAIError(400, f"Unsupported image format {fmt}; use PNG, JPEG, GIF or WebP.", param=param,
                          code="invalid_image")
    return DecodedImage(_FORMATS[fmt], data, size[0], size[1])


def check_image_parts(messages: list[Message], images_ok: bool, model: str) -> list[DecodedImage]:
    """The request's images, decoded; a 400 if the model is text-only or an image is bad."""
    images: list[DecodedImage] = []
    for i, message in enumerate(messages):
        if isinstance(message.content, str) or message.content is None:
            continue
        for j, part in enumerate(message.content):
            if not isinstance(part, ImagePart):
                continue
            param = f"messages[{i}].content[{j}]"
            if not images_ok:
                raise OpenAIError(400, f"The model '{model}' does not accept image input (it is text-only); "
                                       "send text, or serve a vision-language model.", param=param,
                                  code="image_input_not_supported")
            images.append(decode_data_url(_image_url(part), param))
    return images


def data_url(image: DecodedImage) -> str:
    return f"data:{image.mime};base64," + base64.b64encode(image.data).decode("ascii")


def messages_with_image_parts(messages: list[Message], normalized: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`normalized` (normalize_messages' output, one per message) with each message that holds an
    image given its content as parts again, `{"type": "image"}` where the image was: the form in
    which a vision-language model's chat template renders its image placeholder."""
    out = []
    for message, norm in zip(messages, normalized, strict=True):
        content = message.content
        if isinstance(content, str) or content is None or not any(isinstance(p, ImagePart) for p in content):
            out.append(norm)
            continue
        parts: list[dict[str, Any]] = []
        for part in content:
            if isinstance(part, ImagePart):
                parts.append({"type": "image"})
            elif isinstance(part, TextPart):
                parts.append({"type": "text", "text": part.text})
            else:  # audio/file/refusal: the same text as for a text-only model
                parts.append({"type": "text", "text": flatten_content([part])})
        out.append(dict(norm, content=parts))
    return out


def with_images(gen: GenerationRequest, prompt: RenderedPrompt, images: list[DecodedImage], model_path: str,
                trimmed: bool) -> GenerationRequest:
    """The engine request with its images: the rendered prompt text (placeholders in it) and the
    images as data URLs, in order. Refused: a prompt the server had to trim to fit the context
    (trimming drops whole messages, their images with them), and a template that did not render
    one placeholder per image (the engine would pair images and placeholders wrongly)."""
    if trimmed:
        raise OpenAIError(400, "This request has images and is longer than the model's context window; the "
                               "server does not trim requests with images (it would drop images). Send fewer "
                               "or shorter messages.", param="messages", code="context_length_exceeded")
    config = model_config(model_path)
    token_id = config.get("image_token_id", config.get("image_token_index"))
    if isinstance(token_id, int):
        found = prompt.input_ids.count(token_id)
        if found != len(images):
            raise OpenAIError(500, f"The model's chat template rendered {found} image placeholder(s) for "
                                   f"{len(images)} image(s); the images cannot be passed on.",
                              code="image_placeholder_mismatch")
    return dataclasses.replace(gen, text=prompt.text, image_data=tuple(data_url(i) for i in images))
