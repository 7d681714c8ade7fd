"""Reverse-KL fit of one Gaussian to a two-component mixture (Gelberg et al. §3; docs/science.md, § Reverse KL between two modes).

Target ``p_α(x) = ½ N(x; 0, σ²I) + ½ N(x; α e₁, σ²I)`` and unimodal ``q = N(μ, Σ)``, fitted by
minimising ``KL(q || p_α)`` from the first component (μ = 0, Σ = σ²I).

Two facts make an exact, fast path possible:
- Orthogonal to e₁ the target is one Gaussian N(0, σ²), so q fits it exactly there and the
  problem is 1-D (the KL of the other coordinates is zero).
- Substituting x = σz makes it scale-invariant: μ*/σ and Σ*/σ² depend only on a = α/σ.

So the exact path solves a 2-parameter problem (mean m, log-std ℓ in units of σ) with
quadrature and a damped Newton method, for all α at once. The paper's own
Monte-Carlo protocol (any d, diagonal or full covariance, Adam) is in :func:`fit_monte_carlo`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from symlab.specs.results import to_json
from symlab.specs.surfaces import Line, Surface

from .config import COVARIANCES, SweepConfig

LN2 = math.log(2.0)
_LOG_2PI = math.log(2.0 * math.pi)
# E_{ε~N(0,1)}[f(m + sε)] by the trapezoidal rule on a uniform ε grid. log p_α is analytic but
# its softplus has poles π/(a s) from the real axis, so Gauss–Hermite converges slowly (48 nodes:
# errors ~1e-4); the trapezoidal rule converges like exp(−2π·(π/(a s))/h), below 1e-10 wherever
# the softplus' transition lies inside q's bulk (see tests/test_modes.py).
_QUAD_STEP = 0.05
_EPS = np.arange(-8.5, 8.5 + _QUAD_STEP / 2, _QUAD_STEP)
_EPS_WEIGHTS = _QUAD_STEP * np.exp(-0.5 * _EPS**2) / math.sqrt(2.0 * math.pi)

# α⁻¹‖μ*‖ is 0.5 when q sits at the midpoint and ~0 when it sits on one mode; the
# threshold α* is where the curve crosses halfway.
INTERPOLATION_CUTOFF = 0.25


def check_sigma(sigma: float) -> float:
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    return sigma


def check_alphas(alphas) -> np.ndarray:
    alphas = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
    if alphas.ndim != 1 or alphas.size == 0:
        raise ValueError("alphas must be a non-empty 1-D sequence")
    if not np.all(np.isfinite(alphas)) or np.any(alphas < 0):
        raise ValueError("every alpha must be a finite number >= 0")
    return alphas


def check_dim(dim: int) -> int:
    if int(dim) != dim or dim < 1:
        raise ValueError(f"dim must be an integer >= 1, got {dim!r}")
    return int(dim)


def alpha_grid(alpha_max: float, points: int) -> np.ndarray:
    """The sweep grid ``linspace(0, alpha_max, points)`` of the paper's protocol."""
    if not (math.isfinite(alpha_max) and alpha_max > 0):
        raise ValueError(f"alpha_max must be a finite number > 0, got {alpha_max!r}")
    if int(points) != points or points < 2:
        raise ValueError(f"points must be an integer >= 2, got {points!r}")
    return np.linspace(0.0, alpha_max, int(points))


def sweep_alphas(config: SweepConfig) -> np.ndarray:
    """The α grid of ``config``'s sweep."""
    return alpha_grid(config.largest_alpha, config.points)


# ---------------------------------------------------------------------------------------------
# Densities (for drawing)
# ---------------------------------------------------------------------------------------------


def log_normal(x, mean, std):
    x = np.asarray(x, dtype=np.float64)
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * _LOG_2PI


def log_mixture(x, alpha: float, sigma: float):
    """log p_α along e₁ (1-D marginal), stable through logaddexp."""
    return np.logaddexp(log_normal(x, 0.0, sigma), log_normal(x, alpha, sigma)) - LN2


def log_mixture_2d(x1, x2, alpha: float, sigma: float):
    """log p_α on the plane spanned by e₁ and a second axis."""
    return log_mixture(x1, alpha, sigma) + log_normal(x2, 0.0, sigma)


# ---------------------------------------------------------------------------------------------
# The exact 1-D objective in standardised units (σ = 1, a = α/σ)
# ---------------------------------------------------------------------------------------------


def _log_mixture_parts(z, a):
    """log p of ½N(0,1) + ½N(a,1) at z, and r, the second component's responsibility.

    log p = −z²/2 + softplus(t) + const with t = a z − a²/2, and r = sigmoid(t); both from one
    exp(−|t|), so nothing overflows.
    """
    t = a * z - 0.5 * a * a
    e = np.exp(-np.abs(t))
    log_p = -0.5 * z * z + np.maximum(t, 0.0) + np.log1p(e) - LN2 - 0.5 * _LOG_2PI
    r = np.where(t >= 0, 1.0, e) / (1.0 + e)
    return log_p, r


def _standard_log_mixture(z, a):
    return _log_mixture_parts(z, a)[0]


def standard_reverse_kl(m, log_s, a):
    """KL(N(m, e^{2ℓ}) || ½N(0,1) + ½N(a,1)) by quadrature (broadcasts)."""
    m, log_s, a = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (m, log_s, a)))
    z = m[..., None] + np.exp(log_s)[..., None] * _EPS
    expected_log_p = _standard_log_mixture(z, a[..., None]) @ _EPS_WEIGHTS
    entropy = 0.5 * (_LOG_2PI + 1.0) + log_s
    return -entropy - expected_log_p


def _kl_grad_hess(m, log_s, a):
    """Value, gradient and Hessian of :func:`standard_reverse_kl` in (m, ℓ), for 1-D arrays.

    With z = m + e^ℓ ε, g = d log p / dz = −(z − r a) and g' = −1 + a² r (1 − r).
    """
    s = np.exp(log_s)[:, None]
    a_col = a[:, None]
    z = m[:, None] + s * _EPS
    log_p, r = _log_mixture_parts(z, a_col)
    g = r * a_col - z
    dg = a_col**2 * r * (1.0 - r) - 1.0
    w = _EPS_WEIGHTS
    s_eps = s * _EPS
    kl = -(0.5 * (_LOG_2PI + 1.0) + log_s) - log_p @ w
    g_se = (g * s_eps) @ w
    grad = np.stack([-(g @ w), -1.0 - g_se], axis=-1)
    dg_se = dg * s_eps
    h_mm = -(dg @ w)
    h_ml = -(dg_se @ w)
    h_ll = -((dg_se * s_eps) @ w) - g_se
    hess = np.stack([np.stack([h_mm, h_ml], -1), np.stack([h_ml, h_ll], -1)], -2)
    return kl, grad, hess


def _newton_from_first_component(a: np.ndarray, max_step=0.25, tol=1e-10, max_iter=200):
    """Minimise the standardised KL for every a at once, from (m, ℓ) = (0, 0).

    A damped Newton method: the Hessian is shifted to be positive definite, steps are capped at
    ``max_step`` (so the iterate follows the descent path from the start instead of jumping
    into another basin), and a step is halved until the KL decreases. Converged problems drop
    out of the batch.
    """
    x = np.zeros((a.size, 2))
    kl, grad, hess = _kl_grad_hess(x[:, 0], x[:, 1], a)
    stalled = np.zeros(a.size, dtype=bool)  # no decrease left at float precision: converged
    for _ in range(max_iter):
        todo = np.nonzero((np.linalg.norm(grad, axis=-1) > tol) & ~stalled)[0]
        if todo.size == 0:
            break
        h = hess[todo]
        min_eig = np.linalg.eigvalsh(h)[:, 0]
        shift = np.where(min_eig < 1e-6, 1e-6 - min_eig, 0.0)
        step = -np.linalg.solve(h + shift[:, None, None] * np.eye(2), grad[todo][..., None])[..., 0]
        norm = np.linalg.norm(step, axis=-1, keepdims=True)
        step *= np.minimum(1.0, max_step / np.maximum(norm, 1e-300))
        for _ in range(30):
            trial = x[todo] + step
            t_kl, t_grad, t_hess = _kl_grad_hess(trial[:, 0], trial[:, 1], a[todo])
            better = t_kl <= kl[todo] + 1e-15
            done = todo[better]
            x[done], kl[done], grad[done], hess[done] = trial[better], t_kl[better], t_grad[better], t_hess[better]
            todo, step = todo[~better], 0.5 * step[~better]
            if todo.size == 0:
                break
        stalled[todo] = True
    return x, kl


# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModeSweep:
    """Optimal q for each α of a sweep. Arrays are indexed like ``alphas``.

    ``mean`` is ‖μ*‖ (the e₁ component for the exact path), ``std_e1`` the std dev of q along
    e₁, ``det_cov`` det Σ* in ``dim`` dimensions, ``kl`` the final KL(q || p_α), and
    ``interpolation`` α⁻¹‖μ*‖ (NaN at α = 0, where it is undefined).
    """

    sigma: float
    dim: int
    protocol: str
    alphas: np.ndarray
    mean: np.ndarray
    std_e1: np.ndarray
    det_cov: np.ndarray
    kl: np.ndarray

    @property
    def interpolation(self) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.alphas > 0, self.mean / np.where(self.alphas > 0, self.alphas, 1.0), np.nan)

    def threshold(self) -> float | None:
        """α where the interpolation curve first falls below the cutoff (linear interpolation)."""
        return crossing_point(self.alphas, self.interpolation, INTERPOLATION_CUTOFF)


def crossing_point(alphas, interpolation, cutoff=INTERPOLATION_CUTOFF) -> float | None:
    valid = np.isfinite(interpolation)
    xs, ys = np.asarray(alphas)[valid], np.asarray(interpolation)[valid]
    below = np.nonzero(ys < cutoff)[0]
    if below.size == 0 or below[0] == 0:
        return None
    i = below[0]
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return float(x0 + (y0 - cutoff) * (x1 - x0) / (y0 - y1))


def _sweep_from_standard(alphas, sigma, dim, m, log_s, kl, protocol="exact") -> ModeSweep:
    std_e1 = sigma * np.exp(log_s)
    det_cov = std_e1**2 * sigma ** (2 * (dim - 1))
    return ModeSweep(sigma, dim, protocol, alphas, np.abs(sigma * m), std_e1, det_cov, kl)


def fit_exact(alphas, sigma: float, dim: int = 2) -> ModeSweep:
    """Noise-free reverse-KL optimum reached from the first component, for every α."""
    sigma, dim, alphas = check_sigma(sigma), check_dim(dim), check_alphas(alphas)
    x, kl = _newton_from_first_component(alphas / sigma)
    return _sweep_from_standard(alphas, sigma, dim, x[:, 0], x[:, 1], kl)


def exact_threshold(sigma: float, alpha_max: float = 10.0, points: int = 100, tol: float = 1e-4) -> float | None:
    """α*(σ): bracketed by a sweep, then refined by bisection on the exact path.

    The exact solver is cheap, so the bracket between the last mean-seeking and the first
    mode-seeking grid point is narrowed with a batched grid search to ``tol`` relative width.
    """
    sigma = check_sigma(sigma)
    sweep = fit_exact(alpha_grid(alpha_max, points), sigma)
    rough = sweep.threshold()
    if rough is None:
        return None
    interp = sweep.interpolation
    i = int(np.nonzero(np.isfinite(interp) & (interp < INTERPOLATION_CUTOFF))[0][0])
    lo, hi = sweep.alphas[i - 1], sweep.alphas[i]
    while hi - lo > tol * hi:
        grid = np.linspace(lo, hi, 33)
        inner = fit_exact(grid, sigma).interpolation
        j = int(np.nonzero(inner < INTERPOLATION_CUTOFF)[0][0])
        lo, hi = grid[j - 1], grid[j]
    return float(0.5 * (lo + hi))


def forward_kl_optimum(alphas, sigma: float, dim: int = 2) -> ModeSweep:
    """Closed-form argmin of KL(p_α || q): moment matching, μ = α e₁/2, Σ = σ²I + (α²/4) e₁e₁ᵀ.

    The reported KL is KL(p_α || q*) = E_p[log p_α] + ½ log(2πe(1 + a²/4)) in σ units (the
    other coordinates match exactly).
    """
    sigma, dim, alphas = check_sigma(sigma), check_dim(dim), check_alphas(alphas)
    a = alphas / sigma
    var_e1 = 1.0 + a**2 / 4.0
    # E_p[log p] = ½ E_{N(0,1)}[log p] + ½ E_{N(a,1)}[log p]; the two halves are equal by symmetry.
    neg_entropy = _standard_log_mixture(_EPS[None, :], a[:, None]) @ _EPS_WEIGHTS
    kl = neg_entropy + 0.5 * (_LOG_2PI + 1.0 + np.log(var_e1))
    return _sweep_from_standard(alphas, sigma, dim, a / 2.0, 0.5 * np.log(var_e1), kl, "forward")


# ---------------------------------------------------------------------------------------------
# "Watch it optimise": Adam on the deterministic objective
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OptimisationPath:
    """Adam iterates of q from the first component; ``mean`` and ``std`` along e₁."""

    alpha: float
    sigma: float
    mean: np.ndarray
    std: np.ndarray
    kl: np.ndarray

    def __len__(self) -> int:
        return self.mean.size


# Moments of the quadrature's weights, for the parts of the hot loop's sums that are polynomials in ε.
_W0, _W1, _W2 = (float(_EPS_WEIGHTS @ _EPS**k) for k in range(3))
_EPS_WEIGHTED = _EPS_WEIGHTS * _EPS


def _standard_kl_and_grad(m: float, log_s: float, a: float):
    """Value and (m, ℓ)-gradient of :func:`standard_reverse_kl` at one point (the hot loop below).

    With z = m + sε, log p(z) = −z²/2 + softplus(t) − ln 2 − ½ ln 2π, t = az − a²/2, and ∂log p/∂z = a·sigmoid(t) − z:
    the polynomial parts' sums are the weights' moments, so only softplus(t) and sigmoid(t) are summed node by
    node (a third of the array operations of summing each term)."""
    s = math.exp(log_s)
    t = (a * s) * _EPS + (a * m - 0.5 * a * a)
    softplus = np.logaddexp(0.0, t)
    softplus_sum = float(softplus @ _EPS_WEIGHTS)
    sigmoid = np.exp(t - softplus)  # sigmoid(t) = exp(−softplus(−t)), stable at both ends
    square_sum = m * m * _W0 + 2.0 * m * s * _W1 + s * s * _W2
    log_p_sum = -0.5 * square_sum + softplus_sum - (LN2 + 0.5 * _LOG_2PI) * _W0
    kl = -(0.5 * (_LOG_2PI + 1.0) + log_s) - log_p_sum
    grad_m = -(a * float(sigmoid @ _EPS_WEIGHTS) - (m * _W0 + s * _W1))
    grad_l = -1.0 - s * (a * float(sigmoid @ _EPS_WEIGHTED) - (m * _W1 + s * _W2))
    return kl, grad_m, grad_l


def optimisation_path(alpha: float, sigma: float, steps: int = 1000, lr: float = 1e-2) -> OptimisationPath:
    """Adam (β = 0.9, 0.999) on (μ, log s) with the exact quadrature gradient, as in the paper.

    Adam runs in the original units (lr is a distance in x). Returns ``steps + 1`` iterates,
    the start included.
    """
    sigma = check_sigma(sigma)
    alpha = float(check_alphas([alpha])[0])
    a, log_sigma = alpha / sigma, math.log(sigma)
    mean, log_std = 0.0, log_sigma
    first_m = first_l = second_m = second_l = 0.0  # Adam's moments of the two coordinates: scalars, not arrays
    means, stds, kls = np.empty(steps + 1), np.empty(steps + 1), np.empty(steps + 1)
    for k in range(steps + 1):
        kl, grad_m, grad_l = _standard_kl_and_grad(mean / sigma, log_std - log_sigma, a)
        means[k], stds[k], kls[k] = mean, math.exp(log_std), kl
        if k == steps:
            break
        grad_m /= sigma
        first_m, first_l = 0.9 * first_m + 0.1 * grad_m, 0.9 * first_l + 0.1 * grad_l
        second_m, second_l = 0.999 * second_m + 0.001 * grad_m * grad_m, 0.999 * second_l + 0.001 * grad_l * grad_l
        t = k + 1
        first_scale, second_scale = 1 - 0.9**t, 1 - 0.999**t
        mean -= lr * (first_m / first_scale) / (math.sqrt(second_m / second_scale) + 1e-8)
        log_std -= lr * (first_l / first_scale) / (math.sqrt(second_l / second_scale) + 1e-8)
    return OptimisationPath(alpha, sigma, means, stds, kls)


# ---------------------------------------------------------------------------------------------
# The landscape: the objective over (μ, log s), with Adam's path on it (the 3-D view, --surface)
# ---------------------------------------------------------------------------------------------

SURFACE_POINTS = 41  # per side: within the cost of the page's first chart (benchmarks/bench_surfaces.py)
KL_FLOOR = 1e-4  # nats: the log axis's floor (at α = 0 q fits p exactly, KL = 0)


def kl_landscape(alpha: float, sigma: float, points: int = SURFACE_POINTS) -> Surface:
    """KL(q‖p_α) along e₁ over q's mean μ and log standard deviation log s (the other coordinates are fitted
    exactly and add nothing), by the same quadrature as the fits: from 1.5σ beyond each component in μ, and in
    log s from log σ − 1 to 0.3 above the forward-KL width √(σ² + α²/4), where q straddles both modes. Drawn on a
    log axis: the valleys' floors (ln 2 at a mode far from the other) and their walls (tens of nats) at once."""
    sigma = check_sigma(sigma)
    alpha = float(check_alphas([alpha])[0])
    mu = np.linspace(-1.5 * sigma, alpha + 1.5 * sigma, points)
    log_s = np.linspace(math.log(sigma) - 1.0, 0.5 * math.log(sigma**2 + alpha**2 / 4) + 0.3, points)
    kl = standard_reverse_kl(mu[None, :] / sigma, log_s[:, None] - math.log(sigma), alpha / sigma)
    return Surface(mu, log_s, kl, "mean μ", "log s", "KL (nats)", z_floor=KL_FLOOR, z_scale="log")


def optimum_from_start(alpha: float, sigma: float) -> tuple[float, float, float]:
    """The exact optimum reached from q's start at α: its mean, its standard deviation along e₁ and its KL."""
    fit = fit_exact([alpha], sigma)
    return float(fit.mean[0]), float(fit.std_e1[0]), float(fit.kl[0])


def path_lines(path: OptimisationPath, step: int, optimum: tuple[float, float, float], stride: int = 1) -> list[Line]:
    """Adam's path on the landscape up to ``step`` (label ``path``; every ``stride``-th step, and ``step``), q
    at ``step`` (``now``) and ``optimum`` (:func:`optimum_from_start`; ``optimum``), each at its own KL."""
    upto = np.unique(np.r_[np.arange(0, step + 1, stride), step])
    log_std = np.log(path.std)
    mean, std, kl = optimum
    return [
        Line("path", path.mean[upto], log_std[upto], path.kl[upto]),
        Line("now", path.mean[step : step + 1], log_std[step : step + 1], path.kl[step : step + 1]),
        Line("optimum", np.array([mean]), np.array([math.log(std)]), np.array([kl])),
    ]


def landscape_report(alpha: float, sigma: float) -> dict:
    """The landscape at α with Adam's whole path and the optimum on it, as the command line's ``--surface``
    writes it (:func:`symlab.specs.surfaces.to_json`)."""
    path = optimisation_path(alpha, sigma)
    surface = kl_landscape(alpha, sigma)
    lines = path_lines(path, len(path) - 1, optimum_from_start(alpha, sigma))
    return to_json(dataclasses.replace(surface, lines=tuple(lines)))


# ---------------------------------------------------------------------------------------------
# The paper's Monte-Carlo protocol
# ---------------------------------------------------------------------------------------------


def fit_monte_carlo(
    alphas,
    sigma: float,
    dim: int = 2,
    covariance: str = "diag",
    samples: int = 5000,
    steps: int = 1000,
    lr: float = 1e-2,
    seed: int = 0,
    device: str = "cpu",
    progress=None,
) -> ModeSweep:
    """Reparameterised Monte-Carlo KL minimised with Adam (Gelberg et al.'s protocol).

    All α are optimised together as one batch of independent problems (Adam is elementwise, so
    this equals separate runs). ``covariance`` is ``"diag"`` (log std devs) or ``"full"``
    (Cholesky factor with log diagonal). The final KL is a fresh ``samples``-sample estimate.
    ``progress(step, steps)`` is called every 50 steps if given.
    """
    import torch

    sigma, dim, alphas = check_sigma(sigma), check_dim(dim), check_alphas(alphas)
    if covariance not in COVARIANCES:
        raise ValueError(f"covariance must be 'diag' or 'full', got {covariance!r}")
    for name, value in (("samples", samples), ("steps", steps)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")

    generator = torch.Generator(device=device).manual_seed(int(seed))
    dtype = torch.float64
    n = alphas.size
    alpha_col = torch.as_tensor(alphas, dtype=dtype, device=device)[:, None]
    mean = torch.zeros(n, dim, dtype=dtype, device=device, requires_grad=True)
    log_diag = torch.full((n, dim), math.log(sigma), dtype=dtype, device=device, requires_grad=True)
    off_diag = torch.zeros(n, dim, dim, dtype=dtype, device=device, requires_grad=covariance == "full")
    params = [mean, log_diag] + ([off_diag] if covariance == "full" else [])
    optimiser = torch.optim.Adam(params, lr=lr)

    def scale_tril():
        return torch.tril(off_diag, -1) + torch.diag_embed(log_diag.exp())

    def kl_estimate():
        eps = torch.randn(n, int(samples), dim, dtype=dtype, device=device, generator=generator)
        x = mean[:, None, :] + eps @ scale_tril().transpose(-1, -2)
        log_q = -0.5 * (eps**2).sum(-1) - log_diag.sum(-1, keepdim=True) - 0.5 * dim * _LOG_2PI
        # ‖x − α e₁‖² = ‖x‖² − 2α x₁ + α²: both components from one squared norm.
        sq_first = (x**2).sum(-1)
        sq_second = sq_first - 2.0 * alpha_col * x[..., 0] + alpha_col**2
        log_p = (
            torch.logaddexp(-0.5 * sq_first / sigma**2, -0.5 * sq_second / sigma**2)
            - LN2
            - dim * math.log(sigma)
            - 0.5 * dim * _LOG_2PI
        )
        return (log_q - log_p).mean(-1)

    for step in range(int(steps)):
        optimiser.zero_grad(set_to_none=True)
        kl_estimate().sum().backward()
        optimiser.step()
        if progress is not None and (step + 1) % 50 == 0:
            progress(step + 1, int(steps))

    with torch.no_grad():
        final_kl = kl_estimate().cpu().numpy()
        tril = scale_tril()
        cov = tril @ tril.transpose(-1, -2)
        det_cov = torch.linalg.det(cov).cpu().numpy()
        norm_mean = mean.norm(dim=-1).cpu().numpy()
        std_e1 = cov[:, 0, 0].sqrt().cpu().numpy()
    return ModeSweep(sigma, dim, f"mc-{covariance}", alphas, norm_mean, std_e1, det_cov, final_kl)


# ---------------------------------------------------------------------------------------------
# The headless twin's one entry point
# ---------------------------------------------------------------------------------------------


def sweep_report(config: SweepConfig, progress=None) -> dict:
    """Everything the ``modes`` lab reports for one σ, as plain JSON-ready values; ``progress(step, steps)``
    follows the Monte-Carlo protocol's Adam steps."""
    config.validate()
    alphas, sigma, dim = sweep_alphas(config), config.sigma, config.dim
    if config.protocol == "exact":
        sweep = fit_exact(alphas, sigma, dim)
        threshold = exact_threshold(sigma, config.largest_alpha, config.points)
    else:
        sweep = fit_monte_carlo(alphas, sigma, dim, progress=progress, **config.mc_options())
        threshold = sweep.threshold()
    forward = forward_kl_optimum(alphas, sigma, dim)
    return to_json(
        {
            "sigma": sweep.sigma,
            "dim": sweep.dim,
            "protocol": sweep.protocol,
            "alphas": sweep.alphas,
            "interpolation": sweep.interpolation,
            "det_cov": sweep.det_cov,
            "kl": sweep.kl,
            "std_e1": sweep.std_e1,
            "threshold": threshold,
            "threshold_over_sigma": None if threshold is None else threshold / sweep.sigma,
            "forward_kl": {"det_cov": forward.det_cov, "kl": forward.kl},
            "options": config.mc_options() if config.protocol == "mc" else {},
        }
    )
