"""The live loop end to end, as a user runs it: the LoRA run script serves the model with the RL
intercept, judges turns, trains in a Ray job and pushes each step's adapter to the server; this script
plays the user (chats with feedback) until the job has trained `--steps` steps, then checks that the
server came to serve a second trained weight version. `scripts/gpu_smoke.sh` runs it on a GPU; on a
machine without one it runs the same loop on the CPU.

    python scripts/live_smoke.py --model DIR [--backend hf|sglang] [--steps 2] [--out DIR] [--timeout 420]

The judge is the demo's length-only reward (`--custom-rm-path`): it needs no judge model, so the
check runs on a machine with no network and only a tiny model. Exit status 0 when every check
passes; the launcher's own output is in OUT/launcher.log.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
RUN_SCRIPT = "openclaw-rl/run_qwen3_7b_lora_openclaw_rl.sh"
REWARD = "openclaw/demo/length_reward.py:length_only_reward"
FEEDBACK = ("Thanks, that is right.", "No, that is wrong and far too long.")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def launcher_env(model: str, out: Path, steps: int) -> dict[str, str]:
    drop = ("RAY_ADDRESS", "OPENCLAW_DRY_RUN", "DRY_RUN", "OPENCLAW_API_KEY", "METHOD_ARGS", "OPENCLAW_SERVER_URL")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(MODEL_PATH=model, NUM_ROLLOUT=str(steps), OPENCLAW_PORT=str(free_port()),
               RAY_DASHBOARD_PORT=str(free_port()), LOG_DIR=str(out / "logs"), RL_BUFFER_DIR=str(out / "buffer"),
               CKPT_SAVE_DIR=str(out / "ckpt"), CKPT_ARGS=f"--save-interval {steps} --save-dir {out / 'ckpt'}",
               LORA_ARGS="--use-lora --lora-rank 16 --lora-alpha 32 --lora-target-modules all-linear",
               OPTIMIZER_ARGS="--lr 1e-3", RAY_NUM_CPUS=env.get("RAY_NUM_CPUS", "4"),
               ROLLOUT_ARGS="--rollout-batch-size 1 --n-samples-per-prompt 4 --rollout-temperature 1.0",
               OPENCLAW_PROGRESS_INTERVAL="10", RAY_AUTH_MODE="disabled", PYTHONUNBUFFERED="1",
               RAY_START_TIMEOUT="120")  # a head that does not come up fails within the run's budget
    return env


def gpu_processes() -> list[str]:
    """The processes holding GPU memory now (`nvidia-smi`), one `pid, name, MiB` line each."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
                         capture_output=True, text=True, timeout=30)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def chat_until_done(base: str, proc: subprocess.Popen, deadline: float, on_gpu: list[str] | None) -> list[str]:
    """Sessions of a question and the user's feedback, until the launcher exits; returns the served
    weight versions seen after each session. `on_gpu`: filled once, while training is under way, with
    the processes holding GPU memory."""
    seen: list[str] = []
    with httpx.Client(base_url=base, timeout=120) as client:
        i = 0
        while proc.poll() is None and time.monotonic() < deadline:
            sid = f"live-smoke-{i}"
            # short and long replies: the length-only reward differs within a group, so the step has a gradient
            q = {"role": "user", "content": f"Name a city in country number {i}."}
            try:
                r = client.post("/v1/chat/completions", headers={"X-Session-Id": sid},
                                json={"model": "m", "messages": [q], "max_tokens": 8 if i % 2 else 64})
                if r.status_code != 200:
                    raise RuntimeError(f"chat answered {r.status_code}: {r.text[:500]}")
                reply = r.json()["choices"][0]["message"].get("content") or ""
                r = client.post("/v1/chat/completions", headers={"X-Session-Id": sid, "X-Session-Done": "true"},
                                json={"model": "m", "max_tokens": 1, "messages": [
                                    q, {"role": "assistant", "content": reply},
                                    {"role": "user", "content": FEEDBACK[i % 2]}]})
                seen.append(str(client.get("/v1/models").json()["data"][0]["weight_version"]))
                if on_gpu is not None and not on_gpu and seen[-1] not in ("0", "None"):
                    on_gpu.extend(gpu_processes())
            except httpx.HTTPError:
                try:  # the job ended and the launcher is stopping the server (else: a real failure)
                    proc.wait(timeout=60)
                    break
                except subprocess.TimeoutExpired:
                    raise

            i += 1
    return seen


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="the model folder to serve and train (LoRA)")
    p.add_argument("--backend", choices=("hf", "sglang"), default="hf",
                   help="the server's engine: hf (the embedded engine, CPU or GPU) or sglang (GPU; TP=N in the "
                        "environment sets its tensor parallelism)")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--out", type=Path, default=None, help="logs, buffer and checkpoints (default: a new /tmp folder)")
    p.add_argument("--timeout", type=float, default=420.0, help="seconds for the whole run")
    p.add_argument("--expect-gpu", action="store_true",
                   help="also check that the server and the trainer each held GPU memory (nvidia-smi)")
    args = p.parse_args(argv)
    out = (args.out or Path(subprocess.check_output(["mktemp", "-d", "/tmp/openclaw-live-smoke.XXXXXX"],
                                                    text=True).strip())).resolve()
    out.mkdir(parents=True, exist_ok=True)
    env = launcher_env(args.model, out, args.steps)
    base = f"http://127.0.0.1:{env['OPENCLAW_PORT']}"
    print(f"== live loop: {RUN_SCRIPT} --backend {args.backend}, model {args.model}, {args.steps} steps, output {out}", flush=True)
    log = open(out / "launcher.log", "w")
    proc = subprocess.Popen(["bash", RUN_SCRIPT, "--backend", args.backend, "--custom-rm-path", REWARD], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    submitted = threading.Event()

    def relay() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            log.write(line)
            log.flush()
            print("   | " + line, end="", flush=True)
            if "submitting the trainer" in line:
                submitted.set()
        submitted.set()

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    deadline = time.monotonic() + args.timeout
    t0 = time.monotonic()
    versions: list[str] = []
    try:
        if not submitted.wait(max(1.0, deadline - time.monotonic())) or proc.poll() is not None:
            print(f"FAIL: the launcher did not reach the job submission (exit {proc.poll()})", file=sys.stderr)
            return 1
        on_gpu: list[str] | None = [] if args.expect_gpu else None
        versions = chat_until_done(base, proc, deadline, on_gpu)
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        print(f"FAIL: the run did not end within {args.timeout:.0f} s", file=sys.stderr)
        return 1
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # the launcher stops everything it started
            proc.wait(timeout=120)
        reader.join(timeout=30)
        log.close()
    took = time.monotonic() - t0
    metrics = out / "logs" / "metrics.jsonl"
    rows = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()] if metrics.is_file() else []
    steps = [r for r in rows if "step" in r]
    for r in steps:
        print(f"step {r['step']}: loss/total={r.get('loss/total')} reward/mean={r.get('reward/mean')} "
              f"gradient/norm={r.get('gradient/norm')} weights/version={r.get('weights/version')} "
              f"time/step={r.get('time/step')}", flush=True)
    adapters = sorted((out / "ckpt").glob("checkpoint-*/adapter_model.safetensors"))
    server_log = (out / "logs" / "server.log").read_text(errors="replace") if (out / "logs" / "server.log").is_file() else ""
    checks = {
        "launcher exited 0": rc == 0,
        f"{args.steps} training steps logged": len(steps) == args.steps,
        "the server served trained weights (version >= 1)": any(v not in ("0", "None") for v in versions),
        f"the last push reached the server (weights/version {args.steps})":
            bool(steps) and steps[-1].get("weights/version") == args.steps,
        f"the server promoted weight version {args.steps} (passed its canary: served)":
            f"weight version {args.steps} passed the canary" in server_log,
        "a LoRA adapter checkpoint was saved": bool(adapters),
    }
    if on_gpu is not None:
        print("processes on the GPU during training: " + ("; ".join(on_gpu) or "none"), flush=True)
        # the server (engine + canary) and the train actor: two processes or more
        checks["the server and the trainer both ran on the GPU"] = len({line.split(",")[0] for line in on_gpu}) >= 2
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}", flush=True)
    print(f"served weight versions seen: {' '.join(dict.fromkeys(versions))}; {took:.0f} s", flush=True)
    if not all(checks.values()):
        return 1
    print(f"OK: live loop, {args.steps} LoRA steps trained from judged chats and pushed to the serving engine "
          f"in {took:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
