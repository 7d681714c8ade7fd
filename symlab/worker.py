"""The process that trains one registered run, of whichever lab the run names.

``python -m symlab.worker RUN_ID [--runs-dir DIR] [--detach]``; the run manager starts it with
``--detach`` (it then re-launches itself in a new session and returns at once). The command line
calls :func:`execute` in its own process instead.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import traceback

from .results import TrainingDiverged

HEARTBEAT_SECONDS = 1.0


class TrainingStopped(Exception):
    """Training was asked to stop (cancel or shutdown) in the middle of an epoch."""


class _ShutdownFlag:
    """Set by SIGTERM: the run stops after its current step and can be resumed."""

    requested = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame):
        self.requested = True


def execute(registry, run_id: int, *, data_dir=None, shutdown: _ShutdownFlag | None = None, echo=None):
    """Train the run to its last epoch in this process, from its checkpoint if it has one, and
    record progress, metrics and the outcome in the registry. The run's lab reads its data from
    ``data_dir`` (None: the lab's default); ``echo(metrics)`` hears of every epoch. Returns the
    final record."""
    from .runs import CANCELLED, DIVERGED, FAILED, FINISHED, INTERRUPTED, run_kind

    run = registry.get(run_id)
    kind = run_kind(run.lab)
    checkpoint = registry.checkpoint_path(run_id)
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    training = None

    def on_step(step, steps):
        nonlocal last_beat
        now = time.monotonic()
        if now - last_beat >= HEARTBEAT_SECONDS:
            last_beat = now
            progress = (training.epoch + step / steps) / training.epochs
            if registry.heartbeat(run_id, training.epoch, progress):
                raise TrainingStopped("cancel requested")
        if shutdown is not None and shutdown.requested:
            raise TrainingStopped("shutdown signal")

    def stopped_after() -> str:
        done = training.epoch if training else 0
        return f"after epoch {done} of {training.epochs}" if done else "before its first epoch ended"

    last_beat = 0.0
    try:
        training = kind.start(run.config, run.device, data_dir)
        if checkpoint.exists():
            training.load(checkpoint)
        registry.drop_metrics_after(run_id, training.epoch)  # metrics of a half-finished epoch
        while training.epoch < training.epochs:
            metrics = training.train_epoch(on_step)
            training.save(checkpoint)
            registry.add_metrics(run_id, metrics)
            registry.heartbeat(run_id, training.epoch, training.epoch / training.epochs)
            if echo:
                echo(metrics)
        registry.update(run_id, status=FINISHED, finished=time.time(), pid=None, progress=1.0, message="",
                        result=training.summary())
    except TrainingStopped:
        if registry.get(run_id).cancel_requested:
            registry.update(run_id, status=CANCELLED, finished=time.time(), pid=None,
                            message=f"cancelled {stopped_after()}; resume continues from there")
        else:
            registry.update(run_id, status=INTERRUPTED, pid=None,
                            message=f"stopped by a shutdown signal {stopped_after()}; resume continues from there")
    except KeyboardInterrupt:
        registry.update(run_id, status=INTERRUPTED, pid=None,
                        message=f"interrupted {stopped_after()}; resume continues from there")
        raise
    except TrainingDiverged as error:
        registry.update(run_id, status=DIVERGED, finished=time.time(), pid=None, message=str(error),
                        result=training.summary())
    except (ValueError, *kind.failures) as error:  # bad settings, missing data, a full disk: the message says it
        registry.update(run_id, status=FAILED, finished=time.time(), pid=None, message=str(error))
    except Exception as error:  # recorded, not lost: the log has the traceback
        traceback.print_exc()
        registry.update(run_id, status=FAILED, finished=time.time(), pid=None,
                        message=f"unexpected error: {type(error).__name__}: {error} "
                                f"(details in {registry.log_path(run_id)})")
    return registry.get(run_id)


def _limits():
    from .hosting import RunLimits, SettingsError

    try:
        return RunLimits.from_env()
    except SettingsError as error:  # the server showed it too; train with the defaults
        print(f"ignoring a setting: {error}", flush=True)
        return RunLimits()


def main(argv=None) -> int:
    from .runs import REPO_ROOT, Registry, dispatch

    parser = argparse.ArgumentParser(prog="python -m symlab.worker", description=__doc__)
    parser.add_argument("run_id", type=int)
    parser.add_argument("--runs-dir", default=None)
    parser.add_argument("--detach", action="store_true", help="re-launch in a new session and return")
    args = parser.parse_args(argv)
    registry = Registry(args.runs_dir)
    if args.detach:
        with open(registry.log_path(args.run_id), "ab") as log:
            subprocess.Popen([sys.executable, "-m", "symlab.worker", str(args.run_id), "--runs-dir",
                              str(registry.root)], cwd=REPO_ROOT, start_new_session=True,
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        return 0
    registry.register_process(args.run_id, os.getpid())
    try:
        os.nice(5)  # the web server stays responsive while a run trains
    except OSError:
        pass
    limits = _limits()
    if limits.worker_threads:
        from symlab.device import set_threads

        set_threads(limits.worker_threads)
    shutdown = _ShutdownFlag()
    shutdown.install()
    print(f"run #{args.run_id} started (pid {os.getpid()})", flush=True)
    final = execute(registry, args.run_id, shutdown=shutdown)
    print(f"run #{args.run_id} ended: {final.status} {final.message}", flush=True)
    dispatch(registry, limits)  # start whatever waits in the queue
    return 0


if __name__ == "__main__":
    sys.exit(main())
