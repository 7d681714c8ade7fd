"""Registry and manager of background training runs: each run trains in its own OS process.

A database holds every run's lab, configuration, status, timestamps, progress and per-epoch
metrics: an SQLite file (``registry.sqlite3`` in the runs directory) by default, or a PostgreSQL
server (``SYMLAB_DATABASE_URL``, :mod:`symlab.database`). Each run's checkpoint and log sit in its
own folder in the runs directory. Any process may read it: the app, the command line, the workers.

What a run is belongs to its lab: a :class:`RunKind` (the lab's config type, the device a config
trains on, how its training starts), found by the lab's name in the lab registry (``Lab.runs``). The registry
stores a run's config as a dict and hands it back as the lab's config type; the worker
(:mod:`symlab.worker`) drives the lab's :class:`Training` epoch by epoch.

Life of a run: ``queued`` → ``running`` → ``finished`` | ``diverged`` | ``failed`` |
``cancelled``. A run whose process disappears (killed, machine restarted) is found by
:func:`reap` and marked ``interrupted``; :func:`resume` queues it again and it continues from its
last completed epoch. :func:`dispatch` starts queued runs while fewer than
``max_concurrent_per_device`` run on their device; every worker calls it when it ends, so the
queue drains with no browser open.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

from .database import DATABASE_URL_ENV, DatabaseError, open_database, shown_url
from .database import database_url as configured_url
from .hosting import RunLimits

QUEUED, RUNNING, FINISHED, FAILED, DIVERGED, CANCELLED, INTERRUPTED = (
    "queued", "running", "finished", "failed", "diverged", "cancelled", "interrupted")
ACTIVE = (QUEUED, RUNNING)
RESUMABLE = (INTERRUPTED, CANCELLED, FAILED)
EXECUTORS = ("local", "ray")
EXECUTOR_ENV = "SYMLAB_EXECUTOR"
LAUNCH_GRACE_SECONDS = 60  # a run marked running whose worker never reported in is interrupted
REPO_ROOT = Path(__file__).resolve().parent.parent


class RegistryError(RuntimeError):
    """The runs directory or its database cannot be used; the message says why."""


def default_runs_dir() -> Path:
    return Path(os.environ.get("SYMLAB_RUNS_DIR") or REPO_ROOT / "runs").expanduser().resolve()


class Training(Protocol):
    """One run's training as the worker drives it: epoch by epoch, checkpointed after each."""

    epoch: int  # completed epochs
    epochs: int  # epochs to train

    def train_epoch(self, on_step: Callable[[int, int], None]) -> dict:
        """Train one epoch; its metrics, with "epoch". ``on_step(step, steps)`` may raise to stop."""

    def save(self, path: Path) -> None:
        """Write a checkpoint that :meth:`load` resumes from exactly."""

    def load(self, path: Path) -> None:
        """Continue from a checkpoint that :meth:`save` wrote."""

    def summary(self) -> dict:
        """The run's result: JSON-ready, recorded when it finishes or diverges."""


@dataclass(frozen=True)
class RunKind:
    """One lab's runs. ``config_type`` is a dataclass with ``to_dict()``, ``from_dict(values)``,
    ``validate()``, a ``label`` and ``work()`` (a :class:`~symlab.hosting.Work` for the server's caps)."""

    config_type: type
    device: Callable[[Any], str]  # the device type a config trains on ("cpu", "cuda"): the queue it waits in
    start: Callable[..., Training]  # start(config, device, data_dir): its training at epoch 0
    failures: tuple[type[BaseException], ...] = ()  # expected errors, recorded by their message alone


# Registries written before runs recorded their lab hold MNIST runs only.
LEGACY_LAB = "mnist"


def run_kinds() -> dict[str, str]:
    """Lab name -> the module whose ``KIND`` is that lab's RunKind, for the registry's labs that keep runs."""
    from .labs import LABS  # here: a lab's run module imports this one

    return {lab.name: lab.runs for lab in LABS if lab.runs}


def run_kind(lab: str) -> RunKind:
    kinds = run_kinds()
    if lab not in kinds:
        raise RegistryError(f"the registry holds runs of the lab {lab!r}, which keeps no runs here")
    return importlib.import_module(kinds[lab]).KIND


def lab_of(config) -> str:
    """The lab whose runs have ``config``'s type."""
    for lab in run_kinds():
        if isinstance(config, run_kind(lab).config_type):
            return lab
    raise TypeError(f"{type(config).__name__} is not the config of a lab that keeps runs")


@dataclass(frozen=True)
class Run:
    id: int
    lab: str
    config: Any  # the lab's config type
    status: str
    device: str
    created: float
    started: float | None
    finished: float | None
    heartbeat: float | None
    pid: int | None
    pid_started: str | None  # the process's start time, to tell it from a later one with its id
    epoch: int
    progress: float  # fraction of the whole run
    message: str
    session: str
    source: str
    result: dict | None
    cancel_requested: bool
    executor: str  # "local" (a process of this machine) or "ray" (a task of a Ray cluster)
    node: str  # where it last trained: host name (and Ray node) — empty until it starts
    task: str  # the executor's name for its task (a Ray actor's), empty for a local process

    @property
    def label(self) -> str:
        return f"#{self.id} {self.config.label}"


# Written for both databases: {id} and {real} are filled in with each one's types (a PostgreSQL REAL
# is single precision, too coarse for timestamps).
_SCHEMA = ("""
CREATE TABLE IF NOT EXISTS runs (
    id {id},
    config TEXT NOT NULL,
    status TEXT NOT NULL,
    device TEXT NOT NULL,
    created {real} NOT NULL,
    started {real},
    finished {real},
    heartbeat {real},
    pid INTEGER,
    pid_started TEXT,
    epoch INTEGER NOT NULL DEFAULT 0,
    progress {real} NOT NULL DEFAULT 0,
    message TEXT NOT NULL DEFAULT '',
    session TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL DEFAULT 'app',
    result TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    lab TEXT NOT NULL DEFAULT '""" + LEGACY_LAB + """',
    executor TEXT NOT NULL DEFAULT 'local',
    node TEXT NOT NULL DEFAULT '',
    task TEXT NOT NULL DEFAULT ''
)""", """
CREATE TABLE IF NOT EXISTS metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    epoch INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, epoch)
)""")
# Columns added after the first registries were written: an older registry gains them when opened.
_ADDED_COLUMNS = {"lab": f"TEXT NOT NULL DEFAULT '{LEGACY_LAB}'", "executor": "TEXT NOT NULL DEFAULT 'local'",
                  "node": "TEXT NOT NULL DEFAULT ''",
                  "task": "TEXT NOT NULL DEFAULT ''"}


class Registry:
    """The runs directory (one folder per run: checkpoint and log) and the database of runs: an SQLite
    file in that directory, or PostgreSQL at ``database_url`` (default: $SYMLAB_DATABASE_URL)."""

    def __init__(self, runs_dir: str | os.PathLike | None = None, database_url: str | None = None):
        self.root = Path(runs_dir).expanduser().resolve() if runs_dir else default_runs_dir()
        url = configured_url(database_url)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self.db = open_database(self.root, url)
            with self.db.transaction(write=True) as connection:
                for statement in _SCHEMA:
                    connection.execute(statement.format(**self.db.types))
                present = self.db.columns(connection, "runs")
                for name, declaration in _ADDED_COLUMNS.items():
                    if name not in present:
                        connection.execute(f"ALTER TABLE runs ADD COLUMN {name} {declaration}")
        except DatabaseError as error:
            if url:
                raise RegistryError(f"cannot use the run registry's database {shown_url(url)}: {error}. Check "
                                    f"{DATABASE_URL_ENV} and that the server is up and reachable; no run was "
                                    "changed.") from None
            raise self._unusable_directory(error) from None
        except OSError as error:
            raise self._unusable_directory(error) from None
        self.path = self.db.where

    def _unusable_directory(self, error: Exception) -> RegistryError:
        return RegistryError(f"cannot use the runs directory {self.root}: {error}. Choose a writable "
                             f"directory with SYMLAB_RUNS_DIR or --runs-dir.")

    def _execute(self, sql: str, parameters=(), *, write=False) -> list:
        try:
            with self.db.transaction(write=write) as connection:
                cursor = connection.execute(sql, parameters)
                return cursor.fetchall() if cursor.description else []
        except DatabaseError as error:
            raise self._failure(error, writing=write) from None

    def _failure(self, error: DatabaseError, writing: bool) -> RegistryError:
        if self.db.url:
            hint = (f" Check {DATABASE_URL_ENV} and that the server is up; the runs recorded so far are kept on it."
                    if writing else f" Check {DATABASE_URL_ENV} and that the server is up.")
        else:
            hint = (" Check that its directory is writable and has free space; the runs recorded so far are kept."
                    if writing else "")
        return RegistryError(f"the run registry {self.path} failed: {error}.{hint}")

    def run_dir(self, run_id: int) -> Path:
        return self.root / f"run-{run_id:05d}"

    def checkpoint_path(self, run_id: int) -> Path:
        return self.run_dir(run_id) / "checkpoint.pt"

    def log_path(self, run_id: int) -> Path:
        return self.run_dir(run_id) / "worker.log"

    # --- records --------------------------------------------------------------------------

    def create(self, config, device: str, *, status=QUEUED, session="", source="app", pid=None,
               executor: str = "local") -> int:
        """Record a run of ``config`` (a config of a lab that keeps runs) on ``device``, to be trained by
        ``executor``."""
        now = time.time()
        rows = self._execute(
            "INSERT INTO runs (lab, config, status, device, created, started, heartbeat, pid, pid_started, session,"
            " source, executor, node) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (lab_of(config), json.dumps(config.to_dict()), status, device, now, now if status == RUNNING else None,
             now if status == RUNNING else None, pid, _process_start(pid) if pid else None, session, source,
             executor, node_name() if pid else ""),
            write=True)
        run_id = rows[0]["id"]
        self.run_dir(run_id).mkdir(parents=True, exist_ok=True)
        return run_id

    def get(self, run_id: int) -> Run:
        rows = self._execute("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise KeyError(f"no run #{run_id} in {self.path}")
        return _to_run(rows[0])

    def runs(self, statuses=None, lab: str | None = None) -> list[Run]:
        """The runs (of every lab, or of ``lab``) with any of ``statuses`` (default: all), oldest first."""
        conditions, parameters = [], []
        if statuses:
            conditions.append(f"status IN ({', '.join('?' * len(statuses))})")
            parameters.extend(statuses)
        if lab:
            conditions.append("lab = ?")
            parameters.append(lab)
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        return [_to_run(row) for row in self._execute(f"SELECT * FROM runs{where} ORDER BY id", tuple(parameters))]

    def launched_since(self, since: float, source: str) -> int:
        """How many runs from ``source`` were created after the time ``since``."""
        rows = self._execute("SELECT COUNT(*) AS n FROM runs WHERE created > ? AND source = ?", (since, source))
        return rows[0]["n"]

    def has_status(self, status: str) -> bool:
        return bool(self._execute("SELECT 1 FROM runs WHERE status = ? LIMIT 1", (status,)))

    def update(self, run_id: int, **values) -> None:
        if "result" in values and values["result"] is not None:
            values["result"] = json.dumps(values["result"])
        assignments = ", ".join(f"{name} = ?" for name in values)
        self._execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*values.values(), run_id), write=True)

    def heartbeat(self, run_id: int, epoch: int, progress: float) -> bool:
        """Record progress; returns whether a cancel was requested."""
        rows = self._execute("UPDATE runs SET heartbeat = ?, epoch = ?, progress = ? WHERE id = ? "
                             "RETURNING cancel_requested", (time.time(), epoch, progress, run_id), write=True)
        return bool(rows and rows[0]["cancel_requested"])

    def add_metrics(self, run_id: int, metrics: dict) -> None:
        self._execute("INSERT INTO metrics (run_id, epoch, data) VALUES (?, ?, ?) "
                      "ON CONFLICT (run_id, epoch) DO UPDATE SET data = excluded.data",
                      (run_id, metrics["epoch"], json.dumps(metrics)), write=True)

    def metrics(self, run_ids) -> dict[int, list[dict]]:
        """Per-epoch metrics of the given runs, by run id, in epoch order."""
        run_ids = list(run_ids)
        found: dict[int, list[dict]] = {run_id: [] for run_id in run_ids}
        if not run_ids:
            return found
        marks = ", ".join("?" * len(run_ids))
        for row in self._execute(f"SELECT run_id, data FROM metrics WHERE run_id IN ({marks}) "
                                 "ORDER BY run_id, epoch", tuple(run_ids)):
            found[row["run_id"]].append(json.loads(row["data"]))
        return found

    def drop_metrics_after(self, run_id: int, epoch: int) -> None:
        self._execute("DELETE FROM metrics WHERE run_id = ? AND epoch > ?", (run_id, epoch), write=True)

    def claim_queued(self, limit_per_device: int) -> list[Run]:
        """Mark the oldest queued local runs running, as many as each device has room for (atomic). Runs on a
        Ray cluster wait in Ray's own queue."""
        try:
            with self.db.transaction(write=True) as connection:
                busy: dict[str, int] = {}
                for row in connection.execute("SELECT device, COUNT(*) AS n FROM runs WHERE status = ? AND "
                                              "executor = 'local' GROUP BY device", (RUNNING,)).fetchall():
                    busy[row["device"]] = row["n"]
                claimed = []
                for row in connection.execute("SELECT * FROM runs WHERE status = ? AND executor = 'local' ORDER BY id",
                                              (QUEUED,)).fetchall():
                    if busy.get(row["device"], 0) >= limit_per_device:
                        continue
                    busy[row["device"]] = busy.get(row["device"], 0) + 1
                    now = time.time()
                    connection.execute("UPDATE runs SET status = ?, started = COALESCE(started, ?), heartbeat = ?, "
                                       "pid = NULL, pid_started = NULL, message = 'starting' WHERE id = ?",
                                       (RUNNING, now, now, row["id"]))
                    claimed.append(row["id"])
        except DatabaseError as error:
            raise self._failure(error, writing=True) from None
        return [self.get(run_id) for run_id in claimed]

    def register_process(self, run_id: int, pid: int, node: str | None = None) -> None:
        self.update(run_id, pid=pid, pid_started=_process_start(pid), heartbeat=time.time(), message="",
                    node=node or node_name())


def _to_run(row) -> Run:
    config = run_kind(row["lab"]).config_type.from_dict(json.loads(row["config"]))
    return Run(id=row["id"], lab=row["lab"], config=config, status=row["status"],
               device=row["device"], created=row["created"], started=row["started"], finished=row["finished"],
               heartbeat=row["heartbeat"], pid=row["pid"], pid_started=row["pid_started"], epoch=row["epoch"], progress=row["progress"],
               message=row["message"], session=row["session"], source=row["source"],
               result=json.loads(row["result"]) if row["result"] else None,
               cancel_requested=bool(row["cancel_requested"]), executor=row["executor"], node=row["node"],
               task=row["task"])


# --- processes ------------------------------------------------------------------------------

def node_name() -> str:
    return socket.gethostname()


def _process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell it from a later
    process that reuses its id; None where /proc is not available."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def process_alive(pid: int | None, started: str | None) -> bool:
    if not pid:
        return False
    if Path("/proc/self/stat").exists():
        try:
            fields_after_name = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return False
        if fields_after_name[0] in ("Z", "X"):  # exited, waiting to be reaped
            return False
        return started is None or fields_after_name[19] == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap(registry: Registry) -> list[int]:
    """Mark runs whose worker is gone as interrupted; returns their ids. A local run is judged on its own
    machine only (its process id means nothing elsewhere); a run on Ray, by whether its task still lives."""
    lost = []
    now = time.time()
    here = node_name()
    active = registry.runs([RUNNING, QUEUED])
    for run in active:
        if run.executor != "local" or run.status != RUNNING or run.node not in ("", here):
            continue
        if run.pid is None:
            gone = now - (run.heartbeat or 0) > LAUNCH_GRACE_SECONDS
        else:
            gone = not process_alive(run.pid, run.pid_started)
        if gone:
            lost.append(run)
    on_ray = [run for run in active if run.executor == "ray"]
    if on_ray:
        from . import ray_executor  # here: Ray is imported only where runs use it

        lost += ray_executor.lost(on_ray)
    for run in lost:
        registry.update(run.id, status=INTERRUPTED, pid=None,
                        message=f"the training process stopped unexpectedly during epoch {run.epoch + 1}"
                                + (f" on {run.node}" if run.node else "") + f"; resume continues after epoch {run.epoch}")
    return [run.id for run in lost]


def dispatch(registry: Registry, limits: RunLimits | None = None) -> list[int]:
    """Reap lost runs, then start queued runs where their device has room; returns started ids."""
    limits = limits or RunLimits.from_env()
    reap(registry)
    if not registry.has_status(QUEUED):
        return []  # the common case, answered without taking the write lock
    started = []
    for run in registry.claim_queued(limits.max_concurrent_per_device):
        try:
            launch_worker(registry, run.id)
            started.append(run.id)
        except OSError as error:
            registry.update(run.id, status=FAILED, message=f"could not start the training process: {error}")
    return started


def launch_worker(registry: Registry, run_id: int) -> None:
    """Start ``python -m symlab.worker`` for the run, detached: it outlives the caller (a closed
    tab, a restarted server) and is reaped by init, not by the caller."""
    log = registry.log_path(run_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    # The database's URL travels in the environment, not on the command line where others could read it.
    env = {**os.environ, DATABASE_URL_ENV: registry.db.url} if registry.db.url else None
    subprocess.run([sys.executable, "-m", "symlab.worker", str(run_id), "--runs-dir", str(registry.root),
                    "--detach"], cwd=REPO_ROOT, check=True, timeout=60, env=env,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def submit(registry: Registry, config, limits: RunLimits | None = None, session: str = "",
           source: str = "app", executor: str | None = None) -> int:
    """Validate ``config`` (a lab's), check the caps, and queue it: with the local executor it starts if its
    device has room; on Ray (``executor``, default $SYMLAB_EXECUTOR, else local) Ray's scheduler places it.
    Returns the run id."""
    executor = executor_name(executor)
    kind = run_kind(lab_of(config))
    limits = limits or RunLimits.from_env()
    config.validate()
    limits.check(config.work())
    if session:
        mine = sum(1 for run in registry.runs() if run.session == session)
        if mine >= limits.max_runs_per_session:
            raise ValueError(f"this session has launched {mine} runs, the cap on this server "
                             f"({limits.max_runs_per_session})")
    if source == "app" and registry.launched_since(time.time() - 3600, source) >= limits.max_runs_per_hour:
        raise ValueError(f"{limits.max_runs_per_hour} runs were launched on this server in the last hour, its cap: "
                         "try again later")
    run_id = registry.create(config, kind.device(config), session=session, source=source, executor=executor)
    start(registry, [run_id], limits)
    return run_id


def start(registry: Registry, run_ids, limits: RunLimits | None = None) -> None:
    """Start queued runs: Ray's get their tasks at once; local ones when their device has room."""
    queued = [registry.get(run_id) for run_id in run_ids]
    on_ray = [run for run in queued if run.executor == "ray"]
    if on_ray:
        from . import ray_executor

        ray_executor.submit(registry, on_ray)
    if len(on_ray) < len(queued):
        dispatch(registry, limits)


def executor_name(name: str | None = None) -> str:
    """``name``, else $SYMLAB_EXECUTOR, else "local"; checked."""
    name = name or os.environ.get(EXECUTOR_ENV) or "local"
    if name not in EXECUTORS:
        raise ValueError(f"the executor must be one of {', '.join(EXECUTORS)} (got {name!r}; set by --executor or "
                         f"{EXECUTOR_ENV})")
    return name


def cancel(registry: Registry, run_id: int) -> None:
    """Queued: cancelled at once. Running: its worker stops within a second or so, keeping its
    last checkpoint (so it can be resumed)."""
    run = registry.get(run_id)
    if run.executor == "ray" and run.status in ACTIVE:
        from . import ray_executor

        ray_executor.cancel(registry, run)
    elif run.status == QUEUED:
        registry.update(run_id, status=CANCELLED, finished=time.time(), message="cancelled before it started")
    elif run.status == RUNNING:
        registry.update(run_id, cancel_requested=1)
        if process_alive(run.pid, run.pid_started):
            try:
                os.kill(run.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        elif run.pid is not None:
            registry.update(run_id, status=CANCELLED, finished=time.time(), pid=None, message="cancelled")


def resume(registry: Registry, run_id: int, limits: RunLimits | None = None) -> None:
    """Queue an interrupted, cancelled or failed run again; it continues from its checkpoint."""
    run = registry.get(run_id)
    if run.status not in RESUMABLE:
        raise ValueError(f"run #{run_id} is {run.status}; only {', '.join(RESUMABLE)} runs can be resumed")
    registry.update(run_id, status=QUEUED, cancel_requested=0, finished=None, message="queued to resume")
    start(registry, [run_id], limits)
