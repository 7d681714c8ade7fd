"""The tractable BNN lab's settings, without torch: the command line parses them and a page link is read
into them before anything is computed (the computation: :mod:`symlab.labs.toy.experiment`)."""

from __future__ import annotations

from dataclasses import dataclass

from symlab.lib.options import TWO_RELU_INITS, TWO_RELU_MI_ESTIMATORS
from symlab.specs import controls
from symlab.specs.controls import MAX_INT, control

DEFAULT_TABLE_ALPHAS = (0.25, 0.5, 0.75, 1.0)  # the paper's Tables 2–3
DEFAULT_STEPS = 2000  # Adam steps of a fit

INPUTS = ("uniform", "normal")


@dataclass(frozen=True)
class ToyConfig:
    """Data, prior and training settings. Defaults show MFVI squeezing between the modes.

    Each field's range is its one declaration (:mod:`symlab.specs.controls`) for the page, the command line and
    :meth:`validate`. The lower ends: the exact posterior's 201-point grid has cells at least 0.02 wide, so
    noise below 0.05 or a prior std dev below 0.1 would leave the posterior a few cells wide or less; Adam
    moves a parameter about ``lr`` per step, so below 0.001 the default 2000 steps do not reach the modes.
    """

    alpha: float = control(
        0.25,
        low=0.0,
        high=10.0,
        step=0.05,
        label="True slope α (y = α|x| + ε)",
        help="Slope α of the true function; the posterior's modes are (α, −α) and (−α, α).",
    )
    noise: float = control(
        0.5, low=0.05, high=10.0, step=0.05, label="Noise std dev", help="Std dev of ε, known to the model."
    )
    n_train: int = control(
        10, low=1, high=100_000, url="n", label="Training points N", help="Training points (x, α|x| + ε)."
    )
    n_test: int = control(
        500, low=1, high=100_000, label="Test points", help="Test points, drawn as the training points are."
    )
    input_dist: str = control(
        "uniform", choices=INPUTS, label="Inputs x", help="Uniform on [−2, 2], or standard normal."
    )
    prior_scale: float = control(
        1.0,
        low=0.1,
        high=100.0,
        step=0.1,
        url="prior",
        label="Prior std dev",
        help="Std dev of the isotropic Gaussian prior on (w₁, w₂).",
    )
    lr: float = control(
        0.02,
        low=0.001,
        high=1.0,
        step=0.001,
        format="%.3f",
        label="Learning rate (Adam)",
        help="Adam's learning rate: each parameter moves about this much per step.",
    )
    batch_size: int = control(
        10,
        low=1,
        high=100_000,
        url="batch",
        label="Batch size",
        help="Training points per step; at least N means full batch.",
    )
    samples: int = control(
        16, low=1, high=4096, label="Monte-Carlo samples", help="Monte-Carlo samples M per training step."
    )
    K: int = control(
        2,
        low=2,
        high=4096,
        label="K (InfoNCE)",
        help="InfoNCE's K: K − 1 sampled group elements and the sample itself.",
    )
    mi: str = control(
        "exact",
        choices=TWO_RELU_MI_ESTIMATORS,
        widget="segmented",
        label="SGM's mutual information",
        help="exact: G = {id, swap} enumerated; infonce: the I_K estimate.",
    )
    init: str = control(
        "random",
        choices=TWO_RELU_INITS,
        widget="segmented",
        label="Initial means",
        help="random: means drawn from N(0, 0.5²); origin: both at 0. Std devs start at 0.5.",
    )
    restarts: int = control(
        4,
        low=1,
        high=64,
        label="Restarts",
        help="Initialisations per method, all fixed by the seed and trained together; the "
        "fit with the highest own bound is kept (with origin, they differ only in "
        "their Monte-Carlo noise).",
    )
    seed: int = control(0, low=0, high=MAX_INT, label="Seed", help="Seed of the data and the initialisation.")

    def validate(self) -> ToyConfig:
        """This config, or one ValueError naming every field out of its declared range."""
        return controls.validate(self)
