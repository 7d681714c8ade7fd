"""Charts: Vega-Lite specs built with Altair, drawn with their data and a CSV behind each; one palette."""

from __future__ import annotations

import base64
import functools
import json
import math
import struct
import textwrap
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import pandas as pd
import pyarrow as pa
import streamlit as st

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
PRESENT_FONT_PX, FONT_PX = 20, 14  # presentation mode's root font size, and the normal one
Y_LABEL_BOX_OVER_FONT = 1.35  # a label's box height over its font size, as Chromium lays out Source Sans (25 / 19)
LEGEND_ROW_HEIGHT = 24  # pixels per row of a legend below a chart


# ---------------------------------------------------------------------------------------------
# Vega-Lite specs built with Altair, updated in place
# ---------------------------------------------------------------------------------------------
# A Vega-Lite chart without selections has no id: the frontend keeps its Vega view while the spec (the datasets
# travel apart from it) is unchanged, and swaps changed datasets into the running view. So a live chart's spec
# holds only what is fixed while it plays (styles, titles, fixed domains) and is built once (the builders are
# cached); whatever changes from frame to frame comes in named datasets, as DataFrames.
# Everything else, labels that change per frame included, goes in data or in a caption beside the chart.

# Dash patterns by name (pixels on, off), and point shapes: Vega's own, or a path in [-1, 1]².
DASH_ARRAYS = {
    "solid": [1, 0],
    "dash": [8, 4],
    "dot": [2, 3],
    "dashdot": [8, 3, 2, 3],
    "longdash": [14, 5],
    "longdashdot": [14, 4, 2, 4],
}
SHAPES = {
    "circle": "circle",
    "square": "square",
    "diamond": "diamond",
    "triangle-up": "triangle-up",
    "cross": "cross",
    "x": "M-0.8,-0.8L0.8,0.8M-0.8,0.8L0.8,-0.8",
    "star": "M0,-1L0.24,-0.33L0.95,-0.31L0.38,0.12L0.59,0.81L0,0.4L-0.59,0.81L-0.38,0.12L-0.95,-0.31L-0.24,-0.33Z",
    # A legend's sign for a line without markers: a short stroke.
    None: "stroke",
}
LINE_WIDTH, POINT_SIZE = 2.5, 70
VEGA_HEIGHT = 380  # the whole chart (axes and legend included) where it fits its column


@dataclass(frozen=True)
class Series:
    """One entry of a live chart's legend: its colour and a second cue, the line's dash or the points' shape
    (a third where a line has markers too)."""

    label: str
    colour: str
    dash: str = "solid"
    marker: str | None = None  # a point at every datum: a key of SHAPES
    line: bool = True  # False: the markers alone


def presenting() -> bool:
    """Presentation mode (set by binding.start_page): a key of every cached spec, which it enlarges."""
    return bool(st.session_state.get("ui.present"))


def font_scale() -> float:
    """Presentation mode's enlargement of text (and of the room text needs)."""
    return PRESENT_FONT_PX / FONT_PX if presenting() else 1.0


def series_channels(series: Sequence[Series], legend: bool = True) -> dict:
    """Colour, dash and shape of field ``series``, one legend for all three (Vega-Lite merges them), in the
    order given. Every layer of a chart uses the same scales, so each label has one style throughout."""
    labels = [s.label for s in series]
    shown = (
        alt.Legend(
            title=None,
            orient="bottom",
            direction="horizontal",
            symbolStrokeWidth=LINE_WIDTH,
            labelLimit=0,
            symbolSize=140,
        )
        if legend
        else None
    )
    return dict(
        color=alt.Color("series:N", scale=alt.Scale(domain=labels, range=[s.colour for s in series]), legend=shown),
        strokeDash=alt.StrokeDash(
            "series:N", scale=alt.Scale(domain=labels, range=[DASH_ARRAYS[s.dash] for s in series]), legend=shown
        ),
        shape=alt.Shape(
            "series:N", scale=alt.Scale(domain=labels, range=[SHAPES[s.marker] for s in series]), legend=shown
        ),
    )


def quantity(
    field: str,
    title: str | list[str],
    domain=None,
    *,
    log=False,
    integer=False,
    scale: dict | None = None,
    axis: dict | None = None,
    channel=alt.X,
):
    """A quantitative position channel: its title (with units), a fixed ``domain`` where the chart had one
    (else the data's, not forced through zero), a log scale, integer ticks (epochs, counts)."""
    options: dict[str, Any] = dict(zero=False) if domain is None else dict(domain=list(domain), nice=False)
    if log:
        options["type"] = "log"
    options.update(scale or {})
    if options.get("type") == "log":
        options.pop("zero", None)  # a log scale never holds zero: Vega-Lite drops the setting with a warning
    axis_options: dict[str, Any] = dict(tickMinStep=1, format="d") if integer else {}
    axis_options.update(axis or {})
    # A long y title on two lines: turned along the plot, one line longer than the plot would make Vega shrink the
    # plot under it (and push the chart's title out of the top) to fit the chart's height.
    # (A list is its lines already.)
    shown = (
        broken_lines(title, 2) if channel is alt.Y and isinstance(title, str) and len(title) > Y_TITLE_CHARS else title
    )
    return channel(f"{field}:Q", title=shown, scale=alt.Scale(**options), axis=alt.Axis(**axis_options))


Y_TITLE_CHARS = 24  # a y title longer than this goes on two lines (at 13 px, ~150 px: about the smallest plot)


def altair_lines(
    series: Sequence[Series], x, y, *, data: str = "lines", data_order: bool = False, legend: bool = True
) -> alt.LayerChart:
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
        layers.append(
            base.mark_line(strokeWidth=LINE_WIDTH, clip=True)
            .encode(strokeDash=channels["strokeDash"], detail="part:N", **extra)
            .transform_filter(alt.FieldOneOfPredicate(field="series", oneOf=lines))
        )
    marked = [s.label for s in series if s.marker]
    if marked:
        # Not clipped: a point on the edge of a fixed domain (accuracy 1.0) stays whole.
        layers.append(
            base.mark_point(size=POINT_SIZE, strokeWidth=2, opacity=1)
            .encode(shape=channels["shape"])
            .transform_filter(alt.FieldOneOfPredicate(field="series", oneOf=marked))
        )
    elif legend:  # the shape scale all the same, for the legend's signs: a layer that draws nothing
        layers.append(
            alt.Chart(alt.NamedData(data))
            .mark_point()
            .encode(color=channels["color"], shape=channels["shape"])
            .transform_filter(alt.FieldEqualPredicate(field="series", equal=""))
        )
    return alt.LayerChart(layer=layers)  # alt.layer's type admits a facet, which these layers never hoist


def altair_band(series: Series, x, *, data: str = "bands", opacity: float = 0.12) -> alt.Chart:
    """A shaded band of ``series`` (rows of the named dataset ``data`` with ``series`` = its label, and ``x``,
    ``low``, ``high``), in its colour, without a legend entry of its own (its line has one)."""
    return (
        alt.Chart(alt.NamedData(data))
        .mark_area(color=series.colour, opacity=opacity, clip=True)
        .encode(x=x, y=alt.Y("low:Q"), y2="high:Q")
        .transform_filter(alt.FieldEqualPredicate(field="series", equal=series.label))
    )


def altair_rules(series: Sequence[Series], *, data: str = "rules", axis: str = "y", legend: bool = True) -> alt.Chart:
    """Reference lines across the chart at the values of the named
    dataset ``data``, rows of ``value`` and ``series`` (a label of ``series``, the chart's whole legend, whose
    entry names the line); data, so they may move from frame to frame."""
    position = alt.X("value:Q") if axis == "x" else alt.Y("value:Q")
    channels = series_channels(series, legend)
    del channels["shape"]
    return alt.Chart(alt.NamedData(data)).mark_rule(strokeWidth=2).encode(position, **channels)


# Image colour scales. Viridis (matplotlib's), sampled at 9 stops: dark purple (low) to yellow (high), readable in
# greyscale. ColorBrewer's RdBu, diverging, blue (low) to red (high): readable with every common colour deficiency.
VIRIDIS = ("#440154", "#472D7B", "#3B528B", "#2C728E", "#21918C", "#28AE80", "#5EC962", "#ADDC30", "#FDE725")
BLUE_RED = (
    "#053061",
    "#2166AC",
    "#4393C3",
    "#92C5DE",
    "#D1E5F0",
    "#F7F7F7",
    "#FDDBC7",
    "#F4A582",
    "#D6604D",
    "#B2182B",
    "#67001F",
)


def altair_image(
    x_title: str,
    y_title: str,
    x_domain,
    y_domain,
    *,
    data: str = "image",
    opacity: float = 1.0,
    smooth: bool = True,
    y_axis: dict | None = None,
) -> alt.Chart:
    """A heatmap drawn as one picture stretched over a rectangle of the data's plane, from the named dataset
    ``data`` (one row of :func:`image_frame`). One element for the browser to draw and update, where a mark per
    cell (thousands) took Vega most of a second; the values are in the PNG (tests decode it).
    ``smooth=False``: each cell a sharp square (a matrix, a density grid), not a blend."""
    return (
        alt.Chart(alt.NamedData(data))
        .mark_image(aspect=False, opacity=opacity, clip=True, smooth=smooth)
        .encode(
            x=quantity("x", x_title, x_domain),
            x2="x2:Q",
            y=quantity("y", y_title, y_domain, channel=alt.Y, axis=y_axis),
            y2="y2:Q",
            url="url:N",
        )
    )


def altair_colour_legend(title: str, colours: Sequence[str], *, data: str = "scale") -> alt.Chart:
    """The colour scale of an image (:func:`image_frame` with the same ``colours``) as a legend: an invisible
    layer over the named dataset ``data``, rows of ``z`` spanning the image's range (its minimum and maximum,
    or its fixed domain)."""
    return (
        alt.Chart(alt.NamedData(data))
        .mark_rect(opacity=0)
        .encode(
            fill=alt.Fill(
                "z:Q",
                title=title,
                legend=alt.Legend(orient="right", gradientLength=160),
                scale=alt.Scale(range=list(colours), interpolate="rgb"),
            )
        )
    )


COLOUR_LEVELS = 4096  # a colour scale's steps in a picture: far finer than 8-bit colour shows


@functools.lru_cache(maxsize=32)
def colour_table(colours: tuple[str, ...]) -> np.ndarray:
    """:data:`COLOUR_LEVELS` colours, linearly through ``colours`` (#rrggbb), as rows of uint8 RGB: a picture's
    cells look their colour up here (a 5 000 × 64 picture took 60 ms to interpolate cell by cell)."""
    stops = np.array([[int(c[i : i + 2], 16) for i in (1, 3, 5)] for c in colours], float)
    t, where = np.linspace(0.0, 1.0, COLOUR_LEVELS), np.linspace(0.0, 1.0, len(stops))
    return np.stack([np.interp(t, where, stops[:, k]) for k in range(3)], axis=-1).round().astype(np.uint8)


def image_frame(
    x_centres, y_centres, z, colours: Sequence[str], domain: tuple[float, float] | None = None
) -> pd.DataFrame:
    """:func:`altair_image`'s dataset: ``z[y, x]`` on cells centred at ``x_centres``, ``y_centres`` (ascending,
    evenly spaced), coloured linearly through ``colours``, the first at z's minimum (or ``domain[0]``) and the
    last at its maximum (or ``domain[1]``), as a PNG data URL."""
    x_centres, y_centres, z = np.asarray(x_centres, float), np.asarray(y_centres, float), np.asarray(z, float)
    low, high = (float(z.min()), float(z.max())) if domain is None else domain
    t = np.clip((z - low) / ((high - low) or 1.0), 0.0, 1.0)
    rgb = colour_table(tuple(colours))[np.rint(t * (COLOUR_LEVELS - 1)).astype(np.intp)]
    rows = rgb[::-1]  # the image's first row is the top: the largest y
    height, width = rows.shape[:2]
    raw = np.concatenate([np.zeros((height, 1), np.uint8), rows.reshape(height, -1)], axis=1).tobytes()  # filter 0

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw, 1))
        + chunk(b"IEND", b"")
    )
    half_x, half_y = (x_centres[1] - x_centres[0]) / 2, (y_centres[1] - y_centres[0]) / 2
    return pd.DataFrame(
        {
            "url": ["data:image/png;base64," + base64.b64encode(png).decode()],
            "x": [x_centres[0] - half_x],
            "x2": [x_centres[-1] + half_x],
            "y": [y_centres[0] - half_y],
            "y2": [y_centres[-1] + half_y],
        }
    )


def lines_frame(series: str, x, y, part=None) -> pd.DataFrame:
    """One series' rows of a lines dataset; ``part`` labels separate pieces, ``i`` keeps the drawing order."""
    x = np.asarray(x, float)
    frame = pd.DataFrame({"x": x, "y": np.asarray(y, float), "series": series, "i": np.arange(x.size)})
    if part is not None:
        frame["part"] = part
    return frame


def lines_bytes(parts: Sequence[tuple[str, object, object]]) -> bytes:
    """The lines dataset of several series, each ``(series, x, y)``, as :func:`arrow_bytes` of their
    :func:`lines_frame` rows one after another, made from the arrays alone: a page run draws many more charts than
    it builds tables, and a DataFrame per series and their concatenation cost more than the chart's data."""
    xs = [np.asarray(x, float) for _, x, _ in parts]
    return arrow_bytes(
        {
            "x": np.concatenate(xs),
            "y": np.concatenate([np.asarray(y, float) for _, _, y in parts]),
            "series": np.repeat(np.array([series for series, _, _ in parts], dtype=object), [x.size for x in xs]),
            "i": np.concatenate([np.arange(x.size) for x in xs]),
        }
    )


# The chart's column, known only in the browser; a title's characters average under 0.45 of its font size.
COLUMN_PX = "(containerSize()[0] || width)"
TITLE_CHAR_EM = 0.45


def fitted_title(text: str, size: int) -> dict:
    """A chart title that may take its column's width (Vega would cut it, with "…", at the plot's), set smaller
    where even that is too narrow for it (a phone in presentation mode)."""
    return dict(
        text=text,
        anchor="start",
        limit=dict(expr=COLUMN_PX),
        fontSize=dict(expr=f"min({size}, floor({COLUMN_PX} / {TITLE_CHAR_EM * len(text):.2f}))"),
    )


# A text's width, at most: this many font sizes a character (Vega measures it only in the browser; the page's font
# averages 0.42, a bold title's 0.41); a legend entry's symbol and gaps, and the y-axis beside the plot (the legend
# below starts under the plot), in font sizes.
CHAR_EM, SYMBOL_EM, Y_AXIS_EM = 0.5, 2.5, 5


# A square plot's ticks, a fixed number: Vega's default count (one per 40 px) follows the plot's height, so the
# labels' width would follow the height, which follows the width, and "fit-x" could chase its own tail (a stack
# overflow in the browser at some column widths).
SQUARE_PLOT_TICKS = 6


def square_plot(spec: dict) -> dict:
    """``spec`` as wide as its column with a square plot area: Vega fits the plot, axes and legends into the
    column's width ("fit-x") and the height follows the plot's width (a Vega signal), so a map, a matrix or a
    plane of equal scales keeps its shape at any screen width."""
    spec = {name: value for name, value in spec.items() if name not in ("width", "height", "autosize")}
    config = spec.get("config", {})
    config = {**config, "axis": {**config.get("axis", {}), "tickCount": SQUARE_PLOT_TICKS}}
    return {
        **spec,
        "config": config,
        "autosize": dict(type="fit-x", contains="padding"),
        "params": [*spec.get("params", []), dict(name="height", expr="width")],
    }


def broken_lines(text: str, count: int) -> list[str]:
    """``text`` in ``count`` lines (or fewer) of about equal length, broken at spaces: the narrowest wrapping that
    needs no more lines."""
    for width in range(max(1, -(-len(text) // count)), len(text) + 1):
        lines = textwrap.wrap(text, width, break_long_words=False)
        if len(lines) <= count:
            return lines or [text]
    return [text]


def fitted_legend(spec: dict, labels) -> dict:
    """``spec`` whose legend (entries ``labels``) fits its column at any width: as many columns as fit (one row
    where all fit, one entry a row in a narrow column), and a label wider than its column on more lines there
    (Vega never wraps a legend by itself; a row or a label wider than the chart is cut off)."""
    font = spec["config"]["legend"]["labelFontSize"]
    room = f"({COLUMN_PX} - {Y_AXIS_EM * font})"
    width = {label: round(CHAR_EM * font * len(label) + SYMBOL_EM * font) for label in labels}
    columns = dict(expr=f"max(1, min({len(labels)}, floor({room} / {max(width.values())})))")
    spec = {**spec, "config": {**spec["config"], "legend": {**spec["config"]["legend"], "columns": columns}}}
    shown = "datum.label"
    for label in (label for label in labels if " " in label):
        for lines in (2, 3):  # the fewest lines that fit: two where the column is narrower than the label, three where
            # it is narrower than half of it (a symbol's room aside)
            shown = (
                f"datum.label === {json.dumps(label)} && {room} < {width[label] / (lines - 1):.0f} ? "
                f"{json.dumps(broken_lines(label, lines))} : {shown}"
            )

    def with_labels(view: dict) -> dict:
        view = dict(view)
        if "encoding" in view:
            view["encoding"] = {
                name: (
                    {**channel, "legend": {**channel["legend"], "labelExpr": shown}}
                    if isinstance(channel, dict) and channel.get("legend")
                    else channel
                )
                for name, channel in view["encoding"].items()
            }
        for part in ("layer", "hconcat", "vconcat", "concat"):
            if part in view:
                view[part] = [with_labels(child) for child in view[part]]
        return view

    return with_labels(spec)


def vega_spec(
    chart,
    *,
    title: str | None = None,
    height: int | None = VEGA_HEIGHT,
    width: int | None = None,
    legend_columns: int | None = None,
) -> dict:
    """A Vega-Lite spec (a plain dict) from an Altair chart: the title, the page's fonts (presentation mode
    enlarges them and the chart), a legend below. ``height``/``width``: the whole chart's (a single or layered
    view; Streamlit fits it there), or each view's in a concatenation (pass ``None`` and size the views)."""
    scale = font_scale()
    font = round(FONT_PX * scale)
    spec = domains_once(chart.to_dict())
    spec.pop("$schema", None)
    # SVG whatever the number of marks (Streamlit would switch a chart of many points to a canvas): Vega then
    # updates only the elements that changed, and each mark's element holds its row (``__data__.datum``).
    spec["usermeta"] = dict(embedOptions=dict(renderer="svg"))
    if title:
        spec["title"] = fitted_title(title, font + 1)
    if height is not None:
        spec["height"] = round(height * scale)
    if width is not None:  # a fixed size (Streamlit's width="content"): the plot area's, the axes around it
        spec["width"] = round(width * scale)
        spec["autosize"] = dict(type="pad")
    legend = dict(labelFontSize=font - 1, titleFontSize=font - 1, symbolStrokeWidth=LINE_WIDTH)
    if legend_columns:
        legend["columns"] = legend_columns
    spec["config"] = dict(
        axis=dict(labelFontSize=font - 1, titleFontSize=font, labelLimit=0, grid=True),
        # A y label's box is about 1.3 times its font size high, where Vega's overlap check counts the font size:
        # the rest as separation, so stacked labels it keeps never touch.
        axisY=dict(labelSeparation=math.ceil(Y_LABEL_BOX_OVER_FONT * (font - 1)) - (font - 1)),
        legend=legend,
        text=dict(fontSize=font - 2),
        view=dict(stroke=None),
        # No ARIA description per data point: Vega would build one string per vertex and cell on
        # every frame (the chart's own description, Streamlit's alt, names it for readers).
        mark=dict(aria=False),
    )
    return spec


def domains_once(spec: dict, seen: dict | None = None) -> dict:
    """``spec`` with each position channel's scale domain set in the first layer that sets it, and left out of the
    later layers that repeat it: layers share their scales, and the same domain on two layers' data is a Vega-Lite
    warning ("Conflicting scale property domains")."""
    seen = {} if seen is None else seen
    spec = dict(spec)
    encoding = spec.get("encoding")
    if isinstance(encoding, dict):
        encoding = dict(encoding)
        for name in ("x", "y"):
            channel = encoding.get(name)
            if isinstance(channel, dict) and isinstance(channel.get("scale"), dict) and "domain" in channel["scale"]:
                domain = json.dumps(channel["scale"]["domain"], sort_keys=True)
                if seen.get(name) == domain:
                    encoding[name] = {
                        **channel,
                        "scale": {key: value for key, value in channel["scale"].items() if key != "domain"},
                    }
                seen.setdefault(name, domain)
        spec["encoding"] = encoding
    if "layer" in spec:
        spec["layer"] = [domains_once(child, seen) for child in spec["layer"]]
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


def vega_chart(
    container,
    spec: dict,
    datasets: dict[str, pd.DataFrame | bytes],
    key: str | None,
    *,
    alt_text: str | None = None,
    width: str | int = "stretch",
) -> None:
    """Draw ``spec`` with its named ``datasets`` (a new frame of the same spec updates the chart in place); a
    dataset that does not change from frame to frame may come as its :func:`arrow_bytes`, made once."""
    datasets = {name: frame if isinstance(frame, bytes) else arrow_bytes(frame) for name, frame in datasets.items()}
    container.vega_lite_chart({**spec, "datasets": datasets}, key=key, width=width, alt=alt_text)


def arrow_bytes(frame: pd.DataFrame | Mapping[str, object]) -> bytes:
    """``frame``'s columns (a DataFrame's, or name -> values) as Arrow IPC bytes, the form Streamlit sends a
    chart's data in, made straight from the columns' arrays (a quarter of the time Streamlit's conversion of a
    DataFrame takes; no index)."""
    columns = {str(name): frame[name] for name in frame.columns} if isinstance(frame, pd.DataFrame) else frame
    table = pa.Table.from_arrays(
        [pa.array(np.asarray(values)) for values in columns.values()], names=[str(name) for name in columns]
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def csv_download(frame: pd.DataFrame | Callable[[], pd.DataFrame], filename: str, label: str, key: str) -> None:
    """A download of the data behind a chart; the CSV is written only when clicked (``frame`` may be a function
    that makes it then: a large table is not built, and held, at every run)."""
    table = frame if callable(frame) else (lambda: frame)
    st.download_button(
        label,
        lambda: table().to_csv(index=False),
        file_name=filename,
        mime="text/csv",
        key=key,
        icon=":material/download:",
        on_click="ignore",
    )
