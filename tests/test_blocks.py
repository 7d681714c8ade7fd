"""The block estimator of I_H and the unit diagnostics, against brute-force enumeration."""

import itertools
import math

import numpy as np
import pytest
import torch

from symlab.labs.toy import experiment as toy
from symlab.lib import blocks, bnn, gaussian, mlp, two_relu


def posterior(sizes, seed, init_sd=0.3, spread=0.3, mean_scale=1.0):
    """A float64 mean-field posterior with unequal standard deviations."""
    layout = mlp.Layout(sizes)
    generator = torch.Generator().manual_seed(seed)
    q = gaussian.init_posterior(layout, init_sd, generator)
    log_sd = q.log_sd + spread * torch.randn(q.log_sd.shape, generator=generator)
    return layout, (mean_scale * q.mean).double(), log_sd.double(), generator


def draw(mu, log_sd, generator):
    noise = torch.randn(mu.shape, generator=generator, dtype=torch.float64)
    return mu + log_sd.exp() * noise, noise


def group_elements(layout, blocks_by_layer):
    """Every element of H = Π_b S(B_b), as one permutation per hidden layer."""
    per_layer = []
    for layer, width in enumerate(layout.hidden):
        choices = [[list(range(width))]]
        for block in blocks_by_layer.get(layer, []):
            options = []
            for image in itertools.permutations(block):
                options.append(dict(zip(block, image)))
            choices.append(options)
        elements = []
        for combo in itertools.product(*choices[1:]):
            perm = list(range(width))
            for mapping in combo:
                for source, target in mapping.items():
                    perm[source] = target
            elements.append(torch.tensor(perm))
        per_layer.append(elements)
    return [list(element) for element in itertools.product(*per_layer)]


def brute_force_information(layout, w, mu, log_sd, elements):
    """log q(ω) − log((1/|H|) Σ_h q(h⁻¹ω)) by one pass over all weights per group element."""
    terms = torch.stack(
        [bnn.log_density_terms(w, mu, log_sd, mlp.permutation_index(layout, element)) for element in elements]
    )
    identity = bnn.log_density_terms(w, mu, log_sd)
    return float(identity - (torch.logsumexp(terms, 0) - math.log(len(elements))))


@pytest.mark.parametrize(
    "sizes, chosen",
    [
        ((3, 5, 2), {0: [[0, 1], [2, 3, 4]]}),
        ((2, 4, 3), {0: [[0, 1, 2, 3]]}),
        ((3, 3, 4, 2), {1: [[0, 2], [1, 3]]}),
        ((2, 3, 2, 3, 2), {0: [[0, 2]], 2: [[0, 1, 2]]}),
    ],
)
def test_block_estimator_equals_enumerating_h_for_fixed_draws(sizes, chosen):
    for mean_scale in (0.05, 1.0):  # near-invariant q (active blocks) and one with apart units
        layout, mu, log_sd, generator = posterior(sizes, seed=3, mean_scale=mean_scale)
        plan = blocks.plan_from_blocks(layout, chosen, mu, log_sd)
        elements = group_elements(layout, chosen)
        assert len(elements) == round(math.exp(plan.log_group_size))
        for _ in range(4):
            w, noise = draw(mu, log_sd, generator)
            value, _ = blocks.block_mutual_info(layout, w, noise, mu, log_sd, plan)
            assert float(value) == pytest.approx(brute_force_information(layout, w, mu, log_sd, elements), abs=1e-9)


def test_far_apart_blocks_are_saturated_at_log_h_without_gradient_and_identical_units_give_zero():
    layout, mu, log_sd, generator = posterior((4, 6, 3), seed=1, init_sd=1e-3, spread=0.0)
    plan = blocks.plan_from_blocks(layout, {0: [[0, 1], [2, 3, 4, 5]]}, mu, log_sd)
    w, noise = draw(mu, log_sd, generator)
    value, active = blocks.block_mutual_info(layout, w, noise, mu, log_sd, plan)
    assert not active and float(value) == pytest.approx(math.log(2) + math.log(24), abs=1e-12)

    # Units 0 and 1 made identical: q is invariant under their swap, so their block adds exactly 0.
    rows = blocks._row_index(layout, 0)
    mu, log_sd = mu.clone(), log_sd.clone()
    mu[rows[1]], log_sd[rows[1]] = mu[rows[0]], log_sd[rows[0]]
    w, noise = draw(mu, log_sd, generator)
    value, active = blocks.block_mutual_info(layout, w, noise, mu, log_sd, plan)
    assert active and float(value) == pytest.approx(math.log(24), abs=1e-9)


def test_subgroup_information_is_below_the_full_groups_in_expectation():
    """I_G − I_H = KL(q_H ‖ q_G) ≥ 0; with the same draws the paired difference is clearly positive."""
    layout, mu, log_sd, generator = posterior((2, 4, 2), seed=5, mean_scale=0.2)
    chosen = {0: [[0, 1], [2, 3]]}
    plan = blocks.plan_from_blocks(layout, chosen, mu, log_sd)
    group = group_elements(layout, {0: [[0, 1, 2, 3]]})
    differences, values = [], []
    for _ in range(400):
        w, noise = draw(mu, log_sd, generator)
        value = float(blocks.block_mutual_info(layout, w, noise, mu, log_sd, plan)[0])
        values.append(value)
        differences.append(brute_force_information(layout, w, mu, log_sd, group) - value)
    mean, error = np.mean(differences), np.std(differences) / math.sqrt(len(differences))
    assert mean > 3 * error
    assert 0 < np.mean(values) < plan.log_group_size


def test_elbo_plus_block_information_is_below_the_exact_evidence_on_the_tractable_bnn():
    """On ReLU(w₁x) + ReLU(w₂x) the two units are one block, so H = G = {id, swap}: the block
    estimate equals the toy's exact I and ELBO + I_H stays below log p(D) from the grid."""
    config = toy.ToyConfig(alpha=0.5, seed=11)
    data = toy.make_data(config)
    posterior_grid = two_relu.exact_posterior(data, config.noise, config.prior_scale)
    trainer = two_relu.ToyTrainer([toy.run_spec("mfvi", config)])
    trainer.step(1500)
    means, stds = trainer.parameters()
    mean, log_std = torch.tensor(means[0]), torch.tensor(np.log(stds[0]))
    generator = torch.Generator().manual_seed(0)
    block = torch.tensor([[[0], [1]]])  # one block of two units, each owning one weight
    values, exact = [], []
    for _ in range(4000):
        noise = torch.randn(2, generator=generator, dtype=torch.float64)
        w = mean + log_std.exp() * noise
        values.append(float(blocks.block_information(blocks.block_log_terms(blocks._costs(w, mean, log_std, block)))))
        exact.append(float(two_relu.exact_mutual_information(w, mean, log_std)))
    assert np.allclose(values, exact, atol=1e-12)
    elbo = trainer.evaluate()["elbo"][0]
    assert 0 < np.mean(values) < math.log(2)
    assert elbo + np.mean(values) <= posterior_grid.log_evidence


def test_relabelling_the_units_leaves_the_estimate_and_the_blocks_unchanged():
    layout, mu, log_sd, generator = posterior((3, 6, 2), seed=2, mean_scale=0.3)
    perm = torch.tensor([4, 2, 5, 0, 3, 1])
    index = mlp.permutation_index(layout, [perm])
    plan = blocks.plan_blocks(layout, mu, log_sd, 2)
    moved_plan = blocks.plan_blocks(layout, mu[index], log_sd[index], 2)
    relabel = {int(old): new for new, old in enumerate(perm)}  # unit perm[i] of q is unit i of g·q
    assert sorted(sorted(relabel[u] for u in block) for block in plan.blocks()[0]) == sorted(moved_plan.blocks()[0])
    for _ in range(5):
        w, noise = draw(mu, log_sd, generator)
        value = blocks.block_mutual_info(layout, w, noise, mu, log_sd, plan)[0]
        moved = blocks.block_mutual_info(layout, w[index], noise[index], mu[index], log_sd[index], moved_plan)[0]
        assert float(moved) == pytest.approx(float(value), abs=1e-10)


@pytest.mark.parametrize("size", [2, 3])
def test_gradient_matches_finite_differences(size):
    layout, mu, log_sd, generator = posterior((3, 6, 2), seed=4, mean_scale=0.1)
    plan = blocks.plan_from_blocks(
        layout, {0: [list(range(i, i + size)) for i in range(0, 6 - size + 1, size)]}, mu, log_sd
    )
    _, noise = draw(mu, log_sd, generator)

    def estimate(m, s):
        value, active = blocks.block_mutual_info(layout, torch.addcmul(m, s.exp(), noise).detach(), noise, m, s, plan)
        assert active
        return value

    assert torch.autograd.gradcheck(
        estimate, (mu.clone().requires_grad_(), log_sd.clone().requires_grad_()), eps=1e-6, atol=1e-6
    )


def test_the_gradient_of_i_h_pushes_close_units_apart():
    """Ascending Î_H moves a pair of nearly identical units apart (their Jeffreys divergence grows)."""
    layout, mu, log_sd, generator = posterior((3, 4, 2), seed=7, spread=0.0)
    rows = blocks._row_index(layout, 0)
    mu = mu.clone()
    mu[rows[1]] = mu[rows[0]] + 0.01
    plan = blocks.plan_from_blocks(layout, {0: [[0, 1]]}, mu, log_sd)

    def pair_divergence(m, s):
        units = [mlp.unit_rows(layout.layers(flat), 0) for flat in (m, s)]
        return float(blocks.jeffreys_matrix(*units)[0, 1])

    mu_, log_sd_ = mu.clone().requires_grad_(), log_sd.clone().requires_grad_()
    total = 0
    for _ in range(200):
        _, noise = draw(mu, log_sd, generator)
        w = torch.addcmul(mu, log_sd.exp(), noise)
        total = total + blocks.block_mutual_info(layout, w, noise, mu_, log_sd_, plan)[0]
    grad_mu, grad_log_sd = torch.autograd.grad(total / 200, [mu_, log_sd_])
    before = pair_divergence(mu, log_sd)
    after = pair_divergence(mu + 0.05 * grad_mu, log_sd + 0.05 * grad_log_sd)
    assert after > 2 * before


def test_nearest_unit_divergence_and_prior_count_match_brute_force():
    layout, mu, log_sd, _ = posterior((3, 5, 4, 2), seed=6, mean_scale=0.4)
    prior_scale = 1.5
    # Unit 3 of the first hidden layer is set to the prior: it must be counted there.
    rows = blocks._row_index(layout, 0)
    mu, log_sd = mu.clone(), log_sd.clone()
    mu[rows[3]], log_sd[rows[3]] = 0.0, math.log(prior_scale)
    report = blocks.unit_diagnostics(layout, mu, log_sd, prior_scale)
    nearest_all = []
    for layer, width in enumerate(layout.hidden):
        mu_rows, log_sd_rows = (mlp.unit_rows(layout.layers(flat), layer) for flat in (mu, log_sd))
        factors = [torch.distributions.Normal(mu_rows[j], log_sd_rows[j].exp()) for j in range(width)]
        nearest = [
            min(
                float(
                    torch.distributions.kl_divergence(factors[j], factors[k]).sum()
                    + torch.distributions.kl_divergence(factors[k], factors[j]).sum()
                )
                for k in range(width)
                if k != j
            )
            for j in range(width)
        ]
        prior = torch.distributions.Normal(0.0, prior_scale)
        at_prior = sum(
            float(torch.distributions.kl_divergence(f, prior).mean()) <= blocks.PRIOR_KL_PER_PARAMETER for f in factors
        )
        assert report["by_layer"][layer]["nearest_unit_kl_min"] == pytest.approx(min(nearest), rel=1e-9)
        assert report["by_layer"][layer]["nearest_unit_kl_median"] == pytest.approx(np.median(nearest), rel=1e-9)
        assert report["by_layer"][layer]["units_at_prior"] == at_prior
        nearest_all += nearest
    assert report["by_layer"][0]["units_at_prior"] >= 1
    assert report["nearest_unit_kl_min"] == pytest.approx(min(nearest_all), rel=1e-9)
    assert report["units_at_prior"] == sum(layer["units_at_prior"] for layer in report["by_layer"])


def test_greedy_blocks_pair_the_closest_units_first():
    points = np.array([0.0, 10.0, 0.5, 10.2, 30.0, 31.0, 50.0])
    distance = np.abs(points[:, None] - points[None, :])
    assert blocks.greedy_blocks(distance, 2) == [[1, 3], [0, 2], [4, 5]]
    # Size 3: {1, 3} takes 2 (its largest divergence to them, 9.7, is the smallest); {4, 5} takes 6; 0 is left.
    assert blocks.greedy_blocks(distance, 3) == [[1, 2, 3], [4, 5, 6]]
    clusters = blocks.greedy_blocks(np.abs(np.subtract.outer([0, 1, 2, 100, 101, 102], [0, 1, 2, 100, 101, 102])), 3)
    assert sorted(clusters) == [[0, 1, 2], [3, 4, 5]]


def test_adjacent_layers_are_refused_and_deeper_nets_alternate_layers():
    layout = mlp.Layout((3, 4, 4, 4, 2))
    mu, log_sd = torch.zeros(layout.n_params), torch.zeros(layout.n_params)
    with pytest.raises(ValueError, match="adjacent"):
        blocks.plan_from_blocks(layout, {0: [[0, 1]], 1: [[0, 1]]}, mu, log_sd)
    assert blocks.block_layers(layout, 0) == (0, 2)
    assert blocks.block_layers(layout, 1) == (1,)
    assert blocks.block_layers(mlp.Layout((3, 4, 2)), 1) == (0,)
