"""slime's command-line surface, parsed once into a typed, frozen :class:`TrainConfig`.

One source of truth: every flag is a field of a section dataclass (``slime.utils.args.sections``) (``arg(...)`` carries
its flag spellings, help and env-var default). The argparse parser, the YAML loader, the
``--help`` groups and the flat ``args`` namespace that slime plugins expect are all derived
from those fields, so they cannot drift apart. The parts live in ``slime.utils.args`` (fields,
sections, flags, refusals, page_schema, validate, train_config, parse); every public name is
importable from here.

Precedence (lowest to highest): field default < env var (where the reference documents one)
< ``--config FILE.yaml`` < command line.

Entry points:
    parse_config(argv) -> TrainConfig        (raises ConfigError with a readable message)
    parse_args(argv) -> argparse.Namespace   (slime-style, exits with status 2 on bad input)
"""

from __future__ import annotations

from slime.utils.args.fields import (
    ADVANTAGE_ESTIMATORS,
    DEFAULT_KL_LOSS_HORIZON,
    DEFAULT_ROLLOUT_FUNCTION,
    KL_TYPES,
    ConfigError,
    FrozenDict,
    arg,
)
from slime.utils.args.flags import build_parser, field_specs, flag_name
from slime.utils.args.page_schema import (
    PAGE_KEYS,
    PAGE_METHOD,
    PAGE_REFUSED,
    PAGE_SECTIONS,
    apply_mapping,
    load_yaml_config,
)
from slime.utils.args.parse import parse_args, parse_config
from slime.utils.args.refusals import REFUSED_FLAGS
from slime.utils.args.sections import (
    SECTIONS,
    AlgorithmConfig,
    CheckpointConfig,
    ClusterConfig,
    DataConfig,
    DebugConfig,
    LoggingConfig,
    LoRAConfig,
    MegatronConfig,
    OptimizerConfig,
    PluginConfig,
    RewardConfig,
    RolloutConfig,
)
from slime.utils.args.train_config import TrainConfig, build_config
from slime.utils.args.validate import check_eval_files

# The earlier private spellings, which callers outside slime still import; use the public names above.
_PAGE_SECTIONS = PAGE_SECTIONS
_PAGE_KEYS = PAGE_KEYS
_PAGE_REFUSED = PAGE_REFUSED
_apply_mapping = apply_mapping

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "DEFAULT_KL_LOSS_HORIZON",
    "DEFAULT_ROLLOUT_FUNCTION",
    "KL_TYPES",
    "PAGE_KEYS",
    "PAGE_METHOD",
    "PAGE_REFUSED",
    "PAGE_SECTIONS",
    "REFUSED_FLAGS",
    "SECTIONS",
    "AlgorithmConfig",
    "CheckpointConfig",
    "ClusterConfig",
    "ConfigError",
    "DataConfig",
    "DebugConfig",
    "FrozenDict",
    "LoRAConfig",
    "LoggingConfig",
    "MegatronConfig",
    "OptimizerConfig",
    "PluginConfig",
    "RewardConfig",
    "RolloutConfig",
    "TrainConfig",
    "apply_mapping",
    "arg",
    "build_config",
    "build_parser",
    "check_eval_files",
    "field_specs",
    "flag_name",
    "load_yaml_config",
    "parse_args",
    "parse_config",
]
