"""The default links' shipped results (symlab.serving.precomputed): each matches a recomputation, a starting
server stores them, and the pages then train nothing; a stale or broken file is computed instead."""

import dataclasses
import logging
import lzma

import numpy as np
import pytest
import torch
from pagetest import open_page

from symlab.labs import LABS
from symlab.labs.align import experiment as align_lab
from symlab.serving import codec, precomputed, warmup
from symlab.specs.tasks import Task, kind_of

TASKS = precomputed.default_tasks()


@pytest.fixture
def shipped_elsewhere(monkeypatch, tmp_path):
    """precomputed's directory moved to a temporary one."""
    monkeypatch.setattr(precomputed, "DIRECTORY", tmp_path)
    return tmp_path


def test_every_default_task_ships_its_result():
    assert {kind_of(task.key) for task in TASKS} == {"align", "align_maps", "perceptrons"}
    for task in TASKS:
        assert precomputed.path_of(task).exists(), f"run python -m symlab.serving.precomputed to write {task.key[0]}"


@pytest.mark.parametrize("task", TASKS, ids=precomputed._name)
def test_shipped_result_matches_a_recomputation(task):
    """Value for value in the arithmetic the file was computed in; in another (other vector units: a noisy
    training takes another path), by its structure."""
    stored = precomputed.read(task)
    assert stored is not None, "the shipped file is missing, unreadable or for another default"
    same = precomputed.arithmetic_of(task) == precomputed.arithmetic()
    assert precomputed.differences(stored, precomputed.compute(task), same_arithmetic=same) == [], (
        "stale: rewrite the shipped results with python -m symlab.serving.precomputed"
    )


@dataclasses.dataclass
class Trained:
    weights: torch.Tensor
    curve: np.ndarray
    stages: dict
    seconds: float
    name: str = "q"


def trained(**changes) -> Trained:
    value = Trained(torch.arange(6.0).reshape(2, 3), np.linspace(0, 1, 5), {"raw": [np.ones(3), 2.0]}, 1.5)
    return dataclasses.replace(value, **changes)


def test_differences_finds_each_change_and_ignores_timings_and_rounding():
    reference = trained()
    assert precomputed.differences(reference, trained(seconds=9.0)) == []
    assert precomputed.differences(reference, trained(curve=np.linspace(0, 1, 5) * (1 + 1e-6))) == []
    assert precomputed.differences(reference, trained(weights=torch.arange(6.0).reshape(3, 2))) == [
        "result.weights: float32[2, 3] stored, float32[3, 2] recomputed"
    ]
    moved = torch.arange(6.0).reshape(2, 3)
    moved[1, 2] += 0.5
    assert precomputed.differences(reference, trained(weights=moved)) == [
        "result.weights: 1 of 6 values differ, largest by 0.5"
    ]
    assert precomputed.differences(reference, trained(stages={"raw": [np.ones(3), 2.1]})) == [
        "result.stages['raw'][1]: 2.0 stored, 2.1 recomputed"
    ]
    assert precomputed.differences(reference, trained(stages={"sorted": []})) == [
        "result.stages: keys ['raw'] stored, ['sorted'] recomputed"
    ]
    assert precomputed.differences(reference, trained(name="p")) == ["result.name: 'q' stored, 'p' recomputed"]
    assert precomputed.differences((1, 2), (1, 2, 3)) == ["result: 2 items stored, 3 recomputed"]


def test_between_arithmetics_a_result_is_compared_by_its_structure():
    reference = trained()
    moved = trained(weights=torch.arange(6.0).reshape(2, 3) + 0.4, curve=np.linspace(0, 1, 5) * 1.1, name="p")
    assert precomputed.differences(reference, moved, same_arithmetic=False) == []
    assert len(precomputed.differences(reference, moved)) == 3  # the same arithmetic: value for value
    assert precomputed.differences(reference, trained(weights=torch.zeros(3, 2)), same_arithmetic=False) == [
        "result.weights: float32[2, 3] stored, float32[3, 2] recomputed"
    ]
    assert precomputed.differences(reference, trained(stages={"sorted": []}), same_arithmetic=False) == [
        "result.stages: keys ['raw'] stored, ['sorted'] recomputed"
    ]
    assert precomputed.differences(
        reference, trained(curve=np.linspace(0, 1, 5).astype(np.float32)), same_arithmetic=False
    ) == ["result.curve: float64[5] stored, float32[5] recomputed"]


def test_a_written_file_says_in_which_arithmetic(shipped_elsewhere):
    task = Task(("kind", 1), abs)
    precomputed.write([(task, dataclasses.asdict(trained()))])
    assert precomputed.arithmetic_of(task) == precomputed.arithmetic()
    assert precomputed.arithmetic().startswith("torch ")


def test_a_stored_result_is_read_back_for_its_key_only(shipped_elsewhere):
    task, other, absent = (Task(("kind", number), abs) for number in (1, 2, 3))
    results = {name: dataclasses.asdict(trained(name=name)) for name in ("q", "p")}  # the codec takes SymLab's types
    assert precomputed.write([(task, results["q"]), (other, results["p"])]) == [precomputed.path_of(task)]
    assert precomputed.path_of(task).name == "kind.result.xz"
    assert precomputed.differences(precomputed.read(task), results["q"]) == []
    assert precomputed.read(other)["name"] == "p"  # one file per kind, each key its own result
    assert precomputed.read(absent) is None  # the same kind for another default
    assert precomputed.read(Task(("missing", 1), abs)) is None


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not xz at all",
        lzma.compress(b"not a result"),
        lzma.compress(codec.encode(["no", "key"])),
        lzma.compress(codec.encode({"a": 1})),
        lzma.compress(codec.encode([{"key": 1}])),
        lzma.compress(codec.encode([{"key": ("kind", 1), "value": 1}]))[:-20],
    ],
)
def test_a_broken_file_is_computed_instead(shipped_elsewhere, caplog, content):
    task = Task(("kind", 1), abs)
    precomputed.path_of(task).write_bytes(content)
    with caplog.at_level(logging.INFO, logger="symlab.serving.precomputed"):
        assert precomputed.read(task) is None
    assert "computing it instead" in caplog.text


def test_the_shipped_files_hold_data_not_pickles():
    """The shipped results read back through the codec alone: JSON and raw arrays, never a pickle."""
    for path in {precomputed.path_of(task) for task in TASKS}:
        data = lzma.decompress(path.read_bytes())
        assert data.startswith(codec.MAGIC) and b"\x80\x05" not in data[:2], path.name
        assert isinstance(codec.decode(data), list)
    assert not list(precomputed.DIRECTORY.glob("*.pickle*"))


def test_a_started_server_trains_nothing_for_the_default_links(fresh_results, monkeypatch):
    warmup.store_shipped_results()
    assert all(task.key in fresh_results for task in TASKS)

    def not_shipped(*args):
        raise AssertionError("the page computed a map the server had stored")

    monkeypatch.setattr(align_lab, "path_map", not_shipped)
    for lab in (lab for lab in LABS if lab.tasks and lab.ships_defaults):
        at = open_page(lab.name)
        assert not at.exception and not at.error
    assert fresh_results.tasks_submitted == 0
