"""What a personal-agent method is: one `Method` object, declared once in its own file.

The launcher (recipes), the main job (demo), the Tinker trainer and the buffer-to-trainer bridge all
read a method from here; none of them states a method's plugins, signal kinds or defaults itself.
A method's plugins live in its folder (`openclaw-<name>/`) and are loaded by slime by file path.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# A judged turn's signal: a non-zero score, an accepted hint, both, or neither.
KINDS = ("hint+score", "hint", "score", "none")
# How a rollout's scalar rewards are centred: the batch mean (one GRPO group), 0, or (binary RL
# only) a mean of past steps' scores carried across steps.
BASELINES = ("batch", "zero", "running")


@dataclass(frozen=True)
class EmbeddedPreset:
    """The main job's training defaults for this method (CPU, embedded model), as measured there.

    A flag given on the command line wins; `kl_target=None` keeps the KL weight fixed.
    """

    baseline: str = "batch"
    rl_score: str = "sign"
    kl_coef: float = 0.5
    lr: float = 2e-4
    kl_target: float | None = None
    kl_horizon: float | None = None  # the KL steering's pace in train steps (None: slime's)
    w_opd: float | None = None  # None: the method's own loss weight


@dataclass(frozen=True)
class Variant:
    """Another loss for the same method, launched as its own recipe (`openclaw-<method>-<name>`).

    `flags` values written `${NAME:-default}` are launcher settings (env vars in the names table).
    """

    name: str
    summary: str
    loss: str
    flags: tuple[str, ...] = ()  # its trainer flags, in place of the method's own `trainer_flags`


@dataclass(frozen=True)
class Method:
    """A personal-agent method: which judged turns it trains on and the trainer plugins that train them.

    Advantage per response token t (the same mapping in slime's plugins and on Tinker):
        A_t = w_opd * (teacher_logp_t - old_logp_t) [uses_teacher] + w_rl * (score - baseline) [uses_score]
    """

    name: str  # --method / --openclaw-method
    summary: str
    folder: str  # its plugins and run scripts
    trains_on: frozenset[str]  # signal kinds (KINDS) of the turns it trains on
    skip_reason: str  # why a judged turn without those kinds is skipped (rollout/buffer_skipped/<reason>)
    provider: str  # its trainer flags (slime's --extra-args-provider-path)
    rollout: str  # slime's --rollout-function-path
    advantage_estimator: str
    loss: str | None = None  # slime's --custom-loss-function-path
    trainer_flags: tuple[str, ...] = ()  # its further trainer flags on the GPU recipes
    weights: tuple[float, float] | None = None  # (w_opd, w_rl) when the method weighs both signals
    weight_flags: tuple[str, ...] = ()  # with `weights`: the two trainer flags that set them (its provider's)
    baselines: tuple[str, ...] = ("batch", "zero")  # the scalar-reward baselines it accepts
    embedded: EmbeddedPreset = field(default_factory=EmbeddedPreset)
    variants: tuple[Variant, ...] = ()

    def __post_init__(self) -> None:
        unknown = set(self.trains_on) - set(KINDS) - {"none"}
        if not self.trains_on or unknown:
            raise ValueError(f"method {self.name}: trains_on must be a non-empty subset of {KINDS}, got {sorted(self.trains_on)}")
        if (self.weights is not None) != (len(self.weight_flags) == 2):
            raise ValueError(f"method {self.name}: weights and their two weight_flags go together")
        if not set(self.baselines) <= set(BASELINES):
            raise ValueError(f"method {self.name}: baselines must be among {BASELINES}")

    @property
    def recipe(self) -> str:
        """The launcher recipe (and run-script prefix) of this method."""
        return f"openclaw-{self.name}"

    def variant_recipe(self, variant: Variant | None) -> str:
        return f"{self.recipe}-{variant.name}" if variant else self.recipe

    @property
    def recipes(self) -> tuple[str, ...]:
        """Its launcher recipes: its own, then one per variant."""
        return tuple(self.variant_recipe(v) for v in (None, *self.variants))

    @property
    def uses_score(self) -> bool:
        """Trains on the judge's scalar score (binary RL's reward)."""
        return bool({"score", "hint+score"} & self.trains_on) and self.advantage_estimator != "on_policy_distillation"

    @property
    def uses_teacher(self) -> bool:
        """Trains on the hinted teacher's token log-probs (OPD)."""
        return "hint" in self.trains_on

    def plugin_flags(self, loss: str | None = None) -> list[str]:
        """slime flags that load this method's plugins (`loss` replaces its own loss plugin)."""
        flags = ["--extra-args-provider-path", self.provider, "--rollout-function-path", self.rollout]
        if loss or self.loss:
            flags += ["--custom-loss-function-path", loss or self.loss]
        return flags + ["--advantage-estimator", self.advantage_estimator]

    def token_advantages(self, opd: list[float], score: float, baseline: float,
                         w_opd: float | None = None, w_rl: float | None = None) -> list[float]:
        """A_t for one turn (see the class docstring); `opd` is teacher - old per token (zeros without a hint)."""
        default_opd, default_rl = self.weights or (1.0, 1.0)
        w_opd = default_opd if w_opd is None or self.weights is None else w_opd
        w_rl = default_rl if w_rl is None or self.weights is None else w_rl
        rl = (score - baseline) if self.uses_score else 0.0
        teacher = opd if self.uses_teacher else [0.0] * len(opd)
        return [w_opd * a + w_rl * rl for a in teacher]
