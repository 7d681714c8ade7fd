"""What happens to runs: submitted within the server's caps, started where their device has room (a local
worker process, or a Ray task), cancelled, resumed, and reaped when their process is gone. Every worker calls
:func:`dispatch` when it ends, so the queue drains with no browser open."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from symlab.specs.run_kind import (
    ACTIVE,
    CANCELLED,
    FAILED,
    INTERRUPTED,
    QUEUED,
    RESUMABLE,
    RUNNING,
)
from symlab.specs.settings import DATABASE_URL_ENV, REPO_ROOT, RunLimits, executor_name

from .registry import Registry, node_name, process_alive

LAUNCH_GRACE_SECONDS = 60  # a run marked running whose worker never reported in is interrupted


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
    """Start ``python -m symlab.runs.worker`` for the run, detached: it outlives the caller (a closed
    tab, a restarted server) and is reaped by init, not by the caller."""
    log = registry.log_path(run_id)
    log.parent.mkdir(parents=True, exist_ok=True)
    # The database's URL travels in the environment, not on the command line where others could read it.
    env = {**os.environ, DATABASE_URL_ENV: registry.db.url} if registry.db.url else None
    subprocess.run([sys.executable, "-m", "symlab.runs.worker", str(run_id), "--runs-dir", str(registry.root),
                    "--detach"], cwd=REPO_ROOT, check=True, timeout=60, env=env,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def submit(registry: Registry, lab: str, config, limits: RunLimits | None = None, session: str = "",
           source: str = "app", executor: str | None = None, owner: str = "") -> int:
    """Validate ``config`` (of ``lab``, one of the registry's kinds), check the caps, and queue it, recorded as
    launched by ``owner`` (a browser's id): with the local executor it starts if its device has room; on Ray
    (``executor``, default $SYMLAB_EXECUTOR, else local) Ray's scheduler places it. Returns the run id."""
    executor = executor_name(executor)
    kind = registry.kind(lab)
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
    run_id = registry.create(lab, config, kind.device(config), session=session, source=source, executor=executor,
                             owner=owner)
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


def cancel(registry: Registry, run_id: int) -> None:
    """Queued: cancelled at once. Running: its worker stops within a second or so, keeping its
    last checkpoint (so it can be resumed)."""
    run = registry.get(run_id)
    if run.executor == "ray" and run.status in ACTIVE:
        from . import ray_cluster

        ray_cluster.cancel(registry, run)
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
