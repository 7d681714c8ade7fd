"""Tables as a student reads them: numbers formatted once, and a dash where there is no value (st.dataframe
would print "None")."""

from __future__ import annotations

import pandas as pd

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
