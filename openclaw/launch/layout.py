"""Which GPUs of the launch node run what: the trainer's Ray actors, the rollout engine, the judge.

Two ways to say it, never both:

    counts (the upstream scripts): NUM_GPUS=8 ACTOR_GPUS=4 ROLLOUT_GPUS=2 PRM_GPUS=2
        -> training 0-3, rollout 4-5, judge 6-7 (in that order); the sum may not exceed NUM_GPUS
    lists (the public pages):      TRAIN_GPUS=0,1,2,3 ROLLOUT_GPUS=4,5,6,7 [PRM_GPUS=6,7]
        -> exactly those GPUs; a GPU in two lists is refused, except TRAIN_GPUS = ROLLOUT_GPUS
           (colocated: the engine sleeps while the trainer steps)

With neither, the GPUs found are split: half training, the rest rollout, and with a judge model
(PRM_MODEL_PATH) a quarter of them for the judge. One GPU is colocated. The judge never shares a
GPU with training or the engine: with no GPU left for it, it runs on the CPU and the plan says so.

The layout becomes process placement: the server (the engine) and the judge are started with
CUDA_VISIBLE_DEVICES set to their GPUs, and the private Ray head gets only the trainer's GPUs, so the
trainer's placement group (one bundle per training rank) can only take those.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from openclaw.launch.page_env import int_value
from openclaw.launch.settings import LaunchError


@dataclass(frozen=True)
class GpuLayout:
    total: int  # GPUs the plan is for (NUM_GPUS, else the GPUs found)
    actor: tuple[int, ...]
    rollout: tuple[int, ...]
    prm: tuple[int, ...] = ()
    how: str = ""  # the settings that made it, for the plan

    @property
    def colocated(self) -> bool:
        return self.actor == self.rollout

    @staticmethod
    def ids(gpus: tuple[int, ...]) -> str:
        return ",".join(str(g) for g in gpus)

    def lines(self, engine: str, judge: str | None) -> list[str]:
        """The placement as the plan prints it."""
        def show(gpus: tuple[int, ...]) -> str:
            return f"GPU{'s' if len(gpus) > 1 else ''} {self.ids(gpus)}" if gpus else "CPU"

        out = [f"GPU layout ({self.total} GPU{'s' if self.total != 1 else ''}{', ' + self.how if self.how else ''}):",
               f"  training (Ray actors, one per GPU) : {show(self.actor)}",
               f"  rollout  ({engine}){' ' * max(0, 24 - len(engine))}: {show(self.rollout)}"
               + (" (colocated with training)" if self.colocated else "")]
        if judge is not None:
            out.append(f"  judge    ({judge}){' ' * max(0, 24 - len(judge))}: {show(self.prm)}")
        return out


def _id_list(name: str, raw: str, total: int) -> tuple[int, ...]:
    try:
        ids = tuple(int(x) for x in raw.split(",") if x.strip())
    except ValueError:
        raise LaunchError(f"{name}={raw!r} is not a comma-separated list of GPU ids (e.g. 0,1,2,3)") from None
    if not ids:
        raise LaunchError(f"{name}={raw!r} names no GPU")
    if len(set(ids)) != len(ids):
        raise LaunchError(f"{name}={raw} names a GPU twice")
    if max(ids) >= total or min(ids) < 0:
        raise LaunchError(f"{name}={raw}: GPU ids run 0..{total - 1} on {total} GPU(s)")
    return ids


def _is_list(raw: str | None) -> bool:
    return raw is not None and "," in raw


def plan_layout(get: Callable[[str], str | None], found: int, with_judge_model: bool, dry_run: bool) -> GpuLayout | None:
    """The layout the settings ask for (None: no GPUs, the CPU path). `get` reads a launch setting,
    `found` is the number of GPUs on this machine. Refuses overlaps and over-subscription."""
    num = int_value(get, "NUM_GPUS")
    if num is not None and num > found and not dry_run:
        raise LaunchError(f"NUM_GPUS={num} but this machine has {found} GPU(s) (nvidia-smi -L); a dry run "
                          "(OPENCLAW_DRY_RUN=1) plans for GPUs that are not here")
    total = num if num is not None else found
    actor_n, prm_raw, train_raw, rollout_raw = int_value(get, "ACTOR_GPUS"), get("PRM_GPUS"), get("TRAIN_GPUS"), \
        get("ROLLOUT_GPUS")
    counts = actor_n is not None or (prm_raw is not None and not _is_list(prm_raw)) or \
        (num is not None and rollout_raw is not None and not _is_list(rollout_raw) and train_raw is None)
    if total == 0:
        # a count of 0 asks for no GPU; a list names GPU ids, and "0" is GPU 0
        named = [f"{n}={get(n)}" for n in ("ACTOR_GPUS", "PRM_GPUS") if get(n) not in (None, "0")]
        named += [f"{n}={get(n)}" for n in ("TRAIN_GPUS", "ROLLOUT_GPUS") if get(n) is not None]
        if named:
            raise LaunchError(f"{' '.join(named)} name GPUs, and there are none here (nvidia-smi -L lists none): "
                              "unset them to run on CPU, or set NUM_GPUS for a dry run that plans for GPUs")
        return None
    if counts:
        if train_raw is not None:
            raise LaunchError(f"TRAIN_GPUS={train_raw} (a list of GPU ids) and ACTOR_GPUS/PRM_GPUS/NUM_GPUS (counts) "
                              "both set: use one way, TRAIN_GPUS/ROLLOUT_GPUS lists or ACTOR_GPUS/ROLLOUT_GPUS/PRM_GPUS "
                              "counts")
        return _from_counts(total, actor_n, int_value(get, "ROLLOUT_GPUS"), int_value(get, "PRM_GPUS"), with_judge_model,
                            num is not None)
    return _from_lists(total, train_raw, rollout_raw, prm_raw, with_judge_model)


def _default_prm(total: int, with_judge_model: bool) -> int:
    return total // 4 if with_judge_model and total >= 3 else 0


def _from_counts(total: int, actor: int | None, rollout: int | None, prm: int | None, with_judge_model: bool,
                 num_given: bool) -> GpuLayout:
    given = [f"{n}={v}" for n, v in (("NUM_GPUS", total if num_given else None), ("ACTOR_GPUS", actor),
                                     ("ROLLOUT_GPUS", rollout), ("PRM_GPUS", prm)) if v is not None]
    if prm is None:
        prm = _default_prm(total, with_judge_model)
    if prm and not with_judge_model:
        raise LaunchError(f"PRM_GPUS={prm} reserves GPUs for a judge model, and none is set: set PRM_MODEL_PATH, "
                          "or PRM_GPUS=0")
    if total == 1 and (actor or 1) == 1 and (rollout or 1) == 1 and not prm:
        return GpuLayout(1, (0,), (0,), (), " ".join([*given, "(one GPU: training and rollout colocated)"]))
    if actor is None:
        actor = max(1, total // 2) if rollout is None else total - prm - rollout
    if rollout is None:
        rollout = total - prm - actor
    if actor < 1 or rollout < 1:
        raise LaunchError(f"{' '.join(given)}: training and rollout each need at least one GPU (training {actor}, "
                          f"rollout {rollout} of {total})")
    if actor + rollout + prm > total:
        raise LaunchError(f"ACTOR_GPUS={actor} + ROLLOUT_GPUS={rollout} + PRM_GPUS={prm} = {actor + rollout + prm} "
                          f"GPUs, but there are {total} (NUM_GPUS={total}): lower one of them; each GPU runs one of "
                          "training, rollout or the judge")
    ids = tuple(range(total))
    return GpuLayout(total, ids[:actor], ids[actor:actor + rollout], ids[actor + rollout:actor + rollout + prm],
                     " ".join(given) or "split by default")


def _from_lists(total: int, train_raw: str | None, rollout_raw: str | None, prm_raw: str | None,
                with_judge_model: bool) -> GpuLayout:
    given = " ".join(f"{n}={v}" for n, v in (("TRAIN_GPUS", train_raw), ("ROLLOUT_GPUS", rollout_raw),
                                             ("PRM_GPUS", prm_raw)) if v is not None)
    prm = _id_list("PRM_GPUS", prm_raw, total) if prm_raw is not None else ()
    if prm and not with_judge_model:
        raise LaunchError(f"PRM_GPUS={prm_raw} reserves GPUs for a judge model, and none is set: set PRM_MODEL_PATH, "
                          "or unset PRM_GPUS")
    if train_raw is None and rollout_raw is None:
        if not prm:
            return _from_counts(total, None, None, None, with_judge_model, False)
        free = tuple(g for g in range(total) if g not in prm)
        if len(free) < 2:
            raise LaunchError(f"PRM_GPUS={prm_raw} leaves {len(free)} GPU(s) for training and rollout: they need one each")
        return GpuLayout(total, free[:len(free) // 2], free[len(free) // 2:], prm, given)
    train = _id_list("TRAIN_GPUS", train_raw, total) if train_raw is not None else None
    rollout = _id_list("ROLLOUT_GPUS", rollout_raw, total) if rollout_raw is not None else None
    if train is None:
        train = tuple(g for g in range(total) if g not in (rollout or ()) and g not in prm) or rollout or ()
    if rollout is None:
        # no GPU left: the engine shares the trainer's (colocated), as on a one-GPU machine
        rollout = tuple(g for g in range(total) if g not in train and g not in prm) or train
    shared = sorted(set(train) & set(rollout))
    if shared and train != rollout:
        raise LaunchError(f"TRAIN_GPUS={GpuLayout.ids(train)} and ROLLOUT_GPUS={GpuLayout.ids(rollout)} share GPU(s) "
                          f"{GpuLayout.ids(tuple(shared))}: give them disjoint lists, or the same list to colocate")
    judge_shared = sorted(set(prm) & (set(train) | set(rollout)))
    if judge_shared:
        raise LaunchError(f"PRM_GPUS={GpuLayout.ids(prm)} shares GPU(s) {GpuLayout.ids(tuple(judge_shared))} with "
                          "training or rollout: the judge gets GPUs of its own")
    return GpuLayout(total, train, rollout, prm, given)
