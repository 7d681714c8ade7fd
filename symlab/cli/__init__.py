"""The headless twin of the app: ``python -m symlab <lab> ... [--json]``.

The parser is built from the lab registry (:data:`symlab.labs.LABS`): each lab registers its own
subcommands (its module here, ``symlab/cli/<lab>.py``), each with a ``run`` (arguments -> JSON-ready
report) and a ``format`` (report -> table). This module holds the one error path; :mod:`symlab.cli.common`,
what the commands share.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from symlab.cli import serve
from symlab.labs import LABS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="symlab" if Path(sys.argv[0]).name == "symlab" else "python -m symlab",  # the console script, or -m
        description="SymLab labs without the browser. Each lab prints a table, or JSON with --json.",
    )
    subparsers = parser.add_subparsers(dest="lab", metavar="<lab>", title="labs")
    subparsers.required = True
    for lab in LABS:
        lab.register(subparsers)
    serve.register(subparsers)
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
