"""AppTest checks of the pages (AppTest runs no component's script: the players' frames are read as sent)."""

import json
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from pagetest import frame_rows, frames_of, metrics, open_page, player, tell
from streamlit.testing.v1 import AppTest
from vegatest import channel, player_charts, vega_chart, vega_charts

from symlab.labs.modes import experiment as modes
from symlab.labs.modes import params
from symlab.labs.modes.config import SweepConfig, sweep_alpha_max
from symlab.specs import controls

ROOT = Path(__file__).resolve().parents[1]


def modes_page(**query) -> AppTest:
    return open_page("modes", timeout=60, **query)


def test_home_page_runs_and_names_the_device():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert not at.exception
    assert any("Compute device" in c.value for c in at.caption)
    links = at.get("page_link")  # a card per lab
    assert [link.proto.page for link in links] == ["modes", "toy", "mnist", "symmetry", "align", "methods"]
    assert links[-1].proto.label == "**Posterior approximations**"


def test_every_card_picture_has_blank_room_around_its_chart():
    """The home page shrinks a card's picture 3-4 times: a title's first letter at the picture's very edge lost its
    stem ("ınterpolation", "xact posterior"). Each picture keeps tests/cards.py's blank margin on every side."""
    from cards import CARDS, MARGIN_PX, PICTURES, SCALE
    from PIL import Image

    room = MARGIN_PX * SCALE - 2
    for lab in PICTURES:
        picture = np.asarray(Image.open(CARDS / f"{lab}.png").convert("L"), dtype=float)
        edges = {
            "left": picture[:, :room],
            "right": picture[:, -room:],
            "top": picture[:room, :],
            "bottom": picture[-room:, :],
        }
        for side, strip in edges.items():
            assert strip.min() >= 250, f"{lab}.png: something drawn within {room} px of its {side} edge"


def test_default_view_interpolates():
    at = modes_page()
    assert not at.exception
    values = metrics(at)
    assert values["α⁻¹‖μ*‖"] == "0.500"
    assert float(values["threshold α*"]) == pytest.approx(4.82, abs=0.01)
    assert at.query_params["alpha"] == "2.0"
    assert at.selectbox(key="modes.preset").value == "Close modes"  # the class path's first step, not "custom"


def test_charts_show_the_fit_and_update_in_place():
    at = modes_page()
    titles = [chart["title"] for chart in vega_charts(at)]
    assert titles[:6] == [
        "Along e₁",
        CONTOUR_TITLE,
        "Interpolation",
        "Spread of q",
        "Final KL(q‖p_α)",
        "α* scales with σ",
    ]
    density = vega_chart(at, "Along e₁")["datasets"]["lines"]
    assert sorted(density["series"].unique()) == ["q (reverse KL)", "target p_α"]  # no forward fit unless asked
    target = density[density["series"] == "target p_α"]
    assert np.trapezoid(target["y"], target["x"]) == pytest.approx(1.0, abs=1e-3)  # a density, on a wide enough grid
    marks = vega_chart(at, "Interpolation")["datasets"]["vertical"].set_index("series")["value"]
    assert marks["current α"] == 2.0 and marks["threshold α*"] == pytest.approx(4.82, abs=0.01)
    assert_one_scale_at_any_size(vega_chart(at, CONTOUR_TITLE)["spec"])

    before = {chart["title"]: chart for chart in vega_charts(at)}
    at.slider(key="modes.alpha").set_value(7.0).run()
    after = {chart["title"]: chart for chart in vega_charts(at)}
    for title in ("Along e₁", "Interpolation", "Spread of q", "α* scales with σ"):
        assert after[title]["spec_text"] == before[title]["spec_text"], title  # the same chart, new data
    assert vega_chart(at, "Interpolation")["datasets"]["vertical"].set_index("series")["value"]["current α"] == 7.0
    at.toggle(key="modes.forward").set_value(True).run()
    assert "q (forward KL)" in set(vega_chart(at, "Along e₁")["datasets"]["lines"]["series"])


def test_the_forward_kl_fit_has_its_own_cards_and_words():
    """With the forward fit shown (the class path's step 3), the cards and the sentence said only what reverse KL
    did: "q is mode-seeking, sitting on the first mode". The forward fit now has its own, first."""
    at = modes_page(alpha="6.0", sigma="1.0", forward="true")
    values = metrics(at)
    assert values["α⁻¹‖μ‖ (forward KL)"] == "0.500"
    assert float(values["std dev along e₁ / σ (forward)"]) == pytest.approx((1 + 6.0**2 / 4) ** 0.5, abs=1e-3)
    assert float(values["α⁻¹‖μ*‖ (reverse KL)"]) < 0.01  # reverse KL, for contrast, says which it is
    said = [block.value for block in at.markdown]
    assert any("**forward KL**" in text and "covering both modes" in text for text in said)
    assert any(text.startswith("By reverse KL, α = 6 > α*") for text in said)


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
    assert float(metrics(at)["α⁻¹‖μ*‖ (reverse KL)"]) < 0.01  # 1.5 > α*(0.25) ≈ 1.21: on one mode
    assert float(metrics(at)["threshold α*"]) == pytest.approx(1.206, abs=0.005)


@pytest.mark.parametrize(
    "query",
    [
        {"alpha": "abc"},
        {"alpha": "nan"},
        {"sigma": "-3"},
        {"sigma": "1e999"},
        {"dim": "2.5"},
        {"forward": "perhaps"},
        {"bogus": "1"},
        {"alpha": "9" * 5000},
    ],
)
def test_bad_parameters_give_a_notice_not_an_exception(query):
    at = modes_page(**query)
    assert not at.exception
    assert len(at.warning) == 1 and "adjusted" in at.warning[0].value
    assert metrics(at)["α⁻¹‖μ*‖"] in ("0.500", "0.000")


def test_notice_disappears_once_the_user_moves_a_control():
    at = modes_page(alpha="abc")
    assert at.warning
    at.slider(key="modes.alpha").set_value(2.5).run()
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
    declared = controls.declaration(SweepConfig, "sigma")
    assert (sigma.label, sigma.min, sigma.max, sigma.step) == (
        declared.label,
        declared.low,
        params.SIGMA_CAP,
        declared.step,
    )
    assert f"This page allows at most {params.SIGMA_CAP:g}; the command line" in sigma.help
    declared = controls.declaration(SweepConfig, "dim")
    assert (dim.label, dim.min, dim.max) == (declared.label, declared.low, declared.high)
    assert (alpha.min, alpha.max, alpha.step) == (params.ALPHA.low, params.ALPHA.high, params.ALPHA.step)


def played(at: AppTest) -> dict:
    return player(at, "modes.player")


def test_the_optimisation_plays_in_the_browser_from_frames_sent_once():
    """Adam's whole path goes to the browser once, a frame every 10 steps: frame k is q at step 10k (the landscape
    drawn at the frame told: test_page_surfaces.py)."""
    at = modes_page()
    sent = played(at)
    path = modes.optimisation_path(params.ALPHA.default, 1.0)
    assert sent["frames"] == 101 and sent["frame"] == 0 and [c["name"] for c in sent["charts"]] == ["density", "kl"]
    for frame in (0, 1, 37, 100):
        rows = frame_rows(sent, "density", "lines", frame)
        q = rows[rows["series"] == "q (reverse KL)"]
        step = 10 * frame
        expected = np.exp(modes.log_normal(q["x"].to_numpy(), path.mean[step], path.std[step]))
        assert np.abs(q["y"].to_numpy() - expected).max() <= 1e-3 * expected.max()  # 4 significant digits
        now = frame_rows(sent, "kl", "lines", frame).query("series == 'current step'")
        assert now["x"].tolist() == [step] and now["y"].iloc[0] == pytest.approx(path.kl[step], rel=1e-3)
    at = tell(at, "modes.player", 37)
    assert not at.exception and played(at)["id"] == sent["id"]  # the same frames: the browser keeps its place


def test_the_play_keeps_its_axes_fixed():
    """The density's y-axis rescaled from frame to frame (0.40 → 0.22), so the target's peaks seemed to grow: both
    charts' axes are fixed for the whole path, in the spec the browser gets once, and hold every frame's curves."""
    sent = played(modes_page())
    path = modes.optimisation_path(params.ALPHA.default, 1.0)
    density, objective = ({"spec": c["spec"]} for c in sent["charts"])
    for frame in range(sent["frames"]):
        assert frame_rows(sent, "density", "lines", frame)["y"].max() <= y_domain(density)[1]
        assert frame_rows(sent, "kl", "lines", frame)["y"].max() <= y_domain(objective)[1]
    q_peak = 1 / (math.sqrt(2 * math.pi) * path.std.min())  # q at its narrowest, the target's own peak lower here
    assert y_domain(density) == pytest.approx([0.0, 1.05 * q_peak])


def test_a_flat_objective_is_drawn_flat():
    """At α = 20, σ = 0.1 Adam's KL wobbles by 5·10⁻⁴ nats about ln 2: its axis, from 0 past ln 2, draws that as
    under a pixel, where an axis of the data alone (0.6931–0.6937) drew a spike."""
    sent = played(modes_page(alpha="20", sigma="0.1"))
    chart = {"spec": sent["charts"][1]["spec"]}
    low, high = y_domain(chart)
    assert low == 0.0 and high > modes.LN2
    kl = frame_rows(sent, "kl", "lines", 0).query("series == 'KL(q‖p_α)'")["y"]
    assert kl.max() - kl.min() > 4e-4  # the wobble is there...
    assert (kl.max() - kl.min()) / (high - low) < 1 / chart["spec"]["height"]  # ...and under a pixel high


def test_the_step_is_stated_once():
    """The player's label and a caption under each chart each stated the step, drawn at different moments, so while
    playing they disagreed by a frame: the label is the one statement, q's values with it."""
    at = modes_page()
    document = frames_of(played(at))
    path = modes.optimisation_path(params.ALPHA.default, 1.0)
    assert document["labels"][1] == (
        f"Adam step 10 / 1000: μ = {path.mean[10]:.3f}, s = {path.std[10]:.3f}, KL(q‖p_α) = {path.kl[10]:.4f} nats"
    )
    assert set(document["captions"]) == {""}
    texts = [element.value for kind in (at.caption, at.markdown, at.text) for element in kind]
    assert not [text for text in texts if re.search(r"\bstep \d", text, re.IGNORECASE)]


# --- what the class sees: charts that fit any column, axes that hold still, one statement of the step --------

CONTOUR_TITLE = "In 2-D: the target and q"
PLOT_SIZES = [(120, 300), (300, 300), (310, 200), (650, 320), (900, 180)]  # (width, height) px of a plot


def vega_eval(expression: str, **signals):
    """A Vega expression of arithmetic, arrays, max and floor (the page's), evaluated with ``signals``."""
    return eval(expression, {"__builtins__": {}}, {"max": max, "min": min, "floor": math.floor, **signals})


def assert_one_scale_at_any_size(spec: dict):
    """The 2-D view's domains, expressions of the plot's size, give x and y one scale (circles round) and hold
    the data's box (the spec's ``box`` parameter), whatever size the column gives the plot."""
    [box] = [param["value"] for param in spec["params"] if param["name"] == "box"]
    [x_domain] = {json.dumps(c["scale"]["domain"]) for c in channel(spec, "x") if "domain" in c.get("scale", {})}
    [y_domain] = {json.dumps(c["scale"]["domain"]) for c in channel(spec, "y") if "domain" in c.get("scale", {})}
    for width, height in PLOT_SIZES:
        (x_low, x_high), (y_low, y_high) = (
            vega_eval(json.loads(domain)["expr"], box=box, width=width, height=height)
            for domain in (x_domain, y_domain)
        )
        assert (x_high - x_low) / width == pytest.approx((y_high - y_low) / height, rel=1e-9)
        assert x_low <= box[0] < box[1] <= x_high and y_low <= box[2] < box[3] <= y_high
        assert x_high - x_low == pytest.approx(box[1] - box[0]) or y_high - y_low == pytest.approx(box[3] - box[2])


@pytest.mark.parametrize("present", ["0", "1"])
@pytest.mark.parametrize("alpha, sigma", [("3.0", "1.0"), ("20", "0.1")])
def test_every_chart_fits_its_column(present, alpha, sigma):
    """A 390 px phone's 358 px column held a 499 px 2-D view, and at 1400 px presentation mode's ran past the
    window: every chart now takes its column's width, its legend wraps to the plot's width, and the 2-D view keeps
    one scale on both axes at any size. (The layout itself, measured in Chromium at 390-1920 px: see the report.)"""
    at = modes_page(alpha=alpha, sigma=sigma, forward="1", present=present)
    assert not at.exception
    played = player_charts(at)  # the browser's player fits each to its cell (autosize fit, views/common/animation.js)
    drawn = [*vega_charts(at), *played]
    assert len(drawn) == 8 and len(played) == 2
    for chart in drawn:
        spec = chart["spec"]
        assert "width" not in spec, chart["title"]  # the column's width
        assert ("autosize" not in spec) if chart in played else spec["autosize"]["type"] == "fit", chart["title"]
        columns = spec["config"]["legend"]["columns"]["expr"]
        plot = columns.replace("(containerSize()[0] || width)", "width")  # a column as wide as the plot, at least
        by_width = [vega_eval(plot, width=width) for width, _ in PLOT_SIZES]
        assert by_width[0] == 1 and by_width == sorted(by_width) and by_width[-1] >= 3, chart["title"]
        assert len(chart["title"]) <= 30, chart[
            "title"
        ]  # Streamlit cuts a title wider than the chart (310 px at 20 px)
    assert_one_scale_at_any_size(vega_chart(at, CONTOUR_TITLE)["spec"])


def y_domain(chart: dict) -> list[float]:
    [domain] = {tuple(c["scale"]["domain"]) for c in channel(chart["spec"], "y") if "domain" in c.get("scale", {})}
    return list(domain)


@pytest.mark.parametrize(
    "alpha, sigma, largest", [("0.3", "0.1", 1.0), ("20", "1.0", 20.0), ("3.0", "2.0", 20.0), ("3.0", "1.0", 10.0)]
)
def test_the_sweep_follows_sigma_and_holds_alpha(alpha, sigma, largest):
    """The sweep covered α ∈ [0, 10] whatever σ: at σ = 0.1 its whole transition fell below α = 0.5, and at
    α = 20 half of each chart was empty. It now ends at 10σ, or at α where that is further, as on the command
    line (config.sweep_alpha_max)."""
    at = modes_page(alpha=alpha, sigma=sigma)
    for title in ("Interpolation", "Spread of q", "Final KL(q‖p_α)"):
        lines = vega_chart(at, title)["datasets"]["lines"]
        assert lines["x"].min() == 0.0 and lines["x"].max() == pytest.approx(largest), title
    marks = vega_chart(at, "Interpolation")["datasets"]["vertical"].set_index("series")["value"]
    assert 0 < marks["threshold α*"] < largest and marks["current α"] <= largest
    assert largest == sweep_alpha_max(float(sigma), float(alpha))  # the command line's range


def test_each_lab_has_a_card_with_a_picture_of_its_key_chart():
    from PIL import Image

    from symlab.labs import LABS

    for lab in LABS:
        with Image.open(ROOT / "assets" / "cards" / f"{lab.name}.png") as picture:
            assert picture.format == "PNG" and picture.width >= 300 and picture.height >= 300, lab.name
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    assert len(at.get("image")) == len(LABS)


def test_the_toy_card_shows_trained_fits_not_their_starts():
    """The card showed the page's first frame, step 0: the starts, not the result it stands for."""
    from urllib.parse import parse_qs, urlsplit

    sys.path.insert(0, str(ROOT / "tests"))
    from cards import PICTURES

    from symlab.labs.toy.experiment import DEFAULT_STEPS

    link = PICTURES["toy"][0]
    assert int(parse_qs(urlsplit(link).query)["adam_step"][0]) >= DEFAULT_STEPS
