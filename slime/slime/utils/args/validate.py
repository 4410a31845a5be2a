"""Values slime derives from others, and the rules a config must satisfy (each refusal says how to
fix it)."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from slime.utils.args.fields import DEFAULT_KL_LOSS_HORIZON, DEFAULT_ROLLOUT_FUNCTION, ConfigError
from slime.utils.args.flags import flag_name
from slime.utils.weight_sync import check_adapter_name

# One logger for everything the config says (callers filter on it), whichever part says it.
logger = logging.getLogger("slime.utils.arguments")


def derive(v: dict[str, Any]) -> None:
    """Fill values slime derives from others (documented next to each rule)."""
    if v["eps_clip_high"] is None:
        v["eps_clip_high"] = v["eps_clip"]
    if v["kl_loss_target"] is not None and v["kl_loss_horizon"] is None:
        v["kl_loss_horizon"] = DEFAULT_KL_LOSS_HORIZON
    if v["colocate"]:
        # Colocated engines share the training devices, so both sides must make room.
        v["offload"] = True
        if v["rollout_num_gpus"] is None:
            v["rollout_num_gpus"] = v["actor_num_nodes"] * v["actor_num_gpus_per_node"]
    if v["offload_train"] is None:
        v["offload_train"] = bool(v["offload"])
    if v["offload_rollout"] is None:
        v["offload_rollout"] = bool(v["offload"])
    if v["load_debug_rollout_data"]:
        v["debug_train_only"] = True
    if v["custom_loss_function_path"] and v["loss_type"] == "policy_loss":
        # The reference passes only --custom-loss-function-path; slime also wants --loss-type custom_loss.
        v["loss_type"] = "custom_loss"
    if v["advantage_estimator"] == "on_policy_distillation":
        v["use_opd"] = True
    samples = v["rollout_batch_size"] * v["n_samples_per_prompt"]
    if v["global_batch_size"] is None:
        steps = v["num_steps_per_rollout"] or 1
        if samples % steps:
            raise ConfigError(
                f"rollout_batch_size * n_samples_per_prompt = {samples} is not divisible by "
                f"--num-steps-per-rollout {steps}"
            )
        v["global_batch_size"] = samples // steps
    elif v["num_steps_per_rollout"] is not None and v["global_batch_size"] * v["num_steps_per_rollout"] != samples:
        raise ConfigError(
            f"--global-batch-size {v['global_batch_size']} * --num-steps-per-rollout {v['num_steps_per_rollout']} "
            f"!= rollout_batch_size * n_samples_per_prompt = {samples}; set only one of them"
        )
    if v["num_steps_per_rollout"] is None:
        v["num_steps_per_rollout"] = max(samples // v["global_batch_size"], 1) if v["global_batch_size"] else 1
    if v["lr_warmup_samples"] is not None:
        # The second page counts warmup in samples; the schedule steps once per optimizer step.
        if v["lr_warmup_iters"]:
            raise ConfigError("--lr-warmup-samples and --lr-warmup-iters both set; give one warmup")
        check(v["lr_warmup_samples"] >= 0, f"--lr-warmup-samples must be >= 0, got {v['lr_warmup_samples']}")
        v["lr_warmup_iters"] = math.ceil(v["lr_warmup_samples"] / v["global_batch_size"])


# Resources Ray defines itself: a placement flag naming one would not pick a node.
_BUILTIN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


def check(cond: bool, message: str) -> None:
    """ConfigError(message) unless cond."""
    if not cond:
        raise ConfigError(message)


# Upstream slime hooks on things this trainer does not have: refused, never accepted and ignored.
_UNSUPPORTED_HOOKS = {
    "buffer_filter_path": "the prompt data source keeps no rollout buffer (no partial rollouts), so there is "
                          "nothing for it to pick from; choose groups with --dynamic-sampling-filter-path, or pass "
                          "a data source that selects its own (--data-source-path)",
    "custom_convert_samples_to_train_data_path": "this trainer trains on Sample objects, not on upstream's "
                                                 "rollout_data dict",
    "rollout_data_postprocess_path": "this trainer trains on Sample objects, not on upstream's rollout_data dict",
}
_HOOK_ALTERNATIVES = ("use --rollout-sample-filter-path (take samples out of the loss), "
                      "--custom-reward-post-process-path (rewards before the advantages), or a "
                      "--custom-generate-function-path that sets each sample's loss_mask")


def validate(v: dict[str, Any]) -> None:
    """Refuse a config that cannot run (or would ignore a setting), with how to fix it."""
    for name, why in _UNSUPPORTED_HOOKS.items():
        check(not v[name], f"--{name.replace('_', '-')} is not supported: {why}"
                            + ("" if name == "buffer_filter_path" else f"; {_HOOK_ALTERNATIVES}"))
    positive_ints = (
        "actor_num_nodes", "actor_num_gpus_per_node", "rollout_num_gpus_per_engine", "rollout_batch_size",
        "n_samples_per_prompt", "global_batch_size", "micro_batch_size", "update_weights_interval",
        "lora_rank", "log_interval",
    )
    for name in positive_ints:
        check(v[name] is not None and v[name] >= 1, f"--{name.replace('_', '-')} must be >= 1, got {v[name]}")
    for name in ("num_rollout", "num_epoch", "save_interval", "max_tokens_per_gpu", "eval_interval",
                 "rollout_max_response_len", "rollout_max_context_len", "keep_last_n_checkpoints"):
        if v[name] is not None:
            check(v[name] >= 1, f"--{name.replace('_', '-')} must be >= 1, got {v[name]}")
    for name in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                 "expert_model_parallel_size"):
        check(v[name] >= 1, f"--{name.replace('_', '-')} must be >= 1, got {v[name]}")
    if v["train_backend"] == "megatron":
        world = v["actor_num_nodes"] * v["actor_num_gpus_per_node"]
        model_parallel = v["tensor_model_parallel_size"] * v["pipeline_model_parallel_size"] * v["context_parallel_size"]
        check(
            world % model_parallel == 0,
            f"training world size {world} is not divisible by TP * PP * CP = {model_parallel}",
        )
    else:
        # Model-parallel flags only mean something to Megatron; never ignore them silently.
        for name in ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
                     "expert_model_parallel_size"):
            check(v[name] == 1, f"--{name.replace('_', '-')} {v[name]} needs --train-backend megatron "
                                 f"(the {v['train_backend']} backend is data parallel only)")
    for name in ("actor_resources", "rollout_resources"):
        if v[name] is not None:
            check(bool(v[name].strip()) and v[name] not in _BUILTIN_RESOURCES and not v[name].startswith("node:"),
                   f"{flag_name(name)} {v[name]!r}: name a custom resource given to `ray start --resources` "
                   f"(not empty, not one of {', '.join(_BUILTIN_RESOURCES)} or a node: resource)")
    if v["rollout_num_engines"] is not None:
        check(v["rollout_num_engines"] >= 1, f"--rollout-num-engines must be >= 1, got {v['rollout_num_engines']}")
    samples = v["rollout_batch_size"] * v["n_samples_per_prompt"]
    check(
        samples % v["global_batch_size"] == 0,
        f"rollout_batch_size * n_samples_per_prompt = {v['rollout_batch_size']} * {v['n_samples_per_prompt']} = "
        f"{samples} is not divisible by --global-batch-size {v['global_batch_size']}",
    )
    if not v["use_dynamic_batch_size"]:
        world = v["actor_num_nodes"] * v["actor_num_gpus_per_node"]
        check(
            v["global_batch_size"] % (v["micro_batch_size"] * world) == 0,
            f"--global-batch-size {v['global_batch_size']} must be divisible by micro_batch_size * world size "
            f"= {v['micro_batch_size']} * {world}",
        )
    else:
        check(v["max_tokens_per_gpu"] is not None, "--use-dynamic-batch-size requires --max-tokens-per-gpu")
    check(0.0 < v["eps_clip"] < 1.0, f"--eps-clip must be in (0, 1), got {v['eps_clip']}")
    check(v["eps_clip_high"] > 0.0, f"--eps-clip-high must be > 0, got {v['eps_clip_high']}")
    if v["eps_clip_c"] is not None:
        check(v["eps_clip_c"] > 1.0, f"--eps-clip-c (dual clip) must be > 1.0, got {v['eps_clip_c']}")
    for name in ("kl_coef", "kl_loss_coef", "entropy_coef", "opd_kl_coef", "opd_scalar_coef", "weight_decay", "lr", "min_lr", "clip_grad"):
        check(math.isfinite(v[name]) and v[name] >= 0.0, f"--{name.replace('_', '-')} must be >= 0, got {v[name]}")
    check(0.0 <= v["gamma"] <= 1.0, f"--gamma must be in [0, 1], got {v['gamma']}")
    check(v["tis_clip"] > 0.0, f"--tis-clip must be > 0, got {v['tis_clip']}")
    check(
        0.0 <= v["tis_clip_low"] < v["tis_clip"],
        f"--tis-clip-low must be in [0, --tis-clip={v['tis_clip']}), got {v['tis_clip_low']}",
    )
    check(v["rollout_temperature"] > 0.0, f"--rollout-temperature must be > 0, got {v['rollout_temperature']}")
    check(0.0 < v["rollout_top_p"] <= 1.0, f"--rollout-top-p must be in (0, 1], got {v['rollout_top_p']}")
    check(v["rollout_top_k"] == -1 or v["rollout_top_k"] >= 1, f"--rollout-top-k must be -1 or >= 1, got {v['rollout_top_k']}")
    check(0.0 <= v["adam_beta1"] < 1.0 and 0.0 <= v["adam_beta2"] < 1.0, "--adam-beta1/--adam-beta2 must be in [0, 1)")
    check(v["num_epochs"] == 1, f"--num-epochs {v['num_epochs']}: each rollout batch is trained on in one pass "
           "(on-policy GRPO/OPD reuse no batch); for more optimizer steps per rollout use --num-steps-per-rollout, "
           "for passes over prompt data --num-epoch")
    check(v["lora_alpha"] > 0.0, f"--lora-alpha must be > 0, got {v['lora_alpha']}")
    check(0.0 <= v["lora_dropout"] < 1.0, f"--lora-dropout must be in [0, 1), got {v['lora_dropout']}")
    if v["use_lora"] and v["lora_dropout"] > 0.0:
        logger.warning("--lora-dropout %s: training log-probs will differ from the rollout policy's", v["lora_dropout"])
    _validate_adapter_name(v)
    if v["max_staleness"] is not None:
        check(v["max_staleness"] >= 0, f"--max-staleness must be >= 0, got {v['max_staleness']}")
    if v["lr_warmup_fraction"] is not None:
        check(0.0 <= v["lr_warmup_fraction"] <= 1.0, "--lr-warmup-fraction must be in [0, 1]")
    check(not (v["debug_rollout_only"] and v["debug_train_only"]), "--debug-rollout-only and --debug-train-only are exclusive")
    if v["loss_type"] == "custom_loss":
        check(bool(v["custom_loss_function_path"]), "--loss-type custom_loss requires --custom-loss-function-path")
    if v["rollout_backend"] == "external":
        check(bool(v["rollout_external_engine_addrs"]), "--rollout-backend external requires --rollout-external-engine-addrs")
    if v["kl_loss_target"] is not None:
        check(v["use_kl_loss"] and v["kl_loss_coef"] > 0.0,
               "--kl-loss-target steers the KL loss weight: it needs --use-kl-loss and a starting --kl-loss-coef > 0")
        check(math.isfinite(v["kl_loss_target"]) and v["kl_loss_target"] > 0.0,
               f"--kl-loss-target must be > 0, got {v['kl_loss_target']}")
        check(math.isfinite(v["kl_loss_horizon"]) and v["kl_loss_horizon"] >= 1.0,
               f"--kl-loss-horizon must be >= 1 (steps), got {v['kl_loss_horizon']}")
    else:
        check(v["kl_loss_horizon"] is None,
               "--kl-loss-horizon paces --kl-loss-target: give a target too (without one the KL weight is fixed)")
    if v["use_kl_loss"] and v["kl_loss_coef"] == 0.0:
        logger.warning("--use-kl-loss with --kl-loss-coef 0: the KL term is computed but has no effect")
    _validate_eval(v)


def _validate_adapter_name(v: dict[str, Any]) -> None:
    """A named adapter is served beside the base: without LoRA the trainer would push full weights,
    which replace what every other user of the engines is served, so the pair is refused."""
    name = v["lora_adapter_name"]
    if name is None:
        return
    check(bool(v["use_lora"]),
          f"--lora-adapter-name {name!r} serves the trained LoRA adapter under that name beside the base model; "
          "it needs --use-lora (without LoRA the trainer pushes full weights, which would replace the served "
          "base model for everyone)")
    problem = check_adapter_name(name)
    check(problem is None, f"--lora-adapter-name {problem} (requests name the adapter as lora_path)")


# Eval settings and their defaults: one set without --eval-prompt-data would be accepted and ignored.
_EVAL_SETTINGS = {"n_samples_per_eval_prompt": 1, "eval_max_response_len": None, "eval_temperature": None,
                  "eval_reward_key": None, "eval_function_path": None}


def _validate_eval(v: dict[str, Any]) -> None:
    data, interval = v["eval_prompt_data"], v["eval_interval"]
    if data is None and interval is None:
        for name, default in _EVAL_SETTINGS.items():
            check(v[name] == default, f"{flag_name(name)} {v[name]} applies to evaluation, which is off: set "
                                       "--eval-prompt-data NAME PATH and --eval-interval N (or drop it)")
        return
    check(data is not None and interval is not None,
           "--eval-interval (a --config file's evaluation.eval_frequency) and --eval-prompt-data go together "
           "(--eval-interval N says when to evaluate, "
           "--eval-prompt-data NAME PATH on what): " + ("--eval-prompt-data is missing" if data is None
                                                        else "--eval-interval is missing"))
    _validate_eval_pairs(data)
    _validate_eval_sampling(v)
    _validate_eval_mode(v)


def _validate_eval_pairs(data: Sequence[Any]) -> None:
    check(len(data) % 2 == 0 and len(data) > 0,
           f"--eval-prompt-data takes NAME PATH pairs (e.g. --eval-prompt-data gsm8k eval.jsonl), got {len(data)} "
           f"value(s): {' '.join(map(str, data))}")
    names = [str(n) for n in data[0::2]]
    for name in names:
        check(name and "/" not in name, f"--eval-prompt-data: dataset name {name!r} must be non-empty without '/' "
                                          "(it becomes the metric eval/<NAME>/reward); give NAME PATH pairs")
    check(len(set(names)) == len(names), f"--eval-prompt-data: dataset names repeat: {' '.join(names)}")


def _validate_eval_sampling(v: dict[str, Any]) -> None:
    check(v["n_samples_per_eval_prompt"] >= 1,
           f"--n-samples-per-eval-prompt must be >= 1, got {v['n_samples_per_eval_prompt']}")
    if v["eval_max_response_len"] is not None:
        check(v["eval_max_response_len"] >= 1, f"--eval-max-response-len must be >= 1, got {v['eval_max_response_len']}")
    if v["eval_temperature"] is not None:
        check(math.isfinite(v["eval_temperature"]) and v["eval_temperature"] >= 0.0,
               f"--eval-temperature must be >= 0 (0 = greedy), got {v['eval_temperature']}")


def _validate_eval_mode(v: dict[str, Any]) -> None:
    """Refuse the runs that could not evaluate, rather than let them skip it."""
    check(not v["debug_train_only"], "--eval-interval needs inference engines to evaluate with: "
                                      "--debug-train-only / --load-debug-rollout-data start none")
    check(not v["debug_rollout_only"], "--eval-interval evaluates after each training step: "
                                        "--debug-rollout-only trains nothing; drop the eval flags")
    own_source = v["data_source_path"] and not v["eval_function_path"] \
        and v["rollout_function_path"].replace(":", ".") != DEFAULT_ROLLOUT_FUNCTION
    check(not own_source,
           f"--eval-prompt-data: the rollout function {v['rollout_function_path']} draws from this run's own data "
           f"source (--data-source-path {v['data_source_path']}), not from prompt files; pass --eval-function-path "
           f"(e.g. {DEFAULT_ROLLOUT_FUNCTION}, which generates from the eval prompts)")


def check_eval_files(values: Sequence[str] | None) -> None:
    """Each --eval-prompt-data PATH exists (`parse_config(check_files=True)`, as the training scripts
    parse). Off by default: a launcher parses the trainer's command line before it prepares the data
    files; the rollout manager refuses a missing one again when it reads the sets at setup."""
    for name, path in zip(list(values or ())[0::2], list(values or ())[1::2], strict=True):
        check(Path(str(path)).is_file(), f"--eval-prompt-data {name} {path}: no such file")
