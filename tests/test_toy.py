"""The tractable BNN lab against exact facts: its config and data, the exact answer, restarts and outcomes,
the paper tables, the command line and the page's parameters (docs/science.md, § Tractable BNN). The maths
it trains with: tests/test_two_relu.py."""

import math
import re
from dataclasses import replace

import numpy as np
import pytest

from symlab import cli
from symlab.cli import toy as toy_cli
from symlab.labs.toy import LAB, params
from symlab.labs.toy import experiment as toy
from symlab.lib import two_relu
from symlab.specs import controls

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


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(alpha=-1),
        dict(noise=0),
        dict(n_train=0),
        dict(mi="magic"),
        dict(K=1),
        dict(lr=float("nan")),
        dict(init="zeros"),
        dict(seed=-1),
    ],
)
def test_invalid_configuration_is_rejected(kwargs):
    with pytest.raises(ValueError, match="must"):
        toy.ToyConfig(**kwargs).validate()


def test_validation_names_every_bad_field_at_once():
    bad = dict(alpha=-1, noise=0, n_train=0, mi="magic", K=1, lr=float("nan"), init="zeros", seed=-1)
    with pytest.raises(ValueError) as error:
        toy.ToyConfig(**bad).validate()
    for name in bad:
        assert f"{name} must be" in str(error.value)


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
    for argv in (
        ["--alphas", f"{params.ALPHAS.high + 1:g}"],
        ["--alphas", too_many],
        ["--seeds", str(params.SEEDS.high + 1)],
        ["--seeds", "0"],
    ):
        with pytest.raises(SystemExit):
            parse(*argv)
        assert re.search(r"must be|at most 10", capsys.readouterr().err.strip().splitlines()[-1])
    # The table's α values have α's declared range (no posterior is drawn for them, so no page cap).
    alpha = controls.declaration(toy.ToyConfig, "alpha")
    assert (params.ALPHAS.low, params.ALPHAS.high) == (alpha.low, alpha.high)


def test_page_parameters_are_the_declarations_with_the_page_caps():
    by_name = {param.name: param for param in LAB.page_params(None)}
    assert list(by_name) == [controls.url_name(toy.ToyConfig, name) for name in params.FIELDS] + [
        "alphas",
        "seeds",
        "adam_step",
        "surface",
    ]
    # The live training's place in its run, which presets leave alone (new settings start it over).
    assert (by_name["adam_step"].low, by_name["adam_step"].high) == (0, params.LIVE_STEPS)
    assert "adam_step" in params.PRESETS.keeps
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


# -- the exact answer, restarts and outcomes -------------------------------------------------


def test_exact_answer_is_the_posteriors_prediction_and_mass(data):
    post = two_relu.exact_posterior(data, CFG.noise, CFG.prior_scale)
    answer = toy.exact_answer(data, CFG, post)
    predicted = two_relu.posterior_predictive(post, data.x_test, CFG.noise)[0]
    assert answer.test_mse == pytest.approx(np.mean((predicted - data.y_test) ** 2), rel=1e-12)
    assert answer.log_evidence == post.log_evidence
    np.testing.assert_array_equal(answer.modes[1], answer.modes[0][::-1])
    # Cells off the zero lines count whole; a cell on one straddles it, and half of it has opposite signs.
    axis = np.where(np.abs(post.axis) < 1e-12, 0.0, post.axis)
    w1, w2 = np.meshgrid(axis, axis, indexing="ij")
    prob = post.probabilities()
    assert answer.opposite_sides == pytest.approx(prob[w1 * w2 < 0].sum() + 0.5 * prob[w1 * w2 == 0].sum(), rel=1e-12)
    far = toy.ToyConfig(alpha=3.0, seed=11)
    assert toy.exact_answer(toy.make_data(far), far).opposite_sides > 0.99


def test_start_zero_is_the_single_start_initialisation_and_the_starts_differ():
    config = toy.ToyConfig(alpha=1.0, seed=3, restarts=5)
    single = two_relu.ToyTrainer([toy.run_spec("mfvi", replace(config, restarts=1))])
    starts = two_relu.ToyTrainer(toy.starts_of("mfvi", config))
    means = starts.parameters()[0]
    np.testing.assert_array_equal(means[0], single.parameters()[0][0])
    assert len({tuple(m) for m in means}) == 5
    again = two_relu.ToyTrainer(toy.starts_of("mfvi", config))
    np.testing.assert_array_equal(again.parameters()[0], means)  # the seed fixes every start


@pytest.mark.parametrize(
    "bounds, tie, kept",
    [
        ([-3.0, -1.0, -2.0], 0.0, 1),
        ([-1.02, -1.0, -5.0], 0.05, 0),
        ([-1.02, -1.0], 0.0, 1),
        ([float("nan"), -4.0], 0.0, 1),
        ([float("nan"), float("nan")], 0.0, 0),
    ],
)
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
        trainer = two_relu.train_runs(toy.starts_of("mfvi", config), 2000)
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
        for method in two_relu.METHODS:
            args = cli.build_parser().parse_args(
                ["toy", "--alpha", str(alpha), "--method", method, "--seed", str(seed), "--json"]
            )
            reports[method] = args.run(args)
        for report in reports.values():
            assert report["test_mse"] <= 1.25 * report["exact_test_mse"], (seed, report["method"], report["starts"])
            assert report["elbo"] <= report["log_evidence"]
        assert reports["sgm"]["elbo"] > reports["mfvi"]["elbo_mf"]


# -- live training, played in the browser: the whole run once, its frames for the page's charts ----------------


def test_the_live_frames_are_the_kept_fits_at_each_frame():
    """Rebuilt as a browser rebuilds them, frame k's datasets are the kept fits of the trajectory's frame k: their
    ellipses, predictive bands and histories, to the encoding's digits."""
    from symlab.labs.toy import live
    from symlab.specs import animation

    config = toy.ToyConfig(restarts=2).validate()
    run = live.live_run(config, frames=4)
    assert len(run.trajectory) == run.animation.frames == 4
    document = animation.decode(run.animation)
    assert document["labels"] == [f"Adam step {20 * k} / {params.LIVE_STEPS}" for k in range(4)]
    exact = toy.exact_view(config, live.DISPLAY_GRID)[1]
    for k in (0, 3):
        snapshot = run.trajectory.frame(k)
        fits = live.frame_fits(config, snapshot, exact)
        rebuilt = animation.rows_at(document, k)
        means, stds = snapshot.parameters()
        for fit in fits:
            ellipses = rebuilt["posterior"]["lines"][live.POSTERIOR_LABELS[fit.method]]
            centres, half_axes = two_relu.gaussian_ellipses(means[fit.row], stds[fit.row], fit.method == "sgm")
            np.testing.assert_allclose(ellipses["cx"], centres[:, 0], rtol=1e-3, atol=1e-4)
            np.testing.assert_allclose(ellipses["ry"], half_axes[:, 1], rtol=1e-3, atol=1e-4)
            curve = rebuilt["bounds"]["lines"][live.METHOD_LABELS[fit.method]]
            history = snapshot.history[fit.row]
            assert curve["x"] == history.step
            np.testing.assert_allclose(curve["y"], getattr(history, live.BOUND_FIELDS[fit.method]), rtol=1e-3)
            assert f"{getattr(history, live.BOUND_FIELDS[fit.method])[-1]:.3f}" in document["captions"][k]
        others = rebuilt["posterior"]["lines"][live.POSTERIOR_LABELS["others"]]
        assert len(others["cx"]) == 2  # one start of each method not kept: its 1 sd ellipse
        band = rebuilt["predictions"]["bands"][live.PREDICTION_LABELS["mfvi"]]
        mfvi = next(fit for fit in fits if fit.method == "mfvi")
        mean, std = snapshot.predictive(band["x"])
        np.testing.assert_allclose(band["high"], mean[mfvi.row] + 2 * std[mfvi.row], rtol=1e-3, atol=1e-3)


def test_a_live_run_is_one_shared_task_and_is_stored_whole():
    from symlab.labs.toy import live
    from symlab.serving import codec

    config = toy.ToyConfig(restarts=1).validate()
    task = live.live_task(config)
    assert task.key == ("toy_live", config) and task.function is live.live_run and task.cost.elementwise > 0
    run = live.live_run(config, frames=3)
    back = codec.decode(codec.encode(run))
    assert back.animation == run.animation
    np.testing.assert_array_equal(back.trajectory.means, run.trajectory.means)
    assert back.trajectory.frame(2).history[0].elbo == run.trajectory.frame(2).history[0].elbo
