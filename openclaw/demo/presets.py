"""The main job's trainer flags for a personal-agent method (openclaw.methods: its plugins and its
`embedded` defaults), on the embedded CPU preset.

The method folders are plugin folders, not packages: the trainer loads them by file path,
resolved against the current directory and then the repository root. The data source they all
drain is library code (`openclaw.bridge.BufferDataSource`).
"""

from __future__ import annotations

from openclaw.bridge.flags import RL_SCORES
from openclaw.methods import BASELINES, DEFAULT_METHOD, EmbeddedPreset, Method, get_method, method_names

METHODS = method_names()
__all__ = ["BASELINES", "DEFAULT_METHOD", "METHODS", "RL_SCORES", "baseline_flags", "demo_preset", "kl_flags",
           "method_flags", "score_flags"]

# The length-only reward check (`--reward length`) exists to show that the verdict catches a policy
# that games its reward, so its preset leaves the policy free to game it: baseline 0 and no KL term.
# Under a batch-mean baseline the +/-1 length reward gives nothing to learn from (nearly every reply
# is over 25 words, so every advantage is 0: measured, bench/HISTORY.md).
LENGTH_REWARD_PRESET = EmbeddedPreset(baseline="zero", rl_score="sign", kl_coef=0.0, lr=3e-4)


def demo_preset(method: str | Method, reward: str = "judge") -> EmbeddedPreset:
    """The main job's training defaults for one (method, reward): the method's `embedded` preset
    (openclaw/methods/<method>.py states and explains them); a flag given on the command line wins."""
    return LENGTH_REWARD_PRESET if reward == "length" else get_method(method).embedded


def kl_flags(kl_coef: float, kl_target: float | None = None, kl_horizon: float | None = None) -> list[str]:
    """The KL(policy || base) loss term (low-variance estimator), with its weight fixed or, given a
    target, steered toward that batch KL from `kl_coef` at the pace `kl_horizon` (slime's adaptive KL)."""
    if kl_target is None:
        if kl_horizon is not None:
            raise ValueError("a KL horizon paces a KL target: give a target too")
    elif not kl_target > 0:
        raise ValueError(f"the KL target must be > 0 (0: a fixed weight), got {kl_target}")
    elif kl_coef <= 0:
        raise ValueError("a KL target needs a KL weight to start from (kl_coef > 0)")
    if kl_horizon is not None and not kl_horizon >= 1:
        raise ValueError(f"the KL horizon is in train steps and must be >= 1, got {kl_horizon}")
    if kl_coef <= 0:
        return []
    flags = ["--use-kl-loss", "--kl-loss-coef", str(kl_coef), "--kl-loss-type", "low_var_kl"]
    if kl_target is not None:
        flags += ["--kl-loss-target", str(kl_target)]
    return flags + (["--kl-loss-horizon", str(kl_horizon)] if kl_horizon is not None else [])


def baseline_flags(method: str | Method, batch_size: int, baseline: str) -> list[str]:
    """How a rollout of `batch_size` live turns is grouped (see openclaw-rl's README):
    "batch" = one GRPO group, baseline = the batch's mean score; "zero" = baseline 0;
    "running" (binary RL) = a mean of past steps' scores carried across steps."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    m = get_method(method)
    if not m.uses_score:  # an advantage without a scalar reward has no baseline
        return ["--rollout-batch-size", str(batch_size), "--n-samples-per-prompt", "1"]
    if baseline not in m.baselines:
        raise ValueError(f"baseline {baseline!r} is not {m.name}'s option: it takes {', '.join(m.baselines)} (the "
                         "running baseline is binary RL's, openclaw-rl)")
    if baseline == "running":
        return ["--rollout-batch-size", str(batch_size), "--n-samples-per-prompt", "1", "--disable-rewards-normalization",
                "--openclaw-rl-baseline", "running"]
    if baseline == "zero":
        return ["--rollout-batch-size", str(batch_size), "--n-samples-per-prompt", "1", "--disable-rewards-normalization"]
    return ["--rollout-batch-size", "1", "--n-samples-per-prompt", str(batch_size), "--disable-grpo-std-normalization"]


def score_flags(method: str | Method, rl_score: str) -> list[str]:
    """Binary RL's reward (openclaw-rl, and combine's binary-RL half): the judge's sign or its graded
    score (`--openclaw-rl-score`)."""
    if rl_score not in RL_SCORES:
        raise ValueError(f"rl score must be one of {RL_SCORES}, got {rl_score!r}")
    if not get_method(method).uses_score:
        if rl_score != "sign":
            raise ValueError(f"the graded score is a binary-RL reward; {get_method(method).name} has none")
        return []
    return ["--openclaw-rl-score", rl_score]


def method_flags(method: str | Method, *, model_path: str, engine_addr: str, buffer_dir: str, batch_size: int,
                 lr: float, lora_rank: int, wait_timeout: float | None, extra: list[str] | None = None,
                 baseline: str = "batch", rl_score: str = "sign") -> list[str]:
    """Flags for slime's parse_config: one method on the embedded CPU preset (LoRA, external
    engine = the serving server, behaviour log-probs as the PPO denominator)."""
    m = get_method(method)  # a MethodError (a ValueError) names the known methods
    named = ["--openclaw-method", method] if isinstance(method, str) and method.endswith(".py") else []
    flags = [
        "--hf-checkpoint", model_path, "--rollout-backend", "external", "--rollout-external-engine-addrs", engine_addr,
        "--data-source-path", "openclaw.bridge.BufferDataSource",
        *m.plugin_flags(), *named,
        "--rl-buffer-dir", buffer_dir, "--buffer-min-batch", str(batch_size),
        *baseline_flags(method, batch_size, baseline), *score_flags(method, rl_score), "--num-rollout", "1000000",
        "--use-rollout-logprobs", "--rollout-temperature", "1.0",
        "--use-lora", "--lora-rank", str(lora_rank), "--lora-alpha", str(2 * lora_rank),
        "--lora-target-modules", "all-linear",
        "--lr", str(lr), "--weight-decay", "0", "--clip-grad", "1.0",
        "--use-dynamic-batch-size", "--max-tokens-per-gpu", "4096",
        "--no-progress-bar",
    ]
    if wait_timeout is not None:
        flags += ["--buffer-wait-timeout", str(wait_timeout)]
    return flags + list(extra or [])
