"""Trainer flags (parsed by the real slime parser) -> SGLang launch commands."""

from __future__ import annotations

import pytest
from slime.rollout.sglang_launch import plan_sglang_rollout
from slime.utils.arguments import parse_config


def _args(*flags: str):
    return parse_config(["--rollout-batch-size", "4", *flags], env={}).to_namespace()


def _value(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def test_two_engines_with_router_and_parsers():
    args = _args("--actor-num-gpus-per-node", "4", "--rollout-num-gpus", "4", "--rollout-num-gpus-per-engine", "2",
                 "--sglang-mem-fraction-static", "0.7", "--sglang-context-length", "8192",
                 "--sglang-reasoning-parser", "qwen3", "--sglang-tool-call-parser", "qwen25", "--bf16")
    plan = plan_sglang_rollout(args, "/models/qwen3-7b", base_port=31000, env={})
    assert len(plan.engines) == 2
    for i, engine in enumerate(plan.engines):
        cmd = engine.command
        assert cmd[1:3] == ["-m", "sglang.launch_server"]
        assert _value(cmd, "--model-path") == "/models/qwen3-7b"
        assert _value(cmd, "--tp-size") == "2"
        assert _value(cmd, "--port") == str(31000 + i)
        assert _value(cmd, "--mem-fraction-static") == "0.7"
        assert _value(cmd, "--context-length") == "8192"
        assert _value(cmd, "--reasoning-parser") == "qwen3"
        assert _value(cmd, "--tool-call-parser") == "qwen25"
        assert _value(cmd, "--dtype") == "bfloat16"  # same dtype as training
    # rollout GPUs follow the 4 training GPUs, two per engine
    assert [e.env["CUDA_VISIBLE_DEVICES"] for e in plan.engines] == ["4,5", "6,7"]
    router = plan.router_command
    assert router[1:3] == ["-m", "sglang_router.launch_router"]
    workers = router[router.index("--worker-urls") + 1 : router.index("--host")]
    assert workers == ["http://127.0.0.1:31000", "http://127.0.0.1:31001"]
    assert plan.entry_url == f"http://127.0.0.1:{_value(router, '--port')}"


def test_single_engine_no_router_rollout_gpus_env_and_passthrough():
    args = _args("--rollout-num-gpus", "1", "--sglang-enable-metrics", "--sglang-chunked-prefill-size", "4096")
    plan = plan_sglang_rollout(args, "/m", env={"ROLLOUT_GPUS": "6,7"})
    (engine,) = plan.engines
    assert plan.router_command is None and plan.entry_url == engine.url
    assert engine.env["CUDA_VISIBLE_DEVICES"] == "6"
    assert "--enable-metrics" in engine.command
    assert _value(engine.command, "--chunked-prefill-size") == "4096"
    assert "--dtype" not in engine.command  # fp32 training: SGLang keeps the checkpoint's dtype unless told


def test_existing_router_is_used_not_launched():
    args = _args("--rollout-num-gpus", "2", "--sglang-router-ip", "10.0.0.5", "--sglang-router-port", "8000")
    plan = plan_sglang_rollout(args, "/m", env={})
    assert plan.router_command is None
    assert plan.entry_url == "http://10.0.0.5:8000"


@pytest.mark.parametrize("flags, message", [
    (("--rollout-num-gpus", "3", "--rollout-num-gpus-per-engine", "2"), "not divisible"),
    (("--sglang-mem-fraction-static", "1.5"), "mem_fraction_static"),
    (("--sglang-tp-size", "2"), "--rollout-num-gpus-per-engine"),
    (("--sglang-context-length", "lots"), "invalid value"),
])
def test_bad_rollout_flags_are_errors(flags, message):
    with pytest.raises(ValueError, match=message):
        plan_sglang_rollout(_args(*flags), "/m", env={})


def test_rollout_gpus_env_too_short():
    with pytest.raises(ValueError, match="ROLLOUT_GPUS"):
        plan_sglang_rollout(_args("--rollout-num-gpus", "4"), "/m", env={"ROLLOUT_GPUS": "4,5"})


def test_planned_engine_launch_against_embedded_engine(tiny_model_path, tiny_model_path_alt):
    """The plan's launch path (a child process with the engine's CUDA_VISIBLE_DEVICES, stopped by
    PID), with the embedded engine's SGLang-compatible server standing in for sglang.launch_server;
    then generation and a weight update through the same client the trainer uses."""
    import sys
    from pathlib import Path

    from slime.ray.engine_process import free_port
    from slime.rollout.sglang_client import SyncSGLangClient
    from slime.rollout.sglang_launch import launch_planned_engines

    args = _args("--rollout-num-gpus", "1", "--sglang-context-length", "2048")
    plan = plan_sglang_rollout(args, str(tiny_model_path), base_port=free_port(), env={"ROLLOUT_GPUS": "3"})
    assert _value(plan.engines[0].command, "--context-length") == "2048"

    def embedded(engine):  # the runtime's engine, by command (a test may name it; slime never imports it)
        return [sys.executable, "-m", "openclaw.engines.serve", "--model-path", engine.config.model_path,
                "--host", engine.config.host, "--port", str(engine.config.port)]

    (engine,) = launch_planned_engines(plan, startup_timeout=180, launch_command=embedded)
    pid = engine.pid
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert b"CUDA_VISIBLE_DEVICES=3" in env  # the engine got its planned GPU list
        assert engine.base_url == plan.entry_url
        body = {"input_ids": [1, 42, 17, 99], "return_logprob": True,
                "sampling_params": {"max_new_tokens": 4, "temperature": 0.0, "ignore_eos": True}}
        with SyncSGLangClient(engine.base_url, timeout=120) as client:
            before = client.generate(body)
            client.update_weights_from_disk(str(tiny_model_path_alt), weight_version=1)
            after = client.generate(body)
    finally:
        engine.stop()
    assert len(before["output_ids"]) == 4 and len(before["meta_info"]["output_token_logprobs"]) == 4
    assert int(after["meta_info"]["weight_version"]) == 1
    assert after["meta_info"]["output_token_logprobs"] != before["meta_info"]["output_token_logprobs"]
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


def test_ray_assigned_gpus_ports_colocate_and_version():
    args = _args("--actor-num-gpus-per-node", "2", "--colocate", "--rollout-num-gpus-per-engine", "1")
    plan = plan_sglang_rollout(args, "/m", gpu_ids=[5, 7], ports=[40001, 40007], weight_version=3, env={})
    assert [e.env["CUDA_VISIBLE_DEVICES"] for e in plan.engines] == ["5", "7"]
    assert [e.config.port for e in plan.engines] == [40001, 40007]
    for e in plan.engines:
        assert _value(e.command, "--mem-fraction-static") == "0.4"  # colocated default, overridable
        assert _value(e.command, "--weight-version") == "3"  # a resumed run keeps counting
    explicit = _args("--colocate", "--sglang-mem-fraction-static", "0.6")
    assert _value(plan_sglang_rollout(explicit, "/m", env={}).engines[0].command, "--mem-fraction-static") == "0.6"
    with pytest.raises(ValueError, match="ports"):
        plan_sglang_rollout(args, "/m", gpu_ids=[5, 7], ports=[40001], env={})
