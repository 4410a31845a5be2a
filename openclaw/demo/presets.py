"""Trainer flags of the three personal-agent methods (the same ones their launch scripts pass).

The method folders are plugin folders, not packages: the trainer loads them by file path,
resolved against the current directory and then the repository root. The data source they all
drain is library code (`openclaw.bridge.BufferDataSource`).
"""

from __future__ import annotations

from dataclasses import dataclass

from openclaw.bridge.flags import RL_SCORES

METHODS = ("combine", "rl", "opd")
BASELINES = ("batch", "zero", "running")

_METHOD_FLAGS: dict[str, list[str]] = {
    "rl": [
        "--extra-args-provider-path", "openclaw-rl/openclaw_rl_args.py",
        "--rollout-function-path", "openclaw-rl/openclaw_buffer_rollout.py:generate_rollout",
        "--advantage-estimator", "grpo",
    ],
    "opd": [
        "--extra-args-provider-path", "openclaw-opd/openclaw_opd_args.py",
        "--rollout-function-path", "openclaw-opd/openclaw_opd_rollout.py:generate_rollout",
        "--advantage-estimator", "on_policy_distillation",
    ],
    "combine": [
        "--extra-args-provider-path", "openclaw-combine/openclaw_combine_args.py",
        "--rollout-function-path", "openclaw-combine/openclaw_combine_rollout.py:generate_rollout",
        "--custom-loss-function-path", "openclaw-combine/combine_loss.py:combine_loss",
        "--advantage-estimator", "grpo",
    ],
}


@dataclass(frozen=True)
class DemoPreset:
    """The demo's training defaults for one (method, reward); a flag given on the command line wins."""

    baseline: str
    rl_score: str
    kl_coef: float
    lr: float
    kl_target: float | None = None  # None: the KL weight stays kl_coef; else steered toward this batch KL
    kl_horizon: float | None = None  # the steering's pace in train steps (None: slime's)


def demo_preset(method: str, reward: str = "judge") -> DemoPreset:
    """Binary RL on the judge: the graded score with the batch-mean baseline (measured against the
    running baseline: the same outcome, and the running one's lag made the mean advantage
    negative, the push-down that baseline 0 showed; openclaw-rl/README.md, "Reward signal").
    The other methods: batch mean, sign, KL 0.5 to the base.

    Combine starts its KL weight at 0.5 and steers it toward a batch KL of 0.08 with a 5-step
    horizon (slime's adaptive KL). With the weight fixed at 0.5, one persona's preference moved the
    policy to a batch KL of ~0.08 and passed while another stayed at ~0.02 and learned half as
    much; the target holds every persona to the same budget (bench/RESULTS.md, "The KL budget").
    Five steps, because a main-job run has ~45: a horizon of 10 could lower the weight by at most
    a factor 0.4 in a whole run.

    The length-only reward check (`--reward length`) exists to show that the verdict catches a
    policy that games its reward, so its preset leaves the policy free to game it: baseline 0 and
    no KL term. Under a batch-mean baseline the +/-1 length reward gives nothing to learn from
    (nearly every reply is over 25 words, so every advantage is 0: measured, bench/HISTORY.md).
    """
    if reward == "length":
        return DemoPreset(baseline="zero", rl_score="sign", kl_coef=0.0, lr=3e-4)
    if method == "rl":
        return DemoPreset(baseline="batch", rl_score="graded", kl_coef=0.5, lr=2e-4)
    if method == "combine":
        return DemoPreset(baseline="batch", rl_score="sign", kl_coef=0.5, lr=2e-4, kl_target=0.08, kl_horizon=5.0)
    return DemoPreset(baseline="batch", rl_score="sign", kl_coef=0.5, lr=2e-4)


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


def baseline_flags(method: str, batch_size: int, baseline: str) -> list[str]:
    """How a rollout of `batch_size` live turns is grouped (see openclaw-rl's README):
    "batch" = one GRPO group, baseline = the batch's mean score; "zero" = baseline 0;
    "running" (binary RL) = a mean of past steps' scores carried across steps."""
    if baseline not in BASELINES:
        raise ValueError(f"baseline must be one of {BASELINES}, got {baseline!r}")
    if method == "opd":  # the OPD advantage has no scalar baseline
        return ["--rollout-batch-size", str(batch_size), "--n-samples-per-prompt", "1"]
    if baseline == "running":
        if method != "rl":
            raise ValueError(f"baseline 'running' is binary RL's (openclaw-rl) option, not {method}'s")
        return ["--rollout-batch-size", str(batch_size), "--n-samples-per-prompt", "1", "--disable-rewards-normalization",
                "--openclaw-rl-baseline", "running"]
    if baseline == "zero":
        return ["--rollout-batch-size", str(batch_size), "--n-samples-per-prompt", "1", "--disable-rewards-normalization"]
    return ["--rollout-batch-size", "1", "--n-samples-per-prompt", str(batch_size), "--disable-grpo-std-normalization"]


def score_flags(method: str, rl_score: str) -> list[str]:
    """Binary RL's reward (openclaw-rl, and combine's binary-RL half): the judge's sign or its graded
    score (`--openclaw-rl-score`)."""
    if rl_score not in RL_SCORES:
        raise ValueError(f"rl score must be one of {RL_SCORES}, got {rl_score!r}")
    if method == "opd":
        if rl_score != "sign":
            raise ValueError("the graded score is a binary-RL reward (openclaw-rl, openclaw-combine); opd has none")
        return []
    return ["--openclaw-rl-score", rl_score]


def method_flags(method: str, *, model_path: str, engine_addr: str, buffer_dir: str, batch_size: int,
                 lr: float, lora_rank: int, wait_timeout: float | None, extra: list[str] | None = None,
                 baseline: str = "batch", rl_score: str = "sign") -> list[str]:
    """Flags for slime's parse_config: one method on the embedded CPU preset (LoRA, external
    engine = the serving server, behaviour log-probs as the PPO denominator)."""
    if method not in _METHOD_FLAGS:
        raise ValueError(f"--method must be one of {METHODS}, got {method!r}")
    flags = [
        "--hf-checkpoint", model_path, "--rollout-backend", "external", "--rollout-external-engine-addrs", engine_addr,
        "--data-source-path", "openclaw.bridge.BufferDataSource",
        *_METHOD_FLAGS[method],
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
