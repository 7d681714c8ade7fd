"""Results shared by every session of one server, each computed once.

A class opening the same link asks for the same result thirty times at once: the first asks, the
others wait for it (single flight), and later sessions find it stored. Of each kind of result (a
key's first item) the least recently used beyond its capacity are dropped, so that many small
results (one per frame) do not push out the trained ones. Results must be treated as read-only.

Long computations (training) run as :class:`Task` in a small pool of worker processes, not in the
web server's own interpreter: a session waiting for one holds no lock and no interpreter time, so
every other session stays responsive, and the server's second core does the work. A task nobody
waits for any more (its session moved a slider again) is dropped before it starts. A worker
reports progress, which the waiting page draws.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import multiprocessing
import os
import queue
import sys
import threading
import time
import types
from collections.abc import Callable, Hashable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

PROGRESS_INTERVAL_SECONDS = 0.2  # a worker reports at most this often (a waiting page redraws at its pace)


@dataclass(frozen=True)
class Progress:
    """How far a computation is: ``done`` of ``total``, in words, and what a page may draw of it."""

    done: float = 0.0
    total: float = 1.0
    text: str = ""
    payload: object = None

    @property
    def fraction(self) -> float:
        return min(max(self.done / self.total, 0.0), 1.0) if self.total else 0.0


@dataclass(frozen=True)
class Task:
    """``function(*args, progress=report)`` under a key naming its result. ``function`` must be a
    module-level function of ``symlab`` (workers import it by name); ``report(done, total, text="",
    payload=None)`` tells the waiting pages how far it is."""

    key: Hashable
    function: Callable
    args: tuple = ()
    label: str = "Computing"


@dataclass
class Job:
    """One computation in flight (or finished, for a result found stored)."""

    key: Hashable
    label: str
    future: concurrent.futures.Future
    number: int = 0  # submission order: jobs with smaller numbers still in flight are ahead
    progress: Progress = field(default_factory=Progress)
    waiters: set = field(default_factory=set)
    task: Task | None = None


class SharedResults:
    """The store, its computations in flight, and the worker pool (created on first use)."""

    def __init__(self, capacity: int = 32, workers: int = 1, torch_threads: int = 1):
        """``workers`` processes train tasks (0: each task is computed by the session asking for it)."""
        self.capacity, self.workers, self.torch_threads = capacity, workers, torch_threads
        self._capacities: dict[Hashable, int] = {}  # kinds given their own capacity
        self._store: collections.OrderedDict = collections.OrderedDict()
        self._jobs: dict[Hashable, Job] = {}  # in flight: queued here, running, or computing in a session
        self._queue: collections.deque[Job] = collections.deque()  # waiting for a free worker
        self._running = 0
        self.tasks_submitted = 0  # tasks given to the worker pool (not found stored or in flight)
        self._lock = threading.RLock()
        self._submitted = 0
        self._pool: _WorkerPool | None = None

    # ------------------------------------------------------------------ the store

    def get(self, key: Hashable, default=None):
        with self._lock:
            if key in self._store:
                self._store.move_to_end(key)
                return self._store[key]
        return default

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._store

    def store(self, key: Hashable, value) -> None:
        """Store ``value`` (computed here, or elsewhere: symlab.precomputed); the least recently used
        results of its kind beyond capacity make room."""
        with self._lock:
            self._store[key] = value
            self._store.move_to_end(key)
            kind = kind_of(key)
            same_kind = [other for other in self._store if kind_of(other) == kind]
            for oldest in same_kind[:max(len(same_kind) - self._capacities.get(kind, self.capacity), 0)]:
                del self._store[oldest]

    # ------------------------------------------------------------------ in this process

    def compute(self, key: Hashable, function: Callable[[], object], capacity: int | None = None):
        """``function()``'s result under ``key``: stored, or awaited if another thread is computing
        it, or computed here (``function`` may draw on the caller's page). ``capacity``: how many
        results of this kind to keep, where it is not the default."""
        with self._lock:
            if capacity is not None:
                self._capacities[kind_of(key)] = capacity
            if key in self._store:
                self._store.move_to_end(key)
                return self._store[key]
            job = self._jobs.get(key)
            if job is None:
                job = self._new_job(key, "Computing", concurrent.futures.Future())
                mine = True
            else:
                mine = False
        if not mine:
            return job.future.result()
        try:
            value = function()
        except BaseException as error:  # the waiters see it too; nothing is stored
            self._finish(job, error=error)
            raise
        self._finish(job, value=value)
        return value

    # ------------------------------------------------------------------ in the worker pool

    def submit(self, task: Task, waiter: Hashable) -> Job:
        """The job computing ``task`` (a finished one if its result is stored), with ``waiter``
        among those waiting for it. With no workers the caller computes it, there and then."""
        if self.workers == 0:
            done = concurrent.futures.Future()
            try:
                done.set_result(self.compute(task.key, lambda: task.function(*task.args, progress=_no_report)))
            except Exception as error:  # the caller sees it as it would a pool task's failure
                done.set_exception(error)
            return Job(task.key, task.label, done)
        with self._lock:
            if task.key in self._store:
                self._store.move_to_end(task.key)
                done = concurrent.futures.Future()
                done.set_result(self._store[task.key])
                return Job(task.key, task.label, done)
            job = self._jobs.get(task.key)
            if job is None:
                job = self._new_job(task.key, task.label, concurrent.futures.Future())
                job.task = task
                self.tasks_submitted += 1
                self._queue.append(job)
                self._dispatch()
            job.waiters.add(waiter)
            return job

    def release(self, job: Job, waiter: Hashable) -> None:
        """``waiter`` no longer waits for ``job``; a queued job nobody waits for is dropped."""
        with self._lock:
            job.waiters.discard(waiter)
            if job.waiters or job not in self._queue:
                return
            self._queue.remove(job)
            del self._jobs[job.key]
        job.future.cancel()

    def ahead_of(self, job: Job) -> int:
        """Computations the pool does before it starts ``job`` (0 once it runs)."""
        with self._lock:
            return self._queue.index(job) + self._running if job in self._queue else 0

    def start(self) -> None:
        """Start the worker processes now (they import torch), rather than on the first task."""
        with self._lock:
            pool = self._worker_pool()
        pool.start_workers(self.workers)

    def shutdown(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
            queued, self._queue = list(self._queue), collections.deque()
        for job in queued:
            job.future.cancel()
        if pool:
            pool.shutdown()

    def _dispatch(self) -> None:
        """Hand queued jobs to the pool while a worker is free (called under the lock). The queue is
        kept here, not in the pool's, so that a job nobody waits for can still be dropped."""
        while self._queue and self._running < self.workers:
            job = self._queue.popleft()
            self._running += 1
            try:
                running = self._worker_pool().submit(job, job.task)
            except (BrokenProcessPool, RuntimeError) as error:  # a dead pool: the next job starts a new one
                self._pool = None
                running = concurrent.futures.Future()
                running.set_exception(error)
            running.add_done_callback(lambda finished, job=job: self._settle(job, finished))

    # ------------------------------------------------------------------ bookkeeping

    def _new_job(self, key, label, future) -> Job:
        self._submitted += 1
        job = Job(key, label, future, number=self._submitted)
        self._jobs[key] = job
        return job

    def _finish(self, job: Job, value=None, error: BaseException | None = None) -> None:
        if error is None:
            self.store(job.key, value)
        with self._lock:
            if self._jobs.get(job.key) is job:
                del self._jobs[job.key]
        if error is None:
            job.future.set_result(value)
        else:
            job.future.set_exception(error)

    def _settle(self, job: Job, finished: concurrent.futures.Future) -> None:
        """A pool job ended: its result is kept (a failure is not), its waiters told, the next job started."""
        error = concurrent.futures.CancelledError() if finished.cancelled() else finished.exception()
        with self._lock:
            self._running -= 1
            if isinstance(error, BrokenProcessPool):
                self._pool = None  # a worker died (killed, out of memory): the next job starts a new pool
        self._finish(job, None if error else finished.result(), error)
        with self._lock:
            self._dispatch()

    def _worker_pool(self) -> _WorkerPool:
        if self._pool is None:
            self._pool = _WorkerPool(self.workers, self.torch_threads, self._job_by_number)
        return self._pool

    def _job_by_number(self, number: int) -> Job | None:
        with self._lock:
            return next((job for job in self._jobs.values() if job.number == number), None)


def kind_of(key: Hashable) -> Hashable:
    """What a result is (its key's first item): capacities and shipped results go by it."""
    return key[0] if isinstance(key, tuple) and key else key


# ---------------------------------------------------------------------------------------------- workers

_reports: multiprocessing.Queue | None = None  # in a worker: where progress goes


def _no_report(done, total, text="", payload=None) -> None:
    """Progress of a task computed by its caller: no page is waiting apart from the caller."""


# Imported once by the fork server, before it forks each worker: a worker starts ready to train.
WORKER_PRELOAD = ["torch", "torch._dynamo", "symlab.labs"]  # torch._dynamo: imported by torch.optim
WORKER_NICENESS = 10  # training yields the cores to the web server's page runs
SERVER_WATCH_SECONDS = 1.0


class _WorkerPool:
    """Worker processes forked from a clean fork server (never from the threaded web server, and
    without re-running the server's main script, which Streamlit makes the app's page), and a
    thread that hands their progress reports to the jobs."""

    def __init__(self, workers: int, torch_threads: int, job_by_number: Callable[[int], Job | None]):
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(WORKER_PRELOAD)
        self.reports = context.Queue()
        self.executor = concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=context, initializer=_start_worker, initargs=(self.reports, torch_threads, os.getpid()))
        self.job_by_number = job_by_number
        self.listener = threading.Thread(target=self._listen, name="symlab-job-progress", daemon=True)
        self.listener.start()

    def submit(self, job: Job, task: Task) -> concurrent.futures.Future:
        with _main_module_hidden():  # the pool may start a worker now
            return self.executor.submit(_run_task, job.number, task.function, task.args)

    def start_workers(self, count: int) -> None:
        with _main_module_hidden():
            for _ in range(count):
                self.executor.submit(int)  # a trivial call: the pool starts a worker for it

    def _listen(self) -> None:
        while True:
            try:
                number, progress = self.reports.get()
            except (EOFError, OSError, ValueError):  # the queue closed: the pool shut down
                return
            if number is None:
                return
            job = self.job_by_number(number)
            if job is not None:
                job.progress = progress

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.reports.put((None, None))


@contextlib.contextmanager
def _main_module_hidden():
    """A new worker imports its parent's ``__main__`` by path; in a Streamlit server that is the
    page being run, which must not run in a worker. Hidden for the moment a worker starts."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")  # no __file__, no __spec__: nothing to import
    try:
        yield
    finally:
        sys.modules["__main__"] = main


def _start_worker(reports, torch_threads: int, server_pid: int) -> None:
    global _reports
    _reports = reports
    # To the level, not by it: the fork server keeps the niceness of the thread that started it.
    os.nice(max(WORKER_NICENESS - os.nice(0), 0))
    threading.Thread(target=_exit_with, args=(server_pid,), name="symlab-server-watch", daemon=True).start()
    import torch

    torch.set_num_threads(torch_threads)


def _exit_with(server_pid: int) -> None:
    """A worker waits for tasks and would outlive a server that was killed (and keep the fork server
    alive with it): it leaves once the server is gone."""
    while True:
        time.sleep(SERVER_WATCH_SECONDS)
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:  # a process of another user took the number: the server is gone
            os._exit(0)


def _run_task(number: int, function: Callable, args: tuple):
    last = [0.0]

    def report(done, total, text="", payload=None):
        now = time.monotonic()
        if now - last[0] >= PROGRESS_INTERVAL_SECONDS or done >= total:
            last[0] = now
            with contextlib.suppress(OSError, ValueError, queue.Full):  # progress is best effort
                _reports.put((number, Progress(float(done), float(total), text, payload)))

    return function(*args, progress=report)


_shared: SharedResults | None = None
_shared_lock = threading.Lock()


def shared() -> SharedResults:
    """This server's store, sized by its hosting settings (``SYMLAB_COMPUTE_WORKERS``)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            from symlab.hosting import LiveLimits

            live = LiveLimits.from_env()
            _shared = SharedResults(workers=live.compute_workers, torch_threads=live.torch_threads)
        return _shared
