"""On-policy distillation: the policy shown the judge's hint is the teacher (openclaw-opd/README.md)."""

from openclaw.methods.method import EmbeddedPreset, Method, Variant

METHOD = Method(
    name="opd",
    summary="on-policy distillation from the hinted teacher",
    folder="openclaw-opd",
    trains_on=frozenset({"hint+score", "hint"}),
    skip_reason="no_hint",
    provider="openclaw-opd/openclaw_opd_args.py",
    rollout="openclaw-opd/openclaw_opd_rollout.py:generate_rollout",
    advantage_estimator="on_policy_distillation",
    trainer_flags=("--opd-kl-coef", "1.0", "--eps-clip", "0.2"),
    embedded=EmbeddedPreset(baseline="batch", rl_score="sign", kl_coef=0.5, lr=2e-4),
    variants=(
        Variant("topk", "OPD, top-k distillation loss (OPD_TOPK)",
                loss="openclaw-opd/topk_distillation_loss.py:topk_distillation_loss",
                flags=("--opd-topk", "${OPD_TOPK:-16}")),
    ),
)
