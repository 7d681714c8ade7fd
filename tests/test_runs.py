"""The run manager: worker processes, queue, progress, cancel, recovery, caps, results."""

import functools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
from counting_lab import COUNTING, CountConfig
from mnist_runs import TINY, finished_run

from symlab.labs import run_kinds
from symlab.labs.mnist.experiment import MnistConfig
from symlab.labs.mnist.table import results_table
from symlab.runs import execution, supervisor
from symlab.runs.device import device_name
from symlab.runs.registry import Registry, RegistryError
from symlab.runs.supervisor import HOST, Caller, NotYours
from symlab.specs import settings
from symlab.specs.run_kind import (
    CANCELLED,
    DIVERGED,
    FAILED,
    FINISHED,
    INTERRUPTED,
    QUEUED,
    RUNNING,
)
from symlab.specs.settings import SettingsError

pytestmark = pytest.mark.slow

LONG = dict(hidden=256, epochs=8, train_subset=20000, samples=2, init_sd=1e-3, device="cpu")  # ~0.4 s per epoch here


@pytest.fixture
def registry(tmp_path, monkeypatch, database):
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    return Registry(run_kinds())


def wait_for(registry, run_id, condition, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = registry.get(run_id)
        if condition(run):
            return run
        time.sleep(0.2)
    raise AssertionError(f"run #{run_id} never got there: {registry.get(run_id)}")


def test_a_launch_returns_at_once_and_a_worker_slow_to_start_is_judged_by_its_process(registry, tmp_path, monkeypatch):
    """On a busy server a worker took over a minute to load torch: the launch waited for it and raised
    TimeoutExpired into the page, though the run then trained, and a run slow to report in was marked interrupted
    while it started. A launch now returns at once with the worker's process recorded, and only a dead process
    makes a run interrupted."""
    slow = tmp_path / "slow_start"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text("import time\ntime.sleep(4)  # a worker's start on a busy server\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(slow), os.environ.get("PYTHONPATH")])))
    monkeypatch.setattr(supervisor, "LAUNCH_GRACE_SECONDS", 1)  # the start outlasts the grace four times
    started = time.monotonic()
    run_id = supervisor.submit(registry, "mnist", MnistConfig(**TINY))
    assert time.monotonic() - started < 3  # the worker still sleeps: nothing waited for it
    run = registry.get(run_id)
    assert run.status == RUNNING and run.message == "starting" and run.pid is not None
    time.sleep(2)
    assert supervisor.reap(registry) == [] and registry.get(run_id).status == RUNNING
    assert wait_for(registry, run_id, lambda r: r.status == FINISHED).result["epochs_done"] == 2


def test_launch_reports_progress_and_results_and_queues_beyond_the_limit(registry, monkeypatch):
    monkeypatch.setenv("SYMLAB_QUICK_RUN_SECONDS", "0")  # no place of their own for quick runs (next test)
    first = supervisor.submit(registry, "mnist", MnistConfig(**TINY, method="mfvi"))
    second = supervisor.submit(registry, "mnist", MnistConfig(**TINY, method="sgm", K=4))
    assert registry.get(second).status == QUEUED  # one run per device at a time
    done = wait_for(registry, first, lambda r: r.status == FINISHED)
    assert done.progress == 1.0 and done.result["epochs_done"] == 2 and done.result["test_acc"] > 0.2
    assert [m["epoch"] for m in registry.metrics([first])[first]] == [1, 2]
    # The finished worker started the queued run itself: no app needed.
    done = wait_for(registry, second, lambda r: r.status == FINISHED)
    assert done.result["mutual_info"] == pytest.approx(1.3862943611198906)
    assert registry.checkpoint_path(second).exists() and registry.log_path(second).exists()


def test_a_quick_run_takes_its_own_place_beside_a_long_one(registry):
    """A class-path step's pair of seconds waited 146 s behind a student's default run (one run per device on a
    hosted server). A run estimated at seconds (RunLimits.is_quick) now has one place of its own per device; a long
    run still waits for the general one."""
    limits = settings.RunLimits(max_concurrent_per_device=1, quick_run_seconds=30)
    long_run = registry.create("mnist", MnistConfig(hidden=400, epochs=10), "cpu", status=RUNNING, pid=os.getpid())
    waiting_long = registry.create("mnist", MnistConfig(hidden=400, epochs=10, seed=1), "cpu")
    quick = [registry.create("mnist", MnistConfig(**TINY, seed=seed), "cpu") for seed in (2, 3)]
    assert [limits.is_quick(run.config.work()) for run in registry.runs()] == [False, False, True, True]
    claimed = registry.claim_queued(1, functools.partial(supervisor._is_quick_run, limits))
    assert [run.id for run in claimed] == [quick[0]]  # the other quick one waits for this one, the long one for all
    assert registry.get(waiting_long).status == QUEUED and registry.get(quick[1]).status == QUEUED
    registry.update(long_run, status=FINISHED, pid=None)
    claimed = registry.claim_queued(1, functools.partial(supervisor._is_quick_run, limits))
    assert [run.id for run in claimed] == [waiting_long]  # the general place: the quick one still holds its own
    registry.update(quick[0], status=FINISHED, pid=None)
    assert [run.id for run in registry.claim_queued(1, functools.partial(supervisor._is_quick_run, limits))] == [
        quick[1]
    ]
    assert registry.claim_queued(0, lambda run: True) == []  # a device closed to training has no quick place


def test_cancel_then_resume_from_the_checkpoint(registry):
    run_id = supervisor.submit(registry, "mnist", MnistConfig(**LONG))
    wait_for(registry, run_id, lambda r: r.epoch >= 1)
    supervisor.cancel(registry, run_id)
    cancelled = wait_for(registry, run_id, lambda r: r.status == CANCELLED, timeout=30)
    assert "resume continues" in cancelled.message and cancelled.epoch < 8
    supervisor.resume(registry, run_id)
    done = wait_for(registry, run_id, lambda r: r.status == FINISHED)
    assert [m["epoch"] for m in registry.metrics([run_id])[run_id]] == list(range(1, 9))
    assert done.result["epochs_done"] == 8


def test_a_killed_worker_is_marked_interrupted_and_resumes(registry):
    run_id = supervisor.submit(registry, "mnist", MnistConfig(**LONG))
    running = wait_for(registry, run_id, lambda r: r.epoch >= 1 and r.pid)
    os.kill(running.pid, signal.SIGKILL)
    time.sleep(0.5)
    assert supervisor.reap(registry) == [run_id]
    interrupted = registry.get(run_id)
    assert interrupted.status == INTERRUPTED and "resume" in interrupted.message
    supervisor.resume(registry, run_id)
    done = wait_for(registry, run_id, lambda r: r.status == FINISHED)
    assert done.result["epochs_done"] == 8
    assert [m["epoch"] for m in registry.metrics([run_id])[run_id]] == list(range(1, 9))


def test_runs_outlive_the_process_that_launched_them(registry, tmp_path):
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from symlab.labs import run_kinds; from symlab.runs import supervisor; "
            "from symlab.runs.registry import Registry; from symlab.labs.mnist.experiment import MnistConfig; "
            f"print(supervisor.submit(Registry(run_kinds()), 'mnist', MnistConfig(**{TINY!r})), flush=True); "
            "time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    run_id = int(launcher.stdout.readline())
    launcher.kill()  # the "server" dies; the run goes on
    launcher.wait()
    assert wait_for(registry, run_id, lambda r: r.status == FINISHED).result["epochs_done"] == 2


def test_caps_and_bad_settings_are_refused_with_reasons(registry, monkeypatch):
    limits = settings.RunLimits(max_hidden=64, max_epochs=3, max_runs_per_browser=1)
    with pytest.raises(ValueError, match="width 128 is above.*cap of 64.*5 epochs"):
        supervisor.submit(registry, "mnist", MnistConfig(hidden=128, epochs=5), limits)
    supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, session="alice", owner="alices-browser")
    with pytest.raises(ValueError, match="this browser has launched or resumed 1 runs"):  # a reload: a new session
        supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, session="alice-again", owner="alices-browser")
    monkeypatch.setenv("SYMLAB_MAX_HIDDEN", "lots")
    with pytest.raises(SettingsError, match="SYMLAB_MAX_HIDDEN"):
        settings.RunLimits.from_env()
    monkeypatch.setenv("SYMLAB_MAX_HIDDEN", "512")
    assert settings.RunLimits.from_env().max_hidden == 512


def test_an_unusable_runs_directory_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(RegistryError, match="cannot use the runs directory.*SYMLAB_RUNS_DIR"):
        Registry(run_kinds(), blocker / "runs")


def test_results_table_gives_mean_and_std_over_seeds(registry):
    for seed, accuracy in ((0, 0.90), (1, 0.92)):
        finished_run(
            registry, MnistConfig(hidden=16, seed=seed), test_acc=accuracy, train_elbo=-5.0, train_elbo_sym=None
        )
    other = registry.create("mnist", MnistConfig(hidden=16, method="sgm", K=4), "cpu")
    registry.update(other, status=FINISHED, result={"test_acc": 0.95, "train_elbo": -6.0, "train_elbo_sym": -4.6})
    registry.create("mnist", MnistConfig(hidden=16, seed=2), "cpu")  # still queued: not in the table
    rows = results_table(registry.runs())
    assert [(row["label"], row["seeds"]) for row in rows] == [("MFVI", 2), ("SGM K=4", 1)]
    assert rows[0]["test_acc_mean"] == pytest.approx(0.91) and rows[0]["test_acc_std"] == pytest.approx(0.01)
    assert json.dumps(rows)  # plain data, ready for --json and CSV


# The registry's schema before runs recorded their lab.
OLD_SCHEMA = """
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, config TEXT NOT NULL, status TEXT NOT NULL,
    device TEXT NOT NULL, created REAL NOT NULL, started REAL, finished REAL, heartbeat REAL, pid INTEGER,
    pid_started TEXT, epoch INTEGER NOT NULL DEFAULT 0, progress REAL NOT NULL DEFAULT 0,
    message TEXT NOT NULL DEFAULT '', session TEXT NOT NULL DEFAULT '', source TEXT NOT NULL DEFAULT 'app',
    result TEXT, cancel_requested INTEGER NOT NULL DEFAULT 0);
CREATE TABLE metrics (run_id INTEGER NOT NULL REFERENCES runs(id), epoch INTEGER NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (run_id, epoch));
"""


def test_a_registry_written_before_runs_recorded_their_lab_still_opens(tmp_path):
    root = tmp_path / "old-runs"
    root.mkdir()
    with sqlite3.connect(root / "registry.sqlite3") as connection:
        connection.executescript(OLD_SCHEMA)
        old_config = {**MnistConfig(hidden=32, seed=1).to_dict(), "retired_option": 3}  # unknown keys are skipped
        connection.execute(
            "INSERT INTO runs (config, status, device, created, epoch, progress, result) "
            "VALUES (?, 'finished', 'cpu', 1.0, 2, 1.0, ?)",
            (json.dumps(old_config), json.dumps({"test_acc": 0.9, "infonce_active": 0.0})),
        )
        connection.execute(
            "INSERT INTO metrics VALUES (1, 1, ?), (1, 2, ?)",
            (json.dumps({"epoch": 1, "test_acc": 0.8}), json.dumps({"epoch": 2, "test_acc": 0.9})),
        )
    for _ in range(2):  # the column is added once; opening again changes nothing
        registry = Registry(run_kinds(), root)
        [old] = registry.runs(lab="mnist")
        assert (old.lab, old.config, old.status, old.epoch) == ("mnist", MnistConfig(hidden=32, seed=1), FINISHED, 2)
        assert old.result == {"test_acc": 0.9, "infonce_active": 0.0}
        assert registry.metrics([old.id])[old.id] == [{"epoch": 1, "test_acc": 0.8}, {"epoch": 2, "test_acc": 0.9}]
    new = registry.create("mnist", MnistConfig(**TINY), "cpu")
    assert [(run.id, run.lab) for run in registry.runs()] == [(old.id, "mnist"), (new, "mnist")]
    assert old.owner == "" and registry.get(new).owner == ""  # launched by no one the registry knows
    # The old run was given a public token when the registry was first opened, and kept it.
    assert len(old.token) == 12 and registry.get(old.id).token == old.token != registry.get(new).token


def test_a_run_keeps_who_launched_it(registry):
    mine = registry.create("mnist", MnistConfig(**TINY), "cpu", owner="5baa4bca")
    anyone = registry.create("mnist", MnistConfig(**TINY), "cpu")
    assert [run.owner for run in registry.runs()] == ["5baa4bca", ""]
    registry.update(anyone, owner="77e0")
    assert (registry.get(mine).owner, registry.get(anyone).owner) == ("5baa4bca", "77e0")
    tokens = [run.token for run in registry.runs()]  # what links name runs by: random, not their ids
    assert len(set(tokens)) == 2 and all(len(token) == 12 and str(mine) != token for token in tokens)


HELD = settings.RunLimits(max_concurrent_per_device=0)  # nothing starts: these runs stay queued


def test_only_its_browser_a_lecturer_or_the_host_controls_a_run(registry, monkeypatch):
    """Anyone could cancel or resume anyone's run (ids 1, 2, 3… are in links): now only the browser that launched
    it, a lecturer holding the host's key, or the host at the server's shell; a run of the command line has no
    browser, so only those two."""
    monkeypatch.setenv(settings.LECTURER_KEY_ENV, "s3cret-lecturer")
    alice, bob = Caller("alice", "app"), Caller("bob", "app")
    mine = registry.create("mnist", MnistConfig(**TINY), "cpu", owner="alice", source="app")
    from_shell = registry.create("mnist", MnistConfig(**TINY), "cpu", source="cli")
    for run_id, who in ((mine, "another browser: only that browser"), (from_shell, "the server's command line")):
        for verb, act in (
            ("cancel", lambda i, by: supervisor.cancel(registry, i, by=by)),
            ("resume", lambda i, by: supervisor.resume(registry, i, HELD, by=by)),
            ("restart", lambda i, by: supervisor.restart(registry, i, HELD, by=by)),
        ):
            with pytest.raises(NotYours, match=f"^run #{run_id} was launched from {who}.* may {verb} it$"):
                act(run_id, bob)
            with pytest.raises(NotYours):
                act(run_id, Caller("bob", "app", lecturer_key="guess"))
    assert {run.status for run in registry.runs()} == {QUEUED}  # nothing happened
    supervisor.cancel(registry, mine, by=alice)
    supervisor.resume(registry, mine, HELD, by=alice)
    supervisor.cancel(registry, from_shell, by=Caller("bob", "app", lecturer_key="s3cret-lecturer"))
    supervisor.restart(registry, from_shell, HELD, by=Caller("", "app", lecturer_key="s3cret-lecturer"))
    supervisor.cancel(registry, mine, by=HOST)
    assert [run.status for run in registry.runs()] == [CANCELLED, QUEUED]
    with pytest.raises(NotYours):
        supervisor.resume(registry, mine, HELD, by=Caller("", "app"))  # a browser with no id owns nothing
    monkeypatch.delenv(settings.LECTURER_KEY_ENV)
    with pytest.raises(NotYours):  # no key set: none is right
        supervisor.cancel(registry, from_shell, by=Caller("bob", "app", lecturer_key=""))


def test_launches_resumes_and_restarts_count_per_browser_and_per_hour(registry):
    """The per-session cap reset on reload and resumes counted for nothing: launches, resumes and restarts from the
    pages now count for the browser (across its sessions) and for the server, in the last hour; one cancelled before
    it started took no turn and counts for neither."""
    limits = settings.RunLimits(max_concurrent_per_device=0, max_runs_per_browser=2, max_runs_per_hour=4)
    alice = Caller("alice", "app")
    first = supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, session="tab-1", owner="alice")
    supervisor.cancel(registry, first, by=alice)  # still queued: it counts no more
    assert registry.launches_since(0, owner="alice") == 0
    supervisor.resume(registry, first, limits, by=alice)
    registry.update(first, status=FAILED)  # it started, and stopped: its resume counts
    supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, session="tab-2", owner="alice")  # her second
    with pytest.raises(ValueError, match="this browser has launched or resumed 2 runs in the last hour.*cap.*2"):
        supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, session="tab-3", owner="alice")
    with pytest.raises(ValueError, match="this browser has launched or resumed 2"):
        supervisor.restart(registry, first, limits, by=alice)
    supervisor.restart(registry, first, limits, by=HOST)  # the command line counts for no cap
    for owner in ("bob", "carol"):
        supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, owner=owner)
    registry.update(first, status=FAILED)  # one of hers waits: no flood to give way (test_a_flood_cannot_…)
    with pytest.raises(ValueError, match="4 runs were launched or resumed on this server in the last hour"):
        supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, owner="dave")
    assert registry.launches_since(0) == 5 and registry.launches_since(0, source="app", owner="alice") == 2  # +HOST's
    supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, source="cli")


def test_a_flood_cannot_spend_the_servers_hourly_cap_while_its_runs_wait(registry):
    """One browser's cap resets with a fresh cookie, so a flood could spend the server's launches for the hour and
    lock the class out of MNIST. At the cap, a browser with no run takes the place of the newest queued run of the
    browser with the most waiting (two or more); what started, and a browser's only waiting run, keep theirs."""
    limits = settings.RunLimits(max_concurrent_per_device=0, max_runs_per_browser=10, max_runs_per_hour=4)
    flood = [
        supervisor.submit(registry, "mnist", MnistConfig(**TINY, seed=seed), limits, owner="mallory")
        for seed in range(4)
    ]
    bob = supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, owner="bob")
    assert registry.get(flood[3]).status == CANCELLED and registry.get(flood[3]).message == supervisor.GAVE_WAY
    assert registry.launches_since(0, source="app") == 4  # hers gave its place: still the cap
    with pytest.raises(ValueError, match="4 runs were launched or resumed on this server"):
        supervisor.submit(registry, "mnist", MnistConfig(**TINY, seed=9), limits, owner="bob")  # he has one waiting
    registry.update(flood[0], status=RUNNING, heartbeat=time.time())  # hers that started keeps its turn
    carol = supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, owner="carol")
    assert registry.get(flood[2]).status == CANCELLED and registry.get(flood[1]).status == QUEUED
    with pytest.raises(ValueError, match="its cap"):  # her one waiting run is no flood
        supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, owner="dave")
    assert [registry.get(run_id).status for run_id in (flood[0], flood[1], bob, carol)] == [
        RUNNING,
        QUEUED,
        QUEUED,
        QUEUED,
    ]


def test_a_launch_that_fails_costs_the_flood_nothing(registry, monkeypatch):
    """The flood's run gives way only once the new launch is recorded: a database that refuses the new run leaves
    hers waiting, with her launch still counted."""
    limits = settings.RunLimits(max_concurrent_per_device=0, max_runs_per_browser=10, max_runs_per_hour=2)
    flood = [
        supervisor.submit(registry, "mnist", MnistConfig(**TINY, seed=seed), limits, owner="mallory") for seed in (0, 1)
    ]

    def refused(*args, **kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(registry, "create", refused)
    with pytest.raises(RuntimeError, match="went away"):
        supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, owner="bob")
    assert [registry.get(run_id).status for run_id in flood] == [QUEUED, QUEUED]
    assert registry.launches_since(0, source="app") == 2
    monkeypatch.undo()
    supervisor.submit(registry, "mnist", MnistConfig(**TINY), limits, owner="bob")
    assert registry.get(flood[1]).message == supervisor.GAVE_WAY


def test_a_servers_page_processes_count_wrong_keys_together(registry, monkeypatch):
    """Counted per process, two page processes behind the proxy gave a guesser twice the budget: their guards now
    write to the run registry, so ten wrong keys sent to one make the other's next check wait."""
    from symlab.serving import key_guard

    key = "a-lecturers-key-of-some-length"
    monkeypatch.setenv(settings.LECTURER_KEY_ENV, key)
    now = [1000.0]
    page1, page2 = key_guard.KeyGuard(clock=lambda: now[0]), key_guard.KeyGuard(clock=lambda: now[0])
    for window in range(key_guard.FREE_PER_SERVER):
        assert page1.check(f"window{window}", "guess", registry) == key_guard.Verdict(False)
    assert page2.check("another window", key, registry) == key_guard.Verdict(False, 1.0)
    assert len(registry.wrong_keys_since(0)) == key_guard.FREE_PER_SERVER
    now[0] += 1.0
    assert page2.check("another window", key, registry).accepted


def test_a_run_cancelled_before_its_worker_could_stop_itself_reads_as_cancelled(registry):
    """A cancel during epoch 0 (the worker still starting: SIGTERM ended it before its handler was set) was reported
    as a crash, "the training process stopped unexpectedly"; the reaper now sees the cancel that was asked for."""
    run_id = registry.create("mnist", MnistConfig(**TINY), "cpu", status=RUNNING)
    registry.update(run_id, heartbeat=0.0, cancel_requested=1)  # its worker is gone, the cancel asked
    assert supervisor.reap(registry) == [run_id]
    run = registry.get(run_id)
    assert (run.status, run.message) == (CANCELLED, "cancelled; resume starts it afresh")
    registry.checkpoint_path(run_id, 2).write_bytes(b"a checkpoint")
    registry.update(run_id, status=RUNNING, heartbeat=0.0)
    supervisor.reap(registry)
    assert registry.get(run_id).message == "cancelled after epoch 2; resume continues from there"


def test_the_reaper_names_the_epoch_resume_continues_after(registry):
    """The registry's epoch can lag the newest checkpoint (a worker killed between saving it and recording the
    epoch): the message names the checkpoint's epoch, which is where resuming goes on."""
    run_id = registry.create("mnist", MnistConfig(**TINY), "cpu", status=RUNNING)
    registry.update(run_id, heartbeat=0.0, epoch=2)  # its worker never reported in
    for epoch in (2, 3):
        registry.checkpoint_path(run_id, epoch).write_bytes(b"a checkpoint")
    assert supervisor.reap(registry) == [run_id]
    run = registry.get(run_id)
    assert run.status == INTERRUPTED and run.message.endswith("resume continues after epoch 3, its last checkpoint")
    assert supervisor.resume_point(registry, run) == 3


def test_the_registry_and_the_worker_run_any_lab_that_declares_its_runs(registry):
    registry = Registry({**registry.kinds, "counting": COUNTING}, registry.root)  # handed the lab by its caller
    mnist_run = registry.create("mnist", MnistConfig(**TINY), "cpu", status=FINISHED)
    counted = registry.create("counting", CountConfig(epochs=3), "cpu", status=RUNNING)
    # The run's record names the device it trained on, whatever its lab.
    assert execution.execute(registry, counted).result == {"counted": 3, "device_name": device_name("cpu")}
    assert [m["count"] for m in registry.metrics([counted])[counted]] == [1, 2, 3]
    assert [run.id for run in registry.runs(lab="counting")] == [counted]
    assert [run.id for run in registry.runs(lab="mnist")] == [mnist_run]

    diverging = registry.create("counting", CountConfig(epochs=3, diverge_in=3), "cpu", status=RUNNING)
    diverged = execution.execute(registry, diverging)
    assert (diverged.status, diverged.message) == (DIVERGED, "diverged in epoch 3")
    assert diverged.result == {"counted": 2, "device_name": device_name("cpu")}  # the epochs before it
    assert registry.get(diverging).config == CountConfig(epochs=3, diverge_in=3)

    with pytest.raises(ValueError, match="5 epochs is above this server's cap of 4"):
        supervisor.submit(registry, "counting", CountConfig(epochs=5), settings.RunLimits(max_epochs=4))


@pytest.fixture
def sqlite_registry(tmp_path, monkeypatch):
    monkeypatch.delenv("SYMLAB_DATABASE_URL", raising=False)
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    return Registry(run_kinds())


def test_cancel_stops_a_run_within_seconds_during_a_long_evaluation(sqlite_registry):
    """Cancel waited for the evaluation to end (about 53 s for 100 samples of a wide net): it now stops it between
    two of its passes."""
    registry = sqlite_registry
    config = MnistConfig(hidden=512, depth=2, epochs=2, train_subset=500, samples=100, device="cpu")  # ~15 s each
    run_id = supervisor.submit(registry, "mnist", config)
    wait_for(registry, run_id, lambda r: r.progress >= 0.5, timeout=120)  # epoch 1 trained: evaluating
    asked = time.monotonic()
    supervisor.cancel(registry, run_id)
    cancelled = wait_for(registry, run_id, lambda r: r.status == CANCELLED, timeout=60)
    assert time.monotonic() - asked < 10, cancelled
    assert "before its first epoch ended" in cancelled.message and not registry.metrics([run_id])[run_id]


def test_a_restart_trains_again_from_the_start(sqlite_registry):
    registry = sqlite_registry
    run_id = supervisor.submit(registry, "mnist", MnistConfig(**TINY))
    wait_for(registry, run_id, lambda r: r.status == FINISHED)
    registry.update(run_id, status=FAILED, message="its checkpoint cannot be read")
    before = registry.checkpoints(run_id)
    assert [path.name for path in before] == ["checkpoint-00002.pt", "checkpoint-00001.pt"]  # two generations
    supervisor.restart(registry, run_id)
    again = registry.get(run_id)  # its worker takes seconds to start
    assert (again.epoch, again.result, registry.checkpoints(run_id), registry.metrics([run_id])[run_id]) == (
        0,
        None,
        [],
        [],
    )
    done = wait_for(registry, run_id, lambda r: r.status == FINISHED)
    assert done.result["epochs_done"] == 2 and [m["epoch"] for m in registry.metrics([run_id])[run_id]] == [1, 2]
    assert registry.launches_since(0) == 2  # its launch and its restart


def test_a_database_restart_mid_epoch_pauses_the_run_and_loses_no_epoch(postgres_server_url, tmp_path, monkeypatch):
    """PostgreSQL restarted during an epoch crashed the run and lost that epoch's metrics (epochs read 1, 2, 4):
    the worker's writes now wait for the database, and each epoch's metrics are written before its checkpoint."""
    from postgres import fresh_database, start_server, stop_server

    monkeypatch.setenv("SYMLAB_DATABASE_URL", fresh_database(postgres_server_url, "t_restart_mid_epoch"))
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    registry = Registry(run_kinds())
    # Six epochs of the full set (~1 s each here): however fast the machine, epochs remain once the first is written,
    # where progress, written once a second, could skip a half-second epoch's middle.
    run_id = supervisor.submit(registry, "mnist", MnistConfig(**{**LONG, "hidden": 64, "epochs": 6, "train_subset": 0}))
    wait_for(registry, run_id, lambda r: r.epoch >= 1 and r.status == RUNNING)  # its first epoch written
    stop_server(postgres_server_url)
    try:  # the run trains on, its heartbeats failing, until the epoch's end waits to write its metrics
        deadline = time.monotonic() + 120
        while "waiting" not in registry.log_path(run_id).read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(2)
    finally:
        start_server(postgres_server_url)
    assert "waiting 0.5 s for the run registry" in registry.log_path(run_id).read_text()
    done = wait_for(registry, run_id, lambda r: r.status not in (QUEUED, RUNNING), timeout=180)
    assert done.status == FINISHED, done.message
    assert [m["epoch"] for m in registry.metrics([run_id])[run_id]] == [1, 2, 3, 4, 5, 6]


def test_the_queue_takes_browsers_in_turn_and_a_lecturer_cancels_a_flood_in_one_action(registry, monkeypatch):
    """One browser's runs, queued first, held the class's back (and a fresh cookie reset its cap): the queue now
    starts every browser's first run before anyone's second, each student sees their place in line, and a lecturer
    sees the queue by browser and cancels one browser's queued runs at once, which then count for no cap."""
    flood = [registry.create("mnist", MnistConfig(**TINY, seed=seed), "cpu", owner="mallory") for seed in range(4)]
    bob = registry.create("mnist", MnistConfig(**TINY), "cpu", owner="bob")
    carol = registry.create("mnist", MnistConfig(**TINY), "cpu", owner="carol")
    places = registry.queue_positions()
    assert [places[run_id] for run_id in (flood[0], bob, carol, *flood[1:])] == [1, 2, 3, 4, 5, 6]
    assert supervisor.queue_by_browser(registry) == [
        {"owner": "mallory", "queued": 4, "running": 0},
        {"owner": "bob", "queued": 1, "running": 0},
        {"owner": "carol", "queued": 1, "running": 0},
    ]
    [claimed] = registry.claim_queued(1)
    assert claimed.id == flood[0]  # the oldest of the first round; her next ones wait for bob's and carol's
    assert registry.queue_positions()[bob] == 1 and registry.queue_positions()[flood[1]] == 3

    monkeypatch.setenv(settings.LECTURER_KEY_ENV, "s3cret-lecturer")
    with pytest.raises(NotYours):
        supervisor.cancel_queued_of(registry, "mallory", by=Caller("bob", "app"))
    cancelled = supervisor.cancel_queued_of(registry, "mallory", by=Caller("lecturer", "app", "s3cret-lecturer"))
    assert cancelled == flood[1:] and registry.get(flood[0]).status == RUNNING  # hers that trains goes on
    assert registry.launches_since(0, owner="mallory") == 1  # the cancelled ones took no turn: no cap counts them
    assert set(registry.queue_positions()) == {bob, carol}
