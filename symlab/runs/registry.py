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

Each run has a random public ``token``, which links name it by (its id is a counter anyone could guess), and
every launch, resume and restart is recorded (``launches``), for the caps that count them. A run keeps its last
two checkpoints, each named by the epoch it was written after (``checkpoint-00012.pt``): one that cannot be read
is set aside and the run goes on from the one before.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import secrets
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from symlab.specs.run_kind import QUEUED, RUNNING, RunKind
from symlab.specs.settings import DATABASE_URL_ENV, runs_directory
from symlab.specs.settings import database_url as database_url_setting

from .database import DatabaseError, open_database, shown_url


def fair_order(queued: list, running_owners: list[str]) -> list:
    """``queued`` runs (rows with ``id`` and ``owner``, oldest first) in the order they start: round-robin by the
    browser that launched them. A run's round is its owner's running runs plus its place among its owner's queued
    ones, so a browser's second run waits behind every other browser's first; within a round, the oldest first."""
    round_of = collections.Counter(running_owners)
    keyed = []
    for row in queued:
        keyed.append((round_of[row["owner"]], row["id"], row))
        round_of[row["owner"]] += 1
    return [row for _, _, row in sorted(keyed, key=lambda item: item[:2])]


@dataclass
class DeviceSlots:
    """A device's places for training runs: ``limit`` for any run, and one more that only a quick run may take (a
    run of seconds: a class-path step's pair, say). A quick run takes a general place where one is free."""

    limit: int
    regular: int = 0  # running runs that are not quick
    quick: int = 0

    def general_in_use(self) -> int:
        return self.regular + max(self.quick - 1, 0)

    def has_room(self, quick: bool) -> bool:
        if quick:  # a device closed to training (limit 0) has no quick place either
            return self.limit > 0 and self.regular + self.quick < self.limit + 1
        return self.general_in_use() < self.limit

    def take(self, quick: bool) -> None:
        if quick:
            self.quick += 1
        else:
            self.regular += 1


class RegistryError(RuntimeError):
    """The runs directory or its database cannot be used; the message says why. ``public``: what a visitor of a
    hosted server is told, without the database's address (user, host, port, name; the server's log keeps the
    message). ``transient``: the database may come back by itself, so a writer may wait and retry."""

    def __init__(self, message: str, *, public: str | None = None, transient: bool = False):
        super().__init__(message)
        self.public = public or message
        self.transient = transient


# Registries written before runs recorded their lab hold MNIST runs only.
LEGACY_LAB = "mnist"
LEGACY_CHECKPOINT = "checkpoint.pt"  # a run's one checkpoint before they were kept by epoch
CHECKPOINT_NAME = re.compile(r"checkpoint-(\d+)\.pt")
UNREADABLE = ".unreadable"  # the suffix a checkpoint that could not be read is set aside with
KEPT_CHECKPOINTS = 2  # the newest and the one before it: a run whose newest is damaged goes on from the other


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
    token: str = ""  # random and public: what links name the run by

    @property
    def label(self) -> str:
        return f"#{self.id} {self.config.label}"


# Written for both databases: {id} and {real} are filled in with each one's types (a PostgreSQL REAL
# is single precision, too coarse for timestamps).
_SCHEMA = (
    """
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
    lab TEXT NOT NULL DEFAULT '"""
    + LEGACY_LAB
    + """',
    executor TEXT NOT NULL DEFAULT 'local',
    node TEXT NOT NULL DEFAULT '',
    task TEXT NOT NULL DEFAULT '',
    owner TEXT NOT NULL DEFAULT '',
    token TEXT NOT NULL DEFAULT ''
)""",
    """
CREATE TABLE IF NOT EXISTS metrics (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    epoch INTEGER NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, epoch)
)""",
    """
CREATE TABLE IF NOT EXISTS launches (
    run_id INTEGER NOT NULL REFERENCES runs(id),
    owner TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL,
    at {real} NOT NULL,
    what TEXT NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS launches_by_time ON launches (at)",
    # Wrong lecturer keys (symlab.serving.key_guard), one count for all of a server's page processes.
    """
CREATE TABLE IF NOT EXISTS wrong_keys (
    browser TEXT NOT NULL,
    at {real} NOT NULL
)""",
    "CREATE INDEX IF NOT EXISTS wrong_keys_by_time ON wrong_keys (at)",
)


# Columns added after the first registries were written: an older registry gains them when opened.
_ADDED_COLUMNS = {
    "lab": f"TEXT NOT NULL DEFAULT '{LEGACY_LAB}'",
    "executor": "TEXT NOT NULL DEFAULT 'local'",
    "node": "TEXT NOT NULL DEFAULT ''",
    "task": "TEXT NOT NULL DEFAULT ''",
    "owner": "TEXT NOT NULL DEFAULT ''",
    "token": "TEXT NOT NULL DEFAULT ''",
}
LAUNCH, RESUME, RESTART = "launch", "resume", "restart"  # what a row of launches records


def new_token() -> str:
    """A run's public token: 72 random bits, URL-safe."""
    return secrets.token_urlsafe(9)


class Registry:
    """The runs directory (one folder per run: checkpoint and log) and the database of runs: an SQLite
    file in that directory, or PostgreSQL at ``database_url`` (default: $SYMLAB_DATABASE_URL)."""

    def __init__(
        self, kinds: Mapping[str, RunKind], runs_dir: str | os.PathLike | None = None, database_url: str | None = None
    ):
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
                for row in connection.execute("SELECT id FROM runs WHERE token = ''").fetchall():  # older runs
                    connection.execute("UPDATE runs SET token = ? WHERE id = ?", (new_token(), row["id"]))
                connection.execute("CREATE UNIQUE INDEX IF NOT EXISTS runs_by_token ON runs (token)")
        except DatabaseError as error:
            if url:
                raise RegistryError(
                    f"cannot use the run registry's database {shown_url(url)}: {error}. Check "
                    f"{DATABASE_URL_ENV} and that the server is up and reachable; no run was "
                    "changed.",
                    public="cannot use the run registry's database (the server's log says why); no run was changed",
                    transient=error.transient,
                ) from None
            raise RegistryError(
                f"cannot use the run registry {self.db.where}: {error}. Choose a writable directory "
                "with SYMLAB_RUNS_DIR or --runs-dir; where the file is damaged, move it aside (a new "
                "one is made, and the runs' folders stay).",
                transient=error.transient,
            ) from None
        except OSError as error:
            raise self._unusable_directory(error) from None
        self.path = self.db.where

    def _unusable_directory(self, error: Exception) -> RegistryError:
        return RegistryError(
            f"cannot use the runs directory {self.root}: {error}. Choose a writable "
            f"directory with SYMLAB_RUNS_DIR or --runs-dir."
        )

    def _execute(self, sql: str, parameters=(), *, write=False) -> list:
        try:
            with self.db.transaction(write=write) as connection:
                cursor = connection.execute(sql, parameters)
                return cursor.fetchall() if cursor.description else []
        except DatabaseError as error:
            raise self._failure(error, writing=write) from None

    @contextlib.contextmanager
    def _writing(self):
        """A write transaction of several statements."""
        try:
            with self.db.transaction(write=True) as connection:
                yield connection
        except DatabaseError as error:
            raise self._failure(error, writing=True) from None

    def _failure(self, error: DatabaseError, writing: bool) -> RegistryError:
        kept = " the runs recorded so far are kept" if writing else ""
        if self.db.url:
            hint = (
                f" Check {DATABASE_URL_ENV} and that the server is up;{kept} on it."
                if writing
                else f" Check {DATABASE_URL_ENV} and that the server is up."
            )
            public = "the run registry's database failed (the server's log says why)" + (f";{kept}" if writing else "")
        else:
            hint = f" Check that its directory is writable and has free space;{kept}." if writing else ""
            public = None
        return RegistryError(
            f"the run registry {self.path} failed: {error}.{hint}", public=public, transient=error.transient
        )

    def run_dir(self, run_id: int) -> Path:
        return self.root / f"run-{run_id:05d}"

    def checkpoint_path(self, run_id: int, epoch: int | None = None) -> Path:
        """The checkpoint written after ``epoch``; without one, the newest the run has (where it has none, a path
        where none is)."""
        if epoch is not None:
            return self.run_dir(run_id) / f"checkpoint-{epoch:05d}.pt"
        kept = self.checkpoints(run_id)
        return kept[0] if kept else self.run_dir(run_id) / LEGACY_CHECKPOINT

    def checkpoints(self, run_id: int) -> list[Path]:
        """The run's checkpoints, newest first (one written before they were kept by epoch counts as the oldest);
        none set aside as unreadable."""
        folder = self.run_dir(run_id)
        by_epoch = sorted(
            (path for path in folder.glob("checkpoint-*.pt") if CHECKPOINT_NAME.fullmatch(path.name)),
            key=lambda path: checkpoint_epoch(path) or 0,  # each name kept says its epoch
            reverse=True,
        )
        legacy = folder / LEGACY_CHECKPOINT
        return by_epoch + ([legacy] if legacy.exists() else [])

    def keep_newest_checkpoints(self, run_id: int) -> None:
        """Delete all but the :data:`KEPT_CHECKPOINTS` newest checkpoints."""
        for path in self.checkpoints(run_id)[KEPT_CHECKPOINTS:]:
            path.unlink(missing_ok=True)

    def drop_checkpoints(self, run_id: int) -> None:
        """Delete every checkpoint of the run, those set aside and half-written ones included (a restart)."""
        for path in self.run_dir(run_id).glob("checkpoint*"):
            path.unlink(missing_ok=True)

    def log_path(self, run_id: int) -> Path:
        return self.run_dir(run_id) / "worker.log"

    # --- records --------------------------------------------------------------------------

    def create(
        self,
        lab: str,
        config,
        device: str,
        *,
        status=QUEUED,
        session="",
        source="app",
        pid=None,
        executor: str = "local",
        owner: str = "",
    ) -> int:
        """Record a run of ``lab`` (one of :attr:`kinds`) with ``config`` on ``device``, to be trained by
        ``executor``, launched by ``owner`` (:attr:`Run.owner`)."""
        self.kind(lab)
        now = time.time()
        with self._writing() as connection:
            rows = connection.execute(
                "INSERT INTO runs (lab, config, status, device, created, started, heartbeat, pid, pid_started, "
                "session, source, executor, node, owner, token) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "RETURNING id",
                (
                    lab,
                    json.dumps(config.to_dict()),
                    status,
                    device,
                    now,
                    now if status == RUNNING else None,
                    now if status == RUNNING else None,
                    pid,
                    process_start(pid) if pid else None,
                    session,
                    source,
                    executor,
                    node_name() if pid else "",
                    owner,
                    new_token(),
                ),
            ).fetchall()
            run_id = rows[0]["id"]
            connection.execute(
                "INSERT INTO launches (run_id, owner, source, at, what) VALUES (?, ?, ?, ?, ?)",
                (run_id, owner, source, now, LAUNCH),
            )
        self.run_dir(run_id).mkdir(parents=True, exist_ok=True)
        return run_id

    def record_launch(self, run_id: int, owner: str, source: str, what: str) -> None:
        """Record that ``owner`` (a browser's id, or "") from ``source`` resumed or restarted the run (``what``)."""
        self._execute(
            "INSERT INTO launches (run_id, owner, source, at, what) VALUES (?, ?, ?, ?, ?)",
            (run_id, owner, source, time.time(), what),
            write=True,
        )

    def forget_newest_launch(self, run_id: int) -> None:
        """Count the run's newest launch, resume or restart for no cap: it was cancelled before it started."""
        self._execute(
            "DELETE FROM launches WHERE run_id = ? AND at = (SELECT MAX(at) FROM launches WHERE run_id = ?)",
            (run_id, run_id),
            write=True,
        )

    def launches_since(self, since: float, *, source: str | None = None, owner: str | None = None) -> int:
        """How many launches, resumes and restarts (from ``source``, by ``owner``) there were after the time
        ``since``."""
        conditions: list[str] = ["at > ?"]
        parameters: list[float | str] = [since]
        for column, value in (("source", source), ("owner", owner)):
            if value is not None:
                conditions.append(f"{column} = ?")
                parameters.append(value)
        rows = self._execute(f"SELECT COUNT(*) AS n FROM launches WHERE {' AND '.join(conditions)}", tuple(parameters))
        return rows[0]["n"]

    def record_wrong_key(self, browser: str, at: float) -> None:
        """A wrong lecturer key typed in ``browser`` (its id) at ``at`` (seconds since the epoch); rows older than
        a day go."""
        self._execute("INSERT INTO wrong_keys (browser, at) VALUES (?, ?)", (browser, at), write=True)
        self._execute("DELETE FROM wrong_keys WHERE at < ?", (at - 86400.0,), write=True)

    def wrong_keys_since(self, since: float) -> list[tuple[str, float]]:
        """(browser, time) of each wrong lecturer key after ``since``, oldest first."""
        rows = self._execute("SELECT browser, at FROM wrong_keys WHERE at > ? ORDER BY at", (since,))
        return [(row["browser"], row["at"]) for row in rows]

    def forget_wrong_keys(self, browser: str) -> None:
        """``browser`` typed the right key: its slips count no more."""
        self._execute("DELETE FROM wrong_keys WHERE browser = ?", (browser,), write=True)

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

    def has_status(self, status: str) -> bool:
        return bool(self._execute("SELECT 1 FROM runs WHERE status = ? LIMIT 1", (status,)))

    def update(self, run_id: int, **values) -> None:
        if "result" in values and values["result"] is not None:
            values["result"] = json.dumps(values["result"])
        assignments = ", ".join(f"{name} = ?" for name in values)
        self._execute(f"UPDATE runs SET {assignments} WHERE id = ?", (*values.values(), run_id), write=True)

    def heartbeat(self, run_id: int, epoch: int, progress: float) -> bool:
        """Record progress; returns whether a cancel was requested."""
        rows = self._execute(
            "UPDATE runs SET heartbeat = ?, epoch = ?, progress = ? WHERE id = ? RETURNING cancel_requested",
            (time.time(), epoch, progress, run_id),
            write=True,
        )
        return bool(rows and rows[0]["cancel_requested"])

    def add_metrics(self, run_id: int, metrics: dict) -> None:
        self._execute(
            "INSERT INTO metrics (run_id, epoch, data) VALUES (?, ?, ?) "
            "ON CONFLICT (run_id, epoch) DO UPDATE SET data = excluded.data",
            (run_id, metrics["epoch"], json.dumps(metrics)),
            write=True,
        )

    def metrics(self, run_ids) -> dict[int, list[dict]]:
        """Per-epoch metrics of the given runs, by run id, in epoch order."""
        run_ids = list(run_ids)
        found: dict[int, list[dict]] = {run_id: [] for run_id in run_ids}
        if not run_ids:
            return found
        marks = ", ".join("?" * len(run_ids))
        for row in self._execute(
            f"SELECT run_id, data FROM metrics WHERE run_id IN ({marks}) ORDER BY run_id, epoch", tuple(run_ids)
        ):
            found[row["run_id"]].append(json.loads(row["data"]))
        return found

    def drop_metrics_after(self, run_id: int, epoch: int) -> None:
        self._execute("DELETE FROM metrics WHERE run_id = ? AND epoch > ?", (run_id, epoch), write=True)

    def claim_queued(self, limit_per_device: int, quick: Callable[[Run], bool] | None = None) -> list[Run]:
        """Mark queued local runs running, in their fair order (:func:`fair_order`), as many as each device has room
        for (atomic). Runs on a Ray cluster wait in Ray's own queue. Runs that ``quick`` says take seconds have one
        more place per device, their own (:class:`DeviceSlots`): a class's small run does not wait out a long one."""
        try:
            with self.db.transaction(write=True) as connection:
                slots: dict[str, DeviceSlots] = collections.defaultdict(lambda: DeviceSlots(limit_per_device))
                for row in connection.execute(
                    "SELECT * FROM runs WHERE status = ? AND executor = 'local'", (RUNNING,)
                ).fetchall():
                    slots[row["device"]].take(self._is_quick(row, quick))
                claimed = []
                for row in self._fair_queue(connection):
                    device, is_quick = slots[row["device"]], self._is_quick(row, quick)
                    if not device.has_room(is_quick):
                        continue
                    device.take(is_quick)
                    now = time.time()
                    connection.execute(
                        "UPDATE runs SET status = ?, started = COALESCE(started, ?), heartbeat = ?, "
                        "pid = NULL, pid_started = NULL, message = 'starting' WHERE id = ?",
                        (RUNNING, now, now, row["id"]),
                    )
                    claimed.append(row["id"])
        except DatabaseError as error:
            raise self._failure(error, writing=True) from None
        return [self.get(run_id) for run_id in claimed]

    def _is_quick(self, row, quick: Callable[[Run], bool] | None) -> bool:
        """Whether ``quick`` says the run in ``row`` takes seconds; not where its config cannot be read (an old or
        damaged row waits for a general place, as every run did)."""
        if quick is None:
            return False
        try:
            return quick(self._to_run(row))
        except (ValueError, KeyError, TypeError):
            return False

    def queue_positions(self) -> dict[int, int]:
        """Each queued local run's place in its device's line (1: the next to start), in their fair order."""
        try:
            with self.db.transaction(write=False) as connection:
                queue = self._fair_queue(connection)
        except DatabaseError as error:
            raise self._failure(error, writing=False) from None
        places: dict[str, int] = {}
        positions = {}
        for row in queue:
            places[row["device"]] = places.get(row["device"], 0) + 1
            positions[row["id"]] = places[row["device"]]
        return positions

    @staticmethod
    def _fair_queue(connection) -> list:
        running = [
            row["owner"]
            for row in connection.execute(
                "SELECT owner FROM runs WHERE status = ? AND executor = 'local'", (RUNNING,)
            ).fetchall()
        ]
        queued = connection.execute(
            "SELECT * FROM runs WHERE status = ? AND executor = 'local' ORDER BY id", (QUEUED,)
        ).fetchall()
        return fair_order(queued, running)

    def register_process(self, run_id: int, pid: int, node: str | None = None) -> None:
        self.update(
            run_id, pid=pid, pid_started=process_start(pid), heartbeat=time.time(), message="", node=node or node_name()
        )

    def kind(self, lab: str) -> RunKind:
        if lab not in self.kinds:
            raise RegistryError(f"the registry holds runs of the lab {lab!r}, which keeps no runs here")
        return self.kinds[lab]

    def _to_run(self, row) -> Run:
        config = self.kind(row["lab"]).config_type.from_dict(json.loads(row["config"]))
        return Run(
            id=row["id"],
            lab=row["lab"],
            config=config,
            status=row["status"],
            device=row["device"],
            created=row["created"],
            started=row["started"],
            finished=row["finished"],
            heartbeat=row["heartbeat"],
            pid=row["pid"],
            pid_started=row["pid_started"],
            epoch=row["epoch"],
            progress=row["progress"],
            message=row["message"],
            session=row["session"],
            source=row["source"],
            result=json.loads(row["result"]) if row["result"] else None,
            cancel_requested=bool(row["cancel_requested"]),
            executor=row["executor"],
            node=row["node"],
            task=row["task"],
            owner=row["owner"],
            token=row["token"],
        )


def checkpoint_epoch(path: Path) -> int | None:
    """The epoch a checkpoint was written after, by its name; None for one written before names said it."""
    found = CHECKPOINT_NAME.fullmatch(Path(path).name)
    return int(found.group(1)) if found else None


def retried(call: Callable, limit_seconds: float, on_wait: Callable[[RegistryError, float], None] | None = None):
    """``call()``, tried again after growing pauses (0.5 s, doubling up to 15 s) while it fails because the database
    is unreachable (:attr:`RegistryError.transient`), for up to ``limit_seconds`` in all; then its error.
    ``on_wait(error, pause)`` hears of each pause."""
    waited, pause = 0.0, 0.5
    while True:
        try:
            return call()
        except RegistryError as error:
            if not error.transient or waited + pause > limit_seconds:
                raise
            if on_wait is not None:
                on_wait(error, pause)
            time.sleep(pause)
            waited += pause
            pause = min(2 * pause, 15.0)


def node_name() -> str:
    return socket.gethostname()


def process_start(pid: int) -> str | None:
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
