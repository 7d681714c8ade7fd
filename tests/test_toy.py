"""The tractable BNN core against exact facts (docs/science.md, § Tractable BNN)."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy import integrate

from symlab import cli, controls
from symlab.labs.toy import LAB, params
from symlab.labs.toy import cli as toy_cli
from symlab.labs.toy import experiment as toy

CFG = toy.ToyConfig(alpha=0.5, noise=1.0, n_train=10, batch_size=10)


@pytest.fixture(scope="module")
def data():
    return toy.make_data(CFG)


def test_data_are_seeded_and_follow_the_model():
    a, b = toy.make_data(CFG), toy.make_data(CFG)
    np.testing.assert_array_equal(a.x_train, b.x_train)
    c = toy.make_data(toy.ToyConfig(seed=1))
    assert not np.array_equal(a.x_train[:5], c.x_train[:5])
    big = toy.make_data(toy.ToyConfig(alpha=2.0, noise=0.1, n_test=20_000))
    residual = big.y_test - 2.0 * np.abs(big.x_test)
    assert residual.std() == pytest.approx(0.1, rel=0.05)


def test_network_is_swap_invariant():
    w = np.array([[0.7, -1.3], [-1.3, 0.7]])
    x = np.linspace(-2, 2, 9)
    out = toy.network(w, x)
    np.testing.assert_allclose(out[0], out[1])
    np.testing.assert_allclose(toy.network(np.array([1.0, -1.0]), x), np.abs(x))


def test_grid_posterior_is_normalised_and_swap_symmetric(data):
    post = toy.exact_posterior(data, CFG.noise, CFG.prior_scale)
    assert post.probabilities().sum() == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(post.log_density, post.log_density.T, atol=1e-9)
    i, j = np.unravel_index(post.log_density.argmax(), post.log_density.shape)
    assert post.axis[i] * post.axis[j] < 0  # the modes sit at opposite signs


def test_log_evidence_agrees_with_adaptive_quadrature(data):
    post = toy.exact_posterior(data, CFG.noise, CFG.prior_scale)

    def joint(w2, w1):
        pred = np.maximum(w1 * data.x_train, 0) + np.maximum(w2 * data.x_train, 0)
        log_lik = (-0.5 * ((data.y_train - pred) / CFG.noise) ** 2).sum() - data.x_train.size * (
            math.log(CFG.noise) + 0.5 * math.log(2 * math.pi))
        log_prior = -0.5 * (w1**2 + w2**2) / CFG.prior_scale**2 - math.log(2 * math.pi * CFG.prior_scale**2)
        return math.exp(log_lik + log_prior - post.log_evidence)

    b = post.axis[-1]
    ratio, _ = integrate.dblquad(joint, -b, b, -b, b, epsabs=1e-10, epsrel=1e-8)
    # The ReLU creases along w₁ = 0 and w₂ = 0 limit the 201-point grid sum to O(h²): ~4e-4 here.
    assert math.log(ratio) == pytest.approx(0.0, abs=1e-3)


def test_posterior_predictive_matches_sampling(data):
    post = toy.exact_posterior(data, CFG.noise, CFG.prior_scale)
    x = np.array([-1.5, 0.3, 2.0])
    mean, std = toy.posterior_predictive(post, x, CFG.noise)
    rng = np.random.default_rng(0)
    flat = rng.choice(post.log_density.size, size=200_000, p=post.probabilities().ravel())
    w = np.stack([post.axis[flat // post.axis.size], post.axis[flat % post.axis.size]], -1)
    f = toy.network(w, x)
    np.testing.assert_allclose(mean, f.mean(0), atol=0.01)
    np.testing.assert_allclose(std, np.sqrt(f.var(0) + CFG.noise**2), atol=0.01)


def grid_expectation(values_fn, mean, std, half_width=8.0, points=801):
    """E_q[values_fn(w)] for mean-field q on a fine grid (deterministic)."""
    axes = [np.linspace(m - half_width * s, m + half_width * s, points) for m, s in zip(mean, std)]
    w1, w2 = np.meshgrid(*axes, indexing="ij")
    w = np.stack([w1, w2], -1)
    q = np.exp(-0.5 * ((w1 - mean[0]) / std[0]) ** 2 - 0.5 * ((w2 - mean[1]) / std[1]) ** 2) / (2 * np.pi * std[0] * std[1])
    cell = (axes[0][1] - axes[0][0]) * (axes[1][1] - axes[1][0])
    return float((q * values_fn(w)).sum() * cell), q, w, cell


MEANS = [(0.4, -0.3), (0.05, 0.02), (1.0, -1.0)]
STDS = [(0.3, 0.25), (0.4, 0.4), (0.2, 0.3)]


@pytest.mark.parametrize("mean, std", zip(MEANS, STDS))
def test_exact_mutual_information_is_entropy_gap(mean, std):
    m, ls = torch.tensor(mean, dtype=torch.float64), torch.log(torch.tensor(std, dtype=torch.float64))
    info, q, w, cell = grid_expectation(
        lambda w: toy.exact_mutual_information(torch.from_numpy(w), m, ls).numpy(), mean, std)
    # H(q_G) − H(q) with q_G(w) = ½q(w) + ½q(swap w), both by quadrature on the same grid.
    w_t = torch.from_numpy(w)
    log_q = toy.gaussian_log_density(w_t, m, ls).numpy()
    log_q_swap = toy.gaussian_log_density(w_t.flip(-1), m, ls).numpy()
    log_qg = np.logaddexp(log_q, log_q_swap) - math.log(2)
    # E_{q_G}[log q_G] = E_q[log q_G] because log q_G is swap-invariant.
    gap = -float((q * log_qg).sum() * cell) + float((q * log_q).sum() * cell)
    assert info == pytest.approx(gap, abs=1e-8)
    assert -1e-12 <= info <= math.log(2) + 1e-12


def infonce_expectation(mean, std, K, samples=400_000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    m, s = torch.tensor(mean, dtype=torch.float64), torch.tensor(std, dtype=torch.float64)
    w = m + s * torch.randn(samples, 2, dtype=torch.float64, generator=gen)
    values = toy.infonce_mutual_information(w, m, torch.log(s), K, gen)
    return values.mean().item(), values.std().item() / math.sqrt(samples)


@pytest.mark.parametrize("mean, std", zip(MEANS, STDS))
def test_infonce_bounds_and_convergence(mean, std):
    m, ls = torch.tensor(mean, dtype=torch.float64), torch.log(torch.tensor(std, dtype=torch.float64))
    exact, *_ = grid_expectation(lambda w: toy.exact_mutual_information(torch.from_numpy(w), m, ls).numpy(), mean, std)
    estimates = {}
    for K in (2, 4, 16, 256):
        value, stderr = infonce_expectation(mean, std, K)
        tol = 4 * stderr + 1e-6
        assert value <= min(exact, math.log(K)) + tol
        estimates[K] = value
    assert estimates[256] == pytest.approx(exact, abs=0.01 + 4 * stderr)
    assert estimates[2] <= estimates[16] + 1e-3


def test_elbo_g_is_at_least_elbo_at_equal_parameters(data):
    for method_mean in ([0.3, -0.2], [0.0, 0.0], [1.0, -1.0]):
        trainer = toy.ToyTrainer([toy.RunSpec("mfvi", CFG), toy.RunSpec("sgm", CFG)])
        with torch.no_grad():
            trainer.mean.copy_(torch.tensor([method_mean, method_mean], dtype=torch.float64))
        metrics = trainer.evaluate()
        assert np.all(metrics["elbo_g"] >= metrics["elbo"] - 1e-12)
        assert metrics["objective"][1] == metrics["elbo_g"][1] and metrics["objective"][0] == metrics["elbo"][0]


@pytest.mark.parametrize("mi", ["exact", "infonce"])
def test_trained_bounds_stay_below_log_evidence(mi):
    cfg = toy.ToyConfig(alpha=0.5, noise=1.0, n_train=10, batch_size=10, mi=mi, K=4)
    post = toy.exact_posterior(toy.make_data(cfg), cfg.noise, cfg.prior_scale)
    trainer = toy.ToyTrainer([toy.RunSpec("mfvi", cfg), toy.RunSpec("sgm", cfg)])
    trainer.step(800)
    metrics = trainer.evaluate()  # exact: closed form and quadrature; the grid's log p(D) is good to ~1e-7
    assert np.all(metrics["elbo"] <= post.log_evidence)
    assert np.all(metrics["elbo_g"] <= post.log_evidence)
    assert metrics["elbo_g"][1] > metrics["elbo"][0]  # the symmetrised bound is tighter
    assert metrics["elbo"][0] > post.log_evidence - 2.0  # and MFVI learned something


def test_reset_keeps_the_initialisation_and_training_moves_it():
    trainer = toy.ToyTrainer([toy.RunSpec("mfvi", CFG)])
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
    trainer = toy.ToyTrainer([toy.RunSpec("mfvi", CFG), toy.RunSpec("mfvi", bad)])
    with torch.no_grad():
        trainer.log_std[1] = 800.0  # exp overflows: the second run diverges
    trainer.step(5)
    assert trainer.diverged == [False, True]
    assert np.all(np.isfinite(trainer.parameters()[0][0]))


@pytest.mark.parametrize("kwargs", [dict(alpha=-1), dict(noise=0), dict(n_train=0), dict(mi="magic"),
                                    dict(K=1), dict(lr=float("nan")), dict(init="zeros"), dict(seed=-1)])
def test_invalid_configuration_is_rejected(kwargs):
    with pytest.raises(ValueError, match="must"):
        toy.ToyConfig(**kwargs).validate()


def test_validation_names_every_bad_field_at_once():
    bad = dict(alpha=-1, noise=0, n_train=0, mi="magic", K=1, lr=float("nan"), init="zeros", seed=-1)
    with pytest.raises(ValueError) as error:
        toy.ToyConfig(**bad).validate()
    for name in bad:
        assert f"{name} must be" in str(error.value)


def test_train_to_continues_and_replays_from_the_start():
    config = toy.ToyConfig(alpha=0.5, seed=4)
    reference = toy.train_runs([toy.RunSpec("sgm", config)], steps=60, chunk=20)
    trainer = toy.ToyTrainer([toy.RunSpec("sgm", config)])
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


def test_mass_bound_covers_the_posterior(data):
    post = toy.exact_posterior(data, CFG.noise, CFG.prior_scale)
    bound = toy.mass_bound(post)
    assert bound < post.axis[-1]
    inside = np.abs(post.axis) <= bound
    assert post.probabilities()[np.ix_(inside, inside)].sum() > 0.999


def test_gaussian_outlines_are_the_sd_ellipses_of_q_and_its_swap():
    mean, std = np.array([0.8, -0.3]), np.array([0.2, 0.5])
    x, y = toy.gaussian_outlines(mean, std, symmetrised=False, radii=(1.0, 2.0))
    pieces = np.split(np.stack([x, y], 1), np.flatnonzero(np.isnan(x)))
    radii = [np.sqrt((((p[~np.isnan(p[:, 0])] - mean) / std) ** 2).sum(1)) for p in pieces]
    np.testing.assert_allclose(radii[0], 1.0)
    np.testing.assert_allclose(radii[1], 2.0)
    xs, ys = toy.gaussian_outlines(mean, std, symmetrised=True, radii=(1.0,))
    swapped = np.stack([xs, ys], 1)[np.flatnonzero(np.isnan(xs))[0] + 1:]
    np.testing.assert_allclose(np.sqrt((((swapped - mean[::-1]) / std[::-1]) ** 2).sum(1)), 1.0)


def test_paper_table_pairs_sgm_with_mfvi_on_the_same_seeds():
    rows = toy.paper_table(alphas=(0.5, 1.0), seeds=3, steps=600)
    assert [(r["alpha"], r["method"]) for r in rows] == [(0.5, "mfvi"), (0.5, "sgm"), (1.0, "mfvi"), (1.0, "sgm")]
    for mfvi, sgm in zip(rows[::2], rows[1::2]):
        assert all(mfvi[key] is None for key in toy.PAIRED_KEYS)
        assert sgm["elbo_gain_mean"] == pytest.approx(sgm["elbo_mean"] - mfvi["elbo_mean"], abs=1e-9)
        assert sgm["test_mse_change_mean"] == pytest.approx(sgm["test_mse_mean"] - mfvi["test_mse_mean"], abs=1e-9)
        # Modes 2√2·α apart against a posterior width ~0.2: SGM's bound gains close to ln 2 on every seed.
        assert sgm["seeds_higher_elbo"] == 3 and 0.3 < sgm["elbo_gain_mean"] < math.log(2) + 0.05
        assert 0 <= sgm["seeds_lower_test_mse"] <= 3


# --- one declaration per control: the command line and the page derive theirs from ToyConfig's -----------

def parse(*argv):
    return cli.build_parser().parse_args(["toy", *argv])


def ends_and_beyond(spec):
    """A declared number's two ends, and values just outside them."""
    number = int if spec.kind == "int" else float
    return [number(spec.low), number(spec.high)], [number(spec.low - (spec.step or 1)), number(spec.high + 1)]


@pytest.mark.parametrize("name", toy_cli.FLAGS)
def test_cli_flag_takes_the_declared_range_and_rejects_the_rest_in_one_line(name, capsys):
    spec = controls.declaration(toy.ToyConfig, name)
    flag = controls.flag_name(toy.ToyConfig, name)
    inside, beyond = (spec.choices, ["magic"]) if spec.choices else ends_and_beyond(spec)
    for value in inside:
        assert getattr(parse(flag, str(value)), name) == value
    for value in map(str, beyond):
        with pytest.raises(SystemExit) as exit_:
            parse(flag, value)
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert exit_.value.code == 2 and error.startswith(f"python -m symlab toy: error: argument {flag}:")


def test_cli_defaults_are_the_config_defaults():
    assert controls.from_args(toy.ToyConfig, parse(), toy_cli.FLAGS) == toy.ToyConfig()


def test_table_flags_take_the_page_parameters_ranges(capsys):
    args = parse("--alphas", "0,10", "--seeds", str(params.SEEDS.high))
    assert args.alphas == [0.0, 10.0] and args.seeds == params.SEEDS.high
    too_many = ",".join(["1"] * (params.ALPHAS.max_items + 1))
    for argv in (["--alphas", f"{params.ALPHAS.high + 1:g}"], ["--alphas", too_many],
                 ["--seeds", str(params.SEEDS.high + 1)], ["--seeds", "0"]):
        with pytest.raises(SystemExit):
            parse(*argv)
        assert "must be" in capsys.readouterr().err.strip().splitlines()[-1]
    # The table's α values have α's declared range (no posterior is drawn for them, so no page cap).
    alpha = controls.declaration(toy.ToyConfig, "alpha")
    assert (params.ALPHAS.low, params.ALPHAS.high) == (alpha.low, alpha.high)


def test_page_parameters_are_the_declarations_with_the_page_caps():
    by_name = {param.name: param for param in LAB.page_params(None)}
    assert list(by_name) == [controls.url_name(toy.ToyConfig, name) for name in params.FIELDS] + ["alphas", "seeds"]
    for name in params.FIELDS:
        spec, default = controls.declared(toy.ToyConfig)[name]
        param = by_name[controls.url_name(toy.ToyConfig, name)]
        if spec.choices:
            assert param.choices == spec.choices and param.default == default
            continue
        cap = params.CAPS.get(name)
        assert cap is None or cap < spec.high  # a cap lowers the declared range; it never widens it
        assert (param.kind, param.low, param.high, param.step) == (spec.kind, spec.low, cap or spec.high, spec.step)
        assert param.default == default


def test_drawing_predictions_leaves_the_training_path_alone():
    """The live page draws predictions on every redraw: they must not change what training does next."""
    runs = [toy.RunSpec("mfvi", CFG), toy.RunSpec("sgm", CFG)]
    drawn, undrawn = toy.ToyTrainer(runs), toy.ToyTrainer(runs)
    for _ in range(3):
        first = drawn.predictive(np.linspace(-2, 2, 5))
        np.testing.assert_array_equal(first[0], drawn.predictive(np.linspace(-2, 2, 5))[0])
        drawn.train_to(drawn.steps_done + 10, 10)
        undrawn.train_to(undrawn.steps_done + 10, 10)
    np.testing.assert_array_equal(drawn.parameters()[0], undrawn.parameters()[0])
    assert drawn.history[0].elbo == undrawn.history[0].elbo


# -- exact evaluation, restarts and outcomes --------------------------------------------------

Q_CASES = [([0.3, -0.2], [0.4, 0.3]), ([0.05, 0.0], [0.5, 0.5]), ([1.6, 1.6], [0.2, 0.3]), ([1.5, -1.4], [0.1, 0.4]),
           ([-0.7, 0.02], [0.05, 0.9])]


def trainer_at(cases, config=CFG):
    """A trainer whose runs sit at the given means and std devs."""
    trainer = toy.ToyTrainer([toy.RunSpec("sgm", config) for _ in cases])
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
        w = trainer.mean[:, None] + trainer.log_std.exp()[:, None] * torch.randn(len(Q_CASES), 200_000, 2, dtype=torch.float64,
                                                                                  generator=generator)
        residual = (trainer.y_train[:, None, :] - toy.network(w, trainer.x_train[:, None, :])) / CFG.noise
        log_lik = (-0.5 * residual**2 - math.log(CFG.noise) - 0.5 * math.log(2 * math.pi)).sum(-1)
        elbo = log_lik.mean(1) - toy.kl_to_prior(trainer.mean, trainer.log_std, trainer.prior_scale)
        information = toy.exact_mutual_information(w, trainer.mean[:, None], trainer.log_std[:, None])
        x = torch.linspace(-2, 2, 7, dtype=torch.float64)
        f = toy.network(w, x)
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
    default = toy.mutual_information_by_qmc(trainer.mean, trainer.log_std)
    finer = toy.mutual_information_by_qmc(trainer.mean, trainer.log_std, 2**20)
    np.testing.assert_allclose(default.detach().numpy(), finer.detach().numpy(), atol=1e-4)
    assert toy.mutual_information_by_qmc(trainer.mean, trainer.log_std).equal(default)  # fixed points: the same value


def test_opposite_sides_is_the_probability_of_opposite_signs():
    generator = np.random.default_rng(2)
    for mean, std in Q_CASES:
        w = np.asarray(mean) + np.asarray(std) * generator.standard_normal((200_000, 2))
        assert toy.opposite_sides(mean, std) == pytest.approx(np.mean(w[:, 0] * w[:, 1] < 0), abs=0.005)


def test_exact_answer_is_the_posteriors_prediction_and_mass(data):
    post = toy.exact_posterior(data, CFG.noise, CFG.prior_scale)
    answer = toy.exact_answer(data, CFG, post)
    predicted = toy.posterior_predictive(post, data.x_test, CFG.noise)[0]
    assert answer.test_mse == pytest.approx(np.mean((predicted - data.y_test) ** 2), rel=1e-12)
    assert answer.log_evidence == post.log_evidence
    np.testing.assert_array_equal(answer.modes[1], answer.modes[0][::-1])
    w1, w2 = np.meshgrid(post.axis, post.axis, indexing="ij")
    assert answer.opposite_sides == pytest.approx(post.probabilities()[w1 * w2 < 0].sum())
    far = toy.ToyConfig(alpha=3.0, seed=11)
    assert toy.exact_answer(toy.make_data(far), far).opposite_sides > 0.99


def test_start_zero_is_the_single_start_initialisation_and_the_starts_differ():
    config = toy.ToyConfig(alpha=1.0, seed=3, restarts=5)
    single = toy.ToyTrainer([toy.RunSpec("mfvi", replace(config, restarts=1))])
    starts = toy.ToyTrainer(toy.starts_of("mfvi", config))
    means = starts.parameters()[0]
    np.testing.assert_array_equal(means[0], single.parameters()[0][0])
    assert len({tuple(m) for m in means}) == 5
    again = toy.ToyTrainer(toy.starts_of("mfvi", config))
    np.testing.assert_array_equal(again.parameters()[0], means)  # the seed fixes every start


@pytest.mark.parametrize("bounds, tie, kept", [
    ([-3.0, -1.0, -2.0], 0.0, 1), ([-1.02, -1.0, -5.0], 0.05, 0), ([-1.02, -1.0], 0.0, 1),
    ([float("nan"), -4.0], 0.0, 1), ([float("nan"), float("nan")], 0.0, 0),
])
def test_kept_start_is_the_best_bound_or_the_first_tied(bounds, tie, kept):
    assert toy.kept_start(bounds, tie) == kept


def test_outcomes_name_a_stuck_fit_apart_from_one_between_the_modes():
    far = toy.ToyConfig(alpha=3.0, seed=11)
    far_answer = toy.exact_answer(toy.make_data(far), far)
    assert toy.outcome([1.6, 1.6], [0.2, 0.2], far_answer) == toy.STUCK
    assert toy.outcome([-1.6, -1.5], [0.2, 0.2], far_answer) == toy.STUCK
    assert toy.outcome([3.1, -2.6], [0.2, 0.27], far_answer) == "at a mode"
    assert toy.outcome([float("nan"), 0.0], [0.2, 0.2], far_answer) == "diverged"
    close = toy.ToyConfig()  # the paper's default: modes (0.27, −0.14) and (−0.14, 0.27)
    close_answer = toy.exact_answer(toy.make_data(close), close)
    assert toy.outcome([0.05, 0.01], [0.22, 0.22], close_answer) == "between the modes"
    # Same signs, but q spreads over both sides as the posterior does: not stuck.
    assert toy.outcome([0.26, 0.02], [0.25, 0.27], close_answer) != toy.STUCK


def test_a_stuck_start_is_named_and_restarts_recover_from_it():
    """α = 3, seed 11: the one-start fit ends with both units on one side; with 4 starts the kept fit is
    at a mode, and the starts that stuck are counted."""
    one = replace(toy.ToyConfig(alpha=3.0, seed=11), restarts=1)
    for config, outcome in ((one, toy.STUCK), (replace(one, restarts=4), "at a mode")):
        trainer = toy.train_runs(toy.starts_of("mfvi", config), 2000)
        metrics = trainer.evaluate()
        exact = toy.exact_answer(trainer.data[0], config)
        fit = toy.fits(trainer, metrics["objective"], {config: exact})[0]
        summary = toy.fit_summary(trainer, metrics, fit, exact, "retry")
        assert summary["outcome"] == outcome and summary["restarts"] == config.restarts
        assert (summary["notice"] is not None) == (outcome == toy.STUCK)
        assert summary["elbo"] == max(start["elbo"] for start in summary["starts"]) <= summary["log_evidence"]
    assert summary["stuck_starts"] >= 1 and summary["test_mse"] < 1.25 * summary["exact_test_mse"]


@pytest.mark.parametrize("alpha", [1.5, 2.0, 3.0])
def test_every_fit_is_near_the_exact_answer_at_far_apart_modes(alpha):
    """The command line, seeds 11–15, both methods: test MSE within 1.25× the exact posterior's, each bound
    under log p(D), SGM's above MFVI's ELBO."""
    for seed in range(11, 16):
        reports = {}
        for method in toy.METHODS:
            args = cli.build_parser().parse_args(["toy", "--alpha", str(alpha), "--method", method, "--seed", str(seed),
                                                  "--json"])
            reports[method] = args.run(args)
        for report in reports.values():
            assert report["test_mse"] <= 1.25 * report["exact_test_mse"], (seed, report["method"], report["starts"])
            assert report["elbo"] <= report["log_evidence"]
        assert reports["sgm"]["elbo"] > reports["mfvi"]["elbo_mf"]


@pytest.mark.parametrize("mi", ["exact", "infonce"])
def test_the_written_out_gradient_is_autograds(mi):
    config = toy.ToyConfig(mi=mi, K=4, batch_size=4, n_train=10, restarts=2).validate()
    trainer = toy.ToyTrainer(toy.starts_of("mfvi", config) + toy.starts_of("sgm", config))
    trainer.theta.add_(0.3 * torch.randn(trainer.theta.shape, generator=torch.Generator().manual_seed(1),
                                         dtype=torch.float64))
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
    log_lik = -0.5 * ((y[:, None, :] - toy.network(w, x[:, None, :])) / noise) ** 2 - torch.log(noise)
    expected = log_lik.sum(-1).mean(-1) * (trainer.x_train.shape[1] / x.shape[1])
    if mi == "exact":
        information = toy.exact_mutual_information(w, mean[:, None, :], log_std[:, None, :]).mean(-1)
    else:
        information = toy.infonce_mutual_information(w, mean[:, None, :], log_std[:, None, :], config.K,
                                                     trainer.generator).mean(-1)
    objective = expected - toy.kl_to_prior(mean, log_std, trainer.prior_scale) \
        + torch.where(trainer.symmetrised, information, torch.zeros_like(expected))
    (expected_gradient,) = torch.autograd.grad(-objective.sum(), [theta])
    torch.testing.assert_close(written, expected_gradient, rtol=1e-10, atol=1e-12)
