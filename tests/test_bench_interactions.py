"""benchmarks/bench_interactions.py: each interaction counts what the page computes for it, once."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_interactions  # noqa: E402

from symlab.labs import LABS  # noqa: E402
from symlab.labs.align import experiment as align_lab  # noqa: E402


def test_a_predictive_map_is_measured_from_its_stored_pair_not_from_a_second_training(monkeypatch):
    """The page asks for a map once the pair it draws is trained: the map's measurement must not train it
    again (it did, on its first repeat, doubling every alignment row of a single-repeat run)."""
    lab = next(lab for lab in LABS if lab.name == "align")
    (opened,) = [i for i in bench_interactions.lab_interactions(lab) if i.name.startswith("open")]
    maps = [c for c in opened.computations if c.name.startswith("align_map")]
    assert maps and all(c.prepare is not None for c in maps)
    maps[0].prepare()

    def trained_again(*args, **kwargs):
        raise AssertionError("the map trained its pair again")

    monkeypatch.setattr(align_lab, "trained_and_aligned", trained_again)
    xs, ys, probability = maps[0].run()
    assert probability.shape == (len(ys), len(xs)) and ((0 <= probability) & (probability <= 1)).all()
