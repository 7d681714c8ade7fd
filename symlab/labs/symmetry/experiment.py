"""The symmetry explorer's experiments (Laurent et al. 2024; Gelberg et al. Thm 3.1; docs/science.md, § Symmetry lab experiments).

- Laurent's Fig. 1: thousands of 2-2-1 ReLU perceptrons trained by SGD on two Gaussian blobs, as
  one batched tensor program; their last-layer weights raw, after scaling and permutation removal.
- Mass before and after the min-mass problem, for those nets and for MLPs trained on MNIST.
- Mode proximity: the nearest equivalent mode of one-hidden-layer nets of growing width, relative
  to ‖w‖, against the Thm 3.1 bound.
- Posterior quality: MMD of MFVI, SGM and a deep ensemble against exact-posterior samples of the
  tractable BNN (its maths :mod:`symlab.lib.two_relu`; its config, data and fits the toy lab's), with and
  without permutation removal.
- Do networks permute while they train? Kendall's τ between successive sorting permutations.
- A network of one's own (a file): mode proximity, permutation and scaling removal, min-mass.
"""

from __future__ import annotations

import dataclasses
import io
import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from scipy import ndimage

from symlab.labs.toy import experiment as toy
from symlab.lib import mlp, mnist_data, symmetry, two_relu, weights
from symlab.lib.adam import Adam
from symlab.lib.layout import multiply_adds
from symlab.lib.mmd import KERNELS_PER_FAMILY, mmd_aggregate
from symlab.lib.mnist_data import data_directory, load_mnist_once
from symlab.specs import settings
from symlab.specs.results import TrainingDiverged, in_memory
from symlab.specs.tasks import Cost, Task

from .config import MlpConfig, PerceptronConfig, ProximityConfig, QualityConfig


def _numpy_layers(layout: mlp.Layout, flat: torch.Tensor) -> list:
    """The (W, b) layers of flat parameters, as float64 numpy arrays (for :mod:`symlab.lib.symmetry`)."""
    return layout.layers(flat.detach().double().numpy())


# ---------------------------------------------------------------------------------------------
# Laurent's Fig. 1: many 2-2-1 perceptrons on two blobs
# ---------------------------------------------------------------------------------------------


def make_blobs(points: int, separation: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Two classes N(∓(s, s), I), ``points`` each, drawn until every point lies on its own side of
    the line x₁ + x₂ = 0, so the data are separable (as in the paper)."""
    rng = np.random.default_rng([seed, 104_729])
    xs, ys = [], []
    for label, sign in ((0, -1.0), (1, 1.0)):
        kept = np.empty((0, 2))
        while len(kept) < points:
            draw = rng.standard_normal((2 * points, 2)) + sign * separation
            kept = np.concatenate([kept, draw[np.sign(draw.sum(1)) == sign]])
        xs.append(kept[:points])
        ys.append(np.full(points, label, dtype=np.float64))
    return np.concatenate(xs), np.concatenate(ys)


@dataclass
class PerceptronRun:
    config: PerceptronConfig
    x: np.ndarray
    y: np.ndarray
    snapshots: list  # per epoch (0 = initialisation): the nets as float64 layers
    final_loss: np.ndarray  # per net, full training set
    seconds: float

    @property
    def kept(self) -> np.ndarray:
        """The nets that trained: loss at most ``max_loss``, or, when training was too short for
        that, all but the worst 1 % (never a net whose loss is not finite)."""
        finite = np.isfinite(self.final_loss)
        if not finite.any():
            return finite
        cutoff = max(self.config.max_loss, float(np.quantile(self.final_loss[finite], 0.99)))
        return finite & (self.final_loss <= cutoff)

    def epoch_layers(self, epoch: int, kept_only: bool = True) -> list:
        layers = self.snapshots[epoch]
        return [(W[self.kept], b[self.kept]) for W, b in layers] if kept_only else layers


def perceptron_gradient(
    layout: mlp.Layout, theta: torch.Tensor, x: list[torch.Tensor], y: torch.Tensor, grad: torch.Tensor
) -> None:
    """The gradient of Σ_nets mean_batch BCE(f(x), y) for a batch of nets with one hidden layer and one
    output, written into ``grad``. Parameters are held per coordinate: ``theta[n_params, nets]``, row i the
    i-th parameter of the layout (:class:`~symlab.lib.mlp.Layout`) of every net; the inputs are ``x[d]`` and
    ``y``, each ``[batch, nets]``. Written out one scalar weight at a time, over every net at once: each
    net's matrices (2 × 2 for Laurent's perceptrons) are far too small for matrix products, and every
    array here runs along the nets."""
    (W1, b1), (W2, b2) = layout.layers(torch.arange(layout.n_params))
    hidden = []
    for unit in range(len(b1)):  # each hidden unit's activation, [batch, nets]
        pre = theta[b1[unit]].expand_as(y).clone()
        for d, inputs in enumerate(x):
            pre.addcmul_(inputs, theta[W1[unit, d]])
        hidden.append(torch.relu_(pre))
    logit = theta[b2[0]].expand_as(y).clone()
    for unit, h in enumerate(hidden):
        logit.addcmul_(h, theta[W2[0, unit]])
    upstream = torch.sigmoid_(logit).sub_(y).div_(len(y))  # ∂loss/∂logit
    torch.sum(upstream, 0, out=grad[b2[0]])
    for unit, h in enumerate(hidden):
        torch.sum(upstream * h, 0, out=grad[W2[0, unit]])
        pre_grad = torch.ops.aten.threshold_backward(upstream * theta[W2[0, unit]], h, 0.0)
        torch.sum(pre_grad, 0, out=grad[b1[unit]])
        for d, inputs in enumerate(x):
            torch.sum(pre_grad * inputs, 0, out=grad[W1[unit, d]])


@torch.inference_mode()  # no autograd bookkeeping
def train_perceptrons(config: PerceptronConfig = PerceptronConfig(), progress=None) -> PerceptronRun:
    """Train ``config.nets`` perceptrons at once: every net has its own initialisation and its own
    shuffling (each epoch, a permutation of the points per net), and each its own gradient
    (:func:`perceptron_gradient`). ``progress(epoch, epochs)`` after each epoch."""
    config.validate()
    start = time.perf_counter()
    x_np, y_np = make_blobs(config.points, config.separation, config.seed)
    x, y = torch.tensor(x_np, dtype=torch.float32), torch.tensor(y_np, dtype=torch.float32)
    g = torch.Generator().manual_seed(config.seed)
    shuffles = np.random.default_rng([config.seed, 104_723])
    n = config.nets
    layout = mlp.Layout((2, 2, 1))
    theta = mlp.init_parameters(layout, g, (n,)).T.contiguous()  # [n_params, nets]
    grad = torch.empty_like(theta)
    snapshots = [_numpy_layers(layout, theta.T)]
    count = x.shape[0]
    points = np.broadcast_to(np.arange(count)[:, None], (count, n))
    columns = list(x.T.contiguous())  # each input coordinate of every point
    for epoch in range(config.epochs):
        order = torch.from_numpy(shuffles.permuted(points, axis=0))  # [points, nets]: each net's own order
        for start_index in range(0, count, config.batch):
            idx = order[start_index : start_index + config.batch]
            inputs = [torch.take(column, idx) for column in columns]
            perceptron_gradient(layout, theta, inputs, torch.take(y, idx), grad)
            theta.sub_(grad, alpha=config.lr)
        snapshots.append(_numpy_layers(layout, theta.T))
        if progress is not None:
            progress(epoch + 1, config.epochs)
    logits = mlp.forward(layout.layers(theta.T), x)[..., 0]
    loss = F.binary_cross_entropy_with_logits(logits, y.expand(n, -1), reduction="none").mean(1)
    final = torch.nan_to_num(loss, nan=math.inf).double().numpy()
    run = PerceptronRun(config, x_np, y_np, snapshots, final, time.perf_counter() - start)
    if run.kept.sum() < 4:  # too few to estimate a density (or an MMD) from
        raise TrainingDiverged(
            f"training diverged: {int(np.sum(~np.isfinite(final)))} of {n} nets ended with a "
            "non-finite loss; lower the learning rate"
        )
    return run


REMOVAL_STAGES = ("raw", "scaled", "sorted")
STAGE_TITLES = {"raw": "raw", "scaled": "after scaling removal", "sorted": "after scaling and permutation removal"}


def removal_stages(layers, norm: float = 1.0) -> dict:
    """The nets raw, with unit-norm hidden units, and then also sorted by their outgoing weight
    (Laurent's Fig. 1 orders from the last layer, so the plotted weights themselves are sorted)."""
    scaled = symmetry.normalise_units(layers, norm)
    return {"raw": symmetry.as_layers(layers), "scaled": scaled, "sorted": symmetry.sort_units(scaled, "first_out")}


def last_layer_weights(layers) -> np.ndarray:
    """The output weights (v₁, v₂) of each 2-2-1 net: ``[nets, 2]``."""
    return layers[-1][0][..., 0, :]


def max_output_change(layers_a, layers_b, inputs: np.ndarray) -> float:
    """Largest |f_a(x) − f_b(x)| over the nets and ``inputs``: 0 up to rounding if a removal
    kept every function."""
    return float(np.max(np.abs(mlp.forward(layers_a, inputs) - mlp.forward(layers_b, inputs))))


def density_extent(points: np.ndarray, quantile: float = 0.01) -> tuple[float, float]:
    """A square window, the same on both axes (so mirror images look like mirror images), holding
    all but ``quantile`` of each coordinate at either end."""
    low, high = np.quantile(points, [quantile, 1 - quantile])
    pad = 0.1 * (high - low) + 1e-9
    return float(low - pad), float(high + pad)


def stage_extents(stages: dict) -> dict:
    """Each removal stage's :func:`density_extent` (``stages``: stage -> points): the densities' axes."""
    return {name: density_extent(points) for name, points in stages.items()}


def density_grid(points: np.ndarray, extent, bins: int = 60, smooth: float = 1.0):
    """A smoothed 2-D histogram normalised to a density; returns (centres, density[y, x])."""
    edges = np.linspace(extent[0], extent[1], bins + 1)
    counts, _, _ = np.histogram2d(points[:, 0], points[:, 1], bins=[edges, edges])
    width = edges[1] - edges[0]
    density = ndimage.gaussian_filter(counts, smooth) / (len(points) * width**2)
    return 0.5 * (edges[1:] + edges[:-1]), density.T


def density_peaks(points: np.ndarray, extent, floor: float = 0.3, bins: int = 60) -> list[tuple[float, float]]:
    """Local maxima of the smoothed density above ``floor`` × its peak, highest first."""
    centres, density = density_grid(points, extent, bins, smooth=1.5)
    local = (density == ndimage.maximum_filter(density, size=5)) & (density >= floor * density.max())
    iy, ix = np.nonzero(local)
    order = np.argsort(-density[iy, ix])
    return [(float(centres[ix[k]]), float(centres[iy[k]])) for k in order]


def swap_asymmetry(points: np.ndarray, seed: int = 0, limit: int = 1000) -> float:
    """Median MMD² between the (v₁, v₂) and the swapped (v₂, v₁): ≈ 0 when the density is mirror-
    symmetric about v₁ = v₂, as the permutation symmetry makes it."""
    rng = np.random.default_rng(seed)
    if len(points) > 2 * limit:
        points = points[rng.choice(len(points), 2 * limit, replace=False)]
    half = len(points) // 2
    return mmd_aggregate(points[:half], points[half:, ::-1], seed=seed).median


@dataclass(frozen=True)
class PerceptronReport:
    """Laurent's Fig. 1 in numbers: per removal stage, where the output weights' density peaks and how
    mirror-symmetric it is; and min-mass for the final nets."""

    config: PerceptronConfig
    nets: int
    kept: int
    loss_cutoff: float
    seconds: float
    nets_per_second: float
    stages: dict  # stage -> peaks, share_v1_above_v2, swap_asymmetry_mmd2, max_output_change
    mass: MassReport


def perceptron_report(run: PerceptronRun, stages: dict | None = None, asymmetry: bool = True) -> PerceptronReport:
    """What the headless twin reports for the Fig. 1 experiment; ``stages`` are the final nets'
    :func:`removal_stages`, when the caller has them already. ``asymmetry=False`` leaves out the swap
    asymmetry (None), an MMD costing half the report, which the page does not show."""
    final = run.epoch_layers(run.config.epochs)
    stages = stages or removal_stages(final)
    inputs = np.random.default_rng(1).standard_normal((256, 2)) * 3
    summaries = {}
    for name, layers in stages.items():
        weights = last_layer_weights(layers)
        extent = density_extent(weights)
        peaks = density_peaks(weights, extent)
        summaries[name] = {
            "peaks": [[round(a, 3), round(b, 3)] for a, b in peaks],
            "share_v1_above_v2": float(np.mean(weights[:, 0] > weights[:, 1])),
            "swap_asymmetry_mmd2": swap_asymmetry(weights) if asymmetry else None,
            "max_output_change": max_output_change(stages["raw"], layers, inputs),
        }
    return PerceptronReport(
        config=run.config,
        nets=int(run.config.nets),
        kept=int(run.kept.sum()),
        loss_cutoff=float(run.final_loss[run.kept].max()),
        seconds=run.seconds,
        nets_per_second=run.config.nets / run.seconds,
        stages=summaries,
        mass=mass_report(final),
    )


# ---------------------------------------------------------------------------------------------
# Mass before and after the min-mass problem
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MassReport:
    """Min-mass for a batch of nets: the masses' medians, the ratio's spread, convergence. JSON leaves out
    the solution itself (``result``: the rescaled nets and their masses), which the page plots."""

    nets: int
    diverged: int
    mass_before_median: float
    mass_after_median: float
    ratio_median: float
    ratio_min: float
    ratio_max: float
    converged: int
    iterations: int
    degenerate_units: int
    max_output_change: float
    seconds: float
    result: symmetry.MinMass = in_memory()


def mass_report(layers, inputs: np.ndarray | None = None) -> MassReport:
    """Min-mass for a batch of nets. Nets with non-finite weights (diverged training) are left out and
    counted."""
    finite = np.all([np.isfinite(W).all(axis=(-2, -1)) & np.isfinite(b).all(axis=-1) for W, b in layers], axis=0)
    if not finite.any():
        raise TrainingDiverged("every net diverged (non-finite weights): lower the learning rate")
    layers = [(W[finite], b[finite]) for W, b in layers]
    start = time.perf_counter()
    result = symmetry.min_mass(layers)
    seconds = time.perf_counter() - start
    ratio = np.ravel(result.mass_after / result.mass_before)
    if inputs is None:
        inputs = np.random.default_rng(2).standard_normal((64, layers[0][0].shape[-1]))
    return MassReport(
        nets=int(ratio.size),
        diverged=int((~finite).sum()),
        mass_before_median=float(np.median(result.mass_before)),
        mass_after_median=float(np.median(result.mass_after)),
        ratio_median=float(np.median(ratio)),
        ratio_min=float(ratio.min()),
        ratio_max=float(ratio.max()),
        converged=int(np.sum(result.converged)),
        iterations=result.iterations,
        degenerate_units=result.degenerate_units,
        max_output_change=max_output_change(layers, result.layers, inputs),
        seconds=seconds,
        result=result,
    )


# ---------------------------------------------------------------------------------------------
# MLPs trained on MNIST (mass, permutations during training)
# ---------------------------------------------------------------------------------------------


@dataclass
class TrainedMlps:
    config: MlpConfig
    loss: np.ndarray  # [steps, instances]: each step's mini-batch loss, before its update
    tau: np.ndarray  # [steps, instances, hidden layers]: Kendall τ between successive sorts
    layers: list  # the final nets, float64, batched over instances
    diverged: np.ndarray  # per instance
    seconds: float = 0.0
    accuracy: np.ndarray = field(default_factory=lambda: np.zeros(0))


def mnist_arrays(mnist, train_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.tensor(mnist.train_images[:train_size], dtype=torch.float32) / 255.0
    return images, torch.tensor(mnist.train_labels[:train_size].astype(np.int64))


@torch.inference_mode()  # no autograd bookkeeping
def train_mlps(config: MlpConfig, mnist, progress=None) -> TrainedMlps:
    """Train ``instances`` MLPs 784-width^depth-10 with SGD, recording after every step each hidden
    layer's sorting permutation and Kendall's τ against the previous one (Laurent §5.2).
    ``progress(step, steps)`` every 25 steps. A net whose loss turns NaN stops moving."""
    config.validate()
    start = time.perf_counter()
    images, labels = mnist_arrays(mnist, config.train_size)
    g = torch.Generator().manual_seed(config.seed)
    layout = mlp.Layout((784, *[config.width] * config.depth, 10))
    k = config.instances
    flat = mlp.init_parameters(layout, g, (k,))
    grad = torch.empty_like(flat)
    layers, grads = layout.layers(flat), layout.layers(grad)
    losses = np.zeros((config.steps, k))
    perms = np.zeros((config.steps + 1, k, config.depth, config.width), dtype=np.int64)
    perms[0] = _sorting_permutations(layout, flat, config.sort_key)
    alive = torch.ones(k, dtype=torch.bool)
    for step in range(1, config.steps + 1):
        idx = torch.randint(0, images.shape[0], (k, config.batch), generator=g)
        loss = mlp.cross_entropy_gradient(layers, images[idx], labels[idx], grads)
        losses[step - 1] = loss.numpy()
        alive &= torch.isfinite(loss)
        lr = config.lr * ((config.steps - step + 1) / config.steps if config.schedule == "linear" else 1.0)
        flat.sub_(torch.nan_to_num_(grad).mul_(alive[:, None]), alpha=lr)
        perms[step] = _sorting_permutations(layout, flat, config.sort_key)
        if progress is not None and (step % 25 == 0 or step == config.steps):
            progress(step, config.steps)
    tau = np.ones((config.steps, k, config.depth))
    for i in range(k):
        for layer in range(config.depth):
            tau[:, i, layer] = symmetry.successive_kendall_tau(perms[:, i, layer])
    final = _numpy_layers(layout, flat)
    with torch.inference_mode():
        test_x = torch.tensor(mnist.test_images[:2000], dtype=torch.float32) / 255.0
        predicted = mlp.forward(layout.layers(flat), test_x).argmax(-1).numpy()
    accuracy = (predicted == mnist.test_labels[:2000][None, :]).mean(1)
    return TrainedMlps(config, losses, tau, final, ~alive.numpy(), time.perf_counter() - start, accuracy)


def _sorting_permutations(layout: mlp.Layout, flat: torch.Tensor, key: str) -> np.ndarray:
    """[instances, hidden layers, width] sorting permutations of the current nets."""
    return np.stack(symmetry.sorting_orders(layout.layers(flat.numpy()), key), axis=1)


@dataclass(frozen=True)
class TrainingReport:
    """Means over the nets that did not diverge; None where nothing is defined (every net diverged, or a
    half of a one-step run)."""

    config: MlpConfig
    seconds: float
    final_loss_mean: float | None
    test_accuracy_mean: float | None
    diverged: int
    tau_mean: float
    tau_min: float
    steps_with_permutation: int
    share_steps_with_permutation_first_half: float | None
    share_steps_with_permutation_second_half: float | None
    # The end of training, where a decaying learning rate freezes the order and a constant one does not.
    tau_mean_last_tenth: float
    share_steps_with_permutation_last_tenth: float
    tau_per_step: list[float]


def training_report(run: TrainedMlps) -> TrainingReport:
    alive = ~run.diverged
    tau = run.tau.mean(axis=(1, 2))
    moved = np.any(run.tau < 1, axis=(1, 2))
    half, tenth = len(moved) // 2, max(1, len(moved) // 10)

    def share(part):
        return float(part.mean()) if part.size else None

    return TrainingReport(
        config=run.config,
        seconds=run.seconds,
        final_loss_mean=float(np.mean(run.loss[-1][alive])) if alive.any() else None,
        test_accuracy_mean=float(np.mean(run.accuracy[alive])) if alive.any() else None,
        diverged=int(run.diverged.sum()),
        tau_mean=float(tau.mean()),
        tau_min=float(run.tau.min()),
        steps_with_permutation=int(moved.sum()),
        share_steps_with_permutation_first_half=share(moved[:half]),
        share_steps_with_permutation_second_half=share(moved[half:]),
        tau_mean_last_tenth=float(tau[-tenth:].mean()),
        share_steps_with_permutation_last_tenth=share(moved[-tenth:]),
        tau_per_step=[float(v) for v in tau],
    )


# ---------------------------------------------------------------------------------------------
# Mode proximity against Thm 3.1
# ---------------------------------------------------------------------------------------------


def teacher_data(d_in: int, d_out: int, seed: int, points: int = 256):
    """Inputs x ~ N(0, I) and targets from a random width-8 ReLU teacher."""
    g = torch.Generator().manual_seed(seed * 7 + 3)
    x = torch.randn(points, d_in, generator=g, dtype=torch.float64)
    teacher = [
        (
            torch.randn(1, 8, d_in, generator=g, dtype=torch.float64),
            torch.randn(1, 8, generator=g, dtype=torch.float64),
        ),
        (
            torch.randn(1, d_out, 8, generator=g, dtype=torch.float64) / math.sqrt(8),
            torch.zeros(1, d_out, dtype=torch.float64),
        ),
    ]
    return x, mlp.forward(teacher, x)[0]


def proximity_net(config: ProximityConfig, width: int):
    """One one-hidden-layer net of ``width`` units: initialised, or trained by Adam on the teacher."""
    g = torch.Generator().manual_seed(config.seed * 100_003 + width)
    layout = mlp.Layout((config.d_in, width, config.d_out))
    flat = mlp.init_parameters(layout, g, (1,), torch.float64)
    if config.weights == "trained":
        x, y = teacher_data(config.d_in, config.d_out, config.seed)
        optimiser = Adam(flat, lr=1e-2)
        leaf = flat.detach().requires_grad_()  # the same storage: Adam's updates are the leaf's
        for _ in range(config.steps):
            (grad,) = torch.autograd.grad(F.mse_loss(mlp.forward(layout.layers(leaf), x)[0], y), [leaf])
            optimiser.step(grad)
    return _numpy_layers(layout, flat[0])


def mode_row(mode: symmetry.NearestMode) -> dict:
    """The nearest copy against the Thm 3.1 bound: ``below_bound`` is None where the bound is vacuous (≥ 2)."""
    return {
        "distance": mode.distance,
        "relative_distance": mode.relative,
        "bound": mode.bound,
        "bound_vacuous": mode.vacuous,
        "below_bound": mode.below_bound,
        "pair": list(mode.pair),
    }


def mode_proximity(config: ProximityConfig = ProximityConfig(), progress=None) -> list[dict]:
    """Per width: the nearest equivalent mode's distance, relative to ‖w‖, and the bound."""
    config.validate()
    rows = []
    for done, width in enumerate(config.widths, 1):
        nearest = symmetry.nearest_equivalent_mode(proximity_net(config, width))
        rows.append({"width": width, "n_parameters": nearest.n_parameters, **mode_row(nearest)})
        if progress is not None:
            progress(done, len(config.widths))
    return rows


# ---------------------------------------------------------------------------------------------
# Posterior quality on the tractable BNN: MMD with and without symmetry removal
# ---------------------------------------------------------------------------------------------

QUALITY_METHODS = ("mfvi", "sgm", "ensemble")


def posterior_samples(post: two_relu.GridPosterior, count: int, rng: np.random.Generator) -> np.ndarray:
    """Draws from the grid posterior: a cell by its probability, then uniform within the cell."""
    prob = post.probabilities().ravel()
    cells = rng.choice(prob.size, count, p=prob / prob.sum())
    i, j = np.unravel_index(cells, post.log_density.shape)
    half = 0.5 * (post.axis[1] - post.axis[0])
    jitter = rng.uniform(-half, half, (count, 2))
    return np.stack([post.axis[i], post.axis[j]], axis=1) + jitter


ENSEMBLE_STEPS = 1500


def map_ensemble(config: toy.ToyConfig, members: int, steps: int = ENSEMBLE_STEPS, lr: float = 0.05) -> np.ndarray:
    """A deep ensemble: ``members`` MAP fits of (w₁, w₂) by Adam from N(0, prior²) starts, on the negative log
    joint ½Σ((y − f_w(x))/noise)² + ½|w|²/prior², its gradient written out (:func:`two_relu.log_likelihood_gradient`)."""
    data = toy.make_data(config)
    x, y = torch.tensor(data.x_train), torch.tensor(data.y_train)
    g = torch.Generator().manual_seed(config.seed * 31 + 5)
    w = config.prior_scale * torch.randn(members, 2, generator=g, dtype=torch.float64)
    optimiser = Adam(w, lr=lr)
    for _ in range(steps):
        optimiser.step(w / config.prior_scale**2 - two_relu.log_likelihood_gradient(w, x, y, config.noise))
    return w.numpy()


def toy_layers(w: np.ndarray) -> list:
    """The tractable BNN's weights ``[n, 2]`` as 1-2-1 ReLU nets (no biases, outputs fixed to 1),
    so that the general removal code applies."""
    n = len(w)
    return mlp.Layout((1, 2, 1)).layers(np.concatenate([w, np.zeros((n, 2)), np.ones((n, 2)), np.zeros((n, 1))], 1))


def remove_toy_symmetry(w: np.ndarray) -> np.ndarray:
    """Permutation removal for the tractable BNN: units sorted by weight, so w₁ ≤ w₂."""
    return symmetry.sort_units(toy_layers(w), "first_in")[0][0][..., 0]


def method_samples(config: QualityConfig, progress=None) -> dict[str, np.ndarray]:
    """Samples of each method and of the exact posterior, ``[n, 2]`` each; ``progress(done, total,
    what)`` while MFVI and SGM train."""
    cfg = config.validate().toy
    rng = np.random.default_rng([cfg.seed, 2024])
    vi_progress = None if progress is None else (lambda done, total: progress(done, total, "MFVI and SGM: Adam step"))
    trainer = two_relu.train_runs(
        toy.starts_of("mfvi", cfg) + toy.starts_of("sgm", cfg), config.steps, progress=vi_progress
    )
    data = toy.make_data(cfg)
    post = two_relu.exact_posterior(data, cfg.noise, cfg.prior_scale)
    fits = toy.fits(trainer, trainer.evaluate()["objective"], {cfg: toy.exact_answer(data, cfg, post)})
    kept = [fit.row for fit in fits]  # MFVI's best start, then SGM's
    mean, std = (values[kept] for values in trainer.parameters())
    if not np.all(np.isfinite(mean)):
        raise TrainingDiverged("MFVI or SGM diverged (NaN); lower the learning rate")
    draws = mean[:, None, :] + std[:, None, :] * rng.standard_normal((2, config.samples, 2))
    sgm = draws[1]
    swap = rng.random(config.samples) < 0.5  # q_G: a sample of q_θ, then g uniform on {id, swap}
    sgm[swap] = sgm[swap, ::-1]
    return {
        "exact": posterior_samples(post, config.reference, rng),
        "mfvi": draws[0],
        "sgm": sgm,
        "ensemble": map_ensemble(cfg, config.members),
    }


@dataclass(frozen=True)
class QualityReport:
    """Median MMD² to the exact posterior per method, raw and with units sorted. JSON leaves out the
    samples (``samples``: method -> [n, 2], and "exact"), which the page plots."""

    config: QualityConfig
    rows: list[dict]  # method, mmd2_raw, mmd2_removed
    samples: dict = in_memory()


def posterior_quality(config: QualityConfig = QualityConfig(), progress=None) -> QualityReport:
    """Median MMD² (20 kernels) of each method's samples against the exact posterior's, raw and
    with units sorted; ``noise_floor`` compares two independent exact sample sets of the methods'
    size, the value a perfect method would get. ``progress(done, total, what)`` as work proceeds."""
    samples = method_samples(config, progress)
    if progress is not None:
        progress(0, len(QUALITY_METHODS) + 1, "MMD: method")
    rng = np.random.default_rng([config.toy.seed, 77])
    floor = posterior_samples(
        two_relu.exact_posterior(toy.make_data(config.toy), config.toy.noise, config.toy.prior_scale),
        config.samples,
        rng,
    )
    reference = samples["exact"]
    rows = []
    for method in (*QUALITY_METHODS, "noise_floor"):
        points = floor if method == "noise_floor" else samples[method]
        raw = mmd_aggregate(points, reference).median
        removed = mmd_aggregate(remove_toy_symmetry(points), remove_toy_symmetry(reference)).median
        rows.append({"method": method, "mmd2_raw": raw, "mmd2_removed": removed})
        if progress is not None:
            progress(len(rows), len(QUALITY_METHODS) + 1, "MMD: method")
    return QualityReport(config, rows, samples)


# ---------------------------------------------------------------------------------------------
# The page's computations as shared tasks (symlab.serving.shared_results): trained once for every session, in a
# worker process; the server's warm-up submits the default link's.
# ---------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------
# A network of one's own: a file (the page's upload, the command line's --weights FILE)
# ---------------------------------------------------------------------------------------------

CHECK_POINTS = 256  # inputs on which each removal is checked to keep the function


@dataclass(frozen=True)
class NetworkReport:
    """The symmetry explorer's analyses of one network (a posterior's means). ``nearest_modes``: per hidden
    layer, the nearest permuted copy (the transposition of its two closest units) against the Thm 3.1 bound
    for that layer's n! permutations; the removals' and min-mass's largest output change on the check inputs;
    MNIST test accuracy for a 784 → … → 10 net, with the input scaling it fits."""

    name: str
    structure: str
    sizes: list[int]
    n_parameters: int
    posterior: bool
    sort_key: str
    check_inputs: str
    nearest_modes: list[dict]
    permutation_removal_change: float
    scaling_removal_change: float
    mass_before: float
    mass_after: float  # the infimum over rescalings
    mass_ratio: float
    degenerate_units: int  # units the mass has no minimum for: mass_after is approached as they scale, not reached
    min_mass_converged: bool
    min_mass_change: float
    mnist_accuracy: float | None
    mnist_scaling: str | None
    seconds: float
    # The layers, which stay in the process that read them (None in the report a page is sent).
    raw_layers: list | None = in_memory()
    sorted_layers: list | None = in_memory()


def check_inputs(sizes, mnist=None) -> tuple[np.ndarray, str]:
    """Inputs for the removal checks: MNIST test images for a 784-input net when the data is there, else
    standard normal points."""
    if sizes[0] == 784 and mnist is not None:
        return np.asarray(
            mnist.test_images[:CHECK_POINTS], dtype=np.float64
        ) / 255.0, f"the first {CHECK_POINTS} MNIST test images"
    return np.random.default_rng(0).standard_normal((CHECK_POINTS, sizes[0])), f"{CHECK_POINTS} standard normal points"


# What :func:`network_analysis_cost` counts, calibrated on networks of 2 to 65 layers (benchmarks/bench_run_cost.py,
# the "upload" rows: measured over estimated CPU time within 0.5–2).
NEWTON_STEPS_EXPECTED = 5  # min-mass's Newton steps on the networks measured: 5 to 6
FLOAT64_PRODUCT_PRICE = 6  # float64 products (LAPACK's solves at a few hundred units) per float32 flop of the rate
FORWARD_PRICE = 4  # a forward pass's products on a few hundred inputs, per flop of the rate
MASS_EVALUATIONS = 4 * NEWTON_STEPS_EXPECTED + 3  # min-mass's objective: each step's backtracking, and the ends
WEIGHT_PASSES = 80 * MASS_EVALUATIONS + 100  # elementwise work per weight: each evaluation's exponentials, copies


def network_analysis_cost(sizes) -> Cost:
    """The CPU time :func:`network_report` takes on a network of layer sizes ``sizes`` (d₀ … d_L) as work at a
    machine's rates, known from the shapes before it starts: every pair of units per hidden layer (the nearest
    copies), min-mass's Newton steps (:func:`symmetry._newton_step`: each hidden layer's Schur complement, formed
    and solved) and objective, the removals' checks and the MNIST accuracy's forward passes."""
    hidden = list(sizes[1:-1])
    n_weights, _ = multiply_adds(sizes)
    nearest = sum(2 * width**2 * (sizes[i] + 1 + sizes[i + 2]) for i, width in enumerate(hidden))
    newton = (
        sum(
            2 * above**2 * below + (k > 0) * (2 / 3 * below**3 + 2 * below**2 * (above + 1))
            for k, (below, above) in enumerate(zip(hidden, hidden[1:]))
        )
        + (len(hidden) > 1) * 2 / 3 * hidden[-1] ** 3
    )
    checks = 6 * CHECK_POINTS * 2 * n_weights  # each removal's output change: two forward passes
    mnist = weights.is_mnist_classifier(sizes)
    accuracy = 3 * weights.SCALING_IMAGES * 2 * n_weights if mnist else 0  # three input scalings tried
    return Cost(
        matmul_flops=FLOAT64_PRODUCT_PRICE * (nearest + NEWTON_STEPS_EXPECTED * newton)
        + FORWARD_PRICE * (checks + accuracy),
        elementwise=WEIGHT_PASSES * n_weights + mnist * mnist_data.LOAD_ELEMENTS,
    )


def network_report(network: weights.Network, mnist=None, sort_key: str = "max_in") -> NetworkReport:
    """Mode proximity, permutation and scaling removal and min-mass for ``network`` (a posterior: its means)."""
    if sort_key not in symmetry.SORT_KEYS:
        raise ValueError(f"sort key must be one of {symmetry.SORT_KEYS}, got {sort_key!r}")
    started = time.perf_counter()
    layers = symmetry.as_layers(network.means)
    inputs, described = check_inputs(network.sizes, mnist)
    nearest = [
        {"layer": index + 1, "width": width, **mode_row(mode)}
        for index, (width, mode) in enumerate(
            zip(network.sizes[1:-1], symmetry.nearest_equivalent_modes(layers, network.n_parameters))
        )
    ]
    sorted_layers = symmetry.sort_units(layers, sort_key)
    scaled = symmetry.normalise_units(layers)
    result = symmetry.min_mass(layers)
    accuracy, scaling = (
        weights.mnist_accuracy(layers, mnist)
        if mnist is not None and weights.is_mnist_classifier(network.sizes)
        else (None, None)
    )
    mass_before, mass_after = float(np.ravel(result.mass_before)[0]), float(np.ravel(result.mass_after)[0])
    return NetworkReport(
        name=network.name,
        structure=network.describe(),
        sizes=list(network.sizes),
        n_parameters=network.n_parameters,
        posterior=network.is_posterior,
        sort_key=sort_key,
        check_inputs=described,
        nearest_modes=nearest,
        permutation_removal_change=max_output_change(layers, sorted_layers, inputs),
        scaling_removal_change=max_output_change(layers, scaled, inputs),
        mass_before=mass_before,
        mass_after=mass_after,
        mass_ratio=mass_after / mass_before if mass_before > 0 else math.nan,
        degenerate_units=result.degenerate_units,
        min_mass_converged=bool(np.all(result.converged)),
        min_mass_change=max_output_change(layers, result.layers, inputs),
        mnist_accuracy=accuracy,
        mnist_scaling=scaling,
        seconds=time.perf_counter() - started,
        raw_layers=layers,
        sorted_layers=sorted_layers,
    )


UPLOAD_MAX_WIDTH = 8192  # units in a hidden layer: the nearest copy compares every pair of units


# A weight picture's columns at most: a few pixels each in a phone's column, where 784 (MNIST's pixels) would get
# half a pixel each and the rows' order, the lesson, would be lost in the blur.
PICTURED_INPUTS = 64


def pictured_inputs(W: np.ndarray) -> np.ndarray:
    """The inputs (columns of ``W[unit, input]``) its picture shows: every one of up to :data:`PICTURED_INPUTS`,
    else the :data:`PICTURED_INPUTS` whose weights vary most across the units, in input order. Sorting the units
    reorders rows only: the sorted copy's picture takes the raw matrix's choice."""
    if W.shape[1] <= PICTURED_INPUTS:
        return np.arange(W.shape[1])
    return np.sort(np.argsort(-W.var(axis=0), kind="stable")[:PICTURED_INPUTS])


# A weight picture's rows at most: a chart is a few hundred pixels high, so more rows only make its picture larger.
PICTURED_UNITS = 1024


def picture_rows(W: np.ndarray) -> tuple[np.ndarray, int]:
    """``W``'s rows as a picture draws them: every one of up to :data:`PICTURED_UNITS`, else the means of groups of
    that many consecutive rows (the last group smaller); and the group's size."""
    group = -(-W.shape[0] // PICTURED_UNITS)
    if group == 1:
        return W, 1
    starts = np.arange(0, W.shape[0], group)
    return np.add.reduceat(W, starts, axis=0) / np.diff(np.append(starts, W.shape[0]))[:, None], group


@dataclass
class UploadedNetwork:
    """What the page shows of an uploaded network: :func:`network_report` without the network itself, the
    file's layers, and hidden layer 1's incoming weights as its pictures show them (float32): the columns of
    :func:`pictured_inputs`, the units as uploaded and sorted by the report's key, in rows of
    :func:`picture_rows`."""

    report: NetworkReport
    description: str
    layers: list[dict]  # weights.Network.layer_rows
    pictured_inputs: np.ndarray  # :func:`pictured_inputs` of hidden layer 1
    pictured: np.ndarray  # W[:, pictured_inputs], (row, input)
    pictured_sorted: np.ndarray  # the same with the units sorted
    units_per_row: int  # 1, or the units each row's mean is of


def uploaded_network(files, sort_key: str) -> UploadedNetwork:
    """One uploaded network (``files``: one (name, bytes)) read, checked and measured (:func:`network_report`;
    MNIST test accuracy for a 784 → … → 10 net)."""
    network = uploaded_one(files)
    weights.check_widths(network, UPLOAD_MAX_WIDTH, "its nearest copies")
    settings.check_affordable(network_analysis_cost(network.sizes), "Analysing this network")
    mnist = load_mnist_once(settings.mnist_directory()) if network.sizes[0] == 784 else None
    report = network_report(network, mnist, sort_key)
    raw_layers = report.raw_layers
    assert raw_layers is not None  # network_report keeps the layers
    W = raw_layers[0][0]
    inputs, order = pictured_inputs(W), symmetry.sorting_orders(raw_layers, sort_key)[0]
    (raw, group), (ordered, _) = picture_rows(W[:, inputs]), picture_rows(W[order][:, inputs])
    report = dataclasses.replace(report, raw_layers=None, sorted_layers=None)  # the network stays in this process
    return UploadedNetwork(
        report,
        network.describe(),
        network.layer_rows(),
        inputs,
        raw.astype(np.float32),
        ordered.astype(np.float32),
        group,
    )


def first_layer_csv(files, sort_key: str, sort: bool) -> bytes:
    """Hidden layer 1's incoming weights of an uploaded network as CSV (a row per unit: ``unit``, then one column per
    input), its units as uploaded or sorted by ``sort_key``."""
    layers = symmetry.as_layers(uploaded_one(files).means)
    W = layers[0][0][symmetry.sorting_orders(layers, sort_key)[0]] if sort else layers[0][0]
    text = io.StringIO()
    text.write(",".join(["unit", *map(str, range(W.shape[1]))]) + "\n")
    np.savetxt(text, np.column_stack([np.arange(W.shape[0]), W]), fmt=["%d"] + ["%.17g"] * W.shape[1], delimiter=",")
    return text.getvalue().encode()


def uploaded_one(files) -> weights.Network:
    """The one network in ``files`` (one (name, bytes))."""
    ((name, data),) = files
    return weights.read_network(data, name)


def _counting(progress, text: str):
    """The ``progress(done, total[, what])`` these functions call, reported as "what done / total"."""
    if progress is None:
        return None
    return lambda done, total, what=text: progress(done, total, f"{what} {done} / {total}")


def perceptron_views(config: PerceptronConfig, progress=None) -> tuple[list[dict], PerceptronReport]:
    """What the page draws of the trained perceptrons: at every epoch, each removal stage's output weights
    (``[kept nets, 2]``, float32: the densities need no more digits), and the report on the last epoch."""
    run = train_perceptrons(config, _counting(progress, f"Training {config.nets} perceptrons: epoch"))
    stages = [removal_stages(run.epoch_layers(epoch)) for epoch in range(config.epochs + 1)]
    weights = [
        {name: last_layer_weights(layers).astype(np.float32) for name, layers in epoch.items()} for epoch in stages
    ]
    return weights, perceptron_report(run, stages[-1], asymmetry=False)


def trained_mlps(config: MlpConfig, mnist_directory: str | None = None, progress=None) -> TrainedMlps:
    return train_mlps(
        config,
        load_mnist_once(mnist_directory),
        _counting(progress, f"Training {config.instances} MLPs on MNIST: SGD step"),
    )


def proximity_rows(config: ProximityConfig, progress=None) -> list[dict]:
    return mode_proximity(config, _counting(progress, "Nearest equivalent modes: width"))


def quality_report(config: QualityConfig, progress=None) -> QualityReport:
    return posterior_quality(config, _counting(progress, "Training MFVI and SGM"))


def perceptron_task(config: PerceptronConfig) -> Task:
    return Task(
        ("perceptrons", config),
        perceptron_views,
        (config,),
        f"Training {config.nets} perceptrons",
        perceptron_cost(config),
    )


# Floating-point operations per example of a 2-2-1 perceptron: the forward pass (2 × (2 multiply-adds, a bias,
# a ReLU) + 2 multiply-adds and a bias) and the gradient (sigmoid, residual, output-weight and bias gradients,
# the hidden gradient and its mask, 4 weight and 2 bias gradients), each a multiply-add counted as two.
PERCEPTRON_FORWARD_FLOPS, PERCEPTRON_GRADIENT_FLOPS = 15, 30
REPORT_CHECK_POINTS = 256


def perceptron_cost(config: PerceptronConfig) -> Cost:
    """:func:`perceptron_views`' arithmetic, element by element (no product is large enough for a matrix
    library): every example's forward pass and gradient, each epoch's shuffle (a random draw per point and
    net), and the report's checks of the removals on 256 inputs."""
    examples = config.nets * config.epochs * 2 * config.points
    checks = 4 * config.nets * REPORT_CHECK_POINTS * PERCEPTRON_FORWARD_FLOPS
    return Cost(
        elementwise=examples * (PERCEPTRON_FORWARD_FLOPS + PERCEPTRON_GRADIENT_FLOPS) + checks,
        normals=config.nets * config.epochs * 2 * config.points,
    )


def mlps_task(config: MlpConfig) -> Task:
    directory = str(data_directory(settings.mnist_directory()))
    return Task(
        ("mlps", config),
        trained_mlps,
        (config, directory),
        f"Training {config.instances} MLPs on MNIST",
        mlps_cost(config),
    )


def mlps_cost(config: MlpConfig) -> Cost:
    """:func:`train_mlps`' arithmetic: per step and net, the minibatch's forward pass, weight gradients and
    the gradient sent back (2 flops a multiply-add), and the SGD update of every parameter; then the test
    images' forward pass."""
    sizes = (784, *[config.width] * config.depth, 10)
    every, past_first = multiply_adds(sizes)
    per_example = 2 * (2 * every + past_first)
    parameters = mlp.Layout(sizes).n_params
    return Cost(
        matmul_flops=config.instances * (config.steps * config.batch * per_example + 2000 * 2 * every),
        elementwise=config.instances * config.steps * 3 * parameters,
    )


def proximity_task(config: ProximityConfig) -> Task:
    return Task(("proximity", config), proximity_rows, (config,), "Nearest equivalent modes", proximity_cost(config))


def proximity_cost(config: ProximityConfig) -> Cost:
    """:func:`mode_proximity`'s arithmetic: per width n, the n² pairwise distances between the units' rows
    (d_in + 1 + d_out numbers each) and, for trained weights, each Adam step's forward and backward pass on
    the teacher's 256 points."""
    row = config.d_in + 1 + config.d_out
    distances = sum(2 * width * width * row for width in config.widths)
    training = 0
    if config.weights == "trained":
        training = sum(config.steps * 256 * 2 * 3 * width * (config.d_in + config.d_out) for width in config.widths)
    return Cost(matmul_flops=distances + training)


def quality_task(config: QualityConfig) -> Task:
    return Task(("quality", config), quality_report, (config,), "Training MFVI and SGM", quality_cost(config))


def quality_cost(config: QualityConfig) -> Cost:
    """:func:`posterior_quality`'s arithmetic: MFVI's and SGM's restarts (:func:`toy.training_cost`), the
    ensemble's MAP fits (every member on every training point per step), and the MMDs (one exponential per
    pair of samples and kernel, for each method and the noise floor, raw and sorted)."""
    toy_config = config.toy
    vi = toy.training_cost(toy_config, 2 * toy_config.restarts, config.steps, config.steps // 100 + 1)
    ensemble = config.members * ENSEMBLE_STEPS * toy_config.n_train * toy.POINT_FLOPS
    sizes = [config.samples, config.samples, config.members, config.samples]  # MFVI, SGM, ensemble, floor
    kernels = 2 * KERNELS_PER_FAMILY
    mmd = (
        2
        * kernels
        * sum(n * (n - 1) / 2 + config.reference * (config.reference - 1) / 2 + n * config.reference for n in sizes)
    )
    return vi + Cost(elementwise=ensemble + mmd)
