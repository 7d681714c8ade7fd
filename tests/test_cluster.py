"""MNIST runs on a Ray cluster: a local cluster of several nodes (ray.cluster_utils.Cluster; the head
takes no runs, so that a node can die without taking the cluster with it), with the run registry on
SQLite and on a throwaway PostgreSQL server."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import ray
from mnist_runs import TINY, small_sweep
from ray.cluster_utils import Cluster
from streamlit.testing.v1 import AppTest

from symlab import cli
from symlab.labs import run_kinds
from symlab.labs.mnist.experiment import MnistConfig
from symlab.runs import supervisor
from symlab.runs.registry import Registry
from symlab.specs.run_kind import (
    CANCELLED,
    FAILED,
    FINISHED,
    INTERRUPTED,
    QUEUED,
    RUNNING,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
LONG = dict(hidden=256, epochs=8, train_subset=20000, samples=2, init_sd=1e-3, device="cpu")
UNFINISHED = dict(LONG, epochs=100)  # cancelled long before its end (an epoch takes ~0.5 s)


@pytest.fixture
def cluster(tmp_path, monkeypatch, database):
    """Two worker nodes of one CPU each; this process is the cluster's driver."""
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    for _ in range(2):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, namespace="symlab", log_to_driver=False)
    cluster.wait_for_nodes()
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def wait_for(registry, run_id, condition, timeout=180):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        supervisor.reap(registry)  # what the page does on every refresh, and the command line while it waits
        run = registry.get(run_id)
        if condition(run):
            return run
        time.sleep(0.3)
    raise AssertionError(f"run #{run_id} never got there: {registry.get(run_id)}")


def ray_node(run) -> str:
    return run.node.split("Ray node ")[1].rstrip(")")


def test_a_sweep_runs_on_both_nodes_of_the_cluster(cluster, capsys):
    assert cli.main([*small_sweep(seeds=1), "--executor", "ray", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(r["status"], r["executor"]) for r in report["runs"]] == [("finished", "ray")] * 4
    # Two runs fit at once, one per node: the first two placed are on different nodes.
    assert len({r["node"] for r in report["runs"]}) == 2
    assert {(row["hidden"], row["label"]) for row in report["table"]} == {
        (8, "MFVI"),
        (16, "MFVI"),
        (8, "SGM K=4"),
        (16, "SGM K=4"),
    }
    registry = Registry(run_kinds())
    assert all(run.node and run.executor == "ray" for run in registry.runs())


def test_the_symmetrisation_study_is_one_sweep_on_ray(cluster, monkeypatch, tmp_path):
    """--executor ray: the study's runs are registered runs on the cluster, recorded as local ones are."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import study_symmetrisation as study

    monkeypatch.setattr(study, "WIDTHS", {500: (8,)})
    monkeypatch.setattr(study, "STEPS", {500: 100})
    monkeypatch.setattr(study, "SGM_VARIANTS", ("blocks2",))
    out = tmp_path / "study.jsonl"
    assert study.main(["--sizes", "500", "--seeds", "1", "--executor", "ray", "--out", str(out)]) == 0
    entries = study.load(out)
    assert sorted(entries) == ["blocks2|500|8|0.05|0", "mfvi|500|8|0.05|0"]
    assert all(e["status"] == "finished" and e["history"][-1]["test_acc"] > 0.1 for e in entries.values())
    registry = Registry(run_kinds())
    assert {run.executor for run in registry.runs()} == {"ray"} and len(registry.runs()) == 2
    [row] = study.summarise(entries)["rows"]
    assert row["variant"] == "blocks2" and row["seeds"] == 1


def test_a_run_lost_with_its_node_is_interrupted_and_resumes_on_another(cluster):
    registry = Registry(run_kinds())
    run_id = supervisor.submit(registry, "mnist", MnistConfig(**LONG), executor="ray")
    first = wait_for(registry, run_id, lambda r: r.epoch >= 2)
    [doomed] = [node for node in cluster.worker_nodes if node.node_id.startswith(ray_node(first))]
    cluster.remove_node(doomed)
    lost = wait_for(registry, run_id, lambda r: r.status == INTERRUPTED, timeout=120)
    assert f"on {first.node}" in lost.message and "resume continues" in lost.message
    supervisor.resume(registry, run_id)
    done = wait_for(registry, run_id, lambda r: r.status == FINISHED, timeout=300)
    assert done.node != first.node and done.result["epochs_done"] == 8
    assert [m["epoch"] for m in registry.metrics([run_id])[run_id]] == list(range(1, 9))  # nothing counted twice


def test_cancel_withdraws_a_waiting_run_and_stops_a_running_one(cluster):
    registry = Registry(run_kinds())
    running = [
        supervisor.submit(registry, "mnist", MnistConfig(**UNFINISHED, seed=seed), executor="ray") for seed in range(2)
    ]
    waiting = supervisor.submit(registry, "mnist", MnistConfig(**TINY), executor="ray")  # both CPUs are taken
    for run_id in running:
        wait_for(registry, run_id, lambda r: r.status == RUNNING)
    assert registry.get(waiting).status == QUEUED
    supervisor.cancel(registry, waiting)
    assert registry.get(waiting).status == CANCELLED
    wait_for(registry, running[0], lambda r: r.epoch >= 1)
    supervisor.cancel(registry, running[0])
    cancelled = wait_for(registry, running[0], lambda r: r.status == CANCELLED, timeout=60)
    assert "resume continues" in cancelled.message and registry.checkpoint_path(running[0]).exists()
    time.sleep(3)  # the withdrawn run never starts, even once a CPU is free
    assert registry.get(waiting).status == CANCELLED and registry.get(waiting).epoch == 0
    supervisor.cancel(registry, running[1])
    wait_for(registry, running[1], lambda r: r.status == CANCELLED, timeout=60)


def test_ray_and_psycopg_are_imported_only_when_asked_for(tmp_path):
    """The app's and the command line's start, and a local run's registry, load neither."""
    code = (
        "import sys; from symlab import cli; from symlab.labs import run_kinds; "
        "from symlab.runs.registry import Registry; cli.build_parser(); "
        f"Registry(run_kinds(), {str(tmp_path)!r}).runs(); "
        "print(sorted(m for m in ('ray', 'psycopg') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(cli.__file__).rsplit("/symlab/", 1)[0]},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "[]"


def test_a_worker_that_cannot_see_the_runs_directory_says_so(cluster):
    registry = Registry(run_kinds())
    run_id = registry.create("mnist", MnistConfig(**TINY), "cpu", executor="ray")
    shutil.rmtree(registry.run_dir(run_id))  # as on a node where the shared directory is not mounted
    supervisor.start(registry, [run_id])
    failed = wait_for(registry, run_id, lambda r: r.status == FAILED, timeout=120)
    assert "is not visible on" in failed.message and "mount it at the same path" in failed.message


UNREACHABLE = "postgresql://symlab:secret@127.0.0.1:1/symlab"


def test_an_unreachable_database_is_one_clear_line_on_the_command_line(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "symlab", "mnist", "--hidden", "8", "--epochs", "1", "--runs-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "SYMLAB_DATABASE_URL": UNREACHABLE},
    )
    assert result.returncode == 1 and "Traceback" not in result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(
        "python -m symlab mnist: error: cannot use the run registry's database "
        "postgresql://symlab:***@127.0.0.1:1/symlab"
    )
    assert "secret" not in line and "SYMLAB_DATABASE_URL" in line


def test_an_unreachable_database_is_a_message_on_the_page(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path))
    monkeypatch.setenv("SYMLAB_DATABASE_URL", UNREACHABLE)
    at = AppTest.from_file(str(ROOT / "views" / "mnist.py"), default_timeout=60).run()
    assert not at.exception
    assert any(
        "cannot use the run registry's database" in error.value and "secret" not in error.value for error in at.error
    )


def test_the_pages_computations_run_as_ray_tasks(tmp_path, monkeypatch):
    """SYMLAB_EXECUTOR=ray: a page's shared computation is a Ray task that reports its progress and writes its
    result to the result store, as a local worker would."""
    from symlab.labs.symmetry import experiment as symmetry_lab
    from symlab.serving import shared_results, store

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    ray.init(num_cpus=2, namespace="symlab", log_to_driver=False, include_dashboard=False)
    results = shared_results.SharedResults(workers=1, executor="ray", store=store.ResultStore(tmp_path))
    config = symmetry_lab.ProximityConfig(weights="trained", steps=150, widths=(2, 4, 8, 16, 32, 64))
    try:
        job = results.submit(symmetry_lab.proximity_task(config), "page")
        seen = set()
        while not job.future.done():
            seen.add(job.progress.done)
            time.sleep(0.02)
        rows = job.future.result(timeout=120)
    finally:
        results.shutdown()
        ray.shutdown()
    assert seen - {0.0}, "no progress came back from the Ray task"
    assert rows == symmetry_lab.proximity_rows(config)
    assert store.ResultStore(tmp_path).get(symmetry_lab.proximity_task(config).key) == rows
