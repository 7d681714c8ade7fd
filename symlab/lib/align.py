"""Aligning two mean-field Gaussian posteriors of an MLP across hidden-unit permutations, and the
loss barrier between them (Rossi et al. 2023; docs/science.md, § W2 alignment, § Loss barrier).

A posterior is a :class:`symlab.lib.gaussian.DiagonalGaussian` of one network, in float64 numpy:
its means and standard deviations as (W, b) layers are ``q.means`` and ``q.sds``. q_B is aligned to q_A by
per-layer permutations P_l minimising the squared 2-Wasserstein distance between the diagonal Gaussians,

    W₂²(q_A, P·q_B) = Σ_l ‖μ_A^l − P_l μ_B^l P_{l−1}ᵀ‖² + ‖s_A^l − P_l s_B^l P_{l−1}ᵀ‖²,

by coordinate descent over hidden layers: with the others fixed, the best P_l is a linear
assignment between the units of layer l. Weight matching (Ainsworth et al.) is the same descent on
the means alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from symlab.lib import mlp
from symlab.lib.gaussian import DiagonalGaussian

OBJECTIVES = ("w2", "means")  # W₂ between the Gaussians; weight matching on the means


def identity_permutations(q: DiagonalGaussian) -> list[np.ndarray]:
    return [np.arange(h) for h in q.hidden]


def permute(q: DiagonalGaussian, perms) -> DiagonalGaussian:
    """q with hidden layer l's units reordered by ``perms[l]`` (new unit k = old unit perms[l][k]),
    means and standard deviations alike: the same distribution over functions."""
    return q.take(mlp.permutation_index(q.layout, perms))


def layer_distances(qa: DiagonalGaussian, qb: DiagonalGaussian, objective: str = "w2") -> np.ndarray:
    """Squared distance per layer: ‖μ_A − μ_B‖² (+ ‖s_A − s_B‖² for ``"w2"``)."""
    _check_pair(qa, qb, objective)
    parts = [qa.means, qb.means] + ([qa.sds, qb.sds] if objective == "w2" else [])
    totals = np.zeros(len(qa.means))
    for a, b in zip(parts[::2], parts[1::2]):
        totals += [np.sum((Wa - Wb) ** 2) + np.sum((ba - bb) ** 2) for (Wa, ba), (Wb, bb) in zip(a, b)]
    return totals


def w2_distance(qa: DiagonalGaussian, qb: DiagonalGaussian) -> float:
    """The 2-Wasserstein distance between two diagonal Gaussians: √(‖μ_A − μ_B‖² + ‖s_A − s_B‖²)."""
    return math.sqrt(float(layer_distances(qa, qb, "w2").sum()))


def mean_distance(qa: DiagonalGaussian, qb: DiagonalGaussian) -> float:
    """‖μ_A − μ_B‖, the distance weight matching minimises."""
    return math.sqrt(float(layer_distances(qa, qb, "means").sum()))


def _check_pair(qa: DiagonalGaussian, qb: DiagonalGaussian, objective: str) -> None:
    if qa.sizes != qb.sizes:
        raise ValueError(f"the posteriors are of different networks: {qa.sizes} and {qb.sizes}")
    if qa.mean.ndim != 1 or qb.mean.ndim != 1:
        raise ValueError("align takes one network per posterior, not a batch")
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES} (got {objective!r})")


def unit_similarity(qa: DiagonalGaussian, qb: DiagonalGaussian, index: int, objective: str = "w2",
                    incoming: bool = True, outgoing: bool = True) -> np.ndarray:
    """S[i, j] = ⟨unit i of q_A, unit j of q_B⟩ over means (and standard deviations for ``"w2"``).
    Over permutations P of layer ``index``, Σ_i S[i, P(i)] is the distance up to a constant."""
    sets = [(qa.means, qb.means)] + ([(qa.sds, qb.sds)] if objective == "w2" else [])
    return sum(mlp.unit_rows(a, index, incoming, outgoing) @ mlp.unit_rows(b, index, incoming, outgoing).T
               for a, b in sets)


def unit_distances(qa: DiagonalGaussian, qb: DiagonalGaussian, index: int, objective: str = "w2") -> np.ndarray:
    """D[i, j] = squared distance between unit i of q_A and unit j of q_B (incoming weights, bias
    and outgoing weights; means, and standard deviations for ``"w2"``): the assignment's cost matrix."""
    sets = [(qa.means, qb.means)] + ([(qa.sds, qb.sds)] if objective == "w2" else [])
    total = 0.0
    for a, b in sets:
        fa, fb = mlp.unit_rows(a, index), mlp.unit_rows(b, index)
        total = total + np.sum((fa[:, None, :] - fb[None, :, :]) ** 2, axis=-1)
    return total


@dataclass(frozen=True)
class Alignment:
    perms: list            # per hidden layer: aligned unit k of q_B = unit perms[l][k] of q_B
    objective: str
    sweeps: int            # full passes of coordinate descent over the layers
    converged: bool        # the last pass changed no permutation
    history: list          # squared distance after initialisation and after each pass
    start: str             # the start it descended from: "identity", "incoming" or "outgoing"


def _assign(similarity: np.ndarray) -> np.ndarray:
    _, cols = linear_sum_assignment(similarity, maximize=True)
    return cols


def _squared_distance(qa, qb, perms, objective) -> float:
    return float(layer_distances(qa, permute(qb, perms), objective).sum())


def incoming_matching(qa: DiagonalGaussian, qb: DiagonalGaussian, objective: str = "w2") -> list[np.ndarray]:
    """One forward pass: each layer's permutation from its incoming weights alone, given the layers
    before it. The inputs are never permuted, so a permuted copy of q_A is recovered exactly."""
    perms = identity_permutations(qb)
    for index in range(len(perms)):
        aligned = permute(qb, perms)
        perms[index] = perms[index][_assign(unit_similarity(qa, aligned, index, objective, outgoing=False))]
    return perms


def outgoing_matching(qa: DiagonalGaussian, qb: DiagonalGaussian, objective: str = "w2") -> list[np.ndarray]:
    """The same pass backwards: each layer's permutation from its outgoing weights alone, given the
    layers after it (the outputs are never permuted either)."""
    perms = identity_permutations(qb)
    for index in reversed(range(len(perms))):
        aligned = permute(qb, perms)
        perms[index] = perms[index][_assign(unit_similarity(qa, aligned, index, objective, incoming=False))]
    return perms


def align(qa: DiagonalGaussian, qb: DiagonalGaussian, objective: str = "w2", max_sweeps: int = 100) -> Alignment:
    """Permutations of q_B's hidden units bringing it closest to q_A, by coordinate descent.

    Each sweep passes over the hidden layers; each step solves one layer's linear assignment
    exactly with the other layers fixed, so the distance never increases. A sweep that changes
    nothing ends it (a fixed point: no single layer can improve). Coordinate descent finds a local
    minimum, so it runs from three starts: the identity (the result is never farther than the
    unaligned q_B), :func:`incoming_matching` and :func:`outgoing_matching` (each recovers a
    permuted copy of q_A exactly), and keeps the closest result."""
    _check_pair(qa, qb, objective)
    if not (isinstance(max_sweeps, int) and max_sweeps >= 1):
        raise ValueError(f"max_sweeps must be a whole number >= 1 (got {max_sweeps!r})")
    starts = {"identity": identity_permutations(qb), "incoming": incoming_matching(qa, qb, objective),
              "outgoing": outgoing_matching(qa, qb, objective)}
    results = [_descend(qa, qb, perms, objective, max_sweeps, name) for name, perms in starts.items()]
    return min(results, key=lambda result: result.history[-1])


def _descend(qa, qb, perms, objective, max_sweeps, start) -> Alignment:
    current = _squared_distance(qa, qb, perms, objective)
    history = [current]
    converged, sweeps = False, 0
    while sweeps < max_sweeps and not converged:
        sweeps += 1
        converged = True
        for index in range(len(perms)):
            aligned = permute(qb, perms)
            step = _assign(unit_similarity(qa, aligned, index, objective))
            if not np.array_equal(step, np.arange(len(step))):
                # Ties (equal units, e.g. all pruned to the prior) could make the solver swap them
                # back and forth: accept a change only when it strictly lowers the distance.
                candidate = list(perms)
                candidate[index] = perms[index][step]
                distance = _squared_distance(qa, qb, candidate, objective)
                if distance < current:
                    perms, current, converged = candidate, distance, False
        history.append(current)
    return Alignment(perms, objective, sweeps, converged, history, start)


# ---------------------------------------------------------------------------------------------
# The path between two posteriors
# ---------------------------------------------------------------------------------------------

def interpolate(qa: DiagonalGaussian, qb: DiagonalGaussian, t: float) -> DiagonalGaussian:
    """(1 − t)·q_A + t·q_B on means and on standard deviations (t = 0: q_A, t = 1: q_B, exactly)."""
    _check_pair(qa, qb, "w2")

    return DiagonalGaussian.from_sd(qa.layout, (1 - t) * qa.mean + t * qb.mean, (1 - t) * qa.sd + t * qb.sd)


def standard_noise(sizes, samples: int, seed: int) -> torch.Tensor:
    """ε for ``samples`` draws of every weight: flat float32 parameters ``[S, n_params]`` of the MLP
    ``sizes``, reused at every point of a path (common random numbers: smooth curves)."""
    g = torch.Generator().manual_seed(seed)
    return mlp.draw_parameters(mlp.Layout(sizes), lambda shape, _: torch.randn(shape, generator=g), (samples,))


SAMPLE_CHUNK = 2  # posterior samples per forward pass: a chunk's activations stay in the core's cache


def predictive_log_probs(q: DiagonalGaussian, noise, x: torch.Tensor) -> torch.Tensor:
    """log of the marginal predictive (1/S) Σ_s softmax(f(x; μ + s ⊙ ε_s)), ``[n, classes]``. The
    forward pass runs in float32 (it is only an evaluation), a few samples at a time; q itself stays float64.
    The logits are formed as ``[S, classes, n]``: a softmax over few classes is then a pass along n, and a
    product with few output columns is MKL's slow case."""
    w = torch.addcmul(torch.from_numpy(q.mean).float(), torch.from_numpy(q.sd).float(), noise)
    layers, x = q.layout.layers(w), x.to(torch.float32)
    (W_out, b_out), samples = layers[-1], len(w)
    logits = torch.empty(samples, W_out.shape[-2], x.shape[0])
    for start in range(0, samples, SAMPLE_CHUNK):
        chunk = slice(start, start + SAMPLE_CHUNK)
        hidden = torch.relu_(mlp.forward([(W[chunk], b[chunk]) for W, b in layers[:-1]], x))
        torch.baddbmm(b_out[chunk].unsqueeze(-1), W_out[chunk], hidden.mT, out=logits[chunk])
    return (torch.logsumexp(torch.log_softmax(logits, dim=-2), dim=0) - math.log(samples)).T


def evaluate(q: DiagonalGaussian, noise, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(NLL of the marginal predictive in nats per point, its accuracy) on (x, y)."""
    with torch.inference_mode():
        log_probs = predictive_log_probs(q, noise, x)
    nll = -log_probs.gather(1, y[:, None]).mean()
    accuracy = (log_probs.argmax(1) == y).float().mean()
    return float(nll), float(accuracy)


def path(qa: DiagonalGaussian, qb: DiagonalGaussian, ts, noise, x, y) -> dict:
    """Loss and accuracy of the marginal predictive along (1 − t)q_A + t q_B for each t in ``ts``."""
    return paths(qa, {"path": qb}, ts, noise, x, y)["path"]


def paths(qa: DiagonalGaussian, ends: dict, ts, noise, x, y, progress=None) -> dict:
    """:func:`path` from q_A to each of ``ends`` (name -> q_B), each point evaluated once: q_A itself (t = 0)
    for every path, and an end equal to an earlier one (weight matching and W₂ usually find the same
    permutations) shares that one's path. ``progress(done, total)`` after each path."""
    ts = [float(t) for t in ts]
    start = evaluate(qa, noise, x, y) if ts and ts[0] == 0.0 else None
    found: dict = {}
    for done, (name, end) in enumerate(ends.items(), 1):
        same = next((other for other, q in ends.items() if other in found and _same(q, end)), None)
        if same is not None:
            found[name] = found[same]
        else:
            rows = [start if t == 0.0 and start is not None else evaluate(interpolate(qa, end, t), noise, x, y)
                    for t in ts]
            found[name] = {"t": ts, "loss": [r[0] for r in rows], "accuracy": [r[1] for r in rows]}
        if progress is not None:
            progress(done, len(ends))
    return {name: dict(path) for name, path in found.items()}


def _same(qa: DiagonalGaussian, qb: DiagonalGaussian) -> bool:
    return np.array_equal(qa.mean, qb.mean) and np.array_equal(qa.sd, qb.sd)


def barrier(ts, values, higher_is_worse: bool = True) -> float:
    """Height of the barrier along a path: max_t [v(t) − ((1 − t)v(0) + t·v(1))] for a loss (for an
    accuracy, the largest drop below the straight line). 0 when the path never rises above it."""
    ts, values = np.asarray(ts, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if ts.ndim != 1 or ts.shape != values.shape or ts.size < 2 or ts[0] != 0 or ts[-1] != 1:
        raise ValueError("a barrier needs values at points t from 0 to 1 (first 0, last 1)")
    straight = (1 - ts) * values[0] + ts * values[-1]
    gap = values - straight if higher_is_worse else straight - values
    return float(max(gap.max(), 0.0))
