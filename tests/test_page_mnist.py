"""AppTest checks of the MNIST page (its live fragment's first render included)."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from vegatest import channel, vega_charts

from symlab import controls, runs
from symlab.labs.mnist.experiment import MnistConfig

PAGE = str(Path(__file__).resolve().parents[1] / "pages" / "mnist.py")


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    return runs.Registry()


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
    limits = runs.RunLimits()
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
    assert at.number_input(key="mnist.hidden").value == runs.RunLimits().max_hidden


def test_launching_a_pair_queues_two_runs_with_the_same_seed(registry):
    at = mnist_page(hidden="8", epochs="1", subset="500", samples="2", seed="7")
    at.button(key="mnist.launch_pair").click().run()
    assert not at.exception and not at.error
    launched = registry.runs()
    assert [(r.config.method, r.config.seed, r.config.hidden) for r in launched] == [("mfvi", 7, 8), ("sgm", 7, 8)]
    assert len(at.get("progress")) >= 1  # the live view shows them right away
    for run in launched:
        runs.cancel(registry, run.id)


def test_results_table_and_comparison_from_finished_runs(registry):
    ids = []
    for method, seed, accuracy in (("mfvi", 0, 0.9), ("mfvi", 1, 0.92), ("sgm", 0, 0.93)):
        run_id = registry.create(MnistConfig(hidden=32, method=method, K=4, seed=seed), "cpu")
        registry.update(run_id, status=runs.FINISHED, result={"test_acc": accuracy, "test_nll": 0.3, "test_ece": 0.02,
                                                              "train_elbo": -100.0, "train_elbo_sym": -98.6
                                                              if method == "sgm" else None})
        registry.add_metrics(run_id, {"epoch": 1, "test_acc": accuracy, "test_nll": 0.3, "train_elbo": -100.0})
        ids.append(run_id)
    at = mnist_page(compare=f"{ids[0]},{ids[2]}")
    assert not at.exception
    table = at.dataframe[-1].value
    assert list(table.columns) == ["width", "MFVI", "SGM K=4"]
    assert table.iloc[0]["MFVI"] == "91.00 ± 1.00 (2)" and table.iloc[0]["SGM K=4"] == "93.00 ± 0.00 (1)"
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
    runs.cancel(registry, run.id)


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
            run_id = registry.create(MnistConfig(hidden=hidden, method=method, mi="blocks"), "cpu")
            result = {"test_acc": 0.9, "test_nll": 0.3, "test_ece": 0.02, "train_elbo": -100.0,
                      "train_elbo_sym": -90.0 if method == "sgm" else None, "nearest_unit_kl_min": nearest,
                      "units_at_prior": 1, "mi_active": 0.25}
            registry.update(run_id, status=runs.FINISHED, result=result)
            registry.add_metrics(run_id, {"epoch": 1, "test_acc": 0.9, "test_nll": 0.3, "train_elbo": -100.0,
                                          "nearest_unit_kl_min": nearest, "units_at_prior": 1, "block_mi": 5.0,
                                          "block_log_group_size": 5.5})
            ids.append(run_id)
    old = registry.create(MnistConfig(hidden=64), "cpu")
    registry.update(old, status=runs.FINISHED, result={"test_acc": 0.9, "test_nll": 0.3, "test_ece": 0.02,
                                                       "train_elbo": -100.0, "infonce_active": 0.0})
    registry.add_metrics(old, {"epoch": 1, "test_acc": 0.9, "test_nll": 0.3, "train_elbo": -100.0})
    at = mnist_page(compare=f"{ids[0]},{old}")
    assert not at.exception and not at.error
    charts = {chart.proto.id for chart in at.get("plotly_chart")}
    assert charts  # rendered
    titles = " ".join(chart.proto.spec for chart in at.get("plotly_chart"))
    for title in ("Closest two units against width", "Units at the prior against width"):
        assert title in titles
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
        run_id = registry.create(MnistConfig(hidden=32, method=method, mi="blocks", epochs=epochs), "cpu")
        for epoch in range(1, (recorded or epochs) + 1):
            registry.add_metrics(run_id, {"epoch": epoch, "test_acc": accuracy + 0.002 * epoch, "test_nll": 0.3,
                                          "train_elbo": -1e5 + 10 * epoch, "nearest_unit_kl_min": 800.0 / epoch,
                                          "units_at_prior": 0, "block_mi": 5.0, "block_log_group_size": 5.5})
        registry.update(run_id, status=runs.FINISHED, result={
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
    # Against width (static, Plotly): accuracy in per cent stays within [0, 100], counts from 0 in whole units.
    figures = {json.loads(chart.proto.spec)["layout"]["title"]["text"]: json.loads(chart.proto.spec)
               for chart in at.get("plotly_chart")}
    accuracy = figures["Accuracy against width (± std)"]["layout"]["yaxis"]
    assert accuracy["autorangeoptions"] == {"clipmin": 0, "clipmax": 100}
    prior = figures["Units at the prior against width"]["layout"]["yaxis"]
    assert prior["rangemode"] == "nonnegative" and prior["tickformat"] == "d" and prior["dtick"] == 1


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
