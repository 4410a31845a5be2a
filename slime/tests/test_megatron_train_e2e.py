"""`python slime/train.py --train-backend megatron` end to end on CPU: TP=2 over two Ray train
actors (gloo), the embedded engine for rollout, weight sync after every step, checkpoint save,
then a resumed run that continues from the checkpoint's optimizer state."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]

EVEN_RM = '''
async def reward_func(args, sample):
    resp = sample.tokens[len(sample.tokens) - sample.response_length:]
    return sum(1 for t in resp if t % 2 == 0) / max(1, len(resp))
'''


def _run(flags: list[str]) -> subprocess.CompletedProcess:
    env = dict(os.environ, RAY_AUTH_MODE="disabled", HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1")
    env.pop("RAY_ADDRESS", None)
    return subprocess.run([sys.executable, str(REPO / "slime" / "train.py"), *flags], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=900)


def _metrics(log_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (log_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.ray
def test_train_py_megatron_tp2_sync_save_resume(tmp_path, tiny_model_path, engine_command):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps({"input": f"Question {i}: write something.", "label": "x"}) + "\n"
                               for i in range(32)))
    rm = tmp_path / "even_rm.py"
    rm.write_text(EVEN_RM)
    save, logs = tmp_path / "ckpt", tmp_path / "logs"
    flags = ["--train-backend", "megatron", "--tensor-model-parallel-size", "2", "--actor-num-gpus-per-node", "2",
             "--hf-checkpoint", str(tiny_model_path), "--prompt-data", str(prompts), "--custom-rm-path", str(rm),
             "--rollout-batch-size", "4", "--n-samples-per-prompt", "4", "--rollout-max-response-len", "8",
             "--rollout-top-k", "8", "--lr", "5e-3", "--use-dynamic-batch-size", "--max-tokens-per-gpu", "4096",
             "--log-dir", str(logs), "--no-progress-bar", "--save", str(save), "--save-interval", "1",
             "--rollout-engine-command", engine_command]
    first = _run(flags + ["--num-rollout", "2"])
    assert first.returncode == 0, first.stderr[-4000:]
    state = torch.load(save / "checkpoint-latest" / "trainer_state" / "rank_1.pt", weights_only=False)
    assert state.get("layout", {}).get("tp") == 2, (
        "train.py did not run the Megatron actor: slime/slime/ray/train_actor.py must create "
        "MegatronTrainActor for --train-backend megatron")
    rows = _metrics(logs)
    assert [r["step"] for r in rows] == [0, 1]
    assert [r["weights/version"] for r in rows] == [1, 2]
    # after the first sync the engine serves the trainer's weights: its rollout log-probs
    # equal the Megatron recompute (fp32)
    assert rows[1]["policy/train_rollout_logprob_abs_diff"] < 1e-4
    assert all(r["gradient/norm"] > 0 for r in rows)
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(str(save / "checkpoint-latest"))  # an HF folder

    resumed = _run(flags + ["--num-rollout", "3", "--load", str(save)])
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    rows = _metrics(logs)
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[-1]["weights/version"] == 3
    assert rows[-1]["policy/train_rollout_logprob_abs_diff"] < 1e-4
    final = json.loads((save / "checkpoint-latest" / "slime_meta.json").read_text())
    assert final["rollout_id"] == 2
