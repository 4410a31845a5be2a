"""Every environment variable slime reads as configuration, in one table.

Every read of the environment in the `slime` package goes through `env_value`, which refuses a name
that is not declared here: a new variable is one row, documented where it is added.
`markdown_table()` is the table in slime/README.md ("Environment variables");
tests/test_environment_table.py keeps the two equal and finds any read that bypasses `env_value`.

The table states what a variable means and who reads it, not its default: the code that reads it
keeps its default, so no default is written in two places. A flag (or `--config` key) always
overrides its variable. The rendezvous variables slime sets for torch.distributed itself are
written where they are needed; only their reads are here.

Standard library only: every slime module may import it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class EnvVar:
    name: str
    meaning: str
    read_by: str  # the parts of slime that read it


class UndeclaredEnvVar(KeyError):
    """A read of a variable missing from the table: a programming error, not a user's."""

    def __str__(self) -> str:  # KeyError would print the message quoted
        return str(self.args[0])


@dataclass(frozen=True)
class EnvTable:
    """A package's declared variables; `home` is the file that declares them (named in the error).
    The runtime (openclaw/environment.py) declares its own table with this type."""

    home: str
    variables: tuple[EnvVar, ...]

    def value(self, name: str, env: Mapping[str, str] | None = None) -> str | None:
        """The value of the declared variable `name` in `env` (default: the process environment);
        None when it is unset or empty, so that `VAR=` means the same as no VAR."""
        if name not in {v.name for v in self.variables}:
            raise UndeclaredEnvVar(f"env_value({name!r}): {name} is not declared in {self.home} "
                                   "(add a row to VARIABLES: name, meaning, read_by)")
        return (os.environ if env is None else env).get(name) or None

    def markdown_table(self) -> str:
        rows = ["| variable | meaning | read by |", "|---|---|---|"]
        rows += [f"| `{v.name}` | {v.meaning.replace('|', '/')} | {v.read_by} |" for v in self.variables]
        return "\n".join(rows)


_TORCHRUN = "torchrun ranks (slime/train_grpo.py)"

VARIABLES: tuple[EnvVar, ...] = (
    # ---- defaults of config fields (a flag or --config key overrides them) --------------------------
    EnvVar("MODEL_PATH", "the policy model (--hf-checkpoint / --model-path)", "argument parser"),
    EnvVar("PRM_MODEL_PATH", "a process reward model (--prm-model-path)", "argument parser"),
    EnvVar("JUDGE_MODEL_PATH", "the judge / teacher model for OPD (--judge-model-path)", "argument parser"),
    # ---- cluster and engines ------------------------------------------------------------------------
    EnvVar("RAY_ADDRESS", "the Ray cluster to join (set by `ray job submit`); --ray-address overrides it",
           "driver"),
    EnvVar("ROLLOUT_GPUS", "comma-separated GPU ids the rollout engines run on", "engine launch"),
    EnvVar("OPENCLAW_API_KEY", "the key the serving engines require: slime sends it and hands it to the engines "
           "it starts (an environment variable, never a flag: flags show in ps)",
           "rollout client, engine processes"),
    EnvVar("SLIME_WEIGHT_SYNC_DIR", "parent folder of the weight-sync folders (a node-local disk with room, or "
           "storage every node sees: --weight-sync-shared-storage needs it)",
           "driver, train actors, rollout manager"),
    # ---- logging --------------------------------------------------------------------------------------
    EnvVar("TENSORBOARD_DIR", "TensorBoard's folder when --tb-project-name is not given", "metrics"),
    EnvVar("WANDB_MODE", "wandb's mode when --wandb-mode is not given", "metrics"),
    # ---- torch.distributed ranks (set by torchrun or the launcher) ---------------------------------------
    EnvVar("RANK", "this process's rank", _TORCHRUN),
    EnvVar("WORLD_SIZE", "the number of ranks", _TORCHRUN),
    EnvVar("LOCAL_RANK", "this process's rank on its node (its GPU)", f"{_TORCHRUN}, megatron backend"),
    EnvVar("LOCAL_WORLD_SIZE", "ranks on this node", _TORCHRUN),
    EnvVar("MASTER_ADDR", "rank 0's address for the process group", _TORCHRUN),
    EnvVar("MASTER_PORT", "rank 0's port for the process group (one process alone picks a free one)",
           f"{_TORCHRUN}, FSDP backend"),
)

SLIME_ENV = EnvTable("slime/slime/utils/environment.py", VARIABLES)
env_value = SLIME_ENV.value
markdown_table = SLIME_ENV.markdown_table  # the table in slime/README.md (a test keeps the two equal)
