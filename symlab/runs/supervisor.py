"""What happens to runs: submitted within the server's caps, started where their device has room (a local
worker process, or a Ray task), cancelled, resumed, restarted, and reaped when their process is gone. Every worker
calls :func:`dispatch` when it ends, so the queue drains with no browser open.

Only a run's owner controls it: the browser that launched it (:attr:`Caller.owner`), a lecturer who holds the
host's key, or the host (the command line at the server's shell). Launches, resumes and restarts from the pages
count against the caps of a browser and of the server in the last hour."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from symlab.specs.run_kind import (
    ACTIVE,
    CANCELLED,
    FAILED,
    INTERRUPTED,
    QUEUED,
    RESUMABLE,
    RUNNING,
)
from symlab.specs.settings import (
    DATABASE_URL_ENV,
    IMPORT_ROOT,
    LAUNCH_WINDOW_SECONDS,
    RunLimits,
    executor_name,
    is_lecturer_key,
)
from symlab.specs.tasks import Rates

from .device import machine_rates
from .registry import RESTART, RESUME, Registry, checkpoint_epoch, node_name, process_alive, process_start

LAUNCH_GRACE_SECONDS = 60  # a run claimed to start whose worker was never recorded started is interrupted


@dataclass(frozen=True)
class Caller:
    """Who asks for a run to be cancelled, resumed or restarted. ``owner``: the asking browser's id (as
    :attr:`~symlab.runs.registry.Run.owner`; "" where it sends none); ``source``: "app" for a page, whose launches
    count against the caps; ``host``: the server's own shell, or the one user of a server that is not shared, who
    controls every run; ``lecturer_key``: as typed on a page: $SYMLAB_LECTURER_KEY controls every run too."""

    owner: str = ""
    source: str = "cli"
    host: bool = False
    lecturer_key: str = ""

    @property
    def lecturer(self) -> bool:
        return is_lecturer_key(self.lecturer_key)

    def may_control(self, run) -> bool:
        return self.host or (bool(self.owner) and run.owner == self.owner) or self.lecturer


HOST = Caller(host=True)  # the command line at the server's shell


class NotYours(ValueError):
    """The caller may not control that run; the message says who may."""


def check_control(run, by: Caller, verb: str) -> None:
    """A :class:`NotYours` unless ``by`` may ``verb`` (cancel, resume, restart) ``run``."""
    if not by.may_control(run):
        who = "another browser: only that browser" if run.owner else "the server's command line: only the host"
        raise NotYours(f"run #{run.id} was launched from {who} or a lecturer may {verb} it")


def check_launch_caps(registry: Registry, limits: RunLimits, owner: str, source: str) -> int | None:
    """The caps on launches, resumes and restarts from the pages in the last hour: per browser (``owner``) and for
    the whole server. Those from the command line count for neither. At the server's cap a browser with no run
    waiting or training still gets its turn where a flood's queued run can give way (:func:`room_to_make`): a fresh
    cookie resets a browser's own cap, so the server's must not be spendable by one browser's queue. Returns the
    run that gives way, for the caller to cancel (:func:`give_way`) once its own launch is recorded."""
    if source != "app":
        return None
    since = time.time() - LAUNCH_WINDOW_SECONDS
    mine = registry.launches_since(since, source="app", owner=owner)
    if mine >= limits.max_runs_per_browser:
        raise ValueError(
            f"this browser has launched or resumed {mine} runs in the last hour, the cap on this server "
            f"({limits.max_runs_per_browser}): try again later"
        )
    if registry.launches_since(since, source="app") < limits.max_runs_per_hour:
        return None
    giving_way = room_to_make(registry, owner)
    if giving_way is None:
        raise ValueError(
            f"{limits.max_runs_per_hour} runs were launched or resumed on this server in the last hour, "
            "its cap: try again later"
        )
    return giving_way


GAVE_WAY = (
    "cancelled before it started: the server had reached its hourly cap, and a browser with no run took this "
    "browser's newest waiting one; it counts for no cap"
)


def room_to_make(registry: Registry, owner: str) -> int | None:
    """At the server's hourly cap: for a browser (``owner``) with no run waiting or training, the newest queued run
    of the browser with the most runs waiting (two or more), whose place the new run takes (:func:`give_way`); None
    where no browser waits with two (then the cap holds). Only queued runs give way: what started has used its
    turn."""
    active = registry.runs([QUEUED, RUNNING])
    if not owner or any(run.owner == owner for run in active):
        return None
    waiting: dict[str, list] = {}
    for run in active:
        if run.status == QUEUED and run.owner and run.executor == "local":
            waiting.setdefault(run.owner, []).append(run)
    crowded = [runs for runs in waiting.values() if len(runs) >= 2]
    if not crowded:
        return None
    most = max(crowded, key=lambda runs: (len(runs), max(run.id for run in runs)))
    return max(run.id for run in most)


def give_way(registry: Registry, run_id: int | None) -> None:
    """Cancel the queued run ``run_id`` (from :func:`check_launch_caps`) with the reason, and forget its launch:
    another browser's launch took its place. Called only once that launch is recorded, so a launch that fails
    costs the flood nothing. Nothing where ``run_id`` is None or the run has left the queue meanwhile."""
    if run_id is None or registry.get(run_id).status != QUEUED:
        return
    registry.update(run_id, status=CANCELLED, finished=time.time(), message=GAVE_WAY)
    registry.forget_newest_launch(run_id)


def resume_point(registry: Registry, run) -> int:
    """The epoch a resumed run continues after: its newest checkpoint's (the recorded epoch for one written before
    checkpoints were named by epoch), 0 where it has none."""
    kept = registry.checkpoints(run.id)
    if not kept:
        return 0
    epoch = checkpoint_epoch(kept[0])
    return run.epoch if epoch is None else epoch


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
        from . import ray_cluster  # here: Ray is imported only where runs use it

        lost += ray_cluster.lost(on_ray)
    for run in lost:
        after = resume_point(registry, run)
        if run.cancel_requested:  # cancelled before its worker could stop itself (still starting, say): no crash
            registry.update(
                run.id,
                status=CANCELLED,
                finished=time.time(),
                pid=None,
                message="cancelled"
                + (f" after epoch {after}; resume continues from there" if after else "; resume starts it afresh"),
            )
            continue
        registry.update(
            run.id,
            status=INTERRUPTED,
            pid=None,
            message="the training process stopped unexpectedly"
            + (f" on {run.node}" if run.node else "")
            + (
                f"; resume continues after epoch {after}, its last checkpoint"
                if after
                else "; resume starts it from the beginning (it had no checkpoint)"
            ),
        )
    return [run.id for run in lost]


def dispatch(registry: Registry, limits: RunLimits | None = None) -> list[int]:
    """Reap lost runs, then start queued runs where their device has room; returns started ids."""
    limits = limits or RunLimits.from_env()
    reap(registry)
    if not registry.has_status(QUEUED):
        return []  # the common case, answered without taking the write lock
    started = []
    for run in registry.claim_queued(limits.max_concurrent_per_device, functools.partial(_is_quick_run, limits)):
        try:
            launch_worker(registry, run.id)
            started.append(run.id)
        except OSError as error:
            registry.update(run.id, status=FAILED, message=f"could not start the training process: {error}")
    return started


def _is_quick_run(limits: RunLimits, run) -> bool:
    """Whether ``run`` is estimated at seconds of CPU time (:meth:`RunLimits.is_quick`); a run whose estimate
    fails is not."""
    try:
        return limits.is_quick(run.config.work())
    except (ValueError, AttributeError):
        return False


def launch_worker(registry: Registry, run_id: int) -> None:
    """Start ``python -m symlab.runs.worker`` for the run in a session of its own, so it outlives the caller (a
    closed tab, a restarted server), and return at once: the worker takes seconds to load torch, a minute on a busy
    server, and a page waits for none of it. Its process is recorded now, so the run is judged by whether that
    process lives (:func:`reap`), not by how soon it reports in."""
    log = registry.log_path(run_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    # The database's URL travels in the environment, not on the command line where others could read it.
    env = {**os.environ, DATABASE_URL_ENV: registry.db.url} if registry.db.url else None
    with open(log, "ab") as output:
        worker = subprocess.Popen(
            [sys.executable, "-m", "symlab.runs.worker", str(run_id), "--runs-dir", str(registry.root)],
            cwd=IMPORT_ROOT,
            env=env,
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
        )
    registry.update(run_id, pid=worker.pid, pid_started=process_start(worker.pid), node=node_name())
    # Collected when it ends, so no finished worker lingers as a zombie of a long-lived server.
    threading.Thread(target=worker.wait, name=f"run #{run_id} worker", daemon=True).start()


def submit(
    registry: Registry,
    lab: str,
    config,
    limits: RunLimits | None = None,
    session: str = "",
    source: str = "app",
    executor: str | None = None,
    owner: str = "",
    rates: Rates | None = None,
) -> int:
    """Validate ``config`` (of ``lab``, one of the registry's kinds), check the caps (its estimated CPU time at
    ``rates``, default this machine's), and queue it, recorded as launched by ``owner`` (a browser's id): with the
    local executor it starts if its device has room; on Ray (``executor``, default $SYMLAB_EXECUTOR, else local)
    Ray's scheduler places it. Returns the run id."""
    executor = executor_name(executor)
    kind = registry.kind(lab)
    limits = limits or RunLimits.from_env()
    config.validate()
    limits.check(config.work(), rates or machine_rates())
    giving_way = check_launch_caps(registry, limits, owner, source)
    run_id = registry.create(
        lab, config, kind.device(config), session=session, source=source, executor=executor, owner=owner
    )
    give_way(registry, giving_way)
    start(registry, [run_id], limits)
    return run_id


def start(registry: Registry, run_ids, limits: RunLimits | None = None) -> None:
    """Start queued runs: Ray's get their tasks at once; local ones when their device has room."""
    queued = [registry.get(run_id) for run_id in run_ids]
    on_ray = [run for run in queued if run.executor == "ray"]
    if on_ray:
        from . import ray_cluster

        ray_cluster.submit(registry, on_ray)
    if len(on_ray) < len(queued):
        dispatch(registry, limits)


def cancel(registry: Registry, run_id: int, *, by: Caller = HOST) -> None:
    """Queued: cancelled at once. Running: its worker stops within a second or so, keeping its
    last checkpoint (so it can be resumed). Only for a caller who may control the run (:class:`NotYours`)."""
    run = registry.get(run_id)
    check_control(run, by, "cancel")
    if run.executor == "ray" and run.status in ACTIVE:
        from . import ray_cluster

        ray_cluster.cancel(registry, run)
    elif run.status == QUEUED:
        registry.update(run_id, status=CANCELLED, finished=time.time(), message="cancelled before it started")
        registry.forget_newest_launch(run_id)  # it took no turn: the caps do not count it
    elif run.status == RUNNING:
        registry.update(run_id, cancel_requested=1)
        if run.pid and process_alive(run.pid, run.pid_started):
            try:
                os.kill(run.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        elif run.pid is not None:
            registry.update(run_id, status=CANCELLED, finished=time.time(), pid=None, message="cancelled")


def cancel_queued_of(registry: Registry, owner: str, *, by: Caller) -> list[int]:
    """Cancel every queued run that ``owner`` (a browser) launched, in one action: a lecturer's or the host's answer
    to a flood; returns their ids. Their launches no longer count toward the caps."""
    if not (by.host or by.lecturer):
        raise NotYours("only a lecturer (with the host's key) or the host may cancel another browser's runs")
    cancelled = [run.id for run in registry.runs([QUEUED]) if run.owner == owner and run.executor == "local"]
    for run_id in cancelled:
        cancel(registry, run_id, by=by)
    return cancelled


def queue_by_browser(registry: Registry) -> list[dict]:
    """The MNIST queue by the browser that launched each run: its runs waiting and training, most waiting first
    (what a lecturer looks at to find a flood)."""
    counts: dict[str, dict] = {}
    for run in registry.runs([QUEUED, RUNNING]):
        row = counts.setdefault(run.owner, {"owner": run.owner, "queued": 0, "running": 0})
        row["queued" if run.status == QUEUED else "running"] += 1
    return sorted(counts.values(), key=lambda row: (-row["queued"], -row["running"], row["owner"]))


def resume(registry: Registry, run_id: int, limits: RunLimits | None = None, *, by: Caller = HOST) -> None:
    """Queue an interrupted, cancelled or failed run again; it continues from its newest checkpoint. A resume from
    a page counts as a launch for the caps."""
    _stopped_run(registry, run_id, by, "resume")
    limits = limits or RunLimits.from_env()
    giving_way = check_launch_caps(registry, limits, by.owner, by.source)
    registry.update(run_id, status=QUEUED, cancel_requested=0, finished=None, message="queued to resume")
    registry.record_launch(run_id, by.owner, by.source, RESUME)
    give_way(registry, giving_way)
    start(registry, [run_id], limits)


def restart(registry: Registry, run_id: int, limits: RunLimits | None = None, *, by: Caller = HOST) -> None:
    """Queue a stopped run to train again from its first epoch: its checkpoints and metrics are dropped (for a run
    whose checkpoints cannot be read, or whose start went wrong). Counts as a launch for the caps."""
    _stopped_run(registry, run_id, by, "restart")
    limits = limits or RunLimits.from_env()
    giving_way = check_launch_caps(registry, limits, by.owner, by.source)
    forget_training(registry, run_id)
    registry.update(run_id, status=QUEUED, cancel_requested=0, finished=None, message="queued to restart")
    registry.record_launch(run_id, by.owner, by.source, RESTART)
    give_way(registry, giving_way)
    start(registry, [run_id], limits)


def forget_training(registry: Registry, run_id: int) -> None:
    """Drop what the run has trained, as if it had never started: its checkpoints, metrics, progress and result."""
    registry.drop_checkpoints(run_id)
    registry.drop_metrics_after(run_id, 0)
    registry.update(run_id, epoch=0, progress=0.0, result=None, started=None)


def _stopped_run(registry: Registry, run_id: int, by: Caller, verb: str):
    """The run, which ``by`` may control and which has stopped in a way that lets it go on."""
    run = registry.get(run_id)
    check_control(run, by, verb)
    if run.status not in RESUMABLE:
        done = {"resume": "resumed", "restart": "restarted"}[verb]
        raise ValueError(f"run #{run_id} is {run.status}; only {', '.join(RESUMABLE)} runs can be {done}")
    return run
