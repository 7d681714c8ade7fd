"""Bayesian MLPs with a mean-field Gaussian posterior, and the permutation symmetry of their
hidden units (docs/science.md, § Weight-space symmetries, § MNIST Bayesian MLP, § InfoNCE over permutations).

All weights live in one flat vector laid out by :class:`symlab.lib.mlp.Layout`. A variational
posterior is a pair of flat vectors, means ``mu`` and log standard deviations ``log_sd`` (those
of a :class:`symlab.lib.gaussian.DiagonalGaussian`); a sample is ``mu + exp(log_sd) · ε``. A
permutation g of the hidden units acts on such a vector by indexing
(:func:`symlab.lib.mlp.permutation_index`), so it applies alike to weights, means and standard
deviations.

SGM trains ELBO + Î_K, the InfoNCE estimate of I(ω; g) over K − 1 random permutations
(Thm 4.3). For one hidden layer the K log-densities come from a pairwise cost matrix between
sampled and mean units (:func:`unit_cost_matrix`), not from K passes over all parameters.
"""

from __future__ import annotations

import math

import torch

from symlab.lib.mlp import Layout, permutation_index, unit_rows
from symlab.lib.options import BNN_ESTIMATORS


def sample_weights(mu, log_sd, generator: torch.Generator, return_noise=False):
    """One reparameterised draw ω = μ + σ ⊙ ε, ε ~ N(0, I) (differentiable in μ and log σ);
    with ``return_noise``, (ω, ε)."""
    noise = torch.randn(mu.shape, generator=generator, device=mu.device, dtype=mu.dtype)
    w = torch.addcmul(mu, log_sd.exp(), noise)
    return (w, noise) if return_noise else w


def negative_elbo_gradients(grad_w, perturbation, mu, sd, prior_scale: float, n_train: int, out=None):
    """Gradients of (minibatch NLL) + KL/N w.r.t. μ and log σ, given the NLL's gradient
    ``grad_w`` at ω = μ + σ ⊙ ε and the perturbation σ ⊙ ε, written out (four passes over the
    weights instead of autograd's graph): ∂/∂μ = g + μ/(p²N), ∂/∂log σ = g ⊙ σ ⊙ ε + (σ²/p² − 1)/N.
    ``grad_w`` becomes ∂/∂μ in place; ∂/∂log σ goes to ``out`` when given."""
    scale = 1.0 / (prior_scale**2 * n_train)
    grad_log_sd = torch.mul(grad_w, perturbation, out=out).addcmul_(sd, sd, value=scale).sub_(1.0 / n_train)
    return grad_w.add_(mu, alpha=scale), grad_log_sd


class NormalTable:
    """The standard normal vectors ε of one epoch's steps, read from one table instead of drawn afresh:
    step s gets the window table[o_s : o_s + n] times a random sign, with the offsets o_s distinct
    (drawn without replacement), as evolution-strategies codes do. Each step's ε is exactly N(0, I);
    two steps' windows may overlap, which correlates a coordinate of one with another coordinate of
    the other (never the same coordinate: that would take equal offsets). Drawing the table once costs
    about as much as four steps' fresh draws; a step then costs nothing (a view: −table is kept too)."""

    def __init__(self, n: int, steps: int, generator: torch.Generator, device="cpu"):
        self.n = n
        windows = max(3 * n, steps)
        table = torch.randn(n + windows, generator=generator, device=device)
        self._tables = (table, -table)
        self._offsets = torch.randperm(windows, generator=generator, device=device)[:steps].tolist()
        self._signs = torch.randint(0, 2, (steps,), generator=generator, device=device).tolist()

    def draw(self, step: int) -> torch.Tensor:
        offset = self._offsets[step]
        return self._tables[self._signs[step]][offset : offset + self.n]


class FreshNormals:
    """The reference :class:`NormalTable` is measured against: a fresh N(0, I) draw every step."""

    def __init__(self, n: int, steps: int, generator: torch.Generator, device="cpu"):
        self.n, self.generator, self.device = n, generator, device

    def draw(self, step: int) -> torch.Tensor:
        return torch.randn(self.n, generator=self.generator, device=self.device)


def kl_gradients(mu, sd, prior_scale: float, n_train: int):
    """Gradients of KL(q ‖ p)/N w.r.t. μ and log σ: μ/(p²N) and (σ²/p² − 1)/N."""
    scale = 1.0 / (prior_scale**2 * n_train)
    return mu * scale, sd.square().mul_(scale).sub_(1.0 / n_train)


# ---------------------------------------------------------------------------------------------
# Gradient estimators of the expected minibatch NLL under mean-field q
#
# All three are unbiased for E_q[NLL]: each example's outputs have the distribution they would have
# under weights drawn for it alone. They differ in variance and cost:
#   reparam: one weight draw ω = μ + σ ⊙ ε shared by the minibatch (gradients written out above);
#   local:   each example's pre-activations drawn from their Gaussian given its inputs (Kingma et al.
#            2015): no weight draw, per-example noise, a second matrix product for the variances;
#   flipout: one weight perturbation σ ⊙ ε, decorrelated across examples by random signs on its
#            inputs and outputs (Wen et al. 2018): a second matrix product, per-example signs.

ESTIMATORS = BNN_ESTIMATORS


def local_reparam_outputs(layout: Layout, mu, log_sd, x, generator: torch.Generator):
    """The MLP's outputs on ``x`` with every pre-activation drawn per example: a = hM̄ᵀ + b̄ + √(h²S²ᵀ + s_b²) ⊙ ξ,
    differentiable in μ and log σ."""
    means, variances = layout.layers(mu), layout.layers(torch.exp(2 * log_sd))
    h = x
    for index, ((M, b), (V, v)) in enumerate(zip(means, variances)):
        mean = torch.addmm(b, h, M.mT)
        sd = torch.addmm(v, h.square(), V.mT).sqrt()
        h = torch.addcmul(mean, sd, torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype))
        if index < len(means) - 1:
            h = torch.relu(h)
    return h


def flipout_outputs(layout: Layout, mu, log_sd, noise, x, generator: torch.Generator):
    """The MLP's outputs on ``x`` with the weight perturbation Δ = σ ⊙ noise flipped per example:
    a = hM̄ᵀ + b̄ + ((h ⊙ s)ΔWᵀ + Δb) ⊙ r, with s, r uniform random signs; differentiable in μ and log σ."""
    means, perturbations = layout.layers(mu), layout.layers(torch.exp(log_sd) * noise)
    h = x
    for index, ((M, b), (dW, db)) in enumerate(zip(means, perturbations)):
        signs_in = _random_signs(h.shape, generator, h)
        signs_out = _random_signs((h.shape[0], M.shape[0]), generator, h)
        h = torch.addmm(b, h, M.mT) + torch.addmm(db, h * signs_in, dW.mT) * signs_out
        if index < len(means) - 1:
            h = torch.relu(h)
    return h


def _random_signs(shape, generator: torch.Generator, like: torch.Tensor):
    bits = torch.randint(0, 2, shape, generator=generator, device=like.device, dtype=like.dtype)
    return bits.mul_(2).sub_(1)


# ---------------------------------------------------------------------------------------------
# Permutation symmetry


def random_permutations(layout: Layout, count: int, generator: torch.Generator, device="cpu"):
    """``count`` independent uniform elements of G = S_{h₁} × …: per hidden layer a (count, h_l)
    tensor whose row k is element k's permutation of that layer."""
    return [
        torch.stack([torch.randperm(h, generator=generator, device=device) for _ in range(count)])
        if count
        else torch.empty(0, h, dtype=torch.long, device=device)
        for h in layout.hidden
    ]


def group_element(perms, k: int) -> list[torch.Tensor]:
    """Element k of a batch from :func:`random_permutations`: one permutation per hidden layer."""
    return [layer[k] for layer in perms]


def log_density_terms(w, mu, log_sd, index=None) -> torch.Tensor:
    """log q(g⁻¹ ω) up to the normaliser (which no permutation changes): −½ Σ (ω − gμ)² / (gσ)²,
    with g given by its permutation index (None: identity)."""
    if index is not None:
        mu, log_sd = mu[index], log_sd[index]
    return -0.5 * (((w - mu) * torch.exp(-log_sd)) ** 2).sum()


def unit_cost_matrix(layout: Layout, w, mu, log_sd) -> torch.Tensor:
    """C[j, k] = Σ (unit j of ω − mean of unit k)² / variance of unit k, for all pairs, in float64:
    one matrix product (docs/science.md, § InfoNCE over permutations). The log-density of permutation π is −½ Σ_j C[j, π(j)]
    plus terms every permutation shares."""
    return _cost_matrix(*(unit_rows(layout.layers(flat), 0) for flat in (w, mu, log_sd)))


def _cost_matrix(units, means, log_sd) -> torch.Tensor:
    # Σ_i (u_ji − m_ki)² p_ki = [u², u, 1]_j · [p, −2mp, Σ m²p]_k: one matrix product.
    units, means, precision = units.double(), means.double(), torch.exp(-2 * log_sd.double())
    left = torch.cat([units.square(), units, torch.ones_like(units[:, :1])], 1)
    right = torch.cat([precision, -2 * means * precision, (means.square() * precision).sum(1, keepdim=True)], 1)
    return left @ right.t()


def permutation_log_densities(layout: Layout, w, mu, log_sd, perms) -> torch.Tensor:
    """[log q(ω), log q(g₁⁻¹ω), …] up to a shared constant, float64.

    One hidden layer: from the unit cost matrix, O(h²d + Kh). Deeper: one pass over all
    weights per permutation."""
    identity = log_density_terms(w, mu, log_sd).double()
    if len(layout.hidden) == 1:
        cost = unit_cost_matrix(layout, w, mu, log_sd)
        permuted = cost.gather(1, perms[0].t().contiguous()).sum(0)  # Σ_j C[j, π_k(j)] for each k
        # Shift the permuted terms by the identity's cost-matrix value, so the identity term can
        # be the exact −½ Σ ε² (the expanded squares in the cost matrix lose a few digits).
        permuted = -0.5 * (permuted - cost.diagonal().sum()) + identity
    else:
        permuted = (
            torch.stack(
                [
                    log_density_terms(w, mu, log_sd, permutation_index(layout, group_element(perms, k))).double()
                    for k in range(perms[0].shape[0])
                ]
            )
            if perms[0].shape[0]
            else identity.new_zeros(0)
        )
    return torch.cat([identity[None], permuted])


def infonce_from_log_densities(log_densities: torch.Tensor) -> torch.Tensor:
    """Î_K = log K + log q(ω) − log(q(ω) + Σ_k q(g_k⁻¹ω)) (Thm 4.3), K = len(log_densities)."""
    return math.log(log_densities.numel()) + log_densities[0] - torch.logsumexp(log_densities, 0)


SCREEN_COORDINATES = 32  # input coordinates per unit in the coordinate screen
DIRECT_SCREEN_MAX = 16  # permutations up to which the direct screen is cheaper than the coordinate screen


def _far_from_identity(layout: Layout, w, noise, mu, log_sd, perms, margin: float, skip, sd=None) -> bool:
    """Whether every permutation (except those flagged in ``skip``) has a log-density certainly at
    least ``margin`` below the identity's, for the draw ω = μ + σ ⊙ noise of a one-hidden-layer MLP.

    Up to DIRECT_SCREEN_MAX permutations each gap is computed directly (:func:`_direct_gaps`); beyond,
    the coordinate screen (:func:`_coordinate_gaps`) runs first and the direct one only if it fails."""
    need = 2 * margin  # log-density gap −½ × cost gap
    many = perms[0].shape[0] > DIRECT_SCREEN_MAX
    if many and bool((_coordinate_gaps(layout, w, noise, mu, log_sd, perms)[~skip] >= need).all()):
        return True
    sd = log_sd.exp() if sd is None else sd
    return bool((_direct_gaps(layout, w, noise, mu, sd, perms)[~skip] >= need).all())


def _direct_gaps(layout: Layout, w, noise, mu, sd, perms) -> torch.Tensor:
    """Lower bounds on Σ ((g⁻¹ω − μ)/σ)² − Σ ε² for each permutation g, computed in ω's dtype
    straight from the differences: every term is ≥ 0 and carries a relative rounding error of at most
    5u, so the sum is within γ = (n + 5)u/(1 − (n + 5)u) of exact in any summation order, and the
    bound subtracts that (n hidden-unit parameters, u the unit roundoff: γ ≈ 0.02 for an MNIST MLP
    in float32, where its gaps are near 10⁵). One row gather and three passes per permutation into
    reused buffers: O(Kn) instead of the cost matrix's O(h n)."""
    (W, b), (V, _) = layout.layers(w)
    (W_mean, b_mean), (V_mean, _) = layout.layers(mu)
    (W_sd, b_sd), (V_sd, _) = layout.layers(sd)
    n = layout.n_params - layout.sizes[-1]  # the hidden units' parameters: all but the output bias, which comes last
    identity = float(torch.dot(noise[:n], noise[:n]))
    # Unit m of g⁻¹ω is unit π⁻¹(m) of ω.
    inverse = torch.empty_like(perms[0]).scatter_(
        1, perms[0], torch.arange(W.shape[0], device=W.device).expand_as(perms[0])
    )
    small = ((b[inverse] - b_mean) / b_sd).square().sum(1) + (
        (V[:, inverse] - V_mean[:, None]) / V_sd[:, None]
    ).square().sum((0, 2))
    buffer, rows = torch.empty_like(W), []
    for order in inverse:
        torch.index_select(W, 0, order, out=buffer).sub_(W_mean).div_(W_sd)
        rows.append(torch.dot(buffer.reshape(-1), buffer.reshape(-1)))
    permuted = (torch.stack(rows) + small).double() if rows else small.double()
    unit_roundoff = torch.finfo(w.dtype).eps / 2
    gamma = (n + 5) * unit_roundoff / (1 - (n + 5) * unit_roundoff)
    return permuted * (1 - gamma) - identity * (1 + gamma)


def _coordinate_gaps(layout: Layout, w, noise, mu, log_sd, perms) -> torch.Tensor:
    """Lower bounds on the same gaps from a few coordinates of each unit: Σ_j C[j, π(j)] over the 32
    most precise input weights, the bias and the outgoing weights (its terms are ≥ 0), minus
    C[j, j] = Σ_i noise_ji² in full. Cost O(h² c + Kh) with c ≈ 43: for a trained network it settles
    the question; near initialisation (σ alike everywhere) it cannot."""
    (E1, e1), (E2, _) = layout.layers(noise)
    identity_cost = (E1.square().sum(1) + e1.square() + E2.square().sum(0)).double()
    slack = 1e-5 * float(identity_cost.sum())  # float32 rounding in the sums above, generously
    chosen = torch.argsort(layout.layers(log_sd)[0][0].mean(0))[:SCREEN_COORDINATES]
    block = [_screened_rows(layout, flat, chosen) for flat in (w, mu, log_sd)]
    targets = perms[0].t().contiguous()  # (h, K − 1): unit j → π_k(j)
    permuted_cost = _cost_matrix(*block).gather(1, targets)
    return (permuted_cost - identity_cost[:, None]).sum(0) - slack


def _screened_rows(layout: Layout, flat, inputs) -> torch.Tensor:
    """The unit rows of a one-hidden-layer MLP with only the incoming weights from ``inputs``."""
    (W1, b1), output = layout.layers(flat)
    return unit_rows([(W1[:, inputs], b1), output], 0)


def identity_draws(perms) -> torch.Tensor:
    """Which elements of a batch from :func:`random_permutations` are the identity (in small
    groups a uniform draw often is: its term equals the identity's and has no gradient)."""
    flags = [(layer == torch.arange(layer.shape[1], device=layer.device)).all(1) for layer in perms]
    return torch.stack(flags).all(0)


def infonce(
    layout: Layout, w, noise, mu, log_sd, K: int, generator: torch.Generator, sd=None
) -> tuple[torch.Tensor, bool]:
    """(Î_K for the draw ω = μ + σ ⊙ noise and K − 1 random permutations, whether it has a gradient);
    ``sd`` is σ = exp(log σ) when the caller has it.

    Usually (equivalent modes far apart, as in any trained wide network) every permuted term
    other than a drawn identity is below e⁻⁴⁵/K of the identity's: then Î_K = log K − log(1 + n)
    for n identity draws, to float64 precision, and its gradient is 0; for one hidden layer a
    screen certifies this with float32 passes and a rounding bound (:func:`_far_from_identity`). Otherwise the exact terms are
    computed, with autograd through ω, μ and log σ."""
    perms = random_permutations(layout, K - 1, generator, device=mu.device)
    identities = identity_draws(perms)
    trivial = torch.tensor(math.log(K) - math.log1p(int(identities.sum())), dtype=torch.float64, device=mu.device)
    with torch.no_grad():
        margin = 45.0 + math.log(K)
        if len(layout.hidden) == 1 and _far_from_identity(layout, w, noise, mu, log_sd, perms, margin, identities, sd):
            return trivial, False
        log_densities = permutation_log_densities(layout, w, mu, log_sd, perms)
        weights = torch.softmax(log_densities, 0)
    if not bool((weights[1:][~identities] > 0).any()):
        return infonce_from_log_densities(log_densities), False
    w = torch.addcmul(mu, log_sd.exp(), noise)  # the same draw, differentiable in μ and log σ
    return infonce_from_log_densities(permutation_log_densities(layout, w, mu, log_sd, perms)), True


def group_information(w, mu, log_sd, indices: torch.Tensor) -> torch.Tensor:
    """I(ω) = log q(ω) − log((1/|G|) Σ_g q(g⁻¹ω)) for one draw ω, with every element of a group G given as a
    flat permutation index (``indices[|G|, P]``, :func:`symlab.lib.mlp.permutation_index` or a convnet's),
    the identity among them; its mean over ω ~ q is the mutual information between g and ω (Thm 4.1), whose
    gradient SGM follows. Differentiable in ω, μ and log σ; float64."""
    terms = -0.5 * (((w - mu[indices]) * torch.exp(-log_sd[indices])) ** 2).sum(-1).double()
    identity = log_density_terms(w, mu, log_sd).double()
    return identity - (torch.logsumexp(terms, 0) - math.log(len(indices)))


def exact_mutual_information(layout: Layout, mu, log_sd, samples: int, generator: torch.Generator):
    """Monte-Carlo estimate of I = E_ω[log q(ω) − log((1/|G|) Σ_g q(g⁻¹ω))] with all of G
    enumerated (tiny networks only: |G| = Π h_l!)."""
    import itertools

    group = [list(p) for p in itertools.product(*[itertools.permutations(range(h)) for h in layout.hidden])]
    if len(group) > 50_000:
        raise ValueError(f"|G| = {len(group)} is too large to enumerate")
    indices = torch.stack(
        [permutation_index(layout, [torch.tensor(p, device=mu.device) for p in element]) for element in group]
    )
    values = [group_information(sample_weights(mu, log_sd, generator), mu, log_sd, indices) for _ in range(samples)]
    return torch.stack(values).mean().item()
