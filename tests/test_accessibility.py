"""Colour is never the only cue: in every chart on every page, the traces in a legend differ by
line style or marker too (colour-vision deficiencies, greyscale projectors and printouts)."""

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from vegatest import channel, player_charts, vega_charts

from symlab import cli
from symlab.labs import run_kinds
from symlab.runs.registry import Registry

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def vega_cues(spec: dict) -> dict:
    """A live (Vega-Lite) chart's legend: label -> (line dash, point shape), the cues besides colour that its
    series scales give it (views/common: every layer shares one colour, dash and shape scale per label)."""
    found = {}
    for name in ("strokeDash", "shape"):
        for definition in channel(spec, name):
            scale = definition.get("scale", {})
            for label, style in zip(scale.get("domain", []), scale.get("range", [])):
                found.setdefault(label, {})[name] = str(style)
    labels = [label for definition in channel(spec, "color") for label in definition.get("scale", {}).get("domain", [])]
    return {label: (found.get(label, {}).get("strokeDash"), found.get(label, {}).get("shape")) for label in labels}


def assert_redundant_cues(at: AppTest) -> int:
    """The charts checked (every chart is Vega-Lite: Streamlit's, or a player's played in the browser)."""
    assert not at.get("plotly_chart")
    vega = 0
    for chart in [*vega_charts(at), *player_charts(at)]:
        cues = vega_cues(chart["spec"])
        assert cues, f"{chart['title']}: no legend"
        twins = [label for label, style in cues.items() if list(cues.values()).count(style) > 1]
        assert not twins, f"{chart['title']}: {twins} differ by colour only"
        assert all(style != (None, None) for style in cues.values()), chart["title"]
        vega += 1
    return vega


def page(path: str, **query) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page(path)
    at.query_params.update(query)
    return at.run()


@pytest.mark.parametrize(
    "path, query", [("views/modes.py", {"forward": "1", "dim": "2"}), ("views/toy.py", {"alpha": "0.5"})]
)
def test_lab_charts_use_more_than_colour(path, query):
    at = page(path, **query)
    assert not at.exception
    assert assert_redundant_cues(at) >= 2  # the live charts (the player's) among them


def test_mnist_charts_use_more_than_colour(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    for hidden in (8, 16):
        for method in ("mfvi", "sgm"):
            cli.main(
                [
                    "mnist",
                    "--hidden",
                    str(hidden),
                    "--method",
                    method,
                    "--K",
                    "4",
                    "--epochs",
                    "2",
                    "--train-subset",
                    "300",
                    "--samples",
                    "2",
                    "--device",
                    "cpu",
                    "--json",
                ]
            )
    tokens = [run.token for run in Registry(run_kinds()).runs()]  # links name runs by their tokens
    at = page("views/mnist.py", compare=",".join(tokens))
    assert not at.exception
    # By width: accuracy, SGM's bound gain, closest units, units at the prior; per epoch: the live view's 2 curves
    # and 3 diagnostics, the comparison's 3 curves and 3 diagnostics.
    assert assert_redundant_cues(at) >= 4 + 11
