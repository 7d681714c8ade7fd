"""The posterior-approximation lab's settings, and what a comparison of them costs, without torch: the command
line parses them and a page link is read into them before anything is computed (the comparison:
:mod:`symlab.labs.methods.experiment`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from symlab.lib.options import ARCHITECTURES, CLASSES, REMOVAL_KEYS
from symlab.specs import controls
from symlab.specs.controls import control
from symlab.specs.hmc import HmcConfig
from symlab.specs.settings import Part, Work
from symlab.specs.tasks import Cost

METHODS = ("dropout", "mfvi", "sgm", "swag", "laplace", "sghmc", "ensemble")


LABELS = {
    "dropout": "MC dropout",
    "mfvi": "MFVI (BBB)",
    "sgm": "SGM",
    "swag": "SWAG",
    "laplace": "Laplace",
    "sghmc": "SGHMC",
    "ensemble": "Deep ensemble",
}


SINGLE_ONLY, MULTI_ONLY = ("sghmc",), ("ensemble",)  # as Table 1 has them


CURVATURE_IMAGES = 1000  # Laplace's curvature: the GGN over this many training images, scaled to all of them


LR, MOMENTUM, WEIGHT_DECAY = 0.04, 0.9, 5e-4  # the weight decay's value is lost from the paper's text


# Table 1's MNIST-OptuNet rows (every column × 100; no NLL), docs/science.md.
PAPER_COLUMNS = ("mmd", "mmd_no_symmetry", "accuracy", "ece", "brier", "aupr", "fpr95", "id_mi", "ood_mi")


PAPER_ROWS = {
    ("dropout", 1): (15.0, 14.3, 83.3, 33.4, 26.1, 96.4, 98.6, 26.1, 22.2),
    ("mfvi", 1): (18.8, 17.1, 78.1, 7.4, 30.9, 67.9, 93.7, 0.1, 0.1),
    ("sghmc", 1): (16.7, 17.7, 95.1, 7.6, 2.8, 73.7, 98.4, 4.3, 14.5),
    ("swag", 1): (16.0, 14.6, 88.3, 17.7, 4.9, 73.4, 68.6, 4.0, 8.7),
    ("laplace", 1): (10.6, 9.5, 87.9, 18.1, 4.8, 48.2, 74.6, 6.2, 5.9),
    ("dropout", 10): (2.1, 2.1, 92.1, 29.2, 36.8, 97.2, 78.2, 36.6, 52.5),
    ("mfvi", 10): (2.8, 2.5, 86.5, 17.5, 24.4, 96.9, 27.2, 21.1, 52.3),
    ("swag", 10): (1.8, 1.3, 95.0, 13.1, 17.5, 88.7, 24.6, 27.6, 62.2),
    ("laplace", 10): (1.8, 0.8, 94.8, 12.8, 15.8, 95.4, 32.1, 21.1, 52.2),
    ("ensemble", 10): (0.0, 0.0, 95.3, 10.7, 13.5, 95.7, 12.8, 19.3, 62.6),
}


# The HMC reference's defaults: the lab's posterior has 10⁴ images and 350 weights, so each leapfrog step is a full
# pass over the data; four chains of 50 draws after 50 warm-up transitions are about half an hour on one CPU core.
SAMPLER = HmcConfig(hmc_chains=4, hmc_warmup=50, hmc_samples=50, hmc_trajectory=1.0)
MAX_LEAPFROG = 16  # a transition's leapfrog steps at most: bounds a run's cost if warm-up shrinks ε
# The chains' starts: SGD with the reference's recipe for the paper's 60 epochs (App. B.1). SGD with weight decay λ
# descends −log p(w | D)/n itself, far more cheaply than full-batch steps: after 5 epochs a start's log density lies
# 1 000–2 500 nats below what 60 epochs reach (seed 0), a climb that HMC makes at ~10 nats a transition.
HMC_START_EPOCHS = 60


@dataclass(frozen=True)
class MethodsConfig:
    """One comparison. The paper's setting is ``reference`` 1000, ``samples`` 100, ``epochs`` 60 on all 60 000
    images; the defaults are a few minutes' worth of it on a CPU."""

    architecture: str = control(
        "convnet",
        choices=ARCHITECTURES,
        label="Network",
        widget="segmented",
        help="convnet: 350 parameters, a grouped second convolution (OptuNet's spirit); "
        "mlp: the MNIST lab's one-hidden-layer MLP.",
    )
    width: int = control(16, low=2, high=64, label="MLP hidden units", help="Hidden units of the MLP (mlp only).")
    reference: int = control(
        100,
        low=20,
        high=1000,
        nudge=10,
        label="Reference checkpoints",
        help="Independently trained networks that stand for the posterior (the paper: 1000).",
    )
    samples: int = control(
        50,
        low=10,
        high=100,
        nudge=10,
        label="Samples per method",
        help="Weight samples drawn from each method (the paper: 100).",
    )
    modes: int = control(
        10,
        low=2,
        high=10,
        label="Modes (multi-mode starts)",
        help="Independent starts of the multi-mode methods and members of the deep ensemble.",
    )
    epochs: int = control(
        5,
        low=1,
        high=60,
        label="Epochs",
        help="SGD epochs of every network (the paper: 60, the rate halved after ¼ and ½ of them).",
    )
    train_size: int = control(
        10_000,
        low=1000,
        high=60_000,
        nudge=1000,
        label="Training images",
        url="train",
        help="Training images (a seeded subset of MNIST's 60 000).",
    )
    test_size: int = control(
        2000,
        low=500,
        high=5000,
        nudge=500,
        label="Test images",
        url="test",
        help="Test images scored, and as many out-of-distribution letters.",
    )
    removal: str = control(
        "first",
        choices=REMOVAL_KEYS,
        label="Sort units by",
        widget="segmented",
        help="first: a unit's first incoming weight (the paper's rule); max: its largest incoming weight.",
    )
    hmc: bool = control(
        False,
        label="Reference: HMC too",
        help="Also run full-batch HMC chains on the posterior, each from an independently trained network, and "
        "score every method against their draws, with their noise floor and whether they converged (a background "
        "run's work: a full pass over the data per leapfrog step).",
    )
    seed: int = control(0, low=0, high=100_000, label="Seed", help="Seeds every network, minibatch, mask and sample.")
    sampler: HmcConfig = field(default=SAMPLER)  # the HMC reference's settings, used when ``hmc``

    def validate(self) -> MethodsConfig:
        return controls.validate(
            self,
            [
                (self.samples >= self.modes, f"samples ({self.samples}) must be at least modes ({self.modes})"),
                *controls.nested_checks("sampler", self.sampler),
            ],
        )

    @property
    def arch(self):
        """The network (:class:`symlab.lib.networks.Architecture`), which loads torch: the settings alone do not."""
        from symlab.lib import networks

        return networks.architecture(self.architecture, self.width)

    @property
    def label(self) -> str:
        hmc = f", HMC {self.sampler.hmc_chains}×{self.sampler.hmc_samples}" if self.hmc else ""
        return f"{self.arch.label}, {self.reference} checkpoints{hmc}, {self.epochs} epochs, seed {self.seed}"

    def work(self) -> Work:
        return Work(
            width=self.width if self.architecture == "mlp" else 4,
            depth=1,
            epochs=self.epochs,
            parts=comparison_parts(self),
        )

    def recipe(self, dropout: float = 0.0):
        """The paper's SGD (lr 0.04, batch 64, weight decay; App. B.1) with the rate halved after ¼ and ½ of the
        epochs, and momentum 0.9 (their CIFAR recipe's; the MNIST one names none): without it, a few epochs
        leave the convnet at 20–80 % test accuracy, with it at 86–91 % after 3 epochs on 10 000 images."""
        halve = tuple(sorted({e for e in (round(self.epochs / 4), round(self.epochs / 2)) if 0 < e < self.epochs}))
        from symlab.lib import ensembles  # torch, as arch

        return ensembles.Recipe(
            epochs=self.epochs,
            batch_size=64,
            lr=LR,
            momentum=MOMENTUM,
            weight_decay=WEIGHT_DECAY,
            halve_at=halve,
            dropout=dropout,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    def hmc_settings(self):
        """The HMC reference's sampler settings (:class:`symlab.lib.hmc.HmcSettings`); loads torch."""
        return self.sampler.settings(max_leapfrog=MAX_LEAPFROG)

    @classmethod
    def from_dict(cls, values: dict) -> MethodsConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in values.items() if k in known}
        if isinstance(values.get("sampler"), dict):
            values["sampler"] = HmcConfig(**values["sampler"])
        return cls(**values)


# ---------------------------------------------------------------------------------------------
# What a comparison costs, for the server's cap on a run's CPU time (settings.RunLimits.max_run_minutes): counted
# in training images through one network (forward and backward), single networks' steps, Laplace's curvature images
# and scored samples, each as elementwise work of its measured duration; benchmarks/bench_run_cost.py calibrates
# the figures (measured over estimated CPU time within 0.5–2).

BATCH = 64  # every network's minibatch (App. B.1)


IMAGE_WORK = {"convnet": 1.6e5, "mlp": 1.6e4}  # one image through one network and back, networks stepped together


STEP_WORK = {"convnet": 8e6, "mlp": 3e6}  # a single network's step (SWAG, SGHMC), beyond its images


BBB_STEP_WORK = {"convnet": 1.2e7, "mlp": 8e6}  # a Bayes-by-backprop step: its draw, its KL, its two gradients


SGM_STEP_WORK = {"convnet": 2e7, "mlp": 1e8}  # SGM's information term in a step (32 symmetries; K permutations)


LAPLACE_IMAGE_WORK = {"convnet": 2.8e6, "mlp": 3.2e7}  # an image's Jacobian in Laplace's curvature (the MLP's: float64)


SCORE_WORK = 8e5  # a scored sample set's fixed part (symmetries removed, MMD's kernels), per sample


FORWARD_SHARE = 0.6  # a forward pass alone, of a training pass's work (the convnet's convolutions dominate both)


def image_pass(arch) -> Cost:
    """One training image through one network and back: the MLP's matrix products and the rest as elementwise
    work; the convnet's grouped convolutions run far below the matrix-product rate, all as elementwise work."""
    if arch.name == "mlp":
        return Cost(matmul_flops=6 * (784 + CLASSES) * arch.width, elementwise=IMAGE_WORK["mlp"])
    return Cost(elementwise=IMAGE_WORK["convnet"])


def comparison_parts(config: MethodsConfig) -> tuple[Part, ...]:
    """What a comparison computes, in words and as work: the reference networks, the starts, each method's samples,
    and the scores of every sample set."""
    arch, name = config.arch, config.architecture
    images, fits = config.train_size, 1 + config.modes  # the one-mode fit, and one per mode
    steps = math.ceil(images / BATCH)  # per epoch
    per_image = image_pass(arch)
    single_step = per_image * BATCH + Cost(elementwise=STEP_WORK[name])
    bbb_step = per_image * (2 * BATCH) + Cost(elementwise=BBB_STEP_WORK[name])
    sghmc_steps = steps + config.samples * max(1, steps // 10)
    methods = (
        bbb_step * (2 * fits * config.epochs * steps)
        + Cost(elementwise=SGM_STEP_WORK[name]) * (fits * config.epochs * steps)
        + single_step * (fits * 2 * config.epochs * steps + sghmc_steps)
        + Cost(elementwise=LAPLACE_IMAGE_WORK[name]) * (fits * CURVATURE_IMAGES)
    )
    sets = 2 * len(METHODS) - len(SINGLE_ONLY) - len(MULTI_ONLY)
    per_sample = per_image * (2 * config.test_size * FORWARD_SHARE) + Cost(elementwise=SCORE_WORK)  # test, letters
    scores = per_sample * (sets * config.samples)
    parts = (
        Part(
            f"training {config.reference} reference networks for {config.epochs} epochs on {images} images",
            per_image * (config.reference * config.epochs * images),
        ),
        Part(f"training {config.modes} starts twice", per_image * (2 * config.modes * config.epochs * images)),
        Part(f"drawing each method's {config.samples} samples from 1 and {config.modes} starts", methods),
        Part(f"scoring {sets} sets of {config.samples} samples", scores),
    )
    return parts + (hmc_part(config, per_image) if config.hmc else ())


def hmc_part(config: MethodsConfig, per_image: Cost) -> tuple[Part]:
    """The HMC reference at its most: every transition's leapfrog steps at the cap, each a full pass over the
    training images, and the chains' starts and first curvature (a float64 gradient per image, a tenth of Laplace's
    Jacobian)."""
    sampler, images = config.sampler, config.train_size
    transitions = sampler.hmc_warmup + sampler.hmc_samples
    passes = sampler.hmc_chains * transitions * MAX_LEAPFROG * images
    starts = per_image * (sampler.hmc_chains * HMC_START_EPOCHS * images)
    fisher = Cost(elementwise=LAPLACE_IMAGE_WORK[config.architecture] / CLASSES) * (sampler.hmc_chains * images)
    return (
        Part(
            f"HMC: {sampler.hmc_chains} chains × {transitions} transitions of at most {MAX_LEAPFROG} passes over "
            f"{images} images",
            per_image * passes + starts + fisher,
        ),
    )
