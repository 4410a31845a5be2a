"""`torchrun --nproc_per_node=2 slime/train_grpo.py ...` trains without Ray: torchrun's env forms a gloo
process group on CPU, rank 0 runs the rollout on a real embedded engine, both ranks train their shard,
and the run saves slime's checkpoint (both ranks' trainer state). About 30 s on two CPU cores."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[2]

EVEN_RM = '''
async def reward_func(args, sample):
    """Verifiable reward: the fraction of response tokens with an even token id."""
    resp = sample.tokens[len(sample.tokens) - sample.response_length:]
    return sum(1 for t in resp if t % 2 == 0) / max(1, len(resp))
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Imported by every Python process started with its folder on PYTHONPATH: holds rank 1 back, as a
# busy machine may, so that rank 0 reaches the start-up checks (and could exit) well before it.
LATE_RANK_1 = '''
import os, time
if os.environ.get("RANK") == "1":
    time.sleep(1.0)
'''


def _late_rank_1(tmp: Path) -> dict[str, str]:
    site = tmp / "late_rank_1"
    site.mkdir()
    (site / "sitecustomize.py").write_text(LATE_RANK_1)
    return {"PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def _torchrun(tmp: Path, model: Path, *extra: str, nproc: int = 2,
              env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    prompts, rm = tmp / "prompts.jsonl", tmp / "even_rm.py"
    prompts.write_text("".join(json.dumps({"input": f"Question {i}: write something.", "label": "x"}) + "\n"
                               for i in range(16)))
    rm.write_text(EVEN_RM)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONUNBUFFERED="1",
               **(env_extra or {}))
    env.pop("RAY_ADDRESS", None)
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", "--master_addr=127.0.0.1",
           f"--master_port={_free_port()}", "slime/train_grpo.py",
           "--hf-checkpoint", str(model), "--prompt-data", str(prompts), "--custom-rm-path", str(rm),
           "--rollout-batch-size", "4", "--n-samples-per-prompt", "4", "--rollout-max-response-len", "8",
           "--rollout-top-k", "8", "--lr", "5e-3", "--save", str(tmp / "ckpt"), "--log-dir", str(tmp / "logs"),
           "--no-progress-bar", *extra]
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def _metrics(tmp: Path) -> list[dict]:
    return [json.loads(x) for x in (tmp / "logs" / "metrics.jsonl").read_text().splitlines() if x.strip()]


def test_torchrun_two_ranks_two_grpo_steps_and_a_checkpoint(tmp_path, tiny_model_path, engine_command):
    res = _torchrun(tmp_path, tiny_model_path, "--rollout-engine-command", engine_command, "--num-rollout", "2")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    rows = _metrics(tmp_path)
    assert [r["step"] for r in rows] == [0, 1]
    # 4 prompts x 4 samples per step, split over two ranks and reduced back: GRPO advantages, a real update
    assert all(r["train/num_samples"] == 16 and r["gradient/norm"] > 0 and r["train/advantage_abs_mean"] > 0
               for r in rows)
    assert [r["weights/version"] for r in rows] == [1, 2]  # the engine got the new weights after each step
    ckpt = (tmp_path / "ckpt" / "checkpoint-latest").resolve()
    assert ckpt.name == "checkpoint-1"
    assert sorted(p.name for p in (ckpt / "trainer_state").iterdir()) == ["rank_0.pt", "rank_1.pt"]
    before, after = load_file(tiny_model_path / "model.safetensors"), load_file(ckpt / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert "Ray" not in res.stdout + res.stderr  # no Ray instance was started


def test_outside_torchrun_it_says_how_to_start_it(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    res = subprocess.run([sys.executable, "slime/train_grpo.py", "--hf-checkpoint", "/m"], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2 and "start this with torchrun" in res.stderr


def test_without_an_engine_program_every_rank_refuses_before_starting(tmp_path, tiny_model_path):
    """The embedded engines need --rollout-engine-command (slime ships no engine): each rank says so and
    stops, none waits for a peer that already left. torchrun stops every rank once one has exited with
    an error, so a rank that gets to its checks late must still get to say it: rank 1 starts late."""
    res = _torchrun(tmp_path, tiny_model_path, "--num-rollout", "1", env_extra=_late_rank_1(tmp_path))
    assert res.returncode != 0
    assert (res.stdout + res.stderr).count("error: --rollout-engine-command is not set") == 2
    assert not (tmp_path / "logs" / "metrics.jsonl").exists()


AGREE = '''
import json, sys
from pathlib import Path
from slime.backends.fsdp.torchrun import agree_to_start, torchrun_env
tr = torchrun_env()
refused = agree_to_start(tr, "no model here" if tr.rank == 1 else None)
Path(sys.argv[1], f"rank_{tr.rank}.json").write_text(json.dumps(refused))
'''


def test_a_rank_whose_checks_pass_learns_that_a_peer_refused(tmp_path):
    """Each rank's start-up checks are exchanged before any rank goes on: one that passed does not start
    a run its peer refused (its process group would never form)."""
    script = tmp_path / "agree.py"
    script.write_text(AGREE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "slime"), os.environ.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1",
                          f"--master_port={_free_port()}", str(script), str(tmp_path)], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    for rank in (0, 1):
        assert json.loads((tmp_path / f"rank_{rank}.json").read_text()) == {"1": "no model here"}


@pytest.mark.slow
def test_torchrun_resumes_from_its_checkpoint(tmp_path, tiny_model_path, engine_command):
    engine = ("--rollout-engine-command", engine_command)
    assert _torchrun(tmp_path, tiny_model_path, *engine, "--num-rollout", "1").returncode == 0
    res = _torchrun(tmp_path, tiny_model_path, *engine, "--num-rollout", "2", "--load", str(tmp_path / "ckpt"))
    assert res.returncode == 0, res.stderr[-3000:]
    assert [r["step"] for r in _metrics(tmp_path)] == [0, 1]  # step 0 from the first run, step 1 resumed
    assert (tmp_path / "ckpt" / "checkpoint-latest").resolve().name == "checkpoint-1"
