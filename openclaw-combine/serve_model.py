"""The second public page's model server: `python serve_model.py --model-path M --port 8000 --gpu-ids 0,1`.

A thin wrapper over `python -m openclaw.server` with the RL intercept on, so the conversations it
serves are recorded as rollouts (the page's next step, `collect_rollouts.py --output-dir ./rollouts`,
reads them; `train_async.py --rollout-dir ./rollouts` trains on them):

    --model-path M     the server's --model-path (default: $MODEL_PATH, else the embedded SmolLM2 on CPU)
    --port P           the server's --port (default: $OPENCLAW_PORT, else 8000)
    --gpu-ids 0,1      serve with SGLang on those GPUs (CUDA_VISIBLE_DEVICES, --tp-size = their number);
                       refused on a machine without them. Without it: the embedded engine (CPU or one GPU)
    --rollout-dir D    where the turns are recorded (default: $RL_BUFFER_DIR, else ./rollouts)

Any other flag is the server's (`python -m openclaw.server --help`). OPENCLAW_API_KEY, when set, is
required by the server. OPENCLAW_DRY_RUN=1 prints the command instead of running it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from openclaw.environment import env_value
from openclaw.launch.settings import count_gpus


def server_argv(argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(the server's command line, env vars to add); SystemExit with a message when refused."""
    p = argparse.ArgumentParser(prog="serve_model.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--model-path")
    p.add_argument("--port", type=int)
    p.add_argument("--gpu-ids", help="comma-separated GPU ids to serve on (SGLang, tensor parallel over them)")
    p.add_argument("--rollout-dir", default=env_value("RL_BUFFER_DIR", env) or "./rollouts")
    args, rest = p.parse_known_args(argv)
    cmd = [sys.executable, "-m", "openclaw.server", "--enable-rl-intercept", "--rl-buffer-dir", args.rollout_dir]
    if args.model_path:
        cmd += ["--model-path", args.model_path]
    if args.port is not None:
        cmd += ["--port", str(args.port)]
    extra_env: dict[str, str] = {}
    if args.gpu_ids:
        ids = [i.strip() for i in args.gpu_ids.split(",") if i.strip()]
        found = count_gpus(env)
        if not ids or not all(i.isdigit() for i in ids):
            p.error(f"--gpu-ids {args.gpu_ids!r}: expected comma-separated GPU numbers, e.g. 0,1")
        if found == 0 or max(int(i) for i in ids) >= found:
            p.error(f"--gpu-ids {args.gpu_ids} needs those GPUs, and this machine has {found} (nvidia-smi -L); "
                    "drop --gpu-ids to serve with the embedded engine on CPU")
        extra_env["CUDA_VISIBLE_DEVICES"] = ",".join(ids)
        cmd += ["--backend", "sglang", "--tp-size", str(len(ids))]
    return [*cmd, *rest], extra_env


def main(argv: list[str] | None = None) -> int:
    env = dict(os.environ)
    cmd, extra_env = server_argv(list(sys.argv[1:] if argv is None else argv), env)
    shown = " ".join(f"{k}={v}" for k, v in extra_env.items())
    if (env_value("OPENCLAW_DRY_RUN", env) or "0").lower() not in ("0", "false", "no"):
        print(f"would run server: {shown + ' ' if shown else ''}{shlex.join(cmd)}")
        return 0
    os.execvpe(cmd[0], cmd, {**env, **extra_env})
    return 1  # not reached: exec replaces this process


if __name__ == "__main__":
    sys.exit(main())
