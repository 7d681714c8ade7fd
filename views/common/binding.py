"""A page's state: controls bound to the URL (declared once in symlab.specs.controls), presets, notices, presentation mode."""

from __future__ import annotations

import functools
from collections.abc import Mapping, MutableMapping, Sequence

import streamlit as st

from symlab.specs import controls, settings
from symlab.specs.presets import CUSTOM, Presets
from symlab.specs.settings import Hosting, SettingsError, is_hosted
from symlab.specs.urlstate import Param, encode_query, parse_query

# ?present=1: a projector view of the same state, like TensorFlow Playground's hidden-controls links.
PRESENT = Param("present", "bool", False)
PRESENT_CSS = """<style>
[data-testid="stSidebar"], [data-testid="stSidebarCollapsedControl"], [data-testid="stExpandSidebarButton"],
[data-testid="stHeader"], [data-testid="stDownloadButton"], [class*="st-key-controls-"] { display: none !important; }
html { font-size: 20px; }
[data-testid="stMainBlockContainer"] { max-width: 100%; padding: 1rem 2rem; }
</style>"""


def start_page(page: str, specs: Sequence[Param], title: str, caption: str, controls) -> dict:
    """The common top of every lab page: title, URL-bound ``controls()``, notices, presentation
    mode; returns the controls' current values (also written back to the URL)."""
    specs = (*specs, PRESENT)
    notices = bind_url_state(page, specs)
    present = st.session_state[widget_key(page, PRESENT.name)]
    st.session_state["ui.present"] = present
    if present:
        st.html(PRESENT_CSS)
        st.button(
            "Show the controls",
            key=f"{page}.leave_present",
            icon=":material/tune:",
            on_click=apply_values,
            args=(page, {PRESENT.name: False}),
        )
    st.title(title)
    st.caption(caption)
    show_notices(notices)
    with controls_area(page):
        controls()
    with st.sidebar:
        st.toggle(
            "Presentation mode",
            key=widget_key(page, PRESENT.name),
            help="Hides the controls and enlarges text and charts for a projector; the page's link keeps "
            "it, so a shared link opens the same view without controls.",
        )
    return sync_url(page, specs)


def metric_cells(count: int, per_row: int = 2) -> list:
    """Places for ``count`` metrics (or charts), ``per_row`` to a row: more in a row cut their labels (or legends)
    short wherever the row is narrow (a phone turned sideways, a laptop with the sidebar open); a phone stacks
    them anyway."""
    cells: list = []
    while len(cells) < count:
        cells += st.columns(per_row)
    return cells[:count]


def controls_area(name: str):
    """A container for controls in the page's main area: presentation mode hides it, as it hides the sidebar. Its
    widgets are still drawn (hidden), so they keep their values for when the controls come back."""
    return st.container(key=f"{CONTROLS_PREFIX}{name}")


CONTROLS_PREFIX = "controls-"


def control_widget(page: str, config_type, name: str, *, cap: float | None = None, **options):
    """The widget of a declared config field (:mod:`symlab.specs.controls`): its label, help, range (lowered to
    the page's ``cap``, which the help then states beside the declared range), step and format come from
    the declaration; ``options`` (``disabled``, ``format_func``, ``horizontal``...) pass through to Streamlit."""
    declared = controls.declaration(config_type, name)
    spec = controls.capped(declared, cap)
    key = widget_key(page, spec.url)
    text = spec.help or None
    if spec.high != declared.high:
        beyond = "has no such cap" if declared.high is None else f"goes up to {declared.shown(declared.high)}"
        text = (
            f"{text or ''} This page allows at most {spec.shown(cap)}; the command line (`python -m symlab`) {beyond}."
        )
        text = text.strip()
    common = dict(key=key, help=text, **options)
    kind = spec.widget_kind
    if kind in ("slider", "number"):
        number = int if spec.kind == "int" else float
        low, high = (None if bound is None else number(bound) for bound in (spec.low, spec.high))
        grid = spec.step or spec.nudge
        step = number(grid) if grid else (1 if spec.kind == "int" else None)
        if spec.format:
            common["format"] = spec.format
        widget = st.slider if kind == "slider" else st.number_input
        return widget(spec.label, low, high, step=step, **common)
    if kind == "toggle":
        return st.toggle(spec.label, **common)
    choices = list(spec.choices)
    if kind == "radio":
        return st.radio(spec.label, choices, **common)
    if kind == "segmented":  # required: a second click on the chosen option does not clear it
        return st.segmented_control(spec.label, choices, **{"required": True, **common})
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


def page_specs(lab, hosting: Hosting | None = None) -> tuple:
    """``lab``'s URL parameters under ``hosting`` (default: this server's settings, read now), built once per
    settings: a page reads them on every run, and some take milliseconds to build (the toy's ~12 ms)."""
    return _page_specs(lab, server_settings() if hosting is None else hosting)


@functools.lru_cache(maxsize=64)
def _page_specs(lab, hosting: Hosting | None) -> tuple:
    return lab.page_params(hosting)


def for_visitors(text: str) -> str:
    """``text`` (an error's message) without the server's file paths on a hosted server, where visitors have no use
    for them."""
    if not server_settings().hosted:
        return text
    places = {str(settings.runs_directory()): "the runs directory", str(settings.IMPORT_ROOT): "the app's directory"}
    mnist_directory = settings.mnist_directory()
    if mnist_directory:
        places[str(mnist_directory)] = "the MNIST directory"
    for path in sorted(places, key=len, reverse=True):  # a path inside another first
        text = text.replace(path, places[path])
    return text


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


def current_values(page: str, specs: Sequence[Param], session: Mapping | None = None) -> dict:
    """The controls' values in ``session`` (default: this session's st.session_state)."""
    session = st.session_state if session is None else session
    return {spec.name: session[widget_key(page, spec.name)] for spec in specs}


def sync_url(page: str, specs: Sequence[Param]) -> dict:
    """Write the controls' current values to the URL (and the page's store); returns them. A control a browser
    sent back empty (a choice cleared by a client that ignores ``required``) keeps the value it had."""
    values = current_values(page, specs)
    kept = st.session_state.get(f"{page}:values", {})
    for spec in specs:
        if values[spec.name] is None and spec.default is not None:
            values[spec.name] = kept.get(spec.name, spec.default)
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


def set_page_values(page: str, specs: Sequence[Param], values: dict) -> None:
    """Set ``page``'s controls to ``values`` before switching to it (its other controls keep this session's
    values, or the defaults): the page then opens on them, as from a link."""
    store_key = f"{page}:values"
    store = {**(st.session_state.get(store_key) or parse_query({}, (*specs, PRESENT))[0]), **values}
    st.session_state[store_key] = store
    st.session_state[f"{page}:notices"] = (store, [])
    for name, value in values.items():
        st.session_state[widget_key(page, name)] = value


def apply_values(page: str, values: dict) -> None:
    """Set controls programmatically (presets); call from a widget callback."""
    for name, value in values.items():
        st.session_state[widget_key(page, name)] = value


def preset_picker(page: str, specs: Sequence[Param], presets: Presets) -> None:
    """The sidebar's preset selector and the chosen preset's one sentence on what to watch. It shows the preset
    whose state the controls hold, and "custom" once any control has moved away from it."""
    key = f"{page}.preset"
    # Set before the widget is drawn: the box follows the controls, which a preset, a slider or a link may have set.
    st.session_state[key] = presets.matching(current_values(page, specs), specs)

    def apply():
        if st.session_state[key] != CUSTOM:
            apply_preset(st.session_state, page, specs, presets, st.session_state[key])

    kept = "".join(f" It leaves {name} to you: {why}." for name, why in presets.keeps.items())
    st.selectbox(
        "Preset",
        [CUSTOM, *presets],
        key=key,
        on_change=apply,
        help=f"Each preset sets every control, the seed included.{kept} Moving a control shows “custom”.",
    )
    if st.session_state[key] != CUSTOM:
        st.info(presets.watch(st.session_state[key]))


def apply_preset(session: MutableMapping, page: str, specs: Sequence[Param], presets: Presets, name: str) -> None:
    """Set every control of ``page`` in ``session`` (st.session_state) to preset ``name``'s state."""
    for control, value in presets.state(name, specs).items():
        session[widget_key(page, control)] = value


def new_seed_button(page: str, help: str | None = None) -> None:
    """Draw a new seed: a separate action from Reset, which keeps the current one."""

    st.button(
        "New seed",
        on_click=advance_seed,
        args=(page,),
        icon=":material/casino:",
        key=f"{page}.new_seed",
        width="stretch",
        help=help,
    )


def advance_seed(page: str) -> None:
    """The next seed of ``page``; nothing where the click arrived after the visitor left the page (its seed's
    widget state gone)."""
    seed_key = widget_key(page, "seed")
    seed = st.session_state.get(seed_key)
    if seed is not None:
        st.session_state[seed_key] = (seed + 1) % 100_000


def show_notices(notices: Sequence[str]) -> None:
    if notices:
        st.warning("Some settings in the link were adjusted:\n\n" + "\n".join(f"- {n}" for n in notices), icon="⚠️")
