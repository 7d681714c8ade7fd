"""One divergence error, one verdict on whether networks learned, and one way to make results JSON-ready,
shared by every lab."""

from __future__ import annotations

import dataclasses
import math
import statistics


class TrainingDiverged(RuntimeError):
    """Training produced a non-finite loss or parameters; the message says where and what to change."""


# MNIST's ten classes: chance is 10 %; a network that classifies fewer than half of the test digits has not
# learned, and a ranking of methods built on it ranks untrained networks.
TRAINED_ACCURACY = 0.5


def training_verdict(accuracies, what: str) -> dict:
    """Whether the networks behind a ranking learned: ``trained`` is whether the median of their test ``accuracies``
    (fractions) reaches :data:`TRAINED_ACCURACY`, and ``trained_reason`` says so in a sentence naming ``what``
    they are; None and the reason where no accuracy is known yet."""
    values = sorted(float(a) for a in accuracies)
    if not values:
        return {"trained": None, "trained_reason": f"{what[:1].upper()}{what[1:]} are not trained yet"}
    median = statistics.median(values)
    share = f"{what[:1].upper()}{what[1:]} classify {100 * median:.1f} % of the test digits (median of {len(values)})"
    if median >= TRAINED_ACCURACY:
        return {"trained": True, "trained_reason": f"{share}, above the {100 * TRAINED_ACCURACY:.0f} % floor"}
    return {
        "trained": False,
        "trained_reason": (
            f"{share}, below the {100 * TRAINED_ACCURACY:.0f} % floor of a network that has learned (chance is 10 %): "
            "the ranking is of untrained networks and says nothing about the methods. Train longer or on more images."
        ),
    }


def to_json(value):
    """``value`` as plain JSON data: non-finite floats become None (JSON has no NaN), numpy arrays and
    scalars become lists and Python numbers, tuples become lists, and a dataclass becomes the dict of
    its fields, leaving out those marked ``metadata={"json": False}`` (in-memory objects for pages)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value) if f.metadata.get("json", True)
        }
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if hasattr(value, "dtype") and hasattr(value, "tolist"):  # a numpy (or torch) array or scalar: no numpy import
        return to_json(value.tolist())
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else None
    return value


def in_memory(**options):
    """A dataclass field a page reads but JSON leaves out (arrays of samples, fitted objects)."""
    return dataclasses.field(metadata={"json": False}, **options)
