"""Maximum mean discrepancy between two sets of weight samples (Laurent et al. §4.1; docs/science.md, § MMD).

An aggregate of kernels, as in MMDAgg (Schrab et al. 2023): Gaussian kernels exp(−‖x − y‖₂²/h²)
and Laplace kernels exp(−‖x − y‖₁/h), each family on a geometric grid of bandwidths spanning the
pooled samples' pairwise distances. For each kernel the unbiased estimate of MMD² (it can dip
slightly below 0 when the two distributions are the same); the aggregate is the median over the
kernels (Laurent's choice), with the mean and the maximum beside it.

Its noise within one pair of sample sets: a bootstrap (:func:`bootstrap_layerwise_mmd`) that draws both sets again
with replacement and leaves out the pairs a draw makes of one point with itself, as the unbiased estimate leaves
out k(x_i, x_i). Draws are taken as independent: the spread of autocorrelated ones (a Markov chain's) is larger.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist, pdist

KERNELS_PER_FAMILY = 10
_BANDWIDTH_SAMPLE = 512  # points whose pairwise distances set the bandwidth grid


@dataclass(frozen=True)
class MmdResult:
    mmd2: np.ndarray  # per kernel: Gaussian ones first, then Laplace
    bandwidths: np.ndarray  # per kernel
    families: tuple[str, ...]

    @property
    def median(self) -> float:
        return float(np.median(self.mmd2))

    @property
    def mean(self) -> float:
        return float(np.mean(self.mmd2))

    @property
    def max(self) -> float:
        return float(np.max(self.mmd2))


def _distances(a: np.ndarray, b: np.ndarray | None, metric: str) -> np.ndarray:
    """Squared Euclidean (``"l2"``) or L1 distances between the rows of ``a`` and ``b``, or, without ``b``,
    between each pair i < j of ``a``'s rows (a flat vector, as scipy's pdist)."""
    name = "sqeuclidean" if metric == "l2" else "cityblock"
    return pdist(a, name) if b is None else cdist(a, b, name)


def bandwidth_grid(pooled: np.ndarray, metric: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """Geometric bandwidths from half the 5% quantile to twice the 95% quantile of the pairwise
    distances (L2 or L1) within a subsample of the pooled points."""
    if pooled.shape[0] > _BANDWIDTH_SAMPLE:
        pooled = pooled[rng.choice(pooled.shape[0], _BANDWIDTH_SAMPLE, replace=False)]
    dist = _distances(pooled, None, metric)
    if metric == "l2":
        dist = np.sqrt(dist)
    positive = dist[dist > 0]
    if positive.size == 0:  # every point the same: any bandwidth sees no difference
        return np.ones(count)
    low, high = np.quantile(positive, [0.05, 0.95])
    return np.geomspace(low / 2, max(high * 2, low), count)


def _kernel_sum(distances: np.ndarray, scale: float, work: np.ndarray) -> float:
    """Σ exp(−d/scale) over ``distances`` (float32, as ``work``: the exponentials need no more digits than
    the sum keeps, and take half the time), accumulated in float64."""
    np.multiply(distances, np.float32(-1.0 / scale), out=work)
    return float(np.exp(work, out=work).sum(dtype=np.float64))


def _checked(x, y, kernels_per_family: int) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim == 1:
        x, y = x[:, None], y[:, None]
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"two sample sets of the same dimension needed, got shapes {x.shape} and {y.shape}")
    if x.shape[0] < 2 or y.shape[0] < 2:
        raise ValueError("each sample set needs at least two points")
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise ValueError("samples must be finite")
    if kernels_per_family < 1:
        raise ValueError("kernels_per_family must be >= 1")
    return x, y


def mmd_aggregate(x, y, kernels_per_family: int = KERNELS_PER_FAMILY, seed: int = 0) -> MmdResult:
    """MMD² between samples ``x[m, d]`` and ``y[n, d]`` for Gaussian and Laplace kernels: for each kernel k,
    the unbiased Σ_{i≠j} k(x_i, x_j)/(m(m−1)) + Σ_{i≠j} k(y_i, y_j)/(n(n−1)) − 2 Σ_ij k(x_i, y_j)/(mn)."""
    x, y = _checked(x, y, kernels_per_family)
    rng = np.random.default_rng(seed)
    pooled = np.concatenate([x, y])
    m, n = len(x), len(y)
    values, bandwidths, families = [], [], []
    for family, metric in (("gaussian", "l2"), ("laplace", "l1")):
        # Within a set, each pair i < j once (k is symmetric, and k(x_i, x_i) is left out).
        dxx, dyy, dxy = (_distances(a, b, metric).astype(np.float32).ravel() for a, b in ((x, None), (y, None), (x, y)))
        work = np.empty(max(dxx.size, dyy.size, dxy.size), dtype=np.float32)
        for h in bandwidth_grid(pooled, metric, kernels_per_family, rng):
            scale = h**2 if metric == "l2" else h
            within_x = 2 * _kernel_sum(dxx, scale, work[: dxx.size]) / (m * (m - 1))
            within_y = 2 * _kernel_sum(dyy, scale, work[: dyy.size]) / (n * (n - 1))
            values.append(within_x + within_y - 2 * _kernel_sum(dxy, scale, work[: dxy.size]) / (m * n))
            bandwidths.append(h)
            families.append(family)
    return MmdResult(np.array(values), np.array(bandwidths), tuple(families))


def layerwise_mmd(x_layers, y_layers, **options) -> float:
    """Laurent's summary: each layer's median MMD², averaged with weights = the layer's parameter
    count. ``x_layers``/``y_layers`` list per-layer sample arrays ``[samples, params]``."""
    if len(x_layers) != len(y_layers) or not x_layers:
        raise ValueError("the two sample sets must list the same, non-zero number of layers")
    sizes = np.array([np.asarray(layer).reshape(len(layer), -1).shape[1] for layer in x_layers], dtype=float)
    medians = [
        mmd_aggregate(np.asarray(a).reshape(len(a), -1), np.asarray(b).reshape(len(b), -1), **options).median
        for a, b in zip(x_layers, y_layers)
    ]
    return float(np.dot(sizes, medians) / sizes.sum())


def bootstrap_counts(size: int, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """How often each of ``size`` points is drawn in each of ``replicates`` resamples with replacement
    ``[replicates, size]`` (the first replicate: every point once, the estimate itself)."""
    counts = np.ones((replicates, size))
    for row in counts[1:]:
        row[:] = np.bincount(rng.integers(size, size=size), minlength=size)
    return counts


def _within(kernel: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Per replicate, the mean of k over the pairs of drawn points that are two points, not one drawn twice:
    Σ_{i≠j} c_i c_j k_ij / (m² − Σ c_i²), with counts c (all ones: the unbiased estimate's Σ_{i≠j} k_ij/(m(m−1)));
    NaN for a resample of one point drawn m times, which has no such pair."""
    off_diagonal = kernel - np.diag(np.diag(kernel))
    pairs = counts.sum(1) ** 2 - (counts**2).sum(1)
    total = np.einsum("bi,ij,bj->b", counts, off_diagonal, counts)
    return np.divide(total, pairs, out=np.full_like(total, np.nan), where=pairs > 0)


def bootstrap_mmd(x, y, x_counts, y_counts, kernels_per_family: int = KERNELS_PER_FAMILY, seed: int = 0) -> np.ndarray:
    """:func:`mmd_aggregate`'s MMD² per kernel, ``[replicates, kernels]``, for resamples of ``x`` and ``y`` given as
    counts (:func:`bootstrap_counts`): the bandwidths are the full sets' (the same ``seed``), so all-ones counts give
    the estimate itself."""
    x, y = _checked(x, y, kernels_per_family)
    rng = np.random.default_rng(seed)
    pooled = np.concatenate([x, y])
    x_counts, y_counts = np.asarray(x_counts, dtype=np.float64), np.asarray(y_counts, dtype=np.float64)
    out = []
    for metric in ("l2", "l1"):
        dxx, dyy, dxy = (_distances(a, b, metric) for a, b in ((x, x), (y, y), (x, y)))
        for h in bandwidth_grid(pooled, metric, kernels_per_family, rng):
            scale = h**2 if metric == "l2" else h
            cross = np.einsum("bi,ij,bj->b", x_counts, np.exp(-dxy / scale), y_counts) / (len(x) * len(y))
            out.append(_within(np.exp(-dxx / scale), x_counts) + _within(np.exp(-dyy / scale), y_counts) - 2 * cross)
    return np.stack(out, 1)


def bootstrap_layerwise_mmd(x_layers, y_layers, replicates: int = 200, seed: int = 0, **options) -> np.ndarray:
    """:func:`layerwise_mmd` over ``replicates`` bootstrap resamples of both sets (the same resample of the networks
    for every layer; the first replicate the estimate itself), ``[replicates]``: its spread is the estimate's
    noise within these two sets."""
    rng = np.random.default_rng([seed, replicates])
    x_counts = bootstrap_counts(len(x_layers[0]), replicates, rng)
    y_counts = bootstrap_counts(len(y_layers[0]), replicates, rng)
    sizes = np.array([np.asarray(layer).reshape(len(layer), -1).shape[1] for layer in x_layers], dtype=float)
    medians = [
        np.median(
            bootstrap_mmd(
                np.asarray(a).reshape(len(a), -1),
                np.asarray(b).reshape(len(b), -1),
                x_counts,
                y_counts,
                seed=seed,
                **options,
            ),
            axis=1,
        )
        for a, b in zip(x_layers, y_layers)
    ]
    return np.asarray(medians).T @ sizes / sizes.sum()


def interval(replicates: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """The central ``level`` percentile interval of bootstrap replicates (those with no estimate, NaN, left out)."""
    tail = 100 * (1 - level) / 2
    low, high = np.nanpercentile(replicates, [tail, 100 - tail])
    return float(low), float(high)
