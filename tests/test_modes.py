"""The mode-interpolation core against known facts (docs/science.md, § Reverse KL between two modes)."""

import json
import math

import numpy as np
import pytest
from scipy import integrate

from symlab import cli
from symlab.labs.modes import LAB, params
from symlab.labs.modes import experiment as modes
from symlab.labs.modes.config import SweepConfig, sweep_alpha_max
from symlab.specs import controls

PAPER_THRESHOLDS = {0.25: 1.25, 0.5: 2.5, 1.0: 5.0, 2.0: 10.0}


@pytest.mark.parametrize("sigma", sorted(PAPER_THRESHOLDS))
def test_threshold_is_about_five_sigma(sigma):
    threshold = modes.exact_threshold(sigma, max(10.0, 10.0 * sigma))
    assert threshold == pytest.approx(PAPER_THRESHOLDS[sigma], rel=0.05)


def test_threshold_from_coarse_sweep_agrees_with_refined_one():
    sweep = modes.fit_exact(modes.alpha_grid(10, 100), 1.0)
    assert sweep.threshold() == pytest.approx(modes.exact_threshold(1.0), abs=0.11)


def test_small_alpha_sits_at_midpoint_and_is_wider():
    sweep = modes.fit_exact([0.5, 1.0, 2.0, 3.0, 4.0], 1.0)
    np.testing.assert_allclose(sweep.interpolation, 0.5, atol=1e-6)
    assert np.all(sweep.std_e1 > 1.0)
    assert np.all(np.diff(sweep.std_e1) > 0)


def test_large_alpha_sits_on_first_mode_with_kl_ln2():
    sweep = modes.fit_exact([7.0, 10.0, 15.0], 1.0)
    assert np.all(sweep.interpolation < 1e-3)
    np.testing.assert_allclose(sweep.kl, math.log(2), atol=2e-3)
    np.testing.assert_allclose(sweep.std_e1, 1.0, atol=1e-2)


def test_scale_invariance():
    base = modes.fit_exact([1.0, 3.0, 6.0], 1.0, dim=2)
    for c in (0.25, 3.0):
        scaled = modes.fit_exact([c * 1.0, c * 3.0, c * 6.0], c, dim=2)
        np.testing.assert_allclose(scaled.interpolation, base.interpolation, atol=1e-9)
        np.testing.assert_allclose(scaled.kl, base.kl, atol=1e-9)
        np.testing.assert_allclose(scaled.det_cov, c**4 * base.det_cov, rtol=1e-9)


def test_quadrature_matches_adaptive_integration():
    for m, s, a in [(0.0, 1.0, 3.0), (1.5, 1.7, 3.0), (0.2, 0.6, 6.0), (2.0, 2.5, 4.0)]:

        def integrand(x):
            log_q = -0.5 * ((x - m) / s) ** 2 - math.log(s) - 0.5 * math.log(2 * math.pi)
            return math.exp(log_q) * (log_q - modes._standard_log_mixture(np.array(x), a))

        reference, _ = integrate.quad(integrand, m - 12 * s, m + 12 * s, epsabs=1e-13, limit=200)
        assert modes.standard_reverse_kl(m, math.log(s), a) == pytest.approx(reference, abs=1e-10)


def test_analytic_gradient_and_hessian_match_finite_differences():
    rng = np.random.default_rng(0)
    h = 1e-5
    for _ in range(5):
        m, ls, a = rng.uniform(-1, 3), rng.uniform(-0.5, 0.8), rng.uniform(0, 6)
        _, grad, hess = modes._kl_grad_hess(np.array([m]), np.array([ls]), np.array([a]))
        f = lambda mm, ll: modes.standard_reverse_kl(mm, ll, a)
        fd = [(f(m + h, ls) - f(m - h, ls)) / (2 * h), (f(m, ls + h) - f(m, ls - h)) / (2 * h)]
        np.testing.assert_allclose(grad[0], fd, atol=1e-7)
        g = lambda mm, ll: modes._kl_grad_hess(np.array([mm]), np.array([ll]), np.array([a]))[1][0]
        fd_hess = np.stack([(g(m + h, ls) - g(m - h, ls)) / (2 * h), (g(m, ls + h) - g(m, ls - h)) / (2 * h)])
        np.testing.assert_allclose(hess[0], fd_hess, atol=1e-6)


def test_the_paths_objective_and_gradient_match_every_term_summed_node_by_node():
    """The Adam path's hot loop sums only softplus and sigmoid over the nodes, the rest from the weights' moments:
    against the objective of the landscape (standard_reverse_kl), the analytic gradient, and every term summed."""
    eps, weights = modes._EPS, modes._EPS_WEIGHTS
    rng = np.random.default_rng(3)
    for m, log_s, a in [(0.0, 0.0, 0.0), (0.5, -0.3, 2.0), (5.0, 0.1, 5.0), (-1.0, 0.7, 12.0), (0.2, -2.0, 30.0)] + [
        tuple(rng.uniform((-2, -1, 0), (6, 1, 15))) for _ in range(5)
    ]:
        kl, grad_m, grad_l = modes._standard_kl_and_grad(m, log_s, a)
        s = math.exp(log_s)
        z = m + s * eps
        t = a * z - 0.5 * a * a
        log_p = -0.5 * z * z + np.logaddexp(0.0, t) - math.log(2.0) - 0.5 * math.log(2 * math.pi)
        slope = a / (1.0 + np.exp(-t)) - z
        summed = (
            -(0.5 * (math.log(2 * math.pi) + 1.0) + log_s) - log_p @ weights,
            -(slope @ weights),
            -1.0 - (slope * s * eps) @ weights,
        )
        assert (kl, grad_m, grad_l) == pytest.approx(summed, rel=1e-12, abs=1e-12)
        assert kl == pytest.approx(modes.standard_reverse_kl(m, log_s, a), rel=1e-12, abs=1e-12)
        _, grad, _ = modes._kl_grad_hess(np.array([m]), np.array([log_s]), np.array([a]))
        np.testing.assert_allclose([grad_m, grad_l], grad[0], rtol=1e-9, atol=1e-10)


def test_newton_optimum_is_a_stationary_minimum():
    a = np.array([1.0, 3.0, 4.5, 5.5, 8.0])
    x, _ = modes._newton_from_first_component(a)
    _, grad, hess = modes._kl_grad_hess(x[:, 0], x[:, 1], a)
    assert np.abs(grad).max() < 1e-8
    assert np.all(np.linalg.eigvalsh(hess)[:, 0] > 0)


def test_adam_path_ends_at_the_newton_optimum():
    for alpha in (2.0, 3.5, 6.0):
        path = modes.optimisation_path(alpha, 1.0, steps=3000)
        fit = modes.fit_exact([alpha], 1.0)
        assert path.mean[0] == 0.0 and path.std[0] == pytest.approx(1.0)
        assert path.mean[-1] == pytest.approx(fit.mean[0], abs=2e-3)
        assert path.std[-1] == pytest.approx(fit.std_e1[0], abs=2e-3)
        assert path.kl[-1] <= path.kl[0] + 1e-12


def test_exact_and_monte_carlo_protocols_agree():
    alphas = [1.0, 3.0, 7.0]
    exact = modes.fit_exact(alphas, 1.0, dim=2)
    mc = modes.fit_monte_carlo(alphas, 1.0, dim=2, samples=5000, steps=1000, seed=1)
    # 5000-sample gradients leave the Adam iterate jittering by ~0.01; the KL estimate's
    # standard error is ~0.005 nats.
    np.testing.assert_allclose(mc.interpolation, exact.interpolation, atol=0.03)
    np.testing.assert_allclose(mc.kl, exact.kl, atol=0.02)
    np.testing.assert_allclose(mc.det_cov, exact.det_cov, rtol=0.1)


def test_monte_carlo_full_covariance_and_higher_dimension():
    exact = modes.fit_exact([2.0, 8.0], 1.0, dim=5)
    mc = modes.fit_monte_carlo([2.0, 8.0], 1.0, dim=5, covariance="full", samples=2000, steps=600, seed=0)
    np.testing.assert_allclose(mc.interpolation, exact.interpolation, atol=0.04)
    np.testing.assert_allclose(mc.kl, exact.kl, atol=0.05)


def test_monte_carlo_is_seeded():
    a = modes.fit_monte_carlo([3.0], 1.0, samples=200, steps=20, seed=5)
    b = modes.fit_monte_carlo([3.0], 1.0, samples=200, steps=20, seed=5)
    c = modes.fit_monte_carlo([3.0], 1.0, samples=200, steps=20, seed=6)
    assert a.mean[0] == b.mean[0] and a.mean[0] != c.mean[0]


def test_forward_kl_is_moment_matching():
    """The forward-KL optimum is the mixture's mean and covariance, here its numerical moments on a grid of the
    plane (e₁, x₂), for each α of a sweep."""
    alphas, sigma = np.array([0.0, 1.0, 3.0, 8.0]), 0.7
    fwd = modes.forward_kl_optimum(alphas, sigma, dim=2)
    for i, alpha in enumerate(alphas):
        x1 = np.linspace(-10 * sigma, alpha + 10 * sigma, 1201)
        x2 = np.linspace(-10 * sigma, 10 * sigma, 801)
        p = np.exp(modes.log_mixture_2d(x1[None, :], x2[:, None], alpha, sigma))

        def expect(f):
            return np.trapezoid(np.trapezoid(p * f, x1, axis=1), x2)

        mean = np.array([expect(x1[None, :]), expect(x2[:, None])])
        d1, d2 = x1[None, :] - mean[0], x2[:, None] - mean[1]
        cov = np.array([[expect(d1 * d1), expect(d1 * d2)], [expect(d1 * d2), expect(d2 * d2)]])
        assert expect(1.0) == pytest.approx(1.0, abs=1e-9) and mean[1] == pytest.approx(0.0, abs=1e-9)
        assert fwd.mean[i] == pytest.approx(mean[0], abs=1e-9)
        assert fwd.std_e1[i] == pytest.approx(math.sqrt(cov[0, 0]), rel=1e-9)
        assert fwd.det_cov[i] == pytest.approx(np.linalg.det(cov), rel=1e-9)
    assert math.isnan(fwd.interpolation[0]) and fwd.interpolation[1:] == pytest.approx(0.5)
    # KL(p || q*) by direct integration along e1.
    alpha = alphas[2]
    m, s = fwd.mean[2], fwd.std_e1[2]

    def integrand(x):
        log_p = float(modes.log_mixture(x, alpha, sigma))
        return math.exp(log_p) * (log_p - float(modes.log_normal(x, m, s)))

    reference, _ = integrate.quad(integrand, -10, alpha + 10, epsabs=1e-12)
    assert fwd.kl[2] == pytest.approx(reference, abs=1e-9)


def test_alpha_zero_interpolation_is_undefined_not_an_error():
    sweep = modes.fit_exact([0.0, 1.0], 1.0)
    assert math.isnan(sweep.interpolation[0]) and sweep.kl[0] == pytest.approx(0.0, abs=1e-12)


def test_threshold_is_none_when_sweep_never_crosses():
    assert modes.exact_threshold(1.0, alpha_max=3.0, points=10) is None


@pytest.mark.parametrize(
    "call",
    [
        lambda: modes.fit_exact([1.0], 0.0),
        lambda: modes.fit_exact([1.0], float("nan")),
        lambda: modes.fit_exact([-1.0], 1.0),
        lambda: modes.fit_exact([], 1.0),
        lambda: modes.fit_exact([1.0], 1.0, dim=0),
        lambda: modes.alpha_grid(10, 1),
        lambda: modes.fit_monte_carlo([1.0], 1.0, covariance="banded"),
        lambda: modes.fit_monte_carlo([1.0], 1.0, lr=-1),
        lambda: modes.sweep_report(SweepConfig(sigma=1.0, protocol="magic")),
    ],
)
def test_invalid_input_raises_clear_value_error(call):
    with pytest.raises(ValueError, match="must|needs"):
        call()


def test_sweep_config_names_every_bad_field_at_once():
    with pytest.raises(ValueError) as error:
        SweepConfig(sigma=0.0, dim=0, points=1, protocol="magic", lr=float("nan")).validate()
    for name in ("sigma", "dim", "points", "protocol", "lr"):
        assert f"{name} must be" in str(error.value)


def test_sweep_too_wide_for_sigma_is_rejected():
    with pytest.raises(ValueError, match="largest α/σ"):
        SweepConfig(sigma=0.1, alpha_max=1e200).validate()
    SweepConfig(sigma=0.1, alpha_max=1e10).validate()


def test_default_sweep_reaches_ten_sigma():
    assert SweepConfig(sigma=0.5).largest_alpha == 5.0
    assert SweepConfig(sigma=0.1).largest_alpha == 1.0
    assert SweepConfig(sigma=2.0).largest_alpha == 20.0
    assert modes.sweep_alphas(SweepConfig(sigma=2.0, alpha_max=3.0))[-1] == 3.0


@pytest.mark.parametrize("sigma", [0.1, 0.25, 1.0, 2.0, 20.0])
def test_the_sweep_range_follows_sigma_and_holds_the_alpha_shown(sigma):
    """The transition sits mid-sweep whatever σ (not squeezed below α = 0.5 at σ = 0.1, nor half the sweep empty
    at σ = 2); an α beyond 10σ stretches the range to hold it; 10σ otherwise."""
    largest = sweep_alpha_max(sigma)
    assert largest == pytest.approx(10 * sigma)
    assert modes.exact_threshold(sigma, largest) / largest == pytest.approx(0.48, abs=0.01)
    assert sweep_alpha_max(sigma, 5 * sigma) == largest
    assert sweep_alpha_max(sigma, 12 * sigma) == 12 * sigma


def test_the_command_line_sweeps_the_pages_range_with_the_same_keys(capsys):
    assert cli.main(["modes", "--sigma", "0.1", "--points", "5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["alphas"] == pytest.approx(list(np.linspace(0.0, sweep_alpha_max(0.1), 5)))
    assert report["threshold"] == pytest.approx(0.48, abs=0.01)
    assert list(report) == [
        "sigma",
        "dim",
        "protocol",
        "alphas",
        "interpolation",
        "det_cov",
        "kl",
        "std_e1",
        "threshold",
        "threshold_over_sigma",
        "forward_kl",
        "options",
    ]
    assert list(report["forward_kl"]) == ["det_cov", "kl"]


@pytest.mark.parametrize("sigma, dim", [(0.1, 100), (20.0, 100)])
def test_declared_ranges_keep_det_cov_finite_and_nonzero(sigma, dim):
    """The declared σ and d ranges' corners: det Σ* neither overflows nor underflows, forward KL included."""
    config = SweepConfig(sigma=sigma, dim=dim).validate()
    for sweep in (
        modes.fit_exact(modes.sweep_alphas(config), sigma, dim),
        modes.forward_kl_optimum(modes.sweep_alphas(config), sigma, dim),
    ):
        assert np.all(np.isfinite(sweep.det_cov)) and np.all(sweep.det_cov > 0)


# --- one declaration per control: the command line and the page derive theirs from SweepConfig's -----------


def parse(*argv):
    return cli.build_parser().parse_args(["modes", *argv])


def ends_and_beyond(spec):
    """A declared number's ends, and values just outside them (no upper end: none above)."""
    number = int if spec.kind == "int" else float
    ends = [number(spec.low)] + ([] if spec.high is None else [number(spec.high)])
    beyond = [number(spec.low - (spec.step or 1) if spec.low >= 1 else -1)]
    return ends, beyond + ([] if spec.high is None else [number(spec.high + 1)])


@pytest.mark.parametrize("name", list(controls.declared(SweepConfig)))
def test_cli_flag_takes_the_declared_range_and_rejects_the_rest_in_one_line(name, capsys):
    spec = controls.declaration(SweepConfig, name)
    flag = controls.flag_name(SweepConfig, name)
    sigma = [] if name == "sigma" else ["--sigma", "1"]
    inside, beyond = (spec.choices, ["magic"]) if spec.choices else ends_and_beyond(spec)
    for value in inside:
        assert getattr(parse(*sigma, flag, str(value)), name) == value
    for value in map(str, beyond):
        with pytest.raises(SystemExit) as exit_:
            parse(*sigma, flag, value)
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert exit_.value.code == 2 and error.startswith(f"python -m symlab modes: error: argument {flag}:")


def test_cli_defaults_are_the_paper_protocol_and_the_config_defaults():
    args = parse("--sigma", "1")
    assert controls.from_args(SweepConfig, args) == SweepConfig()
    assert (args.samples, args.steps, args.lr, args.points) == (5000, 1000, 1e-2, 100)


def test_page_parameters_are_the_declarations_with_the_page_cap():
    by_name = {param.name: param for param in LAB.page_params(None)}
    assert list(by_name) == ["alpha", "sigma", "dim", "forward", "surface"]
    for name in params.FIELDS:
        spec, default = controls.declared(SweepConfig)[name]
        param = by_name[controls.url_name(SweepConfig, name)]
        cap = params.CAPS.get(name)
        assert cap is None or cap < spec.high  # a cap lowers the declared range; it never widens it
        assert (param.kind, param.low, param.high, param.step, param.default) == (
            spec.kind,
            spec.low,
            cap or spec.high,
            spec.step,
            default,
        )
    # The page's α reaches the default sweep's end at its largest σ: both sides of α* ≈ 5σ.
    largest = SweepConfig(sigma=by_name["sigma"].high)
    assert by_name["alpha"].high == largest.largest_alpha
    assert modes.exact_threshold(largest.sigma, largest.largest_alpha) < largest.largest_alpha
