"""Runs on a Ray cluster (``SYMLAB_EXECUTOR=ray`` or ``--executor ray``; ``RAY_ADDRESS`` names the
cluster, else a local Ray instance starts). Each run is a detached, named Ray actor that trains it
with the worker's code (:func:`symlab.runs.execution.execute`), asking for one GPU when it trains on CUDA and
one CPU otherwise; Ray's scheduler queues and places them. Progress goes to the registry's database,
which every node must reach (PostgreSQL for several machines), and checkpoints to the runs directory,
which every node must mount at the same path. Imported only where a run uses Ray."""

from __future__ import annotations

import os
import socket
import time
import uuid

import ray

from symlab.labs import run_kinds
from symlab.specs.run_kind import CANCELLED, FAILED, QUEUED, RUNNING
from symlab.specs.settings import DATABASE_URL_ENV, IMPORT_ROOT

from .execution import execute
from .registry import Registry, Run

NAMESPACE = "symlab"


def connect() -> None:
    """Join the cluster at $RAY_ADDRESS, or start a local Ray instance (once per process)."""
    if ray.is_initialized():
        return
    address = os.environ.get("RAY_ADDRESS") or None
    ray.init(
        address=address,
        namespace=NAMESPACE,
        log_to_driver=False,
        configure_logging=False,
        include_dashboard=None if address else False,  # None: the cluster's own choice
    )


def node_label() -> str:
    """This host and its Ray node: several nodes may share a host (a local test cluster)."""
    return f"{socket.gethostname()} (Ray node {ray.get_runtime_context().get_node_id()[:8]})"


@ray.remote(max_restarts=0)
class RunTask:
    """Trains one registered run, then exits."""

    def train(self, run_id: int, runs_dir: str, database_url: str | None) -> str:
        if database_url:
            os.environ[DATABASE_URL_ENV] = database_url
        node = node_label()
        registry = Registry(run_kinds(), runs_dir, database_url)
        if not registry.run_dir(run_id).is_dir():  # the runs directory is not the submitter's: not mounted here
            registry.update(
                run_id,
                status=FAILED,
                finished=time.time(),
                node=node,
                message=f"the runs directory {runs_dir} is not visible on {node}: every node must "
                "mount it at the same path (docs/cluster.md)",
            )
            ray.actor.exit_actor()
        run = registry.get(run_id)
        registry.update(run_id, status=RUNNING, started=run.started or time.time())
        registry.register_process(run_id, os.getpid(), node)
        final = execute(registry, run_id)
        ray.actor.exit_actor()
        return final.status


def submit(registry: Registry, runs: list[Run]) -> None:
    """Give each queued run its Ray task; Ray starts it where its resources are free."""
    connect()
    for run in runs:
        name = f"run-{run.id}-{uuid.uuid4().hex[:8]}"
        registry.update(run.id, task=name, message="waiting for a place on the Ray cluster")
        resources = {"num_cpus": 1, "num_gpus": 1} if run.device == "cuda" else {"num_cpus": 1}
        task = RunTask.options(  # type: ignore[attr-defined]  # ray.remote made it an actor class; its stubs say not
            name=name,
            namespace=NAMESPACE,
            lifetime="detached",
            runtime_env={"env_vars": {"PYTHONPATH": str(IMPORT_ROOT)}},
            **resources,
        ).remote()
        task.train.remote(run.id, str(registry.root), registry.db.url)


def _task(run: Run):
    """The run's live Ray actor, or None when it is gone (finished, killed, or lost with its node)."""
    if not run.task:
        return None
    try:
        return ray.get_actor(run.task, namespace=NAMESPACE)
    except ValueError:
        return None


def lost(runs: list[Run]) -> list[Run]:
    """The queued or running runs on Ray whose task is gone without recording an outcome."""
    connect()
    return [run for run in runs if run.task and _task(run) is None and run.status in (QUEUED, RUNNING)]


def cancel(registry: Registry, run: Run) -> None:
    """A run still waiting for a place: its task is withdrawn from Ray's queue. A running one stops after
    its current step, keeping its last checkpoint."""
    connect()
    if run.status == QUEUED:
        task = _task(run)
        if task is not None:
            ray.kill(task)
        registry.update(run.id, status=CANCELLED, finished=time.time(), message="cancelled before it started")
    else:
        registry.update(run.id, cancel_requested=1)
