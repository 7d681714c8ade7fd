"""The symmetry explorer's experiments (Laurent et al. 2024; Gelberg et al. Thm 3.1; SCIENCE.md §3, §5).

- Laurent's Fig. 1: thousands of 2-2-1 ReLU perceptrons trained by SGD on two Gaussian blobs, as
  one batched tensor program; their last-layer weights raw, after scaling and permutation removal.
- Mass before and after the min-mass problem, for those nets and for MLPs trained on MNIST.
- Mode proximity: the nearest equivalent mode of one-hidden-layer nets of growing width, relative
  to ‖w‖, against the Thm 3.1 bound.
- Posterior quality: MMD of MFVI, SGM and a deep ensemble against exact-posterior samples of the
  tractable BNN, with and without permutation removal.
- Do networks permute while they train? Kendall's τ between successive sorting permutations.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F
from scipy import ndimage

from symlab.lib import symmetry
from symlab.labs.toy import experiment as toy
from symlab.checks import check, is_float, is_int
from symlab.lib.mmd import mmd_aggregate


def _torch_init(generator, shape, fan_in, dtype=torch.float32):
    """PyTorch's default nn.Linear initialisation: U(−1/√fan_in, 1/√fan_in) for weights and biases."""
    bound = 1.0 / math.sqrt(fan_in)
    return (torch.rand(*shape, generator=generator, dtype=dtype) * 2 - 1) * bound


def _layers_to_numpy(params) -> list:
    return [(W.detach().double().numpy(), b.detach().double().numpy()) for W, b in params]


def _batched_forward(params, x):
    """MLPs ``params[l] = (W[N, out, in], b[N, out])`` on shared inputs ``x[n, in]`` or per-net
    inputs ``x[N, n, in]``: outputs ``[N, n, out]``."""
    h = x
    for index, (W, b) in enumerate(params):
        h = torch.matmul(h, W.transpose(-1, -2)) + b[:, None, :]
        if index < len(params) - 1:
            h = torch.relu(h)
    return h


# ---------------------------------------------------------------------------------------------
# Laurent's Fig. 1: many 2-2-1 perceptrons on two blobs
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PerceptronConfig:
    """Laurent et al. App. A: SGD, BCE, batch 10, lr 2, 10 epochs, 200 points per class."""

    nets: int = 2000
    epochs: int = 10
    lr: float = 2.0
    batch: int = 10
    points: int = 200          # per class
    separation: float = 2.0    # class means at ±(s, s), identity covariances
    max_loss: float = 0.05     # nets with a higher final training loss are dropped (failed runs; see kept)
    seed: int = 0

    def validate(self) -> "PerceptronConfig":
        check([
            (is_int(self.nets, 10, 100_000), "nets must be an integer in [10, 100000]"),
            (is_int(self.epochs, 1, 100), "epochs must be an integer in [1, 100]"),
            (is_float(self.lr, 1e-6, 100), "lr must be in [1e-6, 100]"),
            (is_int(self.batch, 1, 10_000), "batch must be an integer in [1, 10000]"),
            (is_int(self.points, 2, 10_000), "points must be an integer in [2, 10000]"),
            (is_float(self.separation, 0.5, 10), "separation must be in [0.5, 10]"),
            (is_float(self.max_loss, 0, 100), "max_loss must be in [0, 100]"),
            (is_int(self.seed, 0, 2**31 - 1), "seed must be an integer in [0, 2^31)"),
        ])
        return self


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
    snapshots: list            # per epoch (0 = initialisation): the nets as float64 layers
    final_loss: np.ndarray     # per net, full training set
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


def train_perceptrons(config: PerceptronConfig = PerceptronConfig(), progress=None) -> PerceptronRun:
    """Train ``config.nets`` perceptrons at once: every net has its own initialisation and its own
    shuffling, and since the loss is a sum over nets, one backward pass gives each its own
    gradient. ``progress(epoch, epochs)`` after each epoch."""
    config.validate()
    start = time.perf_counter()
    x_np, y_np = make_blobs(config.points, config.separation, config.seed)
    x, y = torch.tensor(x_np, dtype=torch.float32), torch.tensor(y_np, dtype=torch.float32)
    g = torch.Generator().manual_seed(config.seed)
    n = config.nets
    params = [(_torch_init(g, (n, 2, 2), 2), _torch_init(g, (n, 2), 2)),
              (_torch_init(g, (n, 1, 2), 2), _torch_init(g, (n, 1), 2))]
    flat = [p.requires_grad_() for pair in params for p in pair]
    snapshots = [_layers_to_numpy(params)]
    count = x.shape[0]
    for epoch in range(config.epochs):
        order = torch.argsort(torch.rand(n, count, generator=g), dim=1)
        for start_index in range(0, count, config.batch):
            idx = order[:, start_index:start_index + config.batch]
            logits = _batched_forward(params, x[idx])[..., 0]
            loss = F.binary_cross_entropy_with_logits(logits, y[idx], reduction="none").mean(1).sum()
            grads = torch.autograd.grad(loss, flat)
            with torch.no_grad():
                for p, grad in zip(flat, grads):
                    p -= config.lr * grad
        snapshots.append(_layers_to_numpy(params))
        if progress is not None:
            progress(epoch + 1, config.epochs)
    with torch.no_grad():
        logits = _batched_forward(params, x)[..., 0]
        loss = F.binary_cross_entropy_with_logits(logits, y.expand(n, -1), reduction="none").mean(1)
    final = torch.nan_to_num(loss, nan=math.inf).double().numpy()
    run = PerceptronRun(config, x_np, y_np, snapshots, final, time.perf_counter() - start)
    if run.kept.sum() < 4:  # too few to estimate a density (or an MMD) from
        raise RuntimeError(f"training diverged: {int(np.sum(~np.isfinite(final)))} of {n} nets ended with a "
                           "non-finite loss; lower the learning rate")
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
    return float(np.max(np.abs(symmetry.forward(layers_a, inputs) - symmetry.forward(layers_b, inputs))))


def density_extent(points: np.ndarray, quantile: float = 0.01) -> tuple[float, float]:
    """A square window, the same on both axes (so mirror images look like mirror images), holding
    all but ``quantile`` of each coordinate at either end."""
    low, high = np.quantile(points, [quantile, 1 - quantile])
    pad = 0.1 * (high - low) + 1e-9
    return float(low - pad), float(high + pad)


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


def perceptron_report(run: PerceptronRun, stages: dict | None = None) -> dict:
    """What the headless twin reports for the Fig. 1 experiment (JSON-ready); ``stages`` are the
    final nets' :func:`removal_stages`, when the caller has them already."""
    final = run.epoch_layers(run.config.epochs)
    stages = stages or removal_stages(final)
    inputs = np.random.default_rng(1).standard_normal((256, 2)) * 3
    report = {"config": asdict(run.config), "nets": int(run.config.nets), "kept": int(run.kept.sum()),
              "loss_cutoff": float(run.final_loss[run.kept].max()),
              "seconds": run.seconds, "nets_per_second": run.config.nets / run.seconds, "stages": {}}
    for name, layers in stages.items():
        weights = last_layer_weights(layers)
        extent = density_extent(weights)
        peaks = density_peaks(weights, extent)
        report["stages"][name] = {
            "peaks": [[round(a, 3), round(b, 3)] for a, b in peaks],
            "share_v1_above_v2": float(np.mean(weights[:, 0] > weights[:, 1])),
            "swap_asymmetry_mmd2": swap_asymmetry(weights),
            "max_output_change": max_output_change(stages["raw"], layers, inputs),
        }
    report["mass"] = mass_report(final)
    return report


# ---------------------------------------------------------------------------------------------
# Mass before and after the min-mass problem
# ---------------------------------------------------------------------------------------------

def mass_report(layers, inputs: np.ndarray | None = None) -> dict:
    """Min-mass for a batch of nets: mass before and after, the ratio's spread, convergence.
    Nets with non-finite weights (diverged training) are left out and counted."""
    finite = np.all([np.isfinite(W).all(axis=(-2, -1)) & np.isfinite(b).all(axis=-1) for W, b in layers], axis=0)
    if not finite.any():
        raise RuntimeError("every net diverged (non-finite weights): lower the learning rate")
    layers = [(W[finite], b[finite]) for W, b in layers]
    start = time.perf_counter()
    result = symmetry.min_mass(layers)
    seconds = time.perf_counter() - start
    ratio = np.ravel(result.mass_after / result.mass_before)
    if inputs is None:
        inputs = np.random.default_rng(2).standard_normal((64, layers[0][0].shape[-1]))
    return {
        "nets": int(ratio.size),
        "diverged": int((~finite).sum()),
        "mass_before_median": float(np.median(result.mass_before)),
        "mass_after_median": float(np.median(result.mass_after)),
        "ratio_median": float(np.median(ratio)),
        "ratio_min": float(ratio.min()),
        "ratio_max": float(ratio.max()),
        "converged": int(np.sum(result.converged)),
        "iterations": result.iterations,
        "degenerate_units": result.degenerate_units,
        "max_output_change": max_output_change(layers, result.layers, inputs),
        "seconds": seconds,
        "_result": result,
    }


# ---------------------------------------------------------------------------------------------
# MLPs trained on MNIST (mass, permutations during training)
# ---------------------------------------------------------------------------------------------

SCHEDULES = ("linear", "constant")


@dataclass(frozen=True)
class MlpConfig:
    """Batched MLPs on the first ``train_size`` MNIST training images, plain SGD."""

    width: int = 32
    depth: int = 1             # hidden layers
    instances: int = 4
    steps: int = 1000
    lr: float = 0.1
    schedule: str = "linear"   # "linear": lr decays to 0 at the last step; "constant"
    batch: int = 32
    train_size: int = 10_000
    sort_key: str = "max_in"   # Laurent §5.2: the maximum weight was the most stable statistic
    seed: int = 0

    def validate(self) -> "MlpConfig":
        check([
            (is_int(self.width, 2, 1024), "width must be an integer in [2, 1024]"),
            (is_int(self.depth, 1, 3), "depth must be an integer in [1, 3]"),
            (is_int(self.instances, 1, 64), "instances must be an integer in [1, 64]"),
            (is_int(self.steps, 1, 20_000), "steps must be an integer in [1, 20000]"),
            (is_float(self.lr, 1e-6, 10), "lr must be in [1e-6, 10]"),
            (self.schedule in SCHEDULES, f"schedule must be one of {SCHEDULES}"),
            (is_int(self.batch, 1, 4096), "batch must be an integer in [1, 4096]"),
            (is_int(self.train_size, 100, 60_000), "train_size must be an integer in [100, 60000]"),
            (self.sort_key in symmetry.SORT_KEYS, f"sort_key must be one of {symmetry.SORT_KEYS}"),
            (is_int(self.seed, 0, 2**31 - 1), "seed must be an integer in [0, 2^31)"),
        ])
        return self


@dataclass
class MlpTraining:
    config: MlpConfig
    loss: np.ndarray             # [steps, instances]: each step's mini-batch loss, before its update
    tau: np.ndarray              # [steps, instances, hidden layers]: Kendall τ between successive sorts
    layers: list                 # the final nets, float64, batched over instances
    diverged: np.ndarray         # per instance
    seconds: float = 0.0
    accuracy: np.ndarray = field(default_factory=lambda: np.zeros(0))


def mnist_arrays(mnist, train_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.tensor(mnist.train_images[:train_size], dtype=torch.float32) / 255.0
    return images, torch.tensor(mnist.train_labels[:train_size].astype(np.int64))


def train_mlps(config: MlpConfig, mnist, progress=None) -> MlpTraining:
    """Train ``instances`` MLPs 784-width^depth-10 with SGD, recording after every step each hidden
    layer's sorting permutation and Kendall's τ against the previous one (Laurent §5.2).
    ``progress(step, steps)`` every 25 steps. A net whose loss turns NaN stops moving."""
    config.validate()
    start = time.perf_counter()
    images, labels = mnist_arrays(mnist, config.train_size)
    g = torch.Generator().manual_seed(config.seed)
    sizes = [784] + [config.width] * config.depth + [10]
    k = config.instances
    params = [(_torch_init(g, (k, o, i), i), _torch_init(g, (k, o), i)) for i, o in zip(sizes[:-1], sizes[1:])]
    flat = [p.requires_grad_() for pair in params for p in pair]
    losses = np.zeros((config.steps, k))
    perms = np.zeros((config.steps + 1, k, config.depth, config.width), dtype=np.int64)
    perms[0] = _sorting_permutations(params, config.sort_key)
    alive = torch.ones(k, dtype=torch.bool)
    for step in range(1, config.steps + 1):
        idx = torch.randint(0, images.shape[0], (k, config.batch), generator=g)
        logits = _batched_forward(params, images[idx])
        loss = F.cross_entropy(logits.reshape(-1, 10), labels[idx].reshape(-1), reduction="none").reshape(k, -1).mean(1)
        losses[step - 1] = loss.detach().numpy()
        alive &= torch.isfinite(loss.detach())
        grads = torch.autograd.grad(torch.where(alive, loss, 0.0).sum(), flat)
        lr = config.lr * ((config.steps - step + 1) / config.steps if config.schedule == "linear" else 1.0)
        with torch.no_grad():
            for p, grad in zip(flat, grads):
                p -= lr * torch.nan_to_num(grad) * alive.view(-1, *([1] * (p.dim() - 1)))
        perms[step] = _sorting_permutations(params, config.sort_key)
        if progress is not None and (step % 25 == 0 or step == config.steps):
            progress(step, config.steps)
    tau = np.ones((config.steps, k, config.depth))
    for i in range(k):
        for layer in range(config.depth):
            tau[:, i, layer] = symmetry.successive_kendall_tau(perms[:, i, layer])
    final = _layers_to_numpy(params)
    with torch.no_grad():
        test_x = torch.tensor(mnist.test_images[:2000], dtype=torch.float32) / 255.0
        predicted = _batched_forward(params, test_x).argmax(-1).numpy()
    accuracy = (predicted == mnist.test_labels[:2000][None, :]).mean(1)
    return MlpTraining(config, losses, tau, final, ~alive.numpy(),
                       time.perf_counter() - start, accuracy)


def _sorting_permutations(params, key: str) -> np.ndarray:
    """[instances, hidden layers, width] sorting permutations of the current nets."""
    with torch.no_grad():
        _, perms = symmetry.sorting_permutations(_layers_to_numpy(params), key)
    return np.stack(perms, axis=1)


def training_report(run: MlpTraining) -> dict:
    """JSON-ready: means over the nets that did not diverge; None where nothing is defined (every
    net diverged, or a half of a one-step run)."""
    alive = ~run.diverged
    tau = run.tau.mean(axis=(1, 2))
    moved = np.any(run.tau < 1, axis=(1, 2))
    half = len(moved) // 2

    def share(part):
        return float(part.mean()) if part.size else None

    return {
        "config": asdict(run.config),
        "seconds": run.seconds,
        "final_loss_mean": toy.finite_or_none(np.mean(run.loss[-1][alive])) if alive.any() else None,
        "test_accuracy_mean": float(np.mean(run.accuracy[alive])) if alive.any() else None,
        "diverged": int(run.diverged.sum()),
        "tau_mean": float(tau.mean()),
        "tau_min": float(run.tau.min()),
        "steps_with_permutation": int(moved.sum()),
        "share_steps_with_permutation_first_half": share(moved[:half]),
        "share_steps_with_permutation_second_half": share(moved[half:]),
        "tau_per_step": [float(v) for v in tau],
    }


# ---------------------------------------------------------------------------------------------
# Mode proximity against Thm 3.1
# ---------------------------------------------------------------------------------------------

PROXIMITY_WEIGHTS = ("random", "trained")
DEFAULT_WIDTHS = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)


@dataclass(frozen=True)
class ProximityConfig:
    widths: tuple[int, ...] = DEFAULT_WIDTHS
    d_in: int = 1
    d_out: int = 1
    weights: str = "random"     # PyTorch's default initialisation, or trained on a teacher
    steps: int = 300            # Adam steps for "trained"
    seed: int = 0

    def validate(self) -> "ProximityConfig":
        check([
            (len(self.widths) >= 1 and all(is_int(w, 2, 16_384) for w in self.widths),
             "widths must be integers in [2, 16384]"),
            (is_int(self.d_in, 1, 64), "d_in must be an integer in [1, 64]"),
            (is_int(self.d_out, 1, 16), "d_out must be an integer in [1, 16]"),
            (self.weights in PROXIMITY_WEIGHTS, f"weights must be one of {PROXIMITY_WEIGHTS}"),
            (is_int(self.steps, 1, 10_000), "steps must be an integer in [1, 10000]"),
            (is_int(self.seed, 0, 2**31 - 1), "seed must be an integer in [0, 2^31)"),
        ])
        return self


def teacher_data(d_in: int, d_out: int, seed: int, points: int = 256):
    """Inputs x ~ N(0, I) and targets from a random width-8 ReLU teacher."""
    g = torch.Generator().manual_seed(seed * 7 + 3)
    x = torch.randn(points, d_in, generator=g, dtype=torch.float64)
    teacher = [(torch.randn(1, 8, d_in, generator=g, dtype=torch.float64), torch.randn(1, 8, generator=g, dtype=torch.float64)),
               (torch.randn(1, d_out, 8, generator=g, dtype=torch.float64) / math.sqrt(8), torch.zeros(1, d_out, dtype=torch.float64))]
    return x, _batched_forward(teacher, x)[0]


def proximity_net(config: ProximityConfig, width: int):
    """One one-hidden-layer net of ``width`` units: initialised, or trained by Adam on the teacher."""
    g = torch.Generator().manual_seed(config.seed * 100_003 + width)
    params = [(_torch_init(g, (1, width, config.d_in), config.d_in, torch.float64),
               _torch_init(g, (1, width), config.d_in, torch.float64)),
              (_torch_init(g, (1, config.d_out, width), width, torch.float64),
               _torch_init(g, (1, config.d_out), width, torch.float64))]
    if config.weights == "trained":
        x, y = teacher_data(config.d_in, config.d_out, config.seed)
        flat = [p.requires_grad_() for pair in params for p in pair]
        optimiser = torch.optim.Adam(flat, lr=1e-2)
        for _ in range(config.steps):
            optimiser.zero_grad(set_to_none=True)
            F.mse_loss(_batched_forward(params, x)[0], y).backward()
            optimiser.step()
    return [(W[0], b[0]) for W, b in _layers_to_numpy(params)]


def mode_proximity(config: ProximityConfig = ProximityConfig(), progress=None) -> list[dict]:
    """Per width: the nearest equivalent mode's distance, relative to ‖w‖, and the bound."""
    config.validate()
    rows = []
    for done, width in enumerate(config.widths, 1):
        nearest = symmetry.nearest_equivalent_mode(proximity_net(config, width))
        rows.append({"width": width, "n_parameters": nearest.n_parameters, "distance": nearest.distance,
                     "relative_distance": nearest.relative, "bound": nearest.bound,
                     "below_bound": bool(nearest.relative <= nearest.bound), "pair": list(nearest.pair)})
        if progress is not None:
            progress(done, len(config.widths))
    return rows


# ---------------------------------------------------------------------------------------------
# Posterior quality on the tractable BNN: MMD with and without symmetry removal
# ---------------------------------------------------------------------------------------------

QUALITY_METHODS = ("mfvi", "sgm", "ensemble")


@dataclass(frozen=True)
class QualityConfig:
    toy: toy.ToyConfig = toy.ToyConfig()
    samples: int = 200        # per method
    reference: int = 1000     # exact-posterior samples
    members: int = 200        # deep-ensemble members: MAP fits from random starts
    steps: int = 2000         # Adam steps for MFVI and SGM

    def validate(self) -> "QualityConfig":
        self.toy.validate()
        check([
            (is_int(self.samples, 10, 5000), "samples must be an integer in [10, 5000]"),
            (is_int(self.reference, 10, 20_000), "reference must be an integer in [10, 20000]"),
            (is_int(self.members, 2, 5000), "members must be an integer in [2, 5000]"),
            (is_int(self.steps, 1, 20_000), "steps must be an integer in [1, 20000]"),
        ])
        return self


def posterior_samples(post: toy.GridPosterior, count: int, rng: np.random.Generator) -> np.ndarray:
    """Draws from the grid posterior: a cell by its probability, then uniform within the cell."""
    prob = post.probabilities().ravel()
    cells = rng.choice(prob.size, count, p=prob / prob.sum())
    i, j = np.unravel_index(cells, post.log_density.shape)
    half = 0.5 * (post.axis[1] - post.axis[0])
    jitter = rng.uniform(-half, half, (count, 2))
    return np.stack([post.axis[i], post.axis[j]], axis=1) + jitter


def map_ensemble(config: toy.ToyConfig, members: int, steps: int = 1500, lr: float = 0.05) -> np.ndarray:
    """A deep ensemble: ``members`` MAP fits of (w₁, w₂) by Adam from N(0, prior²) starts."""
    data = toy.make_data(config)
    x, y = torch.tensor(data.x_train), torch.tensor(data.y_train)
    g = torch.Generator().manual_seed(config.seed * 31 + 5)
    w = (config.prior_scale * torch.randn(members, 2, generator=g, dtype=torch.float64)).requires_grad_()
    optimiser = torch.optim.Adam([w], lr=lr)
    for _ in range(steps):
        optimiser.zero_grad(set_to_none=True)
        residual = (y - toy.network(w, x)) / config.noise
        (0.5 * (residual**2).sum() + 0.5 * (w**2).sum() / config.prior_scale**2).backward()
        optimiser.step()
    return w.detach().numpy()


def toy_layers(w: np.ndarray) -> list:
    """The tractable BNN's weights ``[n, 2]`` as 1-2-1 ReLU nets (no biases, outputs fixed to 1),
    so that the general removal code applies."""
    n = len(w)
    return [(w[:, :, None], np.zeros((n, 2))), (np.ones((n, 1, 2)), np.zeros((n, 1)))]


def remove_toy_symmetry(w: np.ndarray) -> np.ndarray:
    """Permutation removal for the tractable BNN: units sorted by weight, so w₁ ≤ w₂."""
    return symmetry.sort_units(toy_layers(w), "first_in")[0][0][..., 0]


def method_samples(config: QualityConfig, progress=None) -> dict[str, np.ndarray]:
    """Samples of each method and of the exact posterior, ``[n, 2]`` each; ``progress(done, total,
    what)`` while MFVI and SGM train."""
    cfg = config.validate().toy
    rng = np.random.default_rng([cfg.seed, 2024])
    vi_progress = None if progress is None else (lambda done, total: progress(done, total, "MFVI and SGM: Adam step"))
    trainer = toy.train_runs([toy.RunSpec("mfvi", cfg), toy.RunSpec("sgm", cfg)], config.steps, progress=vi_progress,
                             eval_samples=512)
    mean, std = trainer.parameters()
    if not np.all(np.isfinite(mean)):
        raise RuntimeError("MFVI or SGM diverged (NaN); lower the learning rate")
    draws = mean[:, None, :] + std[:, None, :] * rng.standard_normal((2, config.samples, 2))
    sgm = draws[1]
    swap = rng.random(config.samples) < 0.5  # q_G: a sample of q_θ, then g uniform on {id, swap}
    sgm[swap] = sgm[swap, ::-1]
    post = toy.exact_posterior(toy.make_data(cfg), cfg.noise, cfg.prior_scale)
    return {"exact": posterior_samples(post, config.reference, rng), "mfvi": draws[0], "sgm": sgm,
            "ensemble": map_ensemble(cfg, config.members)}


def posterior_quality(config: QualityConfig = QualityConfig(), progress=None) -> dict:
    """Median MMD² (20 kernels) of each method's samples against the exact posterior's, raw and
    with units sorted; ``noise_floor`` compares two independent exact sample sets of the methods'
    size, the value a perfect method would get. ``progress(done, total, what)`` as work proceeds."""
    samples = method_samples(config, progress)
    if progress is not None:
        progress(0, len(QUALITY_METHODS) + 1, "MMD: method")
    rng = np.random.default_rng([config.toy.seed, 77])
    floor = posterior_samples(toy.exact_posterior(toy.make_data(config.toy), config.toy.noise, config.toy.prior_scale),
                              config.samples, rng)
    reference = samples["exact"]
    rows = []
    for method in (*QUALITY_METHODS, "noise_floor"):
        points = floor if method == "noise_floor" else samples[method]
        raw = mmd_aggregate(points, reference).median
        removed = mmd_aggregate(remove_toy_symmetry(points), remove_toy_symmetry(reference)).median
        rows.append({"method": method, "mmd2_raw": raw, "mmd2_removed": removed})
        if progress is not None:
            progress(len(rows), len(QUALITY_METHODS) + 1, "MMD: method")
    return {"config": {**asdict(replace(config, toy=None)), "toy": asdict(config.toy)}, "rows": rows,
            "_samples": samples}
