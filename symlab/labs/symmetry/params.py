"""The symmetry explorer's URL parameters: the declared controls of each part's config, and the page's views.

Every part reads the one ``seed`` parameter, derived from :class:`PerceptronConfig`'s declaration; each
config that reads it accepts that whole range (tests/test_page_symmetry.py checks it). The other names
are each one config's: the perceptrons' learning rate is ``lr``, the MLPs' ``sgd_lr`` (declared so).
"""

from symlab import controls
from symlab.labs.toy.experiment import ToyConfig
from symlab.urlstate import Param

from .experiment import MlpConfig, PerceptronConfig, ProximityConfig

PARTS = {
    "fig1": "The doubled mode (Fig. 1)",
    "mass": "Min-mass",
    "proximity": "Mode proximity",
    "quality": "Posterior quality (MMD)",
    "training": "Permutations in training",
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
CAPS = {
    PerceptronConfig: {"nets": 10_000, "epochs": 30},
    ToyConfig: {"n_train": 500},
    MlpConfig: {"width": 256, "steps": 3000, "lr": 1.0},
}
SEED_FROM = PerceptronConfig


def config_params(config_type) -> tuple[Param, ...]:
    return controls.url_params(config_type, FIELDS[config_type], caps=CAPS.get(config_type))


def page_params(hosting=None) -> tuple[Param, ...]:
    return (PART, *config_params(PerceptronConfig), MAX_WIDTH, *config_params(ProximityConfig),
            *config_params(ToyConfig), *config_params(MlpConfig), *controls.url_params(SEED_FROM, ["seed"]))
