"""What the labs' commands share: argument types, progress on stderr, reading MNIST, mean ± sd."""

from __future__ import annotations

import argparse
import os
import sys

from symlab.runs import supervisor
from symlab.runs.registry import RESTART, RESUME
from symlab.specs.controls import MAX_INT, shown
from symlab.specs.run_kind import RESUMABLE, RUNNING
from symlab.specs.settings import EXECUTORS, mnist_directory

# Work that a single command may ask for at once: α values × seeds of a toy table, runs of a sweep.
MAX_RUNS = 10_000


def int_at_least(minimum: int, maximum: int = MAX_INT):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown(text)} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{shown(text)} must be >= {minimum}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{shown(text)} must be <= {maximum}")
        return value

    return parse


def stderr_progress(args, what: str = ""):
    def progress(done, total, stage=what):
        if not args.json:
            print(f"  {stage} {done}/{total}", file=sys.stderr, flush=True)

    return progress


def landscape_summary(written: dict) -> str:
    """The table's line for a ``--surface`` landscape (:func:`symlab.specs.surfaces.summary`)."""
    from symlab.specs import surfaces  # numpy: the report is computed by now, and --help loads none

    return f"landscape: {surfaces.summary(written)}"


def load_mnist(directory):
    """MNIST from ``directory`` (--data-dir), else $SYMLAB_MNIST_DIR, else the shipped copy."""
    from symlab.lib.mnist_data import load_mnist as read_mnist  # numpy: loaded to read, not to parse

    return read_mnist(mnist_directory(directory))


def add_data_dir(parser) -> None:
    parser.add_argument(
        "--data-dir",
        default=None,
        help="directory with the four MNIST IDX .gz files (default: $SYMLAB_MNIST_DIR, else the copy in assets/mnist)",
    )


def add_registry_options(parser, executor_help: str) -> None:
    """--runs-dir and --executor, for the commands whose runs the registry records, as the app's are."""
    parser.add_argument(
        "--runs-dir",
        default=None,
        help="run registry and checkpoints (default: $SYMLAB_RUNS_DIR or ./runs), shared with the app",
    )
    parser.add_argument("--executor", choices=EXECUTORS, default=None, help=executor_help)


def pm(mean, std, digits):
    return "nan" if mean is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def lab_run(registry, run_id: int, lab: str, what: str):
    """Run ``run_id`` of ``registry``, which must be one of ``lab``'s; ``what`` names such a run in the error."""
    try:
        run = registry.get(run_id)
    except KeyError as error:
        raise ValueError(error.args[0]) from None
    if run.lab != lab:
        raise ValueError(f"run #{run_id} is not {what}")
    return run


def export_run_id(text: str) -> int:
    """--export's RUN_ID, a whole number >= 1."""
    try:
        return int_at_least(1)(text)
    except argparse.ArgumentTypeError as error:
        raise ValueError(f"--export RUN_ID: {error}") from None


def resume_here(registry, run) -> None:
    """Mark a stopped ``run`` as running in this process, to train it on from its checkpoint."""
    if run.status not in RESUMABLE:
        raise ValueError(f"run #{run.id} is {run.status}; only {', '.join(RESUMABLE)} runs can be resumed")
    _run_here(registry, run, RESUME)


def restart_here(registry, run) -> None:
    """Mark a stopped ``run`` as running in this process, to train it again from its first epoch (its checkpoints
    and metrics dropped)."""
    if run.status not in RESUMABLE:
        raise ValueError(f"run #{run.id} is {run.status}; only {', '.join(RESUMABLE)} runs can be restarted")
    supervisor.forget_training(registry, run.id)
    _run_here(registry, run, RESTART)


def _run_here(registry, run, what: str) -> None:
    registry.update(run.id, status=RUNNING, cancel_requested=0, finished=None, message="")
    registry.register_process(run.id, os.getpid())
    registry.record_launch(run.id, "", "cli", what)


def add_resume_options(parser, what: str) -> None:
    """--resume and --restart RUN_ID (one or the other) for a lab's runs, ``what`` naming where resuming goes on."""
    again = parser.add_mutually_exclusive_group()
    again.add_argument(
        "--resume",
        type=int_at_least(1),
        default=None,
        metavar="RUN_ID",
        help=f"continue an interrupted, cancelled or failed run from {what}",
    )
    again.add_argument(
        "--restart",
        type=int_at_least(1),
        default=None,
        metavar="RUN_ID",
        help="train an interrupted, cancelled or failed run again from the start, its checkpoints and "
        "metrics dropped (for one whose checkpoints cannot be read)",
    )
