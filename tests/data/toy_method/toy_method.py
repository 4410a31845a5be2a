"""A fourth personal-agent method, declared the way the built-in ones are: binary RL on only the
turns where the judge both scored the reply and said how to fix it ("hint+score")."""

from openclaw.methods import EmbeddedPreset, Method

METHOD = Method(
    name="toy",
    summary="binary RL on hinted, scored turns only",
    folder="tests/data/toy_method",
    trains_on=frozenset({"hint+score"}),
    skip_reason="no_hinted_score",
    provider="tests/data/toy_method/toy_args.py",
    rollout="tests/data/toy_method/toy_rollout.py:generate_rollout",
    advantage_estimator="grpo",
    trainer_flags=("--disable-grpo-std-normalization", "--eps-clip", "0.3"),
    embedded=EmbeddedPreset(baseline="batch", rl_score="sign", kl_coef=0.25, lr=1e-4),
)
