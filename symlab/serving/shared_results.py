"""Results shared by every session, each computed once: in this server's memory, and in the result store
(:mod:`symlab.serving.store`) that outlives the process and is shared by every server of a deployment.

A class opening the same link asks for the same result thirty times at once: the first asks, the
others wait for it (single flight), and later sessions find it stored. Of each kind of result (a
key's first item) the least recently used beyond its capacity are dropped from memory, so that many
small results (one per frame) do not push out the trained ones. Results must be treated as read-only.

Long computations (training) run as :class:`Task` in a small pool of worker processes, not in the
web server's own interpreter: a session waiting for one holds no lock and no interpreter time, so
every other session stays responsive, and the server's second core does the work. A worker writes
what it computed to the result store itself. A task nobody waits for any more (its session moved a
slider again) is dropped before it starts. A worker reports progress, which the waiting page draws,
and the pool estimates each waiting task's wait from the measured cost of the tasks before it.

Workers are shared fairly between browsers, not handed out in arrival order: each browser (every tab of it, every
session it opens) has one computation waiting at a time, its newer request replacing its older one, and the pool
takes the next computation from the browser it served least recently, so a student flooding the queue with heavy
links waits for their own turn while everyone else's requests go by.

In idle time, a second pool of one process, at the lowest priority the system has, computes what
visitors are likely to ask for next (:mod:`symlab.serving.warmup`): it takes the CPU only when nothing else
wants it, so it never delays a person's request.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import itertools
import math
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Hashable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field

from symlab.labs import computation_modules
from symlab.runs.device import measured_rates, set_threads
from symlab.specs.settings import (
    EXECUTORS,
    IMPORT_ROOT,
    Hosting,
    LiveLimits,
    SettingsError,
    executor_name,
    is_hosted,
    runs_directory,
)
from symlab.specs.tasks import Progress, Rates, Task, kind_of, read_stored_results_with

PROGRESS_INTERVAL_SECONDS = 0.2  # a worker reports at most this often (a waiting page redraws at its pace)


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
    started: float | None = None  # when a worker took it (time.monotonic())
    seen: dict = field(default_factory=dict)  # waiter -> when it last asked (time.monotonic()); None: always waits
    browsers: dict = field(default_factory=dict)  # waiter -> the browser it is in (its sessions share a turn)
    # Why it was dropped unfinished: "replaced" (a newer request of its browser took its place), "left" (its waiters
    # stopped asking or went elsewhere), "stopped" (the server shut down); None while it stands.
    dropped: str | None = None


@dataclass(frozen=True)
class Wait:
    """Where a waiting job stands: computations the pool does first, and about how many seconds until
    this one is done (None where nothing has been measured to tell)."""

    ahead: int
    seconds: float | None


BROWSERS_REMEMBERED = 4096  # browsers whose last turn the pool remembers
STALE_SECONDS = 5.0  # a queued job whose waiters have not asked for this long is dropped: their pages are gone
DEFAULT_EFFICIENCY = 3.0  # measured time / floor, until a kind's own tasks have been measured
EFFICIENCY_WEIGHT = 0.3  # of the newest measurement in a kind's running estimate


class SharedResults:
    """The store, its computations in flight, and the worker pools (created on first use)."""

    def __init__(
        self, capacity: int = 32, workers: int = 1, torch_threads: int = 1, store=None, executor: str = "local"
    ):
        """``workers`` tasks train at once (0: each task is computed by the session asking for it), in
        worker processes of this machine (``executor="local"``) or as tasks of a Ray cluster (``"ray"``);
        ``store``: a :class:`symlab.serving.store.ResultStore` that results are written to and read from beyond
        this process (None: memory only)."""
        if executor not in EXECUTORS:
            raise ValueError(f"executor must be one of {EXECUTORS} (got {executor!r})")
        self.capacity, self.workers, self.torch_threads, self.store = capacity, workers, torch_threads, store
        self.executor = executor
        self._capacities: dict[Hashable, int] = {}  # kinds given their own capacity
        self._memory: collections.OrderedDict = collections.OrderedDict()
        self._jobs: dict[Hashable, Job] = {}  # in flight: queued here, running, or computing in a session
        self._queue: collections.deque[Job] = collections.deque()  # waiting for a free worker
        self._running: list[Job] = []
        self.tasks_submitted = 0  # tasks given to the worker pool (not found stored or in flight)
        self._lock = threading.RLock()
        self._submitted = 0
        self._pool: _ComputePool | None = None
        self._idle_pool: _ComputePool | None = None
        self._efficiency: dict[Hashable, float] = {}  # per kind: measured seconds / floor seconds
        self._rates: Rates | None = None
        self._turns = itertools.count(1)
        self._served: dict[Hashable, int] = {}  # browser -> the turn it was last served in (absent: never)

    # ------------------------------------------------------------------ the store

    def get(self, key: Hashable, default=None):
        """The result of ``key``: in memory, else in the result store (then kept in memory too)."""
        with self._lock:
            if key in self._memory:
                self._memory.move_to_end(key)
                return self._memory[key]
        if self.store is not None:
            value = self.store.get(key, _MISSING)
            if value is not _MISSING:
                self.remember(key, value)
                return value
        return default

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            if key in self._memory:
                return True
        return self.store is not None and key in self.store

    def remember(self, key: Hashable, value) -> None:
        """Keep ``value`` in memory (computed here, or elsewhere: symlab.serving.precomputed); the least recently
        used results of its kind beyond capacity make room."""
        with self._lock:
            self._memory[key] = value
            self._memory.move_to_end(key)
            kind = kind_of(key)
            same_kind = [other for other in self._memory if kind_of(other) == kind]
            for oldest in same_kind[: max(len(same_kind) - self._capacities.get(kind, self.capacity), 0)]:
                del self._memory[oldest]

    # ------------------------------------------------------------------ in this process

    def compute(self, key: Hashable, function: Callable[[], object], capacity: int | None = None, persist: bool = True):
        """``function()``'s result under ``key``: stored, or awaited if another thread is computing
        it, or computed here (``function`` may draw on the caller's page). ``capacity``: how many
        results of this kind to keep in memory, where it is not the default; ``persist=False``: not
        in the result store (data cheaper to make again than to keep)."""
        with self._lock:
            if capacity is not None:
                self._capacities[kind_of(key)] = capacity
            if key in self._memory:
                self._memory.move_to_end(key)
                return self._memory[key]
            job = self._jobs.get(key)
            if job is None:
                job = self._new_job(key, "Computing", concurrent.futures.Future())
                mine = True
            else:
                mine = False
        if not mine:
            return job.future.result()
        try:
            value = self.store.get(key, _MISSING) if persist and self.store is not None else _MISSING
            if value is _MISSING:
                started = time.process_time()
                value = function()
                if persist and self.store is not None:
                    self.store.put(key, value, time.process_time() - started)
        except BaseException as error:  # the waiters see it too; nothing is stored
            self._finish(job, error=error)
            raise
        self._finish(job, value=value)
        return value

    # ------------------------------------------------------------------ in the worker pool

    def submit(self, task: Task, waiter: Hashable, keep: bool = False, browser: Hashable | None = None) -> Job:
        """The job computing ``task`` (a finished one if its result is stored), with ``waiter``
        among those waiting for it: a page, which asks again (:meth:`touch`) while it waits, or, with
        ``keep``, a waiter that never goes stale (the server's warm-up). ``browser`` (default: the waiter itself)
        is the browser the waiter is in: its other queued requests are dropped (a browser waits for one
        computation at a time), and the pool serves browsers in turn. With no workers the caller computes it,
        there and then."""
        if self.workers == 0:
            done: concurrent.futures.Future = concurrent.futures.Future()
            try:
                done.set_result(self.compute(task.key, lambda: task.function(*task.args, progress=_no_report)))
            except Exception as error:  # the caller sees it as it would a pool task's failure
                done.set_exception(error)
            return Job(task.key, task.label, done)
        stored = self.get(task.key, _MISSING)
        with self._lock:
            if stored is _MISSING and task.key in self._memory:
                stored = self._memory[task.key]
            if stored is not _MISSING:
                done = concurrent.futures.Future()
                done.set_result(stored)
                return Job(task.key, task.label, done)
            browser = waiter if browser is None else browser
            dropped = self._replace_requests_of(browser, task.key)
            job = self._jobs.get(task.key)
            if job is None:
                job = self._new_job(task.key, task.label, concurrent.futures.Future())
                job.task = task
                self.tasks_submitted += 1
                self._queue.append(job)
            job.waiters.add(waiter)
            job.seen[waiter] = None if keep else time.monotonic()
            job.browsers[waiter] = browser
            self._hand_queued_to_pool()
        for old in dropped:
            _drop(old, "replaced")
        return job

    def touch(self, job: Job, waiter: Hashable) -> None:
        """``waiter`` still waits for ``job`` (a page's waiting panel asks as it redraws)."""
        with self._lock:
            if waiter in job.waiters and job.seen.get(waiter) is not None:
                job.seen[waiter] = time.monotonic()

    def release(self, job: Job, waiter: Hashable) -> None:
        """``waiter`` no longer waits for ``job``; a queued job nobody waits for is dropped."""
        with self._lock:
            dropped = self._forget_waiter(job, waiter)
        if dropped:
            _drop(job, "left")

    def _forget_waiter(self, job: Job, waiter: Hashable) -> bool:
        """(Under the lock.) ``waiter`` leaves ``job``; True where that dropped the job from the queue."""
        job.waiters.discard(waiter)
        job.seen.pop(waiter, None)
        job.browsers.pop(waiter, None)
        if job.waiters or job not in self._queue:
            return False
        self._queue.remove(job)
        del self._jobs[job.key]
        return True

    def _replace_requests_of(self, browser: Hashable, key: Hashable) -> list[Job]:
        """(Under the lock.) ``browser``'s waiters leave every queued job but ``key``'s (a warm-up's waiters, which
        never go stale, stay): the jobs that left dropped, for the caller to cancel outside the lock."""
        dropped = []
        for job in list(self._queue):
            if job.key == key:
                continue
            for waiter in [w for w, b in job.browsers.items() if b == browser and job.seen.get(w) is not None]:
                if self._forget_waiter(job, waiter):
                    dropped.append(job)
        return dropped

    def wait(self, job: Job) -> Wait:
        """Where ``job`` stands: the computations before it, and the seconds until it is done, estimated
        from the measured cost of each one's kind (:class:`Cost`, :meth:`estimate`)."""
        with self._lock:
            running = list(self._running)
            queued = job in self._queue
            ahead = (
                list(itertools.takewhile(lambda other: other is not job, self._in_service_order())) if queued else []
            )
        remaining = [self._remaining(other) for other in running if other is not job]
        before = [self.estimate(other.task) for other in ahead]
        mine = self._remaining(job) if job in running else self.estimate(job.task)
        count = len(ahead) + (len(running) if job not in running else 0)
        known = [value for value in (*remaining, *before) if value is not None]
        if mine is None or len(known) < len(remaining) + len(before):
            return Wait(count, None)
        # The pool runs ``workers`` at once: the work before this job spreads over them.
        free_in = 0.0 if job in running else sum(known) / max(self.workers, 1)
        return Wait(count, free_in + mine)

    def estimate(self, task: Task | None) -> float | None:
        """Seconds ``task`` will take here: its floor times its kind's measured efficiency."""
        if task is None or task.cost is None:
            return None
        return task.cost.floor_seconds(self.rates()) * self._efficiency.get(kind_of(task.key), DEFAULT_EFFICIENCY)

    def rates(self) -> Rates:
        if self._rates is None:
            self._rates = measured_rates()
        return self._rates

    def _remaining(self, job: Job) -> float | None:
        whole = self.estimate(job.task)
        if whole is None:
            return None
        if job.started is not None and job.progress.done:
            return max(whole * (1.0 - job.progress.fraction), 0.0)
        return whole

    def busy(self) -> bool:
        """Whether a person's computation is queued or running."""
        with self._lock:
            return bool(self._queue or self._running)

    def start(self) -> None:
        """Start the worker processes now (they import torch), rather than on the first task."""
        with self._lock:
            pool = self._worker_pool()
        pool.start_workers(self.workers)

    def shutdown(self) -> None:
        with self._lock:
            pools, self._pool, self._idle_pool = (self._pool, self._idle_pool), None, None
            queued, self._queue = list(self._queue), collections.deque()
        for job in queued:
            _drop(job, "stopped")
        for pool in pools:
            if pool:
                pool.shutdown()

    # ------------------------------------------------------------------ in idle time

    def precompute(self, task: Task) -> concurrent.futures.Future | None:
        """Compute ``task`` in the idle pool (one process at the lowest priority), its result going to the
        result store; None where it is stored already or a person's job computes it. Results of the idle
        pool are not kept in memory: they wait in the store until someone asks."""
        if self.store is None or task.key in self:
            return None
        with self._lock:
            if task.key in self._jobs:
                return None
            if self._idle_pool is None:
                self._idle_pool = self._new_pool(1, self._no_job, idle=True)
            pool = self._idle_pool
        try:
            return pool.submit_task(task)
        except (BrokenProcessPool, RuntimeError):
            with self._lock:
                self._idle_pool = None
            return None

    def _no_job(self, number: int) -> None:
        return None

    def _hand_queued_to_pool(self) -> None:
        """Hand queued jobs to the pool while a worker is free (called under the lock). The queue is
        kept here, not in the pool's, so that a job nobody waits for can still be dropped."""
        while self._queue and len(self._running) < self.workers:
            job = self._next_job()
            self._queue.remove(job)
            if _stale(job):  # everyone waiting for it left
                del self._jobs[job.key]
                _drop(job, "left")
                continue
            self._take_turn(job)
            self._running.append(job)
            job.started = time.monotonic()
            try:
                running = self._worker_pool().submit(job, job.task)
            except (BrokenProcessPool, RuntimeError) as error:  # a dead pool: the next job starts a new one
                self._pool = None
                running = concurrent.futures.Future()
                running.set_exception(error)
            running.add_done_callback(lambda finished, job=job: self._settle(job, finished))

    # ------------------------------------------------------------------ fair turns

    def _in_service_order(self):
        """(Under the lock.) The queued jobs, one at a time, in the order the pool would take them if no browser's
        computation were running: each time the job of the browser served longest ago (a job waited for by several
        browsers counts as its longest-waiting one's), the earlier of equals first. A generator: who asks for the
        next job, or for one job's place, reads no further than it needs."""
        served = dict(self._served)
        turn = max(served.values(), default=0) + 1
        queued = list(self._queue)
        while queued:
            job = min(queued, key=lambda job: min((served.get(b, 0) for b in job.browsers.values()), default=0))
            queued.remove(job)
            yield job
            for browser in job.browsers.values():
                served[browser] = turn
            turn += 1

    def _take_turn(self, job: Job) -> None:
        """(Under the lock.) ``job``'s browsers have been served now; the longest-served-ago forgotten beyond
        :data:`BROWSERS_REMEMBERED` (a browser forgotten counts as never served: it goes first, once)."""
        for browser in set(job.browsers.values()):
            self._served[browser] = next(self._turns)
        if len(self._served) > BROWSERS_REMEMBERED:
            served = self._served
            for browser in sorted(served, key=lambda browser: served[browser])[: len(served) - BROWSERS_REMEMBERED]:
                del self._served[browser]

    def _next_job(self) -> Job:
        """(Under the lock.) The queued job to start now: the first in :meth:`_in_service_order` with a browser that
        has no computation running; where every one has, the first (a free worker does not sit idle)."""
        busy = {browser for job in self._running for browser in job.browsers.values()}
        free = lambda job: bool(set(job.browsers.values()) - busy)
        if not any(map(free, self._queue)):  # one pass: no need to order them all to find none
            return next(self._in_service_order())
        return next(filter(free, self._in_service_order()))

    # ------------------------------------------------------------------ bookkeeping

    def _new_job(self, key, label, future) -> Job:
        self._submitted += 1
        job = Job(key, label, future, number=self._submitted)
        self._jobs[key] = job
        return job

    def _finish(self, job: Job, value=None, error: BaseException | None = None) -> None:
        if error is None:
            self.remember(job.key, value)
        with self._lock:
            if self._jobs.get(job.key) is job:
                del self._jobs[job.key]
        if error is None:
            job.future.set_result(value)
        else:
            job.future.set_exception(error)

    def _settle(self, job: Job, finished: concurrent.futures.Future) -> None:
        """A pool job ended: its result is kept (a failure is not), its cost learned, its waiters told,
        the next job started."""
        error = concurrent.futures.CancelledError() if finished.cancelled() else finished.exception()
        with self._lock:
            if job in self._running:
                self._running.remove(job)
            if isinstance(error, BrokenProcessPool):
                self._pool = None  # a worker died (killed, out of memory): the next job starts a new pool
        value = None
        if error is None:
            value, seconds = finished.result()
            self._learn(job.task, seconds)
        self._finish(job, value, error)
        with self._lock:
            self._hand_queued_to_pool()

    def _learn(self, task: Task | None, seconds: float) -> None:
        """Fold a task's measured CPU-seconds into its kind's efficiency (measured / floor)."""
        if task is None or task.cost is None:
            return
        floor = task.cost.floor_seconds(self.rates())
        if floor <= 0 or not math.isfinite(seconds):
            return
        kind, measured = kind_of(task.key), seconds / floor
        with self._lock:
            known = self._efficiency.get(kind)
            self._efficiency[kind] = (
                measured if known is None else (1 - EFFICIENCY_WEIGHT) * known + EFFICIENCY_WEIGHT * measured
            )

    def _worker_pool(self):
        if self._pool is None:
            self._pool = self._new_pool(self.workers, self._job_by_number)
        return self._pool

    def _new_pool(self, workers: int, job_by_number, idle: bool = False):
        pool = _RayPool if self.executor == "ray" else _ComputePool
        return pool(workers, self.torch_threads, job_by_number, self.store, idle)

    def _job_by_number(self, number: int) -> Job | None:
        with self._lock:
            return next((job for job in self._jobs.values() if job.number == number), None)


_MISSING = object()


def _drop(job: Job, why: str) -> None:
    """Cancel ``job``, unstarted, saying why (:attr:`Job.dropped`): set first, so whoever sees it cancelled knows."""
    job.dropped = why
    job.future.cancel()


def _stale(job: Job) -> bool:
    now = time.monotonic()
    return bool(job.seen) and all(seen is not None and now - seen > STALE_SECONDS for seen in job.seen.values())


# ---------------------------------------------------------------------------------------------- workers

_reports: multiprocessing.Queue | None = None  # in a worker: where progress goes
_store = None  # in a worker: the result store it writes to (symlab.serving.store.ResultStore), or None


def _no_report(done, total, text="", payload=None) -> None:
    """Progress of a task computed by its caller: no page is waiting apart from the caller."""


# Imported once by the fork server, before it forks each worker: a worker starts ready to train.
# symlab.serving.fork_server first: the workers never import the server's main module (the page being run).
COMPUTE_PRELOAD = ["symlab.serving.fork_server", "torch", *computation_modules(), "symlab.serving.store"]
COMPUTE_NICENESS = 10  # training yields the cores to the web server's page runs
IDLE_NICENESS = 19  # the idle pool: below everything, and scheduled only when a core is idle (SCHED_IDLE)
SERVER_WATCH_SECONDS = 1.0


class _ComputePool:
    """Worker processes forked from a clean fork server (never from the threaded web server, and
    without importing the server's main module, which Streamlit makes the app's page:
    symlab.serving.fork_server), and a thread that hands their progress reports to the jobs. ``idle``: the
    idle pool's (the lowest priority; its tasks report nothing and send no result back, only to the
    store)."""

    def __init__(
        self,
        workers: int,
        torch_threads: int,
        job_by_number: Callable[[int], Job | None],
        store=None,
        idle: bool = False,
    ):
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(COMPUTE_PRELOAD)
        self.reports = context.Queue()
        spec = None if store is None else store.spec
        self.executor = concurrent.futures.ProcessPoolExecutor(
            workers,
            mp_context=context,
            initializer=_start_compute_process,
            initargs=(self.reports, torch_threads, os.getpid(), spec, idle),
        )
        self.job_by_number = job_by_number
        self.listener = threading.Thread(target=self._listen, name="symlab-job-progress", daemon=True)
        self.listener.start()

    def submit(self, job: Job, task: Task) -> concurrent.futures.Future:
        """``task`` for ``job``: its future's result is (value, CPU-seconds)."""
        return self.executor.submit(_run_task, job.number, task.function, task.args, task.key)

    def submit_task(self, task: Task) -> concurrent.futures.Future:
        """``task`` for the store alone: its future's result is its CPU-seconds."""
        return self.executor.submit(_run_task, 0, task.function, task.args, task.key, False)

    def start_workers(self, count: int) -> None:
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
        """Stop at once: queued tasks cancelled, running ones ended with their workers (a result not yet stored is
        computed again when asked for). A pool left to finish would hold the server's exit until its tasks end."""
        stop_pool(self.executor)
        self.reports.put((None, None))


def stop_pool(executor: concurrent.futures.ProcessPoolExecutor) -> None:
    """Shut ``executor`` down, its queued tasks cancelled and its workers ended (SIGTERM): Python 3.14's
    ``terminate_workers()``, on the Pythons that have none (``shutdown`` forgets the processes: taken first)."""
    terminate = getattr(executor, "terminate_workers", None)
    if terminate is not None:
        terminate()
        return
    workers = list((getattr(executor, "_processes", None) or {}).values())
    manager = getattr(executor, "_executor_manager_thread", None)
    executor.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        with contextlib.suppress(OSError, ValueError):  # gone already, or closed
            process.terminate()
    # The pool's own thread then closes its wake-up pipe; the interpreter's exit writes to that pipe, unlocked
    # before Python 3.12, and a close between its check and its write raised "Bad file descriptor" as a server
    # stopped (once in 32 load runs). Waiting for the thread, which ends once it sees its workers gone, orders the two.
    if manager is not None:
        manager.join(timeout=2.0)


class _RayPool:
    """Tasks run as Ray tasks (``SYMLAB_EXECUTOR=ray``): Ray places them on the cluster at ``RAY_ADDRESS`` (or a
    local Ray instance), one CPU each; each writes its result to the result store (PostgreSQL, for a cluster:
    every node must reach it) and sends it back; progress comes through a Ray queue, read by a thread here.
    ``idle``: the idle pool's, whose tasks Ray schedules like any other (a cluster has no idle priority)."""

    def __init__(
        self,
        workers: int,
        torch_threads: int,
        job_by_number: Callable[[int], Job | None],
        store=None,
        idle: bool = False,
    ):
        import ray
        from ray.util.queue import Queue

        from symlab.runs import ray_cluster

        ray_cluster.connect()
        self.reports = Queue()
        self.spec = None if store is None else store.spec
        self.torch_threads, self.job_by_number = torch_threads, job_by_number
        self.remote = ray.remote(num_cpus=1, max_retries=0)(_ray_task).options(
            runtime_env={"env_vars": {"PYTHONPATH": str(IMPORT_ROOT)}}
        )
        self.closed = threading.Event()
        self.listener = threading.Thread(target=self._listen, name="symlab-ray-progress", daemon=True)
        self.listener.start()

    def submit(self, job: Job, task: Task) -> concurrent.futures.Future:
        return self.remote.remote(
            job.number, task.function, task.args, task.key, True, self.spec, self.torch_threads, self.reports
        ).future()

    def submit_task(self, task: Task) -> concurrent.futures.Future:
        return self.remote.remote(
            0, task.function, task.args, task.key, False, self.spec, self.torch_threads, None
        ).future()

    def start_workers(self, count: int) -> None:
        """Ray starts its workers itself."""

    def _listen(self) -> None:
        from ray.util.queue import Empty

        while not self.closed.is_set():
            try:
                number, progress = self.reports.get(timeout=1.0)
            except Empty:
                continue
            except Exception:  # noqa: BLE001 (the queue's actor is gone: Ray shut down)
                return
            job = self.job_by_number(number)
            if job is not None:
                job.progress = progress

    def shutdown(self) -> None:
        self.closed.set()
        self.listener.join(timeout=2.0)  # before Ray itself may shut down under its blocked read


def _ray_task(
    number: int,
    function: Callable,
    args: tuple,
    key: Hashable,
    send_value: bool,
    store_spec,
    torch_threads: int,
    reports,
):
    """A task in a Ray worker: the store and the progress queue set up as a local worker's are, then run."""
    global _reports, _store
    set_threads(torch_threads)
    _reports = reports
    if store_spec is not None and (_store is None or _store.spec != tuple(store_spec)):
        _store = _result_store(*store_spec)
        read_stored_results_with(_store.get)
    return _run_task(number, function, args, key, send_value)


def _start_compute_process(reports, torch_threads: int, server_pid: int, store_spec=None, idle: bool = False) -> None:
    global _reports, _store
    _reports = reports
    # To the level, not by it: the fork server keeps the niceness of the thread that started it.
    os.nice(max((IDLE_NICENESS if idle else COMPUTE_NICENESS) - os.nice(0), 0))
    if idle:
        with contextlib.suppress(AttributeError, OSError):  # where the system has no idle class, niceness alone
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    threading.Thread(target=_exit_with, args=(server_pid,), name="symlab-server-watch", daemon=True).start()
    set_threads(torch_threads)
    if store_spec is not None:
        _store = _result_store(*store_spec)
        read_stored_results_with(_store.get)


def _result_store(*spec, **options):
    """A :class:`symlab.serving.store.ResultStore`. Imported here, not at the top: the store's codec loads torch,
    and a starting server (serve.py imports this module) starts its compute workers, which load torch on the
    other core, before it loads torch itself."""
    from symlab.serving.store import ResultStore

    return ResultStore(*spec, **options)


def settings_store(live: LiveLimits):
    """The result store the settings name: the runs directory's (or ``SYMLAB_DATABASE_URL``'s), within
    ``live.results_max_mb``."""
    return _result_store(runs_directory(), max_bytes=live.results_max_mb * 2**20)


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


def _run_task(number: int, function: Callable, args: tuple, key: Hashable = None, send_value: bool = True):
    """``function(*args)`` in a worker, its result written to the store: (value, CPU-seconds), or the
    CPU-seconds alone without ``send_value``."""
    last = [0.0]
    reports = _reports

    def report(done, total, text="", payload=None):
        now = time.monotonic()
        if number and reports is not None and (now - last[0] >= PROGRESS_INTERVAL_SECONDS or done >= total):
            last[0] = now
            with contextlib.suppress(Exception):  # progress is best effort (a full or closed queue drops it)
                reports.put((number, Progress(float(done), float(total), text, payload)), block=False)

    started = time.process_time()
    value = function(*args, progress=report)
    seconds = time.process_time() - started
    if _store is not None and key is not None:
        _store.put(key, value, seconds)
    return (value, seconds) if send_value else seconds


_shared: SharedResults | None = None
_shared_lock = threading.Lock()


def live_limits() -> LiveLimits:
    """This server's live limits; where a variable is unusable (the pages say which), the defaults, hosted or not."""
    try:
        return LiveLimits.from_env()
    except SettingsError:
        return Hosting.defaults(is_hosted()).live


def shared() -> SharedResults:
    """This server's store, sized by its hosting settings (``SYMLAB_COMPUTE_WORKERS``,
    ``SYMLAB_RESULTS_MAX_MB``), its results kept in the runs directory's result store (or on
    PostgreSQL with ``SYMLAB_DATABASE_URL``), its tasks run by ``SYMLAB_EXECUTOR`` (local processes, or
    ``ray``)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            live = live_limits()
            store = settings_store(live)
            try:
                executor = executor_name()
            except ValueError:  # the MNIST page says what is wrong with it; the pages compute here meanwhile
                executor = "local"
            _shared = SharedResults(
                workers=live.compute_workers, torch_threads=live.torch_threads, store=store, executor=executor
            )
        return _shared
