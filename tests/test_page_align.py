"""AppTest checks of the Alignment page (its path player, played in the browser: test_browser.py).

Results are kept in ``computing.shared_result`` for the life of the process, so a link opened twice trains once;
the tests do not depend on that for their outcome. Links other than the default use small networks.
"""

import concurrent.futures
import math
import re
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import pandas as pd
import pytest
from pagetest import frame_rows, frames_of, metrics, open_page, player
from vegatest import channel, image_values, layers, player_charts, png_rows, vega_chart, vega_charts

from symlab.labs.align import experiment as align_lab
from symlab.serving import shared_results
from symlab.specs import results
from views.common.charts import BLUE_RED, VIRIDIS

SMALL = {"width": "16", "depth": "1", "steps": "200", "samples": "8"}
METRICS = {"loss barrier before", "loss barrier after (W₂)", "W₂(q_A, q_B) before", "W₂ after alignment"}


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def align_page(**query):
    return open_page("align", **query)


# A 390 px phone's column, and the single column of a 1400 px screen beside the sidebar (measured in Chromium).
PHONE_COLUMN_PX, WIDE_COLUMN_PX = 358, 1240
SQUARE_TITLES = ("Unaligned", "W₂ alignment", "Hidden layer")  # the predictive maps and the assignment matrices


def legend_entry_px(label: str, font: float) -> float:
    """A legend entry's width, its symbol included, as Chromium draws it: "weight matching" 110 px at 13 px,
    "unaligned" 74 px."""
    return 0.5 * font * len(label) + font


def legend_columns(spec: dict, container_px: int) -> int | None:
    """The number of columns the spec's legends take in a column ``container_px`` wide (its expression
    evaluated), or None where the spec sets none (Vega then puts every entry in one row)."""
    columns = spec["config"]["legend"].get("columns")
    if columns is None:
        return None
    expr = columns["expr"].replace("(containerSize()[0] || width)", str(container_px))
    assert re.fullmatch(r"(?:[\d\s(),./+*-]|max|min|floor)*", expr), expr  # arithmetic on the width alone
    return eval(expr, {"__builtins__": {}}, {"max": max, "min": min, "floor": math.floor})


def symbol_legend_labels(spec: dict) -> list[str]:
    """The entries of the spec's series legend (views/common/charts.series_channels: the colour scale's domain)."""
    return next((colour["scale"]["domain"] for colour in channel(spec, "color") if colour.get("legend")), [])


def assert_charts_fit_any_column(at) -> None:
    """Every chart takes its column's width: none has a fixed width (a 340 px map, 417 px with its axes and colour
    scale, scrolled a phone's page sideways); the maps and matrices keep a square plot area as wide as the column
    lets them; colour scales lie below their plot, short enough for a phone; a legend too long for one row in a
    phone's column wraps, and stays one row in a wide one."""
    drawn = [*player_charts(at), *vega_charts(at)]
    assert drawn
    for chart in drawn:
        spec, title = chart["spec"], chart["title"]
        assert "width" not in spec and spec.get("autosize", {}).get("type") != "pad", title
        if title.startswith(SQUARE_TITLES):
            assert spec["autosize"] == {"type": "fit-x", "contains": "padding"} and "height" not in spec, title
            assert {"name": "height", "expr": "width"} in spec["params"], title
        for fill in channel(spec, "fill"):
            if fill.get("legend"):
                legend = fill["legend"]
                assert legend["orient"] == "bottom" and legend["direction"] == "horizontal", title
                assert legend["gradientLength"] <= PHONE_COLUMN_PX / 2, title
        font = spec["config"]["legend"]["labelFontSize"]
        labels = symbol_legend_labels(spec)
        if labels and any(fill.get("legend") for fill in channel(spec, "fill")):  # two legends below: stacked
            assert spec["config"]["legend"]["layout"]["bottom"]["direction"] == "vertical", title
        if len(labels) < 2:
            continue
        entry_px = max(legend_entry_px(label, font) for label in labels)
        for container_px in (PHONE_COLUMN_PX, WIDE_COLUMN_PX):
            columns = legend_columns(spec, container_px) or len(labels)
            assert columns >= 1 and columns * entry_px + (columns - 1) * 10 <= container_px, (title, container_px)
        if len(labels) * entry_px <= WIDE_COLUMN_PX / 2:
            assert legend_columns(spec, WIDE_COLUMN_PX) == len(labels), title  # one row where it fits


def titles(at) -> list[str]:
    """The page's chart titles in order: the player's (before any other chart), then Streamlit's."""
    return [chart["title"] for chart in (*player_charts(at), *vega_charts(at))]


def chart_titles(depth: int, maps: bool = True) -> list[str]:
    """The charts a link draws, in order: the player's loss and accuracy paths and, with ``maps``, its two
    predictive maps; then distances, training curves, one assignment per hidden layer."""
    return [
        "Loss along the path",
        "Accuracy along the path",
        *(["Unaligned", "W₂ alignment"] if maps else []),
        "Distance per layer",
        "Training both posteriors",
        *(f"Hidden layer {layer}: assignment" for layer in range(1, depth + 1)),
    ]


NEAREST = tuple(int(VIRIDIS[-1][i : i + 2], 16) for i in (1, 3, 5))  # a row's smallest distance


def assignment(at, layer: int) -> dict:
    """Layer ``layer``'s assignment chart: where each row of its image (unit of q_A, from the top) shows the row's
    nearest unit of q_B, its markers' columns by unit of q_A, its x title."""
    chart = vega_chart(at, f"Hidden layer {layer}: assignment")
    pixels = png_rows(chart["datasets"]["image"]["url"][0])
    nearest = [set(np.flatnonzero((row == NEAREST).all(axis=1)).tolist()) for row in pixels]
    marks = chart["datasets"]["lines"]
    width = len(marks)
    matched = marks.assign(unit=width - 1 - marks["y"]).sort_values("unit")["x"].astype(int).tolist()
    [x_title] = {view["encoding"]["x"]["title"] for view in layers(chart["spec"]) if "x" in view.get("encoding", {})}
    return {"nearest": nearest, "matched": matched, "x_title": x_title, "width": width}


def test_default_link_shows_the_barrier_collapse():
    at = align_page()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error and not at.warning
    values = metrics(at)
    assert set(values) == METRICS
    (before, before_se), (after, after_se) = (
        map(float, values[name].split(" ± ")) for name in ("loss barrier before", "loss barrier after (W₂)")
    )
    assert before > 0.2 > 0.05 > after and before > 5 * before_se and after < 2 * after_se
    assert any("below 2 Monte-Carlo standard errors: gone" in caption.value for caption in at.caption)
    assert float(values["W₂ after alignment"]) < float(values["W₂(q_A, q_B) before"])
    assert titles(at) == chart_titles(depth=2)
    sent = player(at, "align.player")
    [loss] = [chart for chart in sent["charts"] if chart["name"] == "loss"]
    lines = pd.DataFrame(loss["static"]["lines"])  # the paths, sent once
    assert list(dict.fromkeys(lines["series"])) == ["unaligned", "weight matching", "W₂ alignment"]
    assert all((lines["series"] == name).sum() == 21 for name in ("unaligned", "W₂ alignment"))
    assert sent["frame"] == 10 and frame_rows(sent, "loss", "rules", 10)["value"].tolist() == [0.5]  # half way
    unaligned, aligned = (
        image_values(frame_rows(sent, f"map_{path}", "image", 10)["url"][0], BLUE_RED) for path in ("before", "w2")
    )  # P(class 1) on a 60 × 60 grid, at t = 0.5
    assert unaligned.shape == aligned.shape == (60, 60) and aligned.min() < 0.1 and aligned.max() > 0.9
    # Half way along the unaligned path the predictive is less sure of either class than the aligned one.
    assert np.abs(unaligned - 0.5).mean() < np.abs(aligned - 0.5).mean() - 0.1
    bars = vega_chart(at, "Distance per layer")["datasets"]["bars"]
    by_path = bars.groupby("series", sort=False)["value"].sum()
    assert list(by_path.index) == ["unaligned", "weight matching", "W₂ alignment"]
    assert by_path["W₂ alignment"] < by_path["unaligned"]  # alignment brings every layer closer
    elbo = vega_chart(at, "Training both posteriors")["datasets"]["lines"]
    assert sorted(elbo["series"].unique()) == ["q_A", "q_B"] and elbo["x"].max() <= 2000
    assert any("the closest of 64 descents (this page runs at most 64)" in c.value for c in at.caption)
    summary = at.dataframe[0].value
    assert list(summary.columns) == ["unaligned", "weight matching", "W₂ alignment"]  # the paths side by side
    assert float(summary.loc["barrier (nats)"].iloc[0]) > float(summary.loc["barrier (nats)"].iloc[2])
    downloads = [button.key for button in at.get("download_button")]
    assert len(downloads) == 7 and downloads[-3:] == [
        "align.download_q_a",
        "align.download_q_b",
        "align.download_q_b_aligned",
    ]
    assert_charts_fit_any_column(at)
    assert dict(at.query_params) == {
        "source": "trained",
        "task": "moons",
        "width": "64",
        "depth": "2",
        "train": "1000",
        "noise": "0.15",
        "steps": "2000",
        "lr": "0.01",
        "prior": "1.0",
        "samples": "32",
        "starts": "64",
        "order": "own",
        "seed": "0",
        "surface": "0",
    }


def test_the_path_player_plays_the_walk_from_frames_sent_once():
    """The walk from q_A to q_B goes to the browser's player once: frame k marks t_k on both path charts and draws
    both paths' maps at t_k, the maps those the lab computes; the caption states each path's loss there."""
    at = align_page(**SMALL, seed="2")
    sent = player(at, "align.player")
    assert [chart["spec"]["title"]["text"] for chart in sent["charts"]] == [
        "Loss along the path",
        "Accuracy along the path",
        "Unaligned",
        "W₂ alignment",
    ]
    config = align_lab.AlignConfig(width=16, depth=1, steps=200, samples=8, seed=2).validate()
    pair, rep = align_lab.trained_and_aligned(config)
    assert sent["frames"] == 21 and sent["frame"] == 10
    for frame in (0, 11, 20):
        assert frame_rows(sent, "accuracy", "rules", frame)["value"].tolist() == [pytest.approx(frame / 20)]
        _, _, expected = align_lab.path_map(pair, rep, align_lab.load_task(config), "w2", frame)
        shown = image_values(frame_rows(sent, "map_w2", "image", frame)["url"][0], BLUE_RED)
        assert np.abs(shown - expected).max() < 0.01  # the colour table's levels
    document = frames_of(sent)
    assert document["labels"][11] == "t = 0.55  (point 11 of 20)"
    loss = rep.paths["w2"]["loss"][11]
    assert (
        document["captions"][11].startswith("Test loss at t: unaligned ")
        and f"W₂ alignment {loss:.3f}" in (document["captions"][11])
    )


def test_assignment_markers_follow_the_chosen_order():
    at = align_page(**SMALL, seed="2")
    own = assignment(at, 1)
    perm = own["matched"]
    assert sorted(perm) == list(range(16)) and perm != list(range(16))
    assert own["x_title"] == "unit of q_B"
    assert all(own["nearest"])  # every row (unit of q_A) shows its nearest unit of q_B
    at.radio(key="align.order").set_value("aligned").run()
    assert not at.exception and at.query_params["order"] == "aligned"
    aligned = assignment(at, 1)
    assert aligned["matched"] == list(range(16))  # the matches run down the diagonal
    assert aligned["x_title"] == "unit of q_B (aligned order)"
    # The same rows with the columns reordered: each row's nearest moves with its unit of q_B.
    assert [{perm.index(column) for column in row} for row in own["nearest"]] == aligned["nearest"]
    # Each matched cell is the smallest in its row more often than not (a good alignment).
    assert sum(unit in row for unit, row in enumerate(aligned["nearest"])) >= 8


def test_depth_sets_the_number_of_assignment_matrices():
    at = align_page(**{**SMALL, "depth": "3"})
    assert not at.exception
    assert [title for title in titles(at) if title.startswith("Hidden layer")] == [
        f"Hidden layer {i}: assignment" for i in (1, 2, 3)
    ]
    distances = vega_chart(at, "Distance per layer")
    assert distances["datasets"]["bars"]["layer"].nunique() == 4  # weight layers
    # The layers' names down the side, where four (five at depth 4) fit a phone's column; under the bars they overlapped.
    assert {y["field"] for y in channel(distances["spec"], "y")} == {"layer"}
    assert_charts_fit_any_column(at)


def test_presentation_mode_charts_fit_any_column():
    at = align_page(**SMALL, present="1")
    assert not at.exception
    assert titles(at) == chart_titles(depth=1)
    assert_charts_fit_any_column(at)
    # Larger text: the four entries of a path's legend take a row each on a phone, one row on a wide screen.
    [spec] = [chart["spec"] for chart in player_charts(at) if chart["title"] == "Loss along the path"]
    assert spec["config"]["legend"]["labelFontSize"] == 19
    assert legend_columns(spec, PHONE_COLUMN_PX) == 1 and legend_columns(spec, WIDE_COLUMN_PX) == 4


def test_mnist_link_trains_on_digits_without_maps():
    at = align_page(task="mnist", width="16", depth="1", steps="100", train="1000", samples="4")
    assert not at.exception and not at.error
    assert titles(at) == chart_titles(depth=1, maps=False)  # no maps: 784 inputs
    assert "784-16-10 MLP" in at.caption[2].value
    assert_charts_fit_any_column(at)


def test_preset_sets_its_values_and_the_url():
    at = align_page(**SMALL)
    at.selectbox(key="align.preset").set_value("Three hidden layers").run()
    assert not at.exception
    assert at.slider(key="align.depth").value == 3 and at.slider(key="align.width").value == 64
    assert at.query_params["depth"] == "3" and at.query_params["steps"] == "2000"
    assert any("Three assignments" in info.value for info in at.info)


def test_new_seed_changes_the_seed_and_the_posteriors():
    at = align_page(**SMALL, seed="5")
    before = metrics(at)["W₂(q_A, q_B) before"]
    at.button(key="align.new_seed").click().run()
    assert not at.exception
    assert at.number_input(key="align.seed").value == 6 and at.query_params["seed"] == "6"
    assert metrics(at)["W₂(q_A, q_B) before"] != before


def test_malformed_link_gives_one_notice_and_the_defaults():
    at = align_page(**{**SMALL, "task": "cifar", "width": "999", "order": "sideways"})
    assert not at.exception
    assert len(at.warning) == 1
    notice = at.warning[0].value
    assert "task=cifar" in notice and "width=999" in notice and "order=sideways" in notice
    assert at.query_params["task"] == "moons" and at.query_params["width"] == "128"
    assert at.query_params["order"] == "own"


def test_the_server_caps_are_stated_and_the_declared_ranges_hold_below_them():
    at = align_page(**{**SMALL, "depth": "4", "noise": "0.8"})
    assert not at.exception and not at.warning  # both in AlignConfig's declared ranges, which the page keeps
    shown = {widget.key: widget for kind in ("slider", "number_input") for widget in at.get(kind)}
    for name, cap in {"width": 128, "train": 20_000, "steps": 3000, "samples": 64}.items():
        widget = shown[f"align.{name}"]
        assert widget.max == cap and f"This page allows at most {cap:g}; the command line" in widget.help, name
    assert shown["align.depth"].max == 4 and shown["align.noise"].max == 1.0
    assert len([title for title in titles(at) if title.startswith("Hidden layer")]) == 4


def test_unreadable_mnist_is_an_error_not_a_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLAB_MNIST_DIR", str(tmp_path))
    at = align_page(task="mnist", width="16", depth="1", steps="100", train="777")
    assert not at.exception
    assert len(at.error) == 1 and "MNIST" in at.error[0].value
    assert not at.metric  # nothing half-drawn


def test_diverged_training_is_an_error_not_a_traceback(monkeypatch):
    def diverge(config, data, progress=None):
        raise results.TrainingDiverged(
            "training diverged at step 7 (posterior A: the ELBO is not finite); lower the learning rate"
        )

    monkeypatch.setattr(align_lab, "train_pair", diverge)
    monkeypatch.setattr(
        shared_results, "_shared", shared_results.SharedResults(workers=0)
    )  # trained here, where the patch holds
    at = align_page(**SMALL, seed="4242")
    assert not at.exception
    assert len(at.error) == 1 and "diverged at step 7" in at.error[0].value
    assert at.sidebar.slider  # the controls stay


def test_a_failure_is_said_once_and_the_next_run_tries_again(monkeypatch):
    monkeypatch.setattr(
        shared_results, "_shared", shared_results.SharedResults(workers=0)
    )  # computed in the page's run
    config = align_lab.AlignConfig(width=16, depth=1, steps=200, samples=8, seed=4243).validate()
    task = align_lab.alignment_task(config)
    stopped = f"{task.label} stopped before it finished (BrokenProcessPool); move a control or reload to try again"
    broken = concurrent.futures.Future()
    broken.set_exception(BrokenProcessPool("a worker died"))
    failed = shared_results.Job(task.key, task.label, broken)  # the session's last job, as its waiting panel ended
    at = align_page(**SMALL, seed="4243", state={"ui.job": failed})
    assert [error.value for error in at.error] == [stopped] and not at.metric
    at.run()  # the next run, e.g. a control moved and back: the computation is asked for again
    assert not at.error and set(metrics(at)) >= METRICS


def test_the_files_view_asks_for_two_networks_and_says_uploads_stay_out_of_links():
    at = align_page(source="files", samples=8)
    assert not at.exception and not at.error
    assert any("cannot live in a link" in info.value for info in at.info)
    assert [uploader.label for uploader in at.get("file_uploader")] == ["Network A", "Network B"]
    assert dict(at.query_params)["source"] == "files" and dict(at.query_params)["samples"] == "8"
    # Nothing trains, and no chart (of either kind) is drawn, while it waits for the files.
    assert not at.get("plotly_chart") and not at.get("vega_lite_chart") and not at.get("metric")
