"""The second public page's trainer: `python train_async.py --rollout-dir ./rollouts --checkpoint-dir
./checkpoints --method combine --gpus 2,3,4,5` (run next to serve_model.py and collect_rollouts.py).

A thin wrapper over the launcher (`python -m openclaw.launch`), with the page's flags as its settings:

    --rollout-dir D       the rollouts serve_model.py records (RL_BUFFER_DIR; default ./rollouts)
    --checkpoint-dir C    CKPT_SAVE_DIR (C/checkpoint-<step>/ and checkpoint-latest)
    --method M            binary -> openclaw-rl, opd -> openclaw-opd, combine -> openclaw-combine
    --gpus 2,3,4,5        TRAIN_GPUS (refused on a machine without those GPUs)
    --server-url URL      the running server to train for and push weights to (OPENCLAW_SERVER_URL;
                          default http://127.0.0.1:$OPENCLAW_PORT, 8000: serve_model.py's)

The trainer must train the model the server serves: without MODEL_PATH it is read from the server
(`GET /v1/models`, the model's `root` folder); with no server answering, a warning says the
launcher's default model is used and must be the served one.

Training is asynchronous by construction: the server keeps serving and recording while the trainer
trains; the launcher also runs the judge on the rollouts. Other flags go to the component that
declares them (openclaw/launch/README.md); OPENCLAW_DRY_RUN=1 prints the plan.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import httpx

from openclaw.environment import env_value
from openclaw.launch.settings import count_gpus
from openclaw.methods import DEFAULT_METHOD, builtin_methods

REPO = Path(__file__).resolve().parents[1]
# the page's method names -> the launcher's recipes ("binary" is the page's name for rl)
METHODS = {"binary": builtin_methods()["rl"].recipe, **{name: m.recipe for name, m in builtin_methods().items()}}


def launch_command(argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """(the launcher's argv, its env); SystemExit with the reason when a flag cannot be honoured."""
    p = argparse.ArgumentParser(prog="train_async.py", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    p.add_argument("--rollout-dir", default=env_value("RL_BUFFER_DIR", env) or "./rollouts")
    p.add_argument("--checkpoint-dir")
    p.add_argument("--method", choices=sorted(METHODS), default=DEFAULT_METHOD)
    p.add_argument("--gpus")
    p.add_argument("--server-url")
    args, rest = p.parse_known_args(argv)
    out = dict(env)
    out["RL_BUFFER_DIR"] = str(Path(args.rollout_dir).resolve())
    if args.checkpoint_dir:
        out["CKPT_SAVE_DIR"] = str(Path(args.checkpoint_dir).resolve())
    port = env_value("OPENCLAW_PORT", env) or "8000"
    out["OPENCLAW_SERVER_URL"] = args.server_url or env_value("OPENCLAW_SERVER_URL", env) or f"http://127.0.0.1:{port}"
    if not (env_value("MODEL_PATH", env) or env_value("BASE_MODEL_PATH", env)):
        served = _served_model(out["OPENCLAW_SERVER_URL"], env_value("OPENCLAW_API_KEY", env))
        if served:
            out["MODEL_PATH"] = served
            print(f"train_async.py: training the served model {served} (from {out['OPENCLAW_SERVER_URL']}/v1/models)",
                  file=sys.stderr)
        else:
            print(f"train_async.py: WARNING: no server answered at {out['OPENCLAW_SERVER_URL']} and MODEL_PATH is "
                  "unset: the launcher's default model is trained; it must be the model the server serves",
                  file=sys.stderr)
    if args.gpus:
        found = count_gpus(env)
        ids = [i.strip() for i in args.gpus.split(",") if i.strip()]
        if not ids or not all(i.isdigit() for i in ids) or found == 0 or max(int(i) for i in ids) >= found:
            p.error(f"--gpus {args.gpus} needs those GPUs, and this machine has {found} (nvidia-smi -L); "
                    "drop --gpus to train on CPU")
        out["TRAIN_GPUS"] = ",".join(ids)
    return [sys.executable, "-m", "openclaw.launch", METHODS[args.method], *rest], out


def _served_model(url: str, key: str | None) -> str | None:
    try:
        r = httpx.get(f"{url.rstrip('/')}/v1/models", headers={"Authorization": f"Bearer {key}"} if key else {},
                      timeout=5)
        r.raise_for_status()
        return str(r.json()["data"][0]["root"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    cmd, env = launch_command(list(sys.argv[1:] if argv is None else argv), dict(os.environ))
    os.chdir(REPO)  # the launcher runs from the repository root (it submits the repo as the job's working dir)
    os.execvpe(cmd[0], cmd, env)
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
