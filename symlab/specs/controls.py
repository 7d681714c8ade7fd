"""Each control declared once, as metadata on a field of a lab's config dataclass.

A declaration (:func:`control`) gives the field's kind, range, step, choices, label and help. From it
come the page's URL parameter (:func:`url_params`, a :class:`~symlab.specs.urlstate.Param`), the page's
widget (``views/common``), the command-line flag (:func:`add_flags`) and the validation
(:func:`validate`, one ``ValueError`` naming every bad field). A page that allows less than the
command line, because of the server's work caps, passes the caps to :func:`url_params`; the
declaration itself stays the one range.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .urlstate import Param, list_items

KINDS = ("float", "int", "bool", "choice")
WIDGETS = ("slider", "number", "select", "radio", "segmented", "toggle")
# Larger whole numbers overflow the C integers of numpy, torch and SQLite (tracebacks, not messages),
# and no count or seed here needs them.
MAX_INT = 2**31 - 1


@dataclass(frozen=True)
class Control:
    """How one config field is shown, parsed and checked. ``url`` is its query-parameter name
    (default: the field's name); ``flag`` its command-line flag (default: ``--field-name``)."""

    kind: str
    low: float | None = None
    high: float | None = None
    step: float | None = None  # the slider's grid; URL values snap to it
    nudge: float | None = None  # a number box's +/- step, which (unlike ``step``) rounds nothing
    choices: tuple = ()
    label: str = ""
    help: str = ""
    url: str = ""  # "": the field's name
    flag: str = ""  # "": --field-name
    widget: str | None = None  # default: slider for a stepped float, number otherwise, select for choices
    format: str | None = None  # the widget's printf-style number format

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown control kind {self.kind!r}")
        if self.widget is not None and self.widget not in WIDGETS:
            raise ValueError(f"unknown widget {self.widget!r}")

    @property
    def widget_kind(self) -> str:
        if self.widget:
            return self.widget
        if self.kind == "bool":
            return "toggle"
        if self.kind == "choice":
            return "select"
        return "slider" if self.step else "number"

    def accepts(self, value) -> bool:
        if self.kind == "bool":
            return isinstance(value, bool)
        if self.kind == "choice":
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.kind == "int" and not isinstance(value, int):
            return False
        if isinstance(value, float) and not math.isfinite(value):  # math.isfinite overflows on a huge int
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def shown(self, number) -> str:
        """A bound or default as text: whole numbers exactly, others in short form."""
        if number is None:
            return ""
        return str(int(number)) if self.kind == "int" else f"{number:g}"

    def describe_range(self) -> str:
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(map(str, self.choices))
        whole = "a whole number" if self.kind == "int" else "a finite number"
        low, high = self.shown(self.low), self.shown(self.high)
        if self.low is not None and self.high is not None:
            return f"{whole} in [{low}, {high}]"
        parts = []
        if self.low is not None:
            parts.append(f">= {low}")
        if self.high is not None:
            parts.append(f"<= {high}")
        return whole + (" " + " and ".join(parts) if parts else "")


def control(default, kind: str | None = None, **spec) -> Any:
    """A dataclass field with a default and its :class:`Control` (``kind`` defaults from the
    default's type; ``choices`` make it a choice)."""
    if kind is None:
        kind = (
            "choice"
            if spec.get("choices")
            else "bool"
            if isinstance(default, bool)
            else "int"
            if isinstance(default, int)
            else "float"
        )
    declared = Control(kind, **spec)
    if not declared.accepts(default):
        raise ValueError(f"default {default!r} is not {declared.describe_range()}")
    return dataclasses.field(default=default, metadata={"control": declared})


@functools.cache
def declared(config_type: type) -> dict[str, tuple[Control, Any]]:
    """Field name -> (control, default) for every declared field, in declaration order; each control's
    URL name and flag filled in (defaults: the field's name, ``--field-name``). Read-only."""
    return {
        f.name: (
            dataclasses.replace(
                f.metadata["control"],
                url=f.metadata["control"].url or f.name,
                flag=f.metadata["control"].flag or "--" + f.name.replace("_", "-"),
            ),
            f.default,
        )
        for f in dataclasses.fields(config_type)
        if "control" in f.metadata
    }


def declaration(config_type, name: str) -> Control:
    return declared(config_type)[name][0]


def url_name(config_type, name: str) -> str:
    return declaration(config_type, name).url


def flag_name(config_type, name: str) -> str:
    return declaration(config_type, name).flag


def capped(spec: Control, cap: float | None) -> Control:
    """``spec`` with its upper end lowered to a server cap."""
    if cap is None or (spec.high is not None and spec.high <= cap):
        return spec
    return dataclasses.replace(spec, high=cap)


# --- validation --------------------------------------------------------------------------------------


def check(checks: Iterable[tuple[bool, str]]) -> None:
    """Raise one ValueError naming every failed ``(ok, message)`` pair."""
    problems = [message for ok, message in checks if not ok]
    if problems:
        raise ValueError("; ".join(problems))


def field_checks(config) -> list[tuple[bool, str]]:
    """One ``(ok, message)`` per declared field of ``config``: within its declared range."""
    config_type: type = type(config)
    return [
        (spec.accepts(getattr(config, name)), f"{name} must be {spec.describe_range()} (got {getattr(config, name)!r})")
        for name, (spec, _) in declared(config_type).items()
    ]


def nested_checks(name: str, config) -> list[tuple[bool, str]]:
    """``config.validate()`` as ``(ok, message)`` pairs, for a config held in another: the enclosing
    config's one error names the inner one's problems too."""
    try:
        config.validate()
    except ValueError as error:
        return [(False, f"{name}: {error}")]
    return []


def validate(config, extra: Iterable[tuple[bool, str]] = ()):
    """``config`` itself when every declared field is in range and every ``extra`` check holds;
    else one ValueError naming them all."""
    check([*field_checks(config), *extra])
    return config


# --- the page's URL parameters -----------------------------------------------------------------------


def url_params(
    config_type,
    names: Iterable[str] | None = None,
    caps: Mapping[str, float] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> tuple[Param, ...]:
    """The URL parameters of the declared fields ``names`` (default: all), with a server's ``caps``
    on their upper ends and ``defaults`` replacing the config's own."""
    table = declared(config_type)
    caps, defaults = caps or {}, defaults or {}
    params = []
    for name in names if names is not None else table:
        spec, default = table[name]
        spec = capped(spec, caps.get(name))
        default = defaults.get(name, default)
        if spec.kind in ("int", "float") and spec.high is not None:
            default = min(default, spec.high)
        params.append(
            Param(
                spec.url,
                spec.kind,
                default,
                spec.low,
                spec.high,
                spec.step,
                tuple(str(c) for c in spec.choices) if spec.kind == "choice" else (),
            )
        )
    return tuple(params)


def config_values(config_type, values: Mapping[str, Any], names: Iterable[str] | None = None) -> dict:
    """Field name -> value for the declared fields ``names`` read from page ``values`` keyed by URL name."""
    table = declared(config_type)
    out = {}
    for name in names if names is not None else table:
        spec = table[name][0]
        value = values[spec.url]
        if spec.kind == "choice":
            value = next(c for c in spec.choices if str(c) == str(value))
        out[name] = value
    return out


# --- the command line --------------------------------------------------------------------------------


def shown(text: str) -> str:
    """An argument as quoted in an error message: escaped, and cut short when long."""
    return repr(text if len(text) <= 40 else text[:40] + "…")


def parsed_range(spec: Control) -> Control:
    """``spec`` as the command line reads it: a whole number with no declared top is capped at :data:`MAX_INT`."""
    high = spec.high if spec.high is not None else (MAX_INT if spec.kind == "int" else None)
    return dataclasses.replace(spec, high=high)


def number_parser(spec: Control):
    """argparse ``type=`` for a number within ``spec``'s range."""
    bounded = parsed_range(spec)

    def parse(text: str):
        try:
            value = int(text) if spec.kind == "int" else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{shown(text)} is not {'a whole number' if spec.kind == 'int' else 'a number'}"
            ) from None
        if not bounded.accepts(value):
            raise argparse.ArgumentTypeError(f"{shown(text)} must be {bounded.describe_range()}")
        return value

    return _kind_told(parse, spec.kind)


def _kind_told(parse: Callable[[str], Any], kind: str) -> Callable[[str], Any]:
    """``parse`` with the kind of value it reads (``parse.kind``): what the hostile-input tests read to know which
    values may be valid."""
    setattr(parse, "kind", kind)  # noqa: B010  (a function's attribute, which mypy allows only this way)
    return parse


def list_parser(item: Control, max_items: int | None = None):
    """argparse ``type=`` for a list-valued control: :func:`~symlab.specs.urlstate.list_items`, each a number
    within ``item``'s range (:func:`number_parser`), one or more and at most ``max_items``. The link reads the
    same items (urlstate's ``floats``), clamping where the command line refuses."""
    parse_item = number_parser(item)
    count = f"one or more{f' and at most {max_items}' if max_items else ''} comma-separated values"

    def parse(text: str) -> list:
        items = list_items(text)
        if not items or (max_items and len(items) > max_items):
            raise argparse.ArgumentTypeError(
                f"{shown(text)}: needs {count}, each {parsed_range(item).describe_range()}"
            )
        return [parse_item(part) for part in items]

    return _kind_told(parse, item.kind)


def add_flags(
    parser,
    config_type,
    names: Iterable[str] | None = None,
    *,
    defaults: Mapping[str, Any] | None = None,
    help_suffix: Mapping[str, str] | None = None,
) -> None:
    """One flag per declared field ``names`` (default: all); ``dest`` is the field's name."""
    table = declared(config_type)
    defaults, help_suffix = defaults or {}, help_suffix or {}
    for name in names if names is not None else table:
        spec, default = table[name]
        default = defaults.get(name, default)
        text = " ".join(part for part in (spec.help or spec.label, help_suffix.get(name, "")) if part)
        if spec.kind == "bool":
            parser.add_argument(spec.flag, dest=name, action=argparse.BooleanOptionalAction, default=default, help=text)
        elif spec.kind == "choice":
            parser.add_argument(spec.flag, dest=name, choices=spec.choices, default=default, help=text)
        else:
            parser.add_argument(
                spec.flag,
                dest=name,
                type=number_parser(spec),
                default=default,
                help=f"{text} ({spec.describe_range()}"
                f"{'' if default is None else '; default ' + spec.shown(default)})".lstrip(),
            )


def from_args(config_type, args, names: Iterable[str] | None = None, **overrides):
    """A validated config from parsed ``args`` (declared fields present in ``args``) and ``overrides``."""
    table = declared(config_type)
    values = {name: getattr(args, name) for name in (names if names is not None else table) if hasattr(args, name)}
    values.update(overrides)
    config = config_type(**values)
    return config.validate() if hasattr(config, "validate") else validate(config)
