"""Tables as a student reads them: numbers formatted once, a dash where there is no value (st.dataframe
would print "None"), and on the projector text as large as the page's with every row in view."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from views.common import charts

MISSING = "—"


def formatted(frame: pd.DataFrame, formats: dict[str, str]) -> pd.DataFrame:
    """``frame`` with each column named in ``formats`` written with its format spec (``"{:.4f}"``-style, without
    the braces: ``".4f"``), a missing value as a dash."""

    def written(spec):
        return lambda value: MISSING if value is None or pd.isna(value) else format(value, spec)

    return frame.assign(**{name: frame[name].map(written(spec)) for name, spec in formats.items() if name in frame})


def with_spread(mean: float, sd: float, seeds: int, digits: int, sign: str = "") -> str:
    """ "mean ± sd" over seeds; the mean alone over one seed, which has no spread (``sign``: "+" to sign it)."""
    shown = f"{mean:{sign}.{digits}f}".replace("-", "−")
    return shown if seeds < 2 else f"{shown} ± {sd:.{digits}f}"


def duration(seconds: float) -> str:
    """A run's length in words: seconds under two minutes, else minutes, else hours."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def show(data, *, column_config: dict | None = None, hide_index: bool | None = None, **options) -> None:
    """A table: the interactive grid (sortable, scrolling), or in presentation mode an HTML table. The grid draws
    its text at a fixed 13 px on a canvas and shows about ten rows, so on a projector its text stayed small while
    the page's grew, and results tables hid their last rows behind an inner scroll."""
    if charts.presenting():
        st.table(for_projector(data, column_config or {}, hide_index))
    else:
        st.dataframe(data, column_config=column_config, hide_index=hide_index, **options)


def for_projector(data, column_config: dict, hide_index: bool | None):
    """``data`` (a DataFrame or an Arrow table) as st.table shows it: each column's configured format, label and
    kind (progress as a percentage, a tick for a checkbox) written out, a dash where there is no value."""
    frame = data.to_pandas() if not isinstance(data, pd.DataFrame) else data.copy()
    for name, column in column_config.items():
        if name in frame:
            frame[name] = frame[name].map(_writer(column.get("type_config") or {}))
    frame = frame.rename(
        columns={name: column["label"] for name, column in column_config.items() if column.get("label")}
    )
    frame = frame.astype(object).where(frame.notna(), MISSING)
    return frame.style.hide(axis="index") if hide_index else frame


def _writer(kind: dict):
    """How a column configured as ``kind`` (a column config's type_config) reads as text."""

    def written(value):
        if value is None or (not isinstance(value, (list, tuple)) and pd.isna(value)):
            return MISSING
        if kind.get("type") == "checkbox":
            return "✓" if value else ""
        if kind.get("type") == "progress":
            low, high = kind.get("min_value") or 0, kind.get("max_value") or 1
            return f"{(value - low) / (high - low):.0%}"
        if kind.get("type") == "number" and kind.get("format"):
            return kind["format"] % value
        return value

    return written
