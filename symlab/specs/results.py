"""One divergence error and one way to make results JSON-ready, shared by every lab."""

from __future__ import annotations

import dataclasses
import math

import numpy as np


class TrainingDiverged(RuntimeError):
    """Training produced a non-finite loss or parameters; the message says where and what to change."""


def to_json(value):
    """``value`` as plain JSON data: non-finite floats become None (JSON has no NaN), numpy arrays and
    scalars become lists and Python numbers, tuples become lists, and a dataclass becomes the dict of
    its fields, leaving out those marked ``metadata={"json": False}`` (in-memory objects for pages)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.metadata.get("json", True)}
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return to_json(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def in_memory(**options):
    """A dataclass field a page reads but JSON leaves out (arrays of samples, fitted objects)."""
    return dataclasses.field(metadata={"json": False}, **options)
