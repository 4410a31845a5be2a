"""Weight sync from a TP=2 Megatron actor to the embedded engine over SGLang's HTTP API.

The engine (`python -m openclaw.engines.serve`, a real subprocess) starts on the tiny model;
the Megatron job trains one step, gathers its TP shards into HF names, writes them to disk
and calls /update_weights_from_disk. Afterwards the engine's prompt log-probs must equal the
Megatron actor's own post-step log-probs.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

_spec = importlib.util.spec_from_file_location("megatron_backend_tests", Path(__file__).with_name("test_megatron_backend.py"))
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)


def _engine_response_log_probs(client, tokens: list[int], response_length: int) -> list[float]:
    out = client.generate({"input_ids": tokens, "sampling_params": {"max_new_tokens": 0, "temperature": 1.0},
                           "return_logprob": True, "logprob_start_len": 0})
    lps = out["meta_info"]["input_token_logprobs"]
    return [float(e[0]) for e in lps[len(tokens) - response_length :]]


def test_tp2_step_matches_fsdp_and_syncs_to_embedded_engine(tmp_path, tiny_model_path, engine_command):
    from slime.ray.engine_process import EngineProcess
    from slime.rollout.sglang_client import SyncSGLangClient

    engine = EngineProcess(model_path=str(tiny_model_path), log_path=tmp_path / "engine.log", engine_command=engine_command)
    engine.start(timeout_s=180)
    try:
        # TP=2 over gloo: log-probs == HF (1e-4), GRPO step == FSDP step, then weight push
        _, results = _helpers.check_against_fsdp(tmp_path, tiny_model_path, world=2, tp=2, engine_url=engine.url)
        batch = json.loads((tmp_path / "job.json").read_text())["batch"]
        n = len(batch["tokens"])
        megatron_before = _helpers.merge_rank_log_probs(results, "log_probs", n)
        megatron_after = _helpers.merge_rank_log_probs(results, "log_probs_after", n)
        with SyncSGLangClient(engine.url) as client:
            after = [_engine_response_log_probs(client, t, r) for t, r in zip(batch["tokens"], batch["response_lengths"], strict=True)]
            assert str(client.get_weight_version()) == "1"
    finally:
        engine.stop()
    # the step changed the policy, and the engine now serves exactly the trained weights
    assert _helpers._max_abs(megatron_after, megatron_before) > 1e-3
    assert _helpers._max_abs(after, megatron_after) < 1e-4
