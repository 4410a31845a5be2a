"""Both public pages walked through: every command, typed as the pages write them.

`openclaw-rl-skill.md` ("skill") and `openclaw-rl-training-skill-hermes.md` ("hermes") are kept
here as the list of their commands, in their own words (the test never reads the pages). Each one
is run with bash from the folder the page runs it in and must do one of three things:

  runs     exits 0 (launch scripts with OPENCLAW_DRY_RUN=1: the plan, validated by every component's
           own parser, trainer included; a real run would take hours)
  alias    exits 0 and the output shows the equivalent setting here (the flag it became)
  refused  exits non-zero with a message naming what it needs or why it does not apply, no traceback

Placeholders (`/path/to/...`) are replaced by real test things (the tiny model, the page's own
session example as DATA_PATH). Not run: `git clone`, `pip install`, `npm install` (the extension has
its own test, test_extension_headers.py) and `ray job submit --address $TINKER_ENDPOINT` (Ray's
own CLI against a cloud cluster). The server-side commands (serve_model.py, collect_rollouts.py,
test_rollout, inspect_sessions) run for real against a served tiny model in the slow test below.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from openclaw.launch.settings import count_gpus

REPO = Path(__file__).resolve().parents[1]
NO_GPU = count_gpus(os.environ) == 0

# The first page's "Data Format" example, as DATA_PATH.
PAGE_SESSION = json.loads((Path(__file__).parent / "data" / "page_session.json").read_text())


@dataclass(frozen=True)
class Step:
    page: str  # skill | hermes
    commands: str  # the page's lines, as written
    expect: str  # runs | alias | refused
    shows: tuple[str, ...] = ()  # text the output must contain
    dry: bool = True  # OPENCLAW_DRY_RUN=1 (a real launch trains for hours)
    needs_no_gpu: bool = False  # the refusal is about missing GPUs
    env: dict[str, str] = field(default_factory=dict)  # test-only settings (not the page's words)
    # torchrun reports a failed worker with its own traceback (torch.distributed.elastic) after the
    # worker's one-line error; only that launcher's traceback is allowed
    torchrun: bool = False

    @property
    def id(self) -> str:
        cmds = [ln for ln in self.commands.splitlines()
                if ln.strip() and not ln.startswith(("export", "cd", " ", '"', "--")) and not re.match(r"^[A-Z_]+=", ln)]
        return f"{self.page}:{(cmds[-1] if cmds else self.commands).strip()[:60]}"


STEPS = (
    # ---- openclaw-rl-skill.md ----------------------------------------------------------------
    Step("skill", """export MODEL_PATH=/path/to/qwen3-7b
export DATA_PATH=/path/to/conversation/data
export CKPT_SAVE_DIR=/path/to/checkpoints
bash openclaw-rl/run_qwen3_7b_openclaw_rl.sh""", "runs", ("would run import:", "would run submit:")),
    Step("skill", """export MODEL_PATH=/path/to/qwen3-7b
export JUDGE_MODEL_PATH=/path/to/judge-model
export DATA_PATH=/path/to/conversation/data
bash openclaw-opd/run_qwen3_7b_openclaw_opd.sh""", "runs", ("--prm-model-path", "would run submit:")),
    Step("skill", "bash openclaw-combine/run_qwen3_7b_openclaw_combine.sh", "runs", ("would run submit:",)),
    Step("skill", """export MODEL_PATH=/path/to/base/model
export JUDGE_MODEL_PATH=/path/to/judge/model # For OPD
export PRM_MODEL_PATH=/path/to/prm/model # For Binary RL
export CKPT_SAVE_DIR=./checkpoints
export CKPT_ARGS="--save-interval 100 --save-dir $CKPT_SAVE_DIR"
export ROLLOUT_ARGS="--rollout-batch-size 64 --num-rollouts-per-prompt 4"
export OPTIMIZER_ARGS="--lr 1e-6 --weight-decay 0.01 --adam-beta1 0.9 --adam-beta2 0.999"
export LORA_ARGS="--lora-rank 64 --lora-alpha 128 --lora-dropout 0.05"
bash openclaw-combine/run_qwen3_7b_openclaw_combine.sh""", "runs",
         ("--rollout-batch-size 64 --num-rollouts-per-prompt 4", "--lora-rank 64 --lora-alpha 128")),
    Step("skill", """export TRAIN_GPUS="0,1,2,3"
export ROLLOUT_GPUS="4,5,6,7"
bash openclaw-combine/run_qwen3_7b_openclaw_combine.sh""", "refused", ("TRAIN_GPUS",), needs_no_gpu=True),
    Step("skill", """export LORA_ARGS="--use-lora --lora-rank 64 --lora-alpha 128"
bash openclaw-rl/run_qwen3_7b_lora_openclaw_rl.sh""", "runs", ("--use-lora --lora-rank 64 --lora-alpha 128",)),
    Step("skill", """export ENV_TYPE=terminal
export MAX_STEPS=20
export PARALLEL_ENVS=32 # Number of parallel environment instances
bash terminal-rl/run_terminal_rl.sh""", "runs", ("--max-steps 20", "--parallel-envs 32")),
    Step("skill", """export ENV_TYPE=gui
export SCREENSHOT_BACKEND=playwright # or selenium
export PARALLEL_ENVS=16
bash gui-rl/run_gui_rl.sh""", "runs", ("--screenshot-backend playwright", "--parallel-envs 16")),
    Step("skill", """export ENV_TYPE=toolcall
export TOOLS_CONFIG=./toolcall-rl/tools_config.json
export PARALLEL_ENVS=64
bash toolcall-rl/run_toolcall_rl.sh""", "runs", ("--tools-config", "--parallel-envs 64")),
    Step("skill", """export ENV_TYPE=swe
export SWE_BENCH_PATH=/path/to/swe-bench
export PARALLEL_ENVS=8 # SWE environments are heavier
bash swe-rl/run_swe_rl.sh""", "refused", ("/path/to/swe-bench",)),
    Step("skill", """export BASE_MODEL_PATH=/path/to/your/model
export OPENCLAW_PORT=8000
export OPENCLAW_HOST=0.0.0.0
python -m openclaw.server \\
--model-path $BASE_MODEL_PATH \\
--port $OPENCLAW_PORT \\
--backend sglang \\
--enable-rl-intercept \\
--rl-buffer-dir ./rl_buffer""", "refused", ("without an API key",), dry=False),
    Step("skill", """export MAJORITY_VOTE_N=5 # Number of judge calls per turn
export MAJORITY_VOTE_THRESHOLD=0.6
bash openclaw-rl/run_qwen3_7b_openclaw_rl.sh \\
--majority-vote-n $MAJORITY_VOTE_N \\
--majority-vote-threshold $MAJORITY_VOTE_THRESHOLD""", "alias",
         ("routed: --majority-vote-n -> judge; --majority-vote-threshold -> judge", "majority-vote-n=5")),
    # ---- openclaw-rl-training-skill-hermes.md -------------------------------------------------
    Step("hermes", """export OPENCLAW_API_KEY=your_api_key_here
export WANDB_API_KEY=$YOUR_WANDB_KEY  # For experiment tracking
export HF_TOKEN=$YOUR_HF_TOKEN  # For model downloads
cd openclaw-combine
bash run_combine_training.sh""", "runs", ('"OPENCLAW_API_KEY": "***"',)),
    Step("hermes", """cd openclaw-rl
export MASTER_ADDR=localhost
export MASTER_PORT=6000
export NNODES=1
export NODE_RANK=0
export GPUS_PER_NODE=8
bash run_binary_rl.sh""", "refused", ("GPUS_PER_NODE=8 but this machine has 0 GPU(s)",), needs_no_gpu=True),
    Step("hermes", """cd openclaw-rl
export MASTER_ADDR=localhost
export MASTER_PORT=6000
export NNODES=1
export NODE_RANK=0
bash run_binary_rl.sh""", "alias", ('"MASTER_ADDR": "localhost"', '"MASTER_PORT": "6000"', "--actor-num-nodes 1")),
    Step("hermes", """export GPUS_PER_NODE=1 NNODES=1 NODE_RANK=0 MASTER_ADDR=localhost MASTER_PORT=6000
ROLLOUT_ARGS="
    --rollout-function-path rollout_binary.py \\
    --num-rollout-workers 4 \\
    --rollout-batch-size 32 \\
    --max-turns 10
"
REWARD_ARGS="
    --custom-rm-path process_reward_model.py \\
    --rm-checkpoint /path/to/prm/checkpoint \\
    --reward-aggregation majority
"
OPTIMIZER_ARGS="
    --lr 1e-6 \\
    --lr-warmup-samples 100 \\
    --clip-grad 1.0 \\
    --ppo-clip-ratio 0.2 \\
    --num-epochs 1
"
torchrun --nproc_per_node=$GPUS_PER_NODE \\
    --nnodes=$NNODES \\
    --node_rank=$NODE_RANK \\
    --master_addr=$MASTER_ADDR \\
    --master_port=$MASTER_PORT \\
    slime/train_grpo.py \\
    $ROLLOUT_ARGS \\
    $REWARD_ARGS \\
    $OPTIMIZER_ARGS""", "refused", ("error: --max-turns is an agent-environment limit",), dry=False,
         torchrun=True),
    Step("hermes", "cd openclaw-opd\nbash run_opd_training.sh", "runs", ("openclaw-opd/openclaw_opd_rollout.py",)),
    Step("hermes", "cd openclaw-combine\nbash run_combine_training.sh", "runs", ("openclaw-combine/combine_loss.py",)),
    Step("hermes", """cd openclaw-combine
python serve_model.py \\
    --model-path /path/to/your/model \\
    --port 8000 \\
    --gpu-ids 0,1""", "refused", ("--gpu-ids 0,1 needs those GPUs",), needs_no_gpu=True),
    Step("hermes", """cd openclaw-combine
python train_async.py \\
    --rollout-dir ./rollouts \\
    --checkpoint-dir ./checkpoints \\
    --method combine \\
    --gpus 2,3,4,5""", "refused", ("--gpus 2,3,4,5 needs those GPUs",), needs_no_gpu=True),
    Step("hermes", """cd openclaw-combine
python train_async.py \\
    --rollout-dir ./rollouts \\
    --checkpoint-dir ./checkpoints \\
    --method combine""", "alias", ("openclaw-combine: plan", "--rl-buffer-dir", "--save-dir")),
    Step("hermes", """python slime/train_async.py \\
    --rollout-dir ./rollouts \\
    --checkpoint-dir ./checkpoints \\
    --method combine \\
    --gpus 2,3,4,5""", "refused", ("openclaw-combine/train_async.py",), dry=False),
    Step("hermes", """cd terminal-rl
export TASK_TYPE=bash_commands
export MAX_STEPS=50
bash run_terminal_agent.sh""", "runs", ("--max-steps 50",)),
    Step("hermes", "cd gui-rl\nbash run_gui_agent.sh --model qwen3.5-vl", "refused", ("vision-language model",),
         dry=False, needs_no_gpu=True),
    Step("hermes", "cd swe-rl\nbash run_swe_agent.sh --benchmark swe-bench-lite", "refused", ("SWE_BENCH_PATH",),
         dry=False),
    Step("hermes", """cd toolcall-rl
export TOOLS_CONFIG=./tools_config.json
bash run_toolcall_agent.sh""", "runs", ("toolcall-rl/tools_config.json",)),
    Step("hermes", """export USE_LORA=true
export LORA_RANK=16
export LORA_ALPHA=32
export LORA_DROPOUT=0.1
bash openclaw-combine/run_combine_training.sh --lora""", "alias",
         ("USE_LORA=true -> trainer --use-lora", "--lora-rank 16 --lora-alpha 32 --lora-dropout 0.1")),
    Step("hermes", """export TINKER_API_KEY=$YOUR_TINKER_KEY
export TINKER_PROJECT_ID=your_project_id
bash deploy_to_tinker.sh""", "refused", ("TINKER_API_KEY",), dry=False),
    Step("hermes", """export FIREWORKS_API_KEY=$YOUR_FIREWORKS_KEY
bash deploy_to_fireworks.sh --gpus 8 --method combine""", "refused", ("FIREWORKS_API_KEY",), dry=False),
    Step("hermes", """export OPENCLAW_DEBUG=true
export ROLLOUT_LOG_LEVEL=DEBUG
bash openclaw-combine/run_combine_training.sh""", "alias",
         ("OPENCLAW_DEBUG=true -> judge --log-level debug", "ROLLOUT_LOG_LEVEL=DEBUG -> server --log-level debug")),
    Step("hermes", """export BATCH_SIZE=8
export GRAD_ACCUM_STEPS=8
export USE_GRADIENT_CHECKPOINTING=true
export USE_LORA=true
export LORA_RANK=8
bash openclaw-combine/run_combine_training.sh""", "alias",
         ("--global-batch-size 8 --micro-batch-size 1", "--gradient-checkpointing", "--lora-rank 8")),
    Step("hermes", """ROLLOUT_ARGS="
    --num-rollout-workers 16 \\
    --parallel-envs 32 \\
    --async-collection
"
export ROLLOUT_ARGS
bash openclaw-combine/run_combine_training.sh""", "refused", ("--num-rollout-workers", "starts no engines")),
    Step("hermes", """export LEARNING_RATE=5e-7
export CLIP_GRAD_NORM=0.5
export PPO_CLIP_RATIO=0.1
bash openclaw-combine/run_combine_training.sh""", "alias", ("--lr 5e-7 --clip-grad 0.5 --eps-clip 0.1",)),
    Step("hermes", """export LEARNING_RATE=5e-7
export CLIP_GRAD_NORM=0.5
export PPO_CLIP_RATIO=0.1
export VALUE_CLIP=true
bash openclaw-combine/run_combine_training.sh""", "refused", ("VALUE_CLIP=true does not apply", "critic-free")),
)


def _substitute(text: str, tmp: Path, model: Path) -> str:
    data = tmp / "conversation_data"
    data.mkdir(exist_ok=True)
    (data / "sessions.json").write_text(json.dumps([PAGE_SESSION]))
    for placeholder, real in (("/path/to/conversation/data", str(data)), ("/path/to/checkpoints", str(tmp / "ckpt")),
                              ("/path/to/prm/model", str(model)), ("/path/to/judge-model", str(model)),
                              ("/path/to/judge/model", str(model)), ("/path/to/qwen3-7b", str(model)),
                              ("/path/to/base/model", str(model)), ("/path/to/your/model", str(model))):
        text = text.replace(placeholder, real)
    return text


def _env(tmp: Path, step: Step) -> dict[str, str]:
    page_vars = ("MODEL_PATH", "DATA_PATH", "LORA_ARGS", "OPTIMIZER_ARGS", "ROLLOUT_ARGS", "CKPT_ARGS", "RAY_ADDRESS",
                 "OPENCLAW_API_KEY", "ENV_TYPE", "MAX_STEPS", "PARALLEL_ENVS", "TOOLS_CONFIG", "USE_LORA", "VALUE_CLIP",
                 "TINKER_API_KEY", "FIREWORKS_API_KEY", "SWE_BENCH_PATH", "OPENCLAW_HOST", "OPENCLAW_PORT",
                 "MAJORITY_VOTE_N", "BASE_MODEL_PATH", "CKPT_SAVE_DIR", "DRY_RUN", "OPENCLAW_DRY_RUN")
    env = {k: v for k, v in os.environ.items() if k not in page_vars}
    env.update(RL_BUFFER_DIR=str(tmp / "buf"), LOG_DIR=str(tmp / "logs"), CPU_PRESET_MODEL="tiny",
               RAY_AUTH_MODE="disabled", HF_HUB_OFFLINE="1", EVAL_LIMIT="3", **step.env)
    if step.dry:
        env["OPENCLAW_DRY_RUN"] = "1"
    return env


@pytest.mark.parametrize("step", STEPS, ids=[s.id for s in STEPS])
def test_page_command_runs_aliases_or_refuses_clearly(step: Step, tmp_path: Path, tiny_model_path: Path) -> None:
    if step.needs_no_gpu and not NO_GPU:
        pytest.skip("the refusal is about a missing GPU; this machine has one")
    script = _substitute(step.commands, tmp_path, tiny_model_path)
    out = subprocess.run(["bash", "-c", script], cwd=REPO, env=_env(tmp_path, step), capture_output=True,
                         text=True, timeout=600)
    both = out.stdout + out.stderr
    if step.expect == "refused":
        assert out.returncode != 0, f"accepted instead of refused:\n{both[-3000:]}"
        if step.torchrun:
            launcher = re.search(r'Traceback \(most recent call last\):\n\s+File "[^"]*/bin/torchrun"', both)
            both = both[:launcher.start()] if launcher else both
        assert "Traceback" not in both, both[-3000:]
    else:
        assert out.returncode == 0, both[-3000:]
    for text in step.shows:
        assert text in both, f"{text!r} not in:\n{both[-3000:]}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_ready(url: str, proc: subprocess.Popen, timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"serve_model.py exited {proc.returncode}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)  # polling for readiness, not ordering events
    raise AssertionError(f"server not ready at {url} after {timeout}s")


@pytest.mark.slow
def test_personal_agent_commands_against_a_real_server(tmp_path: Path, tiny_model_path: Path) -> None:
    """The page's "Launch Personal Agent Training" and "Debug Rollout Collection" commands, for real:
    serve_model.py serves the tiny model with the RL intercept, test_rollout sends 10 sessions,
    collect_rollouts.py reports them from the rollout folder, inspect_sessions reads it."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    rollouts = tmp_path / "rollouts"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENCLAW_API_KEY", "RL_BUFFER_DIR", "OPENCLAW_DRY_RUN")}
    server = subprocess.Popen([sys.executable, str(REPO / "openclaw-combine/serve_model.py"), "--model-path",
                               str(tiny_model_path), "--port", str(port), "--rollout-dir", str(rollouts)],
                              cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_ready(url, server)
        debug_env = {**env, "OPENCLAW_DEBUG": "true", "ROLLOUT_LOG_LEVEL": "DEBUG"}
        sent = subprocess.run([sys.executable, "-m", "openclaw_combine.test_rollout", "--num-samples", "10",
                               "--output-dir", str(tmp_path / "debug_rollouts"), "--server-url", url,
                               "--rl-buffer-dir", str(rollouts), "--max-tokens", "4"], cwd=REPO, env=debug_env,
                              capture_output=True, text=True, timeout=600)
        assert sent.returncode == 0, sent.stderr[-3000:]
        collected = subprocess.run([sys.executable, "collect_rollouts.py", "--api-endpoint", url, "--output-dir",
                                    str(rollouts), "--session-aware", "--once"], cwd=REPO / "openclaw-combine",
                                   env=env, capture_output=True, text=True, timeout=120)
        assert collected.returncode == 0, collected.stderr[-3000:]
        assert "10 session(s), 20 main-line turn(s), 10 side turn(s)" in collected.stdout, collected.stdout
        code = ("from openclaw_combine.utils import inspect_sessions\n"
                f"sessions = inspect_sessions({str(rollouts)!r})\n"
                "print('sessions', len(sessions))")
        shown = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                               timeout=120)
        assert shown.returncode == 0 and "sessions 10" in shown.stdout and "Main-line turns: 2" in shown.stdout
        wrong = subprocess.run([sys.executable, "collect_rollouts.py", "--api-endpoint", url, "--output-dir",
                                str(tmp_path / "elsewhere"), "--once"], cwd=REPO / "openclaw-combine", env=env,
                               capture_output=True, text=True, timeout=120)
        assert wrong.returncode != 0 and "holds no rollouts" in wrong.stderr
        # train_async.py trains the model this server serves (read from it; no MODEL_PATH given)
        plan = subprocess.run([sys.executable, "train_async.py", "--rollout-dir", str(rollouts), "--checkpoint-dir",
                               str(tmp_path / "checkpoints"), "--method", "combine", "--server-url", url],
                              cwd=REPO / "openclaw-combine", capture_output=True, text=True, timeout=300,
                              env={**env, "OPENCLAW_DRY_RUN": "1", "LOG_DIR": str(tmp_path / "logs")})
        assert plan.returncode == 0, plan.stderr[-3000:]
        assert f"training the served model {tiny_model_path}" in plan.stderr
        assert f"--hf-checkpoint {tiny_model_path} " in plan.stdout and f"--rl-buffer-dir {rollouts} " in plan.stdout
    finally:
        server.terminate()
        server.wait(timeout=60)
