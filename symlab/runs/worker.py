"""The process that trains one registered run, of whichever lab the run names.

``python -m symlab.runs.worker RUN_ID [--runs-dir DIR]``; the run manager starts it in a session of its own
(:func:`symlab.runs.supervisor.launch_worker`). The command line calls :func:`symlab.runs.execution.execute` in
its own process instead.
"""

from __future__ import annotations

import argparse
import os
import sys

from symlab.labs import run_kinds
from symlab.specs.settings import RunLimits, SettingsError

from .device import set_threads
from .execution import ShutdownFlag, execute
from .registry import Registry, retried
from .supervisor import dispatch


def _limits():
    try:
        return RunLimits.from_env()
    except SettingsError as error:  # the server showed it too; train with the defaults
        print(f"ignoring a setting: {error}", flush=True)
        return RunLimits()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m symlab.runs.worker", description=__doc__)
    parser.add_argument("run_id", type=int)
    parser.add_argument("--runs-dir", default=None)
    args = parser.parse_args(argv)
    registry = Registry(run_kinds(), args.runs_dir)
    registry.register_process(args.run_id, os.getpid())
    try:
        os.nice(5)  # the web server stays responsive while a run trains
    except OSError:
        pass
    limits = _limits()
    if limits.worker_threads:
        set_threads(limits.worker_threads)
    shutdown = ShutdownFlag()
    shutdown.install()
    print(f"run #{args.run_id} started (pid {os.getpid()})", flush=True)
    outage_seconds = 60.0 * limits.registry_outage_minutes
    final = execute(registry, args.run_id, shutdown=shutdown, outage_seconds=outage_seconds)
    print(f"run #{args.run_id} ended: {final.status} {final.message}", flush=True)
    retried(lambda: dispatch(registry, limits), outage_seconds)  # start whatever waits in the queue
    return 0


if __name__ == "__main__":
    sys.exit(main())
