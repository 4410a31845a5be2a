"""Load trainer plugins from a flag value and adapt them to one internal contract per kind.

A plugin path is either
  * dotted (slime's form): ``pkg.module.attr``, ``pkg.module:attr`` or ``pkg.module``, or
  * a file (the reference's form): ``./my_method/custom_loss.py`` or ``...py:attr``, resolved
    against the current directory first, then the repository root.
Without an attribute, a conventional name for the plugin kind is looked up
(``KIND_NAMES``). The adapters below accept both slime's signatures and the reference's, so a
method folder written for either runs unchanged:

  loss      slime: fn(args, batch, logits, sum_of_sample_mean) -> (loss, metrics)
            reference: compute_loss(policy_logits, reference_logits, rewards, advantages, config) -> Tensor
            -> LossFn(batch, *, config, reducer, logits=None) -> (loss, metrics)
  rm        slime: async fn(args, sample) -> float | dict   (with --group-rm: async fn(args, samples) -> list)
            reference: get_reward_model(config) -> object with .score(prompt, response, next_state)
            -> RewardModel with async score(sample) and async score_group(samples)
  generate  async fn(args, sample, sampling_params[, evaluation]) -> GenerateFn(sample, sampling_params, evaluation)
  rollout   fn(args, rollout_id, data_source, evaluation=False) -> RolloutFn(rollout_id, data_source, evaluation)
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported where a loss or reward is checked: loading an args provider needs none
    import torch

REPO_ROOT = Path(__file__).resolve().parents[3]

KIND_NAMES: dict[str, tuple[str, ...]] = {
    "loss": ("compute_loss", "custom_loss", "loss_function", "loss_fn"),
    "rm": ("get_reward_model", "reward_func", "custom_rm", "async_rm", "reward_fn", "compute_reward"),
    "generate": ("generate", "custom_generate"),
    "rollout": ("generate_rollout", "rollout", "custom_rollout"),
    "filter": ("dynamic_sampling_filter", "filter_fn", "check_reward_nonzero_std"),
    "sample_filter": ("rollout_sample_filter", "filter_function", "sample_filter"),
    "reward_post_process": ("post_process_rewards", "reward_post_process", "custom_reward_post_process"),
    "data_source": ("DataSource", "data_source", "get_data_source"),
    "args_provider": ("add_custom_arguments", "add_arguments", "extra_args_provider"),
}


class PluginError(ValueError):
    """A plugin cannot be found, imported, or called with any supported contract."""


# --------------------------------------------------------------------------------------------
# Locating and importing
# --------------------------------------------------------------------------------------------


def _split_file_spec(spec: str) -> tuple[str, str | None]:
    if ".py:" in spec:
        file_part, attr = spec.rsplit(":", 1)
        return file_part, attr or None
    return spec, None


def _resolve_file(file_part: str, search_dirs: Sequence[Path]) -> Path:
    candidate = Path(file_part).expanduser()
    if candidate.is_absolute():
        if candidate.is_file():
            return candidate
        raise PluginError(f"plugin file {file_part} does not exist")
    tried = []
    for base in (Path.cwd(), *search_dirs, REPO_ROOT):
        path = (base / candidate).resolve()
        tried.append(str(path))
        if path.is_file():
            return path
    raise PluginError(f"plugin file {file_part} not found (looked in: {', '.join(dict.fromkeys(tried))})")


def _import_file(path: Path) -> Any:
    # One module per file path: loading the same file twice returns the same module (its globals,
    # e.g. a cached reward model, are shared), and classes defined there stay picklable.
    name = f"slime_plugin_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:10]}"
    if name in sys.modules:
        return sys.modules[name]
    folder = str(path.parent)
    if folder not in sys.path:
        # Appended, never prepended: a method folder may import its siblings but cannot shadow libraries.
        sys.path.append(folder)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PluginError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise PluginError(f"importing plugin file {path} failed: {type(exc).__name__}: {exc}") from exc
    return module


def _import_dotted(spec: str) -> tuple[Any, str | None]:
    """Return (module, attr or None) for ``a.b.c``, ``a.b:c`` or a bare module ``a.b``."""
    if ":" in spec:
        module_name, attr = spec.split(":", 1)
        return _import_module(module_name, spec), attr
    if "." in spec:
        module_name, attr = spec.rsplit(".", 1)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                return _import_module(spec, spec), None
            raise PluginError(f"importing {module_name} for plugin {spec} failed: {exc}") from exc
        except Exception as exc:
            raise PluginError(f"importing {module_name} for plugin {spec} failed: {type(exc).__name__}: {exc}") from exc
        if hasattr(module, attr):
            value = getattr(module, attr)
            return (value, None) if inspect.ismodule(value) else (module, attr)
        try:
            return importlib.import_module(spec), None  # `pkg.module` naming a submodule
        except ImportError:
            raise PluginError(f"plugin {spec}: module {module_name} has no attribute {attr!r}") from None
    return _import_module(spec, spec), None


def _import_module(name: str, spec: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        hint = " (a file path needs a .py suffix)" if "/" in spec else ""
        raise PluginError(f"plugin {spec}: cannot import module {name!r}: {exc}{hint}") from exc
    except Exception as exc:
        raise PluginError(f"plugin {spec}: importing {name!r} failed: {type(exc).__name__}: {exc}") from exc


def load_plugin_module(spec: str, *, search_dirs: Sequence[str | Path] = ()) -> Any:
    """The module a plugin path names (a method folder's file, or a dotted module), imported the
    way the trainer imports plugins: tests and scripts reach a method folder's code through this,
    never by editing the import path themselves."""
    file_part, _ = _split_file_spec(spec.strip())
    if file_part.endswith(".py") or "/" in file_part or "\\" in file_part:
        return _import_file(_resolve_file(file_part, [Path(d) for d in search_dirs]))
    return _import_module(file_part, spec)


def load_plugin(spec: str, kind: str | None = None, *, search_dirs: Sequence[str | Path] = ()) -> Any:
    """Import the object a plugin flag names. ``kind`` picks the conventional names tried when
    the spec names a module or file without an attribute."""
    if callable(spec):  # already an object (programmatic use)
        return spec
    if not spec or not isinstance(spec, str):
        raise PluginError(f"empty plugin path for {kind or 'plugin'}")
    file_part, attr = _split_file_spec(spec.strip())
    if file_part.endswith(".py") or "/" in file_part or "\\" in file_part:
        module = _import_file(_resolve_file(file_part, [Path(d) for d in search_dirs]))
    else:
        module, attr = _import_dotted(file_part if attr is None else f"{file_part}:{attr}")
    if attr is not None:
        if not hasattr(module, attr):
            raise PluginError(f"plugin {spec}: {getattr(module, '__file__', module)} has no attribute {attr!r}")
        return getattr(module, attr)
    names = KIND_NAMES.get(kind or "", ())
    for name in names:
        if hasattr(module, name):
            return getattr(module, name)
    wanted = ", ".join(names) if names else "an attribute (add :name)"
    raise PluginError(f"plugin {spec}: no attribute given and none of the conventional names found ({wanted})")


# --------------------------------------------------------------------------------------------
# Signature helpers
# --------------------------------------------------------------------------------------------


def _positional(fn: Callable[..., Any]) -> tuple[list[str], bool, int]:
    """(positional parameter names, accepts *args, number of required positionals)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [], True, 0
    names, varargs, required = [], False, 0
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
            if p.default is p.empty:
                required += 1
        elif p.kind is p.VAR_POSITIONAL:
            varargs = True
    return names, varargs, required


def _accepts(fn: Callable[..., Any], n: int) -> bool:
    names, varargs, required = _positional(fn)
    return required <= n and (varargs or len(names) >= n)


def _describe(fn: Any) -> str:
    try:
        return f"{getattr(fn, '__qualname__', fn)}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        return repr(fn)


def _public_vars(ns: Any) -> dict[str, Any]:
    """Flag values of an args object, without private caches callers hang on it (``_plugin_cache``)."""
    return {k: v for k, v in vars(ns).items() if not k.startswith("_")} if hasattr(ns, "__dict__") else {}


def _args_namespace(config: Any) -> Any:
    """slime's flat ``args`` for a TrainConfig; anything else (a Namespace) passes through."""
    to_ns = getattr(config, "to_namespace", None)
    return to_ns() if callable(to_ns) else config


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


# --------------------------------------------------------------------------------------------
# Loss
# --------------------------------------------------------------------------------------------

LossFn = Callable[..., "tuple[torch.Tensor, dict[str, torch.Tensor]]"]


def _normalise_loss_output(out: Any, where: str) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    import torch

    metrics: dict[str, Any] = {}
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], Mapping):
        out, metrics = out
    if not isinstance(out, torch.Tensor) or out.numel() != 1:
        shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise PluginError(f"{where} must return a scalar loss tensor (or (loss, metrics)); got {shape}")
    loss = out.reshape(())
    clean = {k: (v.detach() if isinstance(v, torch.Tensor) else torch.tensor(float(v))) for k, v in metrics.items()}
    clean.setdefault("loss/total", loss.detach())
    return loss, clean


def reference_loss_config(config: Any) -> dict[str, Any]:
    """The ``config`` dict the reference's compute_loss receives: every flag by attribute name
    (extras included) plus its own keys ``clip_range`` (= --eps-clip) and, with --use-kl-loss,
    ``kl_coeff`` (= --kl-loss-coef). Without --use-kl-loss the example's own default applies."""
    out = _public_vars(_args_namespace(config))
    out.setdefault("clip_range", out.get("eps_clip", 0.2))
    if out.get("use_kl_loss"):
        out.setdefault("kl_coeff", out.get("kl_loss_coef", 0.0))
    return {k: v for k, v in out.items() if v is not None}


def adapt_loss(fn: Callable[..., Any], config: Any) -> LossFn:
    """Wrap a custom loss written in any supported form into the internal LossFn."""
    if not callable(fn):
        raise PluginError(f"custom loss {fn!r} is not callable")
    names, varargs, required = _positional(fn)
    sig = inspect.signature(fn) if names or not varargs else None
    kwonly = {p.name for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY} if sig else set()
    where = f"custom loss {_describe(fn)}"

    if {"reducer", "config"} <= kwonly:  # already the internal form
        def internal(batch, *, config=config, reducer, logits=None):
            return _normalise_loss_output(fn(batch, config=config, reducer=reducer, logits=logits), where)

        return internal

    if names[:2] in (["policy_logits", "reference_logits"], ["policy_log_probs", "reference_log_probs"]) or (
        len(names) == 5 and required == 5 and names[0] != "args"
    ):
        bound, ref_config = config, reference_loss_config(config)

        def reference(batch, *, config=config, reducer=None, logits=None):
            # A step that rebinds flags (an adaptive KL weight) passes its own config.
            step_config = ref_config if config is bound else reference_loss_config(config)
            mask = batch["loss_masks"].bool()
            if "rewards" not in batch:
                raise KeyError("batch is missing 'rewards' ([B] scalar rewards) needed by the reference compute_loss")
            rewards = batch["rewards"].float()
            per_token_rewards = rewards.unsqueeze(-1).expand(mask.shape) if rewards.dim() == 1 else rewards
            old = batch["old_log_probs"] if batch.get("old_log_probs") is not None else batch["ref_log_probs"]
            out = fn(
                batch["log_probs"][mask],  # current policy log p of each sampled response token
                old.detach()[mask],  # old policy's (the PPO ratio's denominator)
                per_token_rewards[mask],
                batch["advantages"].float()[mask],
                dict(step_config),
            )
            loss, metrics = _normalise_loss_output(out, where)
            if reducer is not None:
                # The example averages over this micro-batch only. Weight it by the micro-batch's share
                # of the global batch (what the reducer gives a mask of ones) so that summing the
                # micro-batch losses, as gradient accumulation does, yields the global mean.
                share = reducer(batch["loss_masks"].float()).detach()
                loss = loss * share
                metrics = {k: v * share for k, v in metrics.items()}
            return loss, metrics

        return reference

    if (names and names[0] == "args" and len(names) >= 2) or (required == 4 and len(names) == 4) or (varargs and not names):
        bound, args = config, _args_namespace(config)

        def slime_form(batch, *, config=config, reducer, logits=None):
            step_args = args if config is bound else _args_namespace(config)
            return _normalise_loss_output(fn(step_args, batch, logits, reducer), where)

        return slime_form

    raise PluginError(
        f"{where} fits no custom-loss contract. Use slime's fn(args, batch, logits, sum_of_sample_mean) -> "
        "(loss, metrics) or the reference's compute_loss(policy_logits, reference_logits, rewards, advantages, "
        "config) -> Tensor"
    )


def load_loss_fn(spec: str, config: Any) -> LossFn:
    return adapt_loss(load_plugin(spec, "loss"), config)


# --------------------------------------------------------------------------------------------
# Reward
# --------------------------------------------------------------------------------------------


def reference_rm_config(config: Any) -> dict[str, Any]:
    """The dict a reference ``get_reward_model(config)`` receives: every flag by attribute
    name (``prm_model_path``, ``judge_model_path``, ``majority_vote_n`` ...), extras included."""
    return _public_vars(_args_namespace(config))


def prompt_text(prompt: Any) -> str:
    """A sample's prompt as text for scorers that take strings (chat messages become
    ``role: content`` lines)."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        lines = []
        for message in prompt:
            if isinstance(message, Mapping):
                content = message.get("content", "")
                if not isinstance(content, str):  # OpenAI content parts
                    content = "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
                lines.append(f"{message.get('role', 'user')}: {content}")
            else:
                lines.append(str(message))
        return "\n".join(lines)
    return str(prompt)


def _check_reward(value: Any, where: str) -> Any:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float, Mapping)):
        return value
    torch = sys.modules.get("torch")  # a tensor exists only if torch is loaded: no import for a float reward
    if torch is not None and isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.item())
    raise PluginError(f"{where} returned {type(value).__name__}; expected a float or a dict")


class RewardModel:
    """Uniform reward interface: ``await rm.score(sample)`` and ``await rm.score_group(samples)``."""

    def __init__(self, *, single: Callable[[Any], Any] | None, group: Callable[[list[Any]], Any] | None, where: str):
        self._single, self._group, self.where = single, group, where

    async def score(self, sample: Any) -> Any:
        if self._single is None:
            result = await self.score_group([sample])
            return result[0]
        return _check_reward(await _maybe_await(self._single(sample)), self.where)

    async def __call__(self, sample: Any) -> Any:
        return await self.score(sample)

    async def score_group(self, samples: list[Any]) -> list[Any]:
        if self._group is None:
            return list(await asyncio.gather(*(self.score(s) for s in samples)))
        values = await _maybe_await(self._group(samples))
        if not isinstance(values, Sequence) or len(values) != len(samples):
            raise PluginError(f"{self.where} (--group-rm) must return one reward per sample, got {values!r}")
        return [_check_reward(v, self.where) for v in values]


def adapt_reward(obj: Any, config: Any, *, group: bool | None = None) -> RewardModel:
    """Wrap a reward plugin; ``group`` defaults to the config's ``--group-rm``."""
    ns = _args_namespace(config)
    group = bool(getattr(ns, "group_rm", False)) if group is None else group
    where = f"reward function {_describe(obj)}"

    if hasattr(obj, "score") and not inspect.isclass(obj) and not inspect.isfunction(obj):
        return _scorer_model(obj, where)
    if not callable(obj):
        raise PluginError(f"{where} is not callable")
    names, varargs, required = _positional(obj)
    if inspect.isclass(obj) or (len(names) == 1 and required <= 1 and not inspect.iscoroutinefunction(obj)):
        # Reference factory: get_reward_model(config) -> scorer with .score(prompt, response, next_state).
        scorer = obj(reference_rm_config(config))
        if not callable(getattr(scorer, "score", None)):
            raise PluginError(f"{where} returned {type(scorer).__name__} without a .score(prompt, response, next_state) method")
        return _scorer_model(scorer, where)
    if _accepts(obj, 2):
        if group:
            return RewardModel(single=None, group=lambda samples: obj(ns, samples), where=where)
        return RewardModel(single=lambda sample: obj(ns, sample), group=None, where=where)
    raise PluginError(
        f"{where} fits no reward contract. Use slime's async fn(args, sample) -> float | dict "
        "(async fn(args, samples) -> list with --group-rm) or the reference's get_reward_model(config) "
        "returning an object with .score(prompt, response, next_state)"
    )


def _scorer_model(scorer: Any, where: str) -> RewardModel:
    if not _accepts(scorer.score, 3):
        raise PluginError(f"{where}: .score must accept (prompt, response, next_state), has {_describe(scorer.score)}")

    async def single(sample: Any) -> Any:
        next_state = (getattr(sample, "metadata", None) or {}).get("next_state", "") or ""
        # Model inference blocks: keep the event loop (other rollouts, HTTP) responsive.
        return await asyncio.to_thread(scorer.score, prompt_text(sample.prompt), sample.response, next_state)

    return RewardModel(single=single, group=None, where=where)


def load_reward_model(spec: str, config: Any) -> RewardModel:
    return adapt_reward(load_plugin(spec, "rm"), config)


def extract_reward(value: Any, reward_key: str | None) -> float:
    """The scalar reward from a reward function's result (``--reward-key`` for dicts)."""
    if isinstance(value, Mapping):
        if reward_key is None:
            raise PluginError(f"reward function returned a dict {sorted(value)}; set --reward-key to pick one")
        if reward_key not in value:
            raise PluginError(f"--reward-key {reward_key!r} not in reward dict keys {sorted(value)}")
        value = value[reward_key]
    return float(value)


# --------------------------------------------------------------------------------------------
# Generate / rollout / filter / data source
# --------------------------------------------------------------------------------------------


def _takes_evaluation(fn: Callable[..., Any], where: str, contract: str) -> bool:
    """Whether a three-argument plugin also takes `evaluation` (a fourth argument); PluginError naming
    `contract` when it fits none."""
    names, varargs, _ = _positional(fn)
    if not callable(fn) or not _accepts(fn, 3):
        raise PluginError(f"{where} fits no contract: use {contract}")
    return varargs or len(names) >= 4 or "evaluation" in inspect.signature(fn).parameters


def adapt_generate(fn: Callable[..., Any], config: Any) -> Callable[..., Any]:
    """async gen(sample, sampling_params, evaluation=False) -> Sample | list[Sample]."""
    takes_eval = _takes_evaluation(fn, f"custom generate {_describe(fn)}",
                                   "async fn(args, sample, sampling_params[, evaluation])")
    ns = _args_namespace(config)

    async def generate(sample: Any, sampling_params: dict[str, Any], evaluation: bool = False) -> Any:
        if takes_eval:
            return await _maybe_await(fn(ns, sample, sampling_params, evaluation))
        return await _maybe_await(fn(ns, sample, sampling_params))

    return generate


def adapt_rollout(fn: Callable[..., Any], config: Any) -> Callable[..., Any]:
    """rollout(rollout_id, data_source, evaluation=False) -> RolloutFnTrainOutput | list | ..."""
    where = f"rollout function {_describe(fn)}"
    takes_eval = _takes_evaluation(fn, where, "fn(args, rollout_id, data_source, evaluation=False)")
    ns = _args_namespace(config)

    def rollout(rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
        if takes_eval:
            return fn(ns, rollout_id, data_source, evaluation)
        if evaluation:
            raise PluginError(f"{where} has no evaluation parameter; set --eval-function-path for eval")
        return fn(ns, rollout_id, data_source)

    rollout.takes_evaluation = takes_eval  # type: ignore[attr-defined]  # checked when evaluation is set up
    return rollout


def adapt_filter(fn: Callable[..., Any], config: Any) -> Callable[[list[Any]], Any]:
    """filter(samples_of_one_group) -> bool | DynamicFilterOutput (slime: fn(args, samples, **kw))."""
    if not callable(fn) or not _accepts(fn, 2):
        raise PluginError(f"dynamic sampling filter {_describe(fn)} fits no contract: use fn(args, samples, **kwargs)")
    ns = _args_namespace(config)
    return lambda samples, **kwargs: fn(ns, samples, **kwargs)


def load_sample_filter_fn(spec: str, config: Any) -> Callable[[list[list[Any]]], None]:
    """--rollout-sample-filter-path: fn(args, groups) that sets `sample.remove_sample` in place."""
    fn = load_plugin(spec, "sample_filter")
    if not callable(fn) or not _accepts(fn, 2):
        raise PluginError(f"rollout sample filter {_describe(fn)} fits no contract: use fn(args, groups)")
    ns = _args_namespace(config)
    return lambda groups: fn(ns, groups)


def load_reward_post_process_fn(spec: str, config: Any) -> Callable[[list[Any]], tuple[list[float], list[float]]]:
    """--custom-reward-post-process-path: fn(args, samples) -> (raw_rewards, rewards), one each per
    sample; `rewards` replace the estimator's own normalisation (the GRPO group baseline)."""
    fn = load_plugin(spec, "reward_post_process")
    if not callable(fn) or not _accepts(fn, 2):
        raise PluginError(f"reward post-process {_describe(fn)} fits no contract: use fn(args, samples)")
    ns = _args_namespace(config)

    def call(samples: list[Any]) -> tuple[list[float], list[float]]:
        out = fn(ns, samples)
        if not (isinstance(out, tuple | list) and len(out) == 2):
            raise PluginError(f"reward post-process {_describe(fn)} must return (raw_rewards, rewards), "
                              f"got {type(out).__name__}")
        raw, rewards = (list(map(float, x)) for x in out)
        if len(raw) != len(samples) or len(rewards) != len(samples):
            raise PluginError(f"reward post-process {_describe(fn)} returned {len(raw)} raw rewards and "
                              f"{len(rewards)} rewards for {len(samples)} samples")
        return raw, rewards

    return call


def load_generate_fn(spec: str, config: Any) -> Callable[..., Any]:
    return adapt_generate(load_plugin(spec, "generate"), config)


def load_rollout_fn(spec: str, config: Any) -> Callable[..., Any]:
    return adapt_rollout(load_plugin(spec, "rollout"), config)


def load_filter_fn(spec: str, config: Any) -> Callable[..., Any]:
    return adapt_filter(load_plugin(spec, "filter"), config)


def load_args_provider(spec: str) -> Callable[[argparse.ArgumentParser], Any]:
    fn = load_plugin(spec, "args_provider")
    if not callable(fn) or not _accepts(fn, 1):
        raise PluginError(f"extra args provider {_describe(fn)} must be fn(parser)")
    return fn


def args_provider_check(provider: Callable[..., Any]) -> Callable[[argparse.Namespace], Any] | None:
    """The provider module's `check_args(args)`, if it has one: the method's own rules across flags
    (raise ValueError), run when the command line is parsed, so a launcher that parses the trainer's
    command line before starting anything stops on them too, not the trainer minutes later."""
    check = getattr(inspect.getmodule(provider), "check_args", None)
    if check is not None and not (callable(check) and _accepts(check, 1)):
        raise PluginError(f"check_args of {_describe(provider)}'s module must be fn(args)")
    return check
