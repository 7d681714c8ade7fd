"""Registry and manager of background training runs: each run trains in its own OS process.

A database holds every run's lab, configuration, status, timestamps, progress and per-epoch
metrics: an SQLite file (``registry.sqlite3`` in the runs directory) by default, or a PostgreSQL
server (``SYMLAB_DATABASE_URL``, :mod:`symlab.runs.database`). Each run's checkpoint and log sit in its
own folder in the runs directory. Any process may read it: the app, the command line, the workers.

What a run is belongs to its lab: a :class:`RunKind` (the lab's config type, the device a config
trains on, how its training starts), found by the lab's name in the lab registry (``Lab.runs``). The registry
stores a run's config as a dict and hands it back as the lab's config type; the worker
(:mod:`symlab.runs.worker`) drives the lab's :class:`Training` epoch by epoch.

Life of a run: ``queued`` → ``running`` → ``finished`` | ``diverged`` | ``failed`` |
``cancelled``. A run whose process disappears (killed, machine restarted) is found by
:func:`reap` and marked ``interrupted``; :func:`resume` queues it again and it continues from its
last completed epoch. :func:`dispatch` starts queued runs while fewer than
``max_concurrent_per_device`` run on their device; every worker calls it when it ends, so the
queue drains with no browser open.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symlab.specs.run_kind import QUEUED, RUNNING, RunKind
from symlab.specs.settings import DATABASE_URL_ENV, runs_directory
from symlab.specs.settings import database_url as database_url_setting

from .database import DatabaseError, open_database, shown_url


class RegistryError(RuntimeError):
    """The runs directory or its database cannot be used; the message says why."""


# Registries written before runs recorded their lab hold MNIST runs only.
LEGACY_LAB = "mnist"


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
    # Who launched it, as a page knows its visitor: a one-way hash of its browser's id; empty when not known
    # (the command line, and runs recorded before it was kept).
    owner: str = ""

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
    task TEXT NOT NULL DEFAULT '',
    owner TEXT NOT NULL DEFAULT ''
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
                  "task": "TEXT NOT NULL DEFAULT ''", "owner": "TEXT NOT NULL DEFAULT ''"}


class Registry:
    """The runs directory (one folder per run: checkpoint and log) and the database of runs: an SQLite
    file in that directory, or PostgreSQL at ``database_url`` (default: $SYMLAB_DATABASE_URL)."""

    def __init__(self, kinds: Mapping[str, RunKind], runs_dir: str | os.PathLike | None = None,
                 database_url: str | None = None):
        self.kinds = dict(kinds)  # lab name -> its RunKind, for the labs whose runs this registry reads
        self.root = Path(runs_dir).expanduser().resolve() if runs_dir else runs_directory()
        url = database_url_setting(database_url)
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

    def create(self, lab: str, config, device: str, *, status=QUEUED, session="", source="app", pid=None,
               executor: str = "local", owner: str = "") -> int:
        """Record a run of ``lab`` (one of :attr:`kinds`) with ``config`` on ``device``, to be trained by
        ``executor``, launched by ``owner`` (:attr:`Run.owner`)."""
        self.kind(lab)
        now = time.time()
        rows = self._execute(
            "INSERT INTO runs (lab, config, status, device, created, started, heartbeat, pid, pid_started, session,"
            " source, executor, node, owner) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (lab, json.dumps(config.to_dict()), status, device, now, now if status == RUNNING else None,
             now if status == RUNNING else None, pid, _process_start(pid) if pid else None, session, source,
             executor, node_name() if pid else "", owner),
            write=True)
        run_id = rows[0]["id"]
        self.run_dir(run_id).mkdir(parents=True, exist_ok=True)
        return run_id

    def get(self, run_id: int) -> Run:
        rows = self._execute("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise KeyError(f"no run #{run_id} in {self.path}")
        return self._to_run(rows[0])

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
        return [self._to_run(row) for row in self._execute(f"SELECT * FROM runs{where} ORDER BY id", tuple(parameters))]

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

    def kind(self, lab: str) -> RunKind:
        if lab not in self.kinds:
            raise RegistryError(f"the registry holds runs of the lab {lab!r}, which keeps no runs here")
        return self.kinds[lab]

    def _to_run(self, row) -> Run:
        config = self.kind(row["lab"]).config_type.from_dict(json.loads(row["config"]))
        return Run(id=row["id"], lab=row["lab"], config=config, status=row["status"],
                   device=row["device"], created=row["created"], started=row["started"], finished=row["finished"],
                   heartbeat=row["heartbeat"], pid=row["pid"], pid_started=row["pid_started"], epoch=row["epoch"], progress=row["progress"],
                   message=row["message"], session=row["session"], source=row["source"],
                   result=json.loads(row["result"]) if row["result"] else None,
                   cancel_requested=bool(row["cancel_requested"]), executor=row["executor"], node=row["node"],
                   task=row["task"], owner=row["owner"])


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
