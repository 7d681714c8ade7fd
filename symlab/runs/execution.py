"""Training one registered run in this process, of whichever lab the run names: epoch by epoch from its
checkpoint, with heartbeats, progress and the outcome recorded in the registry. The local worker process
(:mod:`symlab.runs.worker`), a Ray task (:mod:`symlab.runs.ray_cluster`) and the command line call it."""

from __future__ import annotations

import signal
import time
import traceback

from symlab.specs.results import TrainingDiverged
from symlab.specs.run_kind import CANCELLED, DIVERGED, FAILED, FINISHED, INTERRUPTED

HEARTBEAT_SECONDS = 1.0


class TrainingStopped(Exception):
    """Training was asked to stop (cancel or shutdown) in the middle of an epoch."""


class ShutdownFlag:
    """Set by SIGTERM: the run stops after its current step and can be resumed."""

    requested = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame):
        self.requested = True


def execute(registry, run_id: int, *, data_dir=None, shutdown: ShutdownFlag | None = None, echo=None):
    """Train the run to its last epoch in this process, from its checkpoint if it has one, and
    record progress, metrics and the outcome in the registry. The run's lab reads its data from
    ``data_dir`` (None: the lab's default); ``echo(metrics)`` hears of every epoch. Returns the
    final record."""
    run = registry.get(run_id)
    kind = registry.kind(run.lab)
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
