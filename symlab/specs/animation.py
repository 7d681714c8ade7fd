"""An animation as the browser plays it (views/common/animation.py): frames of chart data, encoded once for every
session, so that a live panel plays with no page run per frame.

A frame gives, per chart, its named datasets, each as series: a label and its columns (numbers or text, equally
long). The encoding sends a series only where it differs from the frame before: a series that grew (a curve by
step) sends its new rows, one that moved sends each changed column's steps of its rounding (or its values), one
that did not is left out, one gone is null.
Numbers are rounded to :data:`SIGNIFICANT` digits of their column's largest in the frame, and the whole is
gzipped: a whole live run is tens of kilobytes."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

SIGNIFICANT = 4  # a ten-thousandth of the column's largest number: well under a pixel of any chart
Column = np.ndarray | Sequence[float] | Sequence[str]  # numbers (an array) or text (a list of str)
Columns = Mapping[str, Column]  # name -> column, all equally long
Frame = Mapping[str, Mapping[str, Mapping[str, Columns]]]  # chart -> dataset -> series label -> columns


@dataclass(frozen=True)
class Animation:
    """Frames as the browser receives them: gzipped JSON (base64), its identity, its frame count and size."""

    payload: str
    identity: str
    frames: int
    size: int  # bytes of the gzipped JSON


def decimals_of(values: np.ndarray) -> int:
    """The decimals that keep :data:`SIGNIFICANT` digits of the largest finite value (at most 307: 10 to that power
    is still a float, and a column of denormals rounds to 0)."""
    largest = _largest_magnitude(values)
    if not math.isfinite(largest):  # NaN or ±∞ among them: the largest of the rest
        finite = values[np.isfinite(values)]
        largest = float(np.abs(finite).max()) if finite.size else 0.0
    return _decimals_for(largest)


def _largest_magnitude(values: np.ndarray) -> float:
    """max |values| (NaN where one is NaN, ∞ where one is infinite), 0 for none: one pass, no mask."""
    return float(np.abs(values).max()) if values.size else 0.0


def _decimals_for(largest: float) -> int:
    return min(max(0, SIGNIFICANT - 1 - math.floor(math.log10(largest))), 307) if largest > 0 else 0


def rounded(values) -> list:
    """``values`` rounded to :data:`SIGNIFICANT` digits of the largest (None where not finite); whole numbers as
    they are."""
    values = np.asarray(values)
    if values.dtype.kind in "biu":
        return values.astype(np.int64).tolist()
    values = values.astype(np.float64)
    decimals = decimals_of(values)
    scale = 10.0**decimals
    out = np.rint(values * scale) / scale  # the arithmetic of steps_from and of the browser's rebuild
    largest = _largest_magnitude(out)
    if math.isfinite(largest):
        # Whole numbers as integers (shorter JSON) where a float holds them exactly; 1e300 stays a float.
        return out.astype(np.int64).tolist() if decimals == 0 and largest < 2.0**53 else out.tolist()
    finite = np.isfinite(values)
    return [v if ok else None for v, ok in zip(out.tolist(), finite.tolist())]


def steps_from(held: list, now) -> dict | None:
    """A numeric column that moved as whole steps of its rounding from what the browser holds: ``{"d": decimals,
    "v": differences}``, the steps' successive differences (the first: the first step); the browser's new values
    ``(round(held × 10^d) + step) / 10^d``, each ``rounded(now)``'s. Small steps that vary little from row to row
    pack far tighter than the values. None where the column cannot go so (text,
    a value not finite, held values off the rounding's grid, or so far from it that a float loses the steps)."""
    if _is_text(now):
        return None
    now = np.asarray(now)
    if now.dtype.kind not in "biuf":
        return None
    now_values = now.astype(np.float64, copy=False)
    held_values = np.asarray(held, dtype=np.float64)  # a value held as None (not finite) reads as NaN
    # The largest magnitudes are NaN or ∞ exactly where a value is not finite; scaling and rounding them keeps
    # their order, so they bound the scaled columns below without another pass.
    largest_now, largest_held = _largest_magnitude(now_values), _largest_magnitude(held_values)
    if not (math.isfinite(largest_now) and math.isfinite(largest_held)):
        return None
    decimals = 0 if now.dtype.kind in "biu" else _decimals_for(largest_now)
    scale = 10.0**decimals
    exact = 2.0**52  # whole numbers a float holds exactly
    if largest_held * scale >= exact or float(np.rint(largest_now * scale)) >= exact:
        return None
    before = held_values * scale
    held_steps = np.rint(before)
    if (np.abs(before - held_steps) >= 1e-6).any():
        return None
    steps = (np.rint(now_values * scale) - held_steps).astype(np.int64)
    steps[1:] -= steps[:-1].copy()  # successive differences: a curve's steps vary little along it
    return {"d": decimals, "v": steps.tolist()}


def _is_text(column) -> bool:
    return isinstance(column, (list, tuple)) and bool(column) and isinstance(column[0], str)


def encoded_columns(columns: Columns, start: int = 0) -> dict:
    """Columns from row ``start`` on: numbers rounded, text as it is."""
    return {
        name: list(column[start:]) if _is_text(column) else rounded(np.asarray(column)[start:])
        for name, column in columns.items()
    }


def _length(columns: Columns) -> int:
    return len(next(iter(columns.values()))) if columns else 0


def _same(a, b) -> bool:
    if a is b:  # a column a frame shares with the one before (a fixed axis, a series that did not move)
        return True
    if _is_text(a) or _is_text(b):
        return list(a) == list(b)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    equal = a == b
    if equal.all():
        return True
    return a.dtype.kind == b.dtype.kind == "f" and bool((equal | (np.isnan(a) & np.isnan(b))).all())  # NaN as NaN


def series_change(before: Columns | None, now: Columns, held: dict | None) -> dict | None:
    """How one series changed since the frame before (the browser holding ``held`` of it): None (it did not),
    ``{"append": columns}`` (rows added at its end), ``{"add": steps, "set": columns}`` (the same rows, these
    columns changed: by :func:`steps_from` where they can, else their values) or ``{"rows": columns}``."""
    if before is not None and list(before) == list(now):
        old, new = _length(before), _length(now)
        if old <= new and all(_same(before[name], now[name] if old == new else now[name][:old]) for name in now):
            return None if old == new else {"append": encoded_columns(now, old)}
        if old == new:
            change: dict = {}
            for name in (name for name in now if not _same(before[name], now[name])):
                # A single value goes as it is: its step would be no shorter, and finding it costs as much. Steps
                # need the values the browser holds.
                steps = steps_from(held[name], now[name]) if held is not None and len(now[name]) > 1 else None
                if steps is None:
                    change.setdefault("set", {})[name] = encoded_columns({name: now[name]})[name]
                else:
                    change.setdefault("add", {})[name] = steps
            return change
    return {"rows": encoded_columns(now)}


def frame_changes(before: Frame | None, now: Frame, held: dict) -> dict:
    """Frame ``now`` as changes to ``before``, the browser holding ``held`` (:func:`apply`'s): chart -> dataset ->
    series -> change (null: the series is gone)."""
    changes: dict = {}
    for chart, datasets in now.items():
        for name, series in datasets.items():
            old = (before or {}).get(chart, {}).get(name, {})
            kept = held.get(chart, {}).get(name, {})
            dataset = {label: series_change(old.get(label), cols, kept.get(label)) for label, cols in series.items()}
            dataset = {label: change for label, change in dataset.items() if change is not None}
            dataset |= {label: None for label in old if label not in series}
            if dataset:
                changes.setdefault(chart, {})[name] = dataset
    return changes


def after_change(columns: dict | None, change: dict, arrays: bool = False) -> dict:
    """One series' columns after a frame's change, as the browser rebuilds them (views/common/animation.js);
    ``arrays``: numeric columns stepped by ``add`` as arrays (the encoder's own bookkeeping), not lists."""
    if "rows" in change:
        return change["rows"]
    if columns is None:
        raise ValueError(f"a change of a series' rows ({', '.join(change)}) needs the rows it changes")
    if "append" in change:
        return {name: _joined(columns[name], values) for name, values in change["append"].items()}
    result = {**columns, **change.get("set", {})}
    for name, steps in change.get("add", {}).items():
        scale = 10.0 ** steps["d"]
        moved = np.cumsum(np.asarray(steps["v"], dtype=np.int64))
        # Held values lie on the rounding's grid: rint and the browser's Math.round agree (no halves to break).
        values = (np.rint(np.asarray(columns[name], dtype=np.float64) * scale) + moved) / scale
        result[name] = values if arrays else values.tolist()
    return result


def _joined(held, values: list):
    return (
        np.concatenate([held, np.asarray(values, dtype=held.dtype)]) if isinstance(held, np.ndarray) else held + values
    )


def apply(held: dict, changes: dict, arrays: bool = False) -> None:
    """A frame's changes applied to the datasets ``held``: chart -> dataset -> series -> columns (``arrays``: as
    :func:`after_change`'s)."""
    for chart, datasets in changes.items():
        for name, series in datasets.items():
            dataset = held.setdefault(chart, {}).setdefault(name, {})
            for label, change in series.items():
                if change is None:
                    dataset.pop(label, None)
                else:
                    dataset[label] = after_change(dataset.get(label), change, arrays)


def encode(frames: Sequence[Frame], labels: Sequence[str], captions: Sequence[str]) -> Animation:
    """The animation of ``frames``, each with its progress ``label`` and a ``caption`` of the numbers it shows."""
    if not frames or not len(frames) == len(labels) == len(captions):
        raise ValueError("an animation needs at least one frame, each with a label and a caption")
    held: dict = {}  # what the browser holds, frame by frame
    changes = []
    for k, frame in enumerate(frames):
        changes.append(frame_changes(frames[k - 1] if k else None, frame, held))
        apply(held, changes[-1], arrays=True)  # kept as arrays: each next frame's steps are taken from them
    document = {
        "frames": changes,
        "labels": list(labels),
        "captions": list(captions),
    }
    text = json.dumps(document, separators=(",", ":"), allow_nan=False).encode()
    packed = gzip.compress(text, compresslevel=6, mtime=0)
    return Animation(
        base64.b64encode(packed).decode("ascii"), hashlib.sha1(packed).hexdigest()[:16], len(frames), len(packed)
    )


def decode(animation: Animation) -> dict:
    """The JSON document back (tests, and anyone reading what a browser receives)."""
    return decode_payload(animation.payload)


def decode_payload(payload: str) -> dict:
    """The JSON document of an animation's payload, as the browser unpacks it."""
    return json.loads(gzip.decompress(base64.b64decode(payload)))


def rows_at(document: dict, frame: int) -> dict:
    """Frame ``frame``'s datasets rebuilt from the changes, as the browser rebuilds them: chart -> dataset ->
    series -> columns."""
    held: dict = {}
    for changes in document["frames"][: frame + 1]:
        apply(held, changes)
    return held
