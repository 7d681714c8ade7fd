"""Colour is never the only cue: in every chart on every page, the traces in a legend differ by
line style or marker too (colour-vision deficiencies, greyscale projectors and printouts)."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from symlab import cli, runs

ROOT = Path(__file__).resolve().parents[1]


def cue(trace: dict) -> tuple:
    """Everything that tells a trace from another apart from its colour and name."""
    mode = trace.get("mode", "lines")
    return (trace.get("type", "scatter"), mode, trace.get("xaxis"), trace.get("yaxis"), trace.get("fill"),
            trace.get("line", {}).get("dash", "solid") if "lines" in mode else None,
            trace.get("marker", {}).get("symbol", "circle") if "markers" in mode else None)


def charts(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def assert_redundant_cues(at: AppTest) -> int:
    count = 0
    for figure in charts(at):
        legend = [t for t in figure["data"] if t.get("name") and t.get("showlegend", True)]
        cues = [cue(t) for t in legend]
        twins = [t["name"] for t in legend if cues.count(cue(t)) > 1]
        assert not twins, f"{figure['layout'].get('title')}: {twins} differ by colour only"
        count += 1
    return count


def page(path: str, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(path)
    at.query_params.update(query)
    return at.run()


@pytest.mark.parametrize("path, query", [("pages/modes.py", {"forward": "1", "dim": "2"}),
                                         ("pages/toy.py", {"alpha": "0.5"})])
def test_lab_charts_use_more_than_colour(path, query):
    at = page(path, **query)
    assert not at.exception
    assert assert_redundant_cues(at) >= 2


def test_mnist_charts_use_more_than_colour(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    for hidden in (8, 16):
        for method in ("mfvi", "sgm"):
            cli.main(["mnist", "--hidden", str(hidden), "--method", method, "--K", "4", "--epochs", "2",
                      "--train-subset", "300", "--samples", "2", "--device", "cpu", "--json"])
    ids = [run.id for run in runs.Registry().runs()]
    at = page("pages/mnist.py", compare=",".join(map(str, ids)))
    assert not at.exception
    assert assert_redundant_cues(at) >= 4  # accuracy and bound by width, the compared runs' curves

