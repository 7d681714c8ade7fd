"""AppTest checks of the pages' 3-D landscapes (switched on by ``surface=true`` in the link): what each page hands
the browser, from the same functions the command lines write; drawing, turning and redrawing in place are
test_browser.py's."""

import json

import numpy as np
import pytest
from pagetest import open_page, tell
from test_surfaces import decoded

from symlab.labs.align import experiment as align_lab
from symlab.labs.modes import experiment as modes
from symlab.labs.toy import experiment as toy
from views.common.animation import sent as player_document

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def walk(node, found):
    for child in getattr(node, "children", {}).values():
        found.append(child)
        walk(child, found)
    return found


def landscapes(at) -> list[dict]:
    """The payload of every 3-D view on the page (the component's JSON)."""
    return [
        json.loads(element.proto.json)
        for element in walk(at._tree, [])
        if type(element).__name__ == "UnknownElement"
        and element.type == "bidi_component"
        and element.proto.component_name == "symlab_surface"
    ]


def test_no_page_loads_plotly_by_default():
    for page in ("toy", "modes", "align"):
        at = open_page(page)
        assert not at.exception and landscapes(at) == [], page


def test_the_toy_landscape_is_the_exact_posterior_with_both_fits():
    at = open_page("toy", surface="true")
    assert not at.exception, [e.value for e in at.exception]
    (payload,) = landscapes(at)
    surface, *lines = payload["figure"]["data"]
    expected = toy.posterior_surface(toy.exact_view(toy.ToyConfig())[2])
    assert decoded(surface["z"]) == pytest.approx(expected.drawn().astype(np.float32))
    assert [line["name"] for line in lines] == [
        "equivalent modes",
        "MFVI: 1 and 2 sd",
        "SGM: 1 and 2 sd",
    ]
    assert {line["line"]["dash"] for line in lines[1:]} == {"dash", "dot"}  # a second cue besides colour
    assert payload["chunk"].startswith("PlotlyChart.") and payload["alt"]
    assert any(button.label == "Landscape (CSV)" for button in at.get("download_button"))


def test_the_toy_landscape_follows_training():
    at = open_page("toy", surface="true")
    before = landscapes(at)[0]["figure"]["data"]
    # The live charts' player, stopped at frame 1 (Step), as a browser tells it.
    [player] = [e for e in at.get("bidi_component") if e.proto.component_name == "symlab_player"]
    at.session_state["toy.player"] = {
        "position": {"id": player_document(player.proto)["id"], "frame": 1, "playing": False}
    }
    at.run()
    after = landscapes(at)[0]["figure"]["data"]
    assert after[0] == before[0]  # the same landscape
    assert after[2]["x"] != before[2]["x"]  # MFVI's outlines moved


def test_the_modes_landscape_carries_adams_path_to_the_step_shown():
    at = open_page("modes", surface="true", alpha="6")
    assert not at.exception, [e.value for e in at.exception]
    (payload,) = landscapes(at)
    surface, trail, now, optimum = payload["figure"]["data"]
    assert decoded(surface["z"]) == pytest.approx(modes.kl_landscape(6.0, 1.0).drawn().astype(np.float32))
    assert len(trail["x"]) == 1 and now["x"] == [0.0]
    at = tell(at, "modes.player", 1)  # the browser's player stopped at frame 1 (Step)
    trail, now = landscapes(at)[0]["figure"]["data"][1:3]
    path = modes.optimisation_path(6.0, 1.0)
    assert now["x"] == [pytest.approx(path.mean[10], abs=1e-5)] and len(trail["x"]) == 2


def test_the_align_landscape_is_the_loss_plane_of_the_pair_shown():
    query = {"width": "8", "depth": "1", "steps": "150", "samples": "4", "seed": "2"}
    at = open_page("align", surface="true", **query)
    assert not at.exception, [e.value for e in at.exception]
    (payload,) = landscapes(at)
    config = align_lab.AlignConfig(width=8, depth=1, steps=150, samples=4, seed=2).validate()
    expected = align_lab.loss_plane_computed(config)
    surface, before, w2, ends = payload["figure"]["data"]
    assert decoded(surface["z"]) == pytest.approx(expected.z.astype(np.float32), rel=1e-5)
    assert before["name"] == "q_A → q_B, unaligned" and ends["marker"]["symbol"] == "square"
