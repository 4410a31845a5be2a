"""`--backend sglang --engine-url URL`: the OpenAI server in front of an SGLang-API engine server
(here the embedded engine's own SGLang endpoints, as on CPU-only machines), and clear refusals."""

from __future__ import annotations

import openai
import pytest

from openclaw.server import (
    ConfigError,
    EngineConfig,
    ServerConfig,
    create_app,
    parse_config,
    serve_in_background,
)
from openclaw.server.engine_loader import load_engine

HI = [{"role": "user", "content": "Say something."}]


def test_openai_server_over_sglang_api(tiny_model_path):
    from openclaw.engines import serve
    from openclaw.engines.hf_engine import HFEngine

    direct_cfg = ServerConfig(engine=EngineConfig(model_path=str(tiny_model_path)))
    with serve_in_background(serve.create_app(HFEngine.load(str(tiny_model_path)))) as sglang_like, \
            serve_in_background(create_app(direct_cfg)) as direct:
        cfg = ServerConfig(engine=EngineConfig(backend="sglang", engine_url=sglang_like.base_url))
        with serve_in_background(create_app(cfg)) as front:
            via = openai.OpenAI(base_url=front.base_url + "/v1", api_key="x", max_retries=0)
            ref = openai.OpenAI(base_url=direct.base_url + "/v1", api_key="x", max_retries=0)
            args = dict(model="m", messages=HI, temperature=0, max_tokens=8)
            expected = ref.chat.completions.create(**args)
            got = via.chat.completions.create(**args)
            assert got.choices[0].message.content == expected.choices[0].message.content
            assert got.usage.prompt_tokens == expected.usage.prompt_tokens
            streamed = "".join(c.choices[0].delta.content or "" for c in
                               via.chat.completions.create(**args, stream=True) if c.choices)
            assert streamed == expected.choices[0].message.content


def test_unavailable_backends_fail_clearly(tmp_path):
    with pytest.raises(ConfigError, match="--engine-url"):
        load_engine(parse_config(["--backend", "vllm"], env={}).engine)
    with pytest.raises(ConfigError, match="does not exist"):
        load_engine(parse_config(["--model-path", str(tmp_path / "nope")], env={}).engine)
