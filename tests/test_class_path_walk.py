"""The class path walked as a class does: each step's link (its preset) opened headless, a live panel played to its
end, and what the page then shows read against the step's sentence (symlab/specs/lessons.toml) and the numbers it
names (symlab/serving/findings.py), every one of the ten steps."""

import math
import re
from urllib.parse import parse_qsl

import pytest
from pagetest import metrics, open_page, player, tell
from streamlit.testing.v1 import AppTest
from vegatest import vega_chart

from symlab.serving import findings
from symlab.specs.settings import Hosting
from views.common.lessons import class_path, step_link

STEPS = {step.preset: step for step in class_path().steps}


@pytest.fixture(scope="module", autouse=True)
def shipped_results_stored():
    """The default links' shipped results in the shared store, as a server's warm-up puts them there before anyone
    opens a page (AppTest runs no warm-up: a page would compute them afresh, in this machine's arithmetic). A store
    of this module's own: the other modules' pages compute theirs, and the alignment page's pictures made from the
    shipped pair are forgotten after it."""
    from symlab.serving import shared_results, warmup
    from views import align

    results = shared_results.SharedResults(workers=1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shared_results, "_shared", results)
        warmup.store_shipped_results()
        yield
    results.shutdown()
    for made_from_the_pair in (align.trained_assignment, align.path_charts):
        made_from_the_pair.clear()


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
    assert step.see.startswith("By ln 2 = log |G|") and "within its error" in step.see
    assert "One run can show a little more or less" in step.see
    values = shown(played_to_the_end(opened("Far-apart modes"), "toy.player"))
    gain = values["SGM: ELBO + I"] - values["MFVI: ELBO"]
    assert math.log(2) - 0.01 < gain < math.log(2) + 0.03  # a little more where MFVI stops short (the page says so)
    assert values["SGM: test MSE"] == values["MFVI: test MSE"]


def test_fig1_shows_two_mirror_image_peaks_and_the_sorted_units_leave_the_shipped_count():
    numbers = findings.numbers()
    step = STEPS["Fig. 1: the doubled mode"]
    assert step.seen(numbers).startswith(f"{numbers['fig1_raw_peaks']} mirror-image peaks")
    at = opened("Fig. 1: the doubled mode")
    [text] = [md.value for md in at.markdown if md.value.startswith("Raw, the two highest density peaks")]
    (a1, b1), (a2, b2) = [(float(a), float(b)) for a, b in re.findall(r"\((-?[\d.]+), (-?[\d.]+)\)", text)]
    assert numbers["fig1_raw_peaks"] == 2 and (a1, b1) == pytest.approx((b2, a2), abs=0.2)  # mirrored across v₁ = v₂
    assert a1 * b1 < 0  # one unit's weight up, the other's down: a network and its swapped copy
    assert f"After both removals {numbers['fig1_sorted_peaks']} peak(s) remain, all with v₁ ≤ v₂" in text
    assert float(metrics(at)["share with v₁ > v₂, raw"]) == pytest.approx(0.5, abs=0.03)  # a symmetric density


def test_alignment_removes_the_barrier_the_step_names():
    numbers = findings.numbers()
    step = STEPS["Half moons, two hidden layers"]
    before = f"{numbers['align_barrier_before']:.3f} ± {numbers['align_barrier_before_se']:.3f}"
    after = f"{numbers['align_barrier_after']:.3f} ± {numbers['align_barrier_after_se']:.3f}"
    assert step.seen(numbers).startswith(f"{before} nats in the middle before alignment, {after} after, below")
    values = metrics(opened("Half moons, two hidden layers"))
    assert values["loss barrier before"] == before and values["loss barrier after (W₂)"] == after
    assert numbers["align_barrier_after"] < numbers["align_barrier_before"] / 10  # "one mode, permuted"
    assert numbers["align_barrier_after"] < 2 * numbers["align_barrier_after_se"]  # "below its noise"


def spreads(text: str) -> list[tuple[float, float]]:
    """The "mean ± sd" figures of a sentence, in order ("−" read as a minus)."""
    return [(float(m), float(s)) for m, s in re.findall(r"([+−-]?[\d.]+) ± ([\d.]+)", text.replace("−", "-"))]


def test_the_methods_step_ten_starts_beat_one_on_every_seed_and_sgm_is_closer_only_in_raw_weights():
    step = STEPS["Quick (a few minutes)"]
    assert step.see.startswith("Every ten-start row beats its one-start row by MMD, on every seed")
    texts = [md.value for md in opened("Quick (a few minutes)").markdown]
    [several] = [text for text in texts if text.startswith("**Do several modes beat one?**")]
    counts = re.findall(r"lower in (\d+) of (\d+)", several)
    assert len(counts) == 5 and all(lower == seeds and int(seeds) >= 3 for lower, seeds in counts)
    [sgm] = [text for text in texts if text.startswith("**SGM against MFVI, one mode**")]
    (raw, raw_sd), (removed, removed_sd) = spreads(sgm)[:2]
    assert "on the weights as they are" in sgm and "with the symmetries removed" in sgm
    assert raw < -10 * raw_sd  # far closer in raw weights
    assert abs(removed) <= max(removed_sd, 0.1)  # no closer once the symmetries are removed


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
