"""Bayesian MLP core: the flat-vector MLP and its forward pass, the mean-field Gaussian's KL,
permutation symmetry, the cost-matrix form, InfoNCE bounds, gradients."""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from symlab.lib import bnn, gaussian, mlp, symmetry


def random_posterior(layout, seed, mean_scale=1.0, sd=0.5):
    generator = torch.Generator().manual_seed(seed)
    mu = mean_scale * torch.randn(layout.n_params, generator=generator, dtype=torch.float64)
    log_sd = math.log(sd) + 0.2 * torch.randn(layout.n_params, generator=generator, dtype=torch.float64)
    return mu, log_sd, generator


# --- the MLP: one flat vector, one forward pass ----------------------------------------------------

BATCHES = [(), (3,), (2, 3)]


def random_array(shape, backend, seed=0):
    values = np.random.default_rng(seed).standard_normal(shape)
    return torch.tensor(values) if backend == "torch" else values


def naive_forward(layout, flat, x):
    """One network, one input, one unit at a time, straight from the flat vector's layout."""
    h = list(x)
    for index, ((w0, b0, _), fan_in, fan_out) in enumerate(zip(layout.offsets, layout.sizes[:-1], layout.sizes[1:])):
        h = [
            sum(float(flat[w0 + i * fan_in + j]) * h[j] for j in range(fan_in)) + float(flat[b0 + i])
            for i in range(fan_out)
        ]
        if index < len(layout.sizes) - 2:
            h = [max(v, 0.0) for v in h]
    return h


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("sizes", [(3, 5, 2), (4, 6, 5, 3)])
def test_forward_equals_a_naive_loop(sizes, batch, backend):
    layout = mlp.Layout(sizes)
    flat = random_array((*batch, layout.n_params), backend)
    shared, own = random_array((7, sizes[0]), backend, 1), random_array((*batch, 7, sizes[0]), backend, 2)
    for x, per_net in ((shared, False), (own, True)):
        out = mlp.forward(layout.layers(flat), x)
        assert type(out) is type(flat) and tuple(out.shape) == (*batch, 7, sizes[-1])
        for net in np.ndindex(*batch):
            for row in range(7):
                inputs = x[(*net, row)] if per_net else x[row]
                np.testing.assert_allclose(
                    np.asarray(out[(*net, row)]), naive_forward(layout, flat[net], inputs), rtol=1e-12, atol=1e-12
                )


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("batch", BATCHES, ids=str)
def test_layers_are_views_that_flatten_inverts(batch, backend):
    layout = mlp.Layout((3, 4, 5, 2))
    flat = random_array((*batch, layout.n_params), backend)
    layers = layout.layers(flat)
    assert [tuple(W.shape) for W, _ in layers] == [(*batch, 4, 3), (*batch, 5, 4), (*batch, 2, 5)]
    assert [tuple(b.shape) for _, b in layers] == [(*batch, 4), (*batch, 5), (*batch, 2)]
    again, copy = mlp.flatten(layers)
    assert again == layout
    np.testing.assert_array_equal(np.asarray(copy), np.asarray(flat))
    layers[1][0][..., 2, 3] = 7.0  # W₂[2, 3] sits after W₁ (12), b₁ (4) and two rows of W₂ (8)
    assert np.all(np.asarray(flat[..., 12 + 4 + 2 * 4 + 3]) == 7.0)
    with pytest.raises(ValueError, match="parameters"):
        layout.layers(flat[..., 1:])


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_permutation_index_permutes_the_layers(backend):
    layout = mlp.Layout((3, 4, 5, 2))
    flat = random_array(layout.n_params, backend)
    rng = np.random.default_rng(3)
    perms = [rng.permutation(h) for h in layout.hidden]
    index = mlp.permutation_index(layout, [torch.tensor(p) for p in perms] if backend == "torch" else perms)
    moved = layout.layers(flat[index])
    by_layers = layout.layers(np.asarray(flat))
    for layer, perm in enumerate(perms):
        by_layers = symmetry.permute_units(by_layers, layer, perm)
    for (W, b), (W0, b0) in zip(moved, by_layers):
        np.testing.assert_array_equal(np.asarray(W), W0)
        np.testing.assert_array_equal(np.asarray(b), b0)
    # One hidden layer: each unit owns its row, so permuting units permutes the rows.
    layout = mlp.Layout((3, 4, 2))
    flat = random_array(layout.n_params, backend)
    perm = torch.tensor(perms[0]) if backend == "torch" else perms[0]
    rows = mlp.unit_rows(layout.layers(flat[mlp.permutation_index(layout, [perm])]), 0)
    np.testing.assert_array_equal(np.asarray(rows), np.asarray(mlp.unit_rows(layout.layers(flat), 0))[perms[0]])


def test_initialisation_is_torch_linear_default_drawn_layer_by_layer():
    layout = mlp.Layout((30, 20, 10))
    flat = mlp.init_parameters(layout, torch.Generator().manual_seed(0), (4,))
    generator = torch.Generator().manual_seed(0)
    expected = []
    for fan_in, fan_out in ((30, 20), (20, 10)):
        bound = 1 / math.sqrt(fan_in)
        W = (torch.rand(4, fan_out, fan_in, generator=generator) * 2 - 1) * bound
        b = (torch.rand(4, fan_out, generator=generator) * 2 - 1) * bound
        expected.append((W, b))
    for (W, b), (W0, b0) in zip(layout.layers(flat), expected):
        torch.testing.assert_close(W, W0, rtol=0, atol=0)
        torch.testing.assert_close(b, b0, rtol=0, atol=0)
    # One network: each layer is one draw, the same numbers as its weights then its biases.
    one = mlp.init_parameters(layout, torch.Generator().manual_seed(1))
    generator = torch.Generator().manual_seed(1)
    pieces = [
        torch.empty(size).uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in), generator=generator)
        for fan_in, fan_out in ((30, 20), (20, 10))
        for size in (fan_out * fan_in, fan_out)
    ]
    torch.testing.assert_close(one, torch.cat(pieces), rtol=0, atol=0)


# --- the mean-field Gaussian ------------------------------------------------------------------------


def test_kl_of_a_batch_matches_torch_distributions_coordinate_by_coordinate():
    generator = torch.Generator().manual_seed(9)
    mean = 2 * torch.randn(3, 50, generator=generator, dtype=torch.float64)
    log_sd = 3 * torch.randn(3, 50, generator=generator, dtype=torch.float64)
    log_sd[0, :3] = torch.tensor([-400.0, -40.0, 12.0])  # σ far below and above the prior's
    prior_scale = torch.tensor([[0.1], [1.0], [7.5]], dtype=torch.float64)  # one per posterior
    expected = torch.distributions.kl_divergence(
        torch.distributions.Normal(mean, log_sd.exp()), torch.distributions.Normal(0.0, prior_scale.expand(3, 50))
    )
    kl = gaussian.kl_to_prior(mean, log_sd, prior_scale)
    assert kl.shape == (3,) and torch.isfinite(kl).all()
    finite = torch.isfinite(expected).all(1)  # torch's form takes log(σ²) of an underflowed 0 at σ = e⁻⁴⁰⁰
    assert not finite[0]
    torch.testing.assert_close(kl[finite], expected.sum(1)[finite], rtol=1e-12, atol=0)
    by_hand = 0.5 * (torch.exp(2 * log_sd[0] - 2 * math.log(0.1)) + (mean[0] / 0.1) ** 2 - 1) - (
        log_sd[0] - math.log(0.1)
    )
    assert kl[0].item() == pytest.approx(by_hand.sum().item(), rel=1e-12)
    layout = mlp.Layout((4, 5, 2))
    q = gaussian.DiagonalGaussian(layout, mean[:, : layout.n_params], log_sd[:, : layout.n_params])
    torch.testing.assert_close(q.kl_to_prior(2.0), gaussian.kl_to_prior(q.mean, q.log_sd, 2.0), rtol=0, atol=0)


def test_a_gaussian_keeps_the_standard_deviations_it_was_given():
    layout = mlp.Layout((2, 3, 1))
    rng = np.random.default_rng(4)
    mean, sd = rng.standard_normal(layout.n_params), rng.uniform(0.01, 2.0, layout.n_params)
    sd[0] = 0.0  # a point mass in one coordinate
    q = gaussian.DiagonalGaussian.from_sd(layout, mean, sd)
    assert q.sd is sd and q.log_sd[0] == -np.inf
    np.testing.assert_allclose(np.exp(q.log_sd), sd, rtol=1e-15)
    index = rng.permutation(layout.n_params)
    moved = q.take(index)
    np.testing.assert_array_equal(moved.sd, sd[index])
    np.testing.assert_array_equal(moved.mean, mean[index])
    assert [W.shape for W, _ in q.sds] == [(3, 2), (1, 3)]
    with pytest.raises(ValueError, match="must both be"):
        gaussian.DiagonalGaussian(layout, mean, sd[:-1])


@pytest.mark.parametrize("sizes", [(6, 5, 3), (4, 5, 3, 2)])
def test_network_is_unchanged_by_permuting_weights_means_and_sds_alike(sizes):
    layout = mlp.Layout(sizes)
    mu, log_sd, generator = random_posterior(layout, 0)
    w = bnn.sample_weights(mu, log_sd, generator)
    x = torch.randn(20, sizes[0], generator=generator, dtype=torch.float64)
    perms = bnn.random_permutations(layout, 5, generator)
    for k in range(5):
        index = mlp.permutation_index(layout, bnn.group_element(perms, k))
        assert not torch.equal(index, torch.arange(layout.n_params))
        torch.testing.assert_close(mlp.forward(layout.layers(w[index]), x), mlp.forward(layout.layers(w), x))
        # q(gω; gμ, gσ) = q(ω; μ, σ): the density is invariant when g acts on all three.
        torch.testing.assert_close(
            bnn.log_density_terms(w[index], mu[index], log_sd[index]), bnn.log_density_terms(w, mu, log_sd)
        )


def test_cost_matrix_form_equals_the_direct_computation():
    layout = mlp.Layout((7, 6, 3))
    mu, log_sd, generator = random_posterior(layout, 1, mean_scale=0.3)
    w = bnn.sample_weights(mu, log_sd, generator)
    perms = bnn.random_permutations(layout, 20, generator)
    fast = bnn.permutation_log_densities(layout, w, mu, log_sd, perms)
    direct = [bnn.log_density_terms(w, mu, log_sd)] + [
        bnn.log_density_terms(w, mu, log_sd, mlp.permutation_index(layout, bnn.group_element(perms, k)))
        for k in range(20)
    ]
    torch.testing.assert_close(fast, torch.stack(direct), rtol=1e-10, atol=1e-9)
    # ... and the cost matrix itself, entry by entry.
    cost = bnn.unit_cost_matrix(layout, w, mu, log_sd)
    units, means = mlp.unit_rows(layout.layers(w), 0), mlp.unit_rows(layout.layers(mu), 0)
    variances = mlp.unit_rows(layout.layers(torch.exp(2 * log_sd)), 0)
    for j in range(6):
        for k in range(6):
            assert cost[j, k].item() == pytest.approx(
                ((units[j] - means[k]) ** 2 / variances[k]).sum().item(), rel=1e-10
            )


def overlapping_units():
    """Four hidden units with close means and wide posteriors: the 24 permuted copies overlap, so 0 < I < log 24
    and the bound is not trivial. (layout, μ, log σ, the generator the draws go on with, I by enumeration)."""
    layout = mlp.Layout((2, 4, 1))
    mu, log_sd, _ = random_posterior(layout, 2, mean_scale=0.6, sd=0.7)
    generator = torch.Generator().manual_seed(3)
    return layout, mu, log_sd, generator, bnn.exact_mutual_information(layout, mu, log_sd, 3000, generator)


def infonce_draws(layout, mu, log_sd, K: int, draws: int, generator) -> tuple[float, float]:
    """Î_K over ``draws`` weight draws: its mean and standard error, after checking each is at most log K."""
    values = []
    for _ in range(draws):
        w, noise = bnn.sample_weights(mu, log_sd, generator, return_noise=True)
        values.append(bnn.infonce(layout, w, noise, mu, log_sd, K, generator)[0].item())
    assert max(values) <= math.log(K) + 1e-9
    return sum(values) / len(values), torch.tensor(values).std().item() / math.sqrt(len(values))


def test_infonce_is_below_min_of_exact_mi_and_log_k():
    """The fast lane's twin of the next test: the bound alone, for K = 2 and 16, on 300 draws each."""
    layout, mu, log_sd, generator, exact = overlapping_units()
    for K in (2, 16):
        estimate, standard_error = infonce_draws(layout, mu, log_sd, K, 300, generator)
        assert estimate <= exact + 4 * standard_error + 0.02


@pytest.mark.slow  # 1 500 draws for each K up to 128: 7 s
def test_infonce_is_below_min_of_exact_mi_and_log_k_and_approaches_it():
    layout, mu, log_sd, generator, exact = overlapping_units()
    assert 0.3 < exact < math.log(24) - 0.3
    estimates = {}
    for K in (2, 4, 16, 128):
        estimates[K], standard_error = infonce_draws(layout, mu, log_sd, K, 1500, generator)
        assert estimates[K] <= exact + 4 * standard_error + 0.02
    assert estimates[2] < estimates[4] < estimates[16] < estimates[128]
    assert estimates[128] == pytest.approx(exact, abs=0.1)


def test_screening_certifies_only_far_permutations():
    layout = mlp.Layout((30, 40, 10))
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
    layout = mlp.Layout((5, 4, 3))
    mu, log_sd, _ = random_posterior(layout, 5)
    expected = torch.distributions.kl_divergence(
        torch.distributions.Normal(mu, log_sd.exp()),
        torch.distributions.Normal(torch.zeros_like(mu), torch.full_like(mu, 1.7)),
    ).sum()
    assert gaussian.kl_to_prior(mu, log_sd, 1.7).item() == pytest.approx(expected.item(), rel=1e-12)


def test_written_out_gradients_match_autograd():
    layout = mlp.Layout((6, 5, 3))
    mu, log_sd, generator = random_posterior(layout, 6)
    mu.requires_grad_()
    log_sd.requires_grad_()
    x = torch.randn(8, 6, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 3, (8,), generator=generator)
    noise = torch.randn(layout.n_params, generator=generator, dtype=torch.float64)
    w = torch.addcmul(mu, log_sd.exp(), noise)
    loss = F.cross_entropy(mlp.forward(layout.layers(w), x), y) + gaussian.kl_to_prior(mu, log_sd, 0.8) / 100
    expected_mu, expected_log_sd = torch.autograd.grad(loss, [mu, log_sd])
    w_leaf = w.detach().requires_grad_()
    (grad_w,) = torch.autograd.grad(F.cross_entropy(mlp.forward(layout.layers(w_leaf), x), y), [w_leaf])
    sd = log_sd.detach().exp()
    grad_mu, grad_log_sd = bnn.negative_elbo_gradients(grad_w, sd * noise, mu.detach(), sd, 0.8, 100)
    torch.testing.assert_close(grad_mu, expected_mu)
    torch.testing.assert_close(grad_log_sd, expected_log_sd)


@pytest.mark.parametrize("sizes", [(6, 5, 3), (4, 5, 3, 2), (20, 7, 2), (2, 16, 16, 10)])
def test_written_out_backward_matches_autograd(sizes):
    layout = mlp.Layout(sizes)
    mu, _, generator = random_posterior(layout, 3)
    x = torch.randn(16, sizes[0], generator=generator, dtype=torch.float64)
    labels = torch.randint(0, sizes[-1], (16,), generator=generator)
    leaf = mu.clone().requires_grad_()
    loss = F.cross_entropy(mlp.forward(layout.layers(leaf), x), labels)
    (expected,) = torch.autograd.grad(loss, [leaf])
    gradient = torch.full_like(mu, float("nan"))  # every entry must be written
    written_loss = mlp.cross_entropy_gradient(layout.layers(mu), x, labels, layout.layers(gradient))
    assert written_loss.item() == pytest.approx(loss.item(), rel=1e-12)
    torch.testing.assert_close(gradient, expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("shared", [True, False], ids=["shared inputs", "inputs per net"])
@pytest.mark.parametrize("sizes", [(2, 16, 16, 2), (6, 5, 3), (20, 3, 4, 10)])
def test_written_out_backward_of_a_batch_of_nets_is_each_nets_own(sizes, shared):
    layout, nets = mlp.Layout(sizes), 3
    generator = torch.Generator().manual_seed(4)
    flat = torch.randn(nets, layout.n_params, generator=generator, dtype=torch.float64)
    x = torch.randn(*(() if shared else (nets,)), 12, sizes[0], generator=generator, dtype=torch.float64)
    labels = torch.randint(0, sizes[-1], (*(() if shared else (nets,)), 12), generator=generator)
    gradient = torch.full_like(flat, float("nan"))
    losses = mlp.cross_entropy_gradient(layout.layers(flat), x, labels, layout.layers(gradient))
    for net in range(nets):
        leaf = flat[net].clone().requires_grad_()
        own_x, own_labels = (x, labels) if shared else (x[net], labels[net])
        loss = F.cross_entropy(mlp.forward(layout.layers(leaf), own_x), own_labels)
        (expected,) = torch.autograd.grad(loss, [leaf])
        assert losses[net].item() == pytest.approx(loss.item(), rel=1e-12)
        torch.testing.assert_close(gradient[net], expected, rtol=1e-12, atol=1e-14)


def test_flat_kl_equals_the_termwise_kl():
    layout = mlp.Layout((30, 20, 10))
    mu, log_sd, _ = random_posterior(layout, 6, mean_scale=0.1, sd=0.05)
    expected = gaussian.kl_to_prior(mu, log_sd, 0.7).item()
    assert gaussian.flat_kl_to_prior(mu, log_sd, 0.7, log_sd.exp()).item() == pytest.approx(expected, rel=1e-12)
    single = gaussian.flat_kl_to_prior(mu.float(), log_sd.float(), 0.7, log_sd.float().exp()).item()
    assert single == pytest.approx(expected, rel=1e-6)


def test_a_normal_table_gives_each_step_independent_standard_normals():
    n, steps = 200, 4000
    table = bnn.NormalTable(n, steps, torch.Generator().manual_seed(0))
    draws = torch.stack([table.draw(step) for step in range(steps)]).double()  # (steps, n)
    # Per coordinate over steps: mean 0 and variance 1, each within 4.5 standard errors.
    means, variances = draws.mean(0), draws.var(0)
    assert means.abs().max() < 4.5 / math.sqrt(steps)
    assert (variances - 1).abs().max() < 4.5 * math.sqrt(2 / steps)
    # Across coordinates over steps, and across steps at one coordinate: uncorrelated.
    correlation = torch.corrcoef(draws[:, :50].t())
    off_diagonal = correlation[~torch.eye(50, dtype=torch.bool)]
    assert off_diagonal.abs().max() < 4.5 / math.sqrt(steps)
    lagged = (draws[1:] * draws[:-1]).mean(0)
    assert lagged.abs().max() < 4.5 / math.sqrt(steps)
    # No two steps read the same window: no step's vector is another's, even flipped.
    assert len({tuple(row[:4].tolist()) for row in draws.abs()}) == steps


def test_table_and_fresh_draws_give_the_same_gradient_variance():
    layout, (mu, log_sd, x, y) = ESTIMATOR_LAYOUT, estimator_problem()
    sd = log_sd.exp()

    def gradients(normals, seed):
        source = normals(layout.n_params, 3000, torch.Generator().manual_seed(seed))
        rows = []
        for step in range(3000):
            noise = source.draw(step).double()
            w, gradient = torch.addcmul(mu, sd, noise), torch.empty_like(mu)
            mlp.cross_entropy_gradient(layout.layers(w), x, y, layout.layers(gradient))
            rows.append(torch.cat(bnn.negative_elbo_gradients(gradient, sd * noise, mu, sd, 1.0, 100)))
        return torch.stack(rows)

    table, fresh = gradients(bnn.NormalTable, 1), gradients(bnn.FreshNormals, 2)
    # Total variance over coordinates: the two agree within 10 % (each has about 2 % error here).
    ratio = table.var(0).sum() / fresh.var(0).sum()
    assert 0.9 < ratio.item() < 1.1
    standard_error = fresh.std(0) / math.sqrt(3000)
    assert ((table.mean(0) - fresh.mean(0)).abs() <= 5 * math.sqrt(2) * standard_error + 1e-12).all()


def test_direct_screen_bounds_the_exact_gaps_from_below():
    layout = mlp.Layout((30, 40, 10))
    for dtype, sd in ((torch.float64, 0.05), (torch.float32, 0.05), (torch.float32, 0.01)):
        mu, log_sd, generator = random_posterior(layout, 4, mean_scale=0.05)
        mu, log_sd = mu.to(dtype), torch.full_like(mu, math.log(sd), dtype=dtype)
        w, noise = bnn.sample_weights(mu, log_sd, generator, return_noise=True)
        perms = bnn.random_permutations(layout, 7, generator)
        exact = bnn.permutation_log_densities(layout, w.double(), mu.double(), log_sd.double(), perms)
        exact_gaps = -2 * (exact[1:] - exact[0])  # Σ((g⁻¹ω − μ)/σ)² − Σ ε², in float64
        bound = bnn._direct_gaps(layout, w, noise, mu, log_sd.exp(), perms)
        assert (bound <= exact_gaps + 1e-6 * exact_gaps.abs()).all()
        tolerance = 0.05 if dtype == torch.float32 else 1e-9  # the rounding allowance, ≈ γ × the sums
        assert (bound >= exact_gaps - tolerance * (exact_gaps.abs() + float(noise.double().square().sum()))).all()


def test_mnist_sized_initialisation_is_certified_far_by_the_direct_screen():
    # Means drawn like nn.Linear's, σ = 0.05 everywhere: the coordinate screen cannot tell (its 43
    # coordinates per unit are outweighed by the other 752 ε²); the direct screen can, cheaply.
    layout = mlp.Layout((784, 400, 10))
    generator = torch.Generator().manual_seed(0)
    mu = mlp.init_parameters(layout, generator)
    log_sd = torch.full_like(mu, math.log(0.05))
    w, noise = bnn.sample_weights(mu, log_sd, generator, return_noise=True)
    perms = bnn.random_permutations(layout, 63, generator)
    need = 2 * (45 + math.log(64))
    assert not (bnn._coordinate_gaps(layout, w, noise, mu, log_sd, perms) >= need).all()
    assert (bnn._direct_gaps(layout, w, noise, mu, log_sd.exp(), [perms[0][:7]]) >= need).all()
    for K in (8, 64):  # the direct screen alone, and after the coordinate screen failed
        value, active = bnn.infonce(layout, w, noise, mu, log_sd, K, generator)
        assert not active and value.item() == pytest.approx(math.log(K), abs=1e-12)


def test_drawn_identities_count_but_carry_no_gradient():
    # Two hidden units: G = {id, swap}; about half the draws are the identity.
    layout = mlp.Layout((30, 2, 3))
    mu, log_sd, generator = random_posterior(layout, 7, mean_scale=0.5, sd=0.01)
    mu.requires_grad_()
    w, noise = bnn.sample_weights(mu.detach(), log_sd, generator, return_noise=True)
    perms_generator = torch.Generator().manual_seed(8)
    expected = bnn.random_permutations(layout, 7, perms_generator)
    identities = int(bnn.identity_draws(expected).sum())
    assert 0 < identities < 7
    value, active = bnn.infonce(layout, w, noise, mu, log_sd, 8, torch.Generator().manual_seed(8))
    assert not active and value.item() == pytest.approx(math.log(8) - math.log(1 + identities), abs=1e-12)


# -- gradient estimators of E_q[NLL] -----------------------------------------------------------

ESTIMATOR_LAYOUT = mlp.Layout((6, 8, 3))


def estimator_problem(batch: int = 32, seed: int = 0):
    """A fixed θ (μ, log σ) of a small MLP and a minibatch."""
    generator = torch.Generator().manual_seed(seed)
    mu = 0.5 * torch.randn(ESTIMATOR_LAYOUT.n_params, generator=generator, dtype=torch.float64)
    log_sd = torch.full_like(mu, math.log(0.4))
    x = torch.randn(batch, 6, generator=generator, dtype=torch.float64)
    y = torch.randint(0, 3, (batch,), generator=generator)
    return mu, log_sd, x, y


def nll_gradients(estimator: str, mu, log_sd, x, y, draws: int, seed: int = 1) -> torch.Tensor:
    """``draws`` gradients of the minibatch NLL w.r.t. (μ, log σ), one row each, by ``estimator``."""
    generator = torch.Generator().manual_seed(seed)
    mu, log_sd = mu.clone().requires_grad_(), log_sd.clone().requires_grad_()
    rows = []
    for _ in range(draws):
        noise = torch.randn(mu.shape, generator=generator, dtype=mu.dtype)
        if estimator == "reparam":
            logits = mlp.forward(ESTIMATOR_LAYOUT.layers(torch.addcmul(mu, log_sd.exp(), noise)), x)
        elif estimator == "local":
            logits = bnn.local_reparam_outputs(ESTIMATOR_LAYOUT, mu, log_sd, x, generator)
        else:
            logits = bnn.flipout_outputs(ESTIMATOR_LAYOUT, mu, log_sd, noise, x, generator)
        grads = torch.autograd.grad(torch.nn.functional.cross_entropy(logits, y), [mu, log_sd])
        rows.append(torch.cat(grads))
    return torch.stack(rows)


@pytest.fixture(scope="module")
def estimator_gradients():
    problem = estimator_problem()
    return {estimator: nll_gradients(estimator, *problem, draws=6000) for estimator in bnn.ESTIMATORS}


def test_estimators_agree_on_the_mean_gradient(estimator_gradients):
    """All three estimate the same gradient of E_q[NLL]: every coordinate's means agree within 5 standard
    errors of their difference (330 comparisons)."""
    reference = estimator_gradients["reparam"]
    for estimator in ("local", "flipout"):
        other = estimator_gradients[estimator]
        error = torch.sqrt(reference.var(0) / len(reference) + other.var(0) / len(other))
        z = (reference.mean(0) - other.mean(0)) / error
        assert float(z.abs().max()) < 5, estimator


def test_local_reparameterisation_has_lower_variance_than_reparam(estimator_gradients):
    """At the same θ and minibatch, per-example noise averages out over the batch: the total variance of the
    gradient w.r.t. μ is lower than with one shared weight draw, and so is flipout's."""
    n = ESTIMATOR_LAYOUT.n_params
    total = {name: float(grads[:, :n].var(0).sum()) for name, grads in estimator_gradients.items()}
    assert total["local"] < 0.5 * total["reparam"], total
    assert total["flipout"] < total["reparam"], total


def test_local_outputs_have_the_weight_draws_distribution():
    """One example, many draws: the outputs' mean and variance match those of ω = μ + σ ⊙ ε drawn afresh (flipout's,
    whose draws the examples of a batch share, is checked through its mean gradient above)."""
    mu, log_sd, x, _ = estimator_problem(batch=1)
    generator = torch.Generator().manual_seed(3)
    x = x.expand(20_000, -1)  # the same input repeated: per-example noise makes these independent draws
    with torch.no_grad():
        noise = torch.randn(20_000, ESTIMATOR_LAYOUT.n_params, generator=generator, dtype=mu.dtype)
        fresh = mlp.forward(
            ESTIMATOR_LAYOUT.layers(mu + log_sd.exp() * noise), x[:1].unsqueeze(0).expand(20_000, 1, 6)
        )[:, 0]
        local = bnn.local_reparam_outputs(ESTIMATOR_LAYOUT, mu, log_sd, x, generator)
    error = torch.sqrt(fresh.var(0) / len(fresh) + local.var(0) / len(local))
    assert float(((fresh.mean(0) - local.mean(0)) / error).abs().max()) < 5
    np.testing.assert_allclose(local.var(0).numpy(), fresh.var(0).numpy(), rtol=0.1)
