"""Binary RL + OPD: the judge's score and the hinted teacher's token advantage, weighted
(openclaw-combine/README.md)."""

from openclaw.methods.method import EmbeddedPreset, Method

METHOD = Method(
    name="combine",
    summary="Binary RL + OPD (recommended)",
    folder="openclaw-combine",
    trains_on=frozenset({"hint+score", "hint", "score"}),
    skip_reason="no_signal",
    provider="openclaw-combine/openclaw_combine_args.py",
    rollout="openclaw-combine/openclaw_combine_rollout.py:generate_rollout",
    loss="openclaw-combine/combine_loss.py:combine_loss",
    advantage_estimator="grpo",
    trainer_flags=("--disable-grpo-std-normalization", "--eps-clip", "0.2"),
    weights=(1.0, 1.0),
    weight_flags=("--openclaw-combine-w-opd", "--openclaw-combine-w-rl"),
    # On the embedded model the OPD weight 1.0 drifted off topic and 0.5 passed (two PASS runs,
    # bench/RESULTS.md). The KL weight starts at 0.5 and is steered toward a batch KL of 0.08 over
    # 5 steps (slime's adaptive KL): fixed at 0.5, one persona's preference moved the policy to a
    # batch KL of ~0.08 and passed while another stayed at ~0.02 and learned half as much; a main-job
    # run has ~45 steps, and a horizon of 10 could lower the weight by at most a factor 0.4.
    embedded=EmbeddedPreset(baseline="batch", rl_score="sign", kl_coef=0.5, lr=2e-4, kl_target=0.08,
                            kl_horizon=5.0, w_opd=0.5),
)
