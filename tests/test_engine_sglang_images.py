"""Image content parts pass through our server to an SGLang-protocol engine serving a
vision-language model: `/generate` gets the rendered prompt as `text`, holding the model's image
placeholder once per image, and the images as `image_data` data URLs in the same order. Text-only
models (the embedded engine's SGLang endpoints) refuse images with a clear 400, at our server and
at `/generate` itself.

Real parts: our OpenAI server over real HTTP, `--backend sglang` attached to a real HTTP server
that speaks SGLang's protocol and records the bodies it gets (it declares a tiny Qwen2-VL: a config
from transformers' `Qwen2VLConfig` and a tokenizer with Qwen2-VL's image placeholder tokens and a
chat template that renders `{"type": "image"}` parts as them; no hub, no weights needed by the
server side); the embedded engine's own SGLang endpoints for the text-only case.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from PIL import Image

from openclaw.engines.base import GenerationRequest
from openclaw.engines.sglang_backend import SGLangEngine
from openclaw.engines.sglang_protocol import request_to_body
from openclaw.server import EngineConfig, ServerConfig, create_app, serve_in_background

PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"
QWEN2_VL_STYLE_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}" + PLACEHOLDER + "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def tiny_vl_path(tiny_model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen2-VL's config and tokenizer (SmolLM2's vocabulary plus Qwen2-VL's three vision
    tokens), built offline."""
    from transformers import AutoTokenizer, Qwen2VLConfig

    out = tmp_path_factory.mktemp("tiny-qwen2-vl")
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    tok.add_special_tokens({"additional_special_tokens": ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>"]})
    start, end, pad = tok.convert_tokens_to_ids(["<|vision_start|>", "<|vision_end|>", "<|image_pad|>"])
    tok.chat_template = QWEN2_VL_STYLE_TEMPLATE
    tok.save_pretrained(out)
    Qwen2VLConfig(text_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, vocab_size=len(tok), bos_token_id=tok.bos_token_id,
                                   eos_token_id=tok.eos_token_id),
                  vision_config=dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2),
                  image_token_id=pad, video_token_id=pad, vision_start_token_id=start,
                  vision_end_token_id=end).save_pretrained(out)
    return out


def recording_sglang(model_path: Path, reply: str, vision: bool = True) -> tuple[FastAPI, list[dict[str, Any]]]:
    """An HTTP server speaking SGLang's protocol (the endpoints our SGLang backend calls) that
    records every `/generate` body and answers `reply` (non-streaming or as SSE)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_path)
    out_ids = tok.encode(reply, add_special_tokens=False) + [tok.eos_token_id]
    bodies: list[dict[str, Any]] = []
    app = FastAPI()

    @app.get("/get_model_info")
    def model_info() -> dict[str, Any]:
        return {"model_path": str(model_path), "tokenizer_path": str(model_path), "is_generation": True,
                "weight_version": "default", "has_image_understanding": vision, "has_audio_understanding": False,
                "model_type": "qwen2_vl", "architectures": ["Qwen2VLForConditionalGeneration"]}

    @app.get("/get_server_info")
    def server_info() -> dict[str, Any]:
        return {"context_length": 4096}

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {}

    @app.post("/generate")
    async def generate(request: Request):
        body = await request.json()
        bodies.append(body)
        meta = {"id": body.get("rid", "r"), "finish_reason": {"type": "stop", "matched": tok.eos_token_id},
                "prompt_tokens": 100, "completion_tokens": len(out_ids), "cached_tokens": 0,
                "weight_version": "default"}
        if body.get("return_logprob"):
            meta["output_token_logprobs"] = [[-0.5, t, None] for t in out_ids]
            meta["input_token_logprobs"] = []
        item = {"text": reply, "output_ids": out_ids, "meta_info": meta}
        if not body.get("stream"):
            return JSONResponse(item)

        def sse():
            yield f"data: {json.dumps(item)}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(sse(), media_type="text/event-stream")

    return app, bodies


def png(color: tuple[int, int, int], size: tuple[int, int] = (16, 8)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def chat(base_url: str, messages: list[dict[str, Any]], **extra: Any) -> httpx.Response:
    return httpx.post(base_url + "/v1/chat/completions", timeout=60,
                      json={"model": "vl", "messages": messages, "max_tokens": 8, "temperature": 0, **extra})


@pytest.fixture(scope="module")
def vl_front(tiny_vl_path: Path):
    app, bodies = recording_sglang(tiny_vl_path, 'click("e6")')
    with serve_in_background(app) as engine_srv:
        cfg = ServerConfig(engine=EngineConfig(backend="sglang", engine_url=engine_srv.base_url))
        with serve_in_background(create_app(cfg)) as front:
            yield front, bodies


def test_images_reach_generate_as_image_data_with_placeholders(vl_front):
    front, bodies = vl_front
    red, blue = png((255, 0, 0)), png((0, 0, 255), (8, 16))
    messages = [{"role": "system", "content": "You act on web pages."},
                {"role": "user", "content": [{"type": "text", "text": "Before:"},
                                             {"type": "image_url", "image_url": {"url": data_url(red)}},
                                             {"type": "text", "text": "After:"},
                                             {"type": "image_url", "image_url": {"url": data_url(blue)}}]}]
    bodies.clear()
    r = chat(front.base_url, messages)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == 'click("e6")'
    (body,) = bodies
    assert "input_ids" not in body  # SGLang expands placeholders in the text itself
    text = body["text"]
    assert text.count(PLACEHOLDER) == 2
    assert text.index("Before:") < text.index(PLACEHOLDER) < text.index("After:") < text.rindex(PLACEHOLDER)
    assert text.startswith("<|im_start|>system\nYou act on web pages.<|im_end|>")
    assert text.endswith("<|im_start|>assistant\n")
    # The images, in prompt order, byte for byte what the client sent.
    assert [base64.b64decode(u.split(",", 1)[1]) for u in body["image_data"]] == [red, blue]
    assert all(u.startswith("data:image/png;base64,") for u in body["image_data"])


def test_streaming_and_multi_turn_keep_every_image(vl_front):
    front, bodies = vl_front
    first, second = png((0, 255, 0)), png((9, 9, 9))
    messages = [{"role": "user", "content": [{"type": "text", "text": "Page 1"},
                                             {"type": "image_url", "image_url": {"url": data_url(first)}}]},
                {"role": "assistant", "content": 'click("e6")'},
                {"role": "user", "content": [{"type": "text", "text": "Page 2"},
                                             {"type": "image_url", "image_url": {"url": data_url(second)}}]}]
    bodies.clear()
    with httpx.stream("POST", front.base_url + "/v1/chat/completions", timeout=60,
                      json={"model": "vl", "messages": messages, "max_tokens": 8, "stream": True}) as r:
        assert r.status_code == 200
        chunks = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: {")]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == 'click("e6")'
    (body,) = bodies
    assert body["stream"] is True and body["text"].count(PLACEHOLDER) == 2
    assert [base64.b64decode(u.split(",", 1)[1]) for u in body["image_data"]] == [first, second]


def test_remote_image_urls_are_refused_before_the_engine(vl_front):
    front, bodies = vl_front
    bodies.clear()
    r = chat(front.base_url, [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://127.0.0.1:9/x.png"}}]}])
    assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_image_url"
    assert bodies == []


def test_text_only_models_refuse_images(tiny_model_path: Path, tiny_vl_path: Path):
    from openclaw.engines import serve
    from openclaw.engines.hf_engine import HFEngine

    image_msg = [{"role": "user", "content": [{"type": "text", "text": "hi"},
                                              {"type": "image_url", "image_url": {"url": data_url(png((1, 2, 3)))}}]}]
    with serve_in_background(serve.create_app(HFEngine.load(str(tiny_model_path)))) as standin:
        # The embedded engine's SGLang endpoints: image_data is an error, never dropped.
        r = httpx.post(standin.base_url + "/generate", timeout=60, json={
            "text": "hi", "image_data": [data_url(png((1, 2, 3)))], "sampling_params": {"max_new_tokens": 2}})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert err["param"] == "image_data" and "reads text only" in err["message"]
        ok = httpx.post(standin.base_url + "/generate", timeout=60,
                        json={"text": "hi", "image_data": [], "sampling_params": {"max_new_tokens": 2}})
        assert ok.status_code == 200
        # Our server in front of it: the OpenAI-shaped 400 before anything reaches /generate.
        cfg = ServerConfig(engine=EngineConfig(backend="sglang", engine_url=standin.base_url))
        with serve_in_background(create_app(cfg)) as front:
            r = chat(front.base_url, image_msg)
            assert r.status_code == 400 and r.json()["error"]["code"] == "image_input_not_supported"
    # A VL config whose server does not report has_image_understanding is refused as well.
    app, bodies = recording_sglang(tiny_vl_path, "x", vision=False)
    with serve_in_background(app) as engine_srv:
        cfg = ServerConfig(engine=EngineConfig(backend="sglang", engine_url=engine_srv.base_url))
        with serve_in_background(create_app(cfg)) as front:
            r = chat(front.base_url, image_msg)
            assert r.status_code == 400 and r.json()["error"]["code"] == "image_input_not_supported"
    assert bodies == []


def test_request_body_and_engine_guard(tiny_model_path: Path):
    plain = GenerationRequest(input_ids=(1, 2, 3))
    assert request_to_body(plain)["input_ids"] == [1, 2, 3] and "image_data" not in request_to_body(plain)
    img = GenerationRequest(input_ids=(1, 2, 3), text="<image> hi", image_data=("data:image/png;base64,AA==",))
    body = request_to_body(img)
    assert body["text"] == "<image> hi" and body["image_data"] == ["data:image/png;base64,AA=="]
    assert "input_ids" not in body
    with pytest.raises(ValueError, match="rendered prompt text"):
        request_to_body(GenerationRequest(input_ids=(1,), image_data=("data:image/png;base64,AA==",)))
    from transformers import AutoTokenizer

    engine = SGLangEngine("http://127.0.0.1:9", tokenizer=AutoTokenizer.from_pretrained(tiny_model_path),
                          model_path=str(tiny_model_path), max_context_len=4096)
    with pytest.raises(ValueError, match="does not take images"):
        engine.validate(img)


@pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="chromium not installed")
def test_gui_agent_vision_policy_sends_the_page_screenshot(vl_front):
    """gui-rl's vision policy on a real MiniWoB++ page: the screenshot of the page reaches
    `/generate` as image_data, byte for byte, and the reply acts on the page (the recording engine
    answers the right click, as a VL model would)."""
    pytest.importorskip("playwright")
    import importlib

    from slime.utils.plugins import load_plugin_module

    load_plugin_module("gui-rl/gui_env.py")  # puts gui-rl/ on the path, as the trainer does
    gui_env = importlib.import_module("gui_env")
    gui_model_policy = importlib.import_module("gui_model_policy")
    front, bodies = vl_front
    pool = gui_env.BrowserPool(1)
    try:
        with pool.env_sync() as env:
            obs = env.reset("click-button", 1_000_000)
            assert 'button "Okay" [ref=e6]' in obs.axtree  # the id the recorded reply clicks
            policy = gui_model_policy.ChatModelPolicy(base_url=front.base_url + "/v1", model="vl", vision=True)
            policy.reset(obs)
            bodies.clear()
            action = policy.act(obs)
            (body,) = bodies
            assert [base64.b64decode(u.split(",", 1)[1]) for u in body["image_data"]] == [obs.screenshot]
            assert body["text"].count(PLACEHOLDER) == 1 and obs.goal in body["text"]
            result = env.step(action)
            assert (action.render(), result.reward, result.done) == ("click('e6')", 1.0, True)
    finally:
        pool.close()
