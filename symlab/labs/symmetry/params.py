"""The symmetry explorer's URL parameters: the declared controls of each part's config, and the page's views.

Every part reads the one ``seed`` parameter, derived from :class:`PerceptronConfig`'s declaration; each
config that reads it accepts that whole range (tests/test_page_symmetry.py checks it). The other names
are each one config's: the perceptrons' learning rate is ``lr``, the MLPs' ``sgd_lr`` (declared so).
"""

from symlab.labs.toy.config import ToyConfig
from symlab.specs import controls
from symlab.specs.presets import Presets
from symlab.specs.urlstate import Param

from .config import DEFAULT_WIDTHS, MlpConfig, PerceptronConfig, ProximityConfig, QualityConfig

PARTS = {
    "fig1": "The doubled mode (Fig. 1)",
    "mass": "Min-mass",
    "proximity": "Mode proximity",
    "quality": "Posterior quality (MMD)",
    "training": "Permutations in training",
    "network": "Your network (a file)",
}
PART = Param("part", "choice", "fig1", choices=tuple(PARTS))
MAX_WIDTHS = tuple(str(2**k) for k in range(3, 14))  # the largest width of the proximity part: 8 to 8192
MAX_WIDTH = Param("max_width", "choice", "4096", choices=MAX_WIDTHS)

# Each config's fields on the page, in the sidebar's order (the quality part shows two of the toy BNN's).
FIELDS = {
    PerceptronConfig: ("nets", "epochs", "lr", "separation"),
    ProximityConfig: ("d_in", "d_out", "weights"),
    ToyConfig: ("alpha", "n_train"),
    MlpConfig: ("width", "depth", "lr", "steps", "schedule", "sort_key"),
}
# The shared server trains these while a visitor waits: the page stays below the declared ranges (the
# widgets' help says so); the command line does not. MLPs at learning rates near the top of theirs only
# diverge, and a diverged net still runs every step.
CAPS: dict[type, dict[str, float]] = {
    PerceptronConfig: {"nets": 10_000, "epochs": 30},
    ToyConfig: {"n_train": 500},
    MlpConfig: {"width": 256, "steps": 3000, "lr": 1.0},
}
SEED_FROM = PerceptronConfig


def config_params(config_type) -> tuple[Param, ...]:
    return controls.url_params(config_type, FIELDS[config_type], caps=CAPS.get(config_type))


def page_params(hosting=None) -> tuple[Param, ...]:
    return (
        PART,
        *config_params(PerceptronConfig),
        MAX_WIDTH,
        *config_params(ProximityConfig),
        *config_params(ToyConfig),
        *config_params(MlpConfig),
        *controls.url_params(SEED_FROM, ["seed"]),
    )


def page_config(config_type, values: dict, **fixed):
    """``config_type`` from the page's values of its fields and the shared seed, validated."""
    return config_type(
        **controls.config_values(config_type, values, (*FIELDS[config_type], "seed")), **fixed
    ).validate()


def page_configs(values: dict) -> dict:
    """Each part's config from the page's controls' values (the URL's, or the widgets')."""
    widths = tuple(w for w in DEFAULT_WIDTHS + (8192,) if w <= int(values["max_width"]))
    return {
        "perceptron": page_config(PerceptronConfig, values),
        "mlp": page_config(MlpConfig, values),
        "proximity": page_config(ProximityConfig, values, widths=widths),
        "quality": QualityConfig(toy=page_config(ToyConfig, values)).validate(),
    }


# Each sets its part's controls, every other from the defaults (the seed included); one sentence on what to watch.
PRESETS = Presets(
    {
        "Fig. 1: the doubled mode": (
            dict(part="fig1"),
            "Raw, the output weights have two mirror-image modes; sorting the units folds them into one.",
        ),
        "Fig. 1 with the paper's 10,000 nets": (
            dict(part="fig1", nets=10_000),
            "Five times the nets, the same picture: the second mode is the first, with the units swapped.",
        ),
        "Min-mass": (
            dict(part="mass", depth=2),
            "Every trained net can be rescaled to a lighter one that computes the same function.",
        ),
        "Wide nets: modes crowd together": (
            dict(part="proximity", weights="random", d_in=1, d_out=1, max_width="4096"),
            "The nearest permuted copy gets closer, relative to ‖w‖, as the width grows; Thm 3.1's bound says "
            "something (< 2) only from width 64.",
        ),
        "Trained nets, 2-D inputs": (
            dict(part="proximity", weights="trained", d_in=2, d_out=1, max_width="2048"),
            "Training does not keep the copies apart: the trend of random weights holds.",
        ),
        "Posterior quality: close modes": (
            dict(part="quality", alpha=0.25, n=10),
            "MFVI sits between the two close modes, far from the posterior raw and sorted; SGM's mixture is nearest both ways.",
        ),
        "Posterior quality: far modes, more data": (
            dict(part="quality", alpha=1.0, n=100),
            "MFVI picks one mode: far from the posterior raw, close once the units are sorted (the copy it missed is the same net).",
        ),
        # The two differ in the schedule alone. Eight units and a learning rate of 0.2 make the difference plain (one
        # swap moves τ by 1/14; tests/test_symmetry.py measures it): over seeds 0-4, mean τ 0.976 against 0.957, and in
        # the last tenth of the steps τ 0.999 against 0.966, with a swap in 6 % of the steps against 84 %.
        "Permutations in training": (
            dict(part="training", schedule="linear", key="max_in", width=8, sgd_lr=0.2),
            "Units swap places in most early steps; as the learning rate decays to zero the order freezes: in the last "
            "tenth of the steps τ ≈ 1.",
        ),
        "Constant learning rate": (
            dict(part="training", schedule="constant", key="max_in", width=8, sgd_lr=0.2),
            "The same nets without the decay: the noisy steps keep reordering units to the end, and τ stays lower.",
        ),
    }
)
