"""The tractable BNN's maths (symlab.lib.two_relu) against brute force: quadrature, sampling, autograd
(docs/science.md, § Tractable BNN). The data and the runs are the toy lab's, drawn from its config."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy import integrate

from symlab.labs.toy import experiment as toy
from symlab.lib import two_relu
from symlab.lib.gaussian import kl_to_prior

CFG = toy.ToyConfig(alpha=0.5, noise=1.0, n_train=10, batch_size=10)


@pytest.fixture(scope="module")
def data():
    return toy.make_data(CFG)


# -- the network and its exact posterior on a grid ---------------------------------------------


def test_network_is_swap_invariant():
    w = np.array([[0.7, -1.3], [-1.3, 0.7]])
    x = np.linspace(-2, 2, 9)
    out = two_relu.network(w, x)
    np.testing.assert_allclose(out[0], out[1])
    np.testing.assert_allclose(two_relu.network(np.array([1.0, -1.0]), x), np.abs(x))


def test_grid_posterior_is_normalised_and_swap_symmetric(data):
    post = two_relu.exact_posterior(data, CFG.noise, CFG.prior_scale)
    assert post.probabilities().sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(post.log_density, post.log_density.T, atol=1e-9)
    i, j = np.unravel_index(post.log_density.argmax(), post.log_density.shape)
    assert post.axis[i] * post.axis[j] < 0  # the modes sit at opposite signs


def test_log_evidence_agrees_with_adaptive_quadrature(data):
    post = two_relu.exact_posterior(data, CFG.noise, CFG.prior_scale)

    def joint(w2, w1):
        pred = np.maximum(w1 * data.x_train, 0) + np.maximum(w2 * data.x_train, 0)
        log_lik = (-0.5 * ((data.y_train - pred) / CFG.noise) ** 2).sum() - data.x_train.size * (
            math.log(CFG.noise) + 0.5 * math.log(2 * math.pi)
        )
        log_prior = -0.5 * (w1**2 + w2**2) / CFG.prior_scale**2 - math.log(2 * math.pi * CFG.prior_scale**2)
        return math.exp(log_lik + log_prior - post.log_evidence)

    b = post.axis[-1]
    ratio, _ = integrate.dblquad(joint, -b, b, -b, b, epsabs=1e-10, epsrel=1e-8)
    # The ReLU creases along w₁ = 0 and w₂ = 0 limit the 201-point grid sum to O(h²): ~4e-4 here.
    assert math.log(ratio) == pytest.approx(0.0, abs=1e-3)


def test_posterior_predictive_matches_sampling(data):
    post = two_relu.exact_posterior(data, CFG.noise, CFG.prior_scale)
    x = np.array([-1.5, 0.3, 2.0])
    mean, std = two_relu.posterior_predictive(post, x, CFG.noise)
    rng = np.random.default_rng(0)
    flat = rng.choice(post.log_density.size, size=200_000, p=post.probabilities().ravel())
    w = np.stack([post.axis[flat // post.axis.size], post.axis[flat % post.axis.size]], -1)
    f = two_relu.network(w, x)
    np.testing.assert_allclose(mean, f.mean(0), atol=0.01)
    np.testing.assert_allclose(std, np.sqrt(f.var(0) + CFG.noise**2), atol=0.01)


def test_mass_bound_covers_the_posterior(data):
    post = two_relu.exact_posterior(data, CFG.noise, CFG.prior_scale)
    bound = two_relu.mass_bound(post)
    assert bound < post.axis[-1]
    inside = np.abs(post.axis) <= bound
    assert post.probabilities()[np.ix_(inside, inside)].sum() > 0.999


# -- mean-field q: the swap, the mutual information, the outlines ------------------------------


def grid_expectation(values_fn, mean, std, half_width=8.0, points=801):
    """E_q[values_fn(w)] for mean-field q on a fine grid (deterministic)."""
    axes = [np.linspace(m - half_width * s, m + half_width * s, points) for m, s in zip(mean, std)]
    w1, w2 = np.meshgrid(*axes, indexing="ij")
    w = np.stack([w1, w2], -1)
    q = np.exp(-0.5 * ((w1 - mean[0]) / std[0]) ** 2 - 0.5 * ((w2 - mean[1]) / std[1]) ** 2) / (
        2 * np.pi * std[0] * std[1]
    )
    cell = (axes[0][1] - axes[0][0]) * (axes[1][1] - axes[1][0])
    return float((q * values_fn(w)).sum() * cell), q, w, cell


MEANS = [(0.4, -0.3), (0.05, 0.02), (1.0, -1.0)]
STDS = [(0.3, 0.25), (0.4, 0.4), (0.2, 0.3)]


@pytest.mark.parametrize("mean, std", zip(MEANS, STDS))
def test_exact_mutual_information_is_entropy_gap(mean, std):
    m, ls = torch.tensor(mean, dtype=torch.float64), torch.log(torch.tensor(std, dtype=torch.float64))
    info, q, w, cell = grid_expectation(
        lambda w: two_relu.exact_mutual_information(torch.from_numpy(w), m, ls).numpy(), mean, std
    )
    # H(q_G) − H(q) with q_G(w) = ½q(w) + ½q(swap w), both by quadrature on the same grid.
    w_t = torch.from_numpy(w)
    log_q = two_relu.gaussian_log_density(w_t, m, ls).numpy()
    log_q_swap = two_relu.gaussian_log_density(w_t.flip(-1), m, ls).numpy()
    log_qg = np.logaddexp(log_q, log_q_swap) - math.log(2)
    # E_{q_G}[log q_G] = E_q[log q_G] because log q_G is swap-invariant.
    gap = -float((q * log_qg).sum() * cell) + float((q * log_q).sum() * cell)
    assert info == pytest.approx(gap, abs=1e-8)
    assert -1e-12 <= info <= math.log(2) + 1e-12


def infonce_expectation(mean, std, K, samples=400_000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    m, s = torch.tensor(mean, dtype=torch.float64), torch.tensor(std, dtype=torch.float64)
    w = m + s * torch.randn(samples, 2, dtype=torch.float64, generator=gen)
    values = two_relu.infonce_mutual_information(w, m, torch.log(s), K, gen)
    return values.mean().item(), values.std().item() / math.sqrt(samples)


def exact_information(mean, std) -> float:
    """I(ω; g) of q = N(mean, diag std²) by quadrature on the grid."""
    m, ls = torch.tensor(mean, dtype=torch.float64), torch.log(torch.tensor(std, dtype=torch.float64))
    exact, *_ = grid_expectation(
        lambda w: two_relu.exact_mutual_information(torch.from_numpy(w), m, ls).numpy(), mean, std
    )
    return exact


@pytest.mark.parametrize("mean, std", zip(MEANS, STDS))
def test_infonce_is_below_the_exact_information_and_log_k(mean, std):
    """The fast lane's twin of the next test: the bound alone, for K = 2 and 16 on a quarter of its draws."""
    exact = exact_information(mean, std)
    for K in (2, 16):
        value, stderr = infonce_expectation(mean, std, K, samples=100_000)
        assert value <= min(exact, math.log(K)) + 4 * stderr + 1e-6


@pytest.mark.slow  # 400 000 draws for each K up to 256: 3-7 s a case
@pytest.mark.parametrize("mean, std", zip(MEANS, STDS))
def test_infonce_bounds_and_convergence(mean, std):
    exact = exact_information(mean, std)
    estimates = {}
    for K in (2, 4, 16, 256):
        value, stderr = infonce_expectation(mean, std, K)
        tol = 4 * stderr + 1e-6
        assert value <= min(exact, math.log(K)) + tol
        estimates[K] = value
    assert estimates[256] == pytest.approx(exact, abs=0.01 + 4 * stderr)
    assert estimates[2] <= estimates[16] + 1e-3


def test_opposite_sides_is_the_probability_of_opposite_signs():
    generator = np.random.default_rng(2)
    for mean, std in Q_CASES:
        w = np.asarray(mean) + np.asarray(std) * generator.standard_normal((200_000, 2))
        assert two_relu.opposite_sides(mean, std) == pytest.approx(np.mean(w[:, 0] * w[:, 1] < 0), abs=0.005)


@pytest.mark.parametrize("alpha", [0.25, 0.5])
def test_the_grids_numbers_count_cells_on_a_zero_line_by_halves(alpha):
    """The 201-point grid has a point on w = 0 (exactly, or −4.4e-16 at α = 0.25): its cells straddle the zero
    line. Against a 2000-point grid over the same square, which has no point on zero: P(w₁w₂ < 0) to 1e-3, and
    the other grid-derived numbers (the evidence, the predictive's test MSE) to 1e-3 relative."""
    config = toy.ToyConfig(alpha=alpha)
    data = toy.make_data(config)
    post = two_relu.exact_posterior(data, config.noise, config.prior_scale)
    assert abs(post.axis[len(post.axis) // 2]) < 1e-15
    fine = two_relu.exact_posterior(data, config.noise, config.prior_scale, 2000, float(post.axis[-1]))
    assert np.abs(fine.axis).min() > 1e-4
    ours, reference = toy.exact_answer(data, config, post), toy.exact_answer(data, config, fine)
    assert ours.opposite_sides == pytest.approx(reference.opposite_sides, abs=1e-3)
    assert ours.log_evidence == pytest.approx(reference.log_evidence, rel=1e-3)
    assert ours.test_mse == pytest.approx(reference.test_mse, rel=1e-3)


def test_gaussian_outlines_are_the_sd_ellipses_of_q_and_its_swap():
    mean, std = np.array([0.8, -0.3]), np.array([0.2, 0.5])
    x, y = two_relu.gaussian_outlines(mean, std, symmetrised=False, radii=(1.0, 2.0))
    pieces = np.split(np.stack([x, y], 1), np.flatnonzero(np.isnan(x)))
    radii = [np.sqrt((((p[~np.isnan(p[:, 0])] - mean) / std) ** 2).sum(1)) for p in pieces]
    np.testing.assert_allclose(radii[0], 1.0)
    np.testing.assert_allclose(radii[1], 2.0)
    xs, ys = two_relu.gaussian_outlines(mean, std, symmetrised=True, radii=(1.0,))
    swapped = np.stack([xs, ys], 1)[np.flatnonzero(np.isnan(xs))[0] + 1 :]
    np.testing.assert_allclose(np.sqrt((((swapped - mean[::-1]) / std[::-1]) ** 2).sum(1)), 1.0)


# -- the batched trainer ----------------------------------------------------------------------


def test_elbo_g_is_at_least_elbo_at_equal_parameters(data):
    for method_mean in ([0.3, -0.2], [0.0, 0.0], [1.0, -1.0]):
        trainer = two_relu.ToyTrainer([toy.run_spec("mfvi", CFG), toy.run_spec("sgm", CFG)])
        with torch.no_grad():
            trainer.mean.copy_(torch.tensor([method_mean, method_mean], dtype=torch.float64))
        metrics = trainer.evaluate()
        assert np.all(metrics["elbo_g"] >= metrics["elbo"] - 1e-12)
        assert metrics["objective"][1] == metrics["elbo_g"][1] and metrics["objective"][0] == metrics["elbo"][0]


@pytest.mark.parametrize("mi", ["exact", "infonce"])
def test_trained_bounds_stay_below_log_evidence(mi):
    cfg = toy.ToyConfig(alpha=0.5, noise=1.0, n_train=10, batch_size=10, mi=mi, K=4)
    post = two_relu.exact_posterior(toy.make_data(cfg), cfg.noise, cfg.prior_scale)
    trainer = two_relu.ToyTrainer([toy.run_spec("mfvi", cfg), toy.run_spec("sgm", cfg)])
    trainer.step(800)
    metrics = trainer.evaluate()  # exact: closed form and quadrature; the grid's log p(D) is good to ~1e-7
    assert np.all(metrics["elbo"] <= post.log_evidence)
    assert np.all(metrics["elbo_g"] <= post.log_evidence)
    assert metrics["elbo_g"][1] > metrics["elbo"][0]  # the symmetrised bound is tighter
    assert metrics["elbo"][0] > post.log_evidence - 2.0  # and MFVI learned something


def test_reset_keeps_the_initialisation_and_training_moves_it():
    trainer = two_relu.ToyTrainer([toy.run_spec("mfvi", CFG)])
    start = trainer.parameters()[0]
    trainer.step(50)
    assert not np.allclose(trainer.parameters()[0], start)
    first = trainer.parameters()[0]
    trainer.reset()
    np.testing.assert_array_equal(trainer.parameters()[0], start)
    trainer.step(50)
    np.testing.assert_array_equal(trainer.parameters()[0], first)  # same seed, same path
    assert trainer.history[0].step == [0]  # reset recorded the start only


def test_divergence_is_contained_to_its_run():
    bad = toy.ToyConfig(alpha=0.5, noise=1.0, n_train=10, batch_size=10, lr=1.0)
    trainer = two_relu.ToyTrainer([toy.run_spec("mfvi", CFG), toy.run_spec("mfvi", bad)])
    with torch.no_grad():
        trainer.log_std[1] = 800.0  # exp overflows: the second run diverges
    trainer.step(5)
    assert trainer.diverged == [False, True]
    assert np.all(np.isfinite(trainer.parameters()[0][0]))


def test_train_to_continues_and_replays_from_the_start():
    config = toy.ToyConfig(alpha=0.5, seed=4)
    reference = two_relu.train_runs([toy.run_spec("sgm", config)], steps=60, chunk=20)
    trainer = two_relu.ToyTrainer([toy.run_spec("sgm", config)])
    seen = []
    trainer.train_to(20, 20)
    trainer.train_to(60, 20, progress=lambda done, steps: seen.append((done, steps)))
    assert seen == [(40, 60), (60, 60)] and trainer.history[0].step == [0, 20, 40, 60]
    np.testing.assert_array_equal(trainer.parameters()[0], reference.parameters()[0])
    trainer.train_to(20, 20)  # back: a replay from the initialisation
    assert trainer.history[0].step == [0, 20]
    trainer.train_to(60, 20)
    np.testing.assert_array_equal(trainer.parameters()[0], reference.parameters()[0])
    assert trainer.history[0].elbo == reference.history[0].elbo


def test_drawing_predictions_leaves_the_training_path_alone():
    """The live page draws predictions on every redraw: they must not change what training does next."""
    runs = [toy.run_spec("mfvi", CFG), toy.run_spec("sgm", CFG)]
    drawn, undrawn = two_relu.ToyTrainer(runs), two_relu.ToyTrainer(runs)
    for _ in range(3):
        first = drawn.predictive(np.linspace(-2, 2, 5))
        np.testing.assert_array_equal(first[0], drawn.predictive(np.linspace(-2, 2, 5))[0])
        drawn.train_to(drawn.steps_done + 10, 10)
        undrawn.train_to(undrawn.steps_done + 10, 10)
    np.testing.assert_array_equal(drawn.parameters()[0], undrawn.parameters()[0])
    assert drawn.history[0].elbo == undrawn.history[0].elbo


def test_the_trainer_refuses_runs_it_cannot_train_together():
    mfvi = toy.run_spec("mfvi", CFG)
    with pytest.raises(ValueError, match="at least one run"):
        two_relu.ToyTrainer([])
    with pytest.raises(ValueError, match="method must be one of"):
        two_relu.ToyTrainer([toy.run_spec("map", CFG)])
    for settings in (dict(mi="magic"), dict(init="zeros")):
        odd = two_relu.RunSpec("sgm", mfvi.data, replace(mfvi.settings, **settings))
        with pytest.raises(ValueError, match="mi must be one of"):
            two_relu.ToyTrainer([odd])
    for other in (replace(CFG, samples=8), replace(CFG, n_test=20), replace(CFG, batch_size=5)):
        with pytest.raises(ValueError, match="must share"):
            two_relu.ToyTrainer([mfvi, toy.run_spec("sgm", other)])
    two_relu.ToyTrainer([mfvi, toy.run_spec("sgm", replace(CFG, alpha=1.0, noise=0.5, lr=0.1, seed=3))])


# -- exact evaluation and the written-out gradient ---------------------------------------------

Q_CASES = [
    ([0.3, -0.2], [0.4, 0.3]),
    ([0.05, 0.0], [0.5, 0.5]),
    ([1.6, 1.6], [0.2, 0.3]),
    ([1.5, -1.4], [0.1, 0.4]),
    ([-0.7, 0.02], [0.05, 0.9]),
]


def trainer_at(cases, config=CFG):
    """A trainer whose runs sit at the given means and std devs."""
    trainer = two_relu.ToyTrainer([toy.run_spec("sgm", config) for _ in cases])
    with torch.no_grad():
        trainer.mean.copy_(torch.tensor([m for m, _ in cases], dtype=torch.float64))
        trainer.log_std.copy_(torch.log(torch.tensor([s for _, s in cases], dtype=torch.float64)))
    return trainer


def test_exact_evaluation_agrees_with_sampling():
    """The closed-form ELBO and predictive moments, and I by quadrature, against 200 000 samples of q."""
    trainer = trainer_at(Q_CASES)
    metrics = trainer.evaluate()
    generator = torch.Generator().manual_seed(5)
    with torch.no_grad():
        w = trainer.mean[:, None] + trainer.log_std.exp()[:, None] * torch.randn(
            len(Q_CASES), 200_000, 2, dtype=torch.float64, generator=generator
        )
        residual = (trainer.y_train[:, None, :] - two_relu.network(w, trainer.x_train[:, None, :])) / CFG.noise
        log_lik = (-0.5 * residual**2 - math.log(CFG.noise) - 0.5 * math.log(2 * math.pi)).sum(-1)
        elbo = log_lik.mean(1) - kl_to_prior(trainer.mean, trainer.log_std, trainer.prior_scale)
        information = two_relu.exact_mutual_information(w, trainer.mean[:, None], trainer.log_std[:, None])
        x = torch.linspace(-2, 2, 7, dtype=torch.float64)
        f = two_relu.network(w, x)
    error = lambda values: 4 * values.std(1).numpy() / math.sqrt(w.shape[1]) + 1e-6  # a tail no sample reaches
    assert np.all(np.abs(metrics["elbo"] - elbo.numpy()) <= error(log_lik))
    assert np.all(np.abs(metrics["elbo_g"] - metrics["elbo"] - information.mean(1).numpy()) <= error(information))
    mean, std = trainer.predictive(x.numpy())
    assert np.all(np.abs(mean - f.mean(1).numpy()) <= error(f))
    np.testing.assert_allclose(std**2 - CFG.noise**2, f.var(1).numpy(), rtol=0.02, atol=1e-4)


def test_quasi_monte_carlo_information_is_converged():
    """2¹⁶ fixed points against 2²⁰, on q's whose std devs differ up to 60-fold (where Gauss–Hermite rules fail)."""
    cases = Q_CASES + [([0.2, 0.25], [0.01, 0.6]), ([0.0, 0.0], [0.3, 0.05])]
    trainer = trainer_at(cases)
    default = two_relu.mutual_information_by_qmc(trainer.mean, trainer.log_std)
    finer = two_relu.mutual_information_by_qmc(trainer.mean, trainer.log_std, 2**20)
    np.testing.assert_allclose(default.detach().numpy(), finer.detach().numpy(), atol=1e-4)
    assert two_relu.mutual_information_by_qmc(trainer.mean, trainer.log_std).equal(
        default
    )  # fixed points: the same value


@pytest.mark.parametrize("mi", ["exact", "infonce"])
def test_the_written_out_gradient_is_autograds(mi):
    config = toy.ToyConfig(mi=mi, K=4, batch_size=4, n_train=10, restarts=2).validate()
    trainer = two_relu.ToyTrainer(toy.starts_of("mfvi", config) + toy.starts_of("sgm", config))
    trainer.theta.add_(
        0.3 * torch.randn(trainer.theta.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    )
    x, y = trainer._minibatch()
    eps = torch.randn(len(trainer.runs), trainer.samples, 2, dtype=torch.float64, generator=trainer.generator)
    state = trainer.generator.get_state()
    written = trainer.gradient(x, y, eps)
    # The objective as the former code wrote it, through autograd, with the same draws (InfoNCE's coins too).
    trainer.generator.set_state(state)
    theta = trainer.theta.clone().requires_grad_()
    mean, log_std = theta[:, :2], theta[:, 2:]
    w = mean[:, None, :] + torch.exp(log_std)[:, None, :] * eps
    noise = trainer.noise[:, :, None]
    log_lik = -0.5 * ((y[:, None, :] - two_relu.network(w, x[:, None, :])) / noise) ** 2 - torch.log(noise)
    expected = log_lik.sum(-1).mean(-1) * (trainer.x_train.shape[1] / x.shape[1])
    if mi == "exact":
        information = two_relu.exact_mutual_information(w, mean[:, None, :], log_std[:, None, :]).mean(-1)
    else:
        information = two_relu.infonce_mutual_information(
            w, mean[:, None, :], log_std[:, None, :], config.K, trainer.generator
        ).mean(-1)
    objective = (
        expected
        - kl_to_prior(mean, log_std, trainer.prior_scale)
        + torch.where(trainer.symmetrised, information, torch.zeros_like(expected))
    )
    (expected_gradient,) = torch.autograd.grad(-objective.sum(), [theta])
    torch.testing.assert_close(written, expected_gradient, rtol=1e-10, atol=1e-12)


# -- a live run recorded once and played back ----------------------------------------------------


def runs_of(config):
    return toy.starts_of("mfvi", config) + toy.starts_of("sgm", config)


def test_each_frame_of_a_trajectory_is_the_trainer_stopped_there():
    """Frame k is what a trainer trained k × 20 steps from the same start reads: the same parameters, histories,
    bounds and predictions (the recording changes nothing of the path)."""
    config = replace(CFG, restarts=2)
    trajectory = two_relu.record_trajectory(two_relu.ToyTrainer(runs_of(config)), 6, 20)
    assert len(trajectory) == 6
    x = np.linspace(-2, 2, 7)
    for k in (0, 3, 5):
        trainer = two_relu.ToyTrainer(runs_of(config))
        trainer.train_to(20 * k, 20)
        frame = trajectory.frame(k)
        assert frame.steps_done == trainer.steps_done == 20 * k
        for got, expected in zip(frame.parameters(), trainer.parameters()):
            np.testing.assert_array_equal(got, expected)
        assert [h.step for h in frame.history] == [h.step for h in trainer.history]
        assert [h.elbo_g for h in frame.history] == [h.elbo_g for h in trainer.history]
        np.testing.assert_array_equal(frame.latest_bounds(), trainer.latest_bounds())
        for got, expected in zip(frame.predictive(x), trainer.predictive(x)):
            np.testing.assert_allclose(got, expected, rtol=1e-12)
    with pytest.raises(IndexError):
        trajectory.frame(6)


def test_a_trajectory_stops_where_every_run_diverged():
    trainer = two_relu.ToyTrainer(runs_of(CFG))
    means, log_stds = trainer.initial
    trainer.initial = (means, torch.full_like(log_stds, 800.0))  # exp overflows at the first step: every run diverges
    trajectory = two_relu.record_trajectory(trainer, 50, 20)
    assert len(trajectory) == 2 and trajectory.diverged[1].all() and not trajectory.diverged[0].any()
    with pytest.raises(ValueError, match="frames >= 1"):
        two_relu.record_trajectory(trainer, 0, 20)


def test_the_ellipses_are_the_outlines_of_q():
    """Centre and half-axes, drawn round (cx + rx cos t, cy + ry sin t) as the page's chart draws them, are the
    outlines :func:`gaussian_outlines` gives, q's and its swap's."""
    mean, std = np.array([0.4, -0.9]), np.array([0.3, 0.2])
    centres, half_axes = two_relu.gaussian_ellipses(mean, std, symmetrised=True, radii=(1.0, 2.0))
    t = np.linspace(0.0, 2.0 * math.pi, 65)
    drawn_x = np.concatenate([np.append(c[0] + a[0] * np.cos(t), np.nan) for c, a in zip(centres, half_axes)])[:-1]
    drawn_y = np.concatenate([np.append(c[1] + a[1] * np.sin(t), np.nan) for c, a in zip(centres, half_axes)])[:-1]
    x, y = two_relu.gaussian_outlines(mean, std, symmetrised=True, radii=(1.0, 2.0))
    np.testing.assert_allclose(drawn_x, x)
    np.testing.assert_allclose(drawn_y, y)
