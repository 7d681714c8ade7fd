"""Page state <-> URL query parameters, validated: a copied link restores the view.

Each page declares its controls as :class:`Param` specs. :func:`parse_query` turns whatever a
URL carries into valid values plus human-readable notices (never an exception);
:func:`encode_query` turns values back into strings for the URL.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_SHOWN_CHARS = 40
# Query parameters that Streamlit itself owns; never reported as unknown.
_RESERVED = ("embed", "embed_options")
_ESCAPED = ("Cc", "Cf", "Zl", "Zp")  # Unicode categories of control, format and line-separator characters
TOKEN = re.compile(r"[A-Za-z0-9_-]{1,32}")  # a "tokens" item: URL-safe, as secrets.token_urlsafe writes them


@dataclass(frozen=True)
class Param:
    """One control. ``kind`` is ``float``, ``int``, ``bool``, ``choice``, ``floats`` (a
    comma-separated list of at most ``max_items`` numbers, each within [low, high]) or ``tokens`` (a
    comma-separated list of at most ``max_items`` words of letters, digits, - and _: ids that name things, such
    as runs, without being guessable)."""

    name: str
    kind: str
    default: Any
    low: float | None = None
    high: float | None = None
    step: float | None = None  # numbers snap to low + k·step, as the slider would
    choices: tuple[str, ...] = ()
    max_items: int = 10

    def __post_init__(self):
        if self.kind not in ("float", "int", "bool", "choice", "floats", "tokens"):
            raise ValueError(f"unknown parameter kind {self.kind!r}")
        if self.kind == "choice" and self.default not in self.choices:
            raise ValueError(f"default {self.default!r} of {self.name} is not among its choices")


def _limit(value, kind: str) -> str:
    """A control's bound as a visitor would type it: a whole number in full (2147483647, not 2.14748e+09)."""
    return str(int(value)) if kind == "int" else f"{value:g}"


def _shown(raw: str) -> str:
    """``raw`` as quoted in a notice's `code span`: cut short; a backtick would end the span and let
    a link inject Markdown (links, headings) into the warning, and control, bidi or line-separator
    characters would garble it, so those are escaped."""
    text = raw if len(raw) <= _SHOWN_CHARS else raw[:_SHOWN_CHARS] + "…"
    return escaped(text.replace("`", "'"))


def escaped(text: str) -> str:
    """``text`` with its control, format (bidi, zero-width) and line-separator characters as escapes (``\\u202e``):
    anyone's text shown as it is, not as those characters would rearrange or hide it."""
    return "".join(ascii(c)[1:-1] if unicodedata.category(c) in _ESCAPED else c for c in text)


def _parse_one(spec: Param, raw: str) -> tuple[Any, str | None]:
    """(value, notice); the notice is None when ``raw`` was valid as given."""
    default_note = f"using the default {spec.default!r}"
    if spec.kind == "bool":
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True, None
        if lowered in ("0", "false", "no", "off"):
            return False, None
        return spec.default, f"`{spec.name}={_shown(raw)}` is not true/false: {default_note}."
    if spec.kind == "floats":
        return _parse_floats(spec, raw)
    if spec.kind == "tokens":
        return _parse_tokens(spec, raw)
    if spec.kind == "choice":
        if raw in spec.choices:
            return raw, None
        return spec.default, (f"`{spec.name}={_shown(raw)}` is not one of {', '.join(spec.choices)}: {default_note}.")
    try:
        number = float(raw)
    except ValueError:
        return spec.default, f"`{spec.name}={_shown(raw)}` is not a number: {default_note}."
    if math.isnan(number):
        return spec.default, f"`{spec.name}=NaN` is not a number: {default_note}."
    if spec.kind == "int":
        if math.isfinite(number) and number != int(number):
            return spec.default, f"`{spec.name}={_shown(raw)}` is not a whole number: {default_note}."
    notice = None
    if spec.low is not None and number < spec.low:
        limit = _limit(spec.low, spec.kind)
        number, notice = spec.low, f"`{spec.name}={_shown(raw)}` is below the minimum: clamped to {limit}."
    elif spec.high is not None and number > spec.high:
        limit = _limit(spec.high, spec.kind)
        number, notice = spec.high, f"`{spec.name}={_shown(raw)}` is above the maximum: clamped to {limit}."
    if not math.isfinite(number):  # ±inf with no bound to clamp to
        return spec.default, f"`{spec.name}={_shown(raw)}` is not a finite number: {default_note}."
    if notice is None and spec.step:
        origin = spec.low or 0.0
        snapped = round(origin + round((number - origin) / spec.step) * spec.step, 10)
        if abs(snapped - number) > 1e-9:
            number, notice = snapped, f"`{spec.name}={_shown(raw)}` is off the slider's grid: rounded to {snapped:g}."
    return (int(number) if spec.kind == "int" else float(number)), notice


def list_items(text: str) -> list[str]:
    """A list-valued control's items, as written in a link, on the command line or in a config: comma-separated,
    blanks ignored. The one reading of a list; each item is then parsed as one value of the control."""
    return [part.strip() for part in text.split(",") if part.strip()]


def _parse_floats(spec: Param, raw: str) -> tuple[Any, str | None]:
    if not raw.strip() and spec.default == "":  # an optional list, left empty
        return "", None
    try:
        numbers = [float(part) for part in list_items(raw)]
    except ValueError:
        numbers = []
    if not numbers or not all(math.isfinite(n) for n in numbers):
        return (
            spec.default,
            f"`{spec.name}={_shown(raw)}` is not a list of numbers: using the default {spec.default!r}.",
        )
    notice = None
    if len(numbers) > spec.max_items:
        numbers, notice = (
            numbers[: spec.max_items],
            f"`{spec.name}` has more than {spec.max_items} values: kept the first {spec.max_items}.",
        )
    low = -math.inf if spec.low is None else spec.low
    high = math.inf if spec.high is None else spec.high
    clamped = [min(max(n, low), high) for n in numbers]
    if clamped != numbers:
        notice = f"`{spec.name}={_shown(raw)}` has values outside [{low:g}, {high:g}]: clamped."
    return format_floats(clamped), notice


def _parse_tokens(spec: Param, raw: str) -> tuple[Any, str | None]:
    items = list_items(raw)
    if not all(TOKEN.fullmatch(item) for item in items):
        return spec.default, (
            f"`{spec.name}={_shown(raw)}` is not a list of tokens (letters, digits, - and _): "
            f"using the default {spec.default!r}."
        )
    if len(items) > spec.max_items:
        return ",".join(items[: spec.max_items]), (
            f"`{spec.name}` has more than {spec.max_items} values: kept the first {spec.max_items}."
        )
    return ",".join(items), None


def format_floats(numbers) -> str:
    return ", ".join(f"{n:g}" for n in numbers)


def parse_query(query: Mapping[str, Any], specs: Sequence[Param]) -> tuple[dict, list[str]]:
    """Values for every spec (defaults where the URL says nothing) and the notices to show."""
    by_name = {spec.name: spec for spec in specs}
    values = {spec.name: spec.default for spec in specs}
    notices = []
    for name, raw in query.items():
        if name in _RESERVED:
            continue
        if isinstance(raw, (list, tuple)):
            raw = raw[-1] if raw else ""
        raw = str(raw)
        spec = by_name.get(name)
        if spec is None:
            notices.append(f"Unknown parameter `{_shown(name)}` ignored.")
            continue
        values[name], notice = _parse_one(spec, raw)
        if notice:
            notices.append(notice)
    return values, notices


def encode_query(values: Mapping[str, Any], specs: Sequence[Param]) -> dict[str, str]:
    """The URL form of ``values``: short, exact, and parsed back by :func:`parse_query`."""
    encoded = {}
    for spec in specs:
        value = values[spec.name]
        if spec.kind == "bool":
            encoded[spec.name] = "1" if value else "0"
        elif spec.kind == "float":
            encoded[spec.name] = repr(round(float(value), 10))
        else:
            encoded[spec.name] = str(value)
    return encoded


def neighbours(values: Mapping[str, Any], specs: Sequence[Param]) -> list[dict]:
    """The states one step of one control away from ``values``, either way, within the control's range:
    a number by its step (a whole number by 1 where it has none; other numbers, typed into a box, have no
    neighbours), a choice to the choice beside it, a switch flipped."""
    found = []
    for spec in specs:
        value = values[spec.name]
        moved: list
        if spec.kind == "bool":
            moved = [not value]
        elif spec.kind == "choice":
            at = spec.choices.index(value)
            moved = [spec.choices[i] for i in (at - 1, at + 1) if 0 <= i < len(spec.choices)]
        elif spec.kind in ("int", "float") and (spec.step or spec.kind == "int"):
            step = spec.step or 1
            moved = [round(value + sign * step, 10) for sign in (-1, 1)]
            moved = [
                int(v) if spec.kind == "int" else float(v)
                for v in moved
                if (spec.low is None or v >= spec.low) and (spec.high is None or v <= spec.high)
            ]
        else:
            moved = []
        found += [{**values, spec.name: v} for v in moved]
    return found


# The pages' switch for their 3-D view (:mod:`symlab.specs.surfaces`): off by default, so that a default link loads
# no Plotly (4.7 MB).
SURFACE_VIEW = Param("surface", "bool", False)
