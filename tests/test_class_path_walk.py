"""The class path walked as a class does: each step's link (its preset) opened headless, a live panel played to its
end, and what the page then shows read against the step's sentence (symlab/specs/lessons.toml) and the numbers it
names (symlab/serving/findings.py). Steps 4 (Fig. 1), 8 (alignment) and 10 (the methods' table) name shipped
numbers only, which tests/test_findings.py reads against the shipped results."""

import math
from urllib.parse import parse_qsl

import pytest
from pagetest import metrics, open_page, player, tell
from streamlit.testing.v1 import AppTest
from vegatest import vega_chart

from symlab.serving import findings
from symlab.specs.settings import Hosting
from views.common.lessons import class_path, step_link

STEPS = {step.preset: step for step in class_path().steps}


def opened(preset: str) -> AppTest:
    """The step's page, opened from its link as the home page gives it (local server's settings)."""
    lab, _, query = step_link(STEPS[preset], Hosting.defaults(False)).partition("?")
    at = open_page(lab, timeout=300, **dict(parse_qsl(query)))
    assert not at.exception and at.selectbox(key=f"{lab}.preset").value == preset
    return at


def played_to_the_end(at: AppTest, key: str) -> AppTest:
    return tell(at, key, player(at, key)["frames"] - 1)


def shown(at: AppTest) -> dict[str, float]:
    return {label: float(value) for label, value in metrics(at).items()}


def test_close_modes_q_sits_at_the_midpoint_wider_than_either_mode():
    assert STEPS["Close modes"].see.startswith("Between them: q sits at the midpoint, wider than either mode")
    values = shown(opened("Close modes"))
    assert values["α⁻¹‖μ*‖"] == 0.5 and values["q's std dev along e₁ / σ"] > 1.0


def test_just_above_alpha_star_q_jumps_onto_one_mode_and_the_kl_nears_ln_2():
    step = STEPS["Just above α*"]
    assert "{alpha_star:.2f}" in step.see and "the KL approaches ln 2" in step.see
    values = shown(opened("Just above α*"))
    assert f"{values['threshold α*']:.2f}" == f"{findings.numbers()['alpha_star']:.2f}"
    assert values["α⁻¹‖μ*‖"] < 0.05  # on one mode: 0.5 just below α*
    assert 0.9 * math.log(2) < values["KL(q‖p_α)"] < math.log(2)


def test_forward_kl_covers_both_modes_however_far_apart():
    assert STEPS["Forward-KL contrast"].see.startswith("Over both: forward KL matches the target's mean and variance")
    at = opened("Forward-KL contrast")
    alpha, values = at.slider(key="modes.alpha").value, shown(at)
    assert values["α⁻¹‖μ‖ (forward KL)"] == 0.5
    assert values["std dev along e₁ / σ (forward)"] == pytest.approx(math.sqrt(1 + alpha**2 / 4), abs=1e-3)


def test_wide_nets_nearest_copies_fall_far_faster_than_the_bound_which_says_something_from_width_64():
    assert "only from width 64" in STEPS["Wide nets: modes crowd together"].see
    lines = vega_chart(opened("Wide nets: modes crowd together"), "Equivalent modes crowd together")["datasets"][
        "lines"
    ]
    nearest = lines[lines["series"].str.startswith("nearest copy")].set_index("x")["y"]
    bound = lines[lines["series"].str.startswith("Thm 3.1")].set_index("x")["y"]
    assert bound[bound < 2].index.min() == 64 and (bound[bound.index >= 64] < 2).all()
    assert nearest.is_monotonic_decreasing or nearest.iloc[-1] < nearest.iloc[0] / 1e4
    ratio = nearest / bound  # "far faster": the copies' distance falls orders of magnitude below the bound
    assert ratio.iloc[-1] < ratio.iloc[0] / 100


def test_close_toy_modes_both_methods_predict_as_well_as_the_exact_posterior():
    step = STEPS["Close modes (paper default)"]
    assert "both predict as well as the exact posterior" in step.see
    values = shown(played_to_the_end(opened("Close modes (paper default)"), "toy.player"))
    for method in ("MFVI", "SGM"):
        assert values[f"{method}: test MSE"] == pytest.approx(values["test MSE (exact)"], rel=0.05)


def test_far_apart_toy_modes_sgms_bound_gains_about_ln_2_with_the_same_predictions():
    step = STEPS["Far-apart modes"]
    assert step.see.startswith("By about ln 2") and "One run can show a little more" in step.see
    values = shown(played_to_the_end(opened("Far-apart modes"), "toy.player"))
    gain = values["SGM: ELBO + I"] - values["MFVI: ELBO"]
    assert math.log(2) - 0.01 < gain < math.log(2) + 0.03  # a little more where MFVI stops short (the page says so)
    assert values["SGM: test MSE"] == values["MFVI: test MSE"]


@pytest.mark.slow
def test_the_mnist_steps_pair_learns_and_its_numbers_coincide(tmp_path):
    """Launched as the step's button does (its preset's config, MFVI and SGM on the same seed), trained headless."""
    from symlab.labs import run_kinds
    from symlab.labs.mnist.config import MnistConfig
    from symlab.runs import supervisor
    from symlab.runs.registry import Registry

    assert STEPS["Tiny (seconds)"].see.startswith("Launch the MFVI/SGM pair: their numbers coincide")
    at = opened("Tiny (seconds)")
    values = {control: at.session_state[f"mnist.{control}"] for control in ("hidden", "epochs", "subset", "lr", "seed")}
    registry = Registry(run_kinds(), tmp_path)
    runs = [
        supervisor.submit(
            registry,
            "mnist",
            MnistConfig(
                hidden=values["hidden"],
                epochs=values["epochs"],
                train_subset=values["subset"],
                lr=values["lr"],
                seed=values["seed"],
                method=method,
            ),
            source="cli",
        )
        for method in ("mfvi", "sgm")
    ]
    results = [wait_finished(registry, run_id) for run_id in runs]
    assert min(result["test_acc"] for result in results) > 0.8  # it learns: 0.37 was the untrained floor's
    for key in ("test_acc", "test_nll", "train_elbo"):
        assert results[0][key] == results[1][key], key
    assert results[1]["mi_active"] == 0.0  # no gradient: the units are far apart


def wait_finished(registry, run_id, timeout: float = 240.0) -> dict:
    import time

    deadline = time.monotonic() + timeout
    while (run := registry.get(run_id)).status != "finished":
        assert run.status in ("queued", "running") and time.monotonic() < deadline, (run.status, run.message)
        time.sleep(0.5)
    return run.result
