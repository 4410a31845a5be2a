"""Save and resume on the tiny model with the embedded engine: in process (`setup(where="local")`,
the default suite), and `python slime/train.py` / `train_async.py` end to end with a private local
Ray instance: interrupt and resume, learning runs (slow)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from runtime_helpers import REPO, env, metrics, processes_mentioning, run_script, wait_for
from slime.ray.loop import run_loop
from slime.ray.setup import setup
from slime.utils.arguments import parse_config


def _rollout_files(folder):
    out = {}
    for path in sorted(folder.glob("*.jsonl")):
        out[int(path.stem)] = [json.loads(line) for line in path.read_text().splitlines()]
    return out


def _holding_rm(tmp_path, hold_from_index):
    """Copy holding_rm.py beside its config; returns (plugin path, arm file, held file)."""
    arm, held = tmp_path / "hold.arm", tmp_path / "hold.held"
    rm = tmp_path / "holding_rm.py"
    shutil.copy(Path(__file__).with_name("holding_rm.py"), rm)
    rm.with_suffix(".json").write_text(json.dumps(
        {"arm": str(arm), "held": str(held), "hold_from_index": hold_from_index}))
    arm.touch()
    return rm, arm, held


def _run_in_process(flags: list[str]) -> None:
    run = setup(parse_config(flags, check_files=True), where="local", echo_steps=False)
    try:
        run_loop(run)
    finally:
        run.shutdown()


def test_resume_continues_rollout_ids_data_order_and_weight_versions(tmp_path, task):
    """The default suite's twin of the interrupt test below: a run of one rollout saves, a second
    run loads it and goes on; between them every prompt and sample index is trained exactly once."""
    from slime.ray.engine_process import EngineProcess

    engine = EngineProcess(model_path=str(task.model), log_path=tmp_path / "engine.log",
                           engine_command=task.engine_command)
    engine.start()
    try:
        _save_then_resume(tmp_path, task, engine.url)
    finally:
        engine.stop()
    assert not processes_mentioning(str(task.model)), "the engine outlived the test"


def _save_then_resume(tmp_path, task, engine_url: str) -> None:
    save, dumps = tmp_path / "ckpt", tmp_path / "rollouts"
    flags = task.flags() + ["--rollout-backend", "external", "--rollout-external-engine-addrs", engine_url,
                            "--rollout-batch-size", "2", "--n-samples-per-prompt", "2", "--save", str(save),
                            "--save-interval", "1", "--save-debug-rollout-data", str(dumps / "{rollout_id}.jsonl")]
    _run_in_process([*flags, "--num-rollout", "1"])
    first = json.loads((save / "checkpoint-latest" / "slime_meta.json").read_text())
    assert first["rollout_id"] == 0
    _run_in_process([*flags, "--num-rollout", "3", "--load", str(save)])
    assert [m["step"] for m in metrics(tmp_path / "logs")] == [0, 1, 2]  # step 0 from run 1, then resumed
    final = json.loads((save / "checkpoint-latest" / "slime_meta.json").read_text())
    assert final["rollout_id"] == 2 and final["weight_version"] == first["weight_version"] + 2
    files = _rollout_files(dumps)
    assert sorted(files) == [0, 1, 2]
    assert [s["metadata"]["prompt_index"] for rid in range(3) for s in files[rid][::2]] == list(range(6))
    assert sorted(s["index"] for rid in range(3) for s in files[rid]) == list(range(12))


@pytest.mark.slow
def test_interrupt_after_checkpoint_then_resume(tmp_path, task):
    model = task.model
    # 4 prompts x 4 samples per rollout: rollout 1 starts at sample index 16. The reward plugin
    # holds the trainer inside rollout 1, i.e. after checkpoint-0 is written and before
    # checkpoint-1 can be: the SIGINT lands at a known point, never raced against the run.
    rm, arm, held = _holding_rm(tmp_path, hold_from_index=16)
    save, dumps = tmp_path / "ckpt", tmp_path / "rollouts"
    flags = task.flags(rm=rm) + [
        "--num-rollout", "4", "--save", str(save), "--save-interval", "1",
        "--save-debug-rollout-data", str(dumps / "{rollout_id}.jsonl")]
    proc = subprocess.Popen([sys.executable, str(REPO / "slime" / "train.py"), *flags], cwd=REPO, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: held.exists() or proc.poll() is not None, 600, "the trainer to be held in rollout 1")
        assert proc.poll() is None, "the trainer exited before reaching the hold point"
        assert (save / "checkpoint-0" / "slime_meta.json").exists()
        assert not (save / "checkpoint-1").exists()
        proc.send_signal(signal.SIGINT)  # stop the job after a checkpoint (Ctrl-C)
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0, "the interrupted run reported success"
    assert not arm.exists(), "the hold was never consumed"
    assert (save / "checkpoint-0" / "slime_meta.json").exists(), out[-3000:]
    assert not processes_mentioning(str(model)), "an engine or worker outlived the interrupted run"
    first = json.loads((save / "checkpoint-latest" / "slime_meta.json").read_text())
    stopped_at = first["rollout_id"]
    assert stopped_at == 0, "the run was interrupted at the hold point, after checkpoint-0"

    resumed = run_script("train.py", flags + ["--load", str(save)])
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    steps = [m["step"] for m in metrics(tmp_path / "logs")]
    assert steps[-(3 - stopped_at):] == list(range(stopped_at + 1, 4))  # the rollout id continues
    final = json.loads((save / "checkpoint-latest" / "slime_meta.json").read_text())
    assert final["rollout_id"] == 3 and final["weight_version"] == 4

    # What was trained: rollouts 0..stopped_at from run 1, the rest from run 2. Each prompt and
    # each sample index exactly once, in data order: nothing trained twice, nothing skipped.
    files = _rollout_files(dumps)
    assert sorted(files) == [0, 1, 2, 3]
    prompts_seen = [s["metadata"]["prompt_index"] for rid in range(4) for s in files[rid][::4]]
    assert prompts_seen == list(range(16))
    indices = [s["index"] for rid in range(4) for s in files[rid]]
    assert sorted(indices) == list(range(64))

    # checkpoint-latest is an HF model folder
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(str(save / "checkpoint-latest"))
    assert not processes_mentioning(str(model))


def _learning_curve(tmp_path, rewards):
    first, last = sum(rewards[:2]) / 2, sum(rewards[-2:]) / 2
    assert last > first + 0.2 and last > 0.8, f"reward did not rise: {rewards}"


@pytest.mark.slow
def test_full_finetune_learns(tmp_path, task):
    res = run_script("train.py", task.flags() + ["--num-rollout", "8"])
    assert res.returncode == 0, res.stderr[-4000:]
    _learning_curve(tmp_path, [m["reward/mean"] for m in metrics(tmp_path / "logs")])


@pytest.mark.slow
def test_lora_learns(tmp_path, task):
    flags = task.flags() + [
        "--num-rollout", "10", "--rollout-batch-size", "8", "--use-lora", "--lora-rank", "8", "--lora-alpha", "16",
        "--lr", "2e-2",
        "--save", str(tmp_path / "ckpt"), "--save-interval", "10"]
    res = run_script("train.py", flags)
    assert res.returncode == 0, res.stderr[-4000:]
    _learning_curve(tmp_path, [m["reward/mean"] for m in metrics(tmp_path / "logs")])
    latest = tmp_path / "ckpt" / "checkpoint-latest"
    assert (latest / "adapter_config.json").is_file()
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(str(latest))  # base + adapter by path


@pytest.mark.slow
def test_world_size_two_over_gloo_colocated(tmp_path, task):
    flags = task.flags() + [
        "--num-rollout", "2", "--actor-num-gpus-per-node", "2", "--colocate", "--save", str(tmp_path / "ckpt")]
    res = run_script("train.py", flags)
    assert res.returncode == 0, res.stderr[-4000:]
    rows = metrics(tmp_path / "logs")
    assert [r["step"] for r in rows] == [0, 1]
    assert all(r["gradient/norm"] > 0 and r["train/num_samples"] == 16 for r in rows)
    state = tmp_path / "ckpt" / "checkpoint-latest" / "trainer_state"
    assert sorted(p.name for p in state.iterdir()) == ["rank_0.pt", "rank_1.pt"]


@pytest.mark.slow
def test_async_counts_stale_samples(tmp_path, task):
    flags = task.flags() + ["--num-rollout", "3", "--max-staleness", "0"]
    res = run_script("train_async.py", flags)
    assert res.returncode == 0, res.stderr[-4000:]
    rows = metrics(tmp_path / "logs")
    assert [r["step"] for r in rows] == [0, 1, 2]
    assert rows[0]["staleness/dropped"] == 0  # the first rollout is generated by the current weights
    # later rollouts were generated (at least partly) by the previous version: dropped and counted
    assert sum(r["staleness/dropped"] for r in rows[1:]) > 0
    assert rows[-1]["weights/version"] == 3


@pytest.mark.slow
def test_debug_rollout_only_then_train_only(tmp_path, task):
    dumps = tmp_path / "dumps"
    flags = task.flags() + ["--num-rollout", "2"]
    res = run_script("train.py", flags + ["--debug-rollout-only", "--save-debug-rollout-data", str(dumps)])
    assert res.returncode == 0, res.stderr[-4000:]
    assert sorted(p.name for p in dumps.iterdir()) == ["rollout_0.jsonl", "rollout_1.jsonl"]
    assert "loss/total" not in metrics(tmp_path / "logs")[0]
    res = run_script("train.py", flags + ["--load-debug-rollout-data", str(dumps), "--log-dir", str(tmp_path / "l2")])
    assert res.returncode == 0, res.stderr[-4000:]
    rows = metrics(tmp_path / "l2")
    assert len(rows) == 2 and all("loss/total" in r for r in rows)
