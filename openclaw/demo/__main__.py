"""The main job: talk to the model, it gets better.

    python -m openclaw.demo [--persona NAME|FILE] [--method combine|rl|opd] [--interactions N]
                            [--minutes M] [--reward judge|length] [--out DIR]
    python -m openclaw.demo --personas brief,no_vague [...]   (several users, an adapter each)

Serves the embedded model (SmolLM2-135M-Instruct, CPU) behind the OpenAI API with the RL
intercept, runs the CPU judge on the trajectory buffer, trains in the background with the
chosen method (LoRA), and drives the server with simulated users of one persona (default
"brief"; a user is one persona, so each persona trains its own adapter). Learning is measured
independently of the judge, at fixed points: the persona's verdict on held-out prompts (its
IFEval instructions AND on topic), a capability probe, and KL to the base model; plus the
reference project's metric, sessions until the preference holds in 3 consecutive live sessions.
Prints a table and a verdict and writes results.json + learning.png to --out.

`--reward length` trains binary RL on a length-only reward instead of the judge: the
reward-hacking check, which the verdict must flag as FAILED.

`--personas a,b` runs one server for several users, a persona each, and trains each user's own
adapter on that user's turns only (openclaw/demo/multi_user.py); `--interactions` is then per user.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from openclaw.demo.personas import DEFAULT_PERSONA, PersonaError, load_persona, persona_names
from openclaw.demo.presets import BASELINES, DEFAULT_METHOD, METHODS, RL_SCORES, demo_preset, kl_flags
from openclaw.environment import env_value
from openclaw.methods import get_method, method_arg

LENGTH_REWARD = "openclaw/demo/length_reward.py:length_only_reward"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m openclaw.demo", description=__doc__.split("\n\n")[0])
    p.add_argument("--persona", default=DEFAULT_PERSONA,
                   help=f"a shipped persona ({', '.join(persona_names())}) or the path of a persona JSON file "
                        "(format: openclaw/demo/README.md)")
    p.add_argument("--personas", default=None,
                   help="two or more shipped personas, comma-separated: one server, a user per persona, each user's "
                        "adapter trained on their own turns only (openclaw/demo/multi_user.py)")
    p.add_argument("--method", type=method_arg, default=DEFAULT_METHOD,
                   help=f"{', '.join(METHODS)}, or a method file's path (openclaw.methods; default {DEFAULT_METHOD})")
    p.add_argument("--interactions", type=int, default=640,
                   help="simulated-user sessions (each one trainable turn); --minutes ends the phase first on 2 "
                        "cores (410-550 in 14 min; measured against 320: bench/HISTORY.md, 2026-11-24, '640 interactions')")
    p.add_argument("--minutes", type=float, default=14.0, help="time budget of the interaction/training phase")
    p.add_argument("--reward", choices=("judge", "length"), default="judge",
                   help="length: binary RL on a length-only reward (the reward-hacking check)")
    p.add_argument("--evals", type=int, default=3, help="evaluation points after the base model's")
    p.add_argument("--batch-size", type=int, default=8, help="trainable turns per training step")
    p.add_argument("--lr", type=float, default=None, help="default: the preset's (openclaw/demo/presets.py:demo_preset)")
    p.add_argument("--lora-rank", type=int, default=16)
    p.add_argument("--baseline", choices=BASELINES, default=None,
                   help="scalar-reward baseline: the mean score of each training batch (one GRPO group), 0, or "
                        "(binary RL) a running mean carried across steps; default: batch "
                        "(openclaw/demo/presets.py:demo_preset; 0 with --reward length)")
    p.add_argument("--rl-score", choices=RL_SCORES, default=None,
                   help="binary RL's reward (rl, and combine's binary-RL half): the judge's sign or its graded score "
                        "in [-1, 1]; default: graded for --method rl on the judge (openclaw-rl/README.md, 'Reward "
                        "signal')")
    combine = demo_preset("combine")  # the help states the preset's values rather than restating them
    p.add_argument("--kl-coef", type=float, default=None,
                   help="KL(policy || base) loss weight (low-variance estimator; the base = adapters off); "
                        f"default {combine.kl_coef:g}, {demo_preset('rl', 'length').kl_coef:g} with --reward length "
                        "(openclaw/demo/presets.py:demo_preset)")
    p.add_argument("--kl-target", type=float, default=None,
                   help="steer the KL weight toward this batch KL(policy || base) after each step, starting from "
                        "--kl-coef (adaptive KL: slime's --kl-loss-target); 0 keeps the weight fixed; default: "
                        f"{combine.kl_target:g} for combine, fixed for rl and opd (openclaw/demo/presets.py:demo_preset)")
    p.add_argument("--kl-horizon", type=float, default=None,
                   help="with a KL target: train steps over which a persistent KL error moves the weight by 20%% "
                        f"(slime's --kl-loss-horizon); default: the preset's ({combine.kl_horizon:g} for combine), "
                        "else slime's")
    p.add_argument("--w-opd", type=float, default=None,
                   help=f"combine: OPD weight (default {combine.w_opd:g}, the method's embedded preset; its own loss "
                        f"weight is {get_method('combine').weights[0]:g}: openclaw/methods/combine.py says why)")
    p.add_argument("--w-rl", type=float, default=None,
                   help=f"combine: binary-RL weight (default: the method's, {get_method('combine').weights[1]:g})")
    p.add_argument("--max-tokens", type=int, default=64,
                   help="reply cap while chatting (a reply that hits it is far over 25 words anyway)")
    p.add_argument("--eval-max-tokens", type=int, default=48,
                   help="reply cap when evaluating: 48 tokens is > 25 words, so capped replies are rejected either way")
    p.add_argument("--concurrency", type=int, default=8, help="simulated users talking at once")
    p.add_argument("--model-path", default=None, help="default: the embedded SmolLM2-135M-Instruct")
    p.add_argument("--eval-limit", type=int, default=None,
                   help="use only the first N held-out prompts and probe questions (quick runs; the verdict "
                        "needs the full sets)")
    p.add_argument("--target", type=float, default=25.0, help="acceptance gain (points) the verdict requires")
    p.add_argument("--out", default="./demo_out")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile", action="store_true",
                   help="time every phase (serving, judge, trainer phases, weight push, evaluation) against this "
                        "machine's matmul peak; prints the table and writes profile.md (openclaw/demo/profile.py)")
    p.add_argument("--trainer-workers", type=int, default=os.cpu_count() or 1,
                   help="--personas: users' trainers stepped at once (round-robin over users with a batch waiting; "
                        "default: one per core, at most one per user)")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads per thread of work (serving and training run side by side; on a small or "
                        "busy machine, more threads than cores makes OpenMP spin and everything crawl)")
    args = p.parse_args(argv)
    if args.interactions < 1 or args.minutes <= 0 or args.evals < 1 or args.batch_size < 1 or args.trainer_workers < 1:
        p.error("--interactions, --minutes, --evals, --batch-size and --trainer-workers must be positive")
    method = get_method(args.method)
    if args.personas is not None and args.persona != DEFAULT_PERSONA:
        p.error("--persona and --personas: give one persona (--persona) or several users (--personas), not both")
    if args.personas is not None and (args.reward != "judge" or args.profile):
        p.error("--personas runs the judge-rewarded methods without --profile (--reward length and --profile are "
                "single-user checks)")
    if args.reward == "length" and (method.uses_teacher or not method.uses_score):
        p.error("--reward length is the binary-RL reward-hacking check: use it with --method rl")
    if method.weights is None and (args.w_opd is not None or args.w_rl is not None):
        p.error(f"--w-opd/--w-rl weigh combine's two signals; {method.name} has one")
    preset = demo_preset(args.method, args.reward)
    if method.weights is not None and args.w_opd is None:
        args.w_opd = preset.w_opd
    args.baseline, args.rl_score = args.baseline or preset.baseline, args.rl_score or preset.rl_score
    args.kl_coef = preset.kl_coef if args.kl_coef is None else args.kl_coef
    args.lr = preset.lr if args.lr is None else args.lr
    if args.kl_target is None and args.kl_coef > 0:
        args.kl_target = preset.kl_target
    elif args.kl_target == 0:  # 0 turns the steering off
        args.kl_target = None
    if args.kl_target is not None and args.kl_horizon is None:
        args.kl_horizon = preset.kl_horizon
    try:  # checked now, not when the trainer starts after the model has loaded
        kl_flags(args.kl_coef, args.kl_target, args.kl_horizon)
    except ValueError as e:
        p.error(f"--kl-coef/--kl-target/--kl-horizon: {e}")
    if method.uses_score and args.baseline not in method.baselines:
        p.error(f"--baseline {args.baseline} is not {method.name}'s option: it takes {', '.join(method.baselines)} "
                "(the running baseline is binary RL's: use it with --method rl)")
    if not method.uses_score and args.rl_score != "sign":
        p.error(f"--rl-score graded is a binary-RL reward: use it with --method rl or combine ({method.name} has no "
                "scalar reward)")
    return args


class Progress:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def __call__(self, msg: str) -> None:
        s = int(time.monotonic() - self.t0)
        print(f"[{s // 60:02d}:{s % 60:02d}] {msg}", flush=True)


def trainable_judged(buf: Any, consumer: str, pending: set[int], kinds: frozenset[str], signal: Any,
                     user: str | None = None) -> int:
    """Judged turns (of `user`; None: every user's) the trainer has not taken yet that it can train on."""
    judged = [r for r in buf.fetch_judged(consumer, limit=100000, user_id=user)
              if r.turn_id not in pending and r.next_state]
    return sum(1 for r in judged if signal(r).kind in kinds)


def backlog(buf: Any, consumer: str, pending: set[int], kinds: frozenset[str], signal: Any,
            user: str | None = None) -> int:
    """Turns the trainer has not taken yet that could be trained on (judged with signal, or not
    judged yet), of `user` or of every user."""
    return buf.unjudged_count(user) + trainable_judged(buf, consumer, pending, kinds, signal, user)


def run(args: argparse.Namespace) -> int:
    import torch

    from openclaw.bridge import trainable_kinds, turn_signal
    from openclaw.buffer import TrajectoryBuffer
    from openclaw.demo import evaluate as ev
    from openclaw.demo import metrics, report
    from openclaw.demo import profile as prof
    from openclaw.demo.presets import method_flags
    from openclaw.demo.trainer import BackgroundTrainer
    from openclaw.demo.users import SimulatedUsers
    from openclaw.engines.hf_engine import HFEngine
    from openclaw.intercept.config import InterceptConfig
    from openclaw.judge.config import JudgeConfig
    from openclaw.judge.worker import JudgeService
    from openclaw.models import resolve_model_path
    from openclaw.server.app import create_app
    from openclaw.server.config import RLConfig, ServerConfig
    from openclaw.server.runner import serve_in_background

    say = Progress()
    # Timed first, before anything else loads the cores.
    peak = {n: prof.matmul_peak_gflops(n) for n in sorted({args.threads, os.cpu_count() or 1})} if args.profile else {}
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model_path = str(resolve_model_path(args.model_path))
    persona = args.persona_obj
    out = Path(args.out).resolve() / (f"{persona.name}-{get_method(args.method).name}{'-length' if args.reward == 'length' else ''}"
                                      f"-s{args.seed}-{time.strftime('%Y%m%d-%H%M%S')}")
    buffer_dir = out / "rl_buffer"
    out.mkdir(parents=True, exist_ok=True)
    print("=" * 78)
    reward = args.reward if not get_method(args.method).uses_score or args.reward == "length" else f"{args.reward}, {args.rl_score}"
    print(f"OpenClaw-RL demo: method {args.method} (reward: {reward}), persona '{persona.name}': {persona.preference}")
    print(f"model {model_path} | CPU threads {torch.get_num_threads()} | LoRA r{args.lora_rank} lr {args.lr:g}"
          + (f" | KL coef {args.kl_coef:g}" if args.kl_coef else "")
          + (f", steered to KL {args.kl_target:g}" if args.kl_target is not None else ""))
    print(f"{args.interactions} interactions within {args.minutes:g} min, {args.evals} evaluation points | output {out}")
    print("=" * 78, flush=True)

    say("loading the serving engine and starting the server (OpenAI API + RL intercept)")
    # Room for a whole evaluation set in one decode batch (45 held-out prompts). The prefix cache
    # keeps each finished reply's KV: the user's answer to it (the session's next request) then
    # prefills only its own words (~4k tokens: two rounds of sessions).
    engine = HFEngine.load(model_path, dtype="float32", device="cpu", max_batch_size=max(48, args.concurrency),
                           prefix_cache_tokens=4096)
    app = create_app(ServerConfig(rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buffer_dir, session_idle_timeout=900.0))),
                     engine=engine)
    server = serve_in_background(app)
    url = server.base_url
    judge = trainer = None
    try:
        say(f"server at {url}; starting the CPU judge on {buffer_dir}")
        judge = JudgeService(JudgeConfig(backend="cpu", num_workers=1, batch_size=16, poll_interval_s=0.3), buffer_dir).start()
        extra = ["--custom-rm-path", LENGTH_REWARD] if args.reward == "length" else []
        extra += kl_flags(args.kl_coef, args.kl_target, args.kl_horizon)
        method = get_method(args.method)
        if method.weights is not None:
            extra += [f for flag, v in zip(method.weight_flags, (args.w_opd, args.w_rl), strict=True)
                      if v is not None for f in (flag, str(v))]
        flags = method_flags(args.method, model_path=model_path, engine_addr=url.split("//", 1)[1],
                             buffer_dir=str(buffer_dir), batch_size=args.batch_size, lr=args.lr, lora_rank=args.lora_rank,
                             wait_timeout=3.0, extra=extra + ["--log-dir", str(out / "logs")], baseline=args.baseline,
                             rl_score=args.rl_score)
        (out / "trainer_flags.txt").write_text(" ".join(flags) + "\n")
        say("loading the trainer (slime FSDP actor, LoRA) with the method's plugins")
        trainer = BackgroundTrainer(flags)
        tok = trainer.actor.tokenizer
        heldout, probe = ev.heldout_prompts()[: args.eval_limit], ev.load_probe()[: args.eval_limit]
        # Which judged turns the trainer will take (with the length reward: every turn with feedback).
        kinds = frozenset({"hint+score", "hint", "score", "none"}) if args.reward == "length" else \
            trainable_kinds(args.method)

        eval_work = prof.EngineWindow()  # the engine's work inside evaluations, kept out of the serving phase

        def measure(n: int) -> Any:
            with trainer.pause():
                say(f"evaluating at {n} interactions ({len(heldout)} held-out prompts, {len(probe)} probe questions)")
                eval_work.begin(engine.work.snapshot())
                point = ev.evaluate(url, tok, persona, heldout, probe, interactions=n,
                                    weight_version=trainer.weight_version, max_tokens=args.eval_max_tokens,
                                    kl_model=trainer.model if trainer.weight_version > 0 else None)
                eval_work.end(engine.work.snapshot())
                if trainer.weight_version == 0:
                    point.kl_to_base = 0.0  # the untrained policy is the base model
            kl = "-" if point.kl_to_base is None else f"{point.kl_to_base:.3f}"
            say(f"  acceptance {point.acceptance:.1f}% | preference {point.preference:.1f}% | on topic {point.on_topic:.1f}% "
                f"| capability {point.capability:.1f}% | {point.mean_words:.0f} words | KL {kl} ({point.seconds:.0f}s)")
            return point

        points = [measure(0)]
        phase_t0, phase_cpu0, work0 = time.monotonic(), prof.process_cpu_seconds(), engine.work.snapshot()
        eval_work.totals.clear()  # the base model's evaluation is before the phase
        trainer.start()
        users = SimulatedUsers(url, persona, ev.train_prompts(), seed=args.seed, max_tokens=args.max_tokens)
        milestones = sorted({max(1, round(args.interactions * k / args.evals)) for k in range(1, args.evals + 1)})
        deadline = time.monotonic() + args.minutes * 60
        watch = TrajectoryBuffer.open(buffer_dir)
        consumer = trainer.data_source.cfg.consumer_id
        accepted_live = 0
        done = 0
        sessions: list[dict[str, Any]] = []
        try:
            for milestone in milestones:
                while done < milestone and time.monotonic() < deadline:
                    if trainer.state.error is not None:
                        raise RuntimeError(f"trainer failed: {trainer.state.error}") from trainer.state.error
                    # Stay near on-policy: talk again only when the trainer has (almost) caught up.
                    if backlog(watch, consumer, set(trainer.data_source.pending), kinds,
                                lambda r: turn_signal(r, trainer.data_source.graded)) >= args.batch_size:
                        time.sleep(0.5)  # polling the trainer's progress (a separate thread)
                        continue
                    n = min(args.batch_size, milestone - done)
                    got = users.drive(n, args.concurrency)
                    done += n
                    accepted_live += sum(i.accepted for i in got)
                    sessions += [i.record() for i in got]
                    last = trainer.state.steps[-1] if trainer.state.steps else None
                    lm = last.metrics if last else {}
                    say(f"interactions {done}/{args.interactions} (live acceptance {100 * accepted_live / done:.0f}%) | "
                        f"train steps {len(trainer.state.steps)}, samples {trainer.state.trained_samples} "
                        f"(skipped {trainer.state.skipped}), version {trainer.weight_version}"
                        + (f" | reward {lm.get('rollout/raw_reward_mean', 0):+.2f} loss {lm.get('loss/total', 0):+.3f}"
                           if last else "")
                        + (f" | batch KL {lm['loss/kl']:.3f}, KL weight {lm['loss/kl_coef']:.3f}"
                           if "loss/kl_coef" in lm else ""))
                if time.monotonic() >= deadline and done < milestone:
                    say(f"time budget of {args.minutes:g} min reached at {done} interactions")
                    break
                points.append(measure(done))
        finally:
            watch.close()
        trainer.stop()
        phase_wall, phase_cpu = time.monotonic() - phase_t0, prof.process_cpu_seconds() - phase_cpu0
        work = {k: v - work0.get(k, 0.0) for k, v in engine.work.snapshot().items()}
        judge_busy = judge.stats.busy_s
        if trainer.state.error is not None:
            raise RuntimeError(f"trainer failed: {trainer.state.error}") from trainer.state.error
        if points[-1].interactions != done:
            points.append(measure(done))
    finally:
        if trainer is not None:
            trainer.stop()
        if judge is not None:
            judge.stop()
        server.stop()
        import asyncio

        asyncio.run(engine.shutdown())

    result = report.verdict(points[0], points[-1], target=args.target)
    learned = metrics.learning_metrics([p.to_dict() for p in points], sessions)
    title = (f"OpenClaw-RL demo: {args.method}, persona {persona.name}"
             + (" (length-only reward)" if args.reward == "length" else ""))
    png = report.plot(points, out / "learning.png", title)
    steps = trainer.state.steps
    fresh = _freshness(buffer_dir, steps)
    profile = None
    if args.profile:
        fpt = prof.forward_flops_per_token(trainer.model)
        evals = [p.seconds for p in points[1:]]
        profile = prof.Profile(
            wall_s=phase_wall, cpu_s=phase_cpu, cores=os.cpu_count() or 1, steps=len(steps), interactions=done,
            peak_gflops=peak,
            phases=prof.engine_phases(work, eval_work.totals, fpt, args.threads)
            + [prof.Phase("judge (CPU judge worker)", judge_busy)]
            + prof.trainer_phases([s.metrics for s in steps], fpt, args.threads)
            + [prof.Phase("evaluation (held-out, probe, KL; chat and training held)", sum(evals))],
            notes=[f"threads: torch {args.threads} per thread of work; the engine's scheduler, the trainer and the "
                   "judge are separate threads, so phases of different threads overlap in wall time",
                   f"engine thread CPU/wall: prefill {work.get('prefill_cpu_s', 0) / max(work.get('prefill_s', 0), 1e-9):.2f}, "
                   f"decode {work.get('decode_cpu_s', 0) / max(work.get('decode_s', 0), 1e-9):.2f} (below 1: waiting for a core)",
                   f"tokens while chatting: prefill {work.get('prefill_tokens', 0) - eval_work.totals.get('prefill_tokens', 0):.0f}, "
                   f"decode {work.get('decode_tokens', 0) - eval_work.totals.get('decode_tokens', 0):.0f} in "
                   f"{work.get('decode_steps', 0) - eval_work.totals.get('decode_steps', 0):.0f} decode steps; trained "
                   f"{sum(s.metrics.get('perf/train_tokens', 0) for s in steps):.0f} tokens; "
                   f"{fpt / 1e6:.0f} MFLOP per token per forward",
                   f"weight loads: {work.get('weight_loads', 0):.0f}, {work.get('weight_loads_merged_in_memory', 0):.0f} of "
                   "them LoRA merges in memory; a load's seconds include waiting for the running prefill or "
                   "decode step to end",
                   f"load average at the end: {os.getloadavg()[0]:.1f}"])
        (out / "profile.md").write_text(profile.markdown() + "\n")
    summary = {
        "command": "python -m openclaw.demo " + " ".join(sys.argv[1:]), "persona": persona.to_dict(),
        "seed": args.seed, "method": args.method, "reward": args.reward, "interactions": done, "train_steps": len(steps),
        "trained_samples": trainer.state.trained_samples, "weight_version": trainer.weight_version,
        "live_acceptance": 100 * accepted_live / max(1, done), "lr": args.lr, "lora_rank": args.lora_rank, "kl_coef": args.kl_coef, "kl_target": args.kl_target, "kl_horizon": args.kl_horizon, "baseline": args.baseline, "rl_score": args.rl_score,
        # the loss weights the trainer actually used (combine only; None for the other methods)
        "w_opd": getattr(trainer.args, "openclaw_combine_w_opd", None), "w_rl": getattr(trainer.args, "openclaw_combine_w_rl", None),
        "minutes": (time.monotonic() - say.t0) / 60, "verdict": result.status, "reason": result.reason,
        "metrics": learned, "sessions": sorted(sessions, key=lambda s: s["n"]),
        "points": [p.to_dict() for p in points], "steps": [s.__dict__ for s in steps],
        "freshness": fresh, "profile": profile.to_dict() if profile else None,
    }
    (out / "results.json").write_text(json.dumps(summary, indent=2, default=str))
    print()
    print(report.table(points))
    print()
    print(f"before: {points[0].examples[0]['reply'][:160]!r}")
    print(f"after:  {points[-1].examples[0]['reply'][:160]!r}")
    print()
    for line in report.metric_lines(learned):
        print(line)
    if fresh.get("turns"):
        print(f"freshness (turn answered -> served weights trained on it): median {fresh['median_s']:.0f} s, "
              f"p90 {fresh['p90_s']:.0f} s over {fresh['turns']} trained turns")
    if profile is not None:
        print("\nprofile of the chat/training phase:\n" + profile.markdown())
    print(f"\nVERDICT: {result.status}: {result.reason}")
    print(f"plot: {png}\nresults: {out / 'results.json'}  ({summary['minutes']:.1f} min total)", flush=True)
    return 0


def _freshness(buffer_dir: Path, steps: list[Any]) -> dict[str, float]:
    """Seconds from each trained turn's answer to the push that served a version trained on it."""
    from openclaw.buffer import TrajectoryBuffer
    from openclaw.demo.profile import freshness

    per_step = [(s.ended_at, s.weight_version, [int(x.metadata["turn_id"]) for x in s.samples_data]) for s in steps]
    buf = TrajectoryBuffer.open(buffer_dir)
    try:
        answered = {t: rec.finished_at for _, _, ids in per_step for t in ids if (rec := buf.get_turn(t)) is not None}
    finally:
        buf.close()
    return freshness(per_step, answered)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=env_value("OPENCLAW_LOG_LEVEL") or "WARNING",
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ["OMP_NUM_THREADS"] = str(args.threads)  # before torch is imported (run() imports it)
    try:  # after the thread count: a persona's checkers import nltk (and with it scipy's BLAS)
        if args.personas is not None:
            from openclaw.demo.multi_user import parse_personas

            args.personas_obj = parse_personas(args.personas)
        else:
            args.persona_obj = load_persona(args.persona)
    except (PersonaError, ValueError) as exc:
        print(f"python -m openclaw.demo: error: --persona{'s' if args.personas else ''}: {exc}", file=sys.stderr)
        return 2
    try:
        if args.personas is not None:
            from openclaw.demo.multi_user import run as run_users

            return run_users(args)
        return run(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
