"""AppTest checks of the MNIST page (its live fragment's first render included)."""

import hashlib
import math
import os
from pathlib import Path

import pytest
from mnist_runs import finished_run
from streamlit.testing.v1 import AppTest
from vegatest import channel, layers, vega_chart, vega_charts

from symlab.labs.mnist.experiment import MnistConfig
from symlab.runs import supervisor
from symlab.specs import controls, settings
from symlab.specs.run_kind import CANCELLED, FINISHED, QUEUED, RUNNING

pytestmark = pytest.mark.slow

PAGE = str(Path(__file__).resolve().parents[1] / "views" / "mnist.py")


def mnist_page(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params.update(query)
    return at.run()


def tokens(registry, *run_ids) -> str:
    """The compare link's value for these runs: their public tokens."""
    return ",".join(registry.get(run_id).token for run_id in run_ids)


def test_default_view_and_url(registry):
    at = mnist_page()
    assert not at.exception and not at.error
    assert at.query_params["hidden"] == "400" and at.query_params["method"] == "mfvi"
    assert any("No runs yet" in info.value for info in at.info)


def test_widgets_follow_the_declarations_and_state_the_server_caps(registry):
    """The boxes take any number (the page keeps it in range: see the next test), and their help states the range,
    the server's cap included."""
    at = mnist_page()
    limits = settings.RunLimits()
    for name, (spec, _) in controls.declared(MnistConfig).items():
        if spec.widget_kind != "number":
            continue
        widget = at.number_input(key=f"mnist.{spec.url or name}")
        cap = {"hidden": limits.max_hidden, "depth": limits.max_depth, "epochs": limits.max_epochs * 120}.get(
            name
        )  # epochs of a 500-image subset
        assert (widget.label, widget.min, widget.max, widget.step) == (
            spec.label,
            None,
            None,
            spec.nudge or spec.step or 1,
        ), name
        high = cap if cap is not None else spec.high
        assert f"From {spec.shown(spec.low)} to {spec.shown(high)}." in widget.help, name
        assert ("This page allows at most" in (widget.help or "")) == (cap is not None), name
        assert cap is None or widget.help.endswith(
            f"at most {cap}; the command line (`python -m symlab`) has no such cap."
        ), name
    assert at.number_input(key="mnist.batch").step == 8 and at.number_input(key="mnist.lr").step == 1e-4


def test_a_number_typed_out_of_range_is_brought_into_it_and_the_box_shows_what_runs(registry, monkeypatch):
    """Streamlit's own range check left 99999999 in the box while the run launched with the previous width (16):
    now the box comes back to the range's end, the server's cap, with a notice, and that is what launches."""
    monkeypatch.setenv("SYMLAB_MAX_HIDDEN", "64")
    at = mnist_page(hidden="16", epochs="1", subset="500", samples="2")
    at.number_input(key="mnist.hidden").set_value(99999999).run()
    at.number_input(key="mnist.lr").set_value(0.0).run()
    assert not at.exception and not at.error
    assert at.number_input(key="mnist.hidden").value == 64 and at.query_params["hidden"] == "64"
    assert at.number_input(key="mnist.lr").value == 1e-5 and at.query_params["lr"] == "1e-05"
    notices = [warning.value for warning in at.sidebar.warning]
    assert notices == [
        "Hidden units per layer: 99999999 is outside 1 to 64; 64 is this server's cap. Set to 64.",
        "Learning rate (Adam): 0 is outside 1e-05 to 1. Set to 1e-05.",
    ]
    at.button(key="mnist.launch").click().run()
    [run] = registry.runs()
    assert (run.config.hidden, run.config.lr) == (64, 1e-5)
    supervisor.cancel(registry, run.id)
    at.number_input(key="mnist.hidden").set_value(32).run()  # a value in range: its notice goes
    assert [warning.value for warning in at.sidebar.warning] == notices[1:]


def test_odd_link_is_clamped_with_a_notice(registry):
    at = mnist_page(hidden="99999999", epochs="lots", method="adam")
    assert not at.exception
    notice = at.warning[0].value
    assert "hidden" in notice and "epochs" in notice and "method" in notice
    assert at.number_input(key="mnist.hidden").value == settings.RunLimits().max_hidden


def test_launching_a_pair_queues_two_runs_with_the_same_seed(registry):
    at = mnist_page(hidden="8", epochs="1", subset="500", samples="2", seed="7")
    at.button(key="mnist.launch_pair").click().run()
    assert not at.exception and not at.error
    launched = registry.runs()
    assert [(r.config.method, r.config.seed, r.config.hidden) for r in launched] == [("mfvi", 7, 8), ("sgm", 7, 8)]
    assert len(at.get("progress")) >= 1  # the live view shows them right away
    for run in launched:
        supervisor.cancel(registry, run.id)


def test_results_table_and_comparison_from_finished_runs(registry):
    ids = []
    for method, seed, accuracy in (("mfvi", 0, 0.9), ("mfvi", 1, 0.92), ("sgm", 0, 0.93)):
        config = MnistConfig(hidden=32, method=method, K=4, seed=seed)
        sgm_bound = -98.6 if method == "sgm" else None
        run_id = finished_run(registry, config, test_acc=accuracy, train_elbo=-100.0, train_elbo_sym=sgm_bound)
        registry.add_metrics(run_id, {"epoch": 1, "test_acc": accuracy, "test_nll": 0.3, "train_elbo": -100.0})
        ids.append(run_id)
    at = mnist_page(compare=tokens(registry, ids[0], ids[2]))
    assert not at.exception
    table = at.dataframe[-1].value
    assert list(table.columns) == ["width", "MFVI", "SGM K=4"]
    assert table.iloc[0]["MFVI"] == "91.00 ± 1.00 (2 seeds)" and table.iloc[0]["SGM K=4"] == "93.00 (1 seed)"
    gain = vega_chart(at, "SGM's bound above MFVI's ELBO")  # −98.6 − (−100) nats, no spread
    assert gain["datasets"]["lines"][["series", "x", "y"]].values.tolist() == [["SGM K=4", 32.0, pytest.approx(1.4)]]
    assert channel(gain["spec"], "y")[0]["title"] == ["SGM bound − MFVI", "ELBO (nats)"]  # two lines: long
    assert not [view for view in layers(gain["spec"]) if view["mark"]["type"] == "rule"]
    assert at.multiselect(key="mnist.compare_pick").value == [ids[0], ids[2]]
    at.multiselect(key="mnist.compare_pick").unselect(ids[0]).run()
    assert at.query_params["compare"] == tokens(registry, ids[2])


def test_a_table_of_runs_that_did_not_learn_says_so_above_it(registry):
    for method, accuracy in (("mfvi", 0.11), ("sgm", 0.12)):
        finish(registry, MnistConfig(hidden=16, method=method, K=4), test_acc=accuracy, train_elbo=-100.0)
    at = mnist_page()
    assert not at.exception
    warning = next(w.value for w in at.warning if "did not learn" in w.value)
    assert "The MFVI runs of width 16 classify 11.0 %" in warning and "below the 50 % floor" in warning


def test_the_compare_link_names_runs_by_their_tokens_not_their_ids(registry):
    """Run ids are 1, 2, 3…: a link that named runs by them told anyone which runs exist. It names them by random
    tokens now; an id or an unknown token is left out with the page's notice, a malformed one too."""
    run_id = finish(registry, MnistConfig(hidden=16), test_acc=0.9, train_elbo=-100.0)
    at = mnist_page(compare=f"{run_id},{tokens(registry, run_id)}")
    assert at.multiselect(key="mnist.compare_pick").value == [run_id]
    assert at.query_params["compare"] == tokens(registry, run_id)
    assert any(f"`compare`: no run {run_id} here: left out." in w.value for w in at.warning)
    at = mnist_page(compare="<b>#1</b>")
    assert not at.exception and not at.multiselect(key="mnist.compare_pick").value
    assert any("is not a list of tokens" in w.value for w in at.warning)


def test_block_estimator_from_a_link_launches_with_its_settings(registry):
    at = mnist_page(
        method="sgm", mi="blocks", block="4", rebuild="50", hidden="8", epochs="1", subset="500", samples="2"
    )
    assert not at.exception and not at.error
    assert at.button(key="mnist.launch").label == "Launch SGM blocks"
    at.button(key="mnist.launch").click().run()
    [run] = registry.runs()
    assert (run.config.method, run.config.mi, run.config.block_size, run.config.rebuild_every) == (
        "sgm",
        "blocks",
        4,
        50,
    )
    assert run.config.label.startswith("SGM blocks B=4")
    supervisor.cancel(registry, run.id)


def test_block_size_out_of_range_is_clamped_with_a_notice(registry):
    at = mnist_page(block="9", mi="exact")
    assert not at.exception
    notice = at.warning[0].value
    assert "block" in notice and "mi" in notice
    assert at.number_input(key="mnist.block").value == 5 and at.query_params["mi"] == "infonce"


def test_diagnostics_are_charted_per_epoch_and_against_width(registry):
    """Runs recorded before the diagnostics existed sit beside new ones without breaking a chart."""
    ids = []
    for hidden, nearest in ((16, 850.0), (64, 318.0)):
        for method in ("mfvi", "sgm"):
            config = MnistConfig(hidden=hidden, method=method, mi="blocks")
            sgm_bound = -90.0 if method == "sgm" else None
            diagnostics = dict(nearest_unit_kl_min=nearest, units_at_prior=1, mi_active=0.25)
            run_id = finished_run(registry, config, 0.9, -100.0, train_elbo_sym=sgm_bound, **diagnostics)
            registry.add_metrics(
                run_id,
                {
                    "epoch": 1,
                    "test_acc": 0.9,
                    "test_nll": 0.3,
                    "train_elbo": -100.0,
                    "nearest_unit_kl_min": nearest,
                    "units_at_prior": 1,
                    "block_mi": 5.0,
                    "block_log_group_size": 5.5,
                },
            )
            ids.append(run_id)
    old = finished_run(registry, MnistConfig(hidden=64), test_acc=0.9, train_elbo=-100.0, infonce_active=0.0)
    registry.add_metrics(old, {"epoch": 1, "test_acc": 0.9, "test_nll": 0.3, "train_elbo": -100.0})
    at = mnist_page(compare=tokens(registry, ids[0], old))
    assert not at.exception and not at.error
    assert not at.get("plotly_chart")
    by_width = {chart["title"]: chart for chart in vega_charts(at) if chart["title"].endswith("against width")}
    assert {"Closest two units against width", "Units at the prior against width"} <= set(by_width)
    for chart in by_width.values():  # x: the widths run, on a log axis ticked at them
        x = channel(chart["spec"], "x")[0]
        assert x["title"] == "hidden units (log scale)" and x["scale"]["type"] == "log"
        assert x["axis"]["values"] == [16, 64]
    closest = by_width["Closest two units against width"]["datasets"]["lines"]  # the old run has no value
    assert sorted(zip(closest["series"], closest["x"], closest["y"])) == [
        ("MFVI", 16, 850.0),
        ("MFVI", 64, 318.0),
        ("SGM blocks B=2", 16, 850.0),
        ("SGM blocks B=2", 64, 318.0),
    ]
    assert channel(by_width["Closest two units against width"]["spec"], "y")[0]["scale"]["type"] == "log"
    compared = [
        chart for chart in vega_charts(at) if chart["title"] in ("Closest two units", "Block MI on q: I_H / log|H|")
    ]
    assert len(compared) == 4  # the live view's (the latest two runs) and the comparison's
    nearest = compared[-2]["datasets"]["lines"]  # the comparison's: run ids[0] has it, the old run has none
    assert nearest["y"].tolist() == [850.0] and nearest["series"].str.startswith(f"#{ids[0]} ").all()
    runs_table = at.dataframe[0].value
    assert {"I active", "J min", "at prior"} <= set(runs_table.columns)


def finished_runs(registry, epochs: int, accuracies=(0.9, 0.93), recorded: int | None = None) -> list[int]:
    """An MFVI/SGM pair of ``epochs`` epochs, finished, with every per-epoch metric of the first ``recorded``
    epochs (all of them by default)."""
    ids = []
    for method, accuracy in zip(("mfvi", "sgm"), accuracies):
        config = MnistConfig(hidden=32, method=method, mi="blocks", epochs=epochs)
        sgm_bound = -9e4 if method == "sgm" else None
        diagnostics = dict(nearest_unit_kl_min=100.0, units_at_prior=0)
        run_id = finished_run(registry, config, accuracy, -1e5, train_elbo_sym=sgm_bound, **diagnostics)
        for epoch in range(1, (recorded or epochs) + 1):
            registry.add_metrics(
                run_id,
                {
                    "epoch": epoch,
                    "test_acc": accuracy + 0.002 * epoch,
                    "test_nll": 0.3,
                    "train_elbo": -1e5 + 10 * epoch,
                    "nearest_unit_kl_min": 800.0 / epoch,
                    "units_at_prior": 0,
                    "block_mi": 5.0,
                    "block_log_group_size": 5.5,
                },
            )
        ids.append(run_id)
    return ids


@pytest.mark.parametrize("epochs", [1, 12])
def test_epoch_curves_keep_fractions_in_range_and_epochs_whole(registry, epochs):
    """One epoch drew an accuracy axis up to 1.5 and epoch ticks at halves; the axes are now fixed by what the
    quantities are: accuracy and I_H / log|H| at most 1, counts from 0, epochs 1 … the planned number."""
    ids = finished_runs(registry, epochs)
    at = mnist_page(compare=tokens(registry, *ids))
    assert not at.exception and not at.error
    curves = [
        chart
        for chart in vega_charts(at)
        if chart["title"]
        in (
            "Test accuracy",
            "Train ELBO",
            "Test NLL",
            "Closest two units",
            "Block MI on q: I_H / log|H|",
            "Units at the prior",
        )
    ]
    assert len(curves) == 5 + 6  # the live view's and the comparison's
    for chart in curves:
        [x] = [x for x in channel(chart["spec"], "x") if x["field"] == "x"][:1]
        assert x["title"] == "epoch" and x["scale"]["domain"] == [0.5, epochs + 0.5]
        assert x["axis"]["tickMinStep"] == 1 and x["axis"]["format"] == "d"  # whole epochs only
        lines = chart["datasets"]["lines"]
        assert sorted(set(lines["x"])) == list(range(1, epochs + 1))
        y = channel(chart["spec"], "y")[0]
        if chart["title"] in ("Test accuracy", "Block MI on q: I_H / log|H|"):
            assert y["scale"]["domainMax"] == 1 and "domain" not in y["scale"] and lines["y"].between(0, 1).all()
        if chart["title"] == "Units at the prior":
            assert y["scale"]["zero"] is True and y["axis"]["tickMinStep"] == 1
    # Against width: accuracy in per cent, counts from 0 in whole units.
    assert not at.get("plotly_chart")
    accuracy = vega_chart(at, "Accuracy against width (± std)")
    assert channel(accuracy["spec"], "y")[0]["title"] == "test accuracy (%)"
    assert sorted(zip(accuracy["datasets"]["lines"]["series"], accuracy["datasets"]["lines"]["y"])) == [
        ("MFVI", pytest.approx(90.0)),
        ("SGM blocks B=2", pytest.approx(93.0)),
    ]
    [prior, *_] = [
        y for y in channel(vega_chart(at, "Units at the prior against width")["spec"], "y") if y["field"] == "y"
    ]
    assert prior["scale"]["zero"] is True and prior["scale"]["domain"] == {"unionWith": [0, 1]}
    assert prior["axis"]["tickMinStep"] == 1 and prior["axis"]["format"] == "d"


def test_error_bars_against_width_stay_within_what_the_quantity_can_be(registry):
    """Mean ± std over three seeds: accuracy's bar stops at 100 %, a count's at 0, and a divergence's lower end
    below 0, off the log axis, runs down to the axis; the method's colour and dash mark its bars too."""
    ids = []
    for seed, (accuracy, nearest, at_prior) in enumerate(((1.0, 10.0, 0), (1.0, 10.0, 0), (0.5, 1000.0, 5))):
        diagnostics = dict(nearest_unit_kl_min=nearest, units_at_prior=at_prior)
        run_id = finished_run(registry, MnistConfig(hidden=32, seed=seed), accuracy, -100.0 - seed, **diagnostics)
        ids.append(run_id)
    at = mnist_page()
    assert not at.exception and not at.error

    def bar(title):
        chart = vega_chart(at, title)
        [row] = chart["datasets"]["lines"].to_dict("records")
        return chart, row

    chart, row = bar("Accuracy against width (± std)")  # 83.33 ± 23.57 %
    assert row["y"] == pytest.approx(250 / 3) and row["std"] == pytest.approx(23.570226)
    assert row["low"] == pytest.approx(250 / 3 - 23.570226) and row["high"] == 100.0 and not row["to_bottom"]
    rules = [view for view in layers(chart["spec"]) if view["mark"]["type"] == "rule"]
    assert (
        len(rules) == 1
        and rules[0]["encoding"]["y"]["field"] == "high"
        and rules[0]["encoding"]["y2"]["field"] == "low"
    )
    assert rules[0]["encoding"]["color"]["scale"]["domain"] == ["MFVI"]
    assert rules[0]["encoding"]["strokeDash"]["scale"]["range"] == [[1, 0]]
    assert bar("Train ELBO against width")[1]["y"] == pytest.approx(-101.0)  # no SGM run: the ELBO itself
    _, row = bar("Units at the prior against width")  # 1.67 ± 2.36
    assert row["low"] == 0.0 and row["high"] == pytest.approx(5 / 3 + 2.357023)
    chart, row = bar("Closest two units against width")  # 340 ± 466.7 nats
    assert row["y"] == pytest.approx(340.0) and row["high"] == pytest.approx(340 + 466.690476)
    assert math.isnan(row["low"]) and row["to_bottom"]
    to_bottom = [
        view
        for view in layers(chart["spec"])
        if view["mark"]["type"] == "rule" and view["encoding"].get("y2") == {"value": "height"}
    ]
    assert len(to_bottom) == 1
    downloads = {button.key for button in at.get("download_button")}  # the data behind each chart
    assert {
        "mnist.width_acc_csv",
        "mnist.width_elbo_csv",
        "mnist.width_nearest_csv",
        "mnist.width_prior_csv",
    } <= downloads


def test_a_new_epoch_changes_only_the_curves_data(registry):
    ids = finished_runs(registry, 4, recorded=3)
    at = mnist_page(compare=tokens(registry, *ids))
    before = [chart for chart in vega_charts(at) if chart["title"] == "Test accuracy"]
    registry.add_metrics(ids[0], {"epoch": 4, "test_acc": 0.95})  # the next epoch's metrics arrive
    at.run()
    after = [chart for chart in vega_charts(at) if chart["title"] == "Test accuracy"]
    assert len(before) == len(after) == 2
    for old, new in zip(before, after):
        assert old["spec_text"] == new["spec_text"]
        assert len(new["datasets"]["lines"]) == len(old["datasets"]["lines"]) + 1


def finish(registry, config: MnistConfig, **result) -> int:
    """A finished run of ``config`` with these final ``result`` values (and every epoch's, from epoch 1)."""
    run_id = finished_run(registry, config, **result)
    registry.add_metrics(
        run_id,
        {
            "epoch": 1,
            "test_acc": result["test_acc"],
            "test_nll": 0.3,
            "train_elbo": result["train_elbo"],
            "mi_active": result.get("mi_active"),
        },
    )
    return run_id


def test_results_count_distinct_seeds_and_show_repeats(registry):
    """Two runs of the same settings and seed 0 were counted as two seeds ("36.51 ± 0.00 (2)"): a seed counts
    once, by its latest run, and the cell says how many runs there were."""
    config = MnistConfig(hidden=16, epochs=1, train_subset=2000)
    finish(registry, config, test_acc=0.40, train_elbo=-100.0)
    finish(registry, config, test_acc=0.3651, train_elbo=-100.0)  # seed 0 again: the latest counts
    finish(registry, MnistConfig(hidden=64, epochs=1, train_subset=2000), test_acc=0.9, train_elbo=-90.0)
    at = mnist_page()
    table = at.dataframe[-1].value
    assert table.set_index("width")["MFVI"].to_dict() == {16: "36.51 (1 seed, 2 runs)", 64: "90.00 (1 seed)"}
    assert any("counts once, by its latest run" in text.value for text in at.markdown)
    accuracy = vega_chart(at, "Accuracy against width (± std)")["datasets"]["lines"]
    assert accuracy[["x", "y", "seeds"]].values.tolist() == [[16.0, pytest.approx(36.51), 1], [64.0, 90.0, 1]]


def test_every_chart_titles_its_y_axis_above_the_plot(registry):
    """The y axis's title stood turned up beside the tick labels, where "Train ELBO against width" drew it over
    them at some widths: every chart of the page now sets it level above the plot, clear of the labels."""
    narrow = finish(registry, MnistConfig(hidden=16), test_acc=0.9, train_elbo=-3.91e6)
    wide = finish(registry, MnistConfig(hidden=1024), test_acc=0.95, train_elbo=-1.21e5)
    at = mnist_page(compare=tokens(registry, narrow, wide))
    drawn = vega_charts(at)
    assert {"Train ELBO against width", "Test accuracy", "Train ELBO"} <= {chart["title"] for chart in drawn}
    for chart in drawn:
        axis = chart["spec"]["config"]["axisY"]
        assert (axis["titleAngle"], axis["titleAlign"], axis["titleX"]) == (0, "left", 0), chart["title"]
        assert axis["titleY"] < 0 and axis["titleBaseline"] == "bottom", chart["title"]


def point_sizes(spec) -> dict:
    [size] = [view["encoding"]["size"] for view in layers(spec) if view["mark"]["type"] == "point"]
    return dict(zip(size["scale"]["domain"], size["scale"]["range"]))


def test_methods_that_coincide_by_design_say_so_on_the_chart_and_both_markers_show(registry):
    """SGM whose term never had a gradient trains exactly as MFVI with the same seed: its marker hid MFVI's, and
    only a collapsed section said why. Now the chart says so under its title, and SGM's markers are smaller."""
    ids = []
    for hidden, active in ((16, 0.4), (256, 0.0)):
        mfvi = finish(registry, MnistConfig(hidden=hidden), test_acc=0.95, train_elbo=-100.0, mi_active=None)
        sgm = finish(
            registry,
            MnistConfig(hidden=hidden, method="sgm", K=4),
            mi_active=active,
            test_acc=0.95 if active == 0 else 0.96,
            train_elbo=-100.0 if active == 0 else -99.0,
            train_elbo_sym=-98.6,
        )
        ids += [mfvi, sgm]
    at = mnist_page(compare=tokens(registry, ids[2], ids[3]))
    assert not at.exception and not at.error
    accuracy = vega_chart(at, "Accuracy against width (± std)")["spec"]
    note = " ".join(accuracy["title"]["subtitle"])
    assert note == (
        "SGM K=4 = MFVI at width 256 by design: SGM's term never had a gradient, so it trained exactly "
        "as MFVI (SGM: the smaller markers)."
    )  # not at 16, where the term acted
    assert point_sizes(accuracy)["MFVI"] > point_sizes(accuracy)["SGM K=4"]
    assert "subtitle" not in vega_chart(at, "SGM's bound above MFVI's ELBO")["spec"]["title"]
    # The compared pair, epoch by epoch: the same note on each of its charts, SGM's markers the smaller.
    compared = [chart for chart in vega_charts(at) if chart["title"] in ("Test accuracy", "Test NLL", "Train ELBO")][
        -3:
    ]
    for chart in compared:
        assert " ".join(chart["spec"]["title"]["subtitle"]) == (
            f"#{ids[3]} = #{ids[2]} by design: SGM's term never had a gradient, so it trained exactly as MFVI "
            f"(#{ids[3]}: the smaller markers)."
        )
        sizes = point_sizes(chart["spec"])
        assert sizes[f"#{ids[2]} MFVI, width 256, seed 0"] > sizes[f"#{ids[3]} SGM K=4, width 256, seed 0"]
    at.multiselect(key="mnist.compare_pick").unselect(ids[2]).select(ids[0]).run()  # a pair that differs
    compared = [chart for chart in vega_charts(at) if chart["title"] in ("Test accuracy", "Test NLL")][-2:]
    assert [chart["title"] for chart in compared] == ["Test accuracy", "Test NLL"]
    assert all("subtitle" not in chart["spec"]["title"] for chart in compared)


XSRF = "_streamlit_xsrf"


def browser_cookie(monkeypatch, token: bytes) -> None:
    """The page's visitor sends Streamlit's XSRF cookie holding ``token``, masked afresh (as on every load)."""
    from streamlit.runtime.context import ContextProxy
    from streamlit.web.server.starlette.starlette_app_utils import generate_xsrf_token_string

    monkeypatch.setattr(ContextProxy, "cookies", property(lambda self: {XSRF: generate_xsrf_token_string(token)}))


def test_runs_launched_from_this_browser_are_marked_yours_and_filter(registry, monkeypatch):
    """In a class everyone's runs filled one table: runs launched from this browser (by a one-way hash of its
    XSRF cookie's token, which the server re-masks on each load) are marked "yours", and the table filters."""
    registry.create("mnist", MnistConfig(hidden=8), "cpu", status=FINISHED, source="cli")  # the command line's
    browser_cookie(monkeypatch, b"A" * 16)
    at = mnist_page(hidden="8", epochs="1", subset="500", samples="2")
    at.button(key="mnist.launch").click().run()
    assert not at.exception and not at.error
    old, mine = registry.runs()
    assert old.owner == "" and len(mine.owner) == 32 and (b"A" * 16).hex()[:8] not in mine.owner  # a hash
    supervisor.cancel(registry, mine.id)

    browser_cookie(monkeypatch, b"A" * 16)  # the same browser, a new page load: another mask, the same token
    again = mnist_page()
    table = again.dataframe[0].value
    assert table.set_index("run")["yours"].to_dict() == {mine.id: True, old.id: False}
    assert any("launched from this browser, also after a reload" in c.value for c in again.caption)
    again.toggle(key="mnist.only_yours").set_value(True).run()
    assert again.dataframe[0].value["run"].tolist() == [mine.id]

    browser_cookie(monkeypatch, b"B" * 16)  # another browser
    other = mnist_page()
    assert not other.dataframe[0].value["yours"].any()


def test_without_the_cookie_yours_are_this_sessions_launches_and_the_page_says_so(registry):
    at = mnist_page(hidden="8", epochs="1", subset="500", samples="2")  # AppTest sends no cookies
    at.button(key="mnist.launch").click().run()
    [run] = registry.runs()
    supervisor.cancel(registry, run.id)
    assert run.owner == "" and at.dataframe[0].value["yours"].tolist() == [True]
    assert any("Yours: launched in this session" in c.value for c in at.caption)
    assert not mnist_page().dataframe[0].value["yours"].any()  # another session


def test_a_hosted_server_shows_visitors_none_of_its_file_paths(registry, monkeypatch, tmp_path):
    def shown(at) -> str:
        return " ".join(
            str(element.value)
            for kind in ("caption", "markdown", "error", "warning", "info")
            for element in at.get(kind)
        )

    failed = registry.create("mnist", MnistConfig(hidden=8), "cpu", status="failed")
    registry.update(failed, message=f"could not start the training process: {registry.root}/run-00001/worker.log")
    assert str(registry.root) in shown(mnist_page())  # a server of one's own says where runs are kept
    monkeypatch.setenv("SYMLAB_HOSTED", "1")
    at = mnist_page()
    assert not at.exception and str(tmp_path) not in shown(at)
    assert str(tmp_path) not in " ".join(at.dataframe[0].value["note"])
    assert "the runs directory/run-00001/worker.log" in at.dataframe[0].value["note"].iloc[0]


def test_results_open_with_the_shipped_study_and_its_tables(registry):
    from symlab.labs.mnist import study

    summary = study.load_study()
    at = mnist_page()
    assert not at.exception
    assert any(header.value.startswith("The study: MFVI against SGM once VI has converged") for header in at.subheader)
    effects = next(frame.value for frame in at.dataframe if "Δ accuracy (pp)" in frame.value.columns)
    assert len(effects) == len(summary["rows"])
    assert list(effects.columns[:3]) == ["images", "width", "method"]
    assert {"mnist.study_csv", "mnist.study_starts_csv", "mnist.study_recipes_csv"} <= {
        button.key for button in at.get("download_button")
    }


def test_the_runs_table_says_whether_each_finished_run_converged(registry):
    run_id = registry.create("mnist", MnistConfig(hidden=16), "cpu")
    registry.update(
        run_id,
        status=FINISHED,
        result={
            "test_acc": 0.9,
            "converged": True,
            "converged_epoch": 7,
            "elbo_change": 1.0,
            "elbo_change_se": 2.0,
            "log_sd_change": 0.0,
        },
    )
    other = registry.create("mnist", MnistConfig(hidden=16, seed=1), "cpu")
    registry.update(
        other,
        status=FINISHED,
        result={
            "test_acc": 0.9,
            "converged": False,
            "converged_epoch": None,
            "elbo_change": 90.0,
            "elbo_change_se": 2.0,
            "log_sd_change": 0.0,
        },
    )
    at = mnist_page()
    runs_table = next(frame.value for frame in at.dataframe if "converged" in frame.value.columns)
    assert dict(zip(runs_table["run"], runs_table["converged"])) == {run_id: "epoch 7", other: "no"}


def owner_of(token: bytes) -> str:
    """The owner a browser whose XSRF token is ``token`` launches runs as."""
    return hashlib.sha256(b"symlab run owner\0" + token).hexdigest()[:32]


def test_a_hosted_page_offers_cancel_and_resume_only_for_this_browsers_runs(registry, monkeypatch):
    """Cancel and Resume were on every run, anyone's: on a hosted server a browser now sees them on its own runs
    only, and a lecturer (with the host's key, typed on the page) on every run."""
    monkeypatch.setenv("SYMLAB_HOSTED", "1")
    monkeypatch.setenv("SYMLAB_LECTURER_KEY", "s3cret-lecturer")
    alice = owner_of(b"A" * 16)
    running = registry.create("mnist", MnistConfig(hidden=8), "cpu", status=RUNNING, pid=os.getpid(), owner=alice)
    stopped = registry.create("mnist", MnistConfig(hidden=8, seed=1), "cpu", status=CANCELLED, owner=alice)
    from_shell = registry.create("mnist", MnistConfig(hidden=8, seed=2), "cpu", status=CANCELLED, source="cli")

    browser_cookie(monkeypatch, b"A" * 16)
    mine = mnist_page()
    assert not mine.exception
    assert mine.button(key=f"mnist.cancel.{running}")
    [option] = mine.selectbox(key="mnist.resume_pick").options  # not the command line's run
    assert option.startswith(f"#{stopped} ")

    browser_cookie(monkeypatch, b"B" * 16)
    theirs = mnist_page()
    assert not theirs.exception
    assert f"mnist.cancel.{running}" not in {button.key for button in theirs.button}
    assert "mnist.resume_pick" not in {box.key for box in theirs.selectbox}  # nothing of theirs to resume
    assert any(f"#{running} " in bar.proto.text for bar in theirs.get("progress"))  # the run itself is shown

    theirs.text_input(key="mnist.lecturer_key").input("s3cret-lecturer").run()
    assert theirs.button(key=f"mnist.cancel.{running}")
    options = theirs.selectbox(key="mnist.resume_pick").options  # the command line's run too, newest first
    assert [option.split()[0] for option in options] == [f"#{from_shell}", f"#{stopped}"]


def test_a_run_that_gave_way_says_why_in_full_under_the_picker(registry, monkeypatch):
    """The picker's box cuts a long reason short (at 1400 px the give-way reason ended at "hourly cap, and"): the
    chosen run's reason shows in full beneath it."""
    from symlab.runs import supervisor

    monkeypatch.setenv("SYMLAB_HOSTED", "1")
    mallory = owner_of(b"M" * 16)
    gave_way = registry.create("mnist", MnistConfig(hidden=8), "cpu", status=CANCELLED, owner=mallory)
    registry.update(gave_way, message=supervisor.GAVE_WAY)
    browser_cookie(monkeypatch, b"M" * 16)
    at = mnist_page()
    assert not at.exception
    assert f"#{gave_way} cancelled: {supervisor.GAVE_WAY}" in [caption.value for caption in at.caption]


def test_a_hosted_page_tells_students_nothing_of_the_servers_internals(registry, monkeypatch):
    """A hosted /mnist said "The registry is an SQLite file in the runs directory" and "(or with python -m symlab
    mnist)": a student cannot use either. A server of one's own still says both."""
    texts = {}
    for hosted in ("1", ""):
        monkeypatch.setenv("SYMLAB_HOSTED", hosted)
        at = mnist_page()
        assert not at.exception
        texts[hosted] = " ".join(block.value for kind in (at.markdown, at.info, at.caption) for block in kind)
    for internal in ("SQLite", "registry", "python -m symlab"):
        assert internal not in texts["1"] and internal in texts[""], internal


def test_a_hosted_page_refuses_to_launch_for_a_browser_it_cannot_tell_apart(registry, monkeypatch):
    monkeypatch.setenv("SYMLAB_HOSTED", "1")
    at = mnist_page(hidden="8", epochs="1", subset="500", samples="2")  # AppTest sends no cookie
    at.button(key="mnist.launch").click().run()
    assert not registry.runs()
    assert any("Not launched" in e.value and "allow cookies" in e.value for e in at.error)


def test_a_device_sent_back_empty_keeps_its_value(registry):
    """A browser that sends a choice back empty (a cleared segmented control: a client that ignores ``required``)
    reached ``torch.device(None)`` in the page's device caption; the control keeps the value it had."""
    at = mnist_page(device="cpu")
    device = next(group for group in at.get("button_group") if group.key == "mnist.device")
    device.set_value(None).run()
    assert not at.exception, at.exception
    assert at.query_params["device"] == "cpu"
    assert any("Device for new runs: cpu." in caption.value for caption in at.caption)


def test_wrong_lecturer_keys_typed_on_the_page_make_the_next_check_wait(registry, monkeypatch):
    """Nothing limited key guesses (73 in 20 s, then the right key accepted): past a browser's first wrong keys the
    page checks no key until a delay has passed, and a rerun with the same key in the box is not a new guess."""
    from symlab.serving import key_guard

    monkeypatch.setenv("SYMLAB_LECTURER_KEY", "s3cret-lecturer")
    monkeypatch.setattr(key_guard, "GUARD", key_guard.KeyGuard())
    at = mnist_page()
    for guess in range(key_guard.FREE_PER_BROWSER):
        at.text_input(key="mnist.lecturer_key").input(f"guess{guess}").run()
        assert any("not the lecturer's key" in error.value for error in at.error)
        at.run()  # the same key again: not counted
    at.text_input(key="mnist.lecturer_key").input("s3cret-lecturer").run()
    assert any("Too many wrong keys" in warning.value for warning in at.warning)
    assert "You may cancel, resume and restart every run." not in [caption.value for caption in at.caption]


def test_a_queued_run_shows_its_place_and_a_lecturer_cancels_a_browsers_flood(registry, monkeypatch):
    """A student saw "queued" and nothing of where their run stood, and a lecturer could not tell a flood from the
    class's runs: each queued run now says how many wait ahead of it, and the lecturer's panel lists the queue by
    browser with one action that cancels a browser's queued runs."""
    from symlab.serving import key_guard

    monkeypatch.setenv("SYMLAB_HOSTED", "1")
    monkeypatch.setenv("SYMLAB_LECTURER_KEY", "s3cret-lecturer")
    monkeypatch.setenv("SYMLAB_QUICK_RUN_SECONDS", "0")  # these small runs wait too: no place of their own
    monkeypatch.setattr(key_guard, "GUARD", key_guard.KeyGuard())
    registry.create("mnist", MnistConfig(hidden=8), "cpu", status=RUNNING, pid=os.getpid(), source="cli")  # the CPU's
    mallory, bob = owner_of(b"M" * 16), owner_of(b"B" * 16)
    flood = [registry.create("mnist", MnistConfig(hidden=8, seed=s), "cpu", owner=mallory) for s in range(3)]
    mine = registry.create("mnist", MnistConfig(hidden=8), "cpu", owner=bob)

    browser_cookie(monkeypatch, b"B" * 16)
    at = mnist_page()
    assert not at.exception
    [text] = [bar.proto.text for bar in at.get("progress") if f"#{mine} " in bar.proto.text]
    assert "1 ahead of it in line" in text  # behind mallory's first only, not her three

    at.text_input(key="mnist.lecturer_key").input("s3cret-lecturer").run()
    [table] = [frame.value for frame in at.dataframe if "browser" in frame.value.columns]
    assert list(table["queued"]) == [3, 1, 0] and list(table["training"]) == [0, 0, 1]
    assert table["browser"][1].endswith("(this browser)") and table["browser"][2] == "the command line"
    assert at.selectbox(key="mnist.flood_pick").value == mallory
    at.button(key="mnist.cancel_flood").click().run()
    assert not at.exception
    assert [registry.get(run_id).status for run_id in flood] == [CANCELLED] * 3
    assert registry.get(mine).status == QUEUED
