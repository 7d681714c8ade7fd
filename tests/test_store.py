"""Results kept beyond one process and one start (symlab/codec.py, symlab/store.py), computed once, in idle
time when likely (symlab/warmup.py), with honest estimates of a wait (symlab/shared_results.py)."""

import dataclasses
import json
import math
import os
import sqlite3
import threading
import time

import jobtasks
import numpy as np
import pytest
import torch

from symlab.labs import LABS
from symlab.labs.align import experiment as align_lab
from symlab.labs.symmetry import experiment as symmetry_lab
from symlab.lib import mlp
from symlab.lib.gaussian import DiagonalGaussian
from symlab.serving import codec, precomputed, shared_results, store, warmup
from symlab.specs.tasks import Cost, Task
from symlab.specs.urlstate import Param, neighbours

# ------------------------------------------------------------------------------------------ the codec


def test_results_of_every_kind_read_back_as_they_were():
    config = align_lab.AlignConfig(steps=30, width=8).validate()
    for value in (
        align_lab.trained_and_aligned(config),
        symmetry_lab.perceptron_views(symmetry_lab.PerceptronConfig(nets=40, epochs=2)),
        symmetry_lab.proximity_rows(symmetry_lab.ProximityConfig(widths=(2, 8))),
    ):
        back = codec.decode(codec.encode(value))
        assert precomputed.differences(value, back) == []
        assert type(back) is type(value)


def test_numbers_arrays_and_containers_keep_their_types_and_values():
    layout = mlp.Layout((2, 3, 1))
    q = DiagonalGaussian.from_sd(layout, np.arange(layout.n_params, dtype=np.float64), np.full(layout.n_params, 0.1))
    value = {
        "nan": math.nan,
        "inf": -math.inf,
        "big": 2**70,
        "scalar": np.float32(1.5),
        "int": np.int64(3),
        "flag": np.bool_(True),
        (1, "key"): (1, 2.0, None),
        4: [True, "text"],
        "tensor": torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "scalar_tensor": torch.tensor(2.5),
        "bools": np.array([True, False]),
        "empty": np.zeros((0, 3)),
        "posterior": q,
    }
    back = codec.decode(codec.encode(value))
    assert math.isnan(back["nan"]) and back["inf"] == -math.inf and back["big"] == 2**70
    assert type(back["scalar"]) is np.float32 and type(back["int"]) is np.int64 and type(back["flag"]) is np.bool_
    assert back[(1, "key")] == (1, 2.0, None) and back[4] == [True, "text"]
    assert torch.equal(back["tensor"], value["tensor"]) and back["tensor"].dtype == torch.float32
    assert back["scalar_tensor"].shape == () and back["scalar_tensor"].item() == 2.5
    assert back["bools"].dtype == bool and back["empty"].shape == (0, 3)
    # The instance as it was, cached values included: σ exactly as given, not exp(log σ).
    assert back["posterior"].__dict__.keys() == q.__dict__.keys()
    np.testing.assert_array_equal(back["posterior"].sd, q.sd)


@pytest.mark.parametrize(
    "value",
    [
        lambda: 1,
        object(),
        np.array([object()]),
        threading.Lock(),
        dataclasses.make_dataclass("Foreign", [("x", int)])(1),
    ],
)
def test_anything_but_data_is_refused_when_writing(value):
    with pytest.raises(codec.CodecError):
        codec.encode(value)


def forged(tree) -> bytes:
    document = json.dumps({"tree": tree, "offsets": [], "size": 0}).encode()
    return codec.MAGIC + codec._HEADER.pack(len(document)) + document


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "not a SymLab result"),
        (b"\x80\x04pickle", "not a SymLab result"),
        (forged({"dataclass": "os:system", "attributes": {}}), "not a SymLab result type"),
        (forged({"dataclass": "builtins:object", "attributes": {}}), "not a SymLab result type"),
        (forged({"dataclass": "symlab.serving.store:describe", "attributes": {}}), "not a SymLab result type"),
        (forged({"ndarray": "|O", "shape": [1], "blob": 0}), "objects"),
        (forged({"tensor": "manual_seed", "shape": [1], "blob": 0}), "unknown tensor type"),
    ],
)
def test_bytes_that_are_not_a_result_are_refused_when_reading(data, message):
    with pytest.raises(codec.CodecError, match=message):
        codec.decode(data)


def test_a_truncated_result_is_refused():
    data = codec.encode({"x": np.arange(100.0)})
    for cut in (len(data) - 1, len(data) // 2, 20):
        with pytest.raises(codec.CodecError):
            codec.decode(data[:cut])


# ------------------------------------------------------------------------------------------ the store


@pytest.fixture
def result_store(tmp_path):
    return store.ResultStore(tmp_path)


KEY = ("proximity", symmetry_lab.ProximityConfig(widths=(2, 4)))


def test_a_stored_result_outlives_its_store_object(tmp_path, result_store):
    assert result_store.get(KEY) is None and KEY not in result_store
    assert result_store.put(KEY, [{"width": 2}], seconds=0.5)
    restarted = store.ResultStore(tmp_path)  # a new server process on the same runs directory
    assert restarted.get(KEY) == [{"width": 2}] and KEY in restarted
    assert restarted.measured_seconds("proximity") == [0.5]


def test_a_corrupt_entry_is_deleted_and_reads_as_absent(tmp_path, result_store):
    result_store.put(KEY, {"x": np.arange(10.0)})
    with sqlite3.connect(tmp_path / store.FILE_NAME) as connection:
        connection.execute("UPDATE results SET payload = substr(payload, 1, length(payload) - 3)")
    assert store.ResultStore(tmp_path).get(KEY, "absent") == "absent"
    assert KEY not in result_store


def test_a_result_of_other_code_is_never_read(tmp_path, result_store):
    result_store.put(KEY, "old code's")
    other = store.ResultStore(tmp_path)
    other.version = "another version"
    assert other.get(KEY) is None


def test_the_version_is_a_digest_of_the_computations_sources(tmp_path):
    for name in (
        "lib/mlp.py",
        "labs/toy/experiment.py",
        "specs/controls.py",
        "specs/results.py",
        "serving/codec.py",
        "cli/toy.py",
    ):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(f"# {name}\n")
    before = store.source_digest(tmp_path)
    (tmp_path / "cli/toy.py").write_text("# not a computation\n")
    assert store.source_digest(tmp_path) == before
    (tmp_path / "labs/toy/experiment.py").write_text("STEPS = 2001\n")
    assert store.source_digest(tmp_path) != before
    assert store.computation_version() == store.source_digest(
        store.Path(store.__file__).resolve().parents[1], f"torch {torch.__version__} numpy {np.__version__}"
    )


def test_the_least_recently_used_go_past_the_cap(tmp_path):
    small = store.ResultStore(tmp_path, max_bytes=3 * len(codec.encode(np.zeros(1000))))
    keys = [("proximity", symmetry_lab.ProximityConfig(widths=(2, 2 + i))) for i in range(5)]
    for key in keys:
        small.put(key, np.zeros(1000))
        time.sleep(0.01)
    assert small.total_bytes() <= small.max_bytes
    assert keys[-1] in small and keys[0] not in small


def test_a_write_checks_the_stores_size_without_reading_its_payloads(tmp_path):
    """Every write sums the stored sizes, and eviction walks the results by last use: both from an index, not by
    reading the table, whose rows hold the payloads before their sizes (180 ms a write on a 470 MB store). A store
    made before the index had one gets it on its first connection."""
    old = sqlite3.connect(tmp_path / store.FILE_NAME)
    old.execute(store._SCHEMA.format(bytes="BLOB", real="REAL"))
    old.close()
    kept = store.ResultStore(tmp_path)
    assert kept.put(KEY, np.zeros(1000)) and kept.total_bytes() > 0
    connection = sqlite3.connect(tmp_path / store.FILE_NAME)
    plans = [
        " ".join(str(part) for row in connection.execute(f"EXPLAIN QUERY PLAN {query}") for part in row)
        for query in ("SELECT COALESCE(SUM(size), 0) FROM results", "SELECT key, size FROM results ORDER BY used")
    ]
    assert all("COVERING INDEX results_by_use" in plan for plan in plans), plans


def test_an_unreachable_database_reads_as_absent_and_refuses_writes(tmp_path, caplog):
    unreachable = store.ResultStore(tmp_path, url="postgresql://nobody@127.0.0.1:1/none")
    assert unreachable.get(KEY, "absent") == "absent"
    assert not unreachable.put(KEY, 1)
    assert "unreadable" in caplog.text and "unwritable" in caplog.text


def test_a_result_the_codec_refuses_is_not_stored(result_store, caplog):
    assert not result_store.put(KEY, lambda: 1)
    assert "not stored" in caplog.text and KEY not in result_store


def test_the_store_on_postgresql(postgres_server_url, tmp_path):
    from postgres import fresh_database

    url = fresh_database(postgres_server_url, "results_store")
    first, second = store.ResultStore(tmp_path / "a", url=url), store.ResultStore(tmp_path / "b", url=url)
    assert first.put(KEY, {"x": np.arange(3.0)}, seconds=1.25)
    np.testing.assert_array_equal(second.get(KEY)["x"], np.arange(3.0))  # another server, another runs directory
    assert second.measured_seconds("proximity") == [1.25] and second.keys_present([KEY]) == {KEY}


# ------------------------------------------------------------------------------------------ shared results


def test_a_result_computed_once_is_served_again_after_a_restart(tmp_path):
    calls = []
    first = shared_results.SharedResults(workers=0, store=store.ResultStore(tmp_path))
    assert first.compute(KEY, lambda: calls.append(1) or "value") == "value"
    restarted = shared_results.SharedResults(workers=0, store=store.ResultStore(tmp_path))
    assert restarted.compute(KEY, lambda: calls.append(1) or "other") == "value" and calls == [1]
    assert restarted.compute(("volatile",), lambda: "made", persist=False) == "made"
    assert ("volatile",) not in restarted.store


def test_a_worker_writes_its_result_to_the_store(tmp_path):
    results = shared_results.SharedResults(workers=1, store=store.ResultStore(tmp_path))
    try:
        task = Task(("square", 9), jobtasks.square, (9,))
        assert results.submit(task, "w").future.result(timeout=120) == 81
    finally:
        results.shutdown()
    assert store.ResultStore(tmp_path).get(("square", 9)) == 81
    again = shared_results.SharedResults(workers=1, store=store.ResultStore(tmp_path))
    assert again.submit(task, "w").future.result(timeout=5) == 81 and again.tasks_submitted == 0


def test_a_queued_job_whose_page_stopped_asking_is_dropped(monkeypatch):
    monkeypatch.setattr(shared_results, "STALE_SECONDS", 0.2)
    results = shared_results.SharedResults(workers=1)
    try:
        busy = results.submit(Task(("busy",), jobtasks.counted, (3, 0.3)), "a", keep=True)
        left = results.submit(Task(("square", 3), jobtasks.square, (3,)), "b")
        staying = results.submit(Task(("square", 4), jobtasks.square, (4,)), "c")
        deadline = time.monotonic() + 60
        while not busy.future.done():  # "c" keeps asking, as its waiting panel does; "b" went away
            results.touch(staying, "c")
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert staying.future.result(timeout=60) == 16
        assert left.future.cancelled() and left.dropped == "left" and staying.dropped is None
    finally:
        results.shutdown()


def test_the_wait_adds_the_work_ahead_at_the_measured_efficiency():
    results = shared_results.SharedResults(workers=1)
    results._rates = shared_results.Rates(matmul_flops=1e9, elementwise=1e9, normals=1e6)
    first = Task(("one",), jobtasks.square, (1,), cost=Cost(matmul_flops=2e9))  # floor 2 s
    second = Task(("two",), jobtasks.square, (2,), cost=Cost(normals=1e6))  # floor 1 s
    with results._lock:  # queued, nothing running: the pool is stopped for the test
        jobs_ = []
        for task in (first, second):
            job = results._new_job(task.key, task.label, shared_results.concurrent.futures.Future())
            job.task = task
            results._queue.append(job)
            jobs_.append(job)
    assert results.wait(jobs_[0]) == shared_results.Wait(0, 2.0 * shared_results.DEFAULT_EFFICIENCY)
    assert results.wait(jobs_[1]) == shared_results.Wait(1, 3.0 * shared_results.DEFAULT_EFFICIENCY)
    results._learn(first, 4.0)  # measured 4 s against a 2 s floor: its kind's efficiency becomes 2
    assert results.wait(jobs_[1]).seconds == pytest.approx(2.0 * 2 + 1.0 * shared_results.DEFAULT_EFFICIENCY)
    assert results.wait(shared_results.Job(("unknown",), "", None, task=Task(("u",), jobtasks.square))).seconds is None


def test_a_tasks_cost_is_its_arithmetic():
    config = align_lab.AlignConfig().validate()
    cost = align_lab.training_cost(config)
    sizes, steps, batch = config.sizes, config.steps, config.batch
    layers = [a * b for a, b in zip(sizes[:-1], sizes[1:])]
    assert cost.matmul_flops == steps * 2 * batch * 2 * (2 * sum(layers) + sum(layers[1:]))
    assert cost.normals == steps * 2 * mlp.Layout(sizes).n_params
    report = align_lab.report_cost(config, distinct_ends=2)
    assert report.matmul_flops == (1 + 2 * 20) * config.samples * align_lab.MOONS_TEST * 2 * sum(layers)


# ------------------------------------------------------------------------------------------ idle time


def test_neighbours_are_one_step_of_one_control_within_its_range():
    specs = (
        Param("n", "int", 1, 1, 3),
        Param("x", "float", 0.5, 0.0, 1.0, step=0.25),
        Param("c", "choice", "b", choices=("a", "b", "c")),
        Param("on", "bool", False),
        Param("free", "float", 0.3, 0.0, 1.0),
    )
    values = {"n": 1, "x": 1.0, "c": "b", "on": False, "free": 0.3}
    found = neighbours(values, specs)
    moved = [{k: v for k, v in state.items() if v != values[k]} for state in found]
    assert moved == [{"n": 2}, {"x": 0.75}, {"c": "a"}, {"c": "c"}, {"on": True}]


def test_likely_tasks_are_every_preset_and_its_neighbours_once_defaults_first():
    tasks = warmup.likely_tasks()
    keys = [task.key for task in tasks]
    assert len(keys) == len(set(keys))
    defaults = [task.key for task in precomputed.default_tasks()]
    assert keys[: len(defaults)] == defaults or set(defaults) <= set(keys[:20])
    for lab in (lab for lab in LABS if lab.tasks):
        default = lab.default_values()
        presets = lab.page_presets()
        for name in presets:
            state = {**default, **presets.state(name, lab.page_params())}
            assert {task.key for task in lab.page_tasks(state)} <= set(keys)
        width = {**default, "width": default.get("width", 0) + 1} if "width" in default else None
        if width is not None:
            assert {task.key for task in lab.page_tasks(width)} <= set(keys)


def test_idle_time_fills_the_store_in_a_process_of_the_idle_class(tmp_path, monkeypatch):
    monkeypatch.setattr(warmup, "IDLE_AFTER_SECONDS", 0.2)
    results = shared_results.SharedResults(workers=1, store=store.ResultStore(tmp_path))
    monkeypatch.setattr(shared_results, "_shared", results)
    tasks = [Task(("scheduling",), jobtasks.scheduling), Task(("square", 5), jobtasks.square, (5,))]
    try:
        busy = results.submit(Task(("busy",), jobtasks.counted, (2, 0.4)), "person", keep=True)
        stop = threading.Event()
        started = time.monotonic()
        assert warmup.precompute_in_idle_time(stop, tasks) == 2
        assert busy.future.done() and time.monotonic() - started >= 0.8  # it waited for the person's job
    finally:
        results.shutdown()
    scheduler, niceness = results.store.get(("scheduling",))
    assert scheduler == os.SCHED_IDLE and niceness == shared_results.IDLE_NICENESS
    assert results.store.get(("square", 5)) == 25
    assert warmup.precompute_in_idle_time(threading.Event(), tasks) == 0  # stored: nothing more to do
