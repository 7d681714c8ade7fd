"""The MNIST lab's settings, and what a run of them costs, without torch: the command line parses them, a page link
is read into them and a server checks a run against its caps before anything is computed (the training:
:mod:`symlab.labs.mnist.experiment`)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from symlab.lib.layout import Layout, multiply_adds
from symlab.lib.options import BNN_ESTIMATORS
from symlab.specs import controls
from symlab.specs.controls import control
from symlab.specs.settings import Part, Work
from symlab.specs.tasks import Cost

METHODS = ("mfvi", "sgm")
MI_ESTIMATORS = ("infonce", "blocks")
MAX_BLOCK_SIZE = 5  # 5! = 120 permutations per block
DIAGNOSTIC_DRAWS = 8  # draws of q for the end-of-epoch estimate of I_H
DEVICES = ("auto", "cpu", "cuda")
SD_FITS = ("curvature", "adam")
LR_SCHEDULES = ("cosine", "constant")
# The curvature fit's running mean of the Hessian diagonal forgets with this factor per step (about the last
# 100 minibatches count): enough to average out one minibatch's noise, short enough to follow μ as it moves.
CURVATURE_DECAY = 0.99
# Configs stored before a field existed ran as this value, not as the field's current default.
LEGACY_VALUES = {"sd_fit": "adam", "lr_schedule": "constant", "eval_every": 1}
N_CLASSES, N_PIXELS = 10, 784
ECE_BINS = 15
EVAL_BATCH = 2000
# The config fields a server caps (symlab.specs.settings.RunLimits), by the field of Work they ask for; epochs
# count as passes over all 60 000 training images, so an epoch of a subset counts by the subset's share.
WORK_FIELDS = {"hidden": "width", "depth": "depth", "epochs": "epochs"}
TRAIN_IMAGES = 60_000
SMALLEST_CAPPED_SUBSET = 500  # the page's box for epochs goes up to the cap's worth of epochs of this many images


@dataclass(frozen=True)
class MnistConfig:
    """One MNIST run. ``hidden`` units in each of ``depth`` hidden layers. SGM estimates I with
    ``mi``: "infonce" (``K`` terms: the identity and K − 1 random permutations) or "blocks" (exact
    I_H over blocks of up to ``block_size`` close units, rebuilt every ``rebuild_every`` steps).
    ``samples`` weight samples average the test predictions; ``train_subset`` (0 = all 60 000)
    draws a seeded subset. Width, depth and epochs have no upper end here: a server caps them
    (:class:`~symlab.specs.settings.RunLimits`)."""

    hidden: int = control(400, low=1, label="Hidden units per layer", help="Units in each hidden layer (the width).")
    depth: int = control(1, low=1, label="Hidden layers", help="Number of hidden layers.")
    K: int = control(
        16,
        low=2,
        high=256,
        label="K (SGM's InfoNCE terms)",
        help="SGM with InfoNCE: terms of Î_K (the identity and K − 1 random permutations per step).",
    )
    method: str = control(
        "mfvi",
        choices=METHODS,
        label="Method",
        widget="segmented",
        help="mfvi: mean-field VI, maximising the ELBO; sgm: its symmetrised version (ELBO + an estimate of I).",
    )
    estimator: str = control(
        "reparam",
        choices=BNN_ESTIMATORS,
        label="Gradient estimator",
        widget="segmented",
        help="reparam: one weight draw per step, shared by the minibatch; local: each example's "
        "pre-activations drawn from their Gaussian (no weight draw); flipout: one weight "
        "draw, decorrelated across examples by random signs. All three are unbiased; "
        "they differ in variance and cost.",
    )
    mi: str = control(
        "infonce",
        choices=MI_ESTIMATORS,
        label="SGM's estimate of I",
        widget="segmented",
        help="infonce: Î_K over K − 1 random permutations per step (Thm 4.3); blocks: the exact I_H "
        "of the subgroup H that permutes blocks of close units.",
    )
    block_size: int = control(
        2,
        low=2,
        high=MAX_BLOCK_SIZE,
        label="Block size B (units per block)",
        url="block",
        help="SGM blocks: units per block (H = product of S_B).",
    )
    rebuild_every: int = control(
        100,
        low=1,
        high=10_000,
        nudge=10,
        label="Rebuild blocks every N steps",
        url="rebuild",
        help="SGM blocks: steps between rebuilds of the blocks from the current posterior.",
    )
    epochs: int = control(
        10,
        low=1,
        label="Epochs",
        help="Passes over the training set. A server caps them in passes over all 60 000 images: "
        "an epoch of a subset counts by its share (1 000 epochs of 500 images count as 8.3).",
    )
    batch_size: int = control(
        128, low=1, high=2048, nudge=8, label="Batch size", url="batch", help="Training examples per Adam step."
    )
    lr: float = control(
        1e-3, low=1e-5, high=1.0, nudge=1e-4, label="Learning rate (Adam)", format="%.5f", help="Adam learning rate."
    )
    lr_schedule: str = control(
        "cosine",
        choices=LR_SCHEDULES,
        label="Learning-rate schedule",
        widget="segmented",
        url="schedule",
        help="cosine: the rate falls from its value to 0 over the run (0.5(1 + cos πt/T)), so "
        "the last steps average out minibatch noise; constant: it stays, and μ keeps "
        "jittering by about the rate at every step.",
    )
    prior_scale: float = control(
        1.0,
        low=0.01,
        high=10.0,
        nudge=0.1,
        label="Prior std dev",
        url="prior",
        help="Std dev of the isotropic Gaussian prior.",
    )
    # Fitted by curvature, σ leaves σ₀ within a few hundred steps; by Adam it grows ≤ ~lr per step, so 10⁻³ leaves q
    # a near point mass for any run of a few epochs.
    init_sd: float = control(
        0.05,
        low=1e-5,
        high=1.0,
        nudge=1e-3,
        label="Initial posterior std dev",
        format="%.5f",
        help="Initial posterior std dev of every weight.",
    )
    sd_fit: str = control(
        "curvature",
        choices=SD_FITS,
        label="How σ is fitted",
        widget="segmented",
        url="sdfit",
        help="curvature: each step sets σ to the ELBO's stationary point, 1/σ² = 1/s² + N·E_q[∂²ℓ/∂w²] "
        "(with SGM's ∂Î/∂σ added), from a running mean of the Hessian diagonal; adam: σ follows "
        "Adam on log σ at the learning rate, which takes thousands of steps to settle.",
    )
    eval_every: int = control(
        1,
        low=1,
        high=10_000,
        label="Evaluate every N epochs",
        url="every",
        help="Test metrics and unit diagnostics after every N-th epoch (and the last): small "
        "training sets have epochs of a few steps, and evaluating costs more than that.",
    )
    samples: int = control(
        10, low=1, high=100, label="Prediction samples M", help="Weight samples M averaged in test predictions."
    )
    train_subset: int = control(
        0,
        low=0,
        high=60_000,
        nudge=1000,
        label="Training subset (0 = all 60 000)",
        url="subset",
        help="Train on a seeded subset of N examples (0: all 60000).",
    )
    seed: int = control(
        0,
        low=0,
        high=100_000,
        label="Seed",
        help="Seeds the initialisation, the minibatches, the weight noise and the permutations.",
    )
    device: str = control(
        "auto", choices=DEVICES, label="Device", widget="segmented", help="auto: CUDA when torch finds a GPU, else CPU."
    )

    def validate(self) -> MnistConfig:
        return controls.validate(self)

    def work(self) -> Work:
        """What the run asks of a server, for its caps: its epochs in passes over all 60 000 images, and what it
        computes (:func:`run_parts`)."""
        images = self.train_subset or TRAIN_IMAGES
        return Work(
            width=self.hidden,
            depth=self.depth,
            epochs=math.ceil(self.epochs * images / TRAIN_IMAGES),
            parts=run_parts(self),
        )

    @property
    def evaluations(self) -> int:
        """Epochs after which the run evaluates: every ``eval_every``-th, and the last."""
        return self.epochs // self.eval_every + (self.epochs % self.eval_every > 0)

    @property
    def layout(self) -> Layout:
        return Layout((N_PIXELS,) + (self.hidden,) * self.depth + (N_CLASSES,))

    @property
    def method_label(self) -> str:
        if self.method == "mfvi":
            return "MFVI"
        return f"SGM K={self.K}" if self.mi == "infonce" else f"SGM blocks B={self.block_size}"

    @property
    def label(self) -> str:
        method = self.method_label
        width = f"{self.hidden}" if self.depth == 1 else f"{self.depth}×{self.hidden}"
        return f"{method}, width {width}, seed {self.seed}"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> MnistConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{**LEGACY_VALUES, **{k: v for k, v in values.items() if k in known}})


# ---------------------------------------------------------------------------------------------
# What a run costs, for the server's cap on its CPU time (settings.RunLimits.max_run_minutes). The arithmetic is
# counted as align's training_cost counts it; the passes over arrays, each step's fixed cost and the draws are
# calibrated by benchmarks/bench_run_cost.py (measured over estimated CPU time within 0.5–2 on every row).

TEST_IMAGES = 10_000
PARAMETER_PASSES = {"curvature": 45, "adam": 25}  # elementwise passes over the parameters in one step, by σ's fit
ACTIVATION_PASSES = 12  # over each example's hidden and output activations in one step
STEP_OVERHEAD = 1.5e6  # a step's fixed cost (dispatching its ~100 operations), as elementwise work of that time
INFONCE_PASSES = 2  # per permutation of SGM's Î_K, over the parameters
BLOCK_PASSES = 10  # SGM's Î_H over the parameters (most blocks are certified saturated by a screen)
EPOCH_DRAWS = 4 + 8 * 3  # per parameter and epoch: the normal table's 4 P draws, the permutation of 3 P offsets
PERMUTATION_DRAWS = 8  # a random permutation's cost per element, in normal draws
EVAL_PASSES = 6  # per output of a test image and sample: log-softmax, the mean over samples
DIAGNOSIS_PASSES = 30  # per unit pair of a hidden layer: the divergence matrix in float64, the greedy blocks
MEASURED_OVER_COUNTED = 1.4  # what the counts above leave out (caches, allocation, the first epoch's warm-up)


def step_cost(config: MnistConfig, images: int) -> Cost:
    """One training step on a minibatch: the gradient's matrix products (forward, weight gradients, the gradient
    sent back; twice for the local and flipout estimators, which carry means and variances; again for σ's
    curvature fit), the passes over the parameters and activations, SGM's estimate of I, the fixed cost."""
    layout, batch = config.layout, min(config.batch_size, images)
    every, past_first = multiply_adds(layout.sizes)
    gradient = 2 * batch * (2 * every + past_first) * (1 if config.estimator == "reparam" else 2)
    curvature = 2 * batch * (2 * every + past_first) if config.sd_fit == "curvature" else 0
    parameters = layout.n_params
    elementwise = (
        PARAMETER_PASSES[config.sd_fit] * parameters
        + ACTIVATION_PASSES * batch * sum(layout.sizes[1:])
        + batch * N_PIXELS
        + STEP_OVERHEAD
    )
    if config.method == "sgm":
        elementwise += parameters * (INFONCE_PASSES * config.K if config.mi == "infonce" else BLOCK_PASSES)
    return Cost(matmul_flops=gradient + curvature, elementwise=elementwise)


def epoch_cost(config: MnistConfig, images: int) -> Cost:
    """An epoch's draws: its minibatch order and the normal table its steps read their noise from."""
    return Cost(normals=PERMUTATION_DRAWS * images + EPOCH_DRAWS * config.layout.n_params)


def evaluation_cost(config: MnistConfig) -> Cost:
    """One evaluation: ``samples`` weight draws, each through the 10 000 test images."""
    layout, samples = config.layout, config.samples
    every, _ = multiply_adds(layout.sizes)
    calls = samples * math.ceil(TEST_IMAGES / EVAL_BATCH)
    return Cost(
        matmul_flops=samples * 2 * TEST_IMAGES * every,
        elementwise=samples * (3 * layout.n_params + TEST_IMAGES * (sum(layout.hidden) + EVAL_PASSES * N_CLASSES))
        + calls * STEP_OVERHEAD / 10,
        normals=samples * layout.n_params,
    )


def diagnosis_cost(config: MnistConfig) -> Cost:
    """One diagnosis of the units: each hidden layer's divergence matrix (twice where blocks are chosen), the
    greedy blocks, and the block estimate of I_H over its draws."""
    layout, flops, pairs = config.layout, 0.0, 0.0
    for layer, units in enumerate(layout.hidden):
        row = layout.sizes[layer] + 1 + layout.sizes[layer + 2]  # a unit's incoming, bias and outgoing weights
        times = 2 if layer % 2 == 0 else 1
        flops += times * 8 * units**2 * row  # two float64 products (at half the float32 rate)
        pairs += times * units**2
    parameters = layout.n_params
    return Cost(
        matmul_flops=flops,
        elementwise=DIAGNOSIS_PASSES * pairs + DIAGNOSTIC_DRAWS * 10 * parameters,
        normals=DIAGNOSTIC_DRAWS * parameters,
    )


def run_parts(config: MnistConfig) -> tuple[Part, ...]:
    """What a run computes, in words and as work: its training steps, its evaluations, its unit diagnoses."""
    images = config.train_subset or TRAIN_IMAGES
    steps = math.ceil(images / config.batch_size)
    evaluations = config.evaluations
    after = (
        f"after each of {config.epochs} epochs"
        if evaluations == config.epochs
        else f"after {evaluations} of {config.epochs} epochs"
    )
    scale = MEASURED_OVER_COUNTED
    return (
        Part(
            f"training {config.epochs} epochs of {images} images in batches of {min(config.batch_size, images)}",
            (step_cost(config, images) * (steps * config.epochs) + epoch_cost(config, images) * config.epochs) * scale,
        ),
        Part(f"evaluating {config.samples} samples {after}", evaluation_cost(config) * (evaluations * scale)),
        Part(f"measuring the units {after}", diagnosis_cost(config) * (evaluations * scale)),
    )
