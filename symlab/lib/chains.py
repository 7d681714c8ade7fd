"""Convergence diagnostics of Markov chains: rank-normalised split-R̂ and bulk effective sample size (Vehtari,
Gelman, Simpson, Carpenter & Bürkner 2021), as ArviZ computes them (tests/test_chains.py holds them to ArviZ).

For draws θ[c, s] of one quantity from C chains of S draws:
- split: each chain cut in halves (the first ⌊S/2⌋ draws and the last ⌊S/2⌋), 2C chains of n = ⌊S/2⌋;
- rank-normalise: z = Φ⁻¹((r − 3/8)/(N + 1/4)), r the average rank of a draw among all N = 2Cn;
- R̂ = √((n − 1)/n + B/(nW)), with W the mean within-chain variance and B/n the variance of the chain means;
  the rank-normalised R̂ is the larger of R̂(z) (the bulk) and R̂ of z of the folded draws |θ − median θ| (the
  tails). It is near 1 when the chains agree, and above 1.01 when they do not;
- ESS = 2Cn / τ̂, τ̂ = −1 + 2 Σ_t ρ̂_t over Geyer's initial monotone sequence of the autocorrelations of z,
  pooled across chains as (1 − (W − mean autocovariance_t)/var⁺).
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def _as_chains(draws) -> np.ndarray:
    draws = np.asarray(draws, dtype=np.float64)
    if draws.ndim < 2:
        raise ValueError(f"draws must be [chains, draws, ...], not shape {draws.shape}")
    return draws


def split_chain(draws) -> np.ndarray:
    """Draws ``[C, S, ...]`` as ``[2C, ⌊S/2⌋, ...]``: each chain's first half and its last (the middle draw of an
    odd S left out), as split-R̂ cuts them."""
    return _split(_as_chains(draws))


def _split(draws: np.ndarray) -> np.ndarray:
    """[C, S, ...] → [2C, ⌊S/2⌋, ...]: each chain's first and last halves (the middle draw of an odd S left out)."""
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, draws.shape[1] - half :]], axis=0)


def _z_scale(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised draws (Blom's offset 3/8), over all chains at once."""
    ranks = stats.rankdata(draws, method="average").reshape(draws.shape)
    return stats.norm.ppf((ranks - 3 / 8) / (draws.size + 1 / 4))


def _rhat(chains: np.ndarray) -> float:
    n = chains.shape[1]
    within = chains.var(axis=1, ddof=1).mean()
    between_over_n = chains.mean(axis=1).var(ddof=1)
    return float(np.sqrt(between_over_n / within + (n - 1) / n) if within > 0 else np.nan)


def _rhat_one(chains: np.ndarray) -> float:
    split = _split(chains)
    if split.shape[1] < 2 or not np.isfinite(split).all():
        return float("nan")
    bulk = _rhat(_z_scale(split))
    tail = _rhat(_z_scale(np.abs(split - np.median(split))))
    return max(bulk, tail)


def _autocovariance(chains: np.ndarray) -> np.ndarray:
    """Per chain, the autocovariance at every lag (biased, as ArviZ's: divided by n), by FFT."""
    n = chains.shape[1]
    centred = chains - chains.mean(axis=1, keepdims=True)
    size = 1 << (2 * n - 1).bit_length()
    spectrum = np.fft.rfft(centred, n=size, axis=1)
    return np.fft.irfft(spectrum * np.conjugate(spectrum), n=size, axis=1)[:, :n] / n


def _ess(chains: np.ndarray) -> float:
    count, n = chains.shape
    if np.ptp(chains) < np.finfo(float).resolution:
        return float(chains.size)
    acov = _autocovariance(chains)
    mean_var = acov[:, 0].mean() * n / (n - 1)
    var_plus = mean_var * (n - 1) / n + (chains.mean(axis=1).var(ddof=1) if count > 1 else 0.0)
    rho = np.zeros(n)
    rho[0] = even = 1.0
    rho[1] = odd = 1.0 - (mean_var - acov[:, 1].mean()) / var_plus
    t = 1
    while t < n - 3 and even + odd > 0:  # Geyer's initial positive sequence
        even = 1.0 - (mean_var - acov[:, t + 1].mean()) / var_plus
        odd = 1.0 - (mean_var - acov[:, t + 2].mean()) / var_plus
        if even + odd >= 0:
            rho[t + 1], rho[t + 2] = even, odd
        t += 2
    last = t - 2
    if even > 0:
        rho[last + 1] = even
    t = 1
    while t <= last - 2:  # made monotone
        if rho[t + 1] + rho[t + 2] > rho[t - 1] + rho[t]:
            rho[t + 1] = rho[t + 2] = (rho[t - 1] + rho[t]) / 2
        t += 2
    tau = -1.0 + 2.0 * rho[: last + 1].sum() + rho[last + 1 : last + 2].sum()
    tau = max(tau, 1 / np.log10(chains.size))
    return float(chains.size / tau)


def _ess_one(chains: np.ndarray) -> float:
    split = _split(chains)
    if split.shape[1] < 4 or not np.isfinite(split).all():
        return float("nan")
    return _ess(_z_scale(split))


def _per_quantity(function, draws) -> np.ndarray:
    draws = _as_chains(draws)
    flat = draws.reshape(draws.shape[0], draws.shape[1], -1)
    values = np.array([function(flat[:, :, k]) for k in range(flat.shape[2])])
    return values.reshape(draws.shape[2:])


def rhat(draws) -> np.ndarray:
    """Rank-normalised split-R̂ of ``draws`` [C, S, ...], one per quantity (shape ``draws.shape[2:]``)."""
    return _per_quantity(_rhat_one, draws)


def ess(draws) -> np.ndarray:
    """Bulk effective sample size of ``draws`` [C, S, ...], one per quantity."""
    return _per_quantity(_ess_one, draws)


def _mcse_one(chains: np.ndarray) -> float:
    split = _split(chains)
    if split.shape[1] < 4 or not np.isfinite(split).all():
        return float("nan")
    return float(chains.std(ddof=1) / np.sqrt(_ess(split)))


def mcse_mean(draws) -> np.ndarray:
    """Monte-Carlo standard error of each quantity's mean over all draws: sd/√ESS, the ESS of the split draws as
    they are (not rank-normalised: it is the mean's error)."""
    return _per_quantity(_mcse_one, draws)


def mcse_across_chains(draws) -> np.ndarray:
    """Monte-Carlo standard error of each quantity's mean from the spread of the chains' own means, sd/√C (NaN for
    one chain): chains started apart and run independently give C independent estimates, whatever their
    autocorrelation, so this error needs no estimate of it (Geyer's, from short chains that rarely visit a region,
    can be too small)."""
    draws = _as_chains(draws)
    if draws.shape[0] < 2:
        return np.full(draws.shape[2:], np.nan)
    means = draws.mean(axis=1)
    return means.std(axis=0, ddof=1) / np.sqrt(draws.shape[0])


def mcse_mean_cautious(draws) -> np.ndarray:
    """Each quantity's mean's Monte-Carlo standard error, the larger of :func:`mcse_mean`'s (sd/√ESS) and
    :func:`mcse_across_chains`' (that of one chain counted as 0)."""
    return np.maximum(mcse_mean(draws), np.nan_to_num(mcse_across_chains(draws)))


def mcse_proportion(indicator, effective_draws: float) -> float:
    """Monte-Carlo standard error of a proportion, the mean of ``indicator`` [C, S] (0 or 1): the largest of
    :func:`mcse_mean`'s, :func:`mcse_across_chains`' and Agresti and Coull's √(p̃(1 − p̃)/(n + 4)), p̃ = (np̂ + 2)/(n + 4),
    with n the fewer of the indicator's effective draws and ``effective_draws`` (say, the weights' smallest ESS).
    Where the chains never leave one side, the first two are 0 and the last is about 1.4/n, the rule of three's
    scale (a 95 % bound of 3/n): never ± 0."""
    indicator = _as_chains(indicator)
    split = _split(indicator)
    own = _ess(split) if np.ptp(indicator) > 0 and split.shape[1] >= 4 else float("inf")
    n = min(own, float(effective_draws))
    p = float(indicator.mean())
    smoothed = (n * p + 2) / (n + 4)
    agresti_coull = float(np.sqrt(smoothed * (1 - smoothed) / (n + 4)))
    from_the_draws = np.fmax(mcse_mean(indicator), mcse_across_chains(indicator))  # each where it is defined
    return max(agresti_coull, float(np.nan_to_num(from_the_draws)))


def switches(labels) -> np.ndarray:
    """Per chain, how often the label of successive draws changes (``labels`` [C, S]): for the label of the
    permuted copy a draw sits in, how often the chain hops between copies of a mode."""
    labels = np.asarray(labels)
    return (labels[:, 1:] != labels[:, :-1]).sum(axis=1)
