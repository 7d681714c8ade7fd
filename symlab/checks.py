"""Validation of experiment configs and JSON-ready reports, shared by the labs' experiments."""

from __future__ import annotations

import math


def check(checks) -> None:
    """Raise one ValueError naming every failed ``(ok, message)`` pair."""
    problems = [message for ok, message in checks if not ok]
    if problems:
        raise ValueError("; ".join(problems))


def is_int(value, low, high) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def is_float(value, low, high) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and low <= value <= high)


def public(report: dict) -> dict:
    """A report without its private (non-JSON) entries, the keys starting with ``_``."""
    return {k: public(v) if isinstance(v, dict) else v for k, v in report.items() if not k.startswith("_")}
