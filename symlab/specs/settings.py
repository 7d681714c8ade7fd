"""The server's settings: every ``SYMLAB_*`` environment variable is read here, and nowhere else.

Where runs and results live (``SYMLAB_RUNS_DIR``, ``SYMLAB_DATABASE_URL``), where runs train
(``SYMLAB_EXECUTOR``), where MNIST is read from (``SYMLAB_MNIST_DIR``), and the caps for a shared server.

One switch, ``SYMLAB_HOSTED=1``, turns on the classroom defaults (:data:`HOSTED_DEFAULTS`): many
students on one small server, none able to starve the others. Every cap can also be set on its
own by an environment variable named after it in upper case with a ``SYMLAB_`` prefix (e.g.
``SYMLAB_MAX_HIDDEN=1024``), hosted or not; such a variable wins over both defaults.
"""

from __future__ import annotations

import contextlib
import contextvars
import hmac
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path

from symlab.specs import controls
from symlab.specs.tasks import SLOWEST_MACHINE, Cost, Rates

TRUE_WORDS = ("1", "true", "yes", "on")
IMPORT_ROOT = Path(__file__).resolve().parents[2]  # the directory symlab is imported from (a checkout, site-packages)
RUNS_DIR_ENV = "SYMLAB_RUNS_DIR"
DATABASE_URL_ENV = "SYMLAB_DATABASE_URL"
EXECUTOR_ENV = "SYMLAB_EXECUTOR"
MNIST_DIR_ENV = "SYMLAB_MNIST_DIR"
LECTURER_KEY_ENV = "SYMLAB_LECTURER_KEY"
EXECUTORS = ("local", "ray")  # where runs and the pages' computations run: this machine's processes, or Ray


def runs_directory() -> Path:
    """The run registry's and the result store's directory: $SYMLAB_RUNS_DIR, else runs/ in the current directory."""
    return Path(os.environ.get(RUNS_DIR_ENV) or "runs").expanduser().resolve()


def database_url(url: str | None = None) -> str | None:
    """``url``, else $SYMLAB_DATABASE_URL (a PostgreSQL server), else None (SQLite in the runs directory)."""
    return url or os.environ.get(DATABASE_URL_ENV) or None


def executor_name(name: str | None = None) -> str:
    """``name``, else $SYMLAB_EXECUTOR, else "local"; checked."""
    name = name or os.environ.get(EXECUTOR_ENV) or "local"
    if name not in EXECUTORS:
        raise ValueError(
            f"the executor must be one of {', '.join(EXECUTORS)} (got {name!r}; set by --executor or {EXECUTOR_ENV})"
        )
    return name


def mnist_directory(directory=None):
    """``directory``, else $SYMLAB_MNIST_DIR, else None (the copy shipped in assets/mnist)."""
    return directory or os.environ.get(MNIST_DIR_ENV) or None


# A key a class could guess in an afternoon is no key: 12 random letters and digits are 10²¹ tries.
MIN_LECTURER_KEY_CHARS = 12


def lecturer_key() -> str | None:
    """$SYMLAB_LECTURER_KEY: the key that lets a lecturer cancel, resume and restart every run from the pages;
    None where the host set none, or one shorter than :data:`MIN_LECTURER_KEY_CHARS` (then no page asks for one,
    and :func:`check_lecturer_key` says why)."""
    key = os.environ.get(LECTURER_KEY_ENV) or None
    return key if key is not None and len(key) >= MIN_LECTURER_KEY_CHARS else None


def check_lecturer_key(environ=os.environ) -> None:
    """A SettingsError where $SYMLAB_LECTURER_KEY is set but too short to keep a class from guessing it: a server
    refuses to start with one (``symlab serve``, ``streamlit run serve.py``)."""
    key = environ.get(LECTURER_KEY_ENV)
    if key and len(key) < MIN_LECTURER_KEY_CHARS:
        raise SettingsError(
            f"{LECTURER_KEY_ENV} is shorter than {MIN_LECTURER_KEY_CHARS} characters, so a class could guess it; "
            "no lecturer's key is accepted until it is longer "
            '(python -c "import secrets; print(secrets.token_urlsafe(12))" makes one)'
        )


def is_lecturer_key(typed: str | None) -> bool:
    """Whether ``typed`` is the lecturer's key (compared in constant time); never where the host set none."""
    key = lecturer_key()
    if not key or not typed:
        return False
    return hmac.compare_digest(typed.encode(), key.encode())


class SettingsError(RuntimeError):
    """An environment variable holds an unusable value; the message names it."""


def is_hosted(environ=os.environ) -> bool:
    return environ.get("SYMLAB_HOSTED", "").strip().lower() in TRUE_WORDS


@dataclass(frozen=True)
class Part:
    """A part of what a run computes (training, evaluating, …), in words and as work: what its CPU time on one
    thread is made of, at any machine's :class:`Rates` (its arithmetic, each step's fixed cost as elementwise work
    of the same duration; each lab calibrates its own: benchmarks/bench_run_cost.py)."""

    what: str  # "evaluating 100 samples after each of 1200 epochs"
    cost: Cost


@dataclass(frozen=True)
class Work:
    """What one background run asks of the server, in the terms of its caps."""

    width: int  # units per hidden layer
    depth: int  # hidden layers
    epochs: int
    parts: tuple[Part, ...] = ()  # what it computes; none: too little to count

    def seconds(self, rates: Rates) -> float:
        """Estimated CPU-seconds of the whole run, on one thread at ``rates``."""
        return sum(self.part_seconds(rates).values())

    def part_seconds(self, rates: Rates) -> dict[str, float]:
        return {part.what: part.cost.floor_seconds(rates) for part in self.parts}


def cpu_time(seconds: float) -> str:
    """``seconds`` of CPU time in words: "~25 CPU-hours", "~3 CPU-minutes"."""
    for unit, size in (("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"~{seconds / size:.0f} CPU-{unit}"
    return f"~{max(seconds, 1):.0f} CPU-seconds"


class TooCostly(ValueError):
    """Work refused before it starts: its estimated CPU time is over what this process may spend."""


@dataclass(frozen=True)
class CpuBudget:
    """The CPU time a process may spend (its ``RLIMIT_CPU``), and the rates its work's cost is estimated at."""

    seconds: float
    rates: Rates

    def check(self, cost: Cost, what: str) -> None:
        needed = cost.floor_seconds(self.rates)
        if needed > self.seconds:
            raise TooCostly(
                f"{what} would take {cpu_time(needed)} on this server, over its cap of {self.seconds:.0f} "
                "CPU-seconds: try a smaller network, or run the lab's command (symlab --help) on your own machine"
            )


_CPU_BUDGET: contextvars.ContextVar[CpuBudget | None] = contextvars.ContextVar("symlab_cpu_budget", default=None)


@contextlib.contextmanager
def cpu_budget(budget: CpuBudget):
    """Within the block, :func:`check_affordable` refuses work estimated over ``budget`` (an upload's analysis:
    refused at once, where the CPU cap would end it only after the student waited the whole cap)."""
    token = _CPU_BUDGET.set(budget)
    try:
        yield
    finally:
        _CPU_BUDGET.reset(token)


def check_affordable(cost: Cost, what: str) -> None:
    """:class:`TooCostly` where ``cost`` is over the budget this work runs under (:func:`cpu_budget`); none set
    (the command line, a worker): anything goes."""
    budget = _CPU_BUDGET.get()
    if budget is not None:
        budget.check(cost, what)


# The caps on launches count the last hour's launches, resumes and restarts.
LAUNCH_WINDOW_SECONDS = 3600


@dataclass(frozen=True)
class RunLimits:
    """Background training runs (:mod:`symlab.runs`): how many train at once, how big and how long, how many a
    browser and the server may start in an hour, and how long a run waits out its database's outage."""

    max_concurrent_per_device: int = 1
    quick_run_seconds: int = 30  # estimated CPU-seconds up to which a run may take its device's one extra place
    max_hidden: int = 4096
    max_depth: int = 4
    max_epochs: int = 100
    max_run_minutes: int = 7 * 24 * 60  # estimated CPU-minutes of one run (Work.seconds at this machine's rates)
    max_runs_per_browser: int = 40  # launches, resumes and restarts from one browser in the last hour
    max_runs_per_hour: int = 1000  # the same from the app, all browsers together
    worker_threads: int = 0  # torch threads in each training process; 0: torch's default (all cores)
    registry_outage_minutes: int = 10  # a training run waits this long for an unreachable registry, then fails

    @classmethod
    def from_env(cls, environ=os.environ) -> RunLimits:
        if "SYMLAB_MAX_RUNS_PER_SESSION" in environ:  # a reload made a new session: the cap now counts by browser
            raise SettingsError(
                "SYMLAB_MAX_RUNS_PER_SESSION is now SYMLAB_MAX_RUNS_PER_BROWSER (launches and "
                "resumes per browser per hour)"
            )
        return _from_env(cls, environ)

    def most_work(self) -> Work:
        """The most one run may ask for."""
        return Work(width=self.max_hidden, depth=self.max_depth, epochs=self.max_epochs)

    def check(self, work: Work, rates: Rates | None = None) -> None:
        """One ValueError naming every cap that ``work`` is above; its estimated CPU time is checked at ``rates``
        (this machine's: :func:`symlab.runs.device.machine_rates`) where they are given."""
        most = self.most_work()
        controls.check(
            [
                (work.width <= most.width, f"width {work.width} is above this server's cap of {most.width}"),
                (work.depth <= most.depth, f"depth {work.depth} is above this server's cap of {most.depth}"),
                (work.epochs <= most.epochs, f"{work.epochs} epochs is above this server's cap of {most.epochs}"),
                *([self._time_check(work, rates)] if rates is not None and work.parts else []),
            ]
        )

    def _time_check(self, work: Work, rates: Rates) -> tuple[bool, str]:
        """Within the CPU-time cap, or a message naming the part that costs most."""
        by_part = work.part_seconds(rates)
        costliest = max(by_part, key=lambda part: by_part[part])
        total = sum(by_part.values())
        return (
            total <= 60 * self.max_run_minutes,
            f"{costliest}: {cpu_time(total)} estimated, over this server's cap of {self.max_run_minutes} "
            "CPU-minutes per run",
        )

    def is_quick(self, work: Work) -> bool:
        """Whether ``work`` is a run of seconds (a class-path step's pair, say), which need not wait out a long
        run: its device keeps it one more place (:class:`symlab.runs.registry.DeviceSlots`). Estimated at the
        slowest machine's rates: quick there is quick anywhere, and nothing is measured to decide."""
        return bool(work.parts) and work.seconds(SLOWEST_MACHINE) <= self.quick_run_seconds

    def describe(self, mnist_shapes: bool = True) -> str:
        """The caps in words; ``mnist_shapes``: with those on the MNIST lab's networks (width, layers, epochs),
        which other labs' runs do not have."""
        shapes = (
            f"width ≤ {self.max_hidden}, ≤ {self.max_depth} hidden layers, ≤ {self.max_epochs} epochs, "
            if mnist_shapes
            else ""
        )
        return (
            f"at most {self.max_concurrent_per_device} training run(s) at a time per device (others wait in "
            f"the queue; one more place for a run of ≤ {self.quick_run_seconds} estimated CPU-seconds), "
            f"{shapes}≤ {self.max_run_minutes} estimated CPU-minutes a run, "
            f"≤ {self.max_runs_per_browser} launches (resumes included) per browser and "
            f"{self.max_runs_per_hour} on the server per hour"
        )


@dataclass(frozen=True)
class LiveLimits:
    """Work the web server does for one session: in-page tables, shared results, uploads."""

    torch_threads: int = 1  # for the whole server process: every session computes in it
    max_table_runs: int = 100  # α values × seeds in one in-page table
    compute_workers: int = (
        1  # processes training the pages' shared results (symlab.serving.shared_results; 0: in the page's own run)
    )
    results_max_mb: int = 2048  # the shared result store's size (symlab.serving.store): least recently used results go
    idle_workers: int = 1  # 1: a process computes likely results in idle time (symlab.serving.warmup); 0: none
    # Uploaded networks, each read and analysed in a process of its own (symlab.serving.uploads): how many at
    # once (others wait their turn), each one's memory beyond its start and CPU time, and the share of a core
    # each may take (1: all the system gives it).
    upload_analyses: int = 2
    upload_memory_mb: int = 2048
    upload_cpu_seconds: int = 120
    upload_core_share: float = 1.0

    @classmethod
    def from_env(cls, environ=os.environ) -> LiveLimits:
        return _from_env(cls, environ)

    def describe(self) -> str:
        return (
            f"tables: ≤ {self.max_table_runs} α × seed runs; {self.compute_workers} process(es) training "
            f"the pages' shared results; uploads analysed {self.upload_analyses} at a time, each with "
            f"{self.upload_memory_mb:,} MB and {self.upload_cpu_seconds} s of CPU"
            + (f", at {self.upload_core_share:.0%} of a core between them" if self.upload_core_share < 1 else "")
        )


# The classroom: ~30 students on a 2-core server (benchmarks/load_test.py measures it).
HOSTED_DEFAULTS: dict[type, dict[str, float]] = {
    RunLimits: dict(
        max_concurrent_per_device=1,
        max_hidden=1024,
        max_depth=2,
        max_epochs=10,
        max_run_minutes=20,
        max_runs_per_browser=4,
        max_runs_per_hour=30,
        worker_threads=1,
    ),
    # Uploads analysed at a fifth of a core between them: a 16 MB network's measurements take 3.5 CPU-s and its
    # alignment ~15, and on a two-core virtual machine any work beside the page runs slows them
    # (benchmarks/load_test.py --uploaders). Two at once, each browser one: a small network is not held behind a
    # large one.
    LiveLimits: dict(
        torch_threads=1,
        max_table_runs=20,
        upload_analyses=2,
        upload_memory_mb=2048,
        upload_cpu_seconds=60,
        upload_core_share=0.2,
    ),
}
MINIMUM = {
    "worker_threads": 0,
    "quick_run_seconds": 0,  # 0: no extra place for quick runs
    "compute_workers": 0,
    "idle_workers": 0,
}  # every other cap must be at least 1 (or > 0 for seconds)


def _from_env(cls, environ):
    values = dict(HOSTED_DEFAULTS[cls]) if is_hosted(environ) else {}
    for field in fields(cls):
        name = f"SYMLAB_{field.name.upper()}"
        raw = environ.get(name)
        if raw is None:
            continue
        number_type = float if field.type == "float" else int
        try:
            value = number_type(raw)
        except ValueError:
            kind = "a number" if number_type is float else "a whole number"
            raise SettingsError(f"{name}={raw!r} is not {kind}") from None
        minimum = MINIMUM.get(field.name, 1)
        if number_type is int and value < minimum:
            raise SettingsError(f"{name} must be >= {minimum} (got {raw})")
        if number_type is float and not (math.isfinite(value) and value > 0):
            raise SettingsError(f"{name} must be a finite number > 0 (got {raw})")
        values[field.name] = value
    return cls(**values)


@dataclass(frozen=True)
class Hosting:
    hosted: bool
    runs: RunLimits
    live: LiveLimits

    @classmethod
    def from_env(cls, environ=os.environ) -> Hosting:
        check_lecturer_key(environ)
        return cls(is_hosted(environ), RunLimits.from_env(environ), LiveLimits.from_env(environ))

    @classmethod
    def defaults(cls, hosted: bool) -> Hosting:
        """The caps with no variable but the switch: the fallback when a variable is unusable."""
        environ = {"SYMLAB_HOSTED": "1"} if hosted else {}
        return cls.from_env(environ)

    def describe(self) -> str:
        return f"{self.live.describe()}; {self.runs.describe()}"
