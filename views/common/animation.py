"""The browser's player of an animation (:mod:`symlab.specs.animation`): its frames, computed and encoded once
for every session, are sent with their charts' Vega-Lite specs; the browser plays them (play, pause, step,
reset, speed) with no page run per frame, and tells the page the frame it stopped on."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import streamlit as st

from symlab.specs.animation import Animation
from views.common import memo

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0)


@dataclass(frozen=True)
class Chart:
    """One chart of a player: its name (the frames' key), its Vega-Lite spec (without datasets), its words for a
    screen reader, and the datasets that do not change from frame to frame."""

    name: str
    spec: dict
    alt: str
    static: Mapping[str, pd.DataFrame] = field(default_factory=dict)

    @functools.cached_property  # a chart kept from run to run (a cached one) is converted once
    def as_json(self) -> dict:
        static = {name: columns_of(rows) for name, rows in self.static.items()}
        return {"name": self.name, "spec": self.spec, "alt": self.alt, "static": static}

    @functools.cached_property
    def digest(self) -> str:
        return hashlib.sha1(json.dumps(self.as_json, sort_keys=True).encode()).hexdigest()[:8]


def columns_of(rows: pd.DataFrame) -> dict:
    """A dataset's rows as a frame's or a chart's columns: name -> values."""
    return {str(name): rows[name].tolist() for name in rows.columns}


@functools.cache  # the installed Streamlit's: looked up once
def vega_chunk() -> str:
    """The file name of Streamlit's loader of Vega-Embed, next to its main script (``static/js``)."""
    found = sorted((Path(st.__file__).parent / "static" / "static" / "js").glob("loadVegaEmbed.*.js"))
    if not found:
        raise RuntimeError(f"this Streamlit ({st.__version__}) ships no Vega-Embed loader for the players")
    return found[0].name


JS_PATH = Path(__file__).with_name("animation.js")
CSS = """
.symlab-player .bar { display: flex; flex-wrap: wrap; gap: 0.4rem; align-items: center; margin-bottom: 0.5rem; }
.symlab-player button { display: inline-flex; align-items: center; gap: 0.3rem; }
.symlab-player button, .symlab-player select {
  font: inherit; font-size: 0.95rem; padding: 0.35rem 0.8rem; min-height: 2.5rem; border-radius: 0.5rem;
  border: 1px solid rgba(49, 51, 63, 0.3); background: var(--st-background-color, #fff); color: inherit;
  cursor: pointer;
}
.symlab-player button:disabled { opacity: 0.45; cursor: default; }
.symlab-player button:focus-visible, .symlab-player select:focus-visible { outline: 2px solid #1C6BBF; }
.symlab-player .progress { height: 0.5rem; background: rgba(49, 51, 63, 0.12); border-radius: 0.25rem; }
.symlab-player .progress > div { height: 100%; background: #1C6BBF; border-radius: 0.25rem; }
.symlab-player .label { font-size: 0.9rem; margin: 0.25rem 0; }
.symlab-player .caption { font-size: 0.85rem; opacity: 0.8; margin-bottom: 0.5rem; overflow-wrap: anywhere; }
.symlab-player .charts {
  --columns: 2; display: grid; gap: 1rem;
  grid-template-columns: repeat(auto-fit, minmax(
    max(min(100%, calc(720px / var(--columns))), calc((100% - (var(--columns) - 1) * 1rem) / var(--columns))), 1fr));
}
.symlab-player .chart { min-width: 0; width: 100%; box-sizing: border-box; }
"""

_COMPONENT = None


def component():
    global _COMPONENT
    if _COMPONENT is None:
        _COMPONENT = st.components.v2.component(
            "symlab_player", js=JS_PATH.read_text(encoding="utf-8"), css=CSS, isolate_styles=False
        )
    return _COMPONENT


@memo.cached(32)
def fixed_document(identity: str, _charts: Sequence[Chart], _animation: Animation) -> bytes:
    """The JSON text of a player's charts and frames (``identity``'s), made once: a page run sends it as it is, with
    the few values that change from run to run (the frame, the speed, the layout) joined on (:func:`sent_document`).
    Converting the charts' and frames' data to JSON on every run was most of a player's cost to the page. Returns an
    object's text without its closing brace."""
    document = {
        "charts": [chart.as_json for chart in _charts],
        "animation": _animation.payload,
        "id": identity,
        "frames": _animation.frames,
        "speeds": list(SPEEDS),
        "chunk": vega_chunk(),
    }
    return json.dumps(document, separators=(",", ":")).encode()[:-1]


def sent_document(identity: str, charts: Sequence[Chart], animation: Animation, changing: dict) -> bytes:
    """What the page sends the browser's player: one JSON object, as bytes (:func:`sent`'s reading)."""
    return fixed_document(identity, charts, animation) + b"," + json.dumps(changing, separators=(",", ":")).encode()[1:]


def sent(proto) -> dict:
    """The document a player element carries (its protobuf), as the browser reads it."""
    return json.loads(proto.bytes)


@dataclass(frozen=True)
class Position:
    """Where the browser's player stands, as it last told the page."""

    frame: int
    playing: bool


def player(
    key: str,
    charts: Sequence[Chart],
    animation: Animation,
    frame: int,
    tick_seconds: float,
    play_help: str = "",
    columns: int = 2,
) -> Position:
    """Play ``animation`` over ``charts`` in the browser, from ``frame``, a frame every ``tick_seconds`` at normal
    speed; the charts side by side, ``columns`` at most (one where a cell would be narrower than 720 px /
    ``columns``: a phone). Returns the frame the visitor stopped on (or ``frame``) and whether it plays; each Play, Pause, Step,
    Reset and the end of the animation run the page once. A new animation (new settings) starts at ``frame``,
    paused."""
    frame = min(max(int(frame), 0), animation.frames - 1)
    drawn = hashlib.sha1("".join(chart.digest for chart in charts).encode()).hexdigest()[:8]
    identity = f"{animation.identity}-{drawn}"  # new frames or new charts (presentation mode): drawn anew
    changing = {"frame": frame, "interval_ms": round(1000 * tick_seconds), "play_help": play_help, "columns": columns}
    result = component()(
        data=sent_document(identity, charts, animation, changing),
        key=key,
        default={"position": None},
        on_position_change=lambda: None,
    )
    told = result.get("position") if isinstance(result, Mapping) else getattr(result, "position", None)
    if isinstance(told, Mapping) and told.get("id") == identity:
        told_frame = told.get("frame")
        if isinstance(told_frame, int) and 0 <= told_frame < animation.frames:
            return Position(told_frame, bool(told.get("playing")))
    return Position(frame, False)
