"""A read-only or full run registry, a full disk under a training run, missing MNIST files:
clear messages, nothing recorded so far lost."""

import errno
import sqlite3
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from symlab import cli
from symlab.labs import run_kinds
from symlab.labs.mnist import experiment as mnist
from symlab.labs.mnist.experiment import MnistConfig
from symlab.runs import supervisor
from symlab.runs.database import DatabaseError, SqliteDatabase
from symlab.runs.registry import Registry, RegistryError
from symlab.specs import settings
from symlab.specs.run_kind import FAILED, FINISHED, RESUMABLE

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TINY = MnistConfig(hidden=8, epochs=2, train_subset=500, samples=2, device="cpu")


def tiny_run_args(epochs: int) -> list[str]:
    """The command line's arguments for a run like TINY (width, images, samples, device) of ``epochs`` epochs."""
    return f"mnist --hidden 8 --epochs {epochs} --train-subset 500 --samples 2 --device cpu --json".split()


@pytest.fixture
def registry(tmp_path, monkeypatch):
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    registry = Registry(run_kinds())
    registry.create("mnist", TINY, "cpu", status=FINISHED)
    return registry


def read_only(monkeypatch):
    """Every connection can read but not write, as when the file or its directory is read-only
    (this suite may run as root, for whom permission bits do not stop writes)."""

    def connect(self):
        connection = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30, isolation_level=None)
        connection.row_factory = sqlite3.Row
        return connection

    monkeypatch.setattr(SqliteDatabase, "_connect", connect)


class FullDisk:
    """A connection on a full disk: reads work, every write fails as SQLite reports it (SQLITE_FULL)."""

    def __init__(self, connection):
        self.connection = connection

    def execute(self, sql, *parameters):
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            raise sqlite3.OperationalError("database or disk is full")
        return self.connection.execute(sql, *parameters)

    def __getattr__(self, name):
        return getattr(self.connection, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        return self.connection.__exit__(*exc_info)


def full_disk(monkeypatch):
    connect = SqliteDatabase._connect
    monkeypatch.setattr(SqliteDatabase, "_connect", lambda self: FullDisk(connect(self)))


def mnist_page() -> AppTest:
    at = AppTest.from_file(str(ROOT / "views" / "mnist.py"), default_timeout=60)
    at.query_params.update(hidden="8", epochs="1", subset="500")
    return at.run()


@pytest.mark.parametrize("break_registry, reason", [(read_only, "readonly"), (full_disk, "full")])
def test_an_unwritable_registry_refuses_new_runs_and_keeps_the_old(registry, monkeypatch, break_registry, reason):
    break_registry(monkeypatch)
    with pytest.raises(RegistryError, match=rf"{reason}.*writable and has free space.*kept"):
        supervisor.submit(registry, "mnist", TINY, settings.RunLimits(), session="dave")
    assert [run.status for run in registry.runs()] == [FINISHED]

    at = mnist_page()
    assert not at.exception
    at.button(key="mnist.launch").click().run()
    assert not at.exception
    assert any("Not launched" in e.value and reason in e.value for e in at.error)
    assert [run.status for run in registry.runs()] == [FINISHED]


def test_a_registry_that_cannot_be_read_says_so_when_asked_for_the_queue(registry, monkeypatch):
    def unreadable(*args, **kwargs):
        raise DatabaseError("disk I/O error")

    monkeypatch.setattr(registry.db, "transaction", unreadable)
    with pytest.raises(RegistryError, match="disk I/O error"):
        registry.queue_positions()


def test_a_full_disk_while_training_fails_the_run_resumably(registry, monkeypatch):
    saves = []
    real_save = mnist.torch.save

    def save_until_full(state, path):
        saves.append(path)
        if len(saves) == 2:
            Path(path).write_bytes(b"half a checkpoint")
            raise OSError(errno.ENOSPC, "No space left on device")
        real_save(state, path)

    monkeypatch.setattr(mnist.torch, "save", save_until_full)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(tiny_run_args(epochs=2))
    assert exit_info.value.code == 1
    run = registry.runs()[-1]
    assert run.status == FAILED and run.status in RESUMABLE
    assert "No space left on device" in run.message and "epoch 1's checkpoint is intact" in run.message
    assert [m["epoch"] for m in registry.metrics([run.id])[run.id]] == [1]
    assert not registry.checkpoint_path(run.id).with_suffix(".partial").exists()

    monkeypatch.setattr(mnist.torch, "save", real_save)  # space freed
    assert cli.main(["mnist", "--resume", str(run.id), "--json"]) == 0
    finished = registry.get(run.id)
    assert finished.status == FINISHED and finished.result["epochs_done"] == 2


def test_missing_mnist_files_are_named_on_the_page_and_fail_a_run_clearly(registry, tmp_path, monkeypatch, capsys):
    empty = tmp_path / "no-mnist"
    empty.mkdir()
    monkeypatch.setenv("SYMLAB_MNIST_DIR", str(empty))
    at = mnist_page()
    assert not at.exception
    problem = next(e.value for e in at.error if "MNIST is not available" in e.value)
    assert "train-images-idx3-ubyte.gz" in problem and str(empty) in problem

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["mnist", "--hidden", "8", "--epochs", "1", "--train-subset", "500", "--device", "cpu", "--json"])
    assert exit_info.value.code == 1
    error = capsys.readouterr().err
    assert "Traceback" not in error and "train-images-idx3-ubyte.gz" in error
    failed = registry.runs()[-1]
    assert failed.status == FAILED and "train-images" in failed.message
    assert len(registry.runs()) == 2  # the earlier run is still there


def test_a_garbage_checkpoint_is_reported_plainly_and_one_resume_goes_on_from_the_one_before(
    registry, monkeypatch, capsys
):
    """A garbage checkpoint.pt left the run failed for good, with torch's advice to load it unsafely; the page's
    download did nothing. Then the first Resume only set the file aside and failed, so a recovery took two (both
    counted against the cap) and the picker chose nothing. Now the picker chooses the run and says where Resume goes
    on from, one Resume sets the file aside and trains on from the checkpoint before, and Restart trains it again."""
    assert cli.main(tiny_run_args(epochs=3)) == 0
    run = registry.runs()[-1]
    newest = registry.checkpoint_path(run.id)
    assert newest.name == "checkpoint-00003.pt" and len(registry.checkpoints(run.id)) == 2  # two generations kept
    newest.write_bytes(b"\x80\x04garbage that is no zip and no pickle")
    registry.update(run.id, status=FAILED, message="stopped")

    at = mnist_page()  # the download and the resume picker say so before anyone tries
    assert not at.exception
    warning = next(w.value for w in at.warning if "posterior cannot be downloaded" in w.value)
    assert f"Run #{run.id}" in warning and "damaged" in warning and "weights_only" not in warning
    assert "mnist.export" not in {button.key for button in at.get("download_button")}
    picker = at.selectbox(key="mnist.resume_pick")
    assert picker.value.id == run.id  # chosen: one Resume recovers it
    [option] = [option for option in picker.options if f"#{run.id}" in option]
    assert "damaged" in option and "Resume sets it aside and goes on after epoch 2" in option

    assert cli.main(["mnist", "--resume", str(run.id), "--json"]) == 0  # one resume, from epoch 2's checkpoint
    output = capsys.readouterr()
    assert "Traceback" not in output.err and "weights_only" not in output.err + output.out
    resumed = registry.get(run.id)
    assert resumed.status == FINISHED and [m["epoch"] for m in registry.metrics([run.id])[run.id]] == [1, 2, 3]
    assert resumed.message == (
        "its checkpoint of epoch 3 could not be read (the file is damaged or is not a checkpoint), and it was set "
        "aside: it went on after epoch 2"
    )
    assert newest.with_name(newest.name + ".unreadable").exists()

    registry.checkpoint_path(run.id).write_bytes(b"")  # an empty file, then Restart
    registry.update(run.id, status=FAILED)
    assert cli.main(["mnist", "--restart", str(run.id), "--json"]) == 0
    restarted = registry.get(run.id)
    assert restarted.status == FINISHED and restarted.result["epochs_done"] == 3
    assert [path.name for path in registry.checkpoints(run.id)] == ["checkpoint-00003.pt", "checkpoint-00002.pt"]
    assert registry.launches_since(0, source="cli") == 3  # launched, resumed once, restarted

    for path in registry.checkpoints(run.id):  # every checkpoint damaged: one Resume trains it from the start
        path.write_bytes(b"not a checkpoint")
    registry.update(run.id, status=FAILED)
    assert cli.main(["mnist", "--resume", str(run.id), "--json"]) == 0
    again = registry.get(run.id)
    assert again.status == FINISHED and again.result["epochs_done"] == 3
    assert again.message.startswith("its checkpoint of epoch 3 could not be read") and again.message.endswith(
        "they were set aside: it started again from the beginning"
    )
