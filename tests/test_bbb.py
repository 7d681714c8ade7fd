"""Bayes by backprop (symlab/lib/bbb.py): its KL is the project's one KL, its loss is the negative ELBO per
datum, and Adam on it finds the ELBO's optimum, found by brute force on a grid (a one-weight logistic
model, expectations by Gauss–Hermite quadrature) or known in closed form (a model whose posterior is an
isotropic Gaussian, which the mean-field family contains)."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_sghmc import gaussian_data, gaussian_logits
from tiny_networks import classification_problem, mlp_logits

from symlab.lib import bbb, gaussian

torch.set_num_threads(1)
F64 = torch.float64


def test_the_kl_term_is_the_projects_one_kl():
    generator = torch.Generator().manual_seed(0)
    mean = torch.randn(27, generator=generator, dtype=F64)
    rho = 3 * torch.randn(27, generator=generator, dtype=F64)
    x, y = torch.randn(4, 4, dtype=F64), torch.tensor([0, 1, 2, 0])
    _, kl = bbb.elbo_terms(mlp_logits, mean, rho, x, y, torch.zeros(1, 27, dtype=F64), 0.1)
    sd = F.softplus(rho)
    assert torch.allclose(kl, gaussian.kl_to_prior(mean, sd.log(), 0.1), rtol=1e-12)
    prior = torch.distributions.Normal(torch.tensor(0.0, dtype=F64), torch.tensor(0.1, dtype=F64))
    independent = torch.distributions.kl_divergence(torch.distributions.Normal(mean, sd), prior).sum()
    assert torch.allclose(kl, independent, rtol=1e-12)


def test_log_softplus_is_finite_where_softplus_underflows():
    rho = torch.tensor([-800.0, -30.0, -20.0, -19.0, 0.0, 5.0, 30.0], dtype=F64, requires_grad=True)
    value = bbb.log_softplus(rho)
    exact = torch.log(torch.log1p(torch.exp(rho.detach())))
    assert torch.isfinite(value).all()
    assert torch.allclose(value[1:], exact[1:], rtol=1e-9) and value[0] == -800.0
    value.sum().backward()
    assert torch.isfinite(rho.grad).all()


def test_the_data_term_is_the_mean_cross_entropy_over_the_draws():
    generator = torch.Generator().manual_seed(1)
    mean, rho = torch.randn(27, generator=generator), torch.randn(27, generator=generator) - 2
    x, y = torch.randn(10, 4, generator=generator), torch.randint(3, (10,), generator=generator)
    noise = torch.randn(3, 27, generator=generator)
    nll, _ = bbb.elbo_terms(mlp_logits, mean, rho, x, y, noise, 0.1)
    draws = [mean + F.softplus(rho) * eps for eps in noise]
    assert torch.allclose(nll, torch.stack([F.cross_entropy(mlp_logits(w, x), y) for w in draws]).mean())


# One weight, two classes: p(y = 1 | x, w) = sigmoid(w x); prior N(0, 1).
def logistic_logits(flat, x):
    half = 0.5 * flat[0] * x
    return torch.stack([-half, half], dim=-1)


def logistic_data(n=30):
    generator = torch.Generator().manual_seed(0)
    x = 1.5 * torch.randn(n, generator=generator, dtype=F64)
    y = (torch.rand(n, generator=generator, dtype=F64) < torch.sigmoid(1.2 * x)).long()
    return x, y


def quadrature_negative_elbo(mu, sd, x, y, prior_scale):
    """−ELBO/N of q = N(μ, σ²) on a grid of (μ, σ): E_q log p(y | x, w) by 60-point Gauss–Hermite
    quadrature, KL(q ‖ N(0, p²)) written out."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(60)
    signed = (2 * y - 1) * x
    w = mu[..., None] + sd[..., None] * nodes
    log_lik = -np.logaddexp(0, -w[..., None] * signed).sum(-1)
    expected = (log_lik * weights).sum(-1) / np.sqrt(2 * np.pi)
    kl = 0.5 * (sd**2 + mu**2) / prior_scale**2 - np.log(sd / prior_scale) - 0.5
    return (kl - expected) / len(x)


def grid_optimum(objective, mu_range, sd_range, zooms=4, points=51):
    """The minimiser of ``objective`` on a 51 × 51 grid, then on grids zoomed ten-fold around the best."""
    for _ in range(zooms):
        mu, sd = np.meshgrid(np.linspace(*mu_range, points), np.linspace(*sd_range, points), indexing="ij")
        i, j = np.unravel_index(np.argmin(objective(mu, sd)), mu.shape)
        d_mu, d_sd = (mu_range[1] - mu_range[0]) / (points - 1), (sd_range[1] - sd_range[0]) / (points - 1)
        mu_range = (mu[i, j] - 2 * d_mu, mu[i, j] + 2 * d_mu)
        sd_range = (max(sd[i, j] - 2 * d_sd, 1e-6), sd[i, j] + 2 * d_sd)
    return mu[i, j], sd[i, j]


@pytest.mark.parametrize("mc_samples, tolerance", [(64, 0.03), (3, 0.15)])
def test_the_fit_finds_the_elbo_optimum_on_a_grid(mc_samples, tolerance):
    x, y = logistic_data()
    best_mu, best_sd = grid_optimum(
        lambda m, s: quadrature_negative_elbo(m, s, x.numpy(), y.numpy(), 1.0), (-1.0, 4.0), (0.01, 1.5)
    )
    assert 0.1 < best_sd < 1.0 and best_mu > 0.5  # an interior optimum, not the grid's edge
    mean, sd = bbb.bbb_fit(
        logistic_logits,
        torch.zeros(1, dtype=F64),
        x,
        y,
        epochs=900,
        batch_size=len(x),
        lr=0.03,
        milestones=(300, 600),
        gamma=0.1,
        generator=torch.Generator().manual_seed(0),
        prior_scale=1.0,
        init_rho=-3.0,
        mc_samples=mc_samples,
    )
    assert abs(mean.item() - best_mu) < tolerance * best_sd, (mean.item(), best_mu, best_sd)
    assert abs(sd.item() / best_sd - 1) < tolerance, (sd.item(), best_sd)


def test_the_fit_recovers_a_gaussian_posterior():
    x, y = gaussian_data()  # log p(y | x, w) = −½|w − x|²: the posterior is N(Σx/λ, I/λ), λ = N + 1/p²
    prior_scale = 0.5
    lam = len(x) + 1 / prior_scale**2
    mean, sd = bbb.bbb_fit(
        gaussian_logits,
        torch.zeros(2, dtype=F64),
        x,
        y,
        epochs=120,
        batch_size=5,
        lr=0.03,
        milestones=(40, 80),
        gamma=0.1,
        generator=torch.Generator().manual_seed(0),
        prior_scale=prior_scale,
        init_rho=-3.0,
        mc_samples=32,
    )
    assert torch.allclose(mean, x.sum(0) / lam, atol=0.05 / lam**0.5), (mean, x.sum(0) / lam)
    assert torch.allclose(sd, torch.full((2,), lam**-0.5, dtype=F64), rtol=0.05), (sd, lam**-0.5)


def small_problem():
    generator = torch.Generator().manual_seed(9)
    x, y = torch.randn(40, 4, generator=generator), torch.randint(3, (40,), generator=generator)
    return 0.3 * torch.randn(27, generator=generator), x, y


def fit_small(seed, **change):
    flat, x, y = small_problem()
    kwargs = dict(epochs=3, batch_size=16, lr=0.01, generator=torch.Generator().manual_seed(seed))
    return bbb.bbb_fit(mlp_logits, flat, x, y, **{**kwargs, **change})


def test_seeded_fits_are_identical():
    first, again, other = fit_small(1), fit_small(1), fit_small(2)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[0], other[0])


def test_a_diverging_learning_rate_raises_naming_the_step():
    with pytest.raises(FloatingPointError, match=r"Bayes by backprop diverged at step \d+ \(epoch \d+\)"):
        fit_small(1, lr=1e25)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(epochs=0), "epochs"),
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size=41), "batch_size"),
        (dict(lr=0.0), "lr"),
        (dict(prior_scale=-1.0), "prior_scale"),
        (dict(kl_weight=-1.0), "kl_weight"),
        (dict(mc_samples=0), "mc_samples"),
        (dict(gamma=0.0), "gamma"),
    ],
)
def test_invalid_parameters_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        fit_small(1, **change)


def test_the_kl_weight_enters_as_kl_over_n():
    losses = {}
    for weight in (0.0, 2.0):
        seen = []
        fit_small(1, kl_weight=weight, init_rho=-1.0, on_step=lambda step, loss: seen.append((step, loss)))
        losses[weight] = seen
    assert [step for step, _ in losses[2.0]] == list(range(1, 10))  # 3 epochs of ⌈40/16⌉ = 3 steps
    # The same draws at the first step: the losses differ by 2 KL(q₀ ‖ p)/N alone.
    flat, x, _ = small_problem()
    rho = torch.full_like(flat, -1.0)
    kl = gaussian.kl_to_prior(flat, bbb.log_softplus(rho), bbb.BLITZ_PRIOR_SCALE)
    assert losses[2.0][0][1] - losses[0.0][0][1] == pytest.approx(2 * float(kl) / len(x), rel=1e-5)


def test_the_learning_rate_drops_after_each_milestone():
    one_epoch = fit_small(1, epochs=1)
    frozen_after_one = fit_small(1, milestones=(1,), gamma=1e-30)
    assert all(torch.allclose(a, b, rtol=0, atol=1e-20) for a, b in zip(one_epoch, frozen_after_one))
    assert not torch.allclose(fit_small(1)[0], one_epoch[0])


@pytest.mark.parametrize("net", ["mlp", "conv"])
def test_real_networks_fit_and_sample(net):
    generator = torch.Generator().manual_seed(0)
    logits, p, x, y = classification_problem(net, 60, generator)
    seen = []
    mean, sd = bbb.bbb_fit(
        logits,
        0.3 * torch.randn(p, generator=generator),
        x,
        y,
        epochs=30,
        batch_size=20,
        lr=0.01,
        generator=generator,
        on_step=lambda step, loss: seen.append(loss),
    )
    assert mean.shape == sd.shape == (p,) and torch.all(sd > 0)
    assert np.mean(seen[-9:]) < np.mean(seen[:9])
    samples = bbb.bbb_samples(mean, sd, 5, generator)
    assert samples.shape == (5, p) and torch.isfinite(samples).all()


def test_samples_have_the_fitted_mean_and_sd():
    mean, sd = torch.tensor([1.0, -2.0, 0.0], dtype=F64), torch.tensor([0.1, 2.0, 1e-3], dtype=F64)
    draws = bbb.bbb_samples(mean, sd, 40_000, torch.Generator().manual_seed(0))
    assert torch.allclose(draws.mean(0), mean, atol=4.5 * float(sd.max()) / 200)
    assert torch.allclose(draws.std(0), sd, rtol=4.5 / 200)
    again = bbb.bbb_samples(mean, sd, 40_000, torch.Generator().manual_seed(0))
    assert torch.equal(draws, again)
    with pytest.raises(ValueError, match="count"):
        bbb.bbb_samples(mean, sd, 0, torch.Generator())
