"""3-D landscapes (:class:`symlab.specs.surfaces.Surface`), the one job Vega-Lite cannot do, drawn by the Plotly
that ships with Streamlit (its own chunk, loaded from this server: no CDN, no second copy).

Streamlit's own Plotly element names itself by a hash of the figure, so every new frame of a live view would remount the
chart: it would flicker and forget the visitor's camera. This view is a small component instead, kept by its key
from run to run: each run hands it the figure, and it redraws in place (``Plotly.react``), with the camera where the
visitor turned it, and holds a new frame back while the visitor is dragging."""

from __future__ import annotations

import base64
import functools
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from symlab.specs.surfaces import Line, Surface
from symlab.specs.urlstate import SURFACE_VIEW
from views.common import binding, charts

PX, PRESENT_PX = 460, 600  # the view's height; its width is its column's
FONT_PX = 13
TICK_PX = 11
SURFACE_COLOURS = [[0.0, "#F2F2F2"], [1.0, "#3A3A3A"]]  # low to high, light to dark: the coloured lines stand out
LINE_WIDTH, MARKER_PX = 5, 6
# Scatter3d's marker symbols and dashes: each line's second cue beside its colour.
SYMBOLS = ("circle", "square", "diamond", "cross", "x", "circle-open", "square-open", "diamond-open")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")


@dataclass(frozen=True)
class Style:
    """How one line of a landscape is drawn: a colour and a second cue (the dash of a line, the symbol of a
    marker)."""

    colour: str
    dash: str = "solid"
    symbol: str | None = None  # a marker at every point; with ``line=False``, the markers alone
    line: bool = True
    name: str | None = None  # the legend's words; the line's label where None

    def __post_init__(self):
        if self.dash not in DASHES or (self.symbol is not None and self.symbol not in SYMBOLS):
            raise ValueError(f"not a 3-D line style: {self.dash!r}, {self.symbol!r}")


@functools.cache  # the installed Streamlit's: looked up once, not at every frame
def plotly_chunk() -> str:
    """The file name of Streamlit's Plotly chunk, next to its main script (``static/js``)."""
    found = sorted((Path(st.__file__).parent / "static" / "static" / "js").glob("PlotlyChart.*.js"))
    if not found:
        raise RuntimeError(f"this Streamlit ({st.__version__}) ships no Plotly chunk for the 3-D views")
    return found[0].name


# Loads Streamlit's Plotly chunk (which sets window.Plotly), then draws or redraws the figure in place.
JS = """
export default function (component) {
  const { data, parentElement } = component;
  let root = parentElement.querySelector('.symlab-surface');
  if (!root) {
    root = document.createElement('div');
    root.className = 'symlab-surface';
    root.setAttribute('role', 'img');
    parentElement.appendChild(root);
    root.addEventListener('pointerdown', () => { root.dragging = true; });
    const released = () => {
      root.dragging = false;
      if (root.pending) { const next = root.pending; root.pending = null; draw(root, next); }
    };
    for (const name of ['pointerup', 'pointercancel', 'blur']) window.addEventListener(name, released);
  }
  root.tallest = data.height;
  fit(root);
  if (!root.fitted) {
    root.fitted = true;
    window.addEventListener('resize', () => { fit(root); if (root._fullLayout) window.Plotly.Plots.resize(root); });
  }
  root.setAttribute('aria-label', data.alt);
  const main = document.querySelector('script[src*="static/js/index."]');
  const url = new URL(data.chunk, main ? main.src : new URL('static/js/', document.baseURI)).href;
  import(url).then(() => {
    if (!window.Plotly) throw new Error('the Plotly chunk set no window.Plotly');
    if (root.dragging) root.pending = data.figure; else draw(root, data.figure);
  }).catch((error) => {
    root.textContent = `The 3-D view could not load its drawing library (${error.message}).`;
  });
}

const NARROW_PX = 560, FURTHER = 1.5;

// No taller than wide (and a legend): in a narrow column a tall view narrows the scene's field of view and cuts it.
function fit(root) {
  const width = root.parentElement.clientWidth || root.tallest;
  root.style.height = `${Math.min(root.tallest, Math.max(300, Math.round(width + 60)))}px`;
}

function draw(root, figure) {
  if (root.clientWidth < NARROW_PX && figure.narrowTitles) {  // a phone: titles short enough for the scene's corners
    ['xaxis', 'yaxis', 'zaxis'].forEach((axis, i) => { figure.layout.scene[axis].title.text = figure.narrowTitles[i]; });
  }
  const turned = root.layout && root.layout.scene && root.layout.scene.camera;
  if (turned) figure.layout.scene.camera = turned;  // where the visitor left it
  else if (root.clientWidth < NARROW_PX) {  // a phone: from further away, so that the axes' titles stay in view
    const eye = figure.layout.scene.camera.eye;
    figure.layout.scene.camera.eye = {x: eye.x * FURTHER, y: eye.y * FURTHER, z: eye.z * FURTHER};
  }
  window.Plotly.react(root, figure.data, figure.layout, figure.config);
}
"""

_COMPONENT = None
_ENCODED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # a surface's trace, made once per surface


def switch(page: str, what: str) -> None:
    """The page's 3-D switch (the ``surface`` parameter), with ``what`` the landscape shows in its help."""
    st.toggle(
        "3-D landscape",
        key=binding.widget_key(page, SURFACE_VIEW.name),
        help=f"{what} It loads a 3-D drawing library the first time.",
    )


def component():
    global _COMPONENT
    if _COMPONENT is None:
        _COMPONENT = st.components.v2.component("symlab_surface", js=JS, isolate_styles=False)
    return _COMPONENT


def typed_array(values: np.ndarray) -> dict:
    """A float array as Plotly's typed-array JSON: 4 bytes a value, base64 (a list of decimals is about 4× the
    size and the time)."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    encoded = {"dtype": "f4", "bdata": base64.b64encode(values.tobytes()).decode("ascii")}
    return {**encoded, "shape": ",".join(map(str, values.shape))} if values.ndim > 1 else encoded


def surface_trace(surface: Surface) -> dict:
    if surface not in _ENCODED:
        _ENCODED[surface] = {
            "type": "surface",
            "x": typed_array(surface.x),
            "y": typed_array(surface.y),
            "z": typed_array(surface.drawn()),
            "colorscale": SURFACE_COLOURS,
            "showscale": False,
            "name": surface.z_title,
            "hovertemplate": f"{surface.x_title} %{{x:.3g}}<br>{surface.y_title} %{{y:.3g}}<br>"
            f"{surface.z_title} %{{z:.4g}}<extra></extra>",
            "contours": {"z": {"show": True, "usecolormap": False, "color": "#777777", "width": 1}},
        }
        if surface.z_scale == "log":  # shaded by decades, as the axis reads
            _ENCODED[surface]["surfacecolor"] = typed_array(np.log10(surface.drawn()))
    return _ENCODED[surface]


def line_trace(line: Line, style: Style) -> dict:
    mode = "+".join(part for part, shown in (("lines", style.line), ("markers", style.symbol)) if shown)
    trace: dict[str, object] = {
        "type": "scatter3d",
        "mode": mode,
        "name": style.name or line.label,
        "x": _finite_or_gap(line.x),
        "y": _finite_or_gap(line.y),
        "z": _finite_or_gap(line.z),
        "hovertemplate": f"{style.name or line.label}<extra></extra>",
    }
    if style.line:
        trace["line"] = {"color": style.colour, "width": LINE_WIDTH, "dash": style.dash}
    if style.symbol:
        trace["marker"] = {"color": style.colour, "size": MARKER_PX, "symbol": style.symbol}
    return trace


def _finite_or_gap(values) -> list:
    """Numbers for a line, None where it breaks (NaN separates the outlines of one trace)."""
    return [round(float(v), 5) if np.isfinite(v) else None for v in np.asarray(values, dtype=np.float64)]


def figure(surface: Surface, lines: Sequence[Line], styles: dict[str, Style], camera: dict, present: bool) -> dict:
    """The landscape with its lines (styled by label), the axes titled, the legend below."""
    font = round(FONT_PX * (charts.PRESENT_FONT_PX / charts.FONT_PX if present else 1.0))

    def axis(title: str) -> dict:
        # Ticks at the normal size and few of them: WebGL draws them inside the scene, which a phone makes small.
        return {"title": {"text": title, "font": {"size": font}}, "tickfont": {"size": TICK_PX}, "nticks": 6}

    return {
        "data": [surface_trace(surface), *(line_trace(line, styles[line.label]) for line in lines)],
        "layout": {
            "autosize": True,
            "margin": {"l": 0, "r": 0, "t": 0, "b": 0},
            "font": {"size": font},
            "showlegend": bool(lines),
            "legend": {"orientation": "h", "x": 0, "y": 0, "yanchor": "top", "font": {"size": font}},
            "scene": {
                "xaxis": axis(surface.x_title),
                "yaxis": axis(surface.y_title),
                "zaxis": {**axis(surface.z_title), "type": surface.z_scale}
                | ({"dtick": 1} if surface.z_scale == "log" else {}),  # a tick a decade: no crowded labels
                "camera": camera,
                "aspectmode": "manual",
                "aspectratio": {"x": 1, "y": 1, "z": 0.7},
            },
        },
        "config": {"displayModeBar": False, "responsive": True, "scrollZoom": False},
    }


CAMERA = {"eye": {"x": 1.3, "y": -1.3, "z": 0.9}}  # from the front right, above: both axes and the relief


def surface_chart(
    surface: Surface,
    lines: Sequence[Line],
    styles: dict[str, Style],
    key: str,
    alt_text: str,
    camera: dict = CAMERA,
    narrow_titles: tuple[str, str, str] | None = None,
) -> None:
    """Draw ``surface`` with ``lines`` in place of the view keyed ``key`` (a new frame redraws it, keeping the
    camera the visitor chose); on a phone, the axes titled ``narrow_titles`` (x, y, z) where the surface's own are
    too long for the scene's corners."""
    present = charts.presenting()
    payload = {
        "figure": figure(surface, lines, styles, camera, present) | {"narrowTitles": narrow_titles},
        "chunk": plotly_chunk(),
        "height": PRESENT_PX if present else PX,
        "alt": alt_text,
    }
    component()(data=payload, key=key)


def grid_frame(surface: Surface, names: tuple[str, str, str], **more: np.ndarray) -> pd.DataFrame:
    """The grid behind a view as a table, one row per point: x, y and z under ``names``, then ``more`` grids on
    the same points (each ``[y, x]``, as z)."""
    columns = dict(zip(names, surface.columns().values(), strict=True))
    return pd.DataFrame({**columns, **{name: np.asarray(grid).ravel() for name, grid in more.items()}})
