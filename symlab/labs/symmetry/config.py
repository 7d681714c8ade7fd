"""The symmetry explorer's settings, without torch: the command line parses them and a page link is read into
them before anything is computed (the computations: :mod:`symlab.labs.symmetry.experiment`)."""

from __future__ import annotations

from dataclasses import dataclass

from symlab.labs.toy.config import ToyConfig
from symlab.lib.options import SORT_KEYS
from symlab.specs import controls
from symlab.specs.controls import MAX_INT, control


@dataclass(frozen=True)
class PerceptronConfig:
    """Laurent et al. App. A: SGD, BCE, batch 10, lr 2, 10 epochs, 200 points per class."""

    nets: int = control(2000, low=10, high=100_000, step=10, label="Perceptrons trained at once", widget="number")
    epochs: int = control(10, low=1, high=100, label="Epochs", widget="slider")
    lr: float = control(2.0, low=0.1, high=10.0, step=0.1, label="SGD learning rate (perceptrons)")
    batch: int = control(10, low=1, high=10_000, label="Minibatch size")
    points: int = control(200, low=2, high=10_000, label="Training points per class")
    separation: float = control(
        2.0,
        low=0.5,
        high=10.0,
        step=0.25,
        label="Class separation s (means ±(s, s))",
        url="sep",
        help="The class means sit at ±(s, s), with identity covariances.",
    )
    # Nets with a higher final training loss are dropped (failed runs; see PerceptronRun.kept).
    max_loss: float = control(0.05, low=0.0, high=100.0, label="Largest final loss of a kept net")
    seed: int = control(0, low=0, high=MAX_INT, label="Seed")

    def validate(self) -> PerceptronConfig:
        return controls.validate(self)


SCHEDULES = ("linear", "constant")


@dataclass(frozen=True)
class MlpConfig:
    """Batched MLPs on the first ``train_size`` MNIST training images, plain SGD."""

    width: int = control(32, low=2, high=1024, label="Hidden width", widget="slider")
    depth: int = control(1, low=1, high=3, label="Hidden layers", widget="slider")
    instances: int = control(4, low=1, high=64, label="MLPs trained at once")
    steps: int = control(1000, low=1, high=20_000, label="SGD steps", widget="slider")
    lr: float = control(0.1, low=0.005, high=10.0, step=0.005, label="SGD learning rate (MLPs)", url="sgd_lr")
    schedule: str = control(
        "linear",
        choices=SCHEDULES,
        label="Learning-rate schedule",
        widget="radio",
        help="linear: decays to 0 at the last step.",
    )
    batch: int = control(32, low=1, high=4096, label="Minibatch size", flag="--batch-size")
    train_size: int = control(10_000, low=100, high=60_000, label="MNIST training images used")
    # Laurent §5.2: the maximum weight was the most stable statistic.
    sort_key: str = control(
        "max_in",
        choices=SORT_KEYS,
        label="Sort units by",
        url="key",
        help="first_in: the weight from the first input; max_in: the largest incoming weight; "
        "first_out: the weight to the first unit of the next layer.",
    )
    seed: int = control(0, low=0, high=MAX_INT, label="Seed")

    def validate(self) -> MlpConfig:
        return controls.validate(self)


PROXIMITY_WEIGHTS = ("random", "trained")


DEFAULT_WIDTHS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)

MIN_WIDTH, MAX_WIDTH = 2, 16_384


def is_width(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and MIN_WIDTH <= value <= MAX_WIDTH


@dataclass(frozen=True)
class ProximityConfig:
    widths: tuple[int, ...] = DEFAULT_WIDTHS  # a list: the command line's --widths, the page's largest width
    d_in: int = control(1, low=1, high=64, label="Inputs d_in")
    d_out: int = control(1, low=1, high=16, label="Outputs d_out")
    weights: str = control(
        "random",
        choices=PROXIMITY_WEIGHTS,
        label="Weights",
        widget="radio",
        help="random: PyTorch's initialisation; trained: Adam on a random teacher network.",
    )
    steps: int = control(300, low=1, high=10_000, label="Adam steps (trained weights)")
    seed: int = control(0, low=0, high=MAX_INT, label="Seed")

    def validate(self) -> ProximityConfig:
        return controls.validate(
            self,
            [
                (
                    len(self.widths) >= 1 and all(is_width(w) for w in self.widths),
                    f"widths must be one or more whole numbers in [{MIN_WIDTH}, {MAX_WIDTH}] (got {self.widths!r})",
                )
            ],
        )


@dataclass(frozen=True)
class QualityConfig:
    toy: ToyConfig = ToyConfig()
    samples: int = control(200, low=10, high=5000, label="Samples per method")
    reference: int = control(1000, low=10, high=20_000, label="Exact-posterior samples")
    members: int = control(
        200, low=2, high=5000, label="Deep-ensemble members", help="Deep-ensemble members: MAP fits from random starts."
    )
    steps: int = control(2000, low=1, high=20_000, label="Adam steps for MFVI and SGM")

    def validate(self) -> QualityConfig:
        return controls.validate(self, controls.nested_checks("toy", self.toy))
