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

KERNELS_PER_FAMILY = 10
_BANDWIDTH_SAMPLE = 512  # points whose pairwise distances set the bandwidth grid


@dataclass(frozen=True)
class MmdResult:
    mmd2: np.ndarray         # per kernel: Gaussian ones first, then Laplace
    bandwidths: np.ndarray   # per kernel
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


def _distances(a: np.ndarray, b: np.ndarray, metric: str) -> np.ndarray:
    if metric == "l2":  # squared Euclidean, clipped at 0 (the expansion loses digits)
        gap = np.sum(a**2, 1)[:, None] + np.sum(b**2, 1)[None, :] - 2 * a @ b.T
        return np.maximum(gap, 0.0)
    return np.abs(a[:, None, :] - b[None, :, :]).sum(-1)


def bandwidth_grid(pooled: np.ndarray, metric: str, count: int, rng: np.random.Generator) -> np.ndarray:
    """Geometric bandwidths from half the 5% quantile to twice the 95% quantile of the pairwise
    distances (L2 or L1) within a subsample of the pooled points."""
    if pooled.shape[0] > _BANDWIDTH_SAMPLE:
        pooled = pooled[rng.choice(pooled.shape[0], _BANDWIDTH_SAMPLE, replace=False)]
    dist = _distances(pooled, pooled, metric)
    if metric == "l2":
        dist = np.sqrt(dist)
    positive = dist[np.triu_indices(pooled.shape[0], 1)]
    positive = positive[positive > 0]
    if positive.size == 0:  # every point the same: any bandwidth sees no difference
        return np.ones(count)
    low, high = np.quantile(positive, [0.05, 0.95])
    return np.geomspace(low / 2, max(high * 2, low), count)


def _mmd2_unbiased(kxx, kyy, kxy) -> float:
    m, n = kxx.shape[0], kyy.shape[0]
    within_x = (kxx.sum() - np.trace(kxx)) / (m * (m - 1))
    within_y = (kyy.sum() - np.trace(kyy)) / (n * (n - 1))
    return float(within_x + within_y - 2 * kxy.mean())


def mmd_aggregate(x, y, kernels_per_family: int = KERNELS_PER_FAMILY, seed: int = 0) -> MmdResult:
    """MMD² between samples ``x[m, d]`` and ``y[n, d]`` for Gaussian and Laplace kernels."""
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
    values, bandwidths, families = [], [], []
    for family, metric in (("gaussian", "l2"), ("laplace", "l1")):
        dxx, dyy, dxy = _distances(x, x, metric), _distances(y, y, metric), _distances(x, y, metric)
        for h in bandwidth_grid(pooled, metric, kernels_per_family, rng):
            scale = h**2 if metric == "l2" else h
            values.append(_mmd2_unbiased(np.exp(-dxx / scale), np.exp(-dyy / scale), np.exp(-dxy / scale)))
            bandwidths.append(h)
            families.append(family)
    return MmdResult(np.array(values), np.array(bandwidths), tuple(families))


def layerwise_mmd(x_layers, y_layers, **options) -> float:
    """Laurent's summary: each layer's median MMD², averaged with weights = the layer's parameter
    count. ``x_layers``/``y_layers`` list per-layer sample arrays ``[samples, params]``."""
    if len(x_layers) != len(y_layers) or not x_layers:
        raise ValueError("the two sample sets must list the same, non-zero number of layers")
    sizes = np.array([np.asarray(layer).reshape(len(layer), -1).shape[1] for layer in x_layers], dtype=float)
    medians = [mmd_aggregate(np.asarray(a).reshape(len(a), -1), np.asarray(b).reshape(len(b), -1), **options).median
               for a, b in zip(x_layers, y_layers)]
    return float(np.dot(sizes, medians) / sizes.sum())
