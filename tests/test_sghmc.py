"""SGHMC through posteriors (symlab/lib/sghmc.py), checked on Gaussian targets known exactly.

Many independent chains run at once, as blocks of one parameter vector whose log density is a sum over the
blocks; each chain's time average is then one independent draw, so the standard error of a mean or
covariance is the spread of the per-chain averages over √chains, and the effective sample size is the
variance of one sample over that squared standard error. The O(lr) bias of the uncorrected integrator
is known exactly too: the chain is linear on a Gaussian, and its stationary covariance solves a
discrete Lyapunov equation."""

import itertools

import numpy as np
import pytest
import scipy.linalg
import torch
from tiny_networks import classification_problem

from symlab.lib import sghmc

torch.set_num_threads(1)
F64 = torch.float64
Z = 4.5  # standard errors allowed


def euler_stationary_cov(precision: np.ndarray, lr: float, friction: float, temperature: float) -> np.ndarray:
    """Stationary covariance of θ under posteriors' step on ℓ = −½ θᵀKθ: the state (θ, m) maps by
    A = [[I, εI], [−εK, (1 − εα)I]] plus noise N(0, diag(0, 2αεT I)), so Σ = AΣAᵀ + Q."""
    d = len(precision)
    eye = np.eye(d)
    a = np.block([[eye, lr * eye], [-lr * precision, (1 - lr * friction) * eye]])
    q = np.zeros((2 * d, 2 * d))
    q[d:, d:] = 2 * friction * lr * temperature * eye
    return scipy.linalg.solve_discrete_lyapunov(a, q)[:d, :d]


def chain_statistics(samples: torch.Tensor, centre: torch.Tensor):
    """From samples [time, chains, d]: the mean and covariance (about ``centre``, the true mean) over all,
    their standard errors from the spread of the per-chain averages, and the smallest effective sample
    size, var(one sample) / SE²."""
    chains = samples.shape[1]
    d = samples - centre
    outer = d[..., :, None] * d[..., None, :]
    mean, cov = samples.mean((0, 1)), outer.mean((0, 1))
    se_mean = samples.mean(0).std(0) / chains**0.5
    se_cov = outer.mean(0).std(0) / chains**0.5
    ess = min((samples.flatten(0, 1).var(0) / se_mean**2).min(), (outer.flatten(0, 1).var(0) / se_cov**2).min())
    return mean, cov, se_mean, se_cov, float(ess)


def test_the_chain_samples_a_correlated_gaussian():
    target_mean = torch.tensor([1.0, -2.0], dtype=F64)
    target_cov = torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=F64)
    precision = torch.linalg.inv(target_cov)
    chains, lr, friction = 1000, 0.03, 2.0

    def log_density(flat, _batch):
        d = flat.view(chains, 2) - target_mean
        return -0.5 * ((d @ precision) * d).sum()

    generator = torch.Generator().manual_seed(0)
    start = 3 * torch.randn(2 * chains, generator=generator, dtype=F64)
    samples = sghmc.sghmc_chain(
        log_density,
        start,
        itertools.repeat(None),
        lr=lr,
        friction=friction,
        temperature=1.0,
        burn_in=500,
        thinning=5,
        count=300,
        generator=generator,
    )
    mean, cov, se_mean, se_cov, ess = chain_statistics(samples.view(-1, chains, 2), target_mean)
    assert ess > 5000, ess
    assert torch.all((mean - target_mean).abs() < Z * se_mean), (mean, se_mean)
    # The integrator's own stationary law, exactly; then the target, up to that law's known O(lr) bias.
    chain_cov = torch.from_numpy(euler_stationary_cov(precision.numpy(), lr, friction, 1.0))
    bias = (chain_cov - target_cov).abs()
    assert bias.max() < 0.02
    assert torch.all((cov - chain_cov).abs() < Z * se_cov), (cov, chain_cov, se_cov)
    assert torch.all((cov - target_cov).abs() < Z * se_cov + bias), (cov, se_cov)


# A "network" whose log-likelihood is Gaussian in w: for the blocks w_k ∈ R² of the flat vector,
# z₀ = −½ Σ_k |w_k − x|² ≤ 0 and z₁ = log(1 − e^{z₀}), so that log softmax(z)₀ = z₀. With every label 0,
# the posterior under N(0, v I) factorises over blocks, each N(Σ_i x_i / λ, I/λ) with λ = N + 1/v.
def gaussian_logits(flat, x):
    blocks = flat.view(-1, 2)
    # Σ_k |w_k − x|² = |w|² − 2 x·Σ_k w_k + K|x|², in O(K + n)
    z0 = -0.5 * (flat.dot(flat) - 2 * x @ blocks.sum(0) + len(blocks) * (x * x).sum(1))
    return torch.stack([z0, torch.log(-torch.expm1(z0))], dim=-1)


def gaussian_data(n=20):
    generator = torch.Generator().manual_seed(1)
    x = torch.tensor([0.7, -0.4], dtype=F64) + 0.5 * torch.randn(n, 2, generator=generator, dtype=F64)
    return x, torch.zeros(n, dtype=torch.long)


def test_the_gaussian_network_has_the_posterior_it_claims():
    x, y = gaussian_data()
    w = torch.tensor([0.3, 0.1, -0.2, 0.5], dtype=F64)
    log_lik = torch.log_softmax(gaussian_logits(w, x), -1)[:, 0]
    assert torch.allclose(log_lik, -0.5 * ((w.view(2, 1, 2) - x) ** 2).sum((0, 2)))
    # mean_log_posterior × N is the unnormalised log posterior; its gradient vanishes at Σx/λ.
    prior_var = 0.5
    mode = (x.sum(0) / (len(x) + 1 / prior_var)).repeat(2).requires_grad_()
    value = sghmc.mean_log_posterior(gaussian_logits, mode, x, y, len(x), prior_var)
    (grad,) = torch.autograd.grad(value, mode)
    assert grad.abs().max() < 1e-12


@pytest.mark.parametrize("batch_size", [20, 5])
def test_network_samples_match_the_exact_posterior(batch_size):
    x, y = gaussian_data()
    n, chains, prior_var, lr, friction = len(x), 1000, 1.0, 0.03, 2.0
    lam = n + 1 / prior_var
    post_mean, post_var = x.sum(0) / lam, 1 / lam
    generator = torch.Generator().manual_seed(2)
    start = torch.randn(2 * chains, generator=generator, dtype=F64)
    samples = sghmc.sghmc_samples(
        gaussian_logits,
        start,
        x,
        y,
        prior_var=prior_var,
        lr=lr,
        friction=friction,
        batch_size=batch_size,
        burn_in=400,
        thinning=5,
        count=200,
        generator=generator,
    )
    mean, cov, se_mean, se_cov, ess = chain_statistics(samples.view(-1, chains, 2), post_mean)
    assert ess > 5000, ess
    assert torch.all((mean - post_mean).abs() < Z * se_mean), (mean, post_mean, se_mean)
    # Per datum, the curvature is λ/N and the temperature 1/N (posteriors' convention).
    chain_var = euler_stationary_cov(np.array([[lam / n]]), lr, friction, 1 / n)[0, 0]
    assert abs(chain_var - post_var) < 0.02 * post_var
    target_cov = post_var * torch.eye(2, dtype=F64)
    assert torch.all((cov - target_cov).abs() < Z * se_cov + abs(chain_var - post_var)), (cov, post_var, se_cov)


def test_the_temperature_scales_the_posterior():
    x, y = gaussian_data()
    n, chains, temperature = len(x), 1000, 4.0
    generator = torch.Generator().manual_seed(3)
    samples = sghmc.sghmc_samples(
        gaussian_logits,
        torch.zeros(2 * chains, dtype=F64),
        x,
        y,
        prior_var=1.0,
        lr=0.03,
        friction=2.0,
        batch_size=n,
        burn_in=500,
        thinning=5,
        count=100,
        generator=generator,
        temperature=temperature,
    )
    var = samples.view(-1, 2).var(0)
    assert torch.allclose(var, torch.full((2,), temperature / (n + 1), dtype=F64), rtol=0.05), var


def small_problem():
    x, y = gaussian_data()
    start = torch.zeros(4, dtype=F64)
    kwargs = dict(prior_var=1.0, lr=0.02, friction=2.0, batch_size=5, burn_in=10, thinning=3, count=7)
    return start, x, y, kwargs


def test_each_step_is_posteriors_own(monkeypatch):
    calls = []
    real_update = sghmc._posteriors_sghmc().update

    def spy(*args, **kwargs):
        calls.append(kwargs["lr"])
        return real_update(*args, **kwargs)

    monkeypatch.setattr(sghmc._posteriors_sghmc(), "update", spy)
    start, x, y, kwargs = small_problem()
    samples = sghmc.sghmc_samples(gaussian_logits, start, x, y, generator=torch.Generator().manual_seed(0), **kwargs)
    assert calls == [0.02] * (10 + 3 * 7)
    assert samples.shape == (7, 4) and torch.isfinite(samples).all()


def test_seeded_runs_are_identical_and_leave_the_global_generator_alone():
    start, x, y, kwargs = small_problem()
    torch.manual_seed(123)
    state = torch.get_rng_state()
    runs = [
        sghmc.sghmc_samples(gaussian_logits, start, x, y, generator=torch.Generator().manual_seed(seed), **kwargs)
        for seed in (5, 5, 6)
    ]
    assert torch.equal(runs[0], runs[1])
    assert not torch.equal(runs[0], runs[2])
    assert torch.equal(torch.get_rng_state(), state)


def test_samples_are_taken_after_burn_in_every_thinning_steps():
    start, x, y, kwargs = small_problem()
    seen = []
    sghmc.sghmc_samples(
        gaussian_logits,
        start,
        x,
        y,
        generator=torch.Generator().manual_seed(0),
        on_step=lambda step, value: seen.append(step),
        **kwargs,
    )
    assert seen == list(range(1, 32))
    kept = sghmc.sghmc_samples(
        gaussian_logits,
        start,
        x,
        y,
        generator=torch.Generator().manual_seed(0),
        **{**kwargs, "count": 1, "burn_in": 31 - 3, "thinning": 3},
    )
    full = sghmc.sghmc_samples(gaussian_logits, start, x, y, generator=torch.Generator().manual_seed(0), **kwargs)
    assert torch.equal(kept[0], full[-1])


def test_a_diverging_learning_rate_raises_naming_the_step():
    start, x, y, kwargs = small_problem()
    kwargs.update(lr=1.9, friction=0.5, burn_in=5000)
    with pytest.raises(FloatingPointError, match=r"SGHMC diverged at step \d+ of"):
        sghmc.sghmc_samples(
            gaussian_logits, start.float(), x.float(), y, generator=torch.Generator().manual_seed(0), **kwargs
        )


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(lr=0.0), "lr must be > 0"),
        (dict(friction=-1.0), "friction must be > 0"),
        (dict(lr=0.5, friction=5.0), "lr \\* friction must be < 2"),
        (dict(thinning=0), "thinning"),
        (dict(count=0), "count"),
        (dict(burn_in=-1), "burn_in"),
        (dict(batch_size=21), "batch_size"),
        (dict(prior_var=0.0), "prior_var"),
        (dict(temperature=0.0), "temperature"),
    ],
)
def test_invalid_parameters_are_refused(change, message):
    start, x, y, kwargs = small_problem()
    with pytest.raises(ValueError, match=message):
        sghmc.sghmc_samples(
            gaussian_logits, start, x, y, generator=torch.Generator().manual_seed(0), **{**kwargs, **change}
        )


@pytest.mark.parametrize("net", ["mlp", "conv"])
def test_real_networks_sample(net):
    generator = torch.Generator().manual_seed(0)
    logits, p, x, y = classification_problem(net, 30, generator)
    start = 0.3 * torch.randn(p, generator=generator)
    samples = sghmc.sghmc_samples(
        logits,
        start,
        x,
        y,
        prior_var=1.0,
        lr=0.05,
        friction=1.0,
        batch_size=8,
        burn_in=20,
        thinning=2,
        count=5,
        generator=generator,
    )
    assert samples.shape == (5, p) and torch.isfinite(samples).all()
    assert samples.std(0).min() > 0
