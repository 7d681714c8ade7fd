"""AppTest checks of the Alignment page (its path player, a fragment, is covered in test_browser.py).

Results are kept in ``ui.shared_result`` for the life of the process, so a link opened twice trains once;
the tests do not depend on that for their outcome. Links other than the default use small networks.
"""

import base64
import json

import numpy as np
import pytest
from pagetest import metrics, open_page
from vegatest import vega_chart, vega_charts

from symlab import jobs, results
from symlab.labs.align import experiment as align_lab

SMALL = {"width": "16", "depth": "1", "steps": "200", "samples": "8"}
METRICS = {"loss barrier before", "loss barrier after (W₂)", "W₂(q_A, q_B) before", "W₂ after alignment"}


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def align_page(**query):
    return open_page("align", **query)


def chart_specs(at) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def array(value) -> list:
    """A figure's data as a list: Plotly writes numpy arrays as base64 ("bdata")."""
    if isinstance(value, dict) and "bdata" in value:
        flat = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"])
        shape = value.get("shape")
        return flat.reshape([int(n) for n in str(shape).split(",")] if shape else -1).tolist()
    return list(value)


def titled(at, prefix: str) -> list[dict]:
    return [spec for spec in chart_specs(at)
            if (spec["layout"].get("title") or {}).get("text", "").startswith(prefix)]


def test_default_link_shows_the_barrier_collapse():
    at = align_page()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error and not at.warning
    values = metrics(at)
    assert set(values) == METRICS
    assert float(values["loss barrier before"]) > 0.2 > 0.05 > float(values["loss barrier after (W₂)"])
    assert float(values["W₂ after alignment"]) < float(values["W₂(q_A, q_B) before"])
    # The player's charts (live, Vega-Lite): loss and accuracy paths, two predictive maps; then (Plotly)
    # distances, training curves, one assignment per layer.
    assert [chart["title"] for chart in vega_charts(at)] == ["Loss along the path", "Accuracy along the path",
                                                             "Unaligned", "W₂ alignment"]
    assert len(chart_specs(at)) == 4
    loss = vega_chart(at, "Loss along the path")
    lines = loss["datasets"]["lines"]
    assert list(dict.fromkeys(lines["series"])) == ["unaligned", "weight matching", "W₂ alignment"]
    assert all((lines["series"] == name).sum() == 21 for name in ("unaligned", "W₂ alignment"))
    assert loss["datasets"]["rules"]["value"].tolist() == [0.5]  # the player starts half way
    heat = vega_chart(at, "Unaligned")["datasets"]["heat"]
    assert len(heat) == 60 * 60 and heat["z"].between(0, 1).all()  # P(class 1) on the grid
    assert len(titled(at, "Hidden layer")) == 2
    summary = at.dataframe[0].value
    assert list(summary["path"]) == ["unaligned", "weight matching", "W₂ alignment"]
    assert summary["barrier (nats)"].iloc[0] > summary["barrier (nats)"].iloc[2]
    assert len(at.get("download_button")) == 4
    assert dict(at.query_params) == {"task": "moons", "width": "64", "depth": "2", "train": "1000",
                                     "noise": "0.15", "steps": "2000", "lr": "0.01", "prior": "1.0",
                                     "samples": "32", "order": "own", "seed": "0"}


def test_the_path_player_changes_only_its_charts_data():
    at = align_page(**SMALL, seed="2")
    before = vega_charts(at)
    at.button(key="align.step").click().run()
    after = vega_charts(at)
    assert [chart["title"] for chart in after] == ["Loss along the path", "Accuracy along the path", "Unaligned",
                                                   "W₂ alignment"]
    for old, new in zip(before, after):
        assert old["spec_text"] == new["spec_text"], old["title"]  # so Streamlit updates the chart in place
    assert after[0]["datasets"]["rules"]["value"].tolist() == [pytest.approx(0.55)]
    assert not before[2]["datasets"]["heat"].equals(after[2]["datasets"]["heat"])
    labels = [c.value for c in at.caption if c.value.startswith("t = ")]  # under each map: what its title had
    assert len(labels) == 2 and all(label.startswith("t = 0.55, loss ") for label in labels)


def test_assignment_markers_follow_the_chosen_order():
    at = align_page(**SMALL, seed="2")
    own = titled(at, "Hidden layer 1")[0]["data"][1]
    perm = array(own["x"])
    assert sorted(perm) == list(range(16)) and perm != list(range(16))
    at.radio(key="align.order").set_value("aligned").run()
    assert not at.exception and at.query_params["order"] == "aligned"
    aligned = titled(at, "Hidden layer 1")[0]
    assert array(aligned["data"][1]["x"]) == list(range(16))  # the matches run down the diagonal
    assert aligned["layout"]["xaxis"]["title"]["text"] == "unit of q_B (aligned order)"
    # Each matched cell is the smallest in its row more often than not (a good alignment).
    distances = array(aligned["data"][0]["z"])
    diagonal_smallest = sum(row[i] == min(row) for i, row in enumerate(distances))
    assert diagonal_smallest >= 8


def test_depth_sets_the_number_of_assignment_matrices():
    at = align_page(**{**SMALL, "depth": "3"})
    assert not at.exception
    assert [spec["layout"]["title"]["text"] for spec in titled(at, "Hidden layer")] == [
        f"Hidden layer {i}: assignment" for i in (1, 2, 3)]
    assert len(array(titled(at, "Distance per layer")[0]["data"][0]["x"])) == 4  # weight layers


def test_mnist_link_trains_on_digits_without_maps():
    at = align_page(task="mnist", width="16", depth="1", steps="100", train="1000", samples="4")
    assert not at.exception and not at.error
    assert [chart["title"] for chart in vega_charts(at)] == ["Loss along the path", "Accuracy along the path"]
    assert len(chart_specs(at)) == 3  # distances, training curves, one assignment (and no maps: 784 inputs)
    assert "784-16-10 MLP" in at.caption[1].value


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
    assert len(titled(at, "Hidden layer")) == 4


def test_unreadable_mnist_is_an_error_not_a_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLAB_MNIST_DIR", str(tmp_path))
    at = align_page(task="mnist", width="16", depth="1", steps="100", train="777")
    assert not at.exception
    assert len(at.error) == 1 and "MNIST" in at.error[0].value
    assert not at.metric  # nothing half-drawn


def test_diverged_training_is_an_error_not_a_traceback(monkeypatch):
    def diverge(config, data, progress=None):
        raise results.TrainingDiverged("training diverged at step 7 (posterior A: the ELBO is not finite); "
                                       "lower the learning rate")

    monkeypatch.setattr(align_lab, "train_pair", diverge)
    monkeypatch.setattr(jobs, "_shared", jobs.SharedResults(workers=0))  # trained here, where the patch holds
    at = align_page(**SMALL, seed="4242")
    assert not at.exception
    assert len(at.error) == 1 and "diverged at step 7" in at.error[0].value
    assert at.sidebar.slider  # the controls stay
