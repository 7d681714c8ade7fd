"""Weight-space symmetries of ReLU MLPs, taken out and measured (docs/science.md, § Symmetry removal, § Nearest equivalent mode).

A network is a list of layers ``[(W₁, b₁), …, (W_L, b_L)]`` of float64 arrays, ``W_l`` of shape
``(..., d_l, d_{l−1})`` and ``b_l`` of shape ``(..., d_l)`` (the views :class:`symlab.lib.mlp.Layout`
gives of a flat parameter vector; :func:`symlab.lib.mlp.forward` runs it): leading dimensions are a
batch of networks, so thousands of small nets are handled at once.

- Permutation removal: sort each hidden layer's units by a key, moving the next layer's columns.
- Scaling removal: unit-norm incoming weights, or the min-mass problem (Laurent et al. §3.6):
  minimise the mass Σ_l Σ_ij W_ij² exp(2(λ_i^l − λ_j^{l−1})) over hidden units' log-scales λ,
  strictly convex in λ, solved by Newton's method.
- Nearest equivalent mode of a one-hidden-layer net and Gelberg's Thm 3.1 bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from symlab.lib.mlp import unit_rows
from symlab.lib.options import SORT_KEYS


def as_layers(layers) -> list[tuple[np.ndarray, np.ndarray]]:
    """A float64 copy of ``layers``, checked for matching shapes."""
    out = [(np.array(W, dtype=np.float64), np.array(b, dtype=np.float64)) for W, b in layers]
    if not out:
        raise ValueError("a network needs at least one layer")
    for index, (W, b) in enumerate(out):
        if W.ndim < 2 or b.shape != W.shape[:-1]:
            raise ValueError(f"layer {index}: W must be (..., out, in) and b (..., out); got {W.shape} and {b.shape}")
        if index and W.shape[-1] != out[index - 1][0].shape[-2]:
            raise ValueError(
                f"layer {index} takes {W.shape[-1]} inputs but layer {index - 1} has "
                f"{out[index - 1][0].shape[-2]} units"
            )
        if not (np.all(np.isfinite(W)) and np.all(np.isfinite(b))):
            raise ValueError(f"layer {index} has non-finite weights")
    return out


def layer_masses(layers) -> np.ndarray:
    """Each layer's part of the :func:`mass`: Σ_ij (W^l_ij)², per network, shape ``(..., L)`` (layer l last)."""
    return np.stack([np.sum(W**2, axis=(-2, -1)) for W, _ in layers], axis=-1)


def mass(layers) -> np.ndarray:
    """Σ of squared weights, biases excluded (Laurent's "mass"), per network: the layers' masses summed."""
    return layer_masses(layers).sum(axis=-1)


def flat_norm(layers) -> np.ndarray:
    """‖w‖ over all parameters, biases included, per network."""
    return np.sqrt(sum(np.sum(W**2, axis=(-2, -1)) + np.sum(b**2, axis=-1) for W, b in layers))


def n_parameters(layers) -> int:
    return sum(W.shape[-2] * W.shape[-1] + b.shape[-1] for W, b in layers)


# ---------------------------------------------------------------------------------------------
# Permutations
# ---------------------------------------------------------------------------------------------


def permute_units(layers, index: int, perm: np.ndarray) -> list:
    """Reorder hidden layer ``index``'s units by ``perm[..., d]`` (new unit k = old unit perm[k])."""
    out = list(layers)
    W, b = out[index]
    W_next, b_next = out[index + 1]
    out[index] = (np.take_along_axis(W, perm[..., :, None], axis=-2), np.take_along_axis(b, perm, axis=-1))
    out[index + 1] = (np.take_along_axis(W_next, perm[..., None, :], axis=-1), b_next)
    return out


def sort_key(layers, index: int, key: str) -> np.ndarray:
    """The per-unit value hidden layer ``index`` is sorted by."""
    if key == "first_in":  # the weight from the first input (Laurent et al. App. C.2)
        return layers[index][0][..., :, 0]
    if key == "max_in":  # the largest incoming weight (their §5.2: the most stable in training)
        return layers[index][0].max(axis=-1)
    if key == "first_out":  # the weight to the next layer's first unit (their Fig. 1)
        return layers[index + 1][0][..., 0, :]
    raise ValueError(f"sort key must be one of {SORT_KEYS}, got {key!r}")


def sorting_permutations(layers, key: str = "first_in") -> tuple[list, list[np.ndarray]]:
    """Permutation removal: every hidden layer's units in ascending order of ``key``.
    Returns the sorted network and each hidden layer's permutation (:func:`sorting_orders`)."""
    layers = as_layers(layers)
    perms = sorting_orders(layers, key)
    for index, perm in enumerate(perms):
        layers = permute_units(layers, index, perm)
    return layers, perms


def sorting_orders(layers, key: str = "first_in") -> list[np.ndarray]:
    """Each hidden layer's sorting permutation (:func:`sorting_permutations`), without building the sorted
    network: cheap enough for every step of a training run. ``layers`` as they are (numpy, any float dtype).

    Input-side keys go from the first hidden layer up (a layer's key depends on the order of the
    one below); ``first_out`` goes down from the last. Stable sorting makes this idempotent. Of the
    neighbouring layer's order only its first unit matters: ``first_in`` reads the weights from the unit
    sorted first below, ``first_out`` those to the unit sorted first above; ``max_in`` reads none."""
    if key not in SORT_KEYS:
        raise ValueError(f"sort key must be one of {SORT_KEYS}, got {key!r}")
    hidden = len(layers) - 1
    perms: dict[int, np.ndarray] = {}  # by layer, filled in the order the key needs
    for index in reversed(range(hidden)) if key == "first_out" else range(hidden):
        if key == "max_in":
            values = layers[index][0].max(axis=-1)
        elif key == "first_in":
            first = np.zeros(layers[index][0].shape[:-2], dtype=np.int64) if index == 0 else perms[index - 1][..., 0]
            values = np.take_along_axis(layers[index][0], first[..., None, None], axis=-1)[..., 0]
        else:
            last = index == hidden - 1
            first = np.zeros(layers[index + 1][0].shape[:-2], dtype=np.int64) if last else perms[index + 1][..., 0]
            values = np.take_along_axis(layers[index + 1][0], first[..., None, None], axis=-2)[..., 0, :]
        perms[index] = np.argsort(values, axis=-1, kind="stable")
    return [perms[index] for index in range(hidden)]


def sort_units(layers, key: str = "first_in") -> list:
    return sorting_permutations(layers, key)[0]


# ---------------------------------------------------------------------------------------------
# Scalings
# ---------------------------------------------------------------------------------------------


def scale_units(layers, log_scales) -> list:
    """Multiply hidden layer l's unit i by e^{λ_i^l}: incoming weights and bias times e^{λ}, outgoing
    weights times e^{−λ}. ReLU is positively homogeneous, so the function is unchanged."""
    layers = as_layers(layers)
    if len(log_scales) != len(layers) - 1:
        raise ValueError(f"need log-scales for {len(layers) - 1} hidden layers, got {len(log_scales)}")
    out = []
    below = None
    for index, (W, b) in enumerate(layers):
        above = np.asarray(log_scales[index], dtype=np.float64) if index < len(layers) - 1 else None
        factor = np.ones(W.shape)
        if above is not None:
            factor = factor * np.exp(above)[..., :, None]
            b = b * np.exp(above)
        if below is not None:
            factor = factor * np.exp(-below)[..., None, :]
        out.append((W * factor, b))
        below = above
    return out


def normalise_units(layers, norm: float = 1.0) -> list:
    """Scaling removal by normalisation: every hidden unit's incoming weights (bias excluded) get
    norm ``norm`` (Neyshabur et al. 2015, Laurent et al. App. C.2); units with no incoming weight
    are left alone. Layer by layer from the input, as each scaling changes the next layer's rows."""
    if not (math.isfinite(norm) and norm > 0):
        raise ValueError(f"norm must be a finite number > 0, got {norm!r}")
    layers = as_layers(layers)
    for index in range(len(layers) - 1):
        (W, b), (W_next, b_next) = layers[index], layers[index + 1]
        row_norm = np.linalg.norm(W, axis=-1)
        log_scale = np.where(row_norm > 0, np.log(norm) - np.log(np.where(row_norm > 0, row_norm, 1.0)), 0.0)
        # Only this layer's units move: the two weight matrices they touch, not the whole network per layer.
        up, down = np.exp(log_scale), np.exp(-log_scale)
        layers[index] = (W * up[..., :, None], b * up)
        layers[index + 1] = (W_next * down[..., None, :], b_next)
    return layers


@dataclass(frozen=True)
class MinMass:
    layers: list  # the rescaled networks (degenerate units at scale 1: see min_mass)
    log_scales: list  # λ per hidden layer, shape (..., d_l)
    mass_before: np.ndarray  # per network
    mass_after: np.ndarray  # per network: the infimum of the mass over rescalings
    mass_of_layers: np.ndarray  # per network: the mass of ``layers``; above the infimum where units are degenerate
    iterations: int
    converged: np.ndarray  # per network: relative gradient below the tolerance
    gradient: np.ndarray  # per network: max |∂mass/∂λ| / mass at the end
    degenerate: np.ndarray  # per network: how many units are degenerate (the infimum is approached, not reached)

    @property
    def degenerate_units(self) -> int:
        return int(np.sum(self.degenerate))


def _mass_terms(squares, log_scales):
    """E_l = W_l² exp(2(λ_l[i] − λ_{l−1}[j])) for every layer (λ of inputs and outputs are 0)."""
    terms, below = [], None
    for index, sq in enumerate(squares):
        exponent = np.zeros(sq.shape)
        if index < len(squares) - 1:
            exponent = exponent + 2 * log_scales[index][..., :, None]
        if below is not None:
            exponent = exponent - 2 * below[..., None, :]
        terms.append(sq * np.exp(exponent))
        below = log_scales[index] if index < len(squares) - 1 else None
    return terms


def degenerate_units(squares) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per hidden layer, masks ``(B, d_l)`` of the units the mass has no minimum for: ``rising`` units, whose
    every nonzero incoming weight comes from a rising unit (or that have none: a dead or constant unit), and
    ``falling`` units, whose every nonzero outgoing weight goes to a falling unit (or that have none).

    Scaling a rising unit up takes its outgoing terms toward 0 at no cost, as its incoming terms are 0 or
    fall faster (its rising sources run off faster: rates that shrink with depth); a falling unit scaled down
    does the same for its incoming terms. The mass's infimum is the minimum over the other units of the terms
    that touch no degenerate unit. A unit that would both rise and fall counts as rising."""
    hidden = len(squares) - 1
    rising: dict[int, np.ndarray] = {}  # by layer: from the first up, then falling from the last down
    falling: dict[int, np.ndarray] = {}
    for index in range(hidden):
        incoming = squares[index] if index == 0 else squares[index] * ~rising[index - 1][:, None, :]
        rising[index] = incoming.sum(-1) == 0
    for index in reversed(range(hidden)):
        outgoing = squares[index + 1] if index == hidden - 1 else squares[index + 1] * ~falling[index + 1][:, :, None]
        falling[index] = (outgoing.sum(-2) == 0) & ~rising[index]
    return [rising[index] for index in range(hidden)], [falling[index] for index in range(hidden)]


def _terms_kept(squares, degenerate) -> list[np.ndarray]:
    """The squares with every term touching a degenerate unit set to 0 (the terms that vanish in the limit)."""
    kept = []
    for index, sq in enumerate(squares):
        keep = np.ones(sq.shape, dtype=bool)
        if index < len(degenerate):
            keep &= ~degenerate[index][:, :, None]
        if index > 0:
            keep &= ~degenerate[index - 1][:, None, :]
        kept.append(np.where(keep, sq, 0.0))
    return kept


def _mass_gradient(terms, sizes) -> np.ndarray:
    """∂mass/∂λ, (B, H) in the flat λ, H = Σ hidden widths: each unit's incoming minus outgoing terms."""
    return np.concatenate([2 * (terms[i].sum(-1) - terms[i + 1].sum(-2)) for i in range(len(sizes))], axis=1)


def _newton_step(terms, sizes, grad, free) -> np.ndarray:
    """−H⁻¹g per network; units that are not free have g = 0 and keep a zero step.

    The Hessian's diagonal is 4(incoming + outgoing terms); λ_l and λ_{l+1} also meet in E_{l+1}, and no other
    two layers meet. H is block tridiagonal, each layer's own block diagonal, so it is solved by eliminating the
    layers in turn: (Σ d_l)³ work and (Σ d_l)² memory become Σ d_l³ and Σ d_l², which is what makes a deep
    network's analysis affordable. With one hidden layer H is diagonal.
    """
    diag = np.concatenate([4 * (terms[i].sum(-1) + terms[i + 1].sum(-2)) for i in range(len(sizes))], axis=1)
    diag = np.where(free, diag, 1.0)
    if len(sizes) == 1:
        return -grad / diag
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    spans = [slice(offsets[i], offsets[i + 1]) for i in range(len(sizes))]
    eliminated = []  # per layer but the last: S⁻¹Cᵀ and S⁻¹y, for the way back up
    schur: np.ndarray | None = None  # None: layer 1's block, its diagonal, is its own Schur complement
    rhs = grad[:, spans[0]]
    for index in range(len(sizes) - 1):
        below, above = free[:, spans[index]], free[:, spans[index + 1]]
        coupling = -4 * terms[index + 1] * (above[:, :, None] & below[:, None, :])  # C: (B, d_{l+1}, d_l)
        coupling_t = np.swapaxes(coupling, -1, -2)
        if schur is None:
            inverse_ct, inverse_y = coupling_t / diag[:, spans[index], None], rhs / diag[:, spans[index]]
        else:
            solved = np.linalg.solve(schur, np.concatenate([coupling_t, rhs[..., None]], axis=-1))
            inverse_ct, inverse_y = solved[..., :-1], solved[..., -1]
        eliminated.append((inverse_ct, inverse_y))
        schur = -(coupling @ inverse_ct)
        units = np.arange(sizes[index + 1])
        schur[:, units, units] += diag[:, spans[index + 1]]
        rhs = grad[:, spans[index + 1]] - (coupling @ inverse_y[..., None])[..., 0]
    assert schur is not None  # two layers or more: the loop formed it
    x = np.linalg.solve(schur, rhs[..., None])[..., 0]
    solution = [x]
    for inverse_ct, inverse_y in reversed(eliminated):
        x = inverse_y - (inverse_ct @ x[..., None])[..., 0]
        solution.append(x)
    return -np.concatenate(solution[::-1], axis=1)


def min_mass(layers, tol: float = 1e-10, max_iter: int = 100) -> MinMass:
    """The infimum of the mass over rescalings of each network, by damped Newton in the log-scales.

    The mass is a sum of exponentials of affine functions of λ: smooth and strictly convex when
    every unit has incoming and outgoing weight, so Newton with backtracking converges to the
    unique optimum. Converged means max|∂mass/∂λ| ≤ ``tol``·mass. :func:`degenerate_units` (a dead unit,
    one with no outgoing weight, and those cut off behind them) have no optimum: their terms vanish as their
    scales run off, so ``mass_after`` is the minimum of the other terms, the infimum, approached but not
    reached. ``layers`` keeps those units at scale 1; its mass is ``mass_of_layers``.
    """
    layers = as_layers(layers)
    if len(layers) < 2:
        raise ValueError("min-mass needs at least one hidden layer")
    batch_shape = layers[0][0].shape[:-2]
    flat = [(W.reshape(-1, *W.shape[-2:]), b.reshape(-1, b.shape[-1])) for W, b in layers]
    rising, falling = degenerate_units([W**2 for W, _ in flat])
    degenerate = [r | f for r, f in zip(rising, falling)]
    squares = _terms_kept([W**2 for W, _ in flat], degenerate)
    sizes = [W.shape[-2] for W, _ in flat[:-1]]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    batch, total = squares[0].shape[0], sum(sizes)
    free = ~np.concatenate(degenerate, axis=1)

    def unflatten(lam):
        return [lam[:, offsets[i] : offsets[i + 1]] for i in range(len(sizes))]

    def objective(lam, rows=slice(None)):
        return sum(t.sum((-2, -1)) for t in _mass_terms([sq[rows] for sq in squares], unflatten(lam)))

    lam = np.zeros((batch, total))
    value = objective(lam)
    iterations = 0
    for iterations in range(1, max_iter + 1):
        terms = _mass_terms(squares, unflatten(lam))
        grad = np.where(free, _mass_gradient(terms, sizes), 0.0)
        relative = np.abs(grad).max(-1) / np.maximum(value, np.finfo(float).tiny)
        active = relative > tol
        if not active.any():
            iterations -= 1
            break
        rows = np.flatnonzero(active)
        step = _newton_step([t[rows] for t in terms], sizes, grad[rows], free[rows])
        lam[rows] = _backtrack(
            lam[rows], step, value[rows], grad[rows], lambda trial, subset: objective(trial, rows[subset])
        )
        value = objective(lam)
    grad = _mass_gradient(_mass_terms(squares, unflatten(lam)), sizes)
    relative = np.abs(np.where(free, grad, 0.0)).max(-1) / np.maximum(value, np.finfo(float).tiny)
    log_scales = [s.reshape(*batch_shape, width) for s, width in zip(unflatten(lam), sizes)]
    result_layers = scale_units(layers, log_scales)
    return MinMass(
        result_layers,
        log_scales,
        mass(layers),
        value.reshape(batch_shape),
        mass(result_layers),
        iterations,
        (relative <= tol).reshape(batch_shape),
        relative.reshape(batch_shape),
        (~free).sum(-1).reshape(batch_shape),
    )


def _backtrack(lam, step, value, grad, objective, shrink=0.5, armijo=1e-4, tries=60):
    """Per network, the largest t in 1, ½, ¼, … with sufficient decrease (Armijo);
    ``objective(λ, mask)`` evaluates the networks selected by ``mask``."""
    t = np.ones(lam.shape[0])
    slope = np.sum(grad * step, axis=-1)
    pending = np.ones(lam.shape[0], dtype=bool)
    for _ in range(tries):
        trial = lam[pending] + t[pending, None] * step[pending]
        with np.errstate(over="ignore"):
            # The slack lets a full Newton step through near the optimum, where the decrease it
            # brings is smaller than the rounding of the mass itself.
            slack = 8 * np.finfo(float).eps * np.abs(value[pending])
            accepted = objective(trial, pending) <= value[pending] + armijo * t[pending] * slope[pending] + slack
        index = np.flatnonzero(pending)
        pending[index[accepted]] = False
        if not pending.any():
            break
        t[pending] *= shrink
    t[pending] = 0.0  # no decrease found: stay (the gradient test then reports no convergence)
    return lam + t[:, None] * step


# ---------------------------------------------------------------------------------------------
# Equivalent modes of a one-hidden-layer network (Gelberg Thm 3.1)
# ---------------------------------------------------------------------------------------------


def unit_vectors(layers) -> np.ndarray:
    """Each hidden unit of a one-hidden-layer net as one row: incoming weights, bias, outgoing
    weights. Permuting units permutes these rows; the output bias is untouched."""
    layers = as_layers(layers)
    if len(layers) != 2:
        raise ValueError(f"expected a one-hidden-layer network (2 layers), got {len(layers)} layers")
    return unit_rows(layers, 0)


@dataclass(frozen=True)
class NearestMode:
    distance: float  # ‖g w − w‖ for the nearest non-trivial g
    relative: float  # distance / ‖w‖
    bound: float  # Thm 3.1: 2D / log n!, relative to ‖w‖
    pair: tuple[int, int]  # the transposition g
    width: int
    n_parameters: int

    @property
    def vacuous(self) -> bool:
        """The bound says nothing: any permutation moves w by at most ‖πw‖ + ‖w‖ = 2‖w‖."""
        return self.bound >= TRIVIAL_BOUND

    @property
    def below_bound(self) -> bool | None:
        """Whether the nearest copy is within the bound; None where the bound is vacuous (always true there)."""
        return None if self.vacuous else bool(self.relative <= self.bound)


TRIVIAL_BOUND = 2.0  # ‖πw − w‖ ≤ 2‖w‖ for every permutation π


def theorem_bound(width: int, n_params: int) -> float:
    """Gelberg Thm 3.1: some non-trivial permutation moves w by at most (2D / log n!)‖w‖."""
    if width < 2:
        return math.inf  # no non-trivial permutation
    return 2.0 * n_params / math.lgamma(width + 1)


def nearest_equivalent_mode(
    layers, chunk: int = 1024, index: int | None = None, n_params: int | None = None
) -> NearestMode:
    """The permuted copy of a one-hidden-layer net nearest to it; for a deeper net, the nearest among
    the permutations of hidden layer ``index``.

    ‖πw − w‖² = Σ_j ‖u_{π(j)} − u_j‖² over the units' rows u (incoming weights, bias, outgoing weights)
    sums over π's cycles, fixed points cost nothing, and every step of a cycle joins two distinct units,
    so a cycle of length m ≥ 2 costs at least m·d²_min: the best non-trivial π is the transposition of
    the two closest units (distance √2·d_min). The bound's proof packs the orbit of any group acting by
    isometries on the D parameters, so one layer's n! permutations of a deeper net obey it too.
    Pairwise distances in row blocks keep memory at ``chunk`` × width. ``n_params``: the bound's D when the
    net has fewer parameters than its layers' shapes (a bias-free layer's zeros are not parameters).
    """
    layers = as_layers(layers)
    if index is None:
        units = unit_vectors(layers)
    elif 0 <= index < len(layers) - 1:
        units = unit_rows(layers, index)
    else:
        raise ValueError(f"hidden layer {index} does not exist: the net has {len(layers) - 1}")
    if units.ndim != 2:
        raise ValueError("nearest_equivalent_mode takes one network, not a batch")
    n_params = n_parameters(layers) if n_params is None else n_params
    return _nearest_copy(units, float(flat_norm(layers)), n_params, chunk)


def nearest_equivalent_modes(layers, n_params: int | None = None) -> list[NearestMode]:
    """:func:`nearest_equivalent_mode` of every hidden layer of one network, the network read and its norm taken
    once (per layer, they would cost as much as the whole network each: a deep network's square)."""
    layers = as_layers(layers)
    if layers[0][0].ndim != 2:
        raise ValueError("nearest_equivalent_modes takes one network, not a batch")
    n_params = n_parameters(layers) if n_params is None else n_params
    norm = float(flat_norm(layers))
    return [_nearest_copy(unit_rows(layers, index), norm, n_params) for index in range(len(layers) - 1)]


def _nearest_copy(units: np.ndarray, norm: float, n_params: int, chunk: int = 1024) -> NearestMode:
    """The nearest copy among the permutations of the units whose rows are ``units`` (of a network of norm
    ``norm`` with ``n_params`` parameters)."""
    width = units.shape[0]
    if width < 2:
        return NearestMode(math.inf, math.inf, math.inf, (0, 0), width, n_params)
    # Centred: distances are unchanged, and a component shared by all units (a large common bias,
    # say) no longer swamps the differences in the expanded form below.
    centred = units - units.mean(axis=0)
    squared = np.sum(centred**2, axis=1)
    best, pair = math.inf, (0, 1)
    for start in range(0, width, chunk):
        rows = slice(start, min(start + chunk, width))
        gap = squared[rows, None] + squared[None, :] - 2 * centred[rows] @ centred.T
        gap[np.arange(gap.shape[0]), np.arange(start, rows.stop)] = np.inf
        i, j = np.unravel_index(np.argmin(gap), gap.shape)
        if gap[i, j] < best:
            best, pair = gap[i, j], (start + int(i), int(j))
    # Recompute the winner directly: the expanded form above loses digits to cancellation.
    distance = math.sqrt(2.0) * float(np.linalg.norm(units[pair[0]] - units[pair[1]]))
    relative = distance / norm if norm > 0 else math.inf
    first, second = sorted(pair)
    return NearestMode(distance, relative, theorem_bound(width, n_params), (first, second), width, n_params)


def permutation_distance(layers_a, layers_b) -> tuple[float, np.ndarray]:
    """min over π of ‖π·w_b − w_a‖ for two one-hidden-layer nets of the same shape, a linear
    assignment over hidden units; returns the distance and π (unit k of a ↔ unit π[k] of b)."""
    units_a, units_b = unit_vectors(layers_a), unit_vectors(layers_b)
    if units_a.shape != units_b.shape or units_a.ndim != 2:
        raise ValueError(f"two single networks of the same shape needed, got {units_a.shape} and {units_b.shape}")
    cost = np.sum((units_a[:, None, :] - units_b[None, :, :]) ** 2, axis=-1)
    rows, cols = linear_sum_assignment(cost)
    output_bias = np.sum((as_layers(layers_a)[1][1] - as_layers(layers_b)[1][1]) ** 2)
    return math.sqrt(float(cost[rows, cols].sum() + output_bias)), cols


# ---------------------------------------------------------------------------------------------
# Do networks permute while training? (Laurent et al. §5.2)
# ---------------------------------------------------------------------------------------------


def successive_kendall_tau(perms: np.ndarray) -> np.ndarray:
    """Kendall's τ between each sorting permutation and the next: ``perms[T, d]`` → ``[T − 1]``
    (1 when the order of the units did not change): the mean over pairs of units of the product of
    their orders' signs, sign(r_i − r_j)·sign(r'_i − r'_j), counted exactly (no ties in a permutation)."""
    perms = np.asarray(perms)
    if perms.ndim != 2 or perms.shape[0] < 2:
        raise ValueError("need at least two permutations, as rows of a 2-D array")
    steps, units = perms.shape[0] - 1, perms.shape[1]
    taus = np.ones(steps)
    if units < 2:
        return taus
    changed = np.flatnonzero(np.any(perms[1:] != perms[:-1], axis=1))
    # τ over units, of each unit's place in the order (the inverse permutation): over places, of the
    # labels found there, it would depend on the arbitrary labels (one swap of neighbours could
    # give τ < 0).
    ranks = np.argsort(perms, axis=1).astype(np.int32)
    chunk = max(1, 2**22 // units**2)  # steps at a time: their sign matrices stay a few MB
    for start in range(0, len(changed), chunk):
        t = changed[start : start + chunk]
        before, after = (np.sign(r[:, :, None] - r[:, None, :]).astype(np.int8) for r in (ranks[t], ranks[t + 1]))
        agreement = np.einsum("tij,tij->t", before, after, dtype=np.int64)
        taus[t] = agreement / (units * (units - 1))  # every pair counted twice, (i, j) and (j, i)
    return taus
