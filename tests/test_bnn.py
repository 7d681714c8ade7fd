"""Bayesian MLP core: permutation symmetry, the cost-matrix form, InfoNCE bounds, gradients."""

import math

import pytest
import torch
import torch.nn.functional as F

from symlab.lib import bnn


def random_posterior(layout, seed, mean_scale=1.0, sd=0.5):
    generator = torch.Generator().manual_seed(seed)
    mu = mean_scale * torch.randn(layout.n_params, generator=generator, dtype=torch.float64)
    log_sd = math.log(sd) + 0.2 * torch.randn(layout.n_params, generator=generator, dtype=torch.float64)
    return mu, log_sd, generator


@pytest.mark.parametrize("sizes", [(6, 5, 3), (4, 5, 3, 2)])
def test_network_is_unchanged_by_permuting_weights_means_and_sds_alike(sizes):
    layout = bnn.Layout(sizes)
    mu, log_sd, generator = random_posterior(layout, 0)
    w = bnn.sample_weights(mu, log_sd, generator)
    x = torch.randn(20, sizes[0], generator=generator, dtype=torch.float64)
    perms = bnn.random_permutations(layout, 5, generator)
    for k in range(5):
        index = bnn.permutation_index(layout, bnn.group_element(perms, k))
        assert not torch.equal(index, torch.arange(layout.n_params))
        torch.testing.assert_close(bnn.forward(x, layout, w[index]), bnn.forward(x, layout, w))
        # q(gω; gμ, gσ) = q(ω; μ, σ): the density is invariant when g acts on all three.
        torch.testing.assert_close(bnn.log_density_terms(w[index], mu[index], log_sd[index]),
                                   bnn.log_density_terms(w, mu, log_sd))


def test_cost_matrix_form_equals_the_direct_computation():
    layout = bnn.Layout((7, 6, 3))
    mu, log_sd, generator = random_posterior(layout, 1, mean_scale=0.3)
    w = bnn.sample_weights(mu, log_sd, generator)
    perms = bnn.random_permutations(layout, 20, generator)
    fast = bnn.permutation_log_densities(layout, w, mu, log_sd, perms)
    direct = [bnn.log_density_terms(w, mu, log_sd)] + [
        bnn.log_density_terms(w, mu, log_sd, bnn.permutation_index(layout, bnn.group_element(perms, k)))
        for k in range(20)]
    torch.testing.assert_close(fast, torch.stack(direct), rtol=1e-10, atol=1e-9)
    # ... and the cost matrix itself, entry by entry.
    cost = bnn.unit_cost_matrix(layout, w, mu, log_sd)
    units, means = bnn.unit_vectors(layout, w), bnn.unit_vectors(layout, mu)
    variances = bnn.unit_vectors(layout, torch.exp(2 * log_sd))
    for j in range(6):
        for k in range(6):
            assert cost[j, k].item() == pytest.approx(((units[j] - means[k]) ** 2 / variances[k]).sum().item(),
                                                      rel=1e-10)


def test_infonce_is_below_min_of_exact_mi_and_log_k_and_approaches_it():
    # Four hidden units with close means and wide posteriors: the 24 permuted copies overlap,
    # so 0 < I < log 24 and the bound is not trivial.
    layout = bnn.Layout((2, 4, 1))
    mu, log_sd, _ = random_posterior(layout, 2, mean_scale=0.6, sd=0.7)
    generator = torch.Generator().manual_seed(3)
    exact = bnn.exact_mutual_information(layout, mu, log_sd, 3000, generator)
    assert 0.3 < exact < math.log(24) - 0.3
    estimates = {}
    for K in (2, 4, 16, 128):
        values = []
        for _ in range(1500):
            w, noise = bnn.sample_weights(mu, log_sd, generator, return_noise=True)
            values.append(bnn.infonce(layout, w, noise, mu, log_sd, K, generator)[0].item())
        estimates[K] = sum(values) / len(values)
        standard_error = torch.tensor(values).std().item() / math.sqrt(len(values))
        assert estimates[K] <= math.log(K) + 1e-9
        assert estimates[K] <= exact + 4 * standard_error + 0.02
    assert estimates[2] < estimates[4] < estimates[16] < estimates[128]
    assert estimates[128] == pytest.approx(exact, abs=0.1)


def test_screening_certifies_only_far_permutations():
    layout = bnn.Layout((30, 40, 10))
    far_mu, far_log_sd, generator = random_posterior(layout, 4, mean_scale=0.5, sd=0.01)
    w, noise = bnn.sample_weights(far_mu, far_log_sd, generator, return_noise=True)
    perms = bnn.random_permutations(layout, 15, generator)
    margin = 45 + math.log(16)
    none = torch.zeros(15, dtype=torch.bool)
    assert bnn._far_from_identity(layout, w, noise, far_mu, far_log_sd, perms, margin, none)
    exact = bnn.permutation_log_densities(layout, w, far_mu, far_log_sd, perms)
    assert (exact[1:] - exact[0] <= -margin).all()
    value, active = bnn.infonce(layout, w, noise, far_mu, far_log_sd, 16, generator)
    assert not active and value.item() == pytest.approx(math.log(16), abs=1e-12)
    # Identical units and wide posteriors: permuted copies are close, nothing is certified.
    unit = torch.randn(30 + 1 + 10, generator=generator, dtype=torch.float64)
    near_mu = torch.zeros(layout.n_params, dtype=torch.float64)
    (W1, b1), (W2, _) = layout.layers(near_mu)
    W1[:] = unit[:30]
    b1[:] = unit[30]
    W2[:] = unit[31:, None]
    near_log_sd = torch.zeros_like(near_mu)
    w, noise = bnn.sample_weights(near_mu, near_log_sd, generator, return_noise=True)
    assert not bnn._far_from_identity(layout, w, noise, near_mu, near_log_sd, perms, margin, none)
    value, active = bnn.infonce(layout, w, noise, near_mu, near_log_sd, 16, generator)
    assert active and value.item() < math.log(16) - 0.1


def test_kl_matches_torch_distributions():
    layout = bnn.Layout((5, 4, 3))
    mu, log_sd, _ = random_posterior(layout, 5)
    expected = torch.distributions.kl_divergence(torch.distributions.Normal(mu, log_sd.exp()),
                                                 torch.distributions.Normal(torch.zeros_like(mu), torch.full_like(mu, 1.7))).sum()
    assert bnn.kl_to_prior(mu, log_sd, 1.7).item() == pytest.approx(expected.item(), rel=1e-12)


def test_written_out_gradients_match_autograd():
    layout = bnn.Layout((6, 5, 3))
    mu, log_sd, generator = random_posterior(layout, 6)
    mu.requires_grad_()
    log_sd.requires_grad_()
    x = torch.randn(8, 6, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 3, (8,), generator=generator)
    noise = torch.randn(layout.n_params, generator=generator, dtype=torch.float64)
    w = torch.addcmul(mu, log_sd.exp(), noise)
    loss = F.cross_entropy(bnn.forward(x, layout, w), y) + bnn.kl_to_prior(mu, log_sd, 0.8) / 100
    expected_mu, expected_log_sd = torch.autograd.grad(loss, [mu, log_sd])
    w_leaf = w.detach().requires_grad_()
    (grad_w,) = torch.autograd.grad(F.cross_entropy(bnn.forward(x, layout, w_leaf), y), [w_leaf])
    grad_mu, grad_log_sd = bnn.negative_elbo_gradients(grad_w, noise, mu.detach(), log_sd.detach().exp(), 0.8, 100)
    torch.testing.assert_close(grad_mu, expected_mu)
    torch.testing.assert_close(grad_log_sd, expected_log_sd)


def test_drawn_identities_count_but_carry_no_gradient():
    # Two hidden units: G = {id, swap}; about half the draws are the identity.
    layout = bnn.Layout((30, 2, 3))
    mu, log_sd, generator = random_posterior(layout, 7, mean_scale=0.5, sd=0.01)
    mu.requires_grad_()
    w, noise = bnn.sample_weights(mu.detach(), log_sd, generator, return_noise=True)
    perms_generator = torch.Generator().manual_seed(8)
    expected = bnn.random_permutations(layout, 7, perms_generator)
    identities = int(bnn.identity_draws(expected).sum())
    assert 0 < identities < 7
    value, active = bnn.infonce(layout, w, noise, mu, log_sd, 8, torch.Generator().manual_seed(8))
    assert not active and value.item() == pytest.approx(math.log(8) - math.log(1 + identities), abs=1e-12)
