"""Binary RL: GRPO on the judge's score of each live turn (openclaw-rl/README.md)."""

from openclaw.methods.method import EmbeddedPreset, Method

METHOD = Method(
    name="rl",
    summary="Binary RL (GRPO, judge score as reward)",
    folder="openclaw-rl",
    trains_on=frozenset({"hint+score", "score"}),
    skip_reason="zero_score",
    provider="openclaw-rl/openclaw_rl_args.py",
    rollout="openclaw-rl/openclaw_buffer_rollout.py:generate_rollout",
    advantage_estimator="grpo",
    # Live turns are single responses: each rollout's turns form one GRPO group (baseline = their
    # mean score), not normalised by their spread.
    trainer_flags=("--disable-grpo-std-normalization", "--eps-clip", "0.2"),
    baselines=("batch", "zero", "running"),
    # The graded score with the batch-mean baseline: measured against the running baseline it gave
    # the same outcome, and the running one's lag made the mean advantage negative, the push-down
    # that baseline 0 showed (openclaw-rl/README.md, "Reward signal").
    embedded=EmbeddedPreset(baseline="batch", rl_score="graded", kl_coef=0.5, lr=2e-4),
)
