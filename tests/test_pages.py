"""AppTest checks of the pages (a fragment's timer is not run by AppTest; see test_playback.py)."""

from pathlib import Path

import numpy as np
import pytest
from pagetest import metrics, open_page
from streamlit.testing.v1 import AppTest
from vegatest import vega_chart, vega_charts

from symlab.labs.modes import experiment as modes
from symlab.labs.modes import params
from symlab.specs import controls

ROOT = Path(__file__).resolve().parents[1]


def modes_page(**query) -> AppTest:
    return open_page("modes", timeout=60, **query)


def test_home_page_runs_and_names_the_device():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    assert any("Compute device" in c.value for c in at.caption)
    links = at.get("page_link")[-5:]  # the labs' list, after the findings' links
    assert [link.proto.page for link in links] == ["modes", "toy", "mnist", "symmetry", "align"]
    assert links[-1].proto.label == "**Alignment**"


def test_default_view_interpolates():
    at = modes_page()
    assert not at.exception
    values = metrics(at)
    assert values["α⁻¹‖μ*‖"] == "0.500"
    assert float(values["threshold α*"]) == pytest.approx(4.82, abs=0.01)
    assert at.query_params["alpha"] == "3.0"


def test_charts_show_the_fit_and_update_in_place():
    at = modes_page()
    titles = [chart["title"] for chart in vega_charts(at)]
    assert titles[:6] == ["Along e₁", "In 2-D: the target's density (grey), q's ellipses", "Interpolation",
                          "Spread of q", "Final KL(q‖p_α)", "α* scales with σ"]
    density = vega_chart(at, "Along e₁")["datasets"]["lines"]
    assert sorted(density["series"].unique()) == ["q (reverse KL)", "target p_α"]  # no forward fit unless asked
    target = density[density["series"] == "target p_α"]
    assert np.trapezoid(target["y"], target["x"]) == pytest.approx(1.0, abs=1e-3)  # a density, on a wide enough grid
    marks = vega_chart(at, "Interpolation")["datasets"]["vertical"].set_index("series")["value"]
    assert marks["current α"] == 3.0 and marks["threshold α*"] == pytest.approx(4.82, abs=0.01)
    contour = vega_chart(at, "In 2-D: the target's density (grey), q's ellipses")
    [x_scale, y_scale] = [layer["encoding"][axis]["scale"]["domain"] for axis, layer in
                          (("x", contour["spec"]["layer"][0]), ("y", contour["spec"]["layer"][0]))]
    units_per_px = [(x_scale[1] - x_scale[0]) / contour["spec"]["width"], (y_scale[1] - y_scale[0]) / contour["spec"]["height"]]
    assert units_per_px[0] == pytest.approx(units_per_px[1], rel=0.01)  # one scale on both axes: circles look round

    before = {chart["title"]: chart for chart in vega_charts(at)}
    at.slider(key="modes.alpha").set_value(7.0).run()
    after = {chart["title"]: chart for chart in vega_charts(at)}
    for title in ("Along e₁", "Interpolation", "Spread of q", "α* scales with σ"):
        assert after[title]["spec_text"] == before[title]["spec_text"], title  # the same chart, new data
    assert vega_chart(at, "Interpolation")["datasets"]["vertical"].set_index("series")["value"]["current α"] == 7.0
    at.toggle(key="modes.forward").set_value(True).run()
    assert "q (forward KL)" in set(vega_chart(at, "Along e₁")["datasets"]["lines"]["series"])


def test_slider_changes_the_outputs_and_the_url():
    at = modes_page()
    before = metrics(at)
    at.slider(key="modes.alpha").set_value(7.0).run()
    after = metrics(at)
    assert before["α⁻¹‖μ*‖"] == "0.500" and after["α⁻¹‖μ*‖"] == "0.000"
    assert float(after["KL(q‖p_α)"]) == pytest.approx(0.693, abs=0.002)
    assert at.query_params["alpha"] == "7.0"


def test_query_parameters_restore_the_state():
    at = modes_page(alpha="1.5", sigma="0.25", dim="20", forward="1")
    assert not at.exception and not at.warning
    assert at.slider(key="modes.alpha").value == 1.5
    assert at.slider(key="modes.sigma").value == 0.25
    assert at.number_input(key="modes.dim").value == 20
    assert at.toggle(key="modes.forward").value is True
    assert float(metrics(at)["α⁻¹‖μ*‖"]) < 0.01  # 1.5 > α*(0.25) ≈ 1.21: on one mode
    assert float(metrics(at)["threshold α*"]) == pytest.approx(1.206, abs=0.005)


@pytest.mark.parametrize("query", [
    {"alpha": "abc"}, {"alpha": "nan"}, {"sigma": "-3"}, {"sigma": "1e999"}, {"dim": "2.5"},
    {"forward": "perhaps"}, {"bogus": "1"}, {"alpha": "9" * 5000},
])
def test_bad_parameters_give_a_notice_not_an_exception(query):
    at = modes_page(**query)
    assert not at.exception
    assert len(at.warning) == 1 and "adjusted" in at.warning[0].value
    assert metrics(at)["α⁻¹‖μ*‖"] in ("0.500", "0.000")


def test_notice_disappears_once_the_user_moves_a_control():
    at = modes_page(alpha="abc")
    assert at.warning
    at.slider(key="modes.alpha").set_value(2.0).run()
    assert not at.warning


def test_preset_sets_the_controls():
    at = modes_page()
    at.selectbox(key="modes.preset").set_value("Narrow components").run()
    assert at.slider(key="modes.sigma").value == 0.25 and at.slider(key="modes.alpha").value == 1.5
    assert at.query_params["sigma"] == "0.25"
    assert any("scales with σ" in i.value for i in at.info)


def test_widgets_take_the_declared_ranges_and_state_the_cap():
    at = modes_page()
    sigma, dim, alpha = at.slider(key="modes.sigma"), at.number_input(key="modes.dim"), at.slider(key="modes.alpha")
    declared = controls.declaration(modes.SweepConfig, "sigma")
    assert (sigma.label, sigma.min, sigma.max, sigma.step) == (declared.label, declared.low, params.SIGMA_CAP,
                                                               declared.step)
    assert f"This page allows at most {params.SIGMA_CAP:g}; the command line" in sigma.help
    declared = controls.declaration(modes.SweepConfig, "dim")
    assert (dim.label, dim.min, dim.max) == (declared.label, declared.low, declared.high)
    assert (alpha.min, alpha.max, alpha.step) == (params.ALPHA.low, params.ALPHA.high, params.ALPHA.step)


def test_the_optimisation_player_steps_and_resets():
    at = modes_page()
    progress = lambda: at.get("progress")[0].proto.text
    assert progress() == "Adam step 0 / 1000" and at.button(key="modes.pause").disabled
    at.button(key="modes.step").click().run()
    assert progress() == "Adam step 10 / 1000"
    at.button(key="modes.reset").click().run()
    assert progress() == "Adam step 0 / 1000"


def test_home_page_opens_with_what_the_labs_measured_and_its_threshold_is_the_computed_one():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert at.subheader[0].value == "What the labs measured"
    findings = " ".join(markdown.value for markdown in at.markdown)
    threshold = modes.exact_threshold(1.0)
    assert f"α* ≈ {threshold:.2f}σ" in findings  # the number the modes lab computes, not a remembered one
    assert "did not change" in findings and "Still open" in findings
    assert "predicts badly" not in findings  # the claim our measurements did not bear out
