"""The full-Hessian Laplace approximation of a network's posterior around a MAP point (Laurent et al.
2024, §4 and App. B.1: "full Hessian Laplace" on MNIST; MacKay 1992; Ritter et al. 2018).

With the negative log posterior U(w) = L(w) + ½δ‖w‖², L(w) = Σᵢ ℓ(f(w, xᵢ), yᵢ) summed over the whole
training set and δ = 1/σ²_prior the prior precision, the posterior is approximated by
N(w*, (H + δI)⁻¹), H the curvature of L at the MAP w*: either its exact Hessian ∇²L(w*), or the
generalised Gauss–Newton matrix G = Σᵢ Jᵢᵀ Λᵢ Jᵢ (Jᵢ = ∂f(w*, xᵢ)/∂w, Λᵢ = ∇²_f ℓ), which drops the
term Σᵢ Σ_c ∂ℓ/∂f_c ∇²f_c and is positive semi-definite whenever ℓ is convex in the logits.

The curvature is computed in float64, chunk by chunk over the data (memory stays bounded), and
eigendecomposed once: H = V diag(h) Vᵀ. With the eigendecomposition, any δ costs O(P) more: the
covariance V diag(1/(h + δ)) Vᵀ, the samples w* + V diag((h + δ)^-½) z, and the Laplace evidence
(MacKay 1992; Immer et al. 2021), maximised over δ when asked.

The exact Hessian is often indefinite even at a converged MAP: only ∇²U = H + δI has to be positive
semi-definite there. Its negative eigenvalues belong to the posterior's curvature and are kept, as
laplace-torch keeps them. Where H + δI is not positive definite (a point that is not a minimum of U, a
ReLU network's MAP on its kinks) no Gaussian has that curvature and the fit refuses. With negative
eigenvalues the evidence also has no maximum over δ: log Z(δ) grows without bound as δ ↓ −min h, so
fitting δ needs the GGN (the default: positive semi-definite up to round-off).

A network is a pure function of a flat parameter vector, ``logits_fn(flat[P], x[n, ...]) -> [n, C]``,
differentiable under torch.func; it is called here with float64 parameters and inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from scipy.optimize import minimize_scalar

LogitsFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

CURVATURES = ("ggn", "exact")
PRIOR_PRECISION_BOUNDS = (1e-6, 1e6)  # the interval searched when δ is fitted
_NEGATIVE_TOLERANCE = 1e-8  # an eigenvalue below −tol·max|h| counts as negative curvature, not round-off


def cross_entropy_sum(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """ℓ summed over a batch: −Σᵢ log softmax(fᵢ)[yᵢ] (through log_softmax, stable)."""
    return F.cross_entropy(logits, labels, reduction="sum")


def _float64(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to(torch.float64) if tensor.is_floating_point() else tensor


def _chunks(x: torch.Tensor, y: torch.Tensor, chunk_size: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    for start in range(0, len(x), chunk_size):
        yield _float64(x[start : start + chunk_size]), _float64(y[start : start + chunk_size])


def _check_data(flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, chunk_size: int) -> None:
    if flat.ndim != 1 or not flat.is_floating_point():
        raise ValueError(f"the parameters must be one flat floating-point vector, not shape {tuple(flat.shape)}")
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(f"x and y must hold the same positive number of examples: {len(x)} and {len(y)}")
    if int(chunk_size) != chunk_size or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, not {chunk_size}")


def _check_prior_precision(prior_precision: float) -> None:
    if not (math.isfinite(prior_precision) and prior_precision > 0):
        raise ValueError(f"the prior precision must be finite and positive, not {prior_precision}")


def negative_log_likelihood(
    logits_fn: LogitsFn,
    flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    loss: Loss = cross_entropy_sum,
    chunk_size: int = 256,
) -> float:
    """L(w) = Σᵢ ℓ(f(w, xᵢ), yᵢ) over the whole data set, in float64, chunk by chunk."""
    _check_data(flat, x, y, chunk_size)
    w = _float64(flat)
    with torch.no_grad():
        return float(sum(loss(logits_fn(w, xc), yc) for xc, yc in _chunks(x, y, chunk_size)))


def negative_log_posterior(
    logits_fn: LogitsFn,
    flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    prior_precision: float,
    loss: Loss = cross_entropy_sum,
    chunk_size: int = 256,
) -> float:
    """U(w) = L(w) + ½δ w·w, δ = 1/σ²_prior (up to the constants of the two normalisers)."""
    _check_prior_precision(prior_precision)
    penalty = 0.5 * prior_precision * float(_float64(flat).square().sum())
    return negative_log_likelihood(logits_fn, flat, x, y, loss=loss, chunk_size=chunk_size) + penalty


def nll_hessian(
    logits_fn: LogitsFn,
    flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    loss: Loss = cross_entropy_sum,
    chunk_size: int = 64,
) -> torch.Tensor:
    """∇²L(w) = Σ_chunks ∇²_w Σ_{i∈chunk} ℓ(f(w, xᵢ), yᵢ), exact (torch.func.hessian: forward over
    reverse), float64 [P, P]. Memory grows as P × chunk_size × one example's activations."""
    _check_data(flat, x, y, chunk_size)
    w = _float64(flat)
    total = torch.zeros(len(w), len(w), dtype=torch.float64, device=w.device)
    for xc, yc in _chunks(x, y, chunk_size):
        total += torch.func.hessian(lambda v: loss(logits_fn(v, xc), yc))(w)
    return total


def output_hessians(logits: torch.Tensor, y: torch.Tensor, loss: Loss = cross_entropy_sum) -> torch.Tensor:
    """Λᵢ = ∇²_f ℓ(fᵢ, yᵢ) for each example, [n, C, C]; for the cross-entropy, diag(pᵢ) − pᵢpᵢᵀ with
    pᵢ = softmax(fᵢ)."""

    def one(f, target):
        return torch.func.hessian(lambda g: loss(g[None], target[None]))(f)

    return torch.func.vmap(one)(logits, y)


def nll_ggn(
    logits_fn: LogitsFn,
    flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    loss: Loss = cross_entropy_sum,
    chunk_size: int = 256,
) -> torch.Tensor:
    """G(w) = Σᵢ Jᵢᵀ Λᵢ Jᵢ, Jᵢ = ∂f(w, xᵢ)/∂w [C, P] (per-example reverse mode, C passes each),
    Λᵢ = ∇²_f ℓ(f(w, xᵢ), yᵢ); float64 [P, P]."""
    _check_data(flat, x, y, chunk_size)
    w = _float64(flat)
    one_logits = torch.func.jacrev(lambda v, xi: logits_fn(v, xi[None])[0])
    total = torch.zeros(len(w), len(w), dtype=torch.float64, device=w.device)
    for xc, yc in _chunks(x, y, chunk_size):
        jacobians = torch.func.vmap(one_logits, in_dims=(None, 0))(w, xc)  # [n, C, P]
        weighted = output_hessians(logits_fn(w, xc), yc, loss) @ jacobians
        total += jacobians.flatten(0, 1).T @ weighted.flatten(0, 1)
    return total


def diagonal_fisher(
    logits_fn: LogitsFn,
    flat: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    loss: Loss = cross_entropy_sum,
    chunk_size: int = 256,
) -> torch.Tensor:
    """The empirical Fisher's diagonal Σᵢ (∂ℓ(f(w, xᵢ), yᵢ)/∂w)², float64 [P], one per-example gradient each:
    P numbers where the GGN holds P², a cheap guess at each weight's curvature (HMC's first mass matrix)."""
    _check_data(flat, x, y, chunk_size)
    w = _float64(flat)
    one_loss = torch.func.grad(lambda v, xi, yi: loss(logits_fn(v, xi[None]), yi[None]))
    total = torch.zeros_like(w)
    for xc, yc in _chunks(x, y, chunk_size):
        total += torch.func.vmap(one_loss, in_dims=(None, 0, 0))(w, xc, yc).square().sum(0)
    return total


def log_marginal_likelihood(nll: float, flat: torch.Tensor, eigenvalues: torch.Tensor, prior_precision: float) -> float:
    """The Laplace evidence for an isotropic prior N(0, δ⁻¹I) (MacKay 1992, eq. 4.7; Immer et al. 2021):
    log Z(δ) = −L(w*) − ½δ‖w*‖² + (P/2) log δ − ½ Σⱼ log(hⱼ + δ), hⱼ the eigenvalues of H.
    The (2π) factors of prior and Laplace normalisers cancel. Exact when the posterior is Gaussian."""
    _check_prior_precision(prior_precision)
    h = eigenvalues.to(torch.float64)
    square_norm = float(_float64(flat).square().sum())
    return (
        -nll
        - 0.5 * prior_precision * square_norm
        + 0.5 * len(h) * math.log(prior_precision)
        - 0.5 * float(torch.log(h + prior_precision).sum())
    )


def negative_eigenvalues(eigenvalues: torch.Tensor) -> torch.Tensor:
    """Which eigenvalues are negative beyond round-off (below −tol·max|h|): the curvature's, not float error's."""
    return eigenvalues < -_NEGATIVE_TOLERANCE * float(eigenvalues.abs().max())


def fit_prior_precision(
    flat: torch.Tensor, eigenvalues: torch.Tensor, bounds: tuple[float, float] = PRIOR_PRECISION_BOUNDS
) -> float:
    """argmax_δ log Z(δ) with w* and H held fixed (post hoc, as laplace-torch does), by a bounded
    Brent search over log δ; L(w*) does not depend on δ. H must be positive semi-definite: with a
    negative eigenvalue h_min, log Z(δ) → +∞ as δ ↓ −h_min and no maximum exists."""
    low, high = bounds
    if not 0 < low < high < math.inf:
        raise ValueError(f"the bounds must satisfy 0 < low < high < inf, not {bounds}")
    lowest = float(eigenvalues.min())
    if bool(negative_eigenvalues(eigenvalues).any()):
        raise IndefiniteCurvature(
            f"Laplace: the prior precision cannot be fitted. The curvature's smallest eigenvalue is {lowest:.4g}, so "
            f"the evidence log Z(δ) grows without bound as δ falls to {-lowest:.4g} and has no maximum. Use the GGN "
            f"(curvature='ggn', positive semi-definite), or give a prior precision above {-lowest:.4g}."
        )
    low = max(low, -2.0 * lowest)  # round-off below zero: keep h + δ > 0 throughout the search
    result = minimize_scalar(
        lambda log_delta: -log_marginal_likelihood(0.0, flat, eigenvalues, math.exp(log_delta)),
        bounds=(math.log(low), math.log(high)),
        method="bounded",
        options={"xatol": 1e-11},
    )
    return math.exp(result.x)


class IndefiniteCurvature(ValueError):
    """No Laplace posterior: H + δI is not positive definite, or the evidence has no maximum over δ."""


def _check_positive_definite(eigenvalues: torch.Tensor, prior_precision: float) -> None:
    lowest = float(eigenvalues.min())
    if lowest + prior_precision <= _NEGATIVE_TOLERANCE * max(float(eigenvalues.abs().max()), prior_precision):
        raise IndefiniteCurvature(
            f"Laplace: H + δI is not positive definite here. Its smallest eigenvalue is {lowest + prior_precision:.4g} "
            f"(the curvature's {lowest:.4g}, δ = {prior_precision:.4g}), so no Gaussian has this curvature: the point "
            f"is not a minimum of L + ½δ‖w‖² (or sits on a ReLU's kinks). Use the GGN (curvature='ggn', positive "
            f"semi-definite), or a prior precision above {-lowest:.4g}."
        )


@dataclass(frozen=True)
class LaplacePosterior:
    """N(w*, (H + δI)⁻¹) held as w* and the eigendecomposition H = V diag(h) Vᵀ, all float64; h + δ > 0."""

    mean: torch.Tensor  # w*, [P]
    eigenvalues: torch.Tensor  # h, [P], negative ones kept
    eigenvectors: torch.Tensor  # V, [P, P], columns
    prior_precision: float  # δ
    nll: float  # L(w*)
    negative_curvature: int  # how many eigenvalues of H are negative beyond round-off
    dtype: torch.dtype  # the MAP's dtype: that of the samples

    def precision(self) -> torch.Tensor:
        """H + δI = V diag(h + δ) Vᵀ."""
        return (self.eigenvectors * (self.eigenvalues + self.prior_precision)) @ self.eigenvectors.T

    def covariance(self) -> torch.Tensor:
        """(H + δI)⁻¹ = V diag(1/(h + δ)) Vᵀ."""
        return (self.eigenvectors / (self.eigenvalues + self.prior_precision)) @ self.eigenvectors.T

    def log_marginal_likelihood(self) -> float:
        return log_marginal_likelihood(self.nll, self.mean, self.eigenvalues, self.prior_precision)

    def sample(self, count: int, generator: torch.Generator) -> torch.Tensor:
        """[count, P] draws w = w* + V diag((h + δ)^-½) z, z ~ N(0, I), drawn in float64 from
        ``generator`` and returned in the MAP's dtype."""
        if int(count) != count or count < 1:
            raise ValueError(f"count must be a positive integer, not {count}")
        z = torch.randn(count, len(self.mean), generator=generator, dtype=torch.float64, device=generator.device)
        scaled = z.to(self.mean.device) * torch.rsqrt(self.eigenvalues + self.prior_precision)
        return (self.mean + scaled @ self.eigenvectors.T).to(self.dtype)


def posterior_from_curvature(
    flat_map: torch.Tensor,
    curvature: torch.Tensor,
    prior_precision: float,
    nll: float = 0.0,
    *,
    fit_prior: bool = False,
) -> LaplacePosterior:
    """The Laplace posterior from H = ∇²L(w*) or G, symmetrised and eigendecomposed in float64; δ as given or,
    with ``fit_prior``, argmax_δ log Z(δ). Raises :class:`IndefiniteCurvature` where H + δI is not positive
    definite."""
    _check_prior_precision(prior_precision)
    if not bool(torch.isfinite(curvature).all()):
        raise FloatingPointError("Laplace: the curvature at the MAP point is not finite (the MAP diverged?)")
    h = _float64(curvature)
    eigenvalues, eigenvectors = torch.linalg.eigh(0.5 * (h + h.T))
    mean = _float64(flat_map)
    if fit_prior:
        prior_precision = fit_prior_precision(mean, eigenvalues)
    _check_positive_definite(eigenvalues, prior_precision)
    return LaplacePosterior(
        mean=mean,
        eigenvalues=eigenvalues,
        eigenvectors=eigenvectors,
        prior_precision=float(prior_precision),
        nll=float(nll),
        negative_curvature=int(negative_eigenvalues(eigenvalues).sum()),
        dtype=flat_map.dtype,
    )


def laplace_fit(
    logits_fn: LogitsFn,
    flat_map: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    prior_precision: float,
    curvature: str = "ggn",
    fit_prior: bool = False,
    data_size: int | None = None,
    loss: Loss = cross_entropy_sum,
    chunk_size: int = 64,
) -> LaplacePosterior:
    """The Laplace posterior around ``flat_map``: H the GGN (default, PSD) or the exact Hessian of
    L = Σᵢ ℓ over (x, y); δ as given or, with ``fit_prior``, argmax_δ log Z(δ) instead (the given δ is
    then unused). SGD on the mean loss with weight decay λ finds the MAP for δ = n·λ, n its training size.
    With ``data_size`` n ≥ len(x), (x, y) is a subset standing for n training examples: H and L are scaled
    by n / len(x), so that the data and the prior weigh as they did in training."""
    if curvature not in CURVATURES:
        raise ValueError(f"curvature must be one of {CURVATURES}, not {curvature!r}")
    _check_prior_precision(prior_precision)
    scale = _data_scale(data_size, len(x))
    build = nll_ggn if curvature == "ggn" else nll_hessian
    h = build(logits_fn, flat_map, x, y, loss=loss, chunk_size=chunk_size) * scale
    nll = negative_log_likelihood(logits_fn, flat_map, x, y, loss=loss, chunk_size=chunk_size) * scale
    return posterior_from_curvature(flat_map, h, prior_precision, nll, fit_prior=fit_prior)


def _data_scale(data_size: int | None, examples: int) -> float:
    if data_size is None:
        return 1.0
    if int(data_size) != data_size or data_size < examples:
        raise ValueError(f"data_size must be an integer no smaller than the {examples} examples given, not {data_size}")
    return data_size / examples


def laplace_samples(
    logits_fn: LogitsFn,
    flat_map: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    count: int,
    generator: torch.Generator,
    prior_precision: float,
    **options,
) -> torch.Tensor:
    """[count, P] weight samples of :func:`laplace_fit`'s posterior, in the MAP's dtype."""
    return laplace_fit(logits_fn, flat_map, x, y, prior_precision=prior_precision, **options).sample(count, generator)
