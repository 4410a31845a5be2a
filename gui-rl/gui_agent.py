"""Run a model as a GUI agent on MiniWoB++ held-out seeds (what run_gui_agent.sh calls).

    python gui-rl/gui_agent.py --model smollm2 [--tasks one-step] [--episodes 10]
    python gui-rl/gui_agent.py --model qwen3.5-vl --base-url http://HOST:30000/v1   # SGLang on a GPU

Text models (smollm2, tiny, or a model folder) are served here by the embedded engine
(`python -m openclaw.server`, a private port, stopped afterwards) and act on the accessibility
tree. Vision-language names (qwen*-vl, *-vl*) need the GPU/SGLang path: an SGLang server serving
the model (`--base-url`), and they get the screenshot as an image part. On a machine without a
GPU such a name stops with an explanation.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import gui_eval
import httpx
from gui_screenshots import check_screenshot_backend

from openclaw.environment import env_value

ROOT = Path(__file__).resolve().parents[1]
VISION = re.compile(r"(^|[-_.])vl([-_.]|$)|qwen[\d.]*-?vl", re.IGNORECASE)


def has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and subprocess.run(
        ["nvidia-smi", "-L"], capture_output=True).returncode == 0


def text_model_path(name: str) -> str:
    from openclaw.models import build_tiny_model, default_model_path

    if name == "smollm2":
        return default_model_path()
    if name == "tiny":
        return str(build_tiny_model())
    if Path(name).is_dir():
        return name
    raise SystemExit(f"unknown model {name!r}: use smollm2, tiny, a model folder, or a *-vl name with a GPU")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_embedded(model_path: str, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "openclaw.server", "--model-path", model_path, "--port", str(port),
                             "--served-model-name", "gui-agent", "--log-level", "warning"],
                            cwd=ROOT, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the model server exited ({proc.returncode}); see {log}")
        try:
            if httpx.get(base + "/health", timeout=2).status_code == 200:
                return proc, base + "/v1"
        except httpx.HTTPError:
            pass
        time.sleep(0.5)  # polling the server's readiness, bounded by the deadline
    proc.terminate()
    raise SystemExit(f"the model server did not become healthy in 300 s; see {log}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default=env_value("GUI_AGENT_MODEL") or "smollm2")
    p.add_argument("--base-url", default=None, help="an OpenAI-compatible server already serving --model")
    p.add_argument("--tasks", nargs="+", default=["one-step"])
    p.add_argument("--episodes", type=int, default=10)
    p.add_argument("--max-steps", type=int, default=int(env_value("MAX_STEPS") or "4"))
    p.add_argument("--shuffle-ids", action="store_true", help="pages show their element ids drawn at random (gui_eval.py)")
    p.add_argument("--out", default="gui-rl/eval_out/agent")
    args = p.parse_args(argv)
    try:
        check_screenshot_backend(env_value("SCREENSHOT_BACKEND") or "playwright")
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    vision = bool(VISION.search(args.model))
    if vision and args.base_url is None:
        where = "this machine has a GPU" if has_gpu() else "this machine has NO GPU, so it cannot run here"
        print(f"{args.model} is a vision-language model: it runs on the GPU/SGLang path ({where}).\n"
              f"  1. on a GPU: python -m sglang.launch_server --model-path $MODEL_PATH --port 30000\n"
              f"  2. bash gui-rl/run_gui_agent.sh --model {args.model} --base-url http://HOST:30000/v1\n"
              "On a CPU machine use a text model on the accessibility tree: --model smollm2", file=sys.stderr)
        return 2
    # SIGTERM (timeout, a job scheduler) must run the `finally` below, or the model server outlives us.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    server = None
    base_url = args.base_url
    if base_url is None:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        server, base_url = serve_embedded(text_model_path(args.model), out / "server.log")
    try:
        return gui_eval.main(["--tasks", *args.tasks, "--policy", "model", "--base-url", base_url,
                              "--model", "gui-agent" if server else args.model, "--episodes", str(args.episodes),
                              "--max-steps", str(args.max_steps), "--out", args.out, *(["--vision"] if vision else []),
                              *(["--shuffle-ids"] if args.shuffle_ids else [])])
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
