"""The mode-interpolation lab's settings, without numpy: the command line parses them and a page link is read
into them before anything is computed (the computation: :mod:`symlab.labs.modes.experiment`)."""

from __future__ import annotations

from dataclasses import dataclass

from symlab.specs import controls
from symlab.specs.controls import MAX_INT, control

PROTOCOLS = ("exact", "mc")
COVARIANCES = ("diag", "full")
# The target's log density squares a = α/σ: keep a² far below float64's overflow (~1e308).
MAX_ALPHA_OVER_SIGMA = 1e100


def sweep_alpha_max(sigma: float, alpha: float = 0.0) -> float:
    """The largest α of a sweep that names none: 10σ, twice the threshold α* ≈ 5σ, so that the transition sits
    mid-sweep whatever σ (the problem depends on α/σ alone); further where ``alpha`` (an α to show on it) is."""
    return max(10.0 * sigma, alpha)


@dataclass(frozen=True)
class SweepConfig:
    """A sweep of α for one σ: the target's σ and dimension d, the α grid, and the protocol (defaults: the
    paper's). Each field's range is its one declaration (:mod:`symlab.specs.controls`) for the page, the command
    line and :meth:`validate`.

    σ only sets the unit (μ*/σ and Σ*/σ² depend on α/σ alone), so [0.1, 20] loses nothing; with d ≤ 100 it
    keeps det Σ* = s²σ^(2(d−1)) a finite, non-zero float64.
    """

    sigma: float = control(
        1.0, low=0.1, high=20.0, step=0.05, label="Component std dev σ", help="Std dev σ of each component."
    )
    dim: int = control(
        2,
        low=1,
        high=100,
        label="Dimension d (for det Σ*)",
        help="Dimension d of the target; only det Σ* (and the mc protocol's cost) depends on it.",
    )
    alpha_max: float = control(
        0.0, low=0.0, label="Largest mode distance", help="Largest mode distance α of the sweep; 0: 10σ."
    )
    points: int = control(100, low=2, high=10_000, label="Sweep points", help="α values in the sweep.")
    protocol: str = control(
        "exact",
        choices=PROTOCOLS,
        label="Protocol",
        help="exact: noise-free quadrature (fast); mc: the paper's Monte-Carlo protocol with Adam.",
    )
    covariance: str = control(
        "diag", choices=COVARIANCES, label="Covariance of q", help="diag: std devs only; full: a Cholesky factor."
    )
    samples: int = control(5000, low=1, label="Monte-Carlo samples", help="Samples per Adam step and for the final KL.")
    steps: int = control(1000, low=1, label="Adam steps", help="Adam steps.")
    # Adam moves each parameter about lr per step: below 10⁻⁶, q would not move.
    lr: float = control(1e-2, low=1e-6, label="Learning rate (Adam)", help="Adam's learning rate, a distance in x.")
    seed: int = control(0, low=0, high=MAX_INT, label="Seed", help="Seed of the Monte-Carlo samples.")

    @property
    def largest_alpha(self) -> float:
        return self.alpha_max or sweep_alpha_max(self.sigma)

    def mc_options(self) -> dict:
        """The Monte-Carlo protocol's settings, as :func:`fit_monte_carlo` takes them."""
        return {
            "covariance": self.covariance,
            "samples": self.samples,
            "steps": self.steps,
            "lr": self.lr,
            "seed": self.seed,
        }

    def validate(self) -> SweepConfig:
        """This config, or one ValueError naming every field out of its declared range and a sweep too wide
        for σ."""
        numbers_ok = all(
            controls.declaration(SweepConfig, name).accepts(getattr(self, name)) for name in ("sigma", "alpha_max")
        )
        ratio = self.largest_alpha / self.sigma if numbers_ok else 0.0
        return controls.validate(
            self,
            [
                (
                    ratio <= MAX_ALPHA_OVER_SIGMA,
                    f"the sweep's largest α/σ is {ratio:g}; it must be <= "
                    f"{MAX_ALPHA_OVER_SIGMA:g} (choose a larger sigma or a smaller alpha_max)",
                )
            ],
        )
