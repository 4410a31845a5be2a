"""`TrainConfig`, the parsed and validated config, and `build_config`, which derives, validates and
freezes a flat dict of values into one."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slime.utils.args import sections
from slime.utils.args.fields import ConfigError, FrozenDict
from slime.utils.args.flags import field_specs, flag_name
from slime.utils.args.refusals import unknown_message
from slime.utils.args.sections import SECTIONS
from slime.utils.args.validate import derive, validate


@dataclass(frozen=True)
class TrainConfig:
    """Built by `build_config` only (derived and validated values): the sections have no defaults."""

    cluster: sections.ClusterConfig
    data: sections.DataConfig
    rollout: sections.RolloutConfig
    reward: sections.RewardConfig
    algorithm: sections.AlgorithmConfig
    optimizer: sections.OptimizerConfig
    megatron: sections.MegatronConfig
    checkpoint: sections.CheckpointConfig
    lora: sections.LoRAConfig
    logging: sections.LoggingConfig
    debug: sections.DebugConfig
    plugins: sections.PluginConfig
    # Flags registered by a method folder (extra args providers) and --custom-config-path values.
    extras: Mapping[str, Any] = field(default_factory=FrozenDict)

    def to_flat_dict(self) -> dict[str, Any]:
        """All values keyed by slime's attribute names (``args.lora_rank``), extras included."""
        flat: dict[str, Any] = {}
        for name in SECTIONS:
            flat.update({f.name: getattr(getattr(self, name), f.name) for f in dataclasses.fields(SECTIONS[name])})
        flat.update(self.extras)
        return flat

    def to_dict(self) -> dict[str, Any]:
        """Nested plain-Python view (JSON-serialisable), e.g. for checkpoints and run metadata."""
        out: dict[str, Any] = {}
        for name in SECTIONS:
            out[name] = {f.name: _plain(getattr(getattr(self, name), f.name)) for f in dataclasses.fields(SECTIONS[name])}
        out["extras"] = {k: _plain(v) for k, v in self.extras.items()}
        return out

    def to_namespace(self) -> argparse.Namespace:
        """A fresh flat ``args`` object for plugins written against slime (read it, don't rely on writing it:
        changes to the copy never reach this config)."""
        ns = argparse.Namespace(**{k: _plain(v) for k, v in self.to_flat_dict().items()})
        # Derived attributes slime code commonly reads.
        ns.world_size = self.cluster.actor_num_nodes * self.cluster.actor_num_gpus_per_node
        return ns

    def with_overrides(self, **values: Any) -> TrainConfig:
        """A validated copy with some flat fields replaced: ``cfg.with_overrides(lr=1e-5)``."""
        flat = {k: v for k, v in self.to_flat_dict().items() if k not in self.extras}
        extras = dict(self.extras)
        for key, value in values.items():
            if key in flat:
                flat[key] = value
            elif key in extras:
                extras[key] = value
            else:
                raise ConfigError(unknown_message(key.replace("_", "-"), [flag_name(n) for n in flat]))
        return build_config(flat, extras)


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return FrozenDict({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def build_config(flat: dict[str, Any], extras: Mapping[str, Any]) -> TrainConfig:
    """Derive, validate and freeze flat values (keyed by field name) and a method's extras."""
    v = dict(flat)
    derive(v)
    validate(v)
    specs = field_specs()
    sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    for dest, value in v.items():
        sections[specs[dest][0]][dest] = _freeze(value)
    built = {name: SECTIONS[name](**kw) for name, kw in sections.items()}
    return TrainConfig(**built, extras=FrozenDict({k: _freeze(x) for k, x in extras.items()}))

