"""The tractable two-weight ReLU BNN (Gelberg et al. §5, Fig. 4; docs/science.md, § Tractable BNN): its maths.

``f_w(x) = ReLU(w₁x) + ReLU(w₂x)``: two hidden units, no biases, output weights fixed to 1. Swapping the units,
G = {identity, swap}, leaves f unchanged. Here: the network; the exact posterior on a grid, its evidence and its
predictive; for mean-field Gaussian q, the swap ratio and the mutual information I(ω; g) (exact per draw, by a
fixed quasi-Monte-Carlo rule, and InfoNCE's I_K), and the closed-form predictive moments; and mean-field VI (MFVI)
and its symmetrised version (SGM, ELBO + I), many runs trained as one batched tensor program with the gradient
written out. The toy lab (:mod:`symlab.labs.toy.experiment`) draws the data and names the runs from its config.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import expit, ndtr

from symlab.lib.adam import Adam
from symlab.lib.gaussian import kl_to_prior
from symlab.lib.options import TWO_RELU_INITS, TWO_RELU_METHODS, TWO_RELU_MI_ESTIMATORS

_LOG_2PI = math.log(2.0 * math.pi)
METHODS = TWO_RELU_METHODS
MI_ESTIMATORS, INITS = TWO_RELU_MI_ESTIMATORS, TWO_RELU_INITS


@dataclass(frozen=True)
class ToyData:
    """Training and test inputs x and outputs y, each ``[n]``."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def network(w, x):
    """f_w(x) for weights ``w[..., 2]`` and inputs ``x[n]``: shape ``w.shape[:-1] + (n,)``."""
    relu = torch.relu if isinstance(w, torch.Tensor) else (lambda v: np.maximum(v, 0.0))
    return relu(w[..., 0:1] * x) + relu(w[..., 1:2] * x)


def log_joint(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, noise: float, prior_scale: float) -> torch.Tensor:
    """log p(D | w) + log p(w) for weights ``w[..., 2]``, normalisers included: the density the grid normalises
    (:func:`exact_posterior`) and HMC samples, shape ``w.shape[:-1]``."""
    sse = (y - network(w, x)).square().sum(-1)
    log_lik = -0.5 * sse / noise**2 - x.shape[-1] * (math.log(noise) + 0.5 * _LOG_2PI)
    log_prior = (-0.5 * (w / prior_scale).square() - math.log(prior_scale) - 0.5 * _LOG_2PI).sum(-1)
    return log_lik + log_prior


# ---------------------------------------------------------------------------------------------
# Exact posterior on a grid
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GridPosterior:
    """Normalised log p(w | D) on ``axis × axis`` (index [i, j] ↔ w₁ = axis[i], w₂ = axis[j])."""

    axis: np.ndarray
    log_density: np.ndarray
    log_evidence: float

    @property
    def cell_area(self) -> float:
        return float((self.axis[1] - self.axis[0]) ** 2)

    def probabilities(self) -> np.ndarray:
        return np.exp(self.log_density) * self.cell_area

    def positive_share(self) -> np.ndarray:
        """The share of each axis point's cell on the positive side of 0. A point on 0 is the middle of a cell
        that straddles it, half on each side: ``np.sign`` would count that cell on neither side, or, where
        linspace puts the point at −4e-16, wholly on one."""
        on_zero = np.abs(self.axis) < 0.25 * (self.axis[1] - self.axis[0])
        return np.where(on_zero, 0.5, (self.axis > 0).astype(np.float64))

    def mean_abs_first(self) -> float:
        """E|w₁| on the grid."""
        return float(self.probabilities().sum(1) @ np.abs(self.axis))

    def opposite_sides(self) -> float:
        """P(w₁w₂ < 0 | D) on the grid, cells on a zero line counted by their share on each side."""
        positive = self.positive_share()
        negative = 1.0 - positive
        prob = self.probabilities()
        return float(positive @ prob @ negative + negative @ prob @ positive)


def default_bound(data: ToyData, prior_scale: float) -> float:
    """Half-width of the grid: covers both modes (±slope) and the prior's bulk."""
    slope = abs(float(np.dot(data.y_train, np.abs(data.x_train)) / max(np.dot(data.x_train, data.x_train), 1e-12)))
    return max(1.5 * slope + 1.0, min(4.0 * prior_scale, 2.0 * slope + 3.0), 2.0)


def exact_posterior(
    data: ToyData, noise: float, prior_scale: float, grid_size: int = 201, bound: float | None = None
) -> GridPosterior:
    """Grid posterior and log evidence by a Riemann sum, in float64.

    The sum of squared errors for every grid pair comes from one matrix product: with
    a_i = ReLU(axis_i x), SSE[i, j] = Σy² + ‖a_i‖² + ‖a_j‖² − 2y·a_i − 2y·a_j + 2 a_i·a_j.
    """
    if bound is None:
        bound = default_bound(data, prior_scale)
    axis = np.linspace(-bound, bound, grid_size)
    x, y = data.x_train, data.y_train
    a = np.maximum(axis[:, None] * x[None, :], 0.0)
    norms, proj = (a * a).sum(1), a @ y
    sse = (y @ y) + norms[:, None] + norms[None, :] - 2 * proj[:, None] - 2 * proj[None, :] + 2 * (a @ a.T)
    n = x.size
    log_lik = -0.5 * sse / noise**2 - n * (math.log(noise) + 0.5 * _LOG_2PI)
    log_prior_1d = -0.5 * (axis / prior_scale) ** 2 - math.log(prior_scale) - 0.5 * _LOG_2PI
    log_joint = log_lik + log_prior_1d[:, None] + log_prior_1d[None, :]
    cell = (axis[1] - axis[0]) ** 2
    peak = log_joint.max()
    log_evidence = float(peak + math.log(np.exp(log_joint - peak).sum() * cell))
    return GridPosterior(axis, log_joint - log_evidence, log_evidence)


def mass_bound(post: GridPosterior, tail: float = 1e-4) -> float:
    """Smallest symmetric half-width holding all grid cells above ``tail`` × the peak (for drawing)."""
    keep = post.log_density >= post.log_density.max() + math.log(tail)
    i, j = np.nonzero(keep)
    extent = max(np.abs(post.axis[i]).max(), np.abs(post.axis[j]).max())
    return float(min(extent * 1.15 + 2 * (post.axis[1] - post.axis[0]), post.axis[-1]))


def posterior_predictive(post: GridPosterior, x, noise: float):
    """Mean and std dev (noise included) of y at ``x`` under the grid posterior."""
    x = np.asarray(x, dtype=np.float64)
    prob = post.probabilities()
    pos = np.maximum(post.axis[:, None] * x[None, :], 0.0)  # ReLU(w x) for each grid value
    marginal_1, marginal_2 = prob.sum(1), prob.sum(0)
    mean = marginal_1 @ pos + marginal_2 @ pos
    # Σ_ij pos_i p_ij pos_j per x, as one matrix product (an einsum of the three loops took 20× as long).
    cross = np.sum(pos * (prob @ pos), axis=0)
    second = marginal_1 @ pos**2 + marginal_2 @ pos**2 + 2 * cross
    return mean, np.sqrt(np.maximum(second - mean**2, 0.0) + noise**2)


def opposite_sides(mean, std):
    """P(w₁w₂ < 0) under N(mean, diag std²) (last axis: the two units): the mass that puts the units on
    opposite sides of 0, one for x > 0 and one for x < 0, as y = α|x| needs."""
    positive = ndtr(np.asarray(mean, float) / np.asarray(std, float))  # P(w_i > 0)
    return positive[..., 0] * (1 - positive[..., 1]) + (1 - positive[..., 0]) * positive[..., 1]


# ---------------------------------------------------------------------------------------------
# Variational families
# ---------------------------------------------------------------------------------------------


def gaussian_log_density(w, mean, log_std):
    """log N(w; mean, diag exp(2 log_std)) summed over the last axis."""
    z = (w - mean) * torch.exp(-log_std)
    return (-0.5 * z**2 - log_std - 0.5 * _LOG_2PI).sum(-1)


def swap_log_ratio(w, mean, log_std):
    """log q(swap w) − log q(w) for mean-field q; the normalisers cancel."""
    return gaussian_log_density(w.flip(-1), mean, log_std) - gaussian_log_density(w, mean, log_std)


def exact_mutual_information(w, mean, log_std):
    """Per-sample I = log q(w) − log(½q(w) + ½q(swap w)) = log 2 − softplus(d), d the swap ratio."""
    return math.log(2.0) - F.softplus(swap_log_ratio(w, mean, log_std))


def log_likelihood_gradient(w, x, y, noise):
    """∂/∂w of Σ_b log N(y_b; f_w(x_b), noise²) for weights ``w[..., 2]`` and data ``x, y [..., n]`` (their
    leading dimensions broadcasting against w's): Σ_b (y_b − f_w(x_b))/noise² · x_b · 1[w_j x_b > 0]."""
    pre = w[..., None] * x[..., None, :]  # [..., unit, n]: w_j x_b
    active = pre > 0
    residual = (y - (pre * active).sum(-2)) / noise**2  # [..., n]; tensors or arrays alike
    return ((residual * x)[..., None, :] * active).sum(-1)


def relu_moments(mean, std, x):
    """E[ReLU(wx)] and E[ReLU(wx)²] for w ~ N(mean, std²), in closed form: ReLU(wx) = |x| ReLU(sign(x) w), and
    for v ~ N(m, s²), E ReLU(v) = mΦ(m/s) + sφ(m/s), E ReLU(v)² = (m² + s²)Φ(m/s) + msφ(m/s)."""
    m = mean * torch.sign(x)
    z = m / std
    cdf, pdf = torch.special.ndtr(z), torch.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    return x.abs() * (m * cdf + std * pdf), x * x * ((m * m + std * std) * cdf + m * std * pdf)


def predictive_moments(mean, std, x):
    """Mean and variance of f_w(x) under mean-field q, ``[runs, n]`` for ``mean, std [runs, 2]`` and
    ``x [runs or 1, n]``: the units are independent under q, so their moments add."""
    first_1, second_1 = relu_moments(mean[:, 0:1], std[:, 0:1], x)
    first_2, second_2 = relu_moments(mean[:, 1:2], std[:, 1:2], x)
    variance = (second_1 - first_1**2) + (second_2 - first_2**2)
    return first_1 + first_2, variance.clamp_min(0.0)  # ≥ 0 up to rounding


# Points of the quasi-Monte-Carlo rule for I: its error, ~5e-5 nats at 2¹⁶ points (tests/test_two_relu.py), sits
# well under the gaps it is compared with. Live traces use 2¹² (~7e-4 nats), enough to draw and to pick a start by.
INFORMATION_POINTS = 2**16
TRACE_INFORMATION_POINTS = 2**12


@functools.cache
def standard_normal_points(count: int) -> torch.Tensor:
    """``count`` fixed points of N(0, I₂) from scrambled Sobol points: deterministic, and their average of a smooth
    function errs ~1/count rather than Monte Carlo's 1/√count. (Gauss–Hermite rules fail here: when q's std devs
    differ a lot, softplus(d) bends sharply in between their nodes.)"""
    uniform = torch.quasirandom.SobolEngine(2, scramble=True, seed=0).draw(count, dtype=torch.float64)
    return torch.special.ndtri(uniform.clamp(1e-15, 1 - 1e-15))


def mutual_information_by_qmc(mean, log_std, points: int = INFORMATION_POINTS):
    """I = E_q[log 2 − softplus(d)] for G = {id, swap}, per run (``mean, log_std [runs, 2]``), by the fixed
    quasi-Monte-Carlo rule: the same value every time it is asked at the same q. With w = μ + σ ⊙ ε,
    d = ½|ε|² − ½Σ_j z'_j² where z'_j = (w_k − μ_j)/σ_j = a_j + b_j ε_k (k the other unit), a_j = (μ_k − μ_j)/σ_j
    and b_j = σ_k/σ_j: a few passes over the points per run rather than two log-densities of every draw."""
    eps = standard_normal_points(points)  # [points, 2]
    std = torch.exp(log_std)
    a = ((mean.flip(-1) - mean) / std)[:, None, :]
    b = (std.flip(-1) / std)[:, None, :]
    z_swapped = torch.addcmul(a, b, eps.flip(-1))  # [runs, points, 2]
    d = 0.5 * (_squared_norms(eps) - (z_swapped * z_swapped).sum(-1))
    return math.log(2.0) - F.softplus(d).mean(-1)


@functools.cache
def _squared_norms(points: torch.Tensor) -> torch.Tensor:
    return (points * points).sum(-1)


def infonce_mutual_information(w, mean, log_std, K: int, generator=None):
    """Per-sample I_K = log K − log(1 + Σ_{k<K} q(g_k⁻¹ w)/q(w)), g_k uniform on {id, swap}.

    For G = {id, swap} the ratio is 1 for the identity and e^d for the swap, so only the
    number of sampled swaps matters; it is drawn per sample as K − 1 fair coins.
    """
    d = swap_log_ratio(w, mean, log_std)
    swaps = torch.bernoulli(
        torch.full((*d.shape, K - 1), 0.5, dtype=d.dtype, device=d.device), generator=generator
    ).sum(-1)
    identities = (K - 1) - swaps
    # log(1 + identities + swaps·e^d), stably.
    log_terms = torch.logaddexp(torch.log1p(identities), torch.log(swaps) + d)
    return math.log(K) - log_terms


OUTLINE_POINTS = 65  # points per ellipse drawn: smooth at any chart size


def gaussian_outlines(mean, std, symmetrised: bool, radii=(1.0, 2.0), points: int = OUTLINE_POINTS):
    """Level sets of q (or of both components of q_G) at ``radii`` standard deviations.

    For a diagonal Gaussian these are axis-aligned ellipses, so they are drawn exactly and
    cheaply (no density grid). Returns x and y with NaN between outlines, for one line trace.
    """
    angle = np.linspace(0.0, 2.0 * math.pi, points)
    xs, ys = [], []
    for centre, half_axes in zip(*gaussian_ellipses(mean, std, symmetrised, radii)):
        xs += [centre[0] + half_axes[0] * np.cos(angle), [np.nan]]
        ys += [centre[1] + half_axes[1] * np.sin(angle), [np.nan]]
    return np.concatenate(xs[:-1]), np.concatenate(ys[:-1])


def gaussian_ellipses(mean, std, symmetrised: bool, radii=(1.0, 2.0)) -> tuple[np.ndarray, np.ndarray]:
    """The outlines of :func:`gaussian_outlines` as axis-aligned ellipses: centres and half-axes, ``[k, 2]`` each,
    radius by radius, q's and then (``symmetrised``) its swap's."""
    mean, std = np.asarray(mean, float), np.asarray(std, float)
    components = [(mean, std), (mean[::-1], std[::-1])] if symmetrised else [(mean, std)]
    centres = [centre for centre, _ in components for _ in radii]
    half_axes = [radius * scale for _, scale in components for radius in radii]
    return np.array(centres).reshape(-1, 2), np.array(half_axes).reshape(-1, 2)


# ---------------------------------------------------------------------------------------------
# Batched trainer: runs = methods × seeds × α, all in one tensor program
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainingSettings:
    """How a run trains: the model's noise std dev and prior std dev, Adam's learning rate, the initial means
    (``init``: random, N(0, 0.5²) draws seeded by ``seed``, or the origin) and each step's estimate
    (``batch_size`` points, at least N meaning full batch, ``samples`` draws, SGM's I: ``mi`` with InfoNCE's ``K``).
    ``seed`` also seeds the sampling noise of a trainer whose first run this is."""

    noise: float
    prior_scale: float
    lr: float
    batch_size: int
    samples: int
    K: int
    mi: str
    init: str
    seed: int


@dataclass(frozen=True, eq=False)
class RunSpec:
    """One q to train: a method on a data set, from the settings' ``start``-th seeded initialisation. ``tag``: the
    caller's own name for the run (the toy lab's config), carried along untouched."""

    method: str
    data: ToyData
    settings: TrainingSettings
    start: int = 0
    tag: Hashable = None


@dataclass
class History:
    step: list = field(default_factory=list)
    elbo: list = field(default_factory=list)  # ELBO(θ)
    elbo_g: list = field(default_factory=list)  # ELBO(θ) + I(θ) (exact I)
    test_mse: list = field(default_factory=list)


class ToyTrainer:
    """Trains several runs of the tractable BNN at once (Adam is elementwise, so this equals
    separate runs). Each run has its own data, method and settings; batch size, sample count, K,
    estimator and the data's sizes must agree across the runs of one trainer.
    """

    def __init__(self, runs: list[RunSpec]):
        if not runs:
            raise ValueError("a trainer needs at least one run")
        for run in runs:
            if run.method not in METHODS:
                raise ValueError(f"method must be one of {METHODS}, got {run.method!r}")
            if run.settings.mi not in MI_ESTIMATORS or run.settings.init not in INITS:
                raise ValueError(
                    f"mi must be one of {MI_ESTIMATORS} and init one of {INITS}, got "
                    f"{run.settings.mi!r} and {run.settings.init!r}"
                )
        shared = {
            (
                r.settings.samples,
                r.settings.K,
                r.settings.mi,
                r.data.x_train.size,
                r.data.x_test.size,
                min(r.settings.batch_size, r.data.x_train.size),
            )
            for r in runs
        }
        if len(shared) != 1:
            raise ValueError("runs trained together must share samples, K, mi, n_train, n_test and batch_size")
        self.runs = list(runs)
        first = runs[0].settings
        self.samples, self.K, self.mi = first.samples, first.K, first.mi
        self.batch_size = min(first.batch_size, runs[0].data.x_train.size)
        self.data = [r.data for r in runs]
        as_tensor = lambda key: torch.tensor(np.stack([getattr(d, key) for d in self.data]), dtype=torch.float64)
        self.x_train, self.y_train = as_tensor("x_train"), as_tensor("y_train")
        self.x_test, self.y_test = as_tensor("x_test"), as_tensor("y_test")
        column = lambda values: torch.tensor(values, dtype=torch.float64)[:, None]
        self.noise = column([r.settings.noise for r in runs])
        self.prior_scale = column([r.settings.prior_scale for r in runs])
        self.lr = column([r.settings.lr for r in runs])
        self.symmetrised = torch.tensor([r.method == "sgm" for r in runs])
        # The step's arithmetic runs in NumPy on these views (shared memory, no copies): on arrays of a few
        # thousand numbers a NumPy call costs a fraction of a torch call, and that overhead is a step's cost.
        self._noise = self.noise.numpy()[:, :, None]
        self._prior_precision = 1.0 / self.prior_scale.numpy() ** 2
        self._lr = self.lr.numpy()
        self._information_weight = self.symmetrised.numpy()[:, None].astype(np.float64)
        # Sampling noise (ε, mini-batches, InfoNCE draws); reseeded by reset() so a reset replays.
        self.noise_seed = int(first.seed) * 1_000_003 + len(runs)
        self.generator = torch.Generator()
        self.initial = self._initial_parameters()
        self.reset()

    def _initial_parameters(self):
        means, log_stds = [], []
        for run in self.runs:
            g = torch.Generator().manual_seed(run.settings.seed)
            if run.settings.init == "random":  # start r: the last of r + 1 draws, so start 0 is the one-start draw
                means.append(0.5 * torch.randn(run.start + 1, 2, generator=g, dtype=torch.float64)[run.start])
            else:
                means.append(torch.zeros(2, dtype=torch.float64))
            log_stds.append(torch.full((2,), math.log(0.5), dtype=torch.float64))
        return torch.stack(means), torch.stack(log_stds)

    def reset(self) -> None:
        """Back to the same initialisation; the history is cleared."""
        self.theta = torch.cat(self.initial, -1)  # [runs, 4]: the means, then the log std devs
        self.mean, self.log_std = self.theta[:, :2], self.theta[:, 2:]
        self._theta = self.theta.numpy()  # the same memory
        # Adam runs with lr = 1 and each run's update is scaled by its own lr afterwards: the
        # update is lr·m̂/(√v̂ + ε) with state independent of lr, so this is exactly per-run Adam.
        self.optimiser = Adam(self.theta, lr=1.0)
        self.steps_done = 0
        self.history = [History() for _ in self.runs]
        self.diverged = [False] * len(self.runs)
        self.generator.manual_seed(self.noise_seed)
        self.record()

    # -- the objective's gradient, written out -------------------------------------------------

    def _minibatch(self):
        n = self.x_train.shape[1]
        if self.batch_size >= n:
            return self.x_train, self.y_train
        idx = torch.argsort(torch.rand(len(self.runs), n, generator=self.generator), dim=1)[:, : self.batch_size]
        return self.x_train.gather(1, idx), self.y_train.gather(1, idx)

    def gradient(self, x, y, eps) -> torch.Tensor:
        """∂(−objective)/∂(μ, log σ) per run, ``[runs, 4]``, at the reparameterised draws w = μ + σ ⊙ ε
        (``eps[runs, M, 2]``) on the minibatch ``(x, y)``: each run's expected log-likelihood (scaled to the
        full data set) less KL(q ‖ p), plus, for SGM, I(ω; g) (exact or InfoNCE, as :meth:`_information_gradient`
        writes it). Written out, as the tests check against autograd: the arrays are a few thousand
        numbers, so autograd's bookkeeping, not the arithmetic, would be the cost."""
        return torch.from_numpy(self._gradient(np.asarray(x), np.asarray(y), np.asarray(eps)))

    def _gradient(self, x: np.ndarray, y: np.ndarray, eps: np.ndarray) -> np.ndarray:
        mean, log_std = self._theta[:, :2], self._theta[:, 2:]
        sd = np.exp(log_std)
        w = mean[:, None, :] + sd[:, None, :] * eps  # [runs, M, 2]
        scale = self.x_train.shape[1] / (x.shape[1] * eps.shape[1])  # to the full data, the mean over M
        grad_w = log_likelihood_gradient(w, x[:, None, :], y[:, None, :], self._noise) * scale
        grad_mean = grad_w.sum(1) - mean * self._prior_precision
        grad_log_std = (grad_w * sd[:, None, :] * eps).sum(1) - (sd * sd * self._prior_precision - 1.0)
        information_mean, information_log_std = self._information_gradient(w, eps, mean, sd)
        return -np.concatenate([grad_mean + information_mean, grad_log_std + information_log_std], -1)

    def _information_gradient(self, w, eps, mean, sd):
        """∂I/∂(μ, log σ) per run (0 for MFVI's runs), I = mean_M of log 2 − softplus(d) (exact) or of
        log K − log(1 + i + s·e^d) (InfoNCE: i identities, s swaps among the K − 1 draws), with
        d = log q(swap w) − log q(w) = ½Σ_j ε_j² − ½Σ_j z'_j², z'_j = (w_{swap j} − μ_j)/σ_j."""
        z_swapped = (w[..., ::-1] - mean[:, None, :]) / sd[:, None, :]  # z'_j
        d = 0.5 * (eps * eps).sum(-1) - 0.5 * (z_swapped * z_swapped).sum(-1)
        if self.mi == "exact":
            d_weight = -expit(d)
        else:
            swaps = (
                torch.bernoulli(torch.full((*d.shape, self.K - 1), 0.5, dtype=torch.float64), generator=self.generator)
                .sum(-1)
                .numpy()
            )
            with np.errstate(divide="ignore"):  # log 0 = −∞ without swaps: the weight is then 0
                d_weight = -expit(np.log(swaps) + d - np.log1p((self.K - 1) - swaps))
        d_weight = d_weight * (self._information_weight / eps.shape[1])  # ∂I/∂d per draw: the mean over M, SGM only
        # ∂d/∂μ_j = z'_j/σ_j − z'_k/σ_k (k the other unit); ∂d/∂log σ_j = z'_j² − z'_k σ_j ε_j/σ_k.
        ratio = z_swapped / sd[:, None, :]
        weight = d_weight[..., None]
        grad_mean = ((ratio - ratio[..., ::-1]) * weight).sum(1)
        grad_log_std = (
            (z_swapped * z_swapped - z_swapped[..., ::-1] * (sd[:, None, :] * eps) / sd[:, None, ::-1]) * weight
        ).sum(1)
        return grad_mean, grad_log_std

    @torch.inference_mode()  # no autograd bookkeeping: a fifth of a step's time
    def step(self, count: int = 1) -> None:
        """``count`` Adam steps on every run (mini-batches drawn without replacement per step)."""
        # A diverging run overflows: it is frozen at NaN, on its own (_freeze_diverged), and says so in its result.
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            self._steps(int(count))

    def _steps(self, count: int) -> None:
        for _ in range(count):
            x, y = self._minibatch()
            eps = torch.randn(len(self.runs), self.samples, 2, dtype=torch.float64, generator=self.generator)
            grad = self._gradient(x.numpy(), y.numpy(), eps.numpy())
            before = self._theta.copy()
            self.optimiser.step(torch.from_numpy(grad))
            self._theta[...] = before + (self._theta - before) * self._lr  # each run's own learning rate
            self._freeze_diverged()
            self.steps_done += 1

    def train_to(self, steps: int, chunk: int, progress=None) -> None:
        """Train until ``steps`` Adam steps are done, recording after every ``chunk`` steps, and call
        ``progress(done, steps)`` after each chunk; past ``steps`` already, start again from the
        initialisation (a replay: the same path)."""
        if self.steps_done > steps:
            self.reset()
        while self.steps_done < steps:
            self.step(min(chunk, steps - self.steps_done))
            self.record()
            if progress is not None:
                progress(self.steps_done, steps)

    def _freeze_diverged(self):
        bad = ~np.isfinite(self._theta).all(-1)
        if bad.any():
            for i in np.flatnonzero(bad).tolist():
                self.diverged[i] = True
            self._theta[bad] = np.nan

    # -- evaluation --------------------------------------------------------------------------

    @torch.inference_mode()
    def evaluate(self, information_points: int = INFORMATION_POINTS) -> dict:
        """Per run, without Monte-Carlo noise: the full-data ELBO (closed form), ELBO + I (I by a fixed
        quasi-Monte-Carlo rule of ``information_points``), the run's own bound ("objective": MFVI's ELBO, SGM's
        ELBO + I) and the exact predictive mean's test MSE. Noise-free values let a start be chosen by its bound
        without a winner's curse, and SGM's bound, often within 0.01 nats of log p(D), be compared with it."""
        std = torch.exp(self.log_std)
        predicted, variance = predictive_moments(self.mean, std, self.x_train)
        squared_error = (self.y_train - predicted) ** 2 + variance  # E_q[(y − f_w(x))²]
        expected_log_lik = (-0.5 * squared_error / self.noise**2 - torch.log(self.noise) - 0.5 * _LOG_2PI).sum(-1)
        elbo = expected_log_lik - kl_to_prior(self.mean, self.log_std, self.prior_scale)
        elbo_g = elbo + mutual_information_by_qmc(self.mean, self.log_std, information_points)
        test_mse = ((predictive_moments(self.mean, std, self.x_test)[0] - self.y_test) ** 2).mean(-1)
        return {
            "elbo": elbo.numpy(),
            "elbo_g": elbo_g.numpy(),
            "objective": torch.where(self.symmetrised, elbo_g, elbo).numpy(),
            "test_mse": test_mse.numpy(),
        }

    def record(self) -> None:
        metrics = self.evaluate(TRACE_INFORMATION_POINTS)
        for i, history in enumerate(self.history):
            history.step.append(self.steps_done)
            for key in ("elbo", "elbo_g", "test_mse"):
                getattr(history, key).append(float(metrics[key][i]))

    def latest_bounds(self) -> np.ndarray:
        """Each run's own bound as last recorded (MFVI: ELBO; SGM: ELBO + I), as ``evaluate``'s objective."""
        return own_bounds(self.runs, self.history)

    def parameters(self) -> tuple[np.ndarray, np.ndarray]:
        """Means and std devs, each ``[runs, 2]``."""
        return self.mean.detach().numpy().copy(), np.exp(self.log_std.detach().numpy())

    def predictive(self, x):
        """Mean and std dev (noise included) of y at ``x`` under each run's q (q_G predicts the same), exact."""
        return predictive_with_noise(*self.parameters(), self.noise[:, 0].numpy(), x)

    def snapshot(self) -> Snapshot:
        """The runs as they are now, apart from the optimiser: what a page draws of them."""
        means, stds = self.parameters()
        histories = tuple(History(*(list(getattr(h, k)) for k in HISTORY_FIELDS)) for h in self.history)
        noise = self.noise[:, 0].numpy().copy()
        return Snapshot(tuple(self.runs), means, stds, noise, histories, tuple(self.diverged), self.steps_done)


HISTORY_FIELDS = ("step", "elbo", "elbo_g", "test_mse")


def own_bounds(runs, history) -> np.ndarray:
    """Each run's own bound as last recorded in its ``history`` (MFVI: ELBO; SGM: ELBO + I)."""
    return np.array([h.elbo_g[-1] if run.method == "sgm" else h.elbo[-1] for run, h in zip(runs, history)])


@torch.inference_mode()
def predictive_with_noise(means, stds, noise, x):
    """Mean and std dev of y at ``x`` under each run's q (``means, stds [runs, 2]``, ``noise [runs]``), exact:
    ``[runs, len(x)]`` each."""
    x = torch.as_tensor(np.asarray(x, dtype=np.float64))[None, :]
    mean, variance = predictive_moments(torch.as_tensor(means), torch.as_tensor(stds), x)
    return mean.numpy(), torch.sqrt(variance + torch.as_tensor(noise)[:, None] ** 2).numpy()


@dataclass(frozen=True, eq=False)
class Snapshot:
    """Runs at one point of their training, without the optimiser: what a page draws of them, with the same
    reading methods as :class:`ToyTrainer`'s."""

    runs: tuple[RunSpec, ...]
    means: np.ndarray  # [runs, 2]
    stds: np.ndarray  # [runs, 2]
    noise: np.ndarray  # [runs]
    history: tuple[History, ...]  # recorded up to here
    diverged: tuple[bool, ...]
    steps_done: int

    def latest_bounds(self) -> np.ndarray:
        return own_bounds(self.runs, self.history)

    def parameters(self) -> tuple[np.ndarray, np.ndarray]:
        return self.means, self.stds

    def predictive(self, x):
        return predictive_with_noise(self.means, self.stds, self.noise, x)


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Training recorded frame by frame (a frame a record, :meth:`ToyTrainer.train_to`'s chunks): a whole live
    run, computed once and played back. Frame k's history is the first k + 1 records of the last frame's."""

    runs: tuple[RunSpec, ...]
    noise: np.ndarray  # [runs]
    means: np.ndarray  # [frames, runs, 2]
    stds: np.ndarray  # [frames, runs, 2]
    diverged: np.ndarray  # [frames, runs]
    history: tuple[History, ...]  # the last frame's

    def __len__(self) -> int:
        return len(self.means)

    def frame(self, k: int) -> Snapshot:
        if not 0 <= k < len(self):
            raise IndexError(f"frame {k} of a trajectory of {len(self)}")
        histories = tuple(History(*(getattr(h, name)[: k + 1] for name in HISTORY_FIELDS)) for h in self.history)
        steps = histories[0].step[-1]
        return Snapshot(
            self.runs, self.means[k], self.stds[k], self.noise, histories, tuple(self.diverged[k].tolist()), steps
        )


def record_trajectory(trainer: ToyTrainer, frames: int, steps_per_frame: int, progress=None) -> Trajectory:
    """Train from ``trainer``'s start, ``steps_per_frame`` Adam steps a frame, for ``frames`` frames (frame 0:
    the start), or until every run has diverged; ``progress(done, frames)`` after each frame."""
    if frames < 1 or steps_per_frame < 1:
        raise ValueError(f"a trajectory needs frames >= 1 and steps_per_frame >= 1, got {frames}, {steps_per_frame}")
    trainer.reset()
    means, stds, diverged = [], [], []

    def keep() -> None:
        mean, std = trainer.parameters()
        means.append(mean)
        stds.append(std)
        diverged.append(list(trainer.diverged))

    keep()
    while len(means) < frames and not all(trainer.diverged):
        trainer.train_to(trainer.steps_done + steps_per_frame, steps_per_frame)
        keep()
        if progress is not None:
            progress(len(means), frames)
    final = trainer.snapshot()
    return Trajectory(
        final.runs, final.noise, np.stack(means), np.stack(stds), np.array(diverged, dtype=bool), final.history
    )


def train_runs(runs: list[RunSpec], steps: int, chunk: int = 100, progress=None) -> ToyTrainer:
    """Train ``runs`` together for ``steps`` Adam steps; ``progress(done, steps)`` after each chunk."""
    if int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    trainer = ToyTrainer(runs)
    trainer.train_to(steps, chunk, progress)
    return trainer
