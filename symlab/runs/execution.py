"""Training one registered run in this process, of whichever lab the run names: epoch by epoch from its
checkpoint, with heartbeats, progress and the outcome recorded in the registry. The local worker process
(:mod:`symlab.runs.worker`), a Ray task (:mod:`symlab.runs.ray_cluster`) and the command line call it.

After each epoch its metrics are written first, then its checkpoint (``checkpoint-<epoch>.pt``, the one before it
kept too), then the epoch is recorded: a run stopped anywhere in between resumes from its newest checkpoint and
trains again what came after it. While the registry's database is unreachable the run trains on and its writes
wait, retried, for up to ``outage_seconds``; a checkpoint that cannot be read is set aside and said so plainly."""

from __future__ import annotations

import os
import signal
import time
import traceback

from symlab.specs.results import TrainingDiverged
from symlab.specs.run_kind import CANCELLED, DIVERGED, FAILED, FINISHED, INTERRUPTED, Training
from symlab.specs.settings import RunLimits

from .device import device_name
from .registry import UNREADABLE, RegistryError, checkpoint_epoch, retried

HEARTBEAT_SECONDS = 1.0
OUTAGE_SECONDS = 60.0 * RunLimits().registry_outage_minutes  # the default wait for an unreachable registry


class TrainingStopped(Exception):
    """Training was asked to stop (cancel or shutdown) in the middle of an epoch."""


class NoCheckpointReadable(Exception):
    """None of the run's checkpoints could be read; each was set aside, and the message says so."""


class ShutdownFlag:
    """Set by SIGTERM: the run stops after its current step and can be resumed."""

    requested = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum, frame):
        self.requested = True


def _say_waiting(error: RegistryError, pause: float) -> None:
    print(f"waiting {pause:g} s for the run registry: {error}", flush=True)  # the worker's log


def execute(
    registry,
    run_id: int,
    *,
    data_dir=None,
    shutdown: ShutdownFlag | None = None,
    echo=None,
    outage_seconds: float = OUTAGE_SECONDS,
):
    """Train the run to its last epoch in this process, from its newest checkpoint if it has one, and
    record progress, metrics and the outcome in the registry. The run's lab reads its data from
    ``data_dir`` (None: the lab's default); ``echo(metrics)`` hears of every epoch. Returns the
    final record."""

    def durably(call):
        return retried(call, outage_seconds, on_wait=_say_waiting)

    run = durably(lambda: registry.get(run_id))
    kind = registry.kind(run.lab)
    registry.run_dir(run_id).mkdir(parents=True, exist_ok=True)
    training: Training | None = None
    last_beat = 0.0

    def on_step(step, steps):
        """A heartbeat each second (which hears of a cancel), and a stop on a shutdown signal. Called between
        training steps, and between the chunks of an evaluation."""
        nonlocal last_beat
        assert training is not None  # called by the training itself
        now = time.monotonic()
        if now - last_beat >= HEARTBEAT_SECONDS:
            last_beat = now
            progress = (training.epoch + step / steps) / training.epochs
            try:
                cancelled = registry.heartbeat(run_id, training.epoch, progress)
            except RegistryError as error:
                if not error.transient:
                    raise
                cancelled = False  # the database is away: train on; the epoch's end waits for it
            if cancelled:
                raise TrainingStopped("cancel requested")
        if shutdown is not None and shutdown.requested:
            raise TrainingStopped("shutdown signal")

    def stopped_after() -> str:
        if training is None or not training.epoch:
            return "before its first epoch ended"
        return f"after epoch {training.epoch} of {training.epochs}"

    def record(**values):
        durably(lambda: registry.update(run_id, **values))

    def summary() -> dict:
        assert training is not None  # asked for once it trained
        return {**training.summary(), "device_name": device_name(run.device)}

    try:
        training = kind.start(run.config, run.device, data_dir)
        try:
            recovered = load_newest(registry, run_id, training, kind.failures)
        except NoCheckpointReadable as error:
            training, recovered = kind.start(run.config, run.device, data_dir), str(error)
        if recovered:  # the page says it while the run trains, and after
            record(message=recovered)
        durably(lambda: registry.drop_metrics_after(run_id, training.epoch))  # metrics of a half-finished epoch
        while training.epoch < training.epochs:
            metrics = training.train_epoch(on_step)
            durably(lambda: registry.add_metrics(run_id, metrics))
            save_checkpoint(registry, run_id, training, durably)
            durably(lambda: registry.heartbeat(run_id, training.epoch, training.epoch / training.epochs))
            if echo:
                echo(metrics)
        record(status=FINISHED, finished=time.time(), pid=None, progress=1.0, message=recovered, result=summary())
    except TrainingStopped:
        if durably(lambda: registry.get(run_id)).cancel_requested:
            record(
                status=CANCELLED,
                finished=time.time(),
                pid=None,
                message=f"cancelled {stopped_after()}; resume continues from there",
            )
        else:
            record(
                status=INTERRUPTED,
                pid=None,
                message=f"stopped by a shutdown signal {stopped_after()}; resume continues from there",
            )
    except KeyboardInterrupt:
        record(status=INTERRUPTED, pid=None, message=f"interrupted {stopped_after()}; resume continues from there")
        raise
    except TrainingDiverged as error:
        record(status=DIVERGED, finished=time.time(), pid=None, message=str(error), result=summary())
    except (ValueError, *kind.failures) as error:  # bad settings, missing data, a full disk: the message says it
        record(status=FAILED, finished=time.time(), pid=None, message=str(error))
    except Exception as error:  # recorded, not lost: the log has the traceback
        traceback.print_exc()
        said = error.public if isinstance(error, RegistryError) else error  # pages show it: no database address
        record(
            status=FAILED,
            finished=time.time(),
            pid=None,
            message=f"unexpected error: {type(error).__name__}: {said} (details in {registry.log_path(run_id)})",
        )
    return durably(lambda: registry.get(run_id))


def save_checkpoint(registry, run_id: int, training, durably) -> None:
    """Write the epoch's checkpoint and keep the one before it. Where it cannot be written (a full disk), the
    epoch's metrics go too: the registry holds none past the newest checkpoint, where resuming goes on."""
    try:
        training.save(registry.checkpoint_path(run_id, training.epoch))
    except Exception:
        durably(lambda: registry.drop_metrics_after(run_id, training.epoch - 1))
        raise
    registry.keep_newest_checkpoints(run_id)


def load_newest(registry, run_id: int, training, failures: tuple[type[BaseException], ...] = ()) -> str:
    """Continue ``training`` from the run's newest checkpoint that can be read. Each newer one that cannot is set
    aside (``<name>.unreadable``), so that one Resume recovers the run; returns what was set aside and where training
    goes on from, in words ("" where nothing was). A lab's own error (one of ``failures``) says why in words; any
    other, in general. :class:`NoCheckpointReadable` where none could be read: the caller starts afresh (a failed
    load may have filled ``training`` in part)."""
    set_aside = []
    for path in registry.checkpoints(run_id):
        try:
            training.load(path)
        except Exception as error:  # a damaged, truncated or foreign file fails in as many ways as its reader has
            reason = (
                str(error) if isinstance(error, failures) else "the file is damaged or is not one of its checkpoints"
            )
            os.replace(path, path.with_name(path.name + UNREADABLE))
            epoch = checkpoint_epoch(path)
            set_aside.append(f"its checkpoint{f' of epoch {epoch}' if epoch else ''} could not be read ({reason})")
            continue
        return f"{_set_aside(set_aside)}: it went on after epoch {training.epoch}" if set_aside else ""
    if set_aside:
        raise NoCheckpointReadable(f"{_set_aside(set_aside)}: it started again from the beginning")
    return ""


def _set_aside(unreadable: list[str]) -> str:
    return f"{'; '.join(unreadable)}, and {'it was' if len(unreadable) == 1 else 'they were'} set aside"
