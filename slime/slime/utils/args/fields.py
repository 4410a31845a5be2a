"""The building blocks of slime's config: the error it raises, its immutable mapping, and `arg`,
which declares one config field together with how it appears on the command line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import field
from typing import Any

ADVANTAGE_ESTIMATORS = (
    "grpo",
    "gspo",
    "reinforce_plus_plus",
    "reinforce_plus_plus_baseline",
    "on_policy_distillation",
)
KL_TYPES = ("k1", "k2", "k3", "low_var_kl")
DEFAULT_ROLLOUT_FUNCTION = "slime.rollout.sglang_rollout.generate_rollout"


class ConfigError(ValueError):
    """A flag, config file or value combination is invalid; the message says how to fix it."""


class FrozenDict(dict):
    """An immutable, picklable dict (config values travel to Ray actors by pickle)."""

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("config mappings are read-only")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted((k, repr(v)) for k, v in self.items())))


def arg(
    default: Any,
    help: str,
    *,
    flags: Sequence[str] = (),
    env: str | None = None,
    negative_flag: str | None = None,
    choices: Sequence[Any] | None = None,
) -> Any:
    """Declare a config field and how it appears on the command line.

    flags: extra spellings (aliases) besides the canonical ``--field-name``.
    negative_flag: for a bool defaulting to True, the slime spelling that turns it off
        (``--disable-rewards-normalization``); then no ``--field-name`` flag is created.
    env: environment variable providing the default (as in the reference's scripts).
    """
    meta = {"help": help, "flags": tuple(flags), "env": env, "negative_flag": negative_flag, "choices": choices}
    if type(default) in (list, dict, set):
        raise TypeError("use tuple / FrozenDict defaults so configs stay immutable")
    return field(default=default, metadata=meta)



# --kl-loss-target's pace when --kl-loss-horizon is not given, filled in by `derive` (the flag's own
# default is None, so a horizon given without a target can be refused instead of ignored).
DEFAULT_KL_LOSS_HORIZON = 10.0
