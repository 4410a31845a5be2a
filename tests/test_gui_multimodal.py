"""Image content parts: a text-only model refuses them with a 400 in OpenAI's error shape (real
server over real HTTP, tiny model); a model that takes images gets them decoded and checked."""

from __future__ import annotations

import base64
import io
import json
from types import SimpleNamespace

import httpx
import pytest
from PIL import Image

from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background
from openclaw.server.errors import OpenAIError
from openclaw.server.multimodal import check_image_parts, config_has_vision, takes_images
from openclaw.server.protocol import ChatCompletionRequest


def png_data_url(size: tuple[int, int] = (16, 8)) -> str:
    buf = io.BytesIO()
    Image.new("RGB", size, (255, 255, 0)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def image_message(url: str) -> list[dict]:
    return [{"role": "user", "content": [{"type": "text", "text": "What is on the page?"},
                                         {"type": "image_url", "image_url": {"url": url}}]}]


@pytest.fixture(scope="module")
def server(tiny_model_path):
    with serve_in_background(create_app(ServerConfig(engine=EngineConfig(model_path=str(tiny_model_path))))) as srv:
        yield srv


def test_text_only_model_refuses_images_with_openai_400(server):
    r = httpx.post(server.base_url + "/v1/chat/completions", timeout=60,
                   json={"model": "tiny", "messages": image_message(png_data_url()), "max_tokens": 2})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["type"] == "invalid_request_error" and err["code"] == "image_input_not_supported"
    assert err["param"] == "messages[0].content[1]" and "text-only" in err["message"]
    ok = httpx.post(server.base_url + "/v1/chat/completions", timeout=60, json={
        "model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})
    assert ok.status_code == 200


def messages(url: str) -> list:
    return ChatCompletionRequest.model_validate({"messages": image_message(url)}).messages


def test_model_that_takes_images_gets_them_decoded():
    images = check_image_parts(messages(png_data_url((16, 8))), images_ok=True, model="vl")
    assert [(i.mime, i.width, i.height) for i in images] == [("image/png", 16, 8)]
    assert images[0].data.startswith(b"\x89PNG")


@pytest.mark.parametrize("url, code", [
    ("https://example.com/a.png", "invalid_image_url"),  # nothing is fetched
    ("data:image/png;base64,@@@", "invalid_image_url"),
    ("data:image/png;base64," + base64.b64encode(b"not an image").decode(), "invalid_image"),
])
def test_bad_images_are_400s(url, code):
    with pytest.raises(OpenAIError) as exc:
        check_image_parts(messages(url), images_ok=True, model="vl")
    assert exc.value.status == 400 and exc.value.code == code and exc.value.param == "messages[0].content[1]"


def test_which_models_take_images(tmp_path, tiny_model_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen2_vl", "vision_config": {"depth": 2}}))
    assert config_has_vision(str(tmp_path)) and not config_has_vision(str(tiny_model_path))
    # The model must have a vision tower AND its engine must take pixels.
    assert takes_images(SimpleNamespace(accepts_images=True, model_path=tmp_path))
    assert not takes_images(SimpleNamespace(accepts_images=False, model_path=tmp_path))
    assert not takes_images(SimpleNamespace(accepts_images=True, model_path=tiny_model_path))
