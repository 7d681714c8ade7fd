"""The run manager: worker processes, queue, progress, cancel, recovery, caps, results."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from symlab import runs
from symlab.hosting import SettingsError
from symlab.labs.mnist.experiment import MnistConfig

TINY = dict(hidden=8, epochs=2, train_subset=500, samples=2, init_sd=1e-3, device="cpu")  # σ₀ small: learns in 8 steps
LONG = dict(hidden=256, epochs=8, train_subset=20000, samples=2, init_sd=1e-3, device="cpu")  # ~0.4 s per epoch here


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    return runs.Registry()


def wait_for(registry, run_id, condition, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = registry.get(run_id)
        if condition(run):
            return run
        time.sleep(0.2)
    raise AssertionError(f"run #{run_id} never got there: {registry.get(run_id)}")


def test_launch_reports_progress_and_results_and_queues_beyond_the_limit(registry):
    first = runs.submit(registry, MnistConfig(**TINY, method="mfvi"))
    second = runs.submit(registry, MnistConfig(**TINY, method="sgm", K=4))
    assert registry.get(second).status == runs.QUEUED  # one run per device at a time
    done = wait_for(registry, first, lambda r: r.status == runs.FINISHED)
    assert done.progress == 1.0 and done.result["epochs_done"] == 2 and done.result["test_acc"] > 0.2
    assert [m["epoch"] for m in registry.metrics([first])[first]] == [1, 2]
    # The finished worker started the queued run itself: no app needed.
    done = wait_for(registry, second, lambda r: r.status == runs.FINISHED)
    assert done.result["mutual_info"] == pytest.approx(1.3862943611198906)
    assert registry.checkpoint_path(second).exists() and registry.log_path(second).exists()


def test_cancel_then_resume_from_the_checkpoint(registry):
    run_id = runs.submit(registry, MnistConfig(**LONG))
    wait_for(registry, run_id, lambda r: r.epoch >= 1)
    runs.cancel(registry, run_id)
    cancelled = wait_for(registry, run_id, lambda r: r.status == runs.CANCELLED, timeout=30)
    assert "resume continues" in cancelled.message and cancelled.epoch < 8
    runs.resume(registry, run_id)
    done = wait_for(registry, run_id, lambda r: r.status == runs.FINISHED)
    assert [m["epoch"] for m in registry.metrics([run_id])[run_id]] == list(range(1, 9))
    assert done.result["epochs_done"] == 8


def test_a_killed_worker_is_marked_interrupted_and_resumes(registry):
    run_id = runs.submit(registry, MnistConfig(**LONG))
    running = wait_for(registry, run_id, lambda r: r.epoch >= 1 and r.pid)
    os.kill(running.pid, signal.SIGKILL)
    time.sleep(0.5)
    assert runs.reap(registry) == [run_id]
    interrupted = registry.get(run_id)
    assert interrupted.status == runs.INTERRUPTED and "resume" in interrupted.message
    runs.resume(registry, run_id)
    done = wait_for(registry, run_id, lambda r: r.status == runs.FINISHED)
    assert done.result["epochs_done"] == 8
    assert [m["epoch"] for m in registry.metrics([run_id])[run_id]] == list(range(1, 9))


def test_runs_outlive_the_process_that_launched_them(registry, tmp_path):
    launcher = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from symlab import runs; from symlab.mnist import MnistConfig; "
         f"print(runs.submit(runs.Registry(), MnistConfig(**{TINY!r})), flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True, env=os.environ)
    run_id = int(launcher.stdout.readline())
    launcher.kill()  # the "server" dies; the run goes on
    launcher.wait()
    assert wait_for(registry, run_id, lambda r: r.status == runs.FINISHED).result["epochs_done"] == 2


def test_caps_and_bad_settings_are_refused_with_reasons(registry, monkeypatch):
    limits = runs.RunLimits(max_hidden=64, max_epochs=3, max_runs_per_session=1)
    with pytest.raises(ValueError, match="width 128 is above.*cap of 64.*5 epochs"):
        runs.submit(registry, MnistConfig(hidden=128, epochs=5), limits)
    runs.submit(registry, MnistConfig(**TINY), limits, session="alice")
    with pytest.raises(ValueError, match="launched 1 runs"):
        runs.submit(registry, MnistConfig(**TINY), limits, session="alice")
    monkeypatch.setenv("SYMLAB_MAX_HIDDEN", "lots")
    with pytest.raises(SettingsError, match="SYMLAB_MAX_HIDDEN"):
        runs.RunLimits.from_env()
    monkeypatch.setenv("SYMLAB_MAX_HIDDEN", "512")
    assert runs.RunLimits.from_env().max_hidden == 512


def test_an_unusable_runs_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(runs.RegistryError, match="cannot use the runs directory.*SYMLAB_RUNS_DIR"):
        runs.Registry(blocker / "runs")


def test_results_table_gives_mean_and_std_over_seeds(registry):
    for seed, accuracy in ((0, 0.90), (1, 0.92)):
        run_id = registry.create(MnistConfig(hidden=16, seed=seed), "cpu")
        registry.update(run_id, status=runs.FINISHED, result={"test_acc": accuracy, "test_nll": 0.3,
                                                              "test_ece": 0.02, "train_elbo": -5.0,
                                                              "train_elbo_sym": None})
    other = registry.create(MnistConfig(hidden=16, method="sgm", K=4), "cpu")
    registry.update(other, status=runs.FINISHED, result={"test_acc": 0.95, "train_elbo": -6.0,
                                                         "train_elbo_sym": -4.6})
    registry.create(MnistConfig(hidden=16, seed=2), "cpu")  # still queued: not in the table
    rows = runs.results_table(registry.runs())
    assert [(row["label"], row["seeds"]) for row in rows] == [("MFVI", 2), ("SGM K=4", 1)]
    assert rows[0]["test_acc_mean"] == pytest.approx(0.91) and rows[0]["test_acc_std"] == pytest.approx(0.01)
    assert json.dumps(rows)  # plain data, ready for --json and CSV
