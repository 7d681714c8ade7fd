"""What the labs measured, gathered: each lab declares its findings in its own package (``Lab.findings``, a module
with ``numbers(shipped)`` and ``findings(numbers)``: :mod:`symlab.specs.findings`), and the home page's cards, the
README's opening list and the class path (``symlab/specs/lessons.toml``) state them.

:func:`measure` reads every number from its source: a lab's own solver, its shipped table or comparisons, or the
default link's result the server ships (``assets/precomputed``, read here and passed to the labs). Those sources load
torch and take seconds, so the numbers are kept in ``assets/findings.json`` (``python -m symlab.serving.findings``
writes it again), which a page reads in a millisecond; tests/test_findings.py checks that file against
:func:`measure`, and the README and the class path against :func:`findings`."""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import sys

from symlab.labs import LABS
from symlab.lib.shipped import shipped
from symlab.serving import precomputed
from symlab.specs.findings import Finding, FindingsError
from symlab.specs.settings import IMPORT_ROOT

SHIPPED = shipped("findings.json")

__all__ = ["Finding", "FindingsError", "findings", "measure", "numbers", "of_lab"]


def lab_findings() -> list:
    """Each lab's findings module, in the registry's order."""
    return [importlib.import_module(lab.findings) for lab in LABS if lab.findings]


def shipped_result(task):
    """The default link's result the server ships for ``task``; :class:`FindingsError` where there is none."""
    result = precomputed.read(task)
    if result is None:
        raise FindingsError(
            f"{precomputed.path_of(task)} has no result for the default link: "
            "write it again with `python -m symlab.serving.precomputed`"
        )
    return result


def measure() -> dict:
    """Every number a finding states, read from its lab's shipped result or computed by its lab (seconds)."""
    values = {}
    for module in lab_findings():
        values.update(module.numbers(shipped_result))
    return values


@functools.cache
def numbers() -> dict:
    """The shipped numbers (``assets/findings.json``)."""
    try:
        return json.loads(SHIPPED.read_text())
    except (OSError, ValueError) as error:
        raise FindingsError(
            f"{SHIPPED} cannot be read ({error}): write it with `python -m symlab.serving.findings`"
        ) from None


def findings(values: dict | None = None) -> list[Finding]:
    """The findings in words, lab by lab, from ``values`` (default: the shipped numbers)."""
    v = numbers() if values is None else values
    return [finding for module in lab_findings() for finding in module.findings(v)]


def of_lab(lab: str) -> list[str]:
    """``lab``'s findings as markdown, for its card."""
    return [finding.markdown() for finding in findings() if finding.lab == lab]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m symlab.serving.findings",
        description="Measure the findings' numbers from the shipped results and write "
        f"them to {SHIPPED.relative_to(IMPORT_ROOT)}.",
    )
    parser.add_argument(
        "--print", action="store_true", help="print the findings in words, each with its command, instead of writing"
    )
    args = parser.parse_args(argv)
    values = measure()
    if args.print:
        print("\n".join(f"- {finding.markdown()} (`{finding.command}`)" for finding in findings(values)))
        return 0
    SHIPPED.write_text(json.dumps(values, indent=1) + "\n")
    print(f"wrote {SHIPPED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
