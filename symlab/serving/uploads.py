"""Uploaded networks, read and analysed in processes of their own, never in the web server's.

A visitor's file is hostile until read: a few kilobytes can describe gigabytes (:mod:`symlab.lib.weights`
refuses what it can tell from the file), and an analysis can cost more than a class can spare. So every
upload is read and analysed by a process forked for it alone (from the compute workers' fork server:
torch is loaded, nothing of the page is), which takes the uploaded bytes from a file in memory, with a ceiling
on its address space beyond what it started with (``RLIMIT_AS``) and on its CPU time (``RLIMIT_CPU``), at the
lowest niceness and held to a share of a core (:class:`AnalysisLimits`), and killed past a wall-clock limit.
What it sends back is data (:mod:`symlab.serving.codec`) or a file's bytes, never a pickle; a refusal is its
message, one line. The server holds the uploaded bytes (Streamlit's) and the results its pages keep, nothing
of the reading.

At most :attr:`AnalysisLimits.concurrent` analyses run at once, whoever asks; the others wait in turn, and
the waiting page is told how many are ahead. A page whose visitor moves on (a rerun, a closed tab) stops
its analysis: the process is killed.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import multiprocessing
import os
import resource
import signal
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from symlab.runs.device import machine_rates, set_threads
from symlab.serving import codec
from symlab.serving.shared_results import COMPUTE_PRELOAD, IDLE_NICENESS
from symlab.specs import settings
from symlab.specs.settings import LiveLimits
from symlab.specs.tasks import Rates

LOG = logging.getLogger("symlab.serving.uploads")
POLL_SECONDS = 1.0  # how often a waiting page hears how its analysis stands (and may be stopped)
PACE_SECONDS = 0.5  # an analysis held to a share of a core runs that share of every such period
MAX_ANSWER_BYTES = 256 * 10**6  # an analysis's answer: a report, or a file about the size of an upload
# What the process sends back: its first byte says what follows.
RESULT, FILE, REFUSED, OUT_OF_MEMORY, FAILED = b"R", b"F", b"E", b"M", b"X"


class UploadRefused(Exception):
    """An upload that could not be read or analysed; the message, one line, says why (and is the visitor's)."""


@dataclass(frozen=True)
class AnalysisLimits:
    """What analyses of uploads may take: at most ``concurrent`` at once, each with ``memory_mb`` of memory beyond
    what its process starts with and ``cpu_seconds`` of CPU time, all of them together at most ``core_share`` of a
    core (1: as much as the system gives them; shared equally by those running), and each ``wall_seconds`` in
    all."""

    concurrent: int = 2
    memory_mb: int = 2048
    cpu_seconds: int = 120
    core_share: float = 1.0
    wall_seconds: float | None = None  # None: twice its CPU time at its least share (idle priority), +10 s

    @property
    def wall_limit(self) -> float:
        if self.wall_seconds is not None:
            return self.wall_seconds
        least_share = min(self.core_share, 1.0) / (self.concurrent if self.core_share < 1.0 else 1)
        return 2.0 * self.cpu_seconds / least_share + 10.0

    @classmethod
    def from_live(cls, live: LiveLimits) -> AnalysisLimits:
        return cls(live.upload_analyses, live.upload_memory_mb, live.upload_cpu_seconds, live.upload_core_share)


# ---------------------------------------------------------------------------------------------- turns


@dataclass(eq=False)
class _Ticket:
    """One analysis's place: its browser (None: an analysis of no browser's, which replaces none), and whether a
    newer upload of that browser replaced it."""

    owner: Hashable | None
    replaced: bool = False


REPLACED = (
    "replaced by a newer upload from this browser: a browser's uploads are analysed one at a time, the newest; "
    "upload this file again to analyse it"
)


class _Turns:
    """At most ``capacity`` analyses at once, in the order they were asked for, and at most one of each browser
    queued or running: a browser's newer upload replaces its older one (stopped where it runs). So a browser that
    uploads many files holds one place in the queue, and the queue serves browsers in turn."""

    def __init__(self):
        self._changed = threading.Condition()
        self._running: list[_Ticket] = []
        self._queue: collections.deque[_Ticket] = collections.deque()

    @contextlib.contextmanager
    def taken(self, capacity: int, waiting: Callable[[int], None], owner: Hashable | None = None):
        """Hold a turn (yields its ticket: ``replaced`` turns true when a newer upload of ``owner`` replaces it);
        while waiting, ``waiting(ahead)`` hears how many analyses run or wait before this one (it may raise to give
        up, e.g. Streamlit's rerun: the place is given back). :class:`UploadRefused` where a newer upload of the
        same browser replaced it before its turn."""
        ticket = _Ticket(owner)
        with self._changed:
            self._replace_older(owner)
            self._queue.append(ticket)
        try:
            while True:
                with self._changed:
                    if ticket.replaced:
                        raise UploadRefused(REPLACED)
                    place = self._queue.index(ticket)
                    if place == 0 and len(self._running) < capacity:
                        self._queue.popleft()
                        self._running.append(ticket)
                        break
                    ahead = len(self._running) + place
                waiting(ahead)
                with self._changed:
                    self._changed.wait(POLL_SECONDS)
        except BaseException:
            with self._changed:
                if ticket in self._queue:
                    self._queue.remove(ticket)
                self._changed.notify_all()
            raise
        try:
            yield ticket
        finally:
            with self._changed:
                self._running.remove(ticket)
                self._changed.notify_all()

    def _replace_older(self, owner: Hashable | None) -> None:
        if owner is None:
            return
        for older in [*self._queue, *self._running]:
            if older.owner == owner:
                older.replaced = True
                if older in self._queue:
                    self._queue.remove(older)
        self._changed.notify_all()

    @property
    def busy(self) -> tuple[int, int]:
        """(running, waiting)."""
        with self._changed:
            return len(self._running), len(self._queue)


TURNS = _Turns()


def _no_news(news: float) -> None:
    """Waiting or working with no page to tell."""


# ---------------------------------------------------------------------------------------------- the server side


def analyse(
    function: Callable,
    uploads: Sequence[tuple[str, bytes]],
    options: tuple = (),
    *,
    limits: AnalysisLimits,
    waiting: Callable[[int], None] = _no_news,
    working: Callable[[float], None] = _no_news,
    owner: Hashable | None = None,
):
    """``function(uploads, *options)`` computed in a process of its own under ``limits``, in turn with the
    other analyses: its result (a result the codec writes, or bytes). ``uploads`` are (file name, bytes) as a
    visitor sent them (the name is anyone's text); ``function`` must be a module-level function of symlab that
    reads them itself (:func:`symlab.lib.weights.read_network`).
    ``waiting(ahead)`` is called while others go first, ``working(seconds)`` while it runs; either may raise
    to give up (the process is killed). ``owner``: the browser that uploaded them, whose newer upload replaces this
    one (None: nobody's). :class:`UploadRefused` says why an upload could not be analysed."""
    with TURNS.taken(limits.concurrent, waiting, owner) as ticket:

        def working_unless_replaced(seconds: float) -> None:
            if ticket.replaced:
                raise UploadRefused(REPLACED)
            working(seconds)

        return _in_own_process(function, uploads, options, limits, working_unless_replaced)


def _in_own_process(function, uploads, options, limits: AnalysisLimits, working):
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(COMPUTE_PRELOAD)
    ours, theirs = context.Pipe()
    handoff = _handoff(uploads)
    process = context.Process(
        target=_analyse_here,
        name="symlab-upload-analysis",
        daemon=True,
        args=(
            theirs,
            function,
            handoff,
            [(name, len(data)) for name, data in uploads],
            options,
            limits.memory_mb * 10**6,
            limits.cpu_seconds,
            machine_rates(),
        ),
    )
    started = time.monotonic()
    try:
        process.start()
        theirs.close()
        assert process.pid is not None  # started
        PACER.hold(process.pid, limits.core_share)
        answer = _answer(ours, process, started, limits, working)
    except (BrokenPipeError, EOFError, ConnectionResetError):
        answer = None  # the process died before it answered: its exit code says how
    finally:
        if process.pid is not None:  # started
            PACER.release(process.pid)
            if process.is_alive():
                process.kill()
            process.join(5)
        ours.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(handoff)
    if answer is None:
        raise UploadRefused(_why_it_died(process.exitcode, limits))
    with contextlib.suppress(ValueError):
        process.close()
    return _decoded(answer, limits)


def _handoff(uploads) -> str:
    """The uploads' bytes, one after the other, in a file in memory (tmpfs where the system has room in one) that
    the analysis reads: written in a few milliseconds, where a pipe passed 16 MB in thousands of turns between the
    two processes, each one a turn of the web server's interpreter. (A container's /dev/shm holds 64 MB by
    default: where the uploads do not fit, the system's temporary directory.)"""
    if os.path.isdir("/dev/shm"):
        with contextlib.suppress(OSError):
            return _written(uploads, "/dev/shm")
    return _written(uploads, None)


def _written(uploads, directory: str | None) -> str:
    descriptor, path = tempfile.mkstemp(prefix="symlab-upload-", dir=directory)
    try:
        with os.fdopen(descriptor, "wb") as handoff:
            for _, data in uploads:
                handoff.write(data)
    except OSError:
        os.unlink(path)
        raise
    return path


def _answer(connection, process, started: float, limits: AnalysisLimits, working) -> bytes | None:
    """The process's answer, or None where it died without one (or ran past its time, and was killed); the
    process held to its share of a core meanwhile."""
    while not connection.poll(POLL_SECONDS):
        elapsed = time.monotonic() - started
        if not process.is_alive() and not connection.poll(0):
            return None
        if elapsed > limits.wall_limit:
            process.kill()
            raise UploadRefused(
                f"the analysis did not finish within {limits.wall_limit:.0f} s, this server's "
                "limit: try a smaller network, or run it with the command line on your own machine"
            )
        working(elapsed)
    try:
        return connection.recv_bytes(MAX_ANSWER_BYTES)
    except (EOFError, OSError):
        return None


class _Pacer:
    """Holds processes to a share of a core between them, split equally among those held: in every
    :data:`PACE_SECONDS` a process runs for its part and is stopped (SIGSTOP) for the rest, by one thread of this
    server for all of them. So one analysis runs at the whole share, and a second, a small network's beside a large
    one's, starts at once at half of it rather than waiting for the first to end. On a small virtual machine even
    work at the lowest priority slows the page runs on the other core (the host's cores are shared behind them):
    a class must not pay for one student's analyses."""

    def __init__(self):
        self._shares: dict[int, float] = {}  # pid -> share of a core
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def hold(self, pid: int, share: float) -> None:
        """Hold ``pid`` to its part of ``share`` (of a core, for all the processes held together)."""
        if share >= 1.0:
            return
        with self._lock:
            self._shares[pid] = share
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="symlab-upload-pacer", daemon=True)
                self._thread.start()

    def release(self, pid: int) -> None:
        with self._lock:
            self._shares.pop(pid, None)
        _signal(pid, signal.SIGCONT)  # to end, or to be killed, it must run

    def _run(self) -> None:
        while True:
            started = time.monotonic()
            with self._lock:
                shares = {pid: share / len(self._shares) for pid, share in self._shares.items()}
                for pid in shares:
                    _signal(pid, signal.SIGCONT)
            for pid, share in sorted(shares.items(), key=lambda item: item[1]):  # the smallest share stops first
                time.sleep(max(started + share * PACE_SECONDS - time.monotonic(), 0.0))
                with self._lock:  # signalled only while still held: a released process may be gone, its pid reused
                    if pid in self._shares:
                        _signal(pid, signal.SIGSTOP)
            time.sleep(max(started + PACE_SECONDS - time.monotonic(), 0.0))


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


PACER = _Pacer()


def _why_it_died(exitcode: int | None, limits: AnalysisLimits) -> str:
    if exitcode == -signal.SIGXCPU:
        return (
            f"the analysis needed more than {limits.cpu_seconds} s of CPU time, this server's cap: try a smaller "
            "network, or run it with the command line on your own machine"
        )
    if exitcode == -signal.SIGKILL:
        return (
            f"the analysis was stopped by the system, most likely for memory (this server gives one "
            f"{limits.memory_mb:,} MB): try a smaller network"
        )
    return f"the analysis stopped unexpectedly (exit code {exitcode}); the server's log has the details"


def _decoded(answer: bytes, limits: AnalysisLimits):
    kind, body = answer[:1], answer[1:]
    if kind == RESULT:
        try:
            return codec.decode(body)
        except Exception as error:  # noqa: BLE001 (whatever the bytes hold, they are not shown)
            LOG.warning("an upload analysis answered with an unreadable result: %s", error)
            raise UploadRefused("the analysis answered with something other than a result") from None
    if kind == FILE:
        return body
    if kind == REFUSED:
        raise UploadRefused(body.decode("utf-8", "replace"))
    if kind == OUT_OF_MEMORY:
        raise UploadRefused(
            f"the analysis needed more memory than this server gives one ({limits.memory_mb:,} MB): "
            "try a smaller network, or run it with the command line on your own machine"
        )
    raise UploadRefused("the analysis failed unexpectedly; the server's log has the details")


# ---------------------------------------------------------------------------------------------- the process


def _analyse_here(
    connection,
    function,
    handoff: str,
    sizes: list[tuple[str, int]],
    options: tuple,
    memory_bytes: int,
    cpu_seconds: int,
    rates: Rates,
):
    """In the analysis process: take the limits, read the uploads' bytes, run, answer (one message). Work the lab
    estimates past the CPU cap (at the page process's ``rates``: this one is paced) is refused before it starts."""
    _limit_this_process(memory_bytes, cpu_seconds)
    try:
        with open(handoff, "rb") as read:
            uploads = [(name, read.read(size)) for name, size in sizes]
        os.unlink(handoff)  # in memory: gone as soon as it is read
        with settings.cpu_budget(settings.CpuBudget(cpu_seconds, rates)):
            answer = _answer_to(function, uploads, options)
        del uploads
        connection.send_bytes(answer)
    except (BrokenPipeError, EOFError):
        pass  # the page gave up
    finally:
        connection.close()


def _answer_to(function, uploads, options) -> bytes:
    try:
        value = function(uploads, *options)
    except MemoryError:
        return OUT_OF_MEMORY
    except RuntimeError as error:
        if "allocate" in str(error):  # torch's allocator, out of the address space it may take
            return OUT_OF_MEMORY
        traceback.print_exc()
        return FAILED
    except ValueError as error:  # a refusal (symlab.lib.weights.WeightsError is one): its message is for the visitor
        return REFUSED + str(error).encode("utf-8", "replace")
    except Exception:  # noqa: BLE001 (logged here, shown as a failure)
        traceback.print_exc()
        return FAILED
    if isinstance(value, bytes):
        return FILE + value
    try:
        return RESULT + codec.encode(value)
    except codec.CodecError:
        traceback.print_exc()
        return FAILED


def _limit_this_process(memory_bytes: int, cpu_seconds: int) -> None:
    """The lowest niceness (a page run takes the core from it at once), one thread, and ceilings: address space
    beyond what the process has now (torch's libraries are mapped already), and CPU time (past it the kernel sends
    SIGXCPU, which ends the process). Not the idle class: held to a share of a core as well (:class:`_Pace`), it
    would starve behind the training runs."""
    os.nice(max(IDLE_NICENESS - os.nice(0), 0))
    set_threads(1)
    resource.setrlimit(resource.RLIMIT_AS, (_address_space() + memory_bytes,) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))


def _address_space() -> int:
    """This process's virtual memory size in bytes (/proc/self/statm's first field, in pages)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * resource.getpagesize()
