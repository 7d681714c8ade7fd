"""Full-batch HMC (symlab/lib/hmc.py) where the answer is known: a linear-Gaussian model's closed-form posterior,
an unstable step (divergent transitions), and scales 10⁴ apart (the mass matrix); resuming."""

import math

import numpy as np
import pytest
import torch

from symlab.lib import chains, hmc

F64 = torch.float64  # the chains' dtype: float64, as the reference posterior's grids and quadrature are


def linear_gaussian(n: int = 30, features: int = 3, noise: float = 0.5, prior_sd: float = 1.0, seed: int = 0):
    """y = Xβ + ε, ε ~ N(0, σ²), β ~ N(0, s²I): the log joint, batched over chains, and the exact posterior
    N(m, Σ), Σ = (XᵀX/σ² + I/s²)⁻¹, m = ΣXᵀy/σ²."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=g, dtype=F64)
    y = x @ torch.tensor([1.0, -2.0, 0.5][:features], dtype=F64) + noise * torch.randn(n, generator=g, dtype=F64)

    def log_joint(beta):  # [C, P] -> [C]
        residual = y - beta @ x.T
        return -0.5 * residual.square().sum(-1) / noise**2 - 0.5 * beta.square().sum(-1) / prior_sd**2

    covariance = torch.linalg.inv(x.T @ x / noise**2 + torch.eye(features, dtype=F64) / prior_sd**2)
    return log_joint, covariance @ x.T @ y / noise**2, covariance


def run(log_density, start, settings, seed=0):
    return hmc.hmc(log_density, start, settings, torch.Generator().manual_seed(seed))


def assert_mean_within_error(draws: torch.Tensor, expected: torch.Tensor, sigmas: float = 5.0):
    """Each coordinate's sample mean within ``sigmas`` Monte-Carlo standard errors, sd/√ESS."""
    values = draws.numpy()
    flat = values.reshape(-1, values.shape[-1])
    mcse = flat.std(0) / np.sqrt(chains.ess(values))
    np.testing.assert_array_less(np.abs(flat.mean(0) - expected.numpy()), sigmas * mcse)


def test_linear_gaussian_moments_match_the_closed_form():
    log_joint, mean, covariance = linear_gaussian()
    settings = hmc.HmcSettings(warmup=300, samples=1000, trajectory_length=1.5)
    state, draws = run(log_joint, torch.zeros(4, 3, dtype=F64), settings)
    assert_mean_within_error(draws.samples, mean)
    flat = draws.samples.reshape(-1, 3)
    np.testing.assert_allclose(torch.cov(flat.T).numpy(), covariance.numpy(), atol=0.15 * covariance.diag().max())
    assert chains.rhat(draws.samples.numpy()).max() < 1.01
    # Warm-up aims the mean acceptance probability at 0.8; ε is frozen after it.
    assert abs(float(draws.accept_prob.mean()) - 0.8) < 0.08
    assert not bool(draws.divergent.any())
    assert state.step_size.shape == (4,)


def test_scales_far_apart_are_learnt_by_the_mass_matrix():
    scales = torch.tensor([0.1, 10.0], dtype=F64)

    def log_density(theta):
        return -0.5 * (theta / scales).square().sum(-1)

    settings = hmc.HmcSettings(warmup=400, samples=800, trajectory_length=2.0)
    state, draws = run(log_density, torch.ones(4, 2, dtype=F64), settings, seed=1)
    np.testing.assert_allclose(state.inverse_mass.numpy(), np.broadcast_to(scales.square().numpy(), (4, 2)), rtol=0.6)
    np.testing.assert_allclose(draws.samples.reshape(-1, 2).std(0).numpy(), scales.numpy(), rtol=0.1)
    assert_mean_within_error(draws.samples, torch.zeros(2, dtype=F64))


def test_calibrating_the_step_brings_the_kept_kernels_acceptance_nearer_its_target(monkeypatch):
    """Dual averaging alone leaves α above its target (its iterates fluctuate, and α is concave in log ε); the
    calibration's batches at a fixed ε bring the kept kernel's mean α nearer, on each of three seeds."""
    log_joint, _, _ = linear_gaussian()
    settings = hmc.HmcSettings(warmup=300, samples=400, trajectory_length=1.5)

    def gaps():
        return [
            abs(float(run(log_joint, torch.zeros(4, 3, dtype=F64), settings, seed)[1].accept_prob.mean()) - 0.8)
            for seed in range(3)
        ]

    calibrated = gaps()
    monkeypatch.setattr(hmc, "_with_calibration", lambda windows, warmup: windows)
    dual_averaging_alone = gaps()
    assert all(gap > 0.07 for gap in dual_averaging_alone), dual_averaging_alone
    assert max(calibrated) < min(dual_averaging_alone), (calibrated, dual_averaging_alone)


def test_warm_up_ends_with_a_calibration_of_its_last_five_percent():
    assert hmc.warmup_windows(500)[-2:] == [("step", 25), ("calibrate", 25)]
    assert hmc.warmup_windows(100, adapt_mass=False) == [("step", 95), ("calibrate", 5)]
    assert hmc.warmup_windows(5) == [("step", 5)]
    assert sum(length for _, length in hmc.warmup_windows(1000)) == 1000


def test_a_first_guess_at_the_mass_sets_the_step_without_adaptation():
    """With v given as the true variances and no mass adaptation, the posterior looks isotropic to the sampler: the
    tuned ε is near one, where with v = 1 it must fit the narrowest scale (0.01) and so be a hundred times shorter."""
    scales = torch.tensor([0.01, 1.0], dtype=F64)

    def log_density(theta):
        return -0.5 * (theta / scales).square().sum(-1)

    settings = hmc.HmcSettings(warmup=100, samples=10, adapt_mass=False)
    start = torch.zeros(2, 2, dtype=F64)
    guessed = hmc.warm_up(
        log_density, start, settings, torch.Generator().manual_seed(0), inverse_mass=scales.square().expand(2, 2)
    )
    plain = hmc.warm_up(log_density, start, settings, torch.Generator().manual_seed(0))
    assert bool((guessed.step_size > 0.3).all()) and bool((plain.step_size < 0.03).all())
    torch.testing.assert_close(guessed.inverse_mass, scales.square().expand(2, 2))
    with pytest.raises(ValueError, match="inverse mass"):
        hmc.start(log_density, start, -torch.ones(2, 2, dtype=F64))


def test_an_unstable_step_is_divergent_and_rejected():
    """ε = 1 (the untuned start) on N(0, 0.01²): one leapfrog step lands where ℓ ≈ −½(r/0.01)², an energy error far
    beyond the threshold. Each transition is divergent and rejected: the chains stay where they started."""

    def log_density(theta):
        return -0.5 * (theta / 0.01).square().sum(-1)

    state = hmc.start(log_density, torch.zeros(3, 2, dtype=F64))
    _, draws = hmc.draw(log_density, state, 20, hmc.HmcSettings(), torch.Generator().manual_seed(2))
    assert bool(draws.divergent.all())
    assert not bool(draws.accepted.any())
    assert float(draws.accept_prob.max()) == 0.0
    assert bool((draws.samples == 0).all())


def test_drawing_in_two_calls_equals_drawing_in_one():
    log_joint, _, _ = linear_gaussian(seed=3)
    settings = hmc.HmcSettings(warmup=50, samples=40)
    generator = torch.Generator().manual_seed(5)
    state = hmc.warm_up(log_joint, torch.zeros(2, 3, dtype=F64), settings, generator)
    saved = generator.get_state()
    _, whole = hmc.draw(log_joint, state, 40, settings, generator)
    generator.set_state(saved)
    middle, first = hmc.draw(log_joint, state, 15, settings, generator)
    _, rest = hmc.draw(log_joint, middle, 25, settings, generator)
    assert torch.equal(torch.cat([first.samples, rest.samples], 1), whole.samples)


def test_a_start_where_the_density_is_not_finite_is_refused():
    log_joint, _, _ = linear_gaussian()
    with pytest.raises(FloatingPointError, match=r"chain\(s\) \[1\]"):
        hmc.start(log_joint, torch.tensor([[0.0, 0.0, 0.0], [math.nan, 0.0, 0.0]], dtype=F64))


@pytest.mark.parametrize(
    "field, value",
    [("warmup", -1), ("samples", 0), ("trajectory_length", 0.0), ("target_accept", 1.0), ("max_leapfrog", 0)],
)
def test_bad_settings_are_refused(field, value):
    with pytest.raises(ValueError, match=field.replace("_", " ").split()[0]):
        hmc.HmcSettings(**{field: value})
