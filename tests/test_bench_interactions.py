"""benchmarks/bench_interactions.py: each interaction counts what the page computes for it, once."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_interactions  # noqa: E402

from symlab.labs import LABS  # noqa: E402
from symlab.labs.align import experiment as align_lab  # noqa: E402


def test_the_predictive_maps_are_measured_from_their_stored_pair_not_from_a_second_training(monkeypatch):
    """The page asks for the path's maps once the pair it draws is trained: their measurement must not train it
    again (it did, on its first repeat, doubling every alignment row of a single-repeat run)."""
    lab = next(lab for lab in LABS if lab.name == "align")
    (opened,) = [i for i in bench_interactions.lab_interactions(lab) if i.name.startswith("open")]
    maps = [c for c in opened.computations if c.name.startswith("align_maps")]
    assert maps and all(c.prepare is not None for c in maps)
    maps[0].prepare()

    def trained_again(*args, **kwargs):
        raise AssertionError("the map trained its pair again")

    monkeypatch.setattr(align_lab, "trained_and_aligned", trained_again)
    computed = maps[0].run()
    for probability in computed.probability.values():
        assert probability.shape[1:] == (len(computed.ys), len(computed.xs))
        assert ((0 <= probability) & (probability <= 1)).all()


def test_switching_the_alignment_landscape_on_costs_the_plane_alone(monkeypatch):
    """From the default link, whose pair is stored, the 3-D switch computes the plane and nothing else, from the
    stored pair; its floor counts the plane's grid as computed."""
    lab = next(lab for lab in LABS if lab.name == "align")
    (switched,) = [i for i in bench_interactions.lab_interactions(lab) if i.name == "surface → True"]
    (plane,) = switched.computations
    assert plane.name.startswith("align_plane") and plane.prepare is not None
    plane.prepare()
    monkeypatch.setattr(align_lab, "trained_and_aligned", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    surface = plane.run()
    cost = plane.cost(surface)
    config = lab.page_tasks(lab.default_values())[0].key[1]
    assert cost.matmul_flops == align_lab.plane_cost(config, surface.z.size).matmul_flops > 0
