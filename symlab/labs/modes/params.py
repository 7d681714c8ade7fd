"""The mode-interpolation page's URL parameters: σ and d as :class:`~.experiment.SweepConfig` declares
them (σ capped for the page), and the page's own view: the α it shows and the forward-KL toggle."""

from symlab import controls
from symlab.urlstate import Param

from .experiment import SweepConfig

FIELDS = ("sigma", "dim")
# The page's α slider and sweep charts end at the sweep of its largest σ, max(10, 10σ) = 20 at σ = 2:
# up to there both sides of the threshold α* ≈ 5σ are within reach (and Fig. 5's σ values, 0.25 to 2).
SIGMA_CAP = 2.0
CAPS = {"sigma": SIGMA_CAP}
ALPHA = Param("alpha", "float", 3.0, 0.0, SweepConfig(sigma=SIGMA_CAP).largest_alpha, step=0.05)
FORWARD = Param("forward", "bool", False)


def page_params(hosting=None) -> tuple[Param, ...]:
    return (ALPHA, *controls.url_params(SweepConfig, FIELDS, caps=CAPS), FORWARD)
