"""Streamlit glue shared by the pages: URL-bound controls, chart style, CSV downloads."""

from __future__ import annotations

import base64
import concurrent.futures
import math
import struct
import time
import uuid
import zlib
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

import altair as alt
import numpy as np
import pandas as pd
import pyarrow as pa
import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from symlab import controls, jobs
from symlab.hosting import Hosting, SettingsError, is_hosted
from symlab.lib import weights
from symlab.playback import Playback
from symlab.urlstate import Param, encode_query, parse_query

# Okabe–Ito: distinguishable with every common colour-vision deficiency. Lines also differ
# by dash style, so colour is never the only cue.
PALETTE = {
    "target": "#000000",
    "reverse": "#0072B2",
    "forward": "#D55E00",
    "current": "#009E73",
    "threshold": "#E69F00",
    "paper": "#CC79A7",
    "grey": "#999999",
}
CHART_HEIGHT = 360
LEGEND_CHAR_PX, LEGEND_ITEM_PX, LEGEND_ROW_PX, LEGEND_ROW_HEIGHT = 8, 48, 560, 24


def leave_legacy_multipage_mode() -> None:
    """Call first in app.py and in every page.

    Streamlit treats a `pages/` folder beside the entrypoint as a legacy multipage app and runs
    the first session after a server start in that mode: it lists every file there as a page
    and runs the file whose name matches the URL (hence each page file is named after its URL
    path). This app declares its pages with st.navigation, so leave that mode at once and rerun
    in the normal one, which keeps the requested page and its query parameters.
    """
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()


# ?present=1: a projector view of the same state, like TensorFlow Playground's hidden-controls links.
PRESENT = Param("present", "bool", False)
PRESENT_CSS = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
[data-testid="stHeader"], [data-testid="stDownloadButton"] { display: none !important; }
html { font-size: 20px; }
[data-testid="stMainBlockContainer"] { max-width: 100%; padding: 1rem 2rem; }
</style>"""
PRESENT_FONT_PX, FONT_PX = 20, 14


def start_page(page: str, specs: Sequence[Param], title: str, caption: str, controls) -> dict:
    """The common top of every lab page: title, URL-bound ``controls()``, notices, presentation
    mode; returns the controls' current values (also written back to the URL)."""
    leave_legacy_multipage_mode()
    specs = (*specs, PRESENT)
    notices = bind_url_state(page, specs)
    present = st.session_state[widget_key(page, PRESENT.name)]
    st.session_state["ui.present"] = present
    if present:
        st.html(PRESENT_CSS)
        st.button("Show the controls", key=f"{page}.leave_present", icon=":material/tune:",
                  on_click=apply_values, args=(page, {PRESENT.name: False}))
    st.title(title)
    st.caption(caption)
    show_notices(notices)
    controls()
    with st.sidebar:
        st.toggle("Presentation mode", key=widget_key(page, PRESENT.name),
                  help="Hides the controls and enlarges text and charts for a projector; the page's link keeps "
                       "it, so a shared link opens the same view without controls.")
    return sync_url(page, specs)


def control_widget(page: str, config_type, name: str, *, cap: float | None = None, **options):
    """The widget of a declared config field (:mod:`symlab.controls`): its label, help, range (lowered to
    the page's ``cap``, which the help then states beside the declared range), step and format come from
    the declaration; ``options`` (``disabled``, ``format_func``, ``horizontal``...) pass through to Streamlit."""
    declared = controls.declaration(config_type, name)
    spec = controls.capped(declared, cap)
    key = widget_key(page, spec.url)
    text = spec.help or None
    if spec.high != declared.high:
        beyond = ("has no such cap" if declared.high is None
                  else f"goes up to {declared.shown(declared.high)}")
        text = f"{text or ''} This page allows at most {spec.shown(cap)}; the command line (`python -m symlab`) {beyond}."
        text = text.strip()
    common = dict(key=key, help=text, **options)
    kind = spec.widget_kind
    if kind in ("slider", "number"):
        number = int if spec.kind == "int" else float
        bounds = [None if bound is None else number(bound) for bound in (spec.low, spec.high)]
        step = number(spec.step or spec.nudge) if (spec.step or spec.nudge) else (1 if spec.kind == "int" else None)
        if spec.format:
            common["format"] = spec.format
        widget = st.slider if kind == "slider" else st.number_input
        return widget(spec.label, *bounds, step=step, **common)
    if kind == "toggle":
        return st.toggle(spec.label, **common)
    choices = list(spec.choices)
    if kind == "radio":
        return st.radio(spec.label, choices, **common)
    if kind == "segmented":
        return st.segmented_control(spec.label, choices, **common)
    return st.selectbox(spec.label, choices, **common)


def server_settings(report: bool = False) -> Hosting:
    """This server's caps (``SYMLAB_HOSTED`` and ``SYMLAB_*``). With an unusable variable the
    defaults apply, and ``report`` shows why (app.py does, once per page)."""
    try:
        return Hosting.from_env()
    except SettingsError as error:
        if report:
            st.error(f"A server setting is unusable, so the defaults apply: {error}", icon=":material/error:")
        return Hosting.defaults(is_hosted())


def widget_key(page: str, name: str) -> str:
    return f"{page}.{name}"


def bind_url_state(page: str, specs: Sequence[Param]) -> list[str]:
    """Seed the page's widget keys from the URL on first visit; returns the notices to show.

    The URL is read once per session (later reruns keep the user's moves); values are kept
    under a non-widget key so they survive visits to other pages, where Streamlit drops the
    widgets' own state.
    """
    store_key, notices_key = f"{page}:values", f"{page}:notices"
    if store_key not in st.session_state:
        values, notices = parse_query(st.query_params.to_dict(), specs)
        st.session_state[store_key] = values
        st.session_state[notices_key] = (values, notices)
    store = st.session_state[store_key]
    for spec in specs:
        key = widget_key(page, spec.name)
        if key not in st.session_state:
            st.session_state[key] = store[spec.name]
    parsed_values, notices = st.session_state[notices_key]
    # The notices describe the link as opened; once the user moves a control they are stale.
    return notices if link_untouched(page, parsed_values) else []


def link_untouched(page: str, parsed_values: dict) -> bool:
    """Whether every control still holds the value parsed from the link."""
    return all(st.session_state.get(widget_key(page, name)) == value for name, value in parsed_values.items())


def current_values(page: str, specs: Sequence[Param]) -> dict:
    return {spec.name: st.session_state[widget_key(page, spec.name)] for spec in specs}


def sync_url(page: str, specs: Sequence[Param]) -> dict:
    """Write the controls' current values to the URL (and the page's store); returns them."""
    values = current_values(page, specs)
    st.session_state[f"{page}:values"] = values
    encoded = encode_query(values, specs)
    if not values.get(PRESENT.name, True):
        del encoded[PRESENT.name]  # the usual view: a shorter link
    if st.query_params.to_dict() != encoded:
        st.query_params.from_dict(encoded)
    return values


def correct_link_value(page: str, name: str, value, notice: str) -> None:
    """Replace a value the link carried that the page cannot use (a run that does not exist), as
    :func:`bind_url_state` does for malformed ones: the link's notices stay, with ``notice`` added."""
    notices_key = f"{page}:notices"
    parsed, notices = st.session_state[notices_key]
    if link_untouched(page, parsed):
        st.session_state[notices_key] = ({**parsed, name: value}, [*notices, notice])
    st.session_state[widget_key(page, name)] = value


def apply_values(page: str, values: dict) -> None:
    """Set controls programmatically (presets); call from a widget callback."""
    for name, value in values.items():
        st.session_state[widget_key(page, name)] = value


def preset_picker(page: str, presets: dict, defaults: dict | None = None) -> None:
    """The sidebar's preset selector and the chosen preset's one sentence on what to watch.
    ``presets`` maps a name to (control values, sentence); a choice sets ``defaults`` (controls
    a preset should reset) and then its own values."""
    key = f"{page}.preset"

    def apply():
        if st.session_state[key] in presets:
            apply_values(page, {**(defaults or {}), **presets[st.session_state[key]][0]})

    st.selectbox("Preset", ["—", *presets], key=key, on_change=apply)
    if st.session_state.get(key) in presets:
        st.info(presets[st.session_state[key]][1])


def new_seed_button(page: str, help: str | None = None) -> None:
    """Draw a new seed: a separate action from Reset, which keeps the current one."""
    def advance():
        seed_key = widget_key(page, "seed")
        st.session_state[seed_key] = (st.session_state[seed_key] + 1) % 100_000

    st.button("New seed", on_click=advance, icon=":material/casino:", key=f"{page}.new_seed", width="stretch",
              help=help)


def show_notices(notices: Sequence[str]) -> None:
    if notices:
        st.warning("Some settings in the link were adjusted:\n\n" + "\n".join(f"- {n}" for n in notices),
                   icon="⚠️")


# Figures are plain plotly dicts: building graph_objects with validation costs 10-20 ms each,
# a dict about 2 ms (Streamlit still validates it once).

def line(x, y, name, colour, dash="solid", width=3, markers=False, symbol="circle", **extra) -> dict:
    trace = dict(type="scatter", x=x, y=y, name=name, mode="lines+markers" if markers else "lines",
                 line=dict(color=colour, dash=dash, width=width), **extra)
    if markers:
        trace["marker"] = dict(size=7, symbol=symbol)
    return trace


def points(x, y, name, colour, symbol="circle", size=10) -> dict:
    return dict(type="scatter", x=x, y=y, name=name, mode="markers",
                marker=dict(color=colour, symbol=symbol, size=size))


def vline(x, colour, text, dash="solid", side="left") -> tuple[dict, dict]:
    shape = dict(type="line", x0=x, x1=x, yref="paper", y0=0, y1=1, line=dict(color=colour, dash=dash, width=2))
    label = dict(x=x, y=1, yref="paper", text=text, showarrow=False, font=dict(color=colour),
                 xanchor="right" if side == "left" else "left", yanchor="top")
    return shape, label


def hline(y, colour, text, dash="dashdot", yref="y") -> tuple[dict, dict]:
    shape = dict(type="line", y0=y, y1=y, xref="paper", x0=0, x1=1, yref=yref, line=dict(color=colour, dash=dash, width=2))
    label = dict(y=y, x=1, xref="paper", yref=yref, text=text, showarrow=False, xanchor="right", yanchor="bottom")
    return shape, label


def figure(traces, x_title: str, y_title: str, title: str | None = None, marks=(),
           log_y=False, equal_axes=False, height: int = CHART_HEIGHT) -> dict:
    """A figure dict; ``marks`` are (shape, annotation) pairs from :func:`vline`/:func:`hline`."""
    # Fixed margins: letting Plotly grow them around the legend and tick labels costs a second
    # layout pass on every redraw, the bulk of a live chart's drawing time.
    # Presentation mode scales text and the room it needs; Streamlit's chart theme sets axis and
    # legend fonts itself, so they are given explicitly.
    scale = PRESENT_FONT_PX / FONT_PX if st.session_state.get("ui.present") else 1.0
    font = dict(size=round(FONT_PX * scale))
    names = [t.get("name", "") for t in traces if t.get("showlegend", t.get("type", "scatter") == "scatter")]
    legend_rows = math.ceil(sum(len(n) * LEGEND_CHAR_PX * scale + LEGEND_ITEM_PX for n in names) / LEGEND_ROW_PX)
    legend_height = round(LEGEND_ROW_HEIGHT * scale) * legend_rows
    layout = dict(
        title=dict(text=title, font=font) if title else None, height=round(height * scale) + legend_height,
        margin=dict(l=round(72 * scale), r=16, t=round((44 if title else 12) * scale),
                    b=round(56 * scale) + legend_height, autoexpand=False),
        # In the bottom margin, below the x-axis title, whatever the plot area's shape.
        legend=dict(orientation="h", yref="container", yanchor="bottom", y=0.0, x=0, font=font),
        font=font,
        xaxis=dict(title=dict(text=x_title, font=font), tickfont=font, showgrid=True, automargin=False,
                   ticklabeloverflow="allow"),
        yaxis=dict(title=dict(text=y_title, font=font), tickfont=font, showgrid=True,
                   type="log" if log_y else "linear", automargin=False, ticklabeloverflow="allow"),
        shapes=[shape for shape, _ in marks], annotations=[label for _, label in marks],
    )
    if equal_axes:
        layout["yaxis"].update(scaleanchor="x", scaleratio=1)
    # Plotly refuses a figure without traces: an empty one keeps the axes (e.g. before a run's first epoch).
    return dict(data=list(traces) or [dict(type="scatter", x=[], y=[], showlegend=False)], layout=layout)


# ---------------------------------------------------------------------------------------------
# Live charts: Vega-Lite specs built with Altair, updated in place
# ---------------------------------------------------------------------------------------------
# Streamlit remounts a Plotly chart whenever its figure changes (the element's id hashes the figure, and the
# frontend keys the chart by that id), so a Plotly chart in a player is rebuilt from scratch on every frame. A
# Vega-Lite chart without selections has no id: the frontend keeps its Vega view while the spec (the datasets
# travel apart from it) is unchanged, and swaps changed datasets into the running view. So a live chart's spec
# holds only what is fixed while it plays (styles, titles, fixed domains) and is built once (the builders are
# cached); whatever changes from frame to frame comes in named datasets, as DataFrames.
# Everything else, labels that change per frame included, goes in data or in a caption beside the chart.

# Dash patterns of Plotly's names (pixels on, off), and point shapes: Vega's own, or a path in [-1, 1]².
DASH_ARRAYS = {"solid": [1, 0], "dash": [8, 4], "dot": [2, 3], "dashdot": [8, 3, 2, 3], "longdash": [14, 5],
               "longdashdot": [14, 4, 2, 4]}
SHAPES = {"circle": "circle", "square": "square", "diamond": "diamond", "triangle-up": "triangle-up",
          "cross": "cross", "x": "M-0.8,-0.8L0.8,0.8M-0.8,0.8L0.8,-0.8",
          "star": "M0,-1L0.24,-0.33L0.95,-0.31L0.38,0.12L0.59,0.81L0,0.4L-0.59,0.81L-0.38,0.12L-0.95,-0.31L-0.24,-0.33Z",
          # A legend's sign for a line without markers: a short stroke.
          None: "stroke"}
LINE_WIDTH, POINT_SIZE = 2.5, 70
VEGA_HEIGHT = 380  # the whole chart (axes and legend included) where it fits its column, as ui.figure's


@dataclass(frozen=True)
class Series:
    """One entry of a live chart's legend: its colour and a second cue, the line's dash or the points' shape
    (a third where a line has markers too), as ui.line gives Plotly traces."""
    label: str
    colour: str
    dash: str = "solid"
    marker: str | None = None  # a point at every datum: a key of SHAPES
    line: bool = True  # False: the markers alone


def font_scale() -> float:
    """Presentation mode's enlargement of text (and of the room text needs)."""
    return PRESENT_FONT_PX / FONT_PX if st.session_state.get("ui.present") else 1.0


def series_channels(series: Sequence[Series], legend: bool = True) -> dict:
    """Colour, dash and shape of field ``series``, one legend for all three (Vega-Lite merges them), in the
    order given. Every layer of a chart uses the same scales, so each label has one style throughout."""
    labels = [s.label for s in series]
    shown = alt.Legend(title=None, orient="bottom", direction="horizontal", symbolStrokeWidth=LINE_WIDTH,
                       labelLimit=0, symbolSize=140) if legend else None
    return dict(
        color=alt.Color("series:N", scale=alt.Scale(domain=labels, range=[s.colour for s in series]), legend=shown),
        strokeDash=alt.StrokeDash("series:N", scale=alt.Scale(domain=labels, range=[DASH_ARRAYS[s.dash] for s in series]),
                                  legend=shown),
        shape=alt.Shape("series:N", scale=alt.Scale(domain=labels, range=[SHAPES[s.marker] for s in series]),
                        legend=shown))


def quantity(field: str, title: str, domain=None, *, log=False, integer=False, scale: dict | None = None,
             axis: dict | None = None, channel=alt.X):
    """A quantitative position channel: its title (with units), a fixed ``domain`` where the chart had one
    (else the data's, not forced through zero), a log scale, integer ticks (epochs, counts)."""
    options = dict(zero=False) if domain is None else dict(domain=list(domain), nice=False)
    if log:
        options["type"] = "log"
    options.update(scale or {})
    axis_options = dict(tickMinStep=1, format="d") if integer else {}
    axis_options.update(axis or {})
    return channel(f"{field}:Q", title=title, scale=alt.Scale(**options), axis=alt.Axis(**axis_options))


def altair_lines(series: Sequence[Series], x, y, *, data: str = "lines", data_order: bool = False,
                 legend: bool = True) -> alt.LayerChart:
    """Lines (with markers where a series has them) of ``series`` from the named dataset ``data``, whose rows
    carry ``x``, ``y``, ``series`` (a label) and, optionally, ``part`` (separate lines of one series, e.g. two
    ellipses) and, with ``data_order``, ``i`` (the order to join points in; else they are joined along x).
    ``x`` and ``y`` are position channels (:func:`quantity`)."""
    channels = series_channels(series, legend)
    base = alt.Chart(alt.NamedData(data)).encode(x=x, y=y, color=channels["color"])
    layers = []
    lines = [s.label for s in series if s.line]
    if lines:
        # No shape here: Vega-Lite would add a point at every vertex of a line that has one.
        extra = dict(order=alt.Order("i:Q")) if data_order else {}
        layers.append(base.mark_line(strokeWidth=LINE_WIDTH, clip=True)
                      .encode(strokeDash=channels["strokeDash"], detail="part:N", **extra)
                      .transform_filter(alt.FieldOneOfPredicate(field="series", oneOf=lines)))
    marked = [s.label for s in series if s.marker]
    if marked:
        # Not clipped: a point on the edge of a fixed domain (accuracy 1.0) stays whole.
        layers.append(base.mark_point(size=POINT_SIZE, strokeWidth=2, opacity=1)
                      .encode(shape=channels["shape"])
                      .transform_filter(alt.FieldOneOfPredicate(field="series", oneOf=marked)))
    elif legend:  # the shape scale all the same, for the legend's signs: a layer that draws nothing
        layers.append(alt.Chart(alt.NamedData(data)).mark_point()
                      .encode(color=channels["color"], shape=channels["shape"])
                      .transform_filter(alt.FieldEqualPredicate(field="series", equal="")))
    return alt.layer(*layers)


def altair_band(series: Series, x, *, data: str = "bands", opacity: float = 0.12) -> alt.Chart:
    """A shaded band of ``series`` (rows of the named dataset ``data`` with ``series`` = its label, and ``x``,
    ``low``, ``high``), in its colour, without a legend entry of its own (its line has one)."""
    return (alt.Chart(alt.NamedData(data)).mark_area(color=series.colour, opacity=opacity, clip=True)
            .encode(x=x, y=alt.Y("low:Q"), y2="high:Q")
            .transform_filter(alt.FieldEqualPredicate(field="series", equal=series.label)))


def altair_rules(series: Sequence[Series], *, data: str = "rules", axis: str = "y", legend: bool = True) -> alt.Chart:
    """Reference lines across the chart (as :func:`hline`/:func:`vline` give Plotly) at the values of the named
    dataset ``data``, rows of ``value`` and ``series`` (a label of ``series``, the chart's whole legend, whose
    entry names the line); data, so they may move from frame to frame."""
    position = alt.X("value:Q") if axis == "x" else alt.Y("value:Q")
    channels = series_channels(series, legend)
    del channels["shape"]
    return alt.Chart(alt.NamedData(data)).mark_rule(strokeWidth=2).encode(position, **channels)


# Image colour scales. Viridis (matplotlib's), sampled at 9 stops: dark purple (low) to yellow (high), readable in
# greyscale. ColorBrewer's RdBu, diverging, blue (low) to red (high): readable with every common colour deficiency.
VIRIDIS = ("#440154", "#472D7B", "#3B528B", "#2C728E", "#21918C", "#28AE80", "#5EC962", "#ADDC30", "#FDE725")
BLUE_RED = ("#053061", "#2166AC", "#4393C3", "#92C5DE", "#D1E5F0", "#F7F7F7", "#FDDBC7", "#F4A582", "#D6604D",
            "#B2182B", "#67001F")


def altair_image(x_title: str, y_title: str, x_domain, y_domain, *, data: str = "image",
                 opacity: float = 1.0, smooth: bool = True, y_axis: dict | None = None) -> alt.Chart:
    """A heatmap drawn as one picture stretched over a rectangle of the data's plane, from the named dataset
    ``data`` (one row of :func:`image_frame`). One element for the browser to draw and update, where a mark per
    cell (thousands) took Vega most of a second; the values are in the PNG (tests decode it).
    ``smooth=False``: each cell a sharp square (a matrix, a density grid), not a blend."""
    return (alt.Chart(alt.NamedData(data)).mark_image(aspect=False, opacity=opacity, clip=True, smooth=smooth)
            .encode(x=quantity("x", x_title, x_domain), x2="x2:Q",
                    y=quantity("y", y_title, y_domain, channel=alt.Y, axis=y_axis), y2="y2:Q", url="url:N"))


def altair_colour_legend(title: str, colours: Sequence[str], *, data: str = "scale") -> alt.Chart:
    """The colour scale of an image (:func:`image_frame` with the same ``colours``) as a legend: an invisible
    layer over the named dataset ``data``, rows of ``z`` spanning the image's range (its minimum and maximum,
    or its fixed domain)."""
    return (alt.Chart(alt.NamedData(data)).mark_rect(opacity=0)
            .encode(fill=alt.Fill("z:Q", title=title, legend=alt.Legend(orient="right", gradientLength=160),
                                  scale=alt.Scale(range=list(colours), interpolate="rgb"))))


def image_frame(x_centres, y_centres, z, colours: Sequence[str], domain: tuple[float, float] | None = None
                ) -> pd.DataFrame:
    """:func:`altair_image`'s dataset: ``z[y, x]`` on cells centred at ``x_centres``, ``y_centres`` (ascending,
    evenly spaced), coloured linearly through ``colours``, the first at z's minimum (or ``domain[0]``) and the
    last at its maximum (or ``domain[1]``), as a PNG data URL."""
    x_centres, y_centres, z = np.asarray(x_centres, float), np.asarray(y_centres, float), np.asarray(z, float)
    low, high = (float(z.min()), float(z.max())) if domain is None else domain
    t = np.clip((z - low) / ((high - low) or 1.0), 0.0, 1.0)
    stops = np.array([[int(c[i:i + 2], 16) for i in (1, 3, 5)] for c in colours], float)
    where = np.linspace(0.0, 1.0, len(stops))
    rgb = np.stack([np.interp(t, where, stops[:, k]) for k in range(3)], axis=-1).round().astype(np.uint8)
    rows = rgb[::-1]  # the image's first row is the top: the largest y
    raw = b"".join(b"\x00" + row.tobytes() for row in rows)
    height, width = rows.shape[:2]

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    half_x, half_y = (x_centres[1] - x_centres[0]) / 2, (y_centres[1] - y_centres[0]) / 2
    return pd.DataFrame({"url": ["data:image/png;base64," + base64.b64encode(png).decode()],
                         "x": [x_centres[0] - half_x], "x2": [x_centres[-1] + half_x],
                         "y": [y_centres[0] - half_y], "y2": [y_centres[-1] + half_y]})


def lines_frame(series: str, x, y, part=None) -> pd.DataFrame:
    """One series' rows of a lines dataset; ``part`` labels separate pieces, ``i`` keeps the drawing order."""
    x = np.asarray(x, float)
    frame = pd.DataFrame({"x": x, "y": np.asarray(y, float), "series": series, "i": np.arange(x.size)})
    if part is not None:
        frame["part"] = part
    return frame


def vega_spec(chart, *, title: str | None = None, height: int | None = VEGA_HEIGHT, width: int | None = None,
              legend_columns: int | None = None) -> dict:
    """A Vega-Lite spec (a plain dict) from an Altair chart: the title, the page's fonts (presentation mode
    enlarges them and the chart), a legend below. ``height``/``width``: the whole chart's (a single or layered
    view; Streamlit fits it there), or each view's in a concatenation (pass ``None`` and size the views)."""
    scale = font_scale()
    font = round(FONT_PX * scale)
    spec = chart.to_dict()
    spec.pop("$schema", None)
    # SVG whatever the number of marks (Streamlit would switch a chart of many points to a canvas): Vega then
    # updates only the elements that changed, and each mark's element holds its row (``__data__.datum``).
    spec["usermeta"] = dict(embedOptions=dict(renderer="svg"))
    if title:
        spec["title"] = dict(text=title, fontSize=font + 1, anchor="start")
    if height is not None:
        spec["height"] = round(height * scale)
    if width is not None:  # a fixed size (Streamlit's width="content"): the plot area's, the axes around it
        spec["width"] = round(width * scale)
        spec["autosize"] = dict(type="pad")
    legend = dict(labelFontSize=font - 1, titleFontSize=font - 1, symbolStrokeWidth=LINE_WIDTH)
    if legend_columns:
        legend["columns"] = legend_columns
    spec["config"] = dict(axis=dict(labelFontSize=font - 1, titleFontSize=font, labelLimit=0, grid=True),
                          legend=legend, text=dict(fontSize=font - 2), view=dict(stroke=None),
                          # No ARIA description per data point: Vega would build one string per vertex and cell on
                          # every frame (the chart's own description, Streamlit's alt, names it for readers).
                          mark=dict(aria=False))
    return spec


# The placeholder domain of a channel whose range comes with each frame's data (:func:`with_domains`).
DOMAIN_OF_DATA = (0.0, 1.0)


def with_domains(spec: dict, *, width: int | None = None, height: int | None = None, **domains) -> dict:
    """``spec`` with the scale domain of each named position channel (``x=(low, high)``, ``y=...``) set in every
    view that fixes one, and the plot area's ``width``/``height`` (as :func:`vega_spec`'s). Altair takes 20-50 ms
    to build a spec, so a spec function builds one per layout (its domains :data:`DOMAIN_OF_DATA`), cached,
    and each draw sets its numbers here in well under a millisecond. Copies what it changes: the cached spec
    stays as built."""
    if set(domains) - {"x", "y"}:
        raise ValueError(f"with_domains sets the x and y channels' domains, not {sorted(set(domains) - {'x', 'y'})}")
    found = set()

    def view_with_domains(view: dict) -> dict:
        view = dict(view)
        encoding = view.get("encoding")
        if encoding is not None:
            encoding = view["encoding"] = dict(encoding)
            for name, domain in domains.items():
                scale = (encoding.get(name) or {}).get("scale") or {}
                if "domain" in scale:
                    encoding[name] = {**encoding[name], "scale": {**scale, "domain": [float(v) for v in domain]}}
                    found.add(name)
        for part in ("layer", "hconcat", "vconcat", "concat"):
            if part in view:
                view[part] = [view_with_domains(child) for child in view[part]]
        return view

    spec = view_with_domains(spec)
    if set(domains) - found:
        raise ValueError(f"no view of this spec fixes the domain of {sorted(set(domains) - found)}")
    scale = font_scale()
    for name, size in (("width", width), ("height", height)):
        if size is not None:
            spec[name] = round(size * scale)
    return spec


def vega_chart(container, spec: dict, datasets: dict[str, pd.DataFrame | bytes], key: str | None, *,
               alt_text: str | None = None, width: str | int = "stretch") -> None:
    """Draw ``spec`` with its named ``datasets`` (a new frame of the same spec updates the chart in place); a
    dataset that does not change from frame to frame may come as its :func:`arrow_bytes`, made once."""
    datasets = {name: frame if isinstance(frame, bytes) else arrow_bytes(frame) for name, frame in datasets.items()}
    container.vega_lite_chart({**spec, "datasets": datasets}, key=key, width=width, alt=alt_text)


def arrow_bytes(frame: pd.DataFrame) -> bytes:
    """``frame``'s columns as Arrow IPC bytes, the form Streamlit sends a chart's data in, made straight from
    the columns' arrays (a quarter of the time Streamlit's conversion of a DataFrame takes; no index)."""
    table = pa.Table.from_arrays([pa.array(frame[column].to_numpy()) for column in frame.columns],
                                 names=[str(column) for column in frame.columns])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def shared_result(key: Hashable, compute: Callable, capacity: int | None = None, persist: bool = True):
    """``compute()``'s result, kept for every session and computed once even when a class opens
    the same link at the same moment (:class:`symlab.jobs.SharedResults`; ``capacity``: how many
    results of this kind, ``key[0]``, to keep in memory; ``persist=False``: not in the result store, for
    data cheaper to make again than to keep). Results must be treated as read-only. ``compute`` runs
    in this session's script and may draw its own progress bar."""
    return jobs.shared().compute(key, compute, capacity, persist)


PENDING = "⏳"  # starts the text of a computation's progress bar while the page waits for it
WAIT_IN_RUN_SECONDS = 0.5  # a computation done by then is drawn in the same run; a longer one, by a waiting panel
WAIT_POLL_SECONDS = 0.5  # how often the waiting panel redraws the progress


def computed(task: jobs.Task, draw_progress: Callable[[jobs.Progress], None] | None = None):
    """``task``'s result, computed once for every session in a worker process. Stored, it is returned at
    once; done within :data:`WAIT_IN_RUN_SECONDS`, too. Otherwise the run ends with a waiting panel that
    redraws itself (a fragment), as live training does: the progress the worker reports (``draw_progress``
    draws its payload, e.g. a live ELBO curve), the place in the queue and the time left, estimated from the
    measured costs; done, the page runs again and draws the result. So the page answers at once, and every
    control stays live while the computation runs. A session's newer request (its controls moved) drops its
    older one if it has not started, as does a session that left (its panel stopped asking). A task that
    failed raises RuntimeError, with what to do, in the run after it failed; the run after that asks again."""
    results = jobs.shared()
    stored = results.get(task.key, _MISSING)
    if stored is not _MISSING:
        return stored
    failed = st.session_state.get("ui.failed")
    if failed is not None and failed[0] == task.key:
        del st.session_state["ui.failed"]  # said once: the session's next run asks again
        raise RuntimeError(failed[1])
    waiter = st.session_state.setdefault("ui.waiter", uuid.uuid4().hex)
    job = results.submit(task, waiter)
    previous = st.session_state.get("ui.job")
    if previous is not None and previous is not job:
        results.release(previous, waiter)  # the session asks for something else now
    st.session_state["ui.job"] = job
    try:
        return job.future.result(timeout=WAIT_IN_RUN_SECONDS)
    except concurrent.futures.TimeoutError:
        pass
    except (concurrent.futures.CancelledError, BrokenProcessPool) as error:
        raise RuntimeError(failure_text(task, error)) from error
    waiting_panel(results, task, job, waiter, draw_progress)
    st.stop()


def waiting_panel(results: jobs.SharedResults, task: jobs.Task, job: jobs.Job, waiter, draw_progress) -> None:
    """The live panel of a computation under way: its progress and wait, redrawn every
    :data:`WAIT_POLL_SECONDS` until it ends; then the whole page runs again (a failure is remembered for
    that run to raise)."""
    @st.fragment(run_every=WAIT_POLL_SECONDS)
    def panel():
        results.touch(job, waiter)
        if job.future.done():
            error = job.future.exception() if not job.future.cancelled() else concurrent.futures.CancelledError()
            if error is not None:
                st.session_state["ui.failed"] = (task.key, failure_text(task, error))
            st.rerun()
        progress = job.progress
        st.progress(progress.fraction, text=wait_text(task.label, progress, results.wait(job)))
        if draw_progress is not None and progress.payload is not None:
            with st.container():  # below the bar, whatever the drawing's own layout
                draw_progress(progress)

    panel()


def failure_text(task: jobs.Task, error: BaseException) -> str:
    """What the page says of a computation that failed: its error's own words, or, stopped from outside (its
    worker died, the server is shutting down), what happened and what to do."""
    if isinstance(error, (concurrent.futures.CancelledError, BrokenProcessPool)):
        return f"{task.label} stopped before it finished ({type(error).__name__}); move a control or reload to try again"
    return str(error)


def wait_text(label: str, progress: jobs.Progress, wait: jobs.Wait) -> str:
    """A waiting page's progress text: where the request stands and about how long it has left."""
    left = "" if wait.seconds is None else f" (about {max(wait.seconds, 1.0):.0f} s left)"
    if wait.ahead and not progress.done:
        return (f"{PENDING} {label}: queued behind {wait.ahead} computation{'s' * (wait.ahead > 1)} of other "
                f"visitors{left}")
    return f"{PENDING} {progress.text or label}{left}"


_MISSING = object()


def frame_player(name: str, state_key: Hashable, frames: int, start: int, tick_seconds: float,
                 label: Callable[[int], str], draw: Callable[[int, dict], None], play_help: str | None = None,
                 reset_help: str | None = None, follow: Callable[[int], bool] | None = None) -> None:
    """Play / pause / step / reset over ``frames`` frames, in a fragment that ticks every ``tick_seconds`` (at
    least the server's minimum) while playing: the buttons (keys ``{name}.play``, ``.pause``, ``.step``,
    ``.reset``), a progress bar captioned ``label(frame)``, then ``draw(frame, chart_config)``. Frames are
    precomputed, or computed as they come by ``follow(frame)``, called first on every run (live training:
    train up to the frame); it returns False when playing cannot go on. The position is kept per session and
    starts over at ``start`` when ``state_key`` changes (other settings)."""
    if st.session_state.get(f"{name}.playback_key") != state_key:
        st.session_state[f"{name}.playback_key"] = state_key
        st.session_state[f"{name}.playback"] = Playback(frames, frame=start)
    playback = st.session_state[f"{name}.playback"]
    tick = max(tick_seconds, server_settings().live.min_tick_seconds)

    @st.fragment(run_every=tick if playback.playing else None)
    def panel():
        playback.timer_run(time.monotonic(), tick)
        if follow is not None and not follow(playback.frame):
            playback.pause()
        player_buttons(name, playback, play_help, reset_help)
        st.progress(playback.frame / max(frames - 1, 1), text=label(playback.frame))
        draw(playback.frame, {"displayModeBar": False} if playback.playing else {})
        if playback.playing != timer_on:
            st.rerun()  # start or stop the timer: it is fixed when the fragment is defined

    timer_on = playback.playing
    panel()


def player_buttons(name: str, playback: Playback, play_help: str | None, reset_help: str | None) -> None:
    cols = st.columns(4)
    cols[0].button("Play", icon=":material/play_arrow:", on_click=playback.play, key=f"{name}.play",
                   disabled=playback.playing, width="stretch", help=play_help)
    cols[1].button("Pause", icon=":material/pause:", on_click=playback.pause, key=f"{name}.pause",
                   disabled=not playback.playing, width="stretch")
    cols[2].button("Step", icon=":material/skip_next:", on_click=playback.step_paused, key=f"{name}.step",
                   disabled=playback.at_end, width="stretch")
    cols[3].button("Reset", icon=":material/replay:", on_click=playback.reset, key=f"{name}.reset",
                   width="stretch", help=reset_help)


def csv_download(frame: pd.DataFrame, filename: str, label: str, key: str) -> None:
    """A download of the data behind a chart; the CSV is written only when clicked."""
    st.download_button(label, lambda: frame.to_csv(index=False), file_name=filename, mime="text/csv",
                       key=key, icon=":material/download:", on_click="ignore")


# ---------------------------------------------------------------------------------------------
# Networks of one's own: uploads and downloads
# ---------------------------------------------------------------------------------------------

UPLOAD_NOTICE = ("An uploaded network cannot live in a link: the link keeps every other setting, so share the "
                 "file with it.")
UPLOAD_HELP = (f"A torch.save'd state_dict of an MLP of nn.Linear layers (.pt, .pth), or a safetensors file: a "
               f"point estimate, or a mean-field posterior as this app exports them. At most "
               f"{weights.MAX_FILE_BYTES // 2**20} MB. The file is read as data only: nothing in it is run.")


def kept_in_session(name: str, inputs: Hashable, compute: Callable):
    """``compute()``, kept in this session under ``name`` while ``inputs`` stay the same (an exception
    keeps nothing)."""
    kept = st.session_state.get(name)
    if kept is None or kept[0] != inputs:
        kept = (inputs, compute())
        st.session_state[name] = kept
    return kept[1]


def upload_id(key: str) -> str | None:
    """Which upload the widget ``key`` holds (each upload of a file gets its own), or None."""
    upload = st.session_state.get(key)
    return None if upload is None else upload.file_id


def uploaded_network(label: str, key: str) -> weights.Network | None:
    """The network in the file uploaded under ``key`` (read once per file, kept in this session), its structure
    shown back for confirmation; a file that is not a usable MLP gets its message and None."""
    upload = st.file_uploader(label, key=key, help=UPLOAD_HELP)
    if upload is None:
        return None
    try:
        network = kept_in_session(f"{key}.network", upload_id(key),
                                  lambda: weights.read_network(upload.getvalue(), upload.name))
    except weights.WeightsError as error:
        st.error(str(error), icon=":material/error:")
        return None
    st.success(f"**{upload.name}**: {network.describe()}.", icon=":material/check_circle:")
    return network


def layer_table(network: weights.Network) -> pd.DataFrame:
    """The inferred structure, one row per nn.Linear layer, for the user to confirm."""
    return pd.DataFrame([{"layer": index + 1, "inputs": W.shape[1], "outputs": W.shape[0],
                          "parameters": W.size + b.size, "then": "ReLU" if index < len(network.means) - 1 else "—"}
                         for index, (W, b) in enumerate(network.means)]).set_index("layer")


def file_download(data: Callable[[], bytes] | bytes, filename: str, label: str, key: str, help: str | None = None) -> None:
    """A download of a file (a posterior as safetensors), written only when clicked."""
    st.download_button(label, data, file_name=filename, mime="application/octet-stream", key=key,
                       icon=":material/download:", on_click="ignore", help=help)


if __name__ == "__main__":  # Streamlit's legacy pages/ mode ran this helper module as a page
    leave_legacy_multipage_mode()
