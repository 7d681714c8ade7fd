"""The live charts' helpers (views/common): Vega-Lite specs that stay the same from frame to frame, so that
Streamlit updates the chart in place (the frames' numbers travel as datasets), and their styles."""

import json

import altair as alt
import numpy as np
import pandas as pd
import pytest
from pagetest import frame_rows, frames_of, open_page, player
from vegatest import channel, image_values, layers, png_rows, vega_charts

from symlab.specs import animation
from views.common import charts
from views.common.animation import sent as player_document

SERIES = (
    charts.Series("MFVI", "#0072B2", "dash"),
    charts.Series("SGM", "#D55E00", "dot", marker="square"),
    charts.Series("data", "#999999", marker="circle", line=False),
)


def spec_of(chart, **options) -> dict:
    return charts.vega_spec(chart, **options)


def test_series_share_one_legend_with_a_second_cue_for_each():
    spec = spec_of(
        charts.altair_lines(SERIES, charts.quantity("x", "step"), charts.quantity("y", "nats", channel=alt.Y))
    )
    for name, styles in (
        ("color", ["#0072B2", "#D55E00", "#999999"]),
        ("strokeDash", [[8, 4], [2, 3], [1, 0]]),
        ("shape", ["stroke", "square", "circle"]),
    ):
        for definition in channel(spec, name):  # every layer: the same scale, so one legend
            assert definition["scale"] == {"domain": ["MFVI", "SGM", "data"], "range": styles}
    cues = {
        str((dash, shape))
        for dash, shape in zip(
            channel(spec, "strokeDash")[0]["scale"]["range"], channel(spec, "shape")[0]["scale"]["range"]
        )
    }
    assert len(cues) == 3  # no two entries differ by colour alone
    marks = [view["mark"]["type"] for view in layers(spec)]
    assert marks == ["line", "point"]
    line, points = layers(spec)
    assert "shape" not in line["encoding"]  # Vega-Lite would put a point on every vertex
    assert points["transform"] == [{"filter": {"field": "series", "oneOf": ["SGM", "data"]}}]
    assert spec["data"] == {"name": "lines"} or all(view["data"] == {"name": "lines"} for view in layers(spec))


def test_axes_carry_titles_fixed_domains_and_integer_ticks():
    x = charts.quantity("x", "epoch", (0.5, 3.5), integer=True).to_dict()
    assert x["title"] == "epoch" and x["scale"] == {"domain": [0.5, 3.5], "nice": False}
    assert x["axis"] == {"tickMinStep": 1, "format": "d"}
    y = charts.quantity("y", "test accuracy", scale=dict(domainMax=1), channel=alt.Y).to_dict()
    assert y["scale"] == {"zero": False, "domainMax": 1}
    assert charts.quantity("y", "nats", log=True, channel=alt.Y).to_dict()["scale"]["type"] == "log"


def test_a_spec_has_no_data_and_its_fonts_follow_presentation_mode(monkeypatch):
    chart = alt.layer(
        charts.altair_lines(SERIES, charts.quantity("x", "step"), charts.quantity("y", "nats", channel=alt.Y)),
        charts.altair_rules(SERIES),
    )
    spec = spec_of(chart, title="Bounds")
    assert "datasets" not in spec and "values" not in str(spec)
    assert spec["title"]["text"] == "Bounds" and spec["usermeta"]["embedOptions"]["renderer"] == "svg"
    assert spec["config"]["mark"] == {"aria": False}
    normal = spec["config"]["axis"]["titleFontSize"]
    monkeypatch.setattr(charts, "font_scale", lambda: charts.PRESENT_FONT_PX / charts.FONT_PX)
    enlarged = spec_of(chart, title="Bounds")
    assert enlarged["config"]["axis"]["titleFontSize"] == charts.PRESENT_FONT_PX > normal
    assert enlarged["height"] > spec["height"]


def test_a_square_plots_ticks_do_not_follow_its_size():
    """Vega's default tick count follows the plot's height, which in a square plot follows its width, which
    "fit-x" sets from the labels' width: a loop. A fixed count breaks it."""
    spec = charts.square_plot(
        spec_of(
            charts.altair_lines(SERIES, charts.quantity("x", "w₁"), charts.quantity("y", "w₂", channel=alt.Y)),
            height=None,
        )
    )
    assert spec["autosize"]["type"] == "fit-x" and {"name": "height", "expr": "width"} in spec["params"]
    assert spec["config"]["axis"]["tickCount"] == charts.SQUARE_PLOT_TICKS
    assert spec["config"]["axis"]["titleFontSize"] == charts.FONT_PX  # the page's axis style kept


def test_a_fixed_size_is_the_plot_areas():
    spec = spec_of(
        charts.altair_lines(SERIES, charts.quantity("x", "w₁"), charts.quantity("y", "w₂", channel=alt.Y)),
        width=300,
        height=300,
    )
    assert (spec["width"], spec["height"], spec["autosize"]) == (300, 300, {"type": "pad"})


def test_domains_set_on_a_built_spec_give_the_spec_built_with_them(monkeypatch):
    def heat_and_lines(x_domain, y_domain, width):
        chart = alt.layer(
            charts.altair_image("w₁", "w₂", x_domain, y_domain),
            charts.altair_lines(
                SERIES, charts.quantity("x", "w₁", x_domain), charts.quantity("y", "w₂", y_domain, channel=alt.Y)
            ),
        )
        return spec_of(chart, title="q", width=width, height=200)

    for scale in (1.0, charts.PRESENT_FONT_PX / charts.FONT_PX):  # presentation mode scales the size as vega_spec does
        monkeypatch.setattr(charts, "font_scale", lambda: scale)
        template = heat_and_lines(charts.DOMAIN_OF_DATA, charts.DOMAIN_OF_DATA, 100)
        kept = str(template)
        framed = charts.with_domains(template, x=(-2.5, 3), y=np.array([-1.0, 4.25]), width=310)
        assert framed == heat_and_lines((-2.5, 3.0), (-1.0, 4.25), 310)
        assert str(template) == kept  # the cached spec is copied, never changed
    only_y = charts.with_domains(template, y=(0, 9))
    # Set once, in the first layer (layers share their scales; a repeat on the others is a Vega-Lite warning).
    assert [view["encoding"]["x"]["scale"].get("domain") for view in layers(only_y)] == [
        list(charts.DOMAIN_OF_DATA),
        None,
        None,
    ]
    with pytest.raises(ValueError, match="color"):
        charts.with_domains(template, color=("a", "b"))  # position channels only: a legend's domain is its series
    free_y = spec_of(
        charts.altair_lines(
            SERIES, charts.quantity("x", "step", charts.DOMAIN_OF_DATA), charts.quantity("y", "nats", channel=alt.Y)
        )
    )
    with pytest.raises(ValueError, match="'y'"):
        charts.with_domains(free_y, y=(0, 1))  # no view fixes it: a mistake, not a silent no-op


def test_image_frame_is_a_png_of_the_grid_with_the_largest_y_on_top():
    z = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # z[y, x]: the peak at the largest x and y
    row = charts.image_frame([0.0, 1.0, 2.0], [0.0, 2.0], z, ("#FFFFFF", "#000000")).iloc[0]
    pixels = png_rows(row["url"])
    assert pixels.shape == (2, 3, 3)
    assert (pixels[0, 2] == 0).all() and (pixels[1] == 255).all() and (pixels[0, :2] == 255).all()
    assert (row["x"], row["x2"], row["y"], row["y2"]) == (-0.5, 2.5, -1.0, 3.0)  # the cells' outer edges


def test_image_values_are_recovered_from_the_colours_and_a_fixed_domain_clips():
    z = np.linspace(0.0, 1.0, 12).reshape(3, 4) ** 2
    row = charts.image_frame(np.arange(4), np.arange(3), z, charts.VIRIDIS).iloc[0]
    assert np.allclose(image_values(row["url"], charts.VIRIDIS), z, atol=0.01)  # colour → value, bottom row first
    fixed = charts.image_frame(np.arange(4), np.arange(3), z * 2 - 0.5, charts.VIRIDIS, domain=(0.0, 1.0)).iloc[0]
    assert np.allclose(image_values(fixed["url"], charts.VIRIDIS), np.clip(z * 2 - 0.5, 0, 1), atol=0.01)
    legend = spec_of(charts.altair_colour_legend("P", charts.VIRIDIS))
    assert legend["encoding"]["fill"]["scale"] == {"range": list(charts.VIRIDIS), "interpolate": "rgb"}  # as the PNG's


def test_vega_chart_sends_the_datasets_apart_from_the_spec():
    def page():
        import pandas as pd

        from views.common import charts

        series = (charts.Series("a", "#000000"),)
        import altair as alt

        spec = charts.vega_spec(
            charts.altair_lines(series, charts.quantity("x", "x"), charts.quantity("y", "y", channel=alt.Y))
        )
        frames = [
            pd.DataFrame({"x": [0.0, 1.0], "y": [0.0, 1.0], "series": "a"}),
            pd.DataFrame({"x": [1.0, 2.0], "y": [1.0, 4.0], "series": "a"}),
        ]
        charts.vega_chart(charts.st, spec, {"lines": pd.concat(frames)}, "chart")

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(page).run()
    assert not at.exception
    [chart] = vega_charts(at)
    assert "datasets" not in chart["spec"] and "1.0" not in chart["spec_text"].split('"layer"')[0]
    frame = chart["datasets"]["lines"]
    assert list(frame.columns) == ["x", "y", "series"] and list(frame["y"]) == [0.0, 1.0, 1.0, 4.0]


def test_the_mode_animation_is_one_player_whose_frames_change_only_their_data():
    """Adam's path goes to the browser's player once, specs and frames: a frame moves q and the current step alone
    (the target and the objective, which do not move, are sent in the first frame only)."""
    sent = player(open_page("modes", timeout=60), "modes.player")
    assert [chart["spec"]["title"]["text"] for chart in sent["charts"]] == [
        "Along e₁, at the current step",
        "Objective along the way",
    ]
    assert "datasets" not in json.dumps([chart["spec"] for chart in sent["charts"]])
    document = frames_of(sent)
    assert set(document["frames"][0]["density"]["lines"]) == {"target p_α", "q (reverse KL)"}
    assert {chart: set(sets["lines"]) for chart, sets in document["frames"][1].items()} == {
        "density": {"q (reverse KL)"},
        "kl": {"current step"},
    }
    assert frame_rows(sent, "kl", "lines", 1).query("series == 'current step'")["x"].tolist() == [10]


def test_the_toy_live_charts_are_one_player_whose_frames_change_only_their_data():
    """The four live charts go to the browser's player once, specs and frames; a frame is data alone (one point per
    20 Adam steps on the curves), and a chart's fixed data (the exact posterior's picture, its rules) is sent once."""
    at = open_page("toy", timeout=120)
    [element] = [e for e in at.get("bidi_component") if e.proto.component_name == "symlab_player"]
    sent = player_document(element.proto)
    assert [chart["spec"]["title"]["text"] for chart in sent["charts"]] == [
        "Exact posterior (grey) and q over (w₁, w₂)",
        "Predictions",
        "Lower bounds under log p(D)",
        "Test MSE",
    ]
    assert "datasets" not in json.dumps([chart["spec"] for chart in sent["charts"]])
    document = frames_of(sent)
    assert len(document["frames"]) == sent["frames"] == 201
    frame_two = animation.rows_at(document, 2)
    assert {label: curve["x"] for label, curve in frame_two["bounds"]["lines"].items()} == {
        "MFVI": [0, 20, 40],
        "SGM (q_G)": [0, 20, 40],
    }
    assert set(document["frames"][2]) == {"posterior", "predictions", "bounds", "mse"}  # data alone, every chart
    bounds = next(chart for chart in sent["charts"] if chart["name"] == "bounds")
    assert bounds["static"]["rules"]["series"] == ["exact posterior"]


def test_series_frame_keeps_the_drawing_order():
    frame = charts.lines_frame("q", [1, 0, -1, 0], [0, 1, 0, -1], part=3)
    assert frame["i"].tolist() == [0, 1, 2, 3] and (frame["series"] == "q").all() and (frame["part"] == 3).all()
    assert isinstance(frame, pd.DataFrame)


def test_lines_bytes_are_the_arrow_bytes_of_the_series_frames_one_after_another():
    parts = [("target p_α", np.linspace(-1.0, 2.0, 7), np.arange(7) ** 2), ("q", [0.5], [3]), ("empty", [], [])]
    expected = charts.arrow_bytes(pd.concat([charts.lines_frame(label, x, y) for label, x, y in parts]))
    assert charts.lines_bytes(parts) == expected
    columns = {"series": ["a", "b"], "value": [1.5, 2.0]}
    assert charts.arrow_bytes(columns) == charts.arrow_bytes(pd.DataFrame(columns))


def test_a_long_y_title_goes_on_two_lines_and_never_more():
    """Turned along the plot, a y title longer than the plot made Vega shrink the plot under it and push the chart's
    title out of its top (the alignment page's path charts, 79 px of plot at 844 px)."""
    import altair as alt

    from views.common import charts

    for text in ("SGM bound − MFVI ELBO (nats)", "ELBO per training point (nats)", "a b c d e f g h i j k l m n o p"):
        for count in (2, 3):
            lines = charts.broken_lines(text, count)
            assert len(lines) <= count and " ".join(lines) == text
    long_title = "test NLL of the predictive (nats)"
    y = charts.quantity("y", long_title, channel=alt.Y).to_dict()
    assert y["title"] == ["test NLL of the", "predictive (nats)"]
    assert charts.quantity("x", long_title).to_dict()["title"] == long_title  # across the plot: room enough
    assert charts.quantity("y", "W₂ distance", channel=alt.Y).to_dict()["title"] == "W₂ distance"
