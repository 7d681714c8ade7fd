"""The headless twin of the app: ``python -m symlab <lab> ... [--json]``.

The parser is built from the lab registry (:data:`symlab.labs.LABS`): each lab registers its own
subcommands, each with a ``run`` (arguments -> JSON-ready report) and a ``format`` (report ->
table). This module holds what they share: argument types, progress on stderr, one error path.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

from .controls import MAX_INT, shown

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


def number_list(text: str, number, what: str, ok, requirement: str) -> list:
    """A comma-separated list of ``number``s (``what``: "numbers"), each satisfying ``ok``."""
    try:
        values = [number(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{shown(text)} is not a comma-separated list of {what}") from None
    if not values or not all(ok(v) for v in values):
        raise argparse.ArgumentTypeError(f"{shown(text)} needs {requirement}")
    return values


def float_list(text: str) -> list[float]:
    return number_list(text, float, "numbers", lambda v: math.isfinite(v) and v >= 0, "one or more finite numbers >= 0")


def int_list(text: str) -> list[int]:
    return number_list(text, int, "whole numbers", lambda v: 1 <= v <= MAX_INT,
                       f"one or more whole numbers in [1, {MAX_INT}]")


def stderr_progress(args, what: str = ""):
    def progress(done, total, stage=what):
        if not args.json:
            print(f"  {stage} {done}/{total}", file=sys.stderr, flush=True)

    return progress


def load_mnist(directory):
    from symlab.lib.mnist_data import load_mnist

    return load_mnist(directory)


def pm(mean, std, digits):
    return "nan" if mean is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def build_parser() -> argparse.ArgumentParser:
    from .labs import LABS  # here: the labs' command-line modules import this one

    parser = argparse.ArgumentParser(
        prog="python -m symlab",
        description="SymLab labs without the browser. Each lab prints a table, or JSON with --json.",
    )
    subparsers = parser.add_subparsers(dest="lab", metavar="<lab>", title="labs")
    subparsers.required = True
    for lab in LABS:
        lab.register(subparsers)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    def fail(status: int, message) -> None:
        # One line: torch appends C++ stack frames to some of its messages.
        lines = str(message).strip().splitlines()
        line = lines[0] if lines else "failed"
        # Escaped: a message may quote user input (a directory name) holding terminal control codes.
        line = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in line)
        parser.exit(status, f"{parser.prog} {args.lab}: error: {line}\n")

    try:
        result = args.run(args)
    except ValueError as error:
        fail(2, error)
    except RuntimeError as error:  # a run that did not finish, or an unusable data/runs directory
        if len(error.args) > 1 and args.json:
            print(json.dumps(error.args[1], allow_nan=False))
        fail(1, error.args[0] if error.args else error)
    except OSError as error:  # e.g. a --data-dir that cannot be read
        fail(1, error)
    except MemoryError as error:
        fail(1, f"out of memory ({error})" if str(error) else "out of memory")
    print(json.dumps(result, allow_nan=False) if args.json else args.format(result))
    failure = getattr(args, "failure", None)
    if failure and failure(result):
        fail(1, failure(result))
    return 0
