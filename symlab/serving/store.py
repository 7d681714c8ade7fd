"""The shared result store: what the pages computed, kept beyond one process and one start.

Results are stored by their key (a kind and the validated config that produced it) and by the version of
the code that computes them, as data-only bytes (:mod:`symlab.serving.codec`) with a checksum:

- an SQLite file in the runs directory (``results.sqlite3``) by default. SQLite, not a cache library:
  the run registry already uses it (:mod:`symlab.runs.database`), it needs no server, every process of the
  machine reads and writes it safely at once (WAL), and a crash mid-write loses nothing already stored;
- the PostgreSQL database of ``SYMLAB_DATABASE_URL`` when it is set, so that several servers (replicas
  behind a proxy, workers of a Ray cluster) share one store.

Any server process, compute worker or Ray task reads and writes it. A result computed once is served to
every session and again after a restart. An entry that was written by other code (another version) is not even
looked up: the version is part of the key. An entry that does not read back whole (its checksum, or anything
the codec refuses or fails on: a tree too deep, a number past its type's range, a type no lab lists, memory) is
deleted with one warning and reads as absent, so that it is computed again, never shown. An SQLite file that
is itself corrupt ("file is not a database", "database disk image is malformed") is moved aside, with its
journal, as ``results.sqlite3.corrupt-<unix time>``, with one warning, and a fresh store begun: results can
always be computed again (the run registry's file, which holds runs, is never touched). A store on PostgreSQL
is never moved; only its unreadable entries are deleted. The least recently used entries go when the store
grows past its cap.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Hashable
from pathlib import Path

from symlab.runs.database import DatabaseError, SqliteDatabase, open_database
from symlab.serving import codec
from symlab.specs.settings import database_url
from symlab.specs.tasks import kind_of

LOG = logging.getLogger("symlab.serving.store")
FILE_NAME = "results.sqlite3"
DEFAULT_MAX_MB = 2048
USE_RESOLUTION_SECONDS = 60.0  # "last used" is rewritten at most this often per entry (reads stay reads)
# The code whose change can change a result: the computations and what they are built from.
COMPUTATION_SOURCES = ("lib", "labs", "specs", "serving/codec.py")  # under symlab/
# SQLite's primary result codes for a file that is not a database, or a damaged one (sqlite3.Error.sqlite_errorcode).
CORRUPT_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    version TEXT NOT NULL,
    description TEXT NOT NULL,
    payload {bytes} NOT NULL,
    checksum TEXT NOT NULL,
    size INTEGER NOT NULL,
    seconds {real} NOT NULL,
    created {real} NOT NULL,
    used {real} NOT NULL
)"""
# Every write checks the store's total size, and eviction walks the results by last use: without an index both
# read the whole table, payloads included (size and used follow the payload in each row), 180 ms a write on a store
# of 400 results (470 MB); with it, 0.05 ms.
_INDEX = "CREATE INDEX IF NOT EXISTS results_by_use ON results (used, key, size)"


def computation_version() -> str:
    """A digest of the source of every computation (and of the libraries' versions that round their
    arithmetic): any change there makes every stored result another version's."""
    global _version
    if _version is None:
        import numpy
        import torch

        _version = source_digest(
            Path(__file__).resolve().parents[1], f"torch {torch.__version__} numpy {numpy.__version__}"
        )
    return _version


def source_digest(root: Path, salt: str = "") -> str:
    """The digest of :data:`COMPUTATION_SOURCES` under ``root`` (names and contents), and ``salt``."""
    digest = hashlib.sha256(salt.encode())
    for name in COMPUTATION_SOURCES:
        path = root / name
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path] if path.exists() else []:
            digest.update(str(source.relative_to(root)).encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


_version: str | None = None


def describe(key: Hashable) -> str:
    """``key`` as canonical JSON: equal keys, equal text, in any process."""
    return json.dumps(_plain(key), sort_keys=True, separators=(",", ":"))


def _plain(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            "type": type(value).__qualname__,
            **{field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)},
        }
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a result's key cannot hold a {type(value).__name__}")


IN_LIST_KEYS = 500  # keys per ``IN (...)`` list: well under SQLite's cap on a statement's parameters


def _in_lists(row_keys: list[str]):
    """``row_keys`` in lists short enough for one statement, each with its placeholders."""
    for start in range(0, len(row_keys), IN_LIST_KEYS):
        chunk = tuple(row_keys[start : start + IN_LIST_KEYS])
        yield ",".join("?" * len(chunk)), chunk


def _total_bytes(connection) -> int:
    return int(connection.execute("SELECT COALESCE(SUM(size), 0) AS total FROM results").fetchone()["total"])


def _decoded(row):
    """A stored row's result; any exception where its bytes do not read back whole."""
    payload = bytes(row["payload"])
    if hashlib.sha256(payload).hexdigest() != row["checksum"]:
        raise codec.CodecError("its checksum does not match")
    return codec.decode(payload)


def _is_corrupt(error: sqlite3.Error) -> bool:
    code = getattr(error, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in CORRUPT_CODES


def _identity(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` is now (device, inode): another process may have moved a corrupt one aside."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def _aside(path: Path) -> Path:
    """A free name beside ``path`` for its corrupt copy."""
    stem = f"{path.name}.corrupt-{int(time.time())}"
    candidates = (path.with_name(stem if n == 0 else f"{stem}.{n}") for n in range(1000))
    return next(c for c in candidates if not any(Path(f"{c}{s}").exists() for s in ("", "-wal", "-shm")))


class StoreRebuilt(DatabaseError):
    """The SQLite file was found corrupt and moved aside; the operation can run again, on a fresh store."""


class ResultStore:
    """Results by key, in SQLite (``runs_dir``/results.sqlite3) or PostgreSQL (``url``, default
    $SYMLAB_DATABASE_URL). Reads and writes never raise for the store's sake: an unreachable database
    or an unreadable entry (then deleted) is logged and reads as absent, and the result is computed as without a
    store; a corrupt SQLite file is moved aside and a fresh one begun."""

    def __init__(self, runs_dir: str | os.PathLike, url: str | None = None, max_bytes: int | None = None):
        """``max_bytes``: the cap on the stored results' total size (default 2 GB)."""
        url = database_url(url)
        self.root = Path(runs_dir)
        self.db = open_database(self.root, url) if url else SqliteDatabase(self.root / FILE_NAME)
        self.version = computation_version()
        self.max_bytes = max_bytes if max_bytes is not None else DEFAULT_MAX_MB * 2**20
        self._ready = False
        self._lock = threading.Lock()
        self._used: dict[str, float] = {}
        self._local = threading.local()

    @property
    def where(self) -> str:
        return self.db.where

    @property
    def spec(self) -> tuple[str, str | None, int]:
        """What opens this store again in another process (a compute worker): ``ResultStore(*spec)``."""
        return str(self.root), self.db.url, self.max_bytes

    def _connection(self, write: bool = False):
        if isinstance(self.db, SqliteDatabase):
            return self._sqlite()
        if not self._ready:
            with self._lock:
                if not self._ready:
                    self.root.mkdir(parents=True, exist_ok=True)
                    with self.db.transaction(write=True) as connection:
                        connection.execute(_SCHEMA.format(**self.db.types))
                        connection.execute(_INDEX)
                    self._ready = True
        return self.db.transaction(write=write)

    @contextlib.contextmanager
    def _sqlite(self):
        """This thread's connection to the SQLite file, kept open (opening one per read cost a page run as
        much as the read); each statement commits on its own. Writes skip the fsync of every commit
        (synchronous=NORMAL, safe with write-ahead logging: a crash loses at most the last writes, never the file).
        A file found corrupt is moved aside (:class:`StoreRebuilt`); a connection to a file that is no longer
        the store's (moved aside by another thread or process) is opened again, on the fresh one."""
        local = self._local
        try:
            if getattr(local, "identity", None) != _identity(self.db.path):
                self._close_thread_connection()
            if getattr(local, "connection", None) is None:
                self._open_thread_connection()
            yield local.connection
        except sqlite3.Error as error:
            if _is_corrupt(error):
                self._move_aside(getattr(local, "identity", None), error)
            raise DatabaseError(str(error)) from None

    def _open_thread_connection(self) -> None:
        """This thread's connection, kept once it is set up (WAL, the table), with the file it opened."""
        self.root.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.db.path, timeout=30, isolation_level=None, check_same_thread=True)
        self._local.identity = _identity(self.db.path)
        try:
            connection.row_factory = sqlite3.Row
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute("PRAGMA busy_timeout=30000")
            if (
                connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'results'").fetchone()
                is None
            ):
                connection.execute(_SCHEMA.format(**self.db.types))
            connection.execute(_INDEX)  # also on a store made before it had one
        except sqlite3.Error:
            connection.close()
            raise
        self._local.connection = connection

    def _close_thread_connection(self) -> None:
        connection, self._local.connection = getattr(self._local, "connection", None), None
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):
                connection.close()

    def _move_aside(self, identity: tuple[int, int] | None, error: sqlite3.Error) -> None:
        """Move the corrupt SQLite file (the one this thread opened: ``identity``) and its journal aside, so that
        the next statement begins a fresh store; :class:`StoreRebuilt` says so. Where another thread or process
        moved it first, this thread only opens the fresh one."""
        path = self.db.path
        with self._lock:
            self._close_thread_connection()
            moved = None
            # Only the result store's own file, never the run registry's; and only the file this thread found corrupt.
            if path.name == FILE_NAME and identity is not None and _identity(path) == identity:
                moved = _aside(path)
                for suffix in ("-wal", "-shm", ""):
                    with contextlib.suppress(FileNotFoundError):
                        os.replace(f"{path}{suffix}", f"{moved}{suffix}")
        if moved is not None:
            LOG.warning("result store %s is corrupt (%s): moved to %s, a fresh store begun", path, error, moved.name)
        raise StoreRebuilt(f"{path} was corrupt ({error}) and is begun afresh") from None

    def _again_if_rebuilt(self, operation: Callable[[], object]):
        """``operation()``, once more where the SQLite file was found corrupt and a fresh store begun."""
        try:
            return operation()
        except StoreRebuilt:
            return operation()

    def row_key(self, key: Hashable) -> str:
        text = describe(key)
        return f"{self.version}:{kind_of(key)}:{hashlib.sha256(text.encode()).hexdigest()[:32]}"

    # ------------------------------------------------------------------ reads

    def get(self, key: Hashable, default=None):
        """The stored result of ``key`` (this code's version), or ``default``. An entry that does not read back
        whole is deleted."""
        try:
            row_key = self.row_key(key)
            row = self._again_if_rebuilt(lambda: self._row(row_key))
        except (DatabaseError, TypeError, OSError) as error:
            LOG.warning("result store %s unreadable (%s): computing instead", self.where, error)
            return default
        if row is None:
            return default
        try:
            value = _decoded(row)
        except Exception as error:  # noqa: BLE001 (whatever the bytes made the decoder do, they are not shown)
            LOG.warning(
                "stored result %s is unreadable (%s): deleted, computing it again",
                row_key,
                f"{type(error).__name__}: {error}"[:300],
            )
            self.discard(key)
            return default
        self._touch(row_key)
        return value

    def _row(self, row_key: str):
        with self._connection() as connection:
            return connection.execute("SELECT payload, checksum FROM results WHERE key = ?", (row_key,)).fetchone()

    def __contains__(self, key: Hashable) -> bool:
        try:
            with self._connection() as connection:
                return (
                    connection.execute("SELECT 1 FROM results WHERE key = ?", (self.row_key(key),)).fetchone()
                    is not None
                )
        except (DatabaseError, TypeError, OSError):
            return False

    def keys_present(self, keys) -> set:
        """Those of ``keys`` stored (one query)."""
        keys = list(keys)
        wanted = {self.row_key(key): key for key in keys}
        found: set = set()
        try:
            with self._connection() as connection:
                for marks, chunk in _in_lists(list(wanted)):
                    rows = connection.execute(f"SELECT key FROM results WHERE key IN ({marks})", chunk).fetchall()
                    found.update(wanted[row["key"]] for row in rows)
        except (DatabaseError, OSError):
            return set()
        return found

    # ------------------------------------------------------------------ writes

    def put(self, key: Hashable, value, seconds: float = 0.0) -> bool:
        """Store ``value`` under ``key``; False (and a log line) where it cannot be (a type the codec
        refuses, a database that cannot be reached)."""
        try:
            row_key, description = self.row_key(key), describe(key)
            payload = codec.encode(value)
        except (codec.CodecError, TypeError) as error:
            LOG.warning("result %s not stored: %s", kind_of(key), error)
            return False
        now = time.time()
        row = (
            row_key,
            str(kind_of(key)),
            self.version,
            description,
            payload,
            hashlib.sha256(payload).hexdigest(),
            len(payload),
            float(seconds),
            now,
            now,
        )
        try:
            self._again_if_rebuilt(lambda: self._write(row))
            self._evict()
        except (DatabaseError, OSError) as error:
            LOG.warning("result store %s unwritable (%s): %s kept in memory only", self.where, error, kind_of(key))
            return False
        return True

    def _write(self, row: tuple) -> None:
        with self._connection() as connection:
            connection.execute(
                "INSERT INTO results (key, kind, version, description, payload, checksum, size, seconds, created, "
                "used) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET payload = "
                "excluded.payload, checksum = excluded.checksum, size = excluded.size, seconds = excluded.seconds, "
                "created = excluded.created, used = excluded.used",
                row,
            )

    def discard(self, key: Hashable) -> None:
        try:
            with self._connection() as connection:
                connection.execute("DELETE FROM results WHERE key = ?", (self.row_key(key),))
        except (DatabaseError, OSError) as error:
            LOG.warning("result store %s: could not delete %s (%s)", self.where, kind_of(key), error)

    def measured_seconds(self, kind: str) -> list[float]:
        """CPU-seconds of this version's stored results of ``kind`` (the newest hundred)."""
        try:
            with self._connection() as connection:
                rows = connection.execute(
                    "SELECT seconds FROM results WHERE kind = ? AND version = ? ORDER BY created DESC LIMIT 100",
                    (kind, self.version),
                ).fetchall()
        except (DatabaseError, OSError):
            return []
        return [float(row["seconds"]) for row in rows]

    def total_bytes(self) -> int:
        with self._connection() as connection:
            return _total_bytes(connection)

    def _touch(self, row_key: str) -> None:
        now = time.time()
        if now - self._used.get(row_key, 0.0) < USE_RESOLUTION_SECONDS:
            return
        self._used[row_key] = now
        try:
            with self._connection() as connection:
                connection.execute("UPDATE results SET used = ? WHERE key = ?", (now, row_key))
        except (DatabaseError, OSError):
            pass  # the order of eviction, nothing more

    def _evict(self) -> None:
        """Least recently used first, until the store is back under 90% of its cap."""
        with self._connection() as connection:
            total = _total_bytes(connection)
            if total <= self.max_bytes:
                return
            rows = connection.execute("SELECT key, size FROM results ORDER BY used").fetchall()
            doomed, target = [], 0.9 * self.max_bytes
            for row in rows:
                if total <= target:
                    break
                doomed.append(row["key"])
                total -= int(row["size"])
            for marks, chunk in _in_lists(doomed):
                connection.execute(f"DELETE FROM results WHERE key IN ({marks})", chunk)
        LOG.info(
            "result store %s: %d least recently used results evicted (cap %d MB)",
            self.where,
            len(doomed),
            self.max_bytes // 2**20,
        )
