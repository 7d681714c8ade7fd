"""Symmetrising over a subgroup of blocks of close units: an exact estimator of I_H, and the
closeness of a mean-field posterior's units (docs/science.md, § Block subgroup estimator, § Unit diagnostics).

For any subgroup H ≤ G, ELBO + I_H(θ) = ELBO_H(θ) ≤ ELBO_G(θ) ≤ log p(D), at every θ, so H may be
chosen from θ. Here H = Π_b S(B_b) permutes units only within disjoint blocks B_b of one hidden
layer (or of several non-adjacent ones: adjacent layers share a weight matrix). A hidden unit owns
its incoming row, its bias and its outgoing column, so under mean-field q the H-symmetrised
posterior factorises over blocks and, for one draw ω ~ q,

    Î_H(ω) = Σ_b [ log |B_b|! + ℓ_id − logsumexp_{π ∈ S(B_b)} ℓ_π ],   ℓ_π = −½ Σ_{j∈B} C[j, π(j)],

with C[j, k] = Σ_i (ω_ji − μ_ki)² / σ_ki² the unit cost matrix (the normalisers of q cancel: a
permutation only reorders them). Its mean over ω is I_H exactly: no permutations are sampled.

Blocks are built greedily from the Jeffreys divergence (symmetric KL) between units' factors,
J(j, k) = KL(q_j ‖ q_k) + KL(q_k ‖ q_j), so that the bound acts where equivalent copies are near:
a block of far-apart units has Î_B = log |B|! and no gradient.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from functools import cache, lru_cache

import numpy as np
import torch

from symlab.lib.gaussian import kl_to_prior
from symlab.lib.mlp import Layout, unit_rows

# A permuted term this far (in nats) below the identity's changes Î_B by less than e⁻⁴⁵·b!:
# below float64's resolution of the sum, so the block is saturated (Î_B = log b!) with no gradient.
SATURATION_MARGIN = 45.0
# A unit whose factors are on average within this KL (nats per parameter) of the prior carries no
# information from the data: "at the prior". 0.05 nats is, for instance, σ = 0.785 p (or 1.23 p) at μ = 0, or
# |μ| = 0.32 p at σ = p.
PRIOR_KL_PER_PARAMETER = 0.05


# ---------------------------------------------------------------------------------------------
# Units of a hidden layer (rows from :func:`symlab.lib.mlp.unit_rows`)


def jeffreys_matrix(mu_units: torch.Tensor, log_sd_units: torch.Tensor) -> torch.Tensor:
    """J[j, k] = KL(q_j ‖ q_k) + KL(q_k ‖ q_j) between the units' mean-field factors, in nats
    (float64; two matrix products):
    ½ Σ_i [(μ_ji − μ_ki)² (p_ji + p_ki) + v_ji p_ki + v_ki p_ji − 2], v = σ², p = 1/σ²."""
    mu, log_sd = mu_units.double(), log_sd_units.double()
    precision, variance = torch.exp(-2 * log_sd), torch.exp(2 * log_sd)
    own = (mu.square() * precision).sum(1)  # Σ_i μ_ji² p_ji
    cross_a = (mu.square() + variance) @ precision.t()  # Σ_i (μ_ji² + v_ji) p_ki
    cross_b = (mu * precision) @ mu.t()  # Σ_i μ_ji μ_ki p_ji
    total = own[:, None] + own[None, :] + cross_a + cross_a.t() - 2 * (cross_b + cross_b.t())
    matrix = 0.5 * (total - 2 * mu.shape[1])
    matrix.fill_diagonal_(0.0)
    return matrix.clamp_(min=0.0)  # rounding can leave −1e−9 where units coincide


def nearest_unit_divergences(mu_units, log_sd_units) -> torch.Tensor:
    """For each unit, the Jeffreys divergence to its nearest other unit (nats)."""
    matrix = jeffreys_matrix(mu_units, log_sd_units)
    matrix.fill_diagonal_(math.inf)
    return matrix.min(1).values


# ---------------------------------------------------------------------------------------------
# Choosing H


def greedy_blocks(divergence: np.ndarray, size: int) -> list[list[int]]:
    """Disjoint blocks of up to ``size`` mutually close units, from a symmetric divergence matrix.

    Repeatedly seeds a block with the closest pair of units not yet used, then (size > 2) adds the
    unused unit whose largest divergence to the block is smallest (complete linkage). Units left
    over form one smaller block; a single leftover unit is in no block."""
    n = divergence.shape[0]
    if size < 2 or n < 2:
        return []
    d = np.array(divergence, dtype=np.float64)
    np.fill_diagonal(d, np.inf)
    rows, cols = np.triu_indices(n, 1)
    order = np.argsort(d[rows, cols], kind="stable")
    used = np.zeros(n, dtype=bool)
    blocks = []
    for pair in order:
        j, k = rows[pair], cols[pair]
        if used[j] or used[k]:
            continue
        block = [int(j), int(k)]
        used[[j, k]] = True
        while len(block) < size and not used.all():
            linkage = d[block].max(0)
            linkage[used] = np.inf
            nearest = int(np.argmin(linkage))
            block.append(nearest)
            used[nearest] = True
        blocks.append(sorted(block))
        if n - used.sum() < 2:
            break
    return blocks


SCREEN_COORDINATES = 32  # coordinates per block in the certified screen


@lru_cache(maxsize=64)
def _row_index(layout: Layout, layer: int) -> torch.Tensor:
    """Flat indices of the unit rows: ``flat[_row_index(layout, l)]`` equals
    ``unit_rows(layout.layers(flat), l)`` without copying the other layers."""
    (w0, b0, _), (w0_out, _, _) = layout.offsets[layer], layout.offsets[layer + 1]
    fan_in, units = layout.sizes[layer], layout.sizes[layer + 1]
    rows = torch.arange(units)[:, None]
    incoming = w0 + rows * fan_in + torch.arange(fan_in)[None, :]
    outgoing = w0_out + torch.arange(layout.sizes[layer + 2])[None, :] * units + rows
    return torch.cat([incoming, b0 + rows, outgoing], dim=1)


@dataclass(frozen=True)
class BlockGroup:
    """The blocks of one size in one hidden layer: their units (n, b), and the flat indices of a few
    coordinates of each block's units (n, b, c) for the screen."""

    layer: int
    units: torch.Tensor
    screen_index: torch.Tensor

    @property
    def size(self) -> int:
        return self.units.shape[1]

    def subset(self, keep: torch.Tensor) -> BlockGroup:
        return BlockGroup(self.layer, self.units[keep], self.screen_index[keep])


@dataclass(frozen=True)
class BlockPlan:
    """H = Π_b S(B_b): its blocks, grouped by layer and size."""

    layers: tuple[int, ...]
    groups: tuple[BlockGroup, ...]

    @property
    def log_group_size(self) -> float:
        """log |H| = Σ_b log |B_b|!."""
        return sum(group.units.shape[0] * math.lgamma(group.size + 1) for group in self.groups)

    @property
    def n_blocks(self) -> int:
        return sum(group.units.shape[0] for group in self.groups)

    def blocks(self) -> dict[int, list[list[int]]]:
        """Hidden layer → its blocks as lists of units."""
        found: dict[int, list[list[int]]] = {layer: [] for layer in self.layers}
        for group in self.groups:
            found[group.layer] += group.units.tolist()
        return found


def plan_state(plan: BlockPlan) -> dict:
    """The plan as plain data for a checkpoint (tensors, ints and lists: loadable with weights_only)."""
    return {
        "layers": list(plan.layers),
        "groups": [
            {"layer": group.layer, "units": group.units.cpu(), "screen_index": group.screen_index.cpu()}
            for group in plan.groups
        ],
    }


def plan_from_state(state: dict, device) -> BlockPlan:
    """The inverse of :func:`plan_state`, on ``device``."""
    return BlockPlan(
        tuple(state["layers"]),
        tuple(
            BlockGroup(int(group["layer"]), group["units"].to(device), group["screen_index"].to(device))
            for group in state["groups"]
        ),
    )


def block_layers(layout: Layout, parity: int) -> tuple[int, ...]:
    """Hidden layers a block subgroup acts on: every other one (adjacent layers share a weight
    matrix, so blocks in both would not factorise), starting at ``parity`` (0 or 1); a network with
    one hidden layer always uses it."""
    depth = len(layout.hidden)
    start = parity % 2 if depth > 1 else 0
    return tuple(range(start, depth, 2))


def plan_blocks(layout: Layout, mu: torch.Tensor, log_sd: torch.Tensor, size: int, parity: int = 0) -> BlockPlan:
    """H(θ): greedy blocks of close units (Jeffreys divergence of q's unit factors) in the hidden
    layers :func:`block_layers` picks."""
    chosen = {}
    with torch.no_grad():
        for layer in block_layers(layout, parity):
            divergence = jeffreys_matrix(unit_rows(layout.layers(mu), layer), unit_rows(layout.layers(log_sd), layer))
            chosen[layer] = greedy_blocks(divergence.cpu().numpy(), size)
    return plan_from_blocks(layout, chosen, mu, log_sd)


def plan_from_blocks(layout: Layout, blocks_by_layer: dict[int, list[list[int]]], mu, log_sd) -> BlockPlan:
    """H from explicit blocks (hidden layer → lists of units; layers not adjacent). The screen's
    coordinates are those where the block's units differ most under q = N(μ, σ²)."""
    layers = tuple(sorted(blocks_by_layer))
    if any(b - a < 2 for a, b in zip(layers, layers[1:])):
        raise ValueError(f"blocks in adjacent hidden layers do not factorise: {layers}")
    groups = []
    for layer in layers:
        units = [unit for block in blocks_by_layer[layer] for unit in block]
        if len(units) != len(set(units)) or not all(0 <= u < layout.hidden[layer] for u in units):
            raise ValueError(f"blocks of layer {layer} must be disjoint units of that layer: {blocks_by_layer[layer]}")
        rows = _row_index(layout, layer).to(mu.device)
        for size in sorted({len(block) for block in blocks_by_layer[layer] if len(block) >= 2}):
            members = torch.tensor(
                [b for b in blocks_by_layer[layer] if len(b) == size], dtype=torch.long, device=mu.device
            )
            groups.append(BlockGroup(layer, members, _screen_index(rows[members], mu, log_sd)))
    return BlockPlan(layers, tuple(groups))


def _screen_index(index: torch.Tensor, mu, log_sd) -> torch.Tensor:
    """Per block, the coordinates with the largest Σ_pairs (μ_j − μ_k)² (1/σ_j² + 1/σ_k²)."""
    with torch.no_grad():
        means, precision = mu[index].double(), torch.exp(-2 * log_sd[index].double())
        gaps = (means[:, :, None] - means[:, None]).square() * (precision[:, :, None] + precision[:, None])
        score = gaps.sum((1, 2))  # (n, d)
        count = min(SCREEN_COORDINATES, index.shape[2])
        coordinates = score.topk(count, dim=1).indices  # (n, c)
    return index.gather(2, coordinates[:, None, :].expand(-1, index.shape[1], -1))


@cache
def _permutations(size: int, device: torch.device) -> torch.Tensor:
    """All size! permutations as rows, the identity first, kept on ``device``: on a GPU a copy at every step
    would cross the bus and wait for it."""
    return torch.tensor(list(itertools.permutations(range(size))), dtype=torch.long, device=device)


# ---------------------------------------------------------------------------------------------
# The estimator


def _costs(w, mu, log_sd, index: torch.Tensor) -> torch.Tensor:
    """C[n, j, k] = Σ_i (ω of unit j − μ of unit k)² / σ² of unit k over the coordinates ``index``
    (n, b, c) of each block, formed from differences (no expanded squares lose digits)."""
    flat = index.reshape(-1)
    units_w, units_mu, units_log_sd = (t.index_select(0, flat).view(index.shape) for t in (w, mu, log_sd))
    precision = torch.exp(-2 * units_log_sd)
    return ((units_w[:, :, None, :] - units_mu[:, None, :, :]).square() * precision[:, None, :, :]).sum(-1)


def block_log_terms(cost: torch.Tensor) -> torch.Tensor:
    """ℓ_π − ℓ_id = −½ Σ_j (C[j, π(j)] − C[j, j]) for every block and permutation π: (n, b!),
    float64, from the blocks' cost matrices (n, b, b)."""
    cost = cost.double()
    size = cost.shape[1]
    perms = _permutations(size, cost.device)  # (b!, b)
    terms = cost[:, torch.arange(size, device=cost.device), perms].sum(-1)  # (n, b!): Σ_j C[j, π(j)]
    return -0.5 * (terms - terms[:, :1])


def block_information(log_terms: torch.Tensor) -> torch.Tensor:
    """Σ over blocks of log b! − logsumexp_π(ℓ_π − ℓ_id): the blocks' Î_B for one draw."""
    return (math.log(log_terms.shape[1]) - torch.logsumexp(log_terms, 1)).sum()


def _certified_saturated(group: BlockGroup, w, mu, log_sd, identity_cost: dict[int, torch.Tensor]) -> torch.Tensor:
    """Blocks whose every permuted term is certainly below the identity's by the margin.

    Σ_j (C[j, π(j)] − C[j, j]) ≥ Σ_{j: π(j) ≠ j} (C_S[j, π(j)] − C[j, j]), where C_S sums over the
    block's screen coordinates only (its terms are ≥ 0) and C[j, j] = Σ_i ε_ji² is exact (per unit,
    from the noise). Costs O(b² c) per block instead of O(b² d)."""
    partial = _costs(w, mu, log_sd, group.screen_index).double()  # (n, b, b)
    own = identity_cost[group.layer][group.units]  # (n, b)
    excess = partial - own[:, :, None]
    size = group.size
    perms = _permutations(size, w.device)[1:]
    moved = (perms != torch.arange(size, device=w.device)).double()  # (b! − 1, b)
    bound = (excess[:, torch.arange(size, device=w.device), perms] * moved).sum(-1)  # (n, b! − 1)
    slack = 1e-5 * float(own.sum()) + 1e-6
    return (bound >= 2 * SATURATION_MARGIN + slack).all(1)


def _identity_costs(layout: Layout, noise: torch.Tensor, layers) -> dict[int, torch.Tensor]:
    """C[j, j] = Σ_i ε_ji² for every unit of the given hidden layers, in float64."""
    views = layout.layers(noise)
    costs = {}
    for layer in layers:
        (E_in, e), (E_out, _) = views[layer], views[layer + 1]
        costs[layer] = (E_in.square().sum(1) + e.square() + E_out.square().sum(0)).double()
    return costs


def _unit_parts(layout: Layout, flat: torch.Tensor, layer: int, units: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The parameters of ``units`` (a flat index tensor) in hidden layer ``layer``, as whole rows:
    incoming weights (u, fan_in), biases (u,), outgoing weights (fan_out, u)."""
    layers = layout.layers(flat)
    (W_in, b), (W_out, _) = layers[layer], layers[layer + 1]
    return W_in.index_select(0, units), b.index_select(0, units), W_out.index_select(1, units)


def _exact_costs(
    layout: Layout, group: BlockGroup, w, mu, log_sd, identity_cost: dict[int, torch.Tensor]
) -> torch.Tensor:
    """The blocks' cost matrices C (n, b, b). Off-diagonal entries C[j, (j + s) mod b] come from the
    rows of the units and of their partners s places on in the block; the diagonal C[j, j] =
    Σ_i ε_ji² does not depend on θ once ω = μ + σ ⊙ ε (so it is exact for the gradient too)."""
    units = group.units.reshape(-1)
    sampled = _unit_parts(layout, w, group.layer, units)
    size = group.size
    blocks_at = torch.arange(group.units.shape[0], device=w.device)[:, None]
    positions = torch.arange(size, device=w.device)[None, :]
    cost = torch.diag_embed(identity_cost[group.layer][group.units])  # (n, b, b), float64
    for shift in range(1, size):
        partners = group.units.roll(-shift, 1).reshape(-1)
        means = _unit_parts(layout, mu, group.layer, partners)
        log_sds = _unit_parts(layout, log_sd, group.layer, partners)
        incoming, bias, outgoing = ((x - m).square() * torch.exp(-2 * s) for x, m, s in zip(sampled, means, log_sds))
        entries = incoming.sum(1) + bias + outgoing.sum(0)
        cost = cost.index_put((blocks_at, positions, (positions + shift) % size), entries.view(-1, size).double())
    return cost


def block_mutual_info(layout: Layout, w, noise, mu, log_sd, plan: BlockPlan) -> tuple[torch.Tensor, bool]:
    """(Î_H for the draw ω = μ + σ ⊙ noise, whether it has a gradient), float64.

    Blocks the screen certifies as saturated add log b! each. The others are evaluated exactly
    without a graph; those with a non-negligible permuted term are evaluated again with autograd
    through ω, μ and log σ."""
    total = torch.zeros((), dtype=torch.float64, device=mu.device)
    pending = []
    with torch.no_grad():
        identity_cost = _identity_costs(layout, noise, plan.layers)
        for group in plan.groups:
            certified = _certified_saturated(group, w, mu, log_sd, identity_cost)
            saturated = int(certified.sum())
            uncertain = group.subset(~certified)
            if uncertain.units.shape[0]:
                log_terms = block_log_terms(_exact_costs(layout, uncertain, w, mu, log_sd, identity_cost))
                exact = (log_terms[:, 1:] < -SATURATION_MARGIN).all(1)
                saturated += int(exact.sum())
                if not bool(exact.all()):
                    pending.append(uncertain.subset(~exact))
            total += saturated * math.lgamma(group.size + 1)
    if not pending:
        return total, False
    w = torch.addcmul(mu, log_sd.exp(), noise)  # the same draw, differentiable in μ and log σ
    for group in pending:
        total = total + block_information(block_log_terms(_exact_costs(layout, group, w, mu, log_sd, identity_cost)))
    return total, True


def block_mutual_info_estimate(
    layout: Layout, mu, log_sd, plan: BlockPlan, draws: int, generator: torch.Generator
) -> dict:
    """Monte-Carlo I_H over ``draws`` draws of q (no gradient): its mean, standard error, log|H|,
    and the fraction of draws in which some block was not saturated."""
    values, active = [], 0
    with torch.no_grad():
        for _ in range(draws):
            noise = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
            w = torch.addcmul(mu, log_sd.exp(), noise)
            value, had_gradient = block_mutual_info(layout, w, noise, mu, log_sd, plan)
            values.append(float(value))
            active += had_gradient
    spread = float(np.std(values, ddof=1) / math.sqrt(draws)) if draws > 1 else None
    return {
        "mutual_info": float(np.mean(values)),
        "mutual_info_se": spread,
        "log_group_size": plan.log_group_size,
        "active": active / draws,
    }


# ---------------------------------------------------------------------------------------------
# Per-epoch diagnostics


def unit_diagnostics(layout: Layout, mu, log_sd, prior_scale: float) -> dict:
    """Per hidden layer: the min and median over units of the Jeffreys divergence to the nearest
    other unit (nats), and how many units sit at the prior (mean KL to the prior per parameter
    ≤ :data:`PRIOR_KL_PER_PARAMETER`); then the same over all hidden units."""
    by_layer, nearest_all, at_prior = [], [], 0
    with torch.no_grad():
        for layer in range(len(layout.hidden)):
            mu_units, log_sd_units = unit_rows(layout.layers(mu), layer), unit_rows(layout.layers(log_sd), layer)
            # KL(q_j ‖ N(0, p²I)) for each unit j, summed over the parameters it owns
            prior_kl = kl_to_prior(mu_units.double(), log_sd_units.double(), prior_scale)
            count = int((prior_kl <= PRIOR_KL_PER_PARAMETER * mu_units.shape[1]).sum())
            nearest = (
                nearest_unit_divergences(mu_units, log_sd_units).cpu().numpy() if mu_units.shape[0] > 1 else np.empty(0)
            )
            by_layer.append({**_spread(nearest), "units_at_prior": count})
            nearest_all.append(nearest)
            at_prior += count
    return {**_spread(np.concatenate(nearest_all)), "units_at_prior": at_prior, "by_layer": by_layer}


def _spread(nearest: np.ndarray) -> dict:
    """Min and median of nearest-unit divergences (None for a layer of one unit)."""
    if not nearest.size:
        return {"nearest_unit_kl_min": None, "nearest_unit_kl_median": None}
    return {"nearest_unit_kl_min": float(nearest.min()), "nearest_unit_kl_median": float(np.median(nearest))}
