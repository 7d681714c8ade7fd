"""Maximum mean discrepancy between two sets of weight samples (Laurent et al. §4.1; docs/science.md, § MMD).

An aggregate of kernels, as in MMDAgg (Schrab et al. 2023): Gaussian kernels exp(−‖x − y‖₂²/h²)
and Laplace kernels exp(−‖x − y‖₁/h), each family on a geometric grid of bandwidths spanning the
pooled samples' pairwise distances. For each kernel the unbiased estimate of MMD² (it can dip
slightly below 0 when the two distributions are the same); the aggregate is the median over the
kernels (Laurent's choice), with the mean and the maximum beside it.
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


def mmd_aggregate(x, y, kernels_per_family: int = KERNELS_PER_FAMILY, seed: int = 0) -> MmdResult:
    """MMD² between samples ``x[m, d]`` and ``y[n, d]`` for Gaussian and Laplace kernels: for each kernel k,
    the unbiased Σ_{i≠j} k(x_i, x_j)/(m(m−1)) + Σ_{i≠j} k(y_i, y_j)/(n(n−1)) − 2 Σ_ij k(x_i, y_j)/(mn)."""
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
