"""What a student reads on every page is written for a student: no "None" or NaN where a value is missing, no
column named as the code names it, no spread over a single seed, no number in exponent notation where a whole
number was meant, no grammar slips, and no "left" or "right" for charts that stack on a phone."""

import re

import pandas as pd
import pytest
from pagetest import open_page

from symlab.labs.mnist.experiment import MnistConfig
from symlab.specs.run_kind import FINISHED, RUNNING

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py

LINKS = [
    ("modes", {}),
    ("toy", {}),
    ("mnist", {}),
    ("symmetry", {}),
    ("symmetry", {"part": "proximity"}),
    ("symmetry", {"part": "quality"}),
    ("align", {}),
    ("methods", {}),
    ("methods", {"seed": "1"}),
]
WRONG = {
    "a missing value printed": re.compile(r"\b(None|NaN|nan)\b"),
    "a spread over one seed": re.compile(r"± 0\.0+ \(1[),]"),
    "a whole number in exponent notation": re.compile(r"\d\.\d+e\+\d\d"),
    "one thread in the plural": re.compile(r"\b1 threads\b"),
    "a side that moves on a phone": re.compile(r"\((left|right)\)|on the (left|right)\b|\bleft and right\b"),
}
CODE_NAME = re.compile(r"^[a-z]+(_[a-z0-9]+)+$")


def walk(node):
    yield node
    for child in (getattr(node, "children", None) or {}).values():
        yield from walk(child)


def shown(at) -> tuple[list[str], list[pd.DataFrame]]:
    """The page's text (markdown, captions, notices, labels, metric values) and its tables."""
    texts, frames = [], []
    for node in walk(at._tree):
        for attribute in ("value", "label", "body"):
            try:
                value = getattr(node, attribute, None)
            except Exception:  # an element that has no such field in this state
                continue
            if isinstance(value, pd.DataFrame):
                frames.append(value)
            elif isinstance(value, str):
                texts.append(value)
    return texts, frames


def problems(at) -> list[str]:
    texts, frames = shown(at)
    found = [
        f"{what}: …{text[max(0, m.start() - 50) : m.end() + 30]}…"
        for text in texts
        for what, pattern in WRONG.items()
        for m in pattern.finditer(text)
    ]
    for frame in frames:
        found += [
            f"a column named as the code names it: {name}" for name in frame.columns if CODE_NAME.match(str(name))
        ]
        found += [f"an empty cell (shown as None) in {name!r}" for name in frame.columns if frame[name].isna().any()]
        found += [
            f"{what} in a table: {cell}"
            for cell in frame.astype(str).to_numpy().ravel()
            for what, pattern in WRONG.items()
            if pattern.search(cell)
        ]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("name,query", LINKS, ids=[f"{name}{query or ''}" for name, query in LINKS])
def test_every_page_reads_as_written_for_a_student(name, query):
    at = open_page(name, **query)
    assert not at.exception
    assert problems(at) == []


def test_the_runs_table_shows_a_dash_for_what_a_training_run_has_not_measured_yet(registry):
    running = registry.create("mnist", MnistConfig(hidden=16), "cpu")
    registry.update(running, status=RUNNING, progress=0.3)
    done = registry.create("mnist", MnistConfig(hidden=16, seed=1), "cpu")
    registry.update(
        done,
        status=FINISHED,
        progress=1.0,
        result={"test_acc": 0.9, "test_nll": 0.3, "test_ece": 0.02, "train_elbo": -100.0},
    )
    at = open_page("mnist")
    assert not at.exception
    assert problems(at) == []
    table = next(frame for frame in shown(at)[1] if "test acc" in frame.columns)
    assert sorted(table["test acc"]) == ["0.9000", "—"]


def test_the_symmetry_table_of_a_network_names_its_columns_and_says_what_the_bound_says():
    from views.symmetry import nearest_modes_table

    rows = [
        {
            "layer": 1,
            "width": 4,
            "distance": 0.5,
            "relative_distance": 0.1,
            "bound": 3.1,
            "bound_vacuous": True,
            "below_bound": None,
            "pair": [0, 2],
        },
        {
            "layer": 2,
            "width": 1,
            "distance": float("nan"),
            "relative_distance": float("inf"),
            "bound": 1.5,
            "bound_vacuous": False,
            "below_bound": False,
            "pair": [],
        },
    ]
    table = nearest_modes_table(rows)
    assert not any(CODE_NAME.match(name) for name in table.columns) and not table.isna().any().any()
    assert table["the bound says"].tolist() == ["nothing (bound ≥ 2)", "beyond it"]
    assert table["units swapped"].tolist() == ["0 and 2", "—"] and table["‖gw − w‖"].tolist() == ["0.5", "—"]


def test_one_thread_is_one_thread(monkeypatch):
    import torch

    from symlab.runs.device import cpu_threads

    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert cpu_threads() == "CPU (1 thread)"
        torch.set_num_threads(2)
        assert cpu_threads() == "CPU (2 threads)"
    finally:
        torch.set_num_threads(threads)


def test_a_clamped_seed_is_written_in_full():
    from symlab.specs.controls import MAX_INT
    from symlab.specs.urlstate import Param, parse_query

    _, notices = parse_query({"seed": "1e30"}, [Param("seed", "int", 0, low=0, high=MAX_INT)])
    assert notices and f"clamped to {MAX_INT}." in notices[0] and "e+" not in notices[0]


def test_the_methods_page_names_the_comparison_it_shows_once():
    at = open_page("methods")
    (showing,) = [caption.value for caption in at.caption if caption.value.startswith("Showing")]
    assert showing.count("ConvNet (350 parameters)") == 1, showing
