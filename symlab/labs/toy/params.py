"""The tractable-BNN page's URL parameters: the declared controls of :class:`~.config.ToyConfig` it
shows, with the page's caps, the paper table's α values and seeds (also the command line's
``--alphas`` and ``--seeds``), and the live training's Adam step."""

from symlab.specs import controls
from symlab.specs.presets import Presets
from symlab.specs.urlstate import SURFACE_VIEW, Param, format_floats

from .config import DEFAULT_TABLE_ALPHAS, ToyConfig

DEFAULTS = ToyConfig()

# The page's sidebar: every field the live view trains with, by field name.
FIELDS = ("alpha", "noise", "n_train", "prior_scale", "mi", "K", "lr", "batch_size", "init", "restarts", "seed")
# The live view redraws everything on every tick, so it keeps to what it can draw well: its 81-point
# posterior map resolves the modes up to α ≈ 3; all N training points are drawn on every redraw (and
# a batch above N is a full batch); the sliders keep their fine steps over the range worth exploring; each start
# trains and is drawn on every tick.
CAPS = {"alpha": 3.0, "noise": 2.0, "prior_scale": 5.0, "lr": 0.2, "n_train": 500, "batch_size": 500, "restarts": 8}

# The table's α values: a list of the config's α, in its full declared range (the table trains every α × seed run
# as one batch and draws no posterior), on the page (``alphas``) and the command line (``--alphas``).
ALPHA = controls.declaration(ToyConfig, "alpha")
ALPHAS = Param("alphas", "floats", format_floats(DEFAULT_TABLE_ALPHAS), ALPHA.low, ALPHA.high)
# This server's cap on α values × seeds (hosting's max_table_runs) is the page's real limit.
SEEDS = Param("seeds", "int", 5, 1, 100)

# Live training: how far it goes, and the Adam step it was paused at, which a reloaded page replays to (training is
# seeded: the same settings give the same path). A place in a run, not a setting.
LIVE_STEPS = 4000
ADAM_STEP = Param("adam_step", "int", 0, 0, LIVE_STEPS)


def page_params(hosting=None) -> tuple[Param, ...]:
    return (*controls.url_params(ToyConfig, FIELDS, caps=CAPS), ALPHAS, SEEDS, ADAM_STEP, SURFACE_VIEW)


# Each sets every control of the live view (the rest at their defaults, the seed included); one sentence on what
# to watch.
PRESETS = Presets(
    {
        "Close modes (paper default)": (
            dict(alpha=DEFAULTS.alpha, noise=DEFAULTS.noise, n=DEFAULTS.n_train, mi="exact", init="random"),
            "The two equivalent modes are close: MFVI settles between them, SGM's mixture sits on both.",
        ),
        "Far-apart modes": (
            dict(alpha=2.0, noise=0.25, n=30, mi="exact", init="random"),
            "With the modes far apart MFVI picks one; SGM's bound gains about ln 2 (exactly, at both fits' optima) and the "
            "predictions agree.",
        ),
        "Start at the origin": (
            dict(alpha=DEFAULTS.alpha, noise=DEFAULTS.noise, n=DEFAULTS.n_train, mi="exact", init="origin"),
            "Started exactly between the modes, MFVI has no reason to leave; SGM breaks the tie.",
        ),
        "InfoNCE with K = 2": (
            dict(alpha=DEFAULTS.alpha, noise=DEFAULTS.noise, n=DEFAULTS.n_train, mi="infonce", K=2),
            "The cheapest estimator, I₂ ≤ min(I, ln 2): still a lower bound, noisier, same picture.",
        ),
        "More data": (
            dict(alpha=DEFAULTS.alpha, noise=DEFAULTS.noise, n=200, batch=50, mi="exact"),
            "A sharper posterior separates the modes: watch MFVI commit to one of them.",
        ),
        "A stuck start (α = 3, one start)": (
            dict(alpha=3.0, noise=0.5, n=10, mi="exact", init="random", restarts=1, seed=11),
            "A single start ends with both units on one side, a local optimum of training, not the symmetry: "
            "raise Restarts to 4 and the best start reaches a mode.",
        ),
    },
    keeps={
        "alphas": "the paper tables' α values, a computation apart from the live view",
        "seeds": "the paper tables' number of seeds, a computation apart from the live view",
        "adam_step": "the live training's place in its run, not a setting (new settings start it over)",
        "surface": "the 3-D landscape, a way of looking at the same training",
    },
)
