"""AppTest checks of the Symmetry explorer page (its epoch player, a fragment, is covered in test_browser.py).

The page's computations are kept in ``ui.shared_result``, a ``st.cache_resource`` that lives as long as the
process: every AppTest in this module after the first that needs a result reuses it (the default Fig. 1
run takes seconds, a repeat milliseconds). The tests do not depend on that for their outcome, only for
their speed; parts whose defaults are slow are opened with smaller settings.
"""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "symmetry.py")


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def symmetry_page(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=180)
    at.query_params.update(query)
    return at.run()


def metrics(at) -> dict:
    return {m.label: m.value for m in at.metric}


def charts(at) -> int:
    return len(at.get("plotly_chart"))


# Each part's link (the slow defaults of mass/training made small: 100 perceptrons, 200 SGD steps, and
# both parts share the MNIST nets), its number of Plotly charts and its metrics.
PARTS = {
    "fig1": ({}, 4, {"nets kept", "trained per second", "share with v₁ > v₂, raw", "largest output change"}),
    "mass": ({"part": "mass", "nets": "100", "steps": "200"}, 2, set()),
    "proximity": ({"part": "proximity"}, 1,
                  {"‖gw − w‖ / ‖w‖ at width 4096", "Thm 3.1 bound there", "widths below the bound"}),
    "quality": ({"part": "quality"}, 3, set()),
    "training": ({"part": "training", "steps": "200"}, 2,
                 {"mean Kendall τ", "steps with a swap, first half", "… second half", "test accuracy"}),
}


@pytest.mark.parametrize("part", PARTS)
def test_every_part_renders_its_charts_and_metrics(part):
    query, chart_count, metric_labels = PARTS[part]
    at = symmetry_page(**query)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error and not at.warning
    assert at.radio(key="symmetry.part").value == part and at.query_params["part"] == part
    assert at.header[0].value == {"fig1": "The doubled mode (Fig. 1)", "mass": "Min-mass",
                                  "proximity": "Mode proximity", "quality": "Posterior quality (MMD)",
                                  "training": "Permutations in training"}[part]
    assert charts(at) == chart_count
    assert set(metrics(at)) == metric_labels
    if part == "mass":
        table = at.dataframe[0].value
        assert len(table) == 2 and (table["median ratio"] <= 1 + 1e-9).all()
        assert list(table["converged"]) == [f"{n} / {n}" for n in table["count"]]
    if part == "quality":
        assert list(at.dataframe[0].value["method"]) == ["MFVI", "SGM", "ensemble", "exact vs exact"]
    if part == "training":
        assert -1 <= float(metrics(at)["mean Kendall τ"]) <= 1
        assert float(metrics(at)["test accuracy"]) > 0.5


def test_fig1_default_shows_the_mirror_image_modes():
    at = symmetry_page()
    values = metrics(at)
    assert 0.4 <= float(values["share with v₁ > v₂, raw"]) <= 0.6
    assert float(values["largest output change"]) < 1e-6
    kept, nets = values["nets kept"].split(" / ")
    assert nets == "2000" and int(kept) >= 1980  # the paper drops < 1 %
    sentences = [m.value for m in at.markdown if "mirror images" in m.value]
    assert len(sentences) == 1 and sentences[0].startswith("Raw, the two highest density peaks sit at")
    assert at.query_params["part"] == "fig1" and at.query_params["nets"] == "2000"
    assert at.query_params["seed"] == "0"


def test_proximity_default_is_below_the_bound_at_every_width():
    at = symmetry_page(part="proximity")
    values = metrics(at)
    assert values["widths below the bound"] == "12 / 12"
    assert float(values["‖gw − w‖ / ‖w‖ at width 4096"]) < float(values["Thm 3.1 bound there"])


def test_preset_switches_the_part_and_writes_the_url():
    at = symmetry_page(part="fig1", nets="100", d_in="3")
    assert charts(at) == 4 and at.query_params["d_in"] == "3"
    at.selectbox(key="symmetry.preset").set_value("Wide nets: modes crowd together").run()
    assert not at.exception
    assert at.radio(key="symmetry.part").value == "proximity"
    assert at.number_input(key="symmetry.d_in").value == 1
    # The URL follows: the preset's part and values, the other controls back at their defaults.
    assert at.query_params["part"] == "proximity" and at.query_params["d_in"] == "1"
    assert at.query_params["max_width"] == "4096" and at.query_params["nets"] == "2000"
    assert at.header[0].value == "Mode proximity" and charts(at) == 1
    assert metrics(at)["widths below the bound"] == "12 / 12"
    assert any("closer, relative to ‖w‖" in i.value for i in at.info)


def test_malformed_link_gives_one_notice_and_the_defaults():
    at = symmetry_page(part="bogus", nets="abc")
    assert not at.exception
    assert len(at.warning) == 1
    notice = at.warning[0].value
    assert "adjusted" in notice and "part=bogus" in notice and "nets=abc" in notice
    assert at.radio(key="symmetry.part").value == "fig1" and at.number_input(key="symmetry.nets").value == 2000
    assert at.query_params["part"] == "fig1" and at.query_params["nets"] == "2000"
    assert at.header[0].value == "The doubled mode (Fig. 1)" and charts(at) == 4


def test_new_seed_changes_the_seed_in_the_url():
    at = symmetry_page(part="proximity", seed="5")
    assert at.number_input(key="symmetry.seed").value == 5 and at.query_params["seed"] == "5"
    before = metrics(at)["‖gw − w‖ / ‖w‖ at width 4096"]
    at.button(key="symmetry.new_seed").click().run()
    assert not at.exception
    assert at.number_input(key="symmetry.seed").value == 6 and at.query_params["seed"] == "6"
    assert at.query_params["part"] == "proximity"
    assert metrics(at)["‖gw − w‖ / ‖w‖ at width 4096"] != before  # another initialisation
