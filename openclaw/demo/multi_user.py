"""Several users on one server, each model learning its own user: `python -m openclaw.demo --personas a,b`.

Each persona is one user: its name is the user id its simulated users send (`X-OpenClaw-User`, on
the keyless loopback server), so their sessions and turns are recorded as theirs. Every user gets
a trainer of their own, the chosen method's loop with `--buffer-user U --lora-adapter-name U`: it
trains only U's judged turns and pushes U's adapter, which the server then serves to U alone (one
continuous batch mixes every user's adapter row by row: openclaw/engines/lora_rows.py).
`--trainer-workers` threads step the trainers in turn (`RoundRobinTrainers`), skipping a user
without a batch of judged turns.

Evaluation: at each point, every user's adapter (the base before its first push) answers the
held-out prompts once; every persona judges those replies. A user's own persona measures what
their adapter learned; the other personas measure cross-talk, which isolation must keep near 0.
Writes results.json and learning.png (acceptance per user, own persona solid, other personas
dashed) to --out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw.demo.personas import Persona
from openclaw.methods import get_method

CROSS_TALK_POINTS = 5.0  # the most another user's adapter may move a persona's acceptance
OWN_GAIN_SLACK = 10.0  # each user's gain may fall this far short of the single-user run's


@dataclass
class UserPoint:
    """One user's adapter at one evaluation point: its own evaluation, and its replies' acceptance by
    every persona (its own included)."""

    user: str
    interactions: int
    weight_version: int  # the adapter's; -1: not pushed yet (the base answered)
    point: Any  # evaluate.EvalPoint, judged by the user's own persona
    judged: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # persona -> examples

    def acceptance(self, persona: str) -> float:
        ex = self.judged[persona]
        return 100.0 * sum(e["accepted"] for e in ex) / max(1, len(ex))

    def to_dict(self) -> dict[str, Any]:
        return {"user": self.user, "interactions": self.interactions, "weight_version": self.weight_version,
                "point": self.point.to_dict(), "acceptance_by_persona": {p: self.acceptance(p) for p in self.judged},
                "judged": self.judged}


def parse_personas(value: str) -> list[Persona]:
    from openclaw.demo.personas import load_persona
    from openclaw.httpapi.identity import valid_user_id

    names = [v.strip() for v in value.split(",") if v.strip()]
    if len(names) < 2:
        raise ValueError("--personas takes two or more personas, comma-separated (one persona: --persona)")
    personas = [load_persona(n) for n in names]
    users = [p.name for p in personas]
    if len(set(users)) != len(users):
        raise ValueError(f"--personas names a persona twice: {users}")
    bad = [u for u in users if not valid_user_id(u)]
    if bad:
        raise ValueError(f"a persona's name is its user id, and {bad} are not valid user ids (letters, digits, _.-)")
    return personas


def run(args: argparse.Namespace) -> int:
    import torch

    from openclaw.bridge import trainable_kinds, turn_signal
    from openclaw.buffer import TrajectoryBuffer
    from openclaw.demo import evaluate as ev
    from openclaw.demo.__main__ import Progress, backlog, trainable_judged
    from openclaw.demo.presets import kl_flags, method_flags
    from openclaw.demo.trainer import BackgroundTrainer, RoundRobinTrainers
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
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    personas: dict[str, Persona] = {p.name: p for p in args.personas_obj}
    names = list(personas)
    method = get_method(args.method)
    model_path = str(resolve_model_path(args.model_path))
    out = Path(args.out).resolve() / f"users-{'+'.join(names)}-{method.name}-s{args.seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    buffer_dir = out / "rl_buffer"
    out.mkdir(parents=True, exist_ok=True)
    print("=" * 78)
    print(f"OpenClaw-RL demo, {len(names)} users on one server, an adapter each: method {method.name}")
    for p in personas.values():
        print(f"  user {p.name}: {p.preference}")
    print(f"model {model_path} | CPU threads {torch.get_num_threads()} per thread of work, "
          f"{min(args.trainer_workers, len(names))} trainer(s) at once | LoRA r{args.lora_rank} lr {args.lr:g} | "
          f"{args.interactions} interactions per user within {args.minutes:g} min | output {out}")
    print("=" * 78, flush=True)

    say("loading the serving engine and starting the server (OpenAI API + RL intercept, a user per persona)")
    engine = HFEngine.load(model_path, dtype="float32", device="cpu", max_batch_size=max(48, args.concurrency),
                           prefix_cache_tokens=4096)
    app = create_app(ServerConfig(rl=RLConfig(enabled=True, intercept=InterceptConfig(buffer_dir=buffer_dir,
                                                                                       session_idle_timeout=900.0))),
                     engine=engine)
    server = serve_in_background(app)
    url = server.base_url
    judge = trainers = None
    try:
        judge = JudgeService(JudgeConfig(backend="cpu", num_workers=1, batch_size=16, poll_interval_s=0.3),
                             buffer_dir).start()
        extra = kl_flags(args.kl_coef, args.kl_target, args.kl_horizon)
        if method.weights is not None:
            extra += [f for flag, v in zip(method.weight_flags, (args.w_opd, args.w_rl), strict=True)
                      if v is not None for f in (flag, str(v))]
        each: dict[str, BackgroundTrainer] = {}
        for user in names:
            flags = method_flags(args.method, model_path=model_path, engine_addr=url.split("//", 1)[1],
                                 buffer_dir=str(buffer_dir), batch_size=args.batch_size, lr=args.lr,
                                 lora_rank=args.lora_rank, wait_timeout=3.0, baseline=args.baseline,
                                 rl_score=args.rl_score,
                                 extra=extra + ["--log-dir", str(out / "logs" / user), "--buffer-user", user,
                                                "--lora-adapter-name", user])
            (out / f"trainer_flags_{user}.txt").write_text(" ".join(flags) + "\n")
            say(f"loading user {user}'s trainer (slime FSDP actor, LoRA, --buffer-user {user})")
            each[user] = BackgroundTrainer(flags)
        kinds = trainable_kinds(args.method)
        watch = TrajectoryBuffer.open(buffer_dir)

        def count(user: str, what: Any) -> int:
            t = each[user]
            return what(watch, t.data_source.cfg.consumer_id, set(t.data_source.pending), kinds,
                        lambda r: turn_signal(r, t.data_source.graded), user)

        def ready(user: str) -> bool:
            """A batch of the user's judged turns waits for their trainer."""
            return count(user, trainable_judged) >= args.batch_size

        trainers = RoundRobinTrainers(each, ready, workers=args.trainer_workers)
        tok = next(iter(each.values())).actor.tokenizer
        heldout, probe = ev.heldout_prompts()[: args.eval_limit], ev.load_probe()[: args.eval_limit]

        def measure(done: dict[str, int]) -> dict[str, UserPoint]:
            with trainers.pause():
                served = engine.lora_adapters
                say(f"evaluating every user's adapter ({len(heldout)} held-out prompts, {len(probe)} probe questions)")
                points: dict[str, UserPoint] = {}
                base_point = None
                for user in names:
                    adapter = user if user in served else None
                    if adapter is None and base_point is not None:
                        point = base_point  # the base answers the same, whoever asks
                    else:
                        point = ev.evaluate(url, tok, personas[user], heldout, probe, interactions=done[user],
                                            weight_version=served.get(user, -1), max_tokens=args.eval_max_tokens,
                                            kl_model=each[user].model if adapter else None, adapter=adapter)
                        if adapter is None:
                            point.kl_to_base = 0.0
                            base_point = point
                    up = UserPoint(user, done[user], served.get(user, -1), point)
                    up.judged = {p: ev.judged_by(personas[p], point, heldout) for p in names}
                    points[user] = up
                    others = ", ".join(f"{p} {up.acceptance(p):.1f}%" for p in names if p != user)
                    say(f"  user {user} (adapter {'v' + str(up.weight_version) if adapter else 'none: base'}): own "
                        f"acceptance {up.acceptance(user):.1f}%, capability {point.capability:.1f}%, on topic "
                        f"{point.on_topic:.1f}% | other personas' acceptance: {others}")
            return points

        done = dict.fromkeys(names, 0)
        history = [measure(done)]
        trainers.start()
        sims = {u: SimulatedUsers(url, personas[u], ev.train_prompts(), seed=args.seed + i, max_tokens=args.max_tokens,
                                  user=u) for i, u in enumerate(names)}
        milestones = sorted({max(1, round(args.interactions * k / args.evals)) for k in range(1, args.evals + 1)})
        deadline = time.monotonic() + args.minutes * 60
        try:
            for milestone in milestones:
                while min(done.values()) < milestone and time.monotonic() < deadline:
                    if trainers.error is not None:
                        raise RuntimeError(f"a user's trainer failed: {trainers.error}") from trainers.error
                    # Each user talks again only when their trainer has (almost) caught up with them.
                    talk = [u for u in names if done[u] < milestone and count(u, backlog) < args.batch_size]
                    if not talk:
                        time.sleep(0.5)  # polling the trainers' progress (a separate thread)
                        continue
                    conc = max(1, args.concurrency // len(talk))
                    sizes = {u: min(args.batch_size, milestone - done[u]) for u in talk}
                    for u, got in zip(talk, asyncio.run(_drive(sims, sizes, conc)), strict=True):
                        done[u] += len(got)
                    steps = {u: len(t.state.steps) for u, t in each.items()}
                    say("interactions " + ", ".join(f"{u} {done[u]}" for u in names) + " | train steps "
                        + ", ".join(f"{u} {steps[u]}" for u in names) + " | adapters served "
                        + json.dumps(engine.lora_adapters))
                if time.monotonic() >= deadline and min(done.values()) < milestone:
                    say(f"time budget of {args.minutes:g} min reached at {done}")
                    break
                history.append(measure(dict(done)))
        finally:
            watch.close()
        trainers.stop()
        if trainers.error is not None:
            raise RuntimeError(f"a user's trainer failed: {trainers.error}") from trainers.error
        # A step may have ended between the last evaluation and the stop: evaluate what is served now.
        served = engine.lora_adapters
        if any(history[-1][u].interactions != done[u] or history[-1][u].weight_version != served.get(u, -1)
               for u in names):
            history.append(measure(dict(done)))
        steps = {u: [s.__dict__ for s in t.state.steps] for u, t in each.items()}
    finally:
        if trainers is not None:
            trainers.stop()
        if judge is not None:
            judge.stop()
        server.stop()
        asyncio.run(engine.shutdown())

    table = user_table(history[0], history[-1], names)
    png = plot(history, names, out / "learning.png", f"OpenClaw-RL demo: {method.name}, a user per persona")
    summary = {"command": "python -m openclaw.demo " + " ".join(sys.argv[1:]), "method": method.name,
               "seed": args.seed, "users": {u: personas[u].to_dict() for u in names}, "interactions": done,
               "minutes": (time.monotonic() - say.t0) / 60, "table": table, "steps": steps,
               "points": [{u: up.to_dict() for u, up in h.items()} for h in history]}
    (out / "results.json").write_text(json.dumps(summary, indent=2, default=str))
    print()
    for row in table:
        print(row["line"])
    print(f"\nplot: {png}\nresults: {out / 'results.json'}  ({summary['minutes']:.1f} min total)", flush=True)
    return 0


async def _drive(sims: dict[str, Any], sizes: dict[str, int], concurrency: int) -> list[list[Any]]:
    """Every talking user's next sessions at once (each user `concurrency` at a time)."""
    return list(await asyncio.gather(*(sims[u].drive_async(n, concurrency) for u, n in sizes.items())))


def _delta(before: UserPoint, after: UserPoint, persona: str, key: str = "accepted") -> dict[str, float]:
    from openclaw.demo.metrics import paired_bootstrap_delta

    return paired_bootstrap_delta([float(e[key]) for e in before.judged[persona]],
                                  [float(e[key]) for e in after.judged[persona]]).to_dict()


def user_table(before: dict[str, UserPoint], after: dict[str, UserPoint], names: list[str]) -> list[dict[str, Any]]:
    """Per user: their own persona's acceptance gain, every other persona's change (cross-talk), and
    capability / on-topic changes, each with a 95% paired bootstrap interval over the held-out prompts."""
    from openclaw.demo.metrics import paired_bootstrap_delta

    rows = []
    for user in names:
        b, a = before[user], after[user]
        own = _delta(b, a, user)
        cross = {p: _delta(b, a, p) for p in names if p != user}
        cap = paired_bootstrap_delta([float(e["correct"]) for e in b.point.probe_examples],
                                     [float(e["correct"]) for e in a.point.probe_examples]).to_dict() \
            if b.point.probe_examples else None
        topic = _delta(b, a, user, "on_topic")
        line = (f"user {user}: own persona acceptance {b.acceptance(user):.1f}% -> {a.acceptance(user):.1f}%, "
                f"{own['estimate']:+.1f} [{own['low']:+.1f}, {own['high']:+.1f}] | "
                + " | ".join(f"{p}'s acceptance {c['estimate']:+.1f} [{c['low']:+.1f}, {c['high']:+.1f}]"
                             for p, c in cross.items())
                + (f" | capability {cap['estimate']:+.1f} [{cap['low']:+.1f}, {cap['high']:+.1f}]" if cap else "")
                + f" | on topic {topic['estimate']:+.1f} [{topic['low']:+.1f}, {topic['high']:+.1f}]"
                + (f" | adapter v{a.weight_version}" if a.weight_version >= 0 else " | no adapter pushed"))
        rows.append({"user": user, "own": own, "cross": cross, "capability": cap, "on_topic": topic,
                     "weight_version": a.weight_version, "line": line})
    return rows


def plot(history: list[dict[str, UserPoint]], names: list[str], path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from openclaw.demo.report import save_percent_plot

    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    for i, user in enumerate(names):
        color = f"C{i}"
        x = [h[user].interactions for h in history]
        ax.plot(x, [h[user].acceptance(user) for h in history], "o-", color=color,
                label=f"{user}'s adapter, judged by {user} (own)")
        for other in names:
            if other != user:
                ax.plot(x, [h[user].acceptance(other) for h in history], "x--", color=color, alpha=0.6,
                        label=f"{user}'s adapter, judged by {other} (cross-talk)")
    return save_percent_plot(fig, ax, path, title, "interactions per user", "held-out acceptance %", legend_size=7)
