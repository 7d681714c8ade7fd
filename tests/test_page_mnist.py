"""AppTest checks of the MNIST page (its live fragment's first render included)."""

import math
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from vegatest import channel, layers, vega_chart, vega_charts

from symlab.labs import run_kinds
from symlab.labs.mnist.experiment import MnistConfig
from symlab.runs import supervisor
from symlab.runs.registry import Registry
from symlab.specs import controls, settings
from symlab.specs.run_kind import FINISHED

PAGE = str(Path(__file__).resolve().parents[1] / "views" / "mnist.py")


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    return Registry(run_kinds())


def mnist_page(**query) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.query_params.update(query)
    return at.run()


def test_default_view_and_url(registry):
    at = mnist_page()
    assert not at.exception and not at.error
    assert at.query_params["hidden"] == "400" and at.query_params["method"] == "mfvi"
    assert any("No runs yet" in info.value for info in at.info)


def test_widgets_follow_the_declarations_and_state_the_server_caps(registry):
    at = mnist_page()
    limits = settings.RunLimits()
    for name, (spec, _) in controls.declared(MnistConfig).items():
        if spec.widget_kind != "number":
            continue
        widget = at.number_input(key=f"mnist.{spec.url or name}")
        cap = {"hidden": limits.max_hidden, "depth": limits.max_depth, "epochs": limits.max_epochs}.get(name)
        assert (widget.label, widget.min, widget.step) == (spec.label, spec.low, spec.nudge or spec.step or 1), name
        assert widget.max == (cap if cap is not None else spec.high), name
        assert ("This page allows at most" in (widget.help or "")) == (cap is not None), name
        assert cap is None or widget.help.endswith(f"at most {cap}; the command line (`python -m symlab`) has no such cap."), name
    assert at.number_input(key="mnist.batch").step == 8 and at.number_input(key="mnist.lr").step == 1e-4


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
        run_id = registry.create("mnist", MnistConfig(hidden=32, method=method, K=4, seed=seed), "cpu")
        registry.update(run_id, status=FINISHED, result={"test_acc": accuracy, "test_nll": 0.3, "test_ece": 0.02,
                                                              "train_elbo": -100.0, "train_elbo_sym": -98.6
                                                              if method == "sgm" else None})
        registry.add_metrics(run_id, {"epoch": 1, "test_acc": accuracy, "test_nll": 0.3, "train_elbo": -100.0})
        ids.append(run_id)
    at = mnist_page(compare=f"{ids[0]},{ids[2]}")
    assert not at.exception
    table = at.dataframe[-1].value
    assert list(table.columns) == ["width", "MFVI", "SGM K=4"]
    assert table.iloc[0]["MFVI"] == "91.00 ± 1.00 (2)" and table.iloc[0]["SGM K=4"] == "93.00 ± 0.00 (1)"
    gain = vega_chart(at, "ELBO comparison: how much higher SGM's bound is")  # −98.6 − (−100) nats, no spread
    assert gain["datasets"]["lines"][["series", "x", "y"]].values.tolist() == [["SGM K=4", 32.0, pytest.approx(1.4)]]
    assert channel(gain["spec"], "y")[0]["title"] == "SGM bound − MFVI ELBO (nats)"
    assert not [view for view in layers(gain["spec"]) if view["mark"]["type"] == "rule"]
    assert at.multiselect(key="mnist.compare_pick").value == [ids[0], ids[2]]
    at.multiselect(key="mnist.compare_pick").unselect(ids[0]).run()
    assert at.query_params["compare"] == str(ids[2])


def test_block_estimator_from_a_link_launches_with_its_settings(registry):
    at = mnist_page(method="sgm", mi="blocks", block="4", rebuild="50", hidden="8", epochs="1", subset="500",
                    samples="2")
    assert not at.exception and not at.error
    assert at.button(key="mnist.launch").label == "Launch SGM blocks"
    at.button(key="mnist.launch").click().run()
    [run] = registry.runs()
    assert (run.config.method, run.config.mi, run.config.block_size, run.config.rebuild_every) == \
        ("sgm", "blocks", 4, 50)
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
            run_id = registry.create("mnist", MnistConfig(hidden=hidden, method=method, mi="blocks"), "cpu")
            result = {"test_acc": 0.9, "test_nll": 0.3, "test_ece": 0.02, "train_elbo": -100.0,
                      "train_elbo_sym": -90.0 if method == "sgm" else None, "nearest_unit_kl_min": nearest,
                      "units_at_prior": 1, "mi_active": 0.25}
            registry.update(run_id, status=FINISHED, result=result)
            registry.add_metrics(run_id, {"epoch": 1, "test_acc": 0.9, "test_nll": 0.3, "train_elbo": -100.0,
                                          "nearest_unit_kl_min": nearest, "units_at_prior": 1, "block_mi": 5.0,
                                          "block_log_group_size": 5.5})
            ids.append(run_id)
    old = registry.create("mnist", MnistConfig(hidden=64), "cpu")
    registry.update(old, status=FINISHED, result={"test_acc": 0.9, "test_nll": 0.3, "test_ece": 0.02,
                                                       "train_elbo": -100.0, "infonce_active": 0.0})
    registry.add_metrics(old, {"epoch": 1, "test_acc": 0.9, "test_nll": 0.3, "train_elbo": -100.0})
    at = mnist_page(compare=f"{ids[0]},{old}")
    assert not at.exception and not at.error
    assert not at.get("plotly_chart")
    by_width = {chart["title"]: chart for chart in vega_charts(at) if chart["title"].endswith("against width")}
    assert {"Closest two units against width", "Units at the prior against width"} <= set(by_width)
    for chart in by_width.values():  # x: the widths run, on a log axis ticked at them
        x = channel(chart["spec"], "x")[0]
        assert x["title"] == "hidden units (width, log scale)" and x["scale"]["type"] == "log"
        assert x["axis"]["values"] == [16, 64]
    closest = by_width["Closest two units against width"]["datasets"]["lines"]  # the old run has no value
    assert sorted(zip(closest["series"], closest["x"], closest["y"])) == [
        ("MFVI", 16, 850.0), ("MFVI", 64, 318.0), ("SGM blocks B=2", 16, 850.0), ("SGM blocks B=2", 64, 318.0)]
    assert channel(by_width["Closest two units against width"]["spec"], "y")[0]["scale"]["type"] == "log"
    compared = [chart for chart in vega_charts(at) if chart["title"] in ("Closest two units", "Block MI on q: I_H / log|H|")]
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
        run_id = registry.create("mnist", MnistConfig(hidden=32, method=method, mi="blocks", epochs=epochs), "cpu")
        for epoch in range(1, (recorded or epochs) + 1):
            registry.add_metrics(run_id, {"epoch": epoch, "test_acc": accuracy + 0.002 * epoch, "test_nll": 0.3,
                                          "train_elbo": -1e5 + 10 * epoch, "nearest_unit_kl_min": 800.0 / epoch,
                                          "units_at_prior": 0, "block_mi": 5.0, "block_log_group_size": 5.5})
        registry.update(run_id, status=FINISHED, result={
            "test_acc": accuracy, "test_nll": 0.3, "test_ece": 0.02, "train_elbo": -1e5,
            "train_elbo_sym": -9e4 if method == "sgm" else None, "nearest_unit_kl_min": 100.0, "units_at_prior": 0})
        ids.append(run_id)
    return ids


@pytest.mark.parametrize("epochs", [1, 12])
def test_epoch_curves_keep_fractions_in_range_and_epochs_whole(registry, epochs):
    """One epoch drew an accuracy axis up to 1.5 and epoch ticks at halves; the axes are now fixed by what the
    quantities are: accuracy and I_H / log|H| at most 1, counts from 0, epochs 1 … the planned number."""
    ids = finished_runs(registry, epochs)
    at = mnist_page(compare=",".join(map(str, ids)))
    assert not at.exception and not at.error
    curves = [chart for chart in vega_charts(at) if chart["title"] in (
        "Test accuracy", "Train ELBO", "Test NLL", "Closest two units", "Block MI on q: I_H / log|H|",
        "Units at the prior")]
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
        ("MFVI", pytest.approx(90.0)), ("SGM blocks B=2", pytest.approx(93.0))]
    [prior, *_] = [y for y in channel(vega_chart(at, "Units at the prior against width")["spec"], "y") if y["field"] == "y"]
    assert prior["scale"]["zero"] is True and prior["scale"]["domain"] == {"unionWith": [0, 1]}
    assert prior["axis"]["tickMinStep"] == 1 and prior["axis"]["format"] == "d"


def test_error_bars_against_width_stay_within_what_the_quantity_can_be(registry):
    """Mean ± std over three seeds: accuracy's bar stops at 100 %, a count's at 0, and a divergence's lower end
    below 0, off the log axis, runs down to the axis; the method's colour and dash mark its bars too."""
    ids = []
    for seed, (accuracy, nearest, at_prior) in enumerate(((1.0, 10.0, 0), (1.0, 10.0, 0), (0.5, 1000.0, 5))):
        run_id = registry.create("mnist", MnistConfig(hidden=32, seed=seed), "cpu")
        registry.update(run_id, status=FINISHED, result={
            "test_acc": accuracy, "test_nll": 0.3, "test_ece": 0.02, "train_elbo": -100.0 - seed,
            "nearest_unit_kl_min": nearest, "units_at_prior": at_prior})
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
    assert len(rules) == 1 and rules[0]["encoding"]["y"]["field"] == "high" and rules[0]["encoding"]["y2"]["field"] == "low"
    assert rules[0]["encoding"]["color"]["scale"]["domain"] == ["MFVI"]
    assert rules[0]["encoding"]["strokeDash"]["scale"]["range"] == [[1, 0]]
    assert bar("Train ELBO against width")[1]["y"] == pytest.approx(-101.0)  # no SGM run: the ELBO itself
    _, row = bar("Units at the prior against width")  # 1.67 ± 2.36
    assert row["low"] == 0.0 and row["high"] == pytest.approx(5 / 3 + 2.357023)
    chart, row = bar("Closest two units against width")  # 340 ± 466.7 nats
    assert row["y"] == pytest.approx(340.0) and row["high"] == pytest.approx(340 + 466.690476)
    assert math.isnan(row["low"]) and row["to_bottom"]
    to_bottom = [view for view in layers(chart["spec"]) if view["mark"]["type"] == "rule"
                 and view["encoding"].get("y2") == {"value": "height"}]
    assert len(to_bottom) == 1
    downloads = {button.key for button in at.get("download_button")}  # the data behind each chart
    assert {"mnist.width_acc_csv", "mnist.width_elbo_csv", "mnist.width_nearest_csv", "mnist.width_prior_csv"} <= downloads


def test_a_new_epoch_changes_only_the_curves_data(registry):
    ids = finished_runs(registry, 4, recorded=3)
    at = mnist_page(compare=",".join(map(str, ids)))
    before = [chart for chart in vega_charts(at) if chart["title"] == "Test accuracy"]
    registry.add_metrics(ids[0], {"epoch": 4, "test_acc": 0.95})  # the next epoch's metrics arrive
    at.run()
    after = [chart for chart in vega_charts(at) if chart["title"] == "Test accuracy"]
    assert len(before) == len(after) == 2
    for old, new in zip(before, after):
        assert old["spec_text"] == new["spec_text"]
        assert len(new["datasets"]["lines"]) == len(old["datasets"]["lines"]) + 1
