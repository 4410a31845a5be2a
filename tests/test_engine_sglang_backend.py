"""SGLang backend: launch-command construction, and SGLangEngine driving the embedded engine's
SGLang endpoints over real HTTP (the CI stand-in for a GPU SGLang server)."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import sys

import pytest

from openclaw.engines.base import GenerationRequest, GenerationResult, SamplingParams, TokenEvent
from openclaw.engines.hf_engine import HFEngine
from openclaw.engines.serve import create_app, serve_in_thread
from openclaw.engines.sglang_backend import (
    BackendUnavailable,
    SGLangEngine,
    SGLangLaunchConfig,
    _free_port,
    build_router_command,
    build_sglang_launch_command,
    load_engine,
)
from openclaw.engines.vllm_backend import completions_body


def test_launch_command_maps_every_flag():
    cfg = SGLangLaunchConfig(model_path="/models/qwen3-8b", host="0.0.0.0", port=30001, tp_size=4, dp_size=2,
                             mem_fraction_static=0.85, context_length=32768, reasoning_parser="qwen3",
                             tool_call_parser="qwen25", served_model_name="qwen3-8b", dtype="bf16",
                             trust_remote_code=True, extra_args=("--enable-metrics",), python="python3")
    cmd = build_sglang_launch_command(cfg)
    assert cmd[:3] == ["python3", "-m", "sglang.launch_server"]

    def flag(name):
        return cmd[cmd.index(name) + 1]

    assert flag("--model-path") == "/models/qwen3-8b" and flag("--host") == "0.0.0.0" and flag("--port") == "30001"
    assert flag("--tp-size") == "4" and flag("--dp-size") == "2" and flag("--mem-fraction-static") == "0.85"
    assert flag("--context-length") == "32768" and flag("--reasoning-parser") == "qwen3"
    assert flag("--tool-call-parser") == "qwen25" and flag("--served-model-name") == "qwen3-8b"
    assert flag("--dtype") == "bfloat16" and flag("--weight-version") == "0"
    assert "--trust-remote-code" in cmd and cmd[-1] == "--enable-metrics"


def test_launch_command_minimal_and_invalid():
    cmd = build_sglang_launch_command(SGLangLaunchConfig(model_path="m"))
    for absent in ("--mem-fraction-static", "--context-length", "--reasoning-parser", "--tool-call-parser",
                   "--dtype", "--dp-size", "--trust-remote-code"):
        assert absent not in cmd
    assert cmd[cmd.index("--tp-size") + 1] == "1" and cmd[cmd.index("--host") + 1] == "127.0.0.1"
    with pytest.raises(ValueError, match="mem_fraction_static"):
        build_sglang_launch_command(SGLangLaunchConfig(model_path="m", mem_fraction_static=1.5))
    with pytest.raises(ValueError, match="dtype"):
        build_sglang_launch_command(SGLangLaunchConfig(model_path="m", dtype="int3"))
    with pytest.raises(ValueError, match="tp_size"):
        build_sglang_launch_command(SGLangLaunchConfig(model_path="m", tp_size=0))


def test_router_command():
    cmd = build_router_command(["http://a:1", "http://b:2"], port=31000, policy="cache_aware", python="py")
    assert cmd[:3] == ["py", "-m", "sglang_router.launch_router"]
    i = cmd.index("--worker-urls")
    assert cmd[i + 1:i + 3] == ["http://a:1", "http://b:2"]
    assert cmd[cmd.index("--port") + 1] == "31000" and cmd[cmd.index("--policy") + 1] == "cache_aware"
    with pytest.raises(ValueError):
        build_router_command([])


@pytest.mark.skipif(importlib.util.find_spec("sglang") is not None, reason="sglang is installed here")
def test_launch_without_sglang_fails_clearly(tiny_model_path):
    with pytest.raises(BackendUnavailable, match="requirements-gpu.txt.*--engine-url"):
        load_engine("sglang", model_path=str(tiny_model_path))


def test_vllm_needs_a_url():
    with pytest.raises(BackendUnavailable, match="--engine-url"):
        load_engine("vllm", model_path="m")


def test_vllm_completions_body():
    req = GenerationRequest((1, 2), SamplingParams(max_new_tokens=5, temperature=0.5, top_k=3, stop=("x",), seed=4,
                                                   no_stop_trim=True), return_logprob=True, top_logprobs_num=2)
    body = completions_body(req, "m", stream=True)
    assert body["prompt"] == [1, 2] and body["max_tokens"] == 5 and body["top_k"] == 3 and body["seed"] == 4
    assert body["logprobs"] == 2 and body["return_tokens_as_token_ids"] and body["include_stop_str_in_output"]


@pytest.fixture(scope="module")
def embedded_server(tiny_model_path):
    engine = HFEngine.load(str(tiny_model_path), max_batch_size=8)
    with serve_in_thread(create_app(engine)) as url:
        yield engine, url


async def test_sglang_engine_matches_embedded_engine(embedded_server):
    local, url = embedded_server
    remote = SGLangEngine.attach(url)
    try:
        assert remote.model_path == local.model_path and remote.max_context_len == local.max_context_len
        req = GenerationRequest(tuple(local.tokenizer.encode("The quick brown fox")),
                                SamplingParams(max_new_tokens=8, temperature=0, ignore_eos=True),
                                return_logprob=True, top_logprobs_num=2)
        direct = await local.generate(req)
        events, result = [], None
        async for item in remote.stream(req):
            if isinstance(item, TokenEvent):
                events.append(item)
            else:
                result = item
        assert isinstance(result, GenerationResult)
        assert [e.token_id for e in events] == list(direct.output_ids) == list(result.output_ids)
        assert result.output_logprobs == pytest.approx(direct.output_logprobs, abs=1e-6)
        assert "".join(e.text_delta for e in events) == direct.text == result.text
        assert len(result.output_top_logprobs) == 8 and len(result.output_top_logprobs[0]) == 2
        non_stream = await remote.generate(req)
        assert non_stream.output_ids == direct.output_ids and non_stream.finish_reason == direct.finish_reason
        scoring = GenerationRequest(req.input_ids, SamplingParams(max_new_tokens=0), return_logprob=True,
                                    logprob_start_len=0)
        scored_remote, scored_local = await remote.generate(scoring), await local.generate(scoring)
        assert scored_remote.input_logprobs[0] is None
        assert scored_remote.input_logprobs[1:] == pytest.approx(scored_local.input_logprobs[1:], abs=1e-6)
        with pytest.raises(ValueError, match="context length"):
            await remote.generate(GenerationRequest((1,) * remote.max_context_len))
    finally:
        await remote.shutdown()


async def test_sglang_engine_weight_update_and_control(embedded_server, tiny_model_path, tiny_model_path_alt):
    local, url = embedded_server
    remote = SGLangEngine.attach(url)
    try:
        req = GenerationRequest((3, 4, 5), SamplingParams(max_new_tokens=6, temperature=0, ignore_eos=True))
        before = await remote.generate(req)
        v = remote.weight_version
        ok, msg = await remote.update_weights_from_disk(str(tiny_model_path_alt))
        assert ok, msg
        assert remote.weight_version == local.weight_version == v + 1
        after = await remote.generate(req)
        assert after.output_ids != before.output_ids and after.weight_version == v + 1
        ok, msg = await remote.update_weights_from_disk("/no/such/checkpoint")
        assert not ok and "/no/such/checkpoint" in msg
        ok, _ = await remote.update_weights_from_disk(str(tiny_model_path))
        assert ok and (await remote.generate(req)).output_ids == before.output_ids
        await remote.pause_generation()
        assert local.is_paused
        task = asyncio.create_task(remote.generate(req))
        deadline = asyncio.get_running_loop().time() + 30
        while local.num_pending() == 0:
            assert asyncio.get_running_loop().time() < deadline, "request never reached the engine"
            await asyncio.sleep(0.01)
        assert await remote.flush_cache() is True  # paused: nothing runs, nothing to flush
        await remote.continue_generation()
        assert (await asyncio.wait_for(task, 60)).output_ids == before.output_ids
        assert await remote.flush_cache() is True
        long_req = GenerationRequest((1, 2), SamplingParams(max_new_tokens=5000, ignore_eos=True), request_id="long")
        agen = remote.stream(long_req)
        assert isinstance(await agen.__anext__(), TokenEvent)
        assert await remote.flush_cache() is False  # generating: refused, callers retry
        await remote.abort("long")
        items = [item async for item in agen]
        assert items[-1].finish_reason.type == "abort"
    finally:
        await remote.shutdown()


async def test_sglang_engine_launch_owns_and_stops_its_process(tiny_model_path):
    """launch() with a custom command exercises the same process ownership as for SGLang."""
    port = _free_port()
    cfg = SGLangLaunchConfig(model_path=str(tiny_model_path), port=port)
    cmd = [sys.executable, "-m", "openclaw.engines.serve", "--model-path", str(tiny_model_path), "--port", str(port)]
    engine = await asyncio.to_thread(SGLangEngine.launch, cfg, startup_timeout=180, launch_command=cmd,
                                     env=dict(os.environ, OMP_NUM_THREADS="1"))
    pid = engine.pid
    try:
        res = await engine.generate(GenerationRequest((1, 2), SamplingParams(max_new_tokens=3, temperature=0,
                                                                             ignore_eos=True)))
        assert len(res.output_ids) == 3
    finally:
        await engine.shutdown()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_launch_failure_reports_log(tiny_model_path):
    cfg = SGLangLaunchConfig(model_path=str(tiny_model_path), port=_free_port())
    cmd = [sys.executable, "-c", "import sys; print('boom: bad flag'); sys.exit(3)"]
    with pytest.raises(BackendUnavailable, match="(?s)exited with code 3.*boom: bad flag"):
        SGLangEngine.launch(cfg, startup_timeout=60, launch_command=cmd)


def test_attach_to_nothing_fails_clearly():
    from openclaw.engines.sglang_client import SGLangClientError
    from openclaw.engines.vllm_backend import VLLMEngine

    dead = f"http://127.0.0.1:{_free_port()}"
    with pytest.raises(SGLangClientError, match="no SGLang server answers"):
        SGLangEngine.attach(dead, health_timeout=0.3)
    with pytest.raises(RuntimeError, match="vllm serve"):
        VLLMEngine.attach(dead)
