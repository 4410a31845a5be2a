"""With no model flags the server serves the embedded SmolLM2-135M-Instruct; the official
`openai` SDK (sync, async, stream=True, and the stream() helper) gets the right answer."""

from __future__ import annotations

import openai
import pytest

from openclaw.server import ServerConfig, create_app, serve_in_background

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


@pytest.fixture(scope="module")
def server(embedded_model_path):
    with serve_in_background(create_app(ServerConfig())) as srv:  # no model path: the embedded default
        yield srv


def test_default_model_is_embedded_smollm2(server, embedded_model_path):
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    (model,) = client.models.list().data
    assert model.id == "SmolLM2-135M-Instruct"
    assert server.app.state.openclaw.engine.model_path == str(embedded_model_path)


def test_sync_greedy_answer(server):
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    r = client.chat.completions.create(model="SmolLM2-135M-Instruct", messages=QUESTION, temperature=0,
                                       max_tokens=30)
    assert "Paris" in r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"  # the model ended its turn (<|im_end|>)


async def test_async_greedy_answer(server):
    client = openai.AsyncOpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    r = await client.chat.completions.create(model="SmolLM2-135M-Instruct", messages=QUESTION, temperature=0,
                                             max_tokens=30)
    assert "Paris" in r.choices[0].message.content
    await client.close()


def test_streaming_answer_arrives_in_several_chunks(server):
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    stream = client.chat.completions.create(model="SmolLM2-135M-Instruct", messages=QUESTION, temperature=0,
                                            max_tokens=30, stream=True)
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) >= 3 and "Paris" in "".join(pieces)


def test_stream_helper_answer(server):
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="x", max_retries=0)
    with client.chat.completions.stream(model="SmolLM2-135M-Instruct", messages=QUESTION, temperature=0,
                                        max_tokens=30) as stream:
        deltas = [e.delta for e in stream if e.type == "content.delta"]
        final = stream.get_final_completion()
    assert "Paris" in final.choices[0].message.content and "".join(deltas) == final.choices[0].message.content
