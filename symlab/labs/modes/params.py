"""The mode-interpolation page's URL parameters: σ and d as :class:`~.config.SweepConfig` declares
them (σ capped for the page), and the page's own view: the α it shows and the forward-KL toggle."""

from symlab.specs import controls
from symlab.specs.presets import Presets
from symlab.specs.urlstate import SURFACE_VIEW, Param

from .config import SweepConfig

FIELDS = ("sigma", "dim")
# The default link is the first preset's state, "Close modes" (the class path's first step).
# The page's α slider ends at the sweep of its largest σ, 10σ = 20 at σ = 2:
# up to there both sides of the threshold α* ≈ 5σ are within reach (and Fig. 5's σ values, 0.25 to 2).
SIGMA_CAP = 2.0
CAPS = {"sigma": SIGMA_CAP}
ALPHA = Param("alpha", "float", 2.0, 0.0, SweepConfig(sigma=SIGMA_CAP).largest_alpha, step=0.05)
FORWARD = Param("forward", "bool", False)


def page_params(hosting=None) -> tuple[Param, ...]:
    return (ALPHA, *controls.url_params(SweepConfig, FIELDS, caps=CAPS), FORWARD, SURFACE_VIEW)


# Each sets every control (d at its default); one sentence on what to watch.
PRESETS = Presets(
    {
        "Close modes": (
            dict(alpha=2.0, sigma=1.0, forward=False),
            "The modes overlap: q sits exactly at the midpoint, wider than either component.",
        ),
        "Just below α*": (
            dict(alpha=4.5, sigma=1.0, forward=False),
            "The target is clearly bimodal, yet q still straddles both modes, on neither.",
        ),
        "Just above α*": (
            dict(alpha=5.2, sigma=1.0, forward=False),
            "A small step further and q snaps onto the first mode; the KL jumps towards ln 2.",
        ),
        "Far modes": (
            dict(alpha=8.0, sigma=1.0, forward=False),
            "q is one component; the KL is ln 2, the cost of ignoring half the mass.",
        ),
        "Narrow components": (
            dict(alpha=1.5, sigma=0.25, forward=False),
            "α* scales with σ: at σ = 0.25 the threshold is ≈ 1.2, so α = 1.5 is already mode-seeking.",
        ),
        "Forward-KL contrast": (
            dict(alpha=6.0, sigma=1.0, forward=True),
            "Forward KL matches moments: it always covers both modes, however far apart.",
        ),
    },
    keeps={"surface": "the 3-D landscape of the objective, a way of looking at the same fit"},
)
