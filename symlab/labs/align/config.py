"""The alignment lab's settings, without torch: the command line parses them and a page link is read into them
before anything is computed (the computation: :mod:`symlab.labs.align.experiment`)."""

from __future__ import annotations

from dataclasses import dataclass

from symlab.lib.options import ALIGN_DEFAULT_STARTS, ALIGN_MAX_STARTS
from symlab.specs import controls
from symlab.specs.controls import MAX_INT, control

TASKS = ("moons", "mnist")
MNIST_TEST = 1000
MOONS_TEST = 1000
PATHS = ("before", "weights", "w2")  # unaligned; aligned by weight matching; aligned by W₂
PATH_TITLES = {"before": "unaligned", "weights": "weight matching", "w2": "W₂ alignment"}
NOISE_MULTIPLE = 2  # a barrier within this many Monte-Carlo standard errors of 0 is gone: the draws cannot tell it


def within_noise(barrier: float | None, error: float | None) -> bool:
    """Whether a loss barrier is below its noise, ``NOISE_MULTIPLE`` of its Monte-Carlo standard errors."""
    return barrier is not None and error is not None and barrier <= NOISE_MULTIPLE * error


@dataclass(frozen=True)
class AlignConfig:
    """Two MFVI posteriors of a ReLU MLP with ``depth`` hidden layers of ``width`` units, trained by
    Adam on the ELBO (one weight sample per step, minibatches of ``batch``) from seeds derived from
    ``seed``; the path is evaluated at ``path_points`` values of t with ``samples`` posterior draws."""

    task: str = control(
        "moons",
        choices=TASKS,
        label="Task",
        widget="radio",
        help="moons: two interleaved half moons (2-D); mnist: a subset of MNIST.",
    )
    width: int = control(64, low=2, high=512, label="Hidden units per layer", widget="slider")
    depth: int = control(2, low=1, high=4, label="Hidden layers", widget="slider")
    train_size: int = control(
        1000,
        low=10,
        high=60_000,
        step=10,
        label="Training points",
        url="train",
        widget="number",
        help="Moons: drawn from the seed. MNIST: the first images of the training set.",
    )
    noise: float = control(
        0.15,
        low=0.0,
        high=1.0,
        step=0.05,
        label="Noise on the moons",
        help="Moons only: the standard deviation of the Gaussian noise on the points.",
    )
    steps: int = control(2000, low=1, high=100_000, label="Adam steps", widget="slider")
    batch: int = control(128, low=1, high=60_000, label="Minibatch size", flag="--batch-size")
    lr: float = control(
        0.01, low=1e-4, high=0.1, step=1e-4, label="Learning rate", format="%.4f", help="Adam's learning rate."
    )
    prior_scale: float = control(
        1.0, low=0.05, high=10.0, step=0.05, label="Prior scale p (N(0, p²) on every weight)", url="prior"
    )
    init_sd: float = control(0.001, low=1e-6, high=1.0, label="Initial posterior standard deviation")
    samples: int = control(32, low=1, high=1000, label="Posterior samples per point of the path", widget="slider")
    path_points: int = control(21, low=3, high=201, label="Points of the path", help="Values of t from 0 to 1.")
    starts: int = control(
        ALIGN_DEFAULT_STARTS,
        low=1,
        high=ALIGN_MAX_STARTS,
        label="Alignment starts",
        help="Most coordinate descents tried with two or more hidden layers, the closest kept: three "
        "from the identity and one-pass matchings with the layers in order, three in other "
        "orders, then Git Re-Basin's random-order restarts and local-search steps in turn; "
        "it stops once 8 in a row end at the best distance. One hidden layer is one exact "
        "assignment.",
    )
    seed: int = control(
        0,
        low=0,
        high=MAX_INT,
        label="Seed",
        help="The data and both initialisations (q_A and q_B get different seeds derived from it).",
    )

    def validate(self) -> AlignConfig:
        return controls.validate(self)

    @property
    def sizes(self) -> tuple[int, ...]:
        d_in, d_out = (2, 2) if self.task == "moons" else (784, 10)
        return (d_in, *([self.width] * self.depth), d_out)
