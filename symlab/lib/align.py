"""Aligning two mean-field Gaussian posteriors of an MLP across hidden-unit permutations, and the
loss barrier between them (Rossi et al. 2023; docs/science.md, § W2 alignment, § Loss barrier).

A posterior is a :class:`symlab.lib.gaussian.DiagonalGaussian` of one network, in float64 numpy:
its means and standard deviations as (W, b) layers are ``q.means`` and ``q.sds``. q_B is aligned to q_A by
per-layer permutations P_l minimising the squared 2-Wasserstein distance between the diagonal Gaussians,

    W₂²(q_A, P·q_B) = Σ_l ‖μ_A^l − P_l μ_B^l P_{l−1}ᵀ‖² + ‖s_A^l − P_l s_B^l P_{l−1}ᵀ‖²,

by coordinate descent over hidden layers: with the others fixed, the best P_l is a linear
assignment between the units of layer l. Weight matching (Ainsworth et al.; Git Re-Basin) is the
same descent on the means alone.

A descent ends at a local minimum, so :func:`align` runs several (``starts``: 64 by default with two
or more hidden layers, at most :data:`MAX_STARTS`; one for a single hidden layer, where one
assignment is exact) and keeps the closest: three with the layers in order from the identity and
from one-pass matchings (``starts=3``: these alone), three from the same in other layer orders, then
in turn Git Re-Basin's restarts (a random layer order each sweep) and steps of a local search from
the closest results so far. tests/test_align_reference.py compares it with Git Re-Basin's best of 100
random-order runs.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

from symlab.lib import mlp
from symlab.lib.gaussian import DiagonalGaussian
from symlab.lib.options import ALIGN_DEFAULT_STARTS, ALIGN_MAX_STARTS

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


def unit_similarity(
    qa: DiagonalGaussian,
    qb: DiagonalGaussian,
    index: int,
    objective: str = "w2",
    incoming: bool = True,
    outgoing: bool = True,
) -> np.ndarray:
    """S[i, j] = ⟨unit i of q_A, unit j of q_B⟩ over means (and standard deviations for ``"w2"``).
    Over permutations P of layer ``index``, Σ_i S[i, P(i)] is the distance up to a constant."""
    sets = [(qa.means, qb.means)] + ([(qa.sds, qb.sds)] if objective == "w2" else [])
    return sum(
        mlp.unit_rows(a, index, incoming, outgoing) @ mlp.unit_rows(b, index, incoming, outgoing).T for a, b in sets
    )


DIFFERENCES_AT_ONCE = 2**22  # unit-to-unit differences held at once (32 MB): a wide layer's are gigabytes


def unit_distances(
    qa: DiagonalGaussian, qb: DiagonalGaussian, index: int, objective: str = "w2", rows=None
) -> np.ndarray:
    """D[i, j] = squared distance between unit i of q_A and unit j of q_B (incoming weights, bias
    and outgoing weights; means, and standard deviations for ``"w2"``): the assignment's cost matrix; with
    ``rows``, only those units of q_A. Summed difference by difference (exact, not ‖a‖² + ‖b‖² − 2⟨a, b⟩), a
    few rows at a time."""
    sets = [(qa.means, qb.means)] + ([(qa.sds, qb.sds)] if objective == "w2" else [])
    features = [(mlp.unit_rows(a, index), mlp.unit_rows(b, index)) for a, b in sets]
    rows = np.arange(features[0][0].shape[0]) if rows is None else np.asarray(rows)
    others = features[0][1]
    total = np.zeros((len(rows), others.shape[0]))
    step = max(DIFFERENCES_AT_ONCE // max(others.size, 1), 1)
    for start in range(0, len(rows), step):
        chunk = rows[start : start + step]
        for fa, fb in features:
            total[start : start + step] += np.sum((fa[chunk, None, :] - fb[None, :, :]) ** 2, axis=-1)
    return total


@dataclass(frozen=True)
class Alignment:
    perms: list  # per hidden layer: aligned unit k of q_B = unit perms[l][k] of q_B
    objective: str
    sweeps: int  # full passes of coordinate descent over the layers
    converged: bool  # the last pass changed no permutation
    history: list  # squared distance after initialisation and after each pass
    start: str  # the descent that won: "identity", "incoming", "outgoing" (layers in order
    # 0, 1, …), "… backwards first", "restart k in random orders" or
    # "local-search step k" (see align)
    starts: int = 1  # descents tried


START_POINTS = ("identity", "incoming", "outgoing")
DEFAULT_STARTS, MAX_STARTS = ALIGN_DEFAULT_STARTS, ALIGN_MAX_STARTS
DEFAULT_SEED = 0
TIE_TOLERANCE = 1e-12  # relative: a gain this small is rounding, not an improvement
SAME_ENDS = 8  # descents in a row ending at the closest distance: the search stops there


def _assign(similarity: np.ndarray) -> np.ndarray:
    _, cols = linear_sum_assignment(similarity, maximize=True)
    return cols


def _inner_products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """S[i, j] = ⟨row i of a, row j of b⟩: every cost matrix of the descent is made here."""
    return a @ b.T


class _Side:
    """One side of a hidden layer's units, in q_A and in q_B: their weights from the layer below
    (incoming) or to the layer above (outgoing), one row per unit, means and (for "w2") standard
    deviations side by side. Aligning that neighbouring layer permutes the columns of each."""

    def __init__(self, sets, weights, neighbour_fixed: bool):
        self.a, self.b = (np.concatenate([weights(layers) for layers in side], axis=1) for side in zip(*sets))
        # The input and the output are never permuted: their side's product is made once.
        self.fixed = _inner_products(self.a, self.b) if neighbour_fixed else None

    def similarity(self, neighbour: np.ndarray | None) -> np.ndarray:
        """⟨unit i of q_A, unit j of q_B⟩ over this side, q_B's neighbouring layer aligned by ``neighbour``."""
        if self.fixed is not None:
            return self.fixed
        if neighbour is None:
            raise ValueError("this side's neighbouring layer is permuted: its alignment is needed")
        columns = (np.arange(0, self.b.shape[1], len(neighbour))[:, None] + neighbour).ravel()
        return _inner_products(self.a, self.b[:, columns])


class _Pair:
    """q_A and q_B as the descent reads them. Layer l's similarity is
    S_l = B_l + In_l(P_{l−1}) + Out_l(P_{l+1}) (biases, incoming and outgoing weights), over q_B's units
    in its own order, so a layer's assignment is P_l itself. The sides facing the input and the output
    (for MNIST, the 784-wide first layer: most of the arithmetic) are multiplied once and shared by
    every start and every descent."""

    def __init__(self, qa: DiagonalGaussian, qb: DiagonalGaussian, objective: str):
        self.sets = [(qa.means, qb.means)] + ([(qa.sds, qb.sds)] if objective == "w2" else [])
        self.qb, self.objective = qb, objective
        last = len(qb.hidden) - 1
        self.incoming = [
            _Side(self.sets, lambda layers, i=index: layers[i][0], index == 0) for index in range(last + 1)
        ]
        self.outgoing = [
            _Side(self.sets, lambda layers, i=index: layers[i + 1][0].T, index == last) for index in range(last + 1)
        ]
        self.biases = [
            _Side(self.sets, lambda layers, i=index: layers[i][1][:, None], True).fixed for index in range(last + 1)
        ]

    def incoming_similarity(self, index: int, perms) -> np.ndarray:
        return self.biases[index] + self.incoming[index].similarity(perms[index - 1] if index > 0 else None)

    def outgoing_similarity(self, index: int, perms) -> np.ndarray:
        return self.outgoing[index].similarity(perms[index + 1] if index + 1 < len(perms) else None)

    def similarity(self, index: int, perms) -> np.ndarray:
        return self.incoming_similarity(index, perms) + self.outgoing_similarity(index, perms)

    def squared_distance(self, perms) -> float:
        """The squared distance to q_B aligned by ``perms``, gathering each layer's rows and columns
        (cheaper than permuting all of q_B)."""
        units = [slice(None), *perms, slice(None)]  # the input and the output stay in place
        total = 0.0
        for index, (rows, columns) in enumerate(zip(units[1:], units[:-1])):
            for a, b in self.sets:
                (Wa, ba), (Wb, bb) = a[index], b[index]
                total += np.sum((Wa - Wb[rows][:, columns]) ** 2) + np.sum((ba - bb[rows]) ** 2)
        return float(total)


def _incoming_matching(pair: _Pair) -> list[np.ndarray]:
    perms = identity_permutations(pair.qb)
    for index in range(len(perms)):
        perms[index] = _assign(pair.incoming_similarity(index, perms))
    return perms


def _outgoing_matching(pair: _Pair) -> list[np.ndarray]:
    perms = identity_permutations(pair.qb)
    for index in reversed(range(len(perms))):
        perms[index] = _assign(pair.outgoing_similarity(index, perms))
    return perms


def incoming_matching(qa: DiagonalGaussian, qb: DiagonalGaussian, objective: str = "w2") -> list[np.ndarray]:
    """One forward pass: each layer's permutation from its incoming weights alone, given the layers
    before it. The inputs are never permuted, so a permuted copy of q_A is recovered exactly."""
    return _incoming_matching(_Pair(qa, qb, objective))


def outgoing_matching(qa: DiagonalGaussian, qb: DiagonalGaussian, objective: str = "w2") -> list[np.ndarray]:
    """The same pass backwards: each layer's permutation from its outgoing weights alone, given the
    layers after it (the outputs are never permuted either)."""
    return _outgoing_matching(_Pair(qa, qb, objective))


_START_MATCHINGS = {
    "identity": lambda pair: identity_permutations(pair.qb),
    "incoming": _incoming_matching,
    "outgoing": _outgoing_matching,
}


def align(
    qa: DiagonalGaussian,
    qb: DiagonalGaussian,
    objective: str = "w2",
    max_sweeps: int = 100,
    *,
    starts: int = DEFAULT_STARTS,
    seed: int = DEFAULT_SEED,
) -> Alignment:
    """Permutations of q_B's hidden units bringing it closest to q_A, by coordinate descent.

    Each sweep passes over the hidden layers; each step solves one layer's linear assignment
    exactly with the other layers fixed, so the distance never increases. A sweep that changes
    nothing ends it (a fixed point: no single layer can improve). Coordinate descent finds a local
    minimum, so with two or more hidden layers it runs ``starts`` descents (at most
    :data:`MAX_STARTS`) and keeps the closest result (the first of equals):

    1. three in layer order 0, 1, … from the identity (so the result is never farther than the
       unaligned q_B), :func:`incoming_matching` and :func:`outgoing_matching` (each recovers a
       permuted copy of q_A exactly): ``starts=3`` runs these alone;
    2. three from the same starts, sweeping the layers backwards first, then in a random order
       each sweep, as Git Re-Basin's weight matching does (with two hidden layers: layer 1 first);
    3. the rest in turn: a Git Re-Basin restart (the identity, a random layer order each sweep), and
       a local search step: one of the four closest distinct results so far with a random 10–50 %
       of one layer's units moved one place round a cycle (:func:`_reshuffled`), that layer solved
       last in the first sweep. The restarts find other basins, the steps search near the best.

    The search stops early once :data:`SAME_ENDS` descents in a row end at the closest distance so far
    (one basin: a permuted copy, or an easy pair); ``Alignment.starts`` counts the descents run.

    Random choices come from ``seed``: the same call gives the same result, and more starts
    repeat the fewer's descents first, so they never end farther. One hidden layer is a single
    exact assignment: one descent, from the identity."""
    _check_pair(qa, qb, objective)
    _check_whole("max_sweeps", max_sweeps, 1)
    _check_whole("starts", starts, 1, MAX_STARTS)
    _check_whole("seed", seed, 0)
    pair = _Pair(qa, qb, objective)
    layers, rng = len(qa.hidden), np.random.default_rng(seed)
    count = starts if layers > 1 else 1
    points = {name: match(pair) for name, match in list(_START_MATCHINGS.items())[:count]}
    found: list[Alignment] = []
    for number in range(count):
        perms, orders, name = _start(number, layers, points, found, rng)
        found.append(_descend(pair, perms, orders, max_sweeps, name))
        if _one_basin(found):
            break
    best = min(found, key=lambda result: result.history[-1])  # the first of equals
    return dataclasses.replace(best, starts=len(found))


def _one_basin(found: list[Alignment]) -> bool:
    """Whether the last :data:`SAME_ENDS` descents, from different starts and orders, all ended at the closest
    distance so far: the pair has one basin near the best (a permuted copy, or an easy pair), and more
    descents would find it again."""
    if len(found) < SAME_ENDS:
        return False
    best = min(result.history[-1] for result in found)
    return all(result.history[-1] <= best * (1 + TIE_TOLERANCE) for result in found[-SAME_ENDS:])


def _check_whole(name: str, value, low: int, high: float = math.inf) -> None:
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
        bounds = f">= {low}" if high == math.inf else f"from {low} to {high}"
        raise ValueError(f"{name} must be a whole number {bounds} (got {value!r})")


def _start(
    number: int, layers: int, points: dict, found: list[Alignment], rng: np.random.Generator
) -> tuple[list[np.ndarray], Iterator, str]:
    """Descent ``number``'s first permutations, its layer order for each sweep and its name (see align)."""
    if number >= 2 * len(START_POINTS):
        if number % 2 == 0:
            return points["identity"], _random_orders(layers, rng), f"restart {number} in random orders"
        closest = _closest_distinct(found)
        perms, moved = _reshuffled(closest[rng.integers(len(closest))].perms, rng)
        return perms, _orders_after_reshuffle(layers, moved, rng), f"local-search step {number}"
    name = START_POINTS[number % len(START_POINTS)]
    if number < len(START_POINTS):
        return points[name], itertools.repeat(range(layers)), name
    backwards = itertools.chain([range(layers - 1, -1, -1)], _random_orders(layers, rng))
    return points[name], backwards, f"{name}, backwards first"


def _closest_distinct(found: list[Alignment], count: int = 4) -> list[Alignment]:
    """The ``count`` closest results at different distances: the local search's places to step from."""
    distinct: list[Alignment] = []
    for result in sorted(found, key=lambda result: result.history[-1]):
        if all(abs(result.history[-1] - kept.history[-1]) > TIE_TOLERANCE * kept.history[-1] for kept in distinct):
            distinct.append(result)
        if len(distinct) == count:
            break
    return distinct


def _random_orders(layers: int, rng: np.random.Generator) -> Iterator:
    return (rng.permutation(layers) for _ in itertools.count())


def _reshuffled(perms, rng: np.random.Generator) -> tuple[list[np.ndarray], int]:
    """``perms`` with a random 10–50 % (at least two) of one random layer's units moved one place
    round a random cycle: a start near a local minimum, but off it. Also returns that layer."""
    perms = [perm.copy() for perm in perms]
    moved = int(rng.integers(len(perms)))
    width = len(perms[moved])
    units = rng.choice(width, min(width, max(2, round(width * rng.uniform(0.1, 0.5)))), replace=False)
    perms[moved][units] = perms[moved][np.roll(units, 1)]
    return perms, moved


def _orders_after_reshuffle(layers: int, moved: int, rng: np.random.Generator) -> Iterator:
    """Random orders, the first sweep solving the reshuffled layer last: solved first, with its
    neighbours as they were, it would only move back."""
    first = [index for index in rng.permutation(layers) if index != moved] + [moved]
    return itertools.chain([first], _random_orders(layers, rng))


def _descend(pair: _Pair, perms, orders: Iterator, max_sweeps: int, start: str) -> Alignment:
    perms = list(perms)
    current = pair.squared_distance(perms)
    history = [current]
    # A layer solved since its neighbours last moved would get the same assignment again: skip it.
    unsettled = set(range(len(perms)))
    converged, sweeps = False, 0
    while sweeps < max_sweeps and not converged:
        sweeps += 1
        converged = True
        for index in next(orders):
            if index not in unsettled:
                continue
            unsettled.discard(index)
            similarity = pair.similarity(index, perms)
            proposed = _assign(similarity)
            if _improves(similarity, perms[index], proposed):
                perms[index], converged = proposed, False
                unsettled |= {index - 1, index + 1}  # the neighbours' similarities changed
        if not converged:
            current = pair.squared_distance(perms)
        history.append(current)
    return Alignment(perms, pair.objective, sweeps, converged, history, start)


def _improves(similarity: np.ndarray, current: np.ndarray, proposed: np.ndarray) -> bool:
    """Whether ``proposed`` raises Σ_i S[i, P(i)] (the distance falls by twice as much) by more than
    rounding. Ties (equal units, e.g. all pruned to the prior) could otherwise make the solver swap
    them back and forth."""
    rows = np.arange(len(current))
    new, old = similarity[rows, proposed], similarity[rows, current]
    return new.sum() - old.sum() > TIE_TOLERANCE * np.abs(new).sum()


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


def sample_log_probs(q: DiagonalGaussian, noise, x: torch.Tensor) -> torch.Tensor:
    """Each draw's log softmax(f(x; μ + s ⊙ ε_s)), ``[S, classes, n]``. The forward pass runs in float32 (it is
    only an evaluation), a few samples at a time; q itself stays float64. The logits are formed as
    ``[S, classes, n]``: a softmax over few classes is then a pass along n, and a product with few output
    columns is MKL's slow case."""
    w = torch.addcmul(torch.from_numpy(q.mean).float(), torch.from_numpy(q.sd).float(), noise)
    layers, x = q.layout.layers(w), x.to(torch.float32)
    (W_out, b_out), samples = layers[-1], len(w)
    logits = torch.empty(samples, W_out.shape[-2], x.shape[0])
    for start in range(0, samples, SAMPLE_CHUNK):
        chunk = slice(start, start + SAMPLE_CHUNK)
        hidden = torch.relu_(mlp.forward([(W[chunk], b[chunk]) for W, b in layers[:-1]], x))
        torch.baddbmm(b_out[chunk].unsqueeze(-1), W_out[chunk], hidden.mT, out=logits[chunk])
    return torch.log_softmax(logits, dim=-2)


def _marginal(per_draw: torch.Tensor) -> torch.Tensor:
    """log (1/S) Σ_s p_s from the draws' log probabilities ``[S, classes, n]``, as ``[n, classes]``."""
    return (torch.logsumexp(per_draw, dim=0) - math.log(len(per_draw))).T


def predictive_log_probs(q: DiagonalGaussian, noise, x: torch.Tensor) -> torch.Tensor:
    """log of the marginal predictive (1/S) Σ_s softmax(f(x; μ + s ⊙ ε_s)), ``[n, classes]``."""
    return _marginal(sample_log_probs(q, noise, x))


class PointScore(NamedTuple):
    """The marginal predictive at one q: its NLL L in nats per point, its accuracy, and each draw's influence on
    L, g_s = (1/n) Σ_n p_s(y_n | x_n) / p̄(y_n | x_n). To first order L moves by −(1/S) Σ_s (g_s − 1) as the
    draws do, so L's Monte-Carlo error is sd(g)/√S (:func:`loss_error`)."""

    loss: float
    accuracy: float
    influence: np.ndarray  # [S]


def evaluate(q: DiagonalGaussian, noise, x: torch.Tensor, y: torch.Tensor) -> PointScore:
    """NLL of the marginal predictive in nats per point on (x, y), its accuracy and the draws' influence on it."""
    with torch.inference_mode():
        per_draw = sample_log_probs(q, noise, x)
        log_probs = _marginal(per_draw)
        truth = log_probs.gather(1, y[:, None])[:, 0]  # [n]
        on_truth = per_draw.gather(1, y[None, None, :].expand(len(noise), 1, -1))[:, 0]  # [S, n]
        influence = torch.exp(on_truth.double() - truth.double()).mean(1)
    accuracy = (log_probs.argmax(1) == y).float().mean()
    return PointScore(float(-truth.mean()), float(accuracy), influence.numpy())


def loss_error(influences, weights=None) -> float:
    """Monte-Carlo standard error of Σ_k a_k L_k (``weights`` a, default one point), L_k the NLLs at points scored
    with the same draws (common random numbers: their errors are correlated, and the combination's is the sd of
    Σ_k a_k g_k over the draws /√S). One draw: NaN."""
    influences = np.atleast_2d(np.asarray(influences, dtype=np.float64))
    weights = np.ones(len(influences)) if weights is None else np.asarray(weights, dtype=np.float64)
    combined = weights @ influences
    return float(combined.std(ddof=1) / math.sqrt(combined.size)) if combined.size > 1 else math.nan


def path(qa: DiagonalGaussian, qb: DiagonalGaussian, ts, noise, x, y) -> dict:
    """Loss and accuracy of the marginal predictive along (1 − t)q_A + t q_B for each t in ``ts``."""
    return paths(qa, {"path": qb}, ts, noise, x, y)["path"]


def paths(qa: DiagonalGaussian, ends: dict, ts, noise, x, y, progress=None) -> dict:
    """:func:`path` from q_A to each of ``ends`` (name -> q_B), each point evaluated once: q_A itself (t = 0)
    for every path, and an end equal to an earlier one (weight matching and W₂ usually find the same
    permutations) shares that one's path. Each path: t, loss, accuracy and the draws' influence on each point's
    loss ``[len(t), S]`` (:class:`PointScore`). ``progress(done, total)`` after each path."""
    ts = [float(t) for t in ts]
    start = evaluate(qa, noise, x, y) if ts and ts[0] == 0.0 else None
    found: dict = {}
    for done, (name, end) in enumerate(ends.items(), 1):
        same = next((other for other, q in ends.items() if other in found and _same(q, end)), None)
        if same is not None:
            found[name] = found[same]
        else:
            rows = [
                start if t == 0.0 and start is not None else evaluate(interpolate(qa, end, t), noise, x, y) for t in ts
            ]
            found[name] = {
                "t": ts,
                "loss": [r.loss for r in rows],
                "accuracy": [r.accuracy for r in rows],
                "influence": np.stack([r.influence for r in rows]),
            }
        if progress is not None:
            progress(done, len(ends))
    return {name: dict(path) for name, path in found.items()}


def _same(qa: DiagonalGaussian, qb: DiagonalGaussian) -> bool:
    return np.array_equal(qa.mean, qb.mean) and np.array_equal(qa.sd, qb.sd)


def barrier(ts, values, higher_is_worse: bool = True) -> float:
    """Height of the barrier along a path: max_t [v(t) − ((1 − t)v(0) + t·v(1))] for a loss (for an
    accuracy, the largest drop below the straight line). 0 when the path never rises above it."""
    rise = _rise_above_line(ts, values)
    return float(max((rise if higher_is_worse else -rise).max(), 0.0))


def _rise_above_line(ts, values) -> np.ndarray:
    """v(t) − ((1 − t)v(0) + t·v(1)) at each t."""
    ts, values = np.asarray(ts, dtype=np.float64), np.asarray(values, dtype=np.float64)
    if ts.ndim != 1 or ts.shape != values.shape or ts.size < 2 or ts[0] != 0 or ts[-1] != 1:
        raise ValueError("a barrier needs values at points t from 0 to 1 (first 0, last 1)")
    return values - ((1 - ts) * values[0] + ts * values[-1])


def barrier_error(ts, values, influences) -> float:
    """Monte-Carlo standard error of :func:`barrier` of a loss: that of v(t*) − ((1 − t*)v(0) + t*·v(1)) at its
    largest point t*, from the draws' ``influences`` ``[len(t), S]`` on each point (:func:`loss_error`)."""
    top, ts = int(np.argmax(_rise_above_line(ts, values))), np.asarray(ts, dtype=np.float64)
    weights = np.zeros(len(ts))
    weights[top] += 1.0
    weights[0] -= 1 - ts[top]
    weights[-1] -= ts[top]
    return loss_error(influences, weights)
