"""Evaluation during training (--eval-prompt-data, --eval-interval): the rollout manager's side.

`Run.evaluate` (slime.ray.driver) asks the rollout manager, which holds the eval datasets
(`EvalDataSource`, read once) and the eval function loaded here, to run

    fn(args, rollout_id, eval_data_source, evaluation=True) -> RolloutFnEvalOutput

(--eval-function-path, else --rollout-function-path) and turns its output into the step's
`eval/<name>/reward` and `eval/<name>/samples`. Only these numbers leave the manager: evaluation
samples never reach the trainer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from slime.utils.plugins import PluginError, extract_reward, load_rollout_fn

EvalFn = Callable[[int, Any], Any]


def load_eval_fn(args: Any) -> EvalFn:
    """The eval function, refused now (at setup) when it cannot be asked to evaluate."""
    own = getattr(args, "eval_function_path", None)
    spec = own or args.rollout_function_path
    fn = load_rollout_fn(spec, args)
    if not getattr(fn, "takes_evaluation", True):
        flag = "--eval-function-path" if own else "--rollout-function-path"
        raise ValueError(f"{flag} {spec} takes no `evaluation` argument, so it cannot evaluate "
                         "--eval-prompt-data: pass --eval-function-path with "
                         "fn(args, rollout_id, data_source, evaluation=True) -> RolloutFnEvalOutput")

    def evaluate(rollout_id: int, data_source: Any) -> Any:
        return fn(rollout_id, data_source, evaluation=True)

    return evaluate


def eval_metrics(out: Any, names: Sequence[str], reward_key: str | None) -> dict[str, float]:
    """`eval/<name>/reward` (mean) and `eval/<name>/samples` per dataset, plus the function's own
    metrics. Every dataset must be answered: a missing one is an error, never a skipped metric."""
    data = getattr(out, "data", None)
    if not isinstance(data, Mapping):
        raise TypeError(f"the eval function returned {type(out).__name__}; expected RolloutFnEvalOutput(data="
                        "{name: {'rewards': [...]} or {'samples': [...]}}) for evaluation=True")
    missing = [name for name in names if name not in data]
    if missing:
        raise ValueError(f"the eval function returned no results for eval dataset(s) {missing} (got {sorted(data)})")
    metrics = dict(getattr(out, "metrics", None) or {})
    for name in names:
        rewards = _rewards(data[name], reward_key, name)
        metrics[f"eval/{name}/reward"] = sum(rewards) / len(rewards)
        metrics[f"eval/{name}/samples"] = float(len(rewards))
    return metrics


def _rewards(entry: Any, reward_key: str | None, name: str) -> list[float]:
    if not isinstance(entry, Mapping) or not ("rewards" in entry or "samples" in entry):
        raise TypeError(f"eval dataset {name}: expected {{'rewards': [...]}} or {{'samples': [...]}}, got {entry!r:.200}")
    raw = entry["rewards"] if "rewards" in entry else [s.reward for s in entry["samples"]]
    if not raw:
        raise ValueError(f"eval dataset {name}: the eval function returned no rewards")
    if any(r is None for r in raw):
        raise ValueError(f"eval dataset {name}: a sample has no reward")
    try:
        return [extract_reward(r, reward_key) for r in raw]
    except PluginError as exc:  # its message names --reward-key; in evaluation --eval-reward-key decides
        raise ValueError(f"eval dataset {name}: {exc} (in evaluation: --eval-reward-key, default "
                         "--reward-key)") from None
