"""Streamlit glue shared by the pages: URL-bound controls, chart style, CSV downloads."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Callable, Hashable, Sequence

import pandas as pd
import streamlit as st
from streamlit.runtime.pages_manager import PagesManager

from symlab import controls
from symlab.hosting import Hosting, SettingsError, is_hosted
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


@st.cache_resource(show_spinner=False)
def _shared_results() -> tuple[OrderedDict, threading.Lock]:
    return OrderedDict(), threading.Lock()


def shared_result(key: Hashable, compute: Callable, capacity: int = 24):
    """``compute()``'s result, kept for every session (a class opening the same link computes it
    once); the least recently used of ``capacity`` results is dropped. Results must be treated as
    read-only. Unlike st.cache_data, ``compute`` may draw its own progress bar."""
    store, lock = _shared_results()
    with lock:
        if key in store:
            store.move_to_end(key)
            return store[key]
    value = compute()  # outside the lock: one slow computation must not stall other sessions
    with lock:
        store[key] = value
        while len(store) > capacity:
            store.popitem(last=False)
    return value


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


if __name__ == "__main__":  # Streamlit's legacy pages/ mode ran this helper module as a page
    leave_legacy_multipage_mode()
