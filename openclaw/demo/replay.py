"""Replay a recorded main-job run: its buffer's judged turns through the trainer, with its flags.

    python -m openclaw.demo.replay RUN_DIR [--steps N] [--evaluate] [--out DIR] [-- TRAINER FLAG ...]
    python -m openclaw.demo.replay --compare REPLAY_A REPLAY_B

A live run of the main job depends on timing (how many turns reach the buffer, and which ones
each step takes), so two runs never train on the same data, and a difference in their results can
be seed noise as easily as a code change. A replay trains on one run's recorded turns with the
run's trainer flags and LoRA initialisation (its seed), each step on the turns the run trained at
that step (the buffer's provenance ledger; `openclaw.bridge.RecordedStepsSource`). It prints each
replayed step beside the recorded one (gradient norm, loss, reward). Two replays of one run under
two versions of the code (or two sets of trainer flags after `--`) train on identical data; `--compare` gives the largest difference between their trained parameters, and
`--evaluate` measures the replayed model as the run measured its own (held-out acceptance,
on topic, capability, KL), beside the run's numbers.

The recorded run's folder is read only: the buffer is copied into `--out`, and the trainer reads
it under a consumer id of its own. Weight pushes go to an engine this command starts (the
embedded engine on the run's model), which also scores the teacher's log-probs for OPD.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import signal
import sqlite3
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from openclaw.bridge.recorded import RecordedStepsError
from openclaw.buffer import DB_NAME

REPLAY_CONSUMER = "openclaw-replay"
PARAMS_FILE = "trained_params.safetensors"
STEP_LABELS = {"gradient/norm": "grad_norm", "loss/total": "loss", "reward/mean": "reward"}
STEP_KEYS = tuple(STEP_LABELS)


class ReplayError(Exception):
    """A run folder or replay folder that cannot be used, with what is missing."""


@dataclass(frozen=True)
class RecordedRun:
    folder: Path
    trainer_flags: list[str]
    seed: int
    model_path: str
    steps: list[dict[str, float]]  # the run's logged step metrics, in step order
    results: dict[str, Any]  # the run's results.json

    @classmethod
    def load(cls, folder: Path) -> RecordedRun:
        flags_file, results_file = folder / "trainer_flags.txt", folder / "results.json"
        for needed in (flags_file, results_file, folder / "rl_buffer" / DB_NAME):
            if not needed.is_file():
                raise ReplayError(f"{folder} is not a finished main-job run: {needed.name} is missing "
                                  f"(a run folder of `python -m openclaw.demo` holds trainer_flags.txt, "
                                  f"results.json and rl_buffer/)")
        flags = flags_file.read_text().split()
        results = json.loads(results_file.read_text())
        metrics_file = folder / "logs" / "metrics.jsonl"
        steps = [json.loads(line) for line in metrics_file.read_text().splitlines() if line.strip()] \
            if metrics_file.is_file() else []
        return cls(folder=folder, trainer_flags=flags, seed=int(results["seed"]),
                   model_path=_flag_value(flags, "--hf-checkpoint"), steps=steps, results=results)

    @property
    def evaluated_steps(self) -> int:
        """The steps the run had trained when it took its last measurement (one weight version each)."""
        return int(self.results["points"][-1]["weight_version"])

    def demo_args(self) -> argparse.Namespace:
        """The run's own command line, parsed by the main job (its evaluation settings, persona)."""
        from openclaw.demo.__main__ import parse_args
        from openclaw.demo.personas import load_persona

        words = shlex.split(self.results["command"])
        if words[:3] != ["python", "-m", "openclaw.demo"]:
            raise ReplayError(f"results.json's command is not a main-job command: {self.results['command']!r}")
        args = parse_args(words[3:])
        source = Path(self.results["persona"].get("source") or "")
        args.persona_obj = load_persona(str(source) if source.is_file() else self.results["persona"]["name"])
        return args


@dataclass(frozen=True)
class ReplayedStep:
    step: int
    turn_ids: list[int]
    metrics: dict[str, float]
    recorded: dict[str, float] | None  # the same step of the recorded run, if it logged one
    recorded_turn_ids: list[int] | None  # the turns the run trained at this step (its ledger)

    @property
    def same_turns(self) -> bool | None:
        return None if self.recorded_turn_ids is None else self.turn_ids == self.recorded_turn_ids


def _flag_value(flags: list[str], name: str) -> str:
    if name not in flags or flags.index(name) + 1 >= len(flags):
        raise ReplayError(f"trainer_flags.txt has no {name} VALUE")
    return flags[flags.index(name) + 1]


def _with_flag(flags: list[str], name: str, value: str | None) -> list[str]:
    """`flags` with `name` set to `value` (None: a switch without a value), in place if present."""
    given = [value] if value is not None else []
    if name not in flags:
        return flags + [name] + given
    i = flags.index(name)
    has_value = i + 1 < len(flags) and not flags[i + 1].startswith("--")
    return flags[: i + 1] + given + flags[i + 1 + has_value:]


def _override(flags: list[str], extra: list[str]) -> list[str]:
    """The trainer flags given after `--` replace the recorded ones of the same name."""
    i = 0
    while i < len(extra):
        name = extra[i]
        if not name.startswith("--"):
            raise ReplayError(f"trainer flags after -- must be --name [VALUE] pairs; {name!r} is neither")
        value = extra[i + 1] if i + 1 < len(extra) and not extra[i + 1].startswith("--") else None
        flags = _with_flag(flags, name, value)
        i += 1 if value is None else 2
    return flags


def copy_buffer(source: Path, target: Path) -> None:
    """SQLite's online backup, not a file copy: a run's database may still have a write-ahead log."""
    target.mkdir(parents=True, exist_ok=True)
    src = sqlite3.connect(f"file:{source / DB_NAME}?mode=ro", uri=True)
    dst = sqlite3.connect(target / DB_NAME)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()


def replay_flags(run: RecordedRun, out: Path, engine_addr: str, extra: list[str]) -> list[str]:
    flags = list(run.trainer_flags)
    for name, value in (("--rl-buffer-dir", str(out / "rl_buffer")), ("--rollout-external-engine-addrs", engine_addr),
                        ("--log-dir", str(out / "logs")), ("--buffer-consumer-id", REPLAY_CONSUMER),
                        ("--data-source-path", "openclaw.bridge.RecordedStepsSource")):
        flags = _with_flag(flags, name, value)
    return _override(flags, extra)


def replay(run: RecordedRun, out: Path, *, steps: int, extra: list[str], threads: int,
           evaluate: bool = False) -> list[ReplayedStep]:
    import torch
    from safetensors.torch import save_file
    from slime.ray.engine_process import EngineProcess

    from openclaw.demo.trainer import BackgroundTrainer

    if out.exists() and any(out.iterdir()):
        raise ReplayError(f"--out {out} is not empty: a replay writes a fresh folder")
    demo_args = run.demo_args() if evaluate else None
    copy_buffer(run.folder / "rl_buffer", out / "rl_buffer")
    torch.set_num_threads(threads)
    print(f"replaying {run.folder} (seed {run.seed}) into {out}; starting the engine on {run.model_path}", flush=True)
    # one thread, as the main job's in-process engine: the teacher's log-probs come out the same
    engine = EngineProcess(model_path=run.model_path, log_path=out / "engine.log", extra_env={"OMP_NUM_THREADS": "1"},
                           engine_command="python -m openclaw.engines.serve", max_batch_size=48)
    engine.start()
    done: list[ReplayedStep] = []
    try:
        flags = replay_flags(run, out, engine.url.split("//", 1)[1], extra)
        (out / "trainer_flags.txt").write_text(" ".join(flags) + "\n")
        torch.manual_seed(run.seed)  # as the main job seeds it before its trainer: the same LoRA init
        trainer = BackgroundTrainer(flags)
        ledger = trainer.data_source.steps  # RecordedStepsSource: the run's steps, from its ledger
        try:
            while len(done) < steps:
                t0 = time.monotonic()
                rec = trainer.step_once()
                if rec is None:
                    print(f"the recorded run trained {len(ledger)} step(s); replayed {len(done)}", flush=True)
                    break
                recorded = run.steps[rec.step] if rec.step < len(run.steps) else None
                step = ReplayedStep(rec.step, sorted(int(s.index) for s in rec.samples_data),
                                    {k: rec.metrics[k] for k in STEP_KEYS if k in rec.metrics},
                                    {k: recorded[k] for k in STEP_KEYS if k in recorded} if recorded else None,
                                    ledger.get(rec.step))
                done.append(step)
                print(_step_line(step, time.monotonic() - t0), flush=True)
            params = {name: p.detach().contiguous().clone() for name, p in trainer.model.named_parameters()
                      if p.requires_grad}
            save_file(params, str(out / PARAMS_FILE))
            evaluation = _evaluate(run, demo_args, engine.url, trainer, len(done)) if demo_args else None
        finally:
            trainer.stop()
    finally:
        engine.stop()
    (out / "replay.json").write_text(json.dumps(
        {"run": str(run.folder), "seed": run.seed, "flags": flags, "evaluation": evaluation,
         "steps": [asdict(s) | {"same_turns": s.same_turns} for s in done]}, indent=2) + "\n")
    print(f"trained parameters: {out / PARAMS_FILE}; steps: {out / 'replay.json'}")
    return done


def _evaluate(run: RecordedRun, demo_args: argparse.Namespace, url: str, trainer: Any, steps: int) -> dict[str, Any]:
    """The main job's own evaluation of the replayed model, printed beside the run's last point."""
    from openclaw.demo import evaluate as ev

    heldout, probe = ev.heldout_prompts()[: demo_args.eval_limit], ev.load_probe()[: demo_args.eval_limit]
    print(f"evaluating the replayed model ({len(heldout)} held-out prompts, {len(probe)} probe questions)", flush=True)
    point = ev.evaluate(url, trainer.actor.tokenizer, demo_args.persona_obj, heldout, probe,
                        interactions=int(run.results["interactions"]), weight_version=trainer.weight_version,
                        max_tokens=demo_args.eval_max_tokens, kl_model=trainer.model).to_dict()
    base, last = run.results["points"][0], run.results["points"][-1]
    kl = "-" if point["kl_to_base"] is None else f"{point['kl_to_base']:.3f}"
    print(f"after {steps} replayed steps: acceptance {point['acceptance']:.1f}% | on topic {point['on_topic']:.1f}% | "
          f"capability {point['capability']:.1f}% | KL {kl}")
    print(f"the run, base:           acceptance {base['acceptance']:.1f}% | on topic {base['on_topic']:.1f}% | "
          f"capability {base['capability']:.1f}%")
    print(f"the run, after {last['weight_version']} steps: acceptance {last['acceptance']:.1f}% | "
          f"on topic {last['on_topic']:.1f}% | capability {last['capability']:.1f}%", flush=True)
    return point


def _step_line(step: ReplayedStep, seconds: float) -> str:
    def fmt(metrics: dict[str, float]) -> str:
        return " ".join(f"{STEP_LABELS[k]}={metrics[k]:.6f}" for k in STEP_KEYS if k in metrics)

    line = f"step {step.step}: {len(step.turn_ids)} turns, {fmt(step.metrics)} ({seconds:.1f} s)"
    if step.recorded is None:
        return line + " | not in the recorded run"
    same = all(math.isclose(step.metrics[k], step.recorded[k], rel_tol=1e-4, abs_tol=1e-6)
               for k in STEP_KEYS if k in step.metrics and k in step.recorded)
    turns = {None: "", True: "same turns, ", False: "OTHER turns, "}[step.same_turns]
    return line + f" | recorded: {turns}{fmt(step.recorded)}{'' if same else '  << differs'}"


def compare(a: Path, b: Path) -> dict[str, Any]:
    """The largest absolute difference between two replays' trained parameters."""
    from safetensors.torch import load_file

    missing = [p / PARAMS_FILE for p in (a, b) if not (p / PARAMS_FILE).is_file()]
    if missing:
        raise ReplayError(f"not a finished replay: {', '.join(map(str, missing))} is missing")
    pa, pb = load_file(str(a / PARAMS_FILE)), load_file(str(b / PARAMS_FILE))
    if pa.keys() != pb.keys():
        raise ReplayError(f"the two replays trained different parameters ({len(pa)} against {len(pb)} tensors): "
                          "compare replays of one run with the same adapter flags")
    diffs = {name: float((pa[name].float() - pb[name].float()).abs().max()) for name in pa}
    worst = max(diffs, key=diffs.get)
    return {"tensors": len(diffs), "max_abs_diff": diffs[worst], "worst_tensor": worst,
            "max_abs_value": max(float(t.abs().max()) for t in pa.values())}


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="python -m openclaw.demo.replay",
                                description=__doc__.split("\n\n")[0].strip() if __doc__ else None)
    p.add_argument("run_dir", nargs="?", type=Path, help="a run folder of `python -m openclaw.demo`")
    p.add_argument("--steps", type=int, default=None,
                   help="steps to replay (default: as many as the run had trained at its last evaluation)")
    p.add_argument("--evaluate", action="store_true",
                   help="evaluate the replayed model with the run's own evaluation settings and persona")
    p.add_argument("--out", type=Path, default=None, help="default: RUN_DIR/replay-<time>")
    p.add_argument("--threads", type=int, default=2, help="torch threads of the trainer")
    p.add_argument("--compare", nargs=2, type=Path, metavar=("REPLAY_A", "REPLAY_B"),
                   help="compare two finished replays' trained parameters (no run)")
    args = p.parse_args(argv)
    if (args.run_dir is None) == (args.compare is None):
        p.error("give either RUN_DIR or --compare REPLAY_A REPLAY_B")
    if args.steps is not None and args.steps < 1:
        p.error("--steps must be positive")
    if args.compare and (extra or args.evaluate or args.steps):
        p.error("--steps, --evaluate and trainer flags after -- apply to a replay, not to --compare")
    return args, extra


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(list(sys.argv[1:] if argv is None else argv))
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a kill stops the engine we start, as Ctrl-C does
    try:
        if args.compare:
            result = compare(*args.compare)
            print(json.dumps(result, indent=2))
            return 0
        run = RecordedRun.load(args.run_dir.resolve())
        out = (args.out or run.folder / f"replay-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
        steps = args.steps or run.evaluated_steps
        replay(run, out, steps=steps, extra=extra, threads=args.threads, evaluate=args.evaluate)
        return 0
    except (ReplayError, RecordedStepsError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
