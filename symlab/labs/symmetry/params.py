"""The symmetry explorer's URL parameters: the declared controls of each part's config, and the page's views.

Every part reads the one ``seed`` parameter, derived from :class:`PerceptronConfig`'s declaration; each
config that reads it accepts that whole range (tests/test_page_symmetry.py checks it). The other names
are each one config's: the perceptrons' learning rate is ``lr``, the MLPs' ``sgd_lr`` (declared so).
"""

from symlab import controls, jobs
from symlab.labs.toy.experiment import ToyConfig
from symlab.urlstate import Param, parse_query

from .experiment import DEFAULT_WIDTHS, MlpConfig, PerceptronConfig, ProximityConfig, QualityConfig, perceptron_task

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


def page_config(config_type, values: dict, **fixed):
    """``config_type`` from the page's values of its fields and the shared seed, validated."""
    return config_type(**controls.config_values(config_type, values, (*FIELDS[config_type], "seed")), **fixed).validate()


def page_configs(values: dict) -> dict:
    """Each part's config from the page's controls' values (the URL's, or the widgets')."""
    widths = tuple(w for w in DEFAULT_WIDTHS + (8192,) if w <= int(values["max_width"]))
    return {
        "perceptron": page_config(PerceptronConfig, values),
        "mlp": page_config(MlpConfig, values),
        "proximity": page_config(ProximityConfig, values, widths=widths),
        "quality": QualityConfig(toy=page_config(ToyConfig, values)).validate(),
    }


def warm_tasks(hosting=None) -> list[jobs.Task]:
    """What the page's default link (the doubled mode) computes, for the server to start on as it starts."""
    return [perceptron_task(page_configs(parse_query({}, page_params(hosting))[0])["perceptron"])]
