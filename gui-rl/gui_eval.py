"""Evaluate a policy on the held-out seeds of MiniWoB++ tasks, by name.

    python gui-rl/gui_eval.py --tasks click-button enter-text --policy scripted --episodes 20
    python gui-rl/gui_eval.py --tasks one-step --policy random
    python gui-rl/gui_eval.py --tasks click-pie --policy model --base-url http://127.0.0.1:30000/v1 --model m
    python gui-rl/gui_eval.py --tasks one-step --policy model ... --shuffle-ids   # labels or positions?
    python gui-rl/gui_eval.py --list            # every task the miniwob package ships

Any task page the package ships is accepted (`--tasks all`, `one-step`, `train` are shorthands).
Prints the success rate per task and writes report.json plus the first and last screenshot of the
first episodes of each task to --out (the last one shows the page as the episode left it). With
`--policy scripted`, a task it has no plan for is not run: it is listed as unplanned and left out
of the mean, never counted as 0%.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from gui_env import DEFAULT_BROWSERS, Action, ActionError, Observation, SyncEnv
from gui_policies import NoPlanError, RandomPolicy, ScriptedPolicy, check_planned
from gui_screenshots import make_pool
from gui_tasks import HELDOUT_SEEDS, all_task_names, resolve_task_names

from openclaw.environment import env_value
from openclaw.evaluation.progress import Progress
from openclaw.sandbox import parallel_envs_from_env


class Policy(Protocol):
    def reset(self, obs: Observation) -> None: ...
    def act(self, obs: Observation) -> Action: ...


@dataclass
class EpisodeResult:
    task: str
    seed: int
    success: bool
    raw_reward: float
    steps: int
    actions: list[str]
    errors: int
    error_messages: list[str]  # what went wrong, per failed action (a wrong id, a timeout, ...)
    planned: bool = True  # False: the policy had no plan for this goal (not a failure: not scored)


def run_episode(env: SyncEnv, policy: Policy, task: str, seed: int, max_steps: int,
                shuffle_ids: bool = False) -> EpisodeResult:
    obs = env.reset(task, seed, shuffle_ids)
    try:
        policy.reset(obs)
    except NoPlanError as exc:
        return EpisodeResult(task, seed, False, 0.0, 0, [], 0, [f"{task}: {exc}"], planned=False)
    actions, messages, raw, success = [], [], 0.0, False
    for _ in range(max_steps):
        try:
            action = policy.act(obs)
        except ActionError as exc:
            messages.append(f"unparseable reply: {exc}")
            action = Action("done")
        result = env.step(action)
        actions.append(action.render())
        if result.error is not None:
            messages.append(f"{action.render()}: {result.error}")
        obs, raw, success = result.observation, result.raw_reward, result.reward > 0
        if result.done:
            break
    return EpisodeResult(task, seed, success, raw, len(actions), actions, len(messages), messages)


def make_policy(args: argparse.Namespace, index: int) -> Policy:
    if args.policy == "scripted":
        return ScriptedPolicy()
    if args.policy == "random":
        import random

        return RandomPolicy(random.Random(index))
    from gui_model_policy import ChatModelPolicy

    return ChatModelPolicy(base_url=args.base_url, model=args.model, vision=args.vision)


def refused_tasks(policy: str, tasks: list[str]) -> dict[str, str]:
    """Tasks the policy refuses up front, with its reason (the scripted policy: those without a plan)."""
    if policy != "scripted":
        return {}
    refused = {}
    for task in tasks:
        try:
            check_planned(task)
        except NoPlanError as exc:
            refused[task] = str(exc)
    return refused


def unplanned_goals(results: list[EpisodeResult]) -> dict[str, str]:
    """Tasks with an episode whose goal the policy had no plan for: not scored at all (the other
    episodes alone would make a partial score)."""
    tasks = dict.fromkeys(r.task for r in results if not r.planned)
    return {t: f"no scripted plan for {t} ({sum(not r.planned for r in results if r.task == t)} of "
               f"{sum(r.task == t for r in results)} goals)" for t in tasks}


def success_rates(results: list[EpisodeResult], tasks: list[str]) -> tuple[dict[str, float], float | None]:
    """Success per task of `tasks`, and their mean (None when there is none)."""
    per_task = {t: [r for r in results if r.task == t] for t in tasks}
    rates = {t: sum(r.success for r in rs) / len(rs) for t, rs in per_task.items() if rs}
    return rates, (sum(rates.values()) / len(rates) if rates else None)


def evaluate(args: argparse.Namespace) -> dict[str, Any]:
    tasks = resolve_task_names(args.tasks)
    unplanned = refused_tasks(args.policy, tasks)
    tasks = [t for t in tasks if t not in unplanned]
    seeds = list(HELDOUT_SEEDS)[: args.episodes]
    jobs = [(t, s) for t in tasks for s in seeds]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pool = make_pool(args.parallel_envs, env_value("SCREENSHOT_BACKEND") or "playwright")
    finished: dict[str, list[bool]] = {t: [] for t in tasks}
    finished_lock = threading.Lock()  # so a task's last two episodes cannot both report it done

    def work(i: int) -> EpisodeResult:
        task, seed = jobs[i]
        with pool.env_sync() as env:
            result = run_episode(env, make_policy(args, i), task, seed, args.max_steps, args.shuffle_ids)
            if seed in seeds[: args.screenshots] and env.screenshots:
                stem = f"{task}-seed{seed}-{'ok' if result.success else 'fail'}"
                (out / f"{stem}-first.png").write_bytes(env.screenshots[0])
                (out / f"{stem}-last.png").write_bytes(env.screenshots[-1])
        with finished_lock:
            finished[task].append(result.success)
            task_done = len(finished[task]) == len(seeds)
        if task_done:
            progress.note(f"{task}: {sum(finished[task])}/{len(seeds)} succeeded")
        progress.step(phase="episodes done")
        return result

    t0 = time.perf_counter()
    try:
        with Progress(f"gui-eval/{args.policy}", len(jobs)) as progress, ThreadPoolExecutor(args.parallel_envs) as ex:
            results = list(ex.map(work, range(len(jobs))))
    finally:
        pool.close()
    elapsed = time.perf_counter() - t0
    unplanned |= unplanned_goals(results)
    rates, mean = success_rates(results, [t for t in tasks if t not in unplanned])
    steps = sum(r.steps for r in results)
    report = {"policy": args.policy, "model": args.model, "shuffled_ids": args.shuffle_ids, "episodes_per_task": len(seeds),
              "seeds": [seeds[0], seeds[-1]], "success_rate": rates, "mean_success": mean,
              "unplanned": unplanned, "env_steps": steps,
              "seconds": round(elapsed, 2), "env_steps_per_s": round(steps / elapsed, 2),
              "parallel_envs": args.parallel_envs, "episodes": [asdict(r) for r in results]}
    (out / "report.json").write_text(json.dumps(report, indent=1))
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=["train"], help="task names, or all / one-step / train")
    p.add_argument("--policy", choices=["scripted", "random", "model"], default="scripted")
    p.add_argument("--base-url", default="http://127.0.0.1:30000/v1", help="OpenAI-compatible server (--policy model)")
    p.add_argument("--model", default="default", help="model name sent to the server")
    p.add_argument("--vision", action="store_true", help="send the screenshot as an image_url content part")
    p.add_argument("--episodes", type=int, default=20, help=f"held-out seeds per task (<= {len(HELDOUT_SEEDS)})")
    p.add_argument("--max-steps", type=int, default=6)
    p.add_argument("--parallel-envs", type=int, default=None, help="browsers [env PARALLEL_ENVS, default 4]")
    p.add_argument("--screenshots", type=int, default=2, help="episodes per task whose first/last PNG are saved")
    p.add_argument("--shuffle-ids", action="store_true",
                   help="show every page's element ids drawn at random (gui_env.ShuffledIds): a policy that "
                        "reads labels keeps its success, one that learned fixed ids loses it")
    p.add_argument("--out", default="gui-rl/eval_out")
    p.add_argument("--list", action="store_true", help="list the tasks the miniwob package ships")
    args = p.parse_args(argv)
    if args.list:
        print("\n".join(all_task_names()))
        return 0
    args.parallel_envs = args.parallel_envs or parallel_envs_from_env(DEFAULT_BROWSERS)
    report = evaluate(args)
    for task, rate in report["success_rate"].items():
        print(f"{task:<24} {rate:6.1%}")
    for task, reason in report["unplanned"].items():
        print(f"{task:<24} {'--':>6}   {reason}: left out of the mean")
    mean = "   n/a" if report["mean_success"] is None else f"{report['mean_success']:6.1%}"
    print(f"{'mean':<24} {mean}   ({'ids shuffled, ' if args.shuffle_ids else ''}{report['env_steps']} env steps, "
          f"{report['env_steps_per_s']} steps/s, {args.parallel_envs} browsers) -> {args.out}/report.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
