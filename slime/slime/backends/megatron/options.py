"""The Megatron actor's typed options, read once from the parsed config / flat args."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from slime.backends.megatron.hf_config import overrides_from_args
from slime.backends.megatron.parallel import ParallelLayout

logger = logging.getLogger(__name__)


class UnsupportedMegatronFlag(ValueError):
    """A Megatron flag this backend cannot honour (start-up error, never silently ignored)."""


def check_megatron_flags(args: Any) -> None:
    """Refuse flag values the backend does not implement; warn for memory-only knobs."""
    def get(name: str) -> Any:
        return getattr(args, name, None)

    problems = []
    if (get("context_parallel_size") or 1) > 1:
        problems.append("--context-parallel-size > 1 (context parallelism is not implemented)")
    if (get("expert_model_parallel_size") or 1) > 1:
        problems.append("--expert-model-parallel-size > 1 (MoE models are not supported)")
    if get("normalization") not in (None, "RMSNorm"):
        problems.append(f"--normalization {get('normalization')} (the supported HF families use RMSNorm)")
    if get("position_embedding_type") not in (None, "rope"):
        problems.append(f"--position-embedding-type {get('position_embedding_type')} (only rope)")
    if get("recompute_granularity") == "selective":
        problems.append("--recompute-granularity selective (needs TransformerEngine; use full)")
    if get("recompute_method") == "block":
        problems.append("--recompute-method block (only uniform)")
    if problems:
        raise UnsupportedMegatronFlag("--train-backend megatron cannot run: " + "; ".join(problems))
    if get("use_distributed_optimizer"):
        logger.warning("--use-distributed-optimizer: optimizer state is not sharded across data-parallel "
                       "ranks by this backend (same numerics, more memory); --optimizer-cpu-offload moves it "
                       "to host memory instead")


@dataclass(frozen=True)
class MegatronOptions:
    tp: int = 1
    pp: int = 1
    sequence_parallel: bool = False
    optimizer_cpu_offload: bool = False
    recompute_activations: bool = False
    # Megatron model flags given explicitly (override config.json), e.g. {"num_layers": 2}
    model_overrides: dict[str, Any] = field(default_factory=dict)

    @property
    def layout(self) -> ParallelLayout:
        return ParallelLayout(tp=self.tp, pp=self.pp, sequence_parallel=self.sequence_parallel)

    @classmethod
    def from_args(cls, args: Any) -> MegatronOptions:
        def get(name: str, default: Any) -> Any:
            value = getattr(args, name, None)
            return default if value is None else value

        check_megatron_flags(args)
        return cls(
            tp=int(get("tensor_model_parallel_size", 1)),
            pp=int(get("pipeline_model_parallel_size", 1)),
            sequence_parallel=bool(get("sequence_parallel", False)),
            # trainer-core spells the field offload_optimizer_state (flag --optimizer-cpu-offload)
            optimizer_cpu_offload=bool(get("optimizer_cpu_offload", False) or get("offload_optimizer_state", False)),
            recompute_activations=bool(get("recompute_activations", False) or get("gradient_checkpointing", False)
                                       or get("recompute_granularity", None) == "full"),
            model_overrides=overrides_from_args(args),
        )
