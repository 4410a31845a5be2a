"""Image content parts (`{"type": "image_url", "image_url": {"url": "data:image/png;base64,..."}}`).

Promise: a model that takes images gets them decoded and checked (a data URL of a real PNG, JPEG,
GIF or WebP; remote URLs are refused, the server fetches nothing); a text-only model refuses any
image with a 400 in OpenAI's error shape, instead of silently answering without it.

A served model takes images when its HF config has a `vision_config` (Qwen-VL, LLaVA, ... as
SGLang serves them) AND its engine declares `accepts_images = True`; the embedded CPU engines
serve text-only models, so for them images are always refused.
"""

from __future__ import annotations

import base64
import binascii
import functools
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openclaw.server.errors import OpenAIError
from openclaw.server.protocol import ImagePart, Message

MAX_IMAGE_BYTES = 20 * 1024 * 1024
_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}


@dataclass(frozen=True)
class DecodedImage:
    mime: str
    data: bytes
    width: int
    height: int


@functools.lru_cache(maxsize=8)
def config_has_vision(model_path: str) -> bool:
    """Whether the HF config of a model folder describes a vision tower."""
    config = Path(model_path) / "config.json"
    if not config.is_file():
        return False
    return "vision_config" in json.loads(config.read_text())


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
