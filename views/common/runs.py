"""Background runs on a page: the registry, whose runs are this browser's, where they train, and the
progress, cancel and resume controls of the runs in flight (the MNIST and posterior-approximation pages)."""

import hashlib
import os
import uuid

import streamlit as st

from symlab.labs import run_kinds
from symlab.runs import supervisor
from symlab.runs.registry import Registry, RegistryError
from symlab.specs import settings
from symlab.specs.run_kind import ACTIVE, RESUMABLE
from symlab.specs.settings import REPO_ROOT, database_url
from views.common import binding

XSRF_COOKIE = "_streamlit_xsrf"  # Streamlit's own, set in every browser while XSRF protection is on (the default)


def hosted() -> bool:
    """A shared server (read at each call: a page's settings are the server's as it runs the page)."""
    return binding.server_settings().hosted


@st.cache_resource(show_spinner=False)
def _registry_at(path: str, database_url: str | None) -> Registry:
    return Registry(run_kinds(), path, database_url)


def registry() -> Registry:
    return _registry_at(str(settings.runs_directory()), database_url())


def session_id() -> str:
    if "runs.session" not in st.session_state:
        st.session_state["runs.session"] = uuid.uuid4().hex
    return st.session_state["runs.session"]


def xsrf_token(cookie: str | None) -> bytes | None:
    """The random token of Streamlit's XSRF cookie, "2|mask|masked token|time" with the token XOR the repeated
    4-byte mask: the server masks it afresh on each page load, so the cookie's text changes and the token stays."""
    try:
        version, mask, masked, _ = cookie.strip("\"'").split("|")
        mask, masked = bytes.fromhex(mask), bytes.fromhex(masked)
    except (AttributeError, ValueError):
        return None
    if version != "2" or len(mask) != 4 or not masked:
        return None
    return bytes(byte ^ mask[i % 4] for i, byte in enumerate(masked))


def browser_owner() -> str:
    """This browser's id for the runs it launches: a one-way hash of its XSRF token, the same across reloads and
    tabs of the browser; "" where the browser sends no such cookie."""
    token = xsrf_token(st.context.cookies.get(XSRF_COOKIE))
    return hashlib.sha256(b"symlab run owner\0" + token).hexdigest()[:32] if token else ""


def is_yours(run, owner: str) -> bool:
    """Launched from this browser (``owner``, :func:`browser_owner`), or in this session where it has no id."""
    return (bool(owner) and run.owner == owner) or run.session == session_id()


def for_visitors(text: str) -> str:
    """``text`` without the server's file paths on a hosted server, where visitors have no use for them."""
    if not hosted():
        return text
    places = {str(settings.runs_directory()): "the runs directory", str(REPO_ROOT): "the app's directory"}
    mnist_directory = settings.mnist_directory()
    if mnist_directory:
        places[str(mnist_directory)] = "the MNIST directory"
    for path in sorted(places, key=len, reverse=True):  # a path inside another first
        text = text.replace(path, places[path])
    return text


def where_runs_train() -> str:
    """The executor that runs launched here use, and the registry's database, in words."""
    try:
        executor = settings.executor_name()
    except ValueError as error:
        return f"⚠ {error}"
    cluster = "a Ray cluster" if hosted() else os.environ.get("RAY_ADDRESS") or "a local Ray instance"
    place = f"on the Ray cluster at {cluster}" if executor == "ray" else "in their own processes on this machine"
    return (f"Runs train {place}: closing the tab or restarting the server does not lose them. "
            f"The registry is {'PostgreSQL' if database_url() else 'an SQLite file in the runs directory'}.")


def lab_runs(page: str, lab: str, limits) -> list | None:
    """``lab``'s runs, after starting what the queue allows; None, with the error shown, where the registry cannot
    be read. A run that ended since the page last looked reruns the whole page, so that its results show."""
    reg = registry()
    try:
        supervisor.dispatch(reg, limits)
        all_runs = reg.runs(lab=lab)
    except RegistryError as error:
        st.error(for_visitors(str(error)))
        return None
    settled = tuple((run.id, run.status) for run in all_runs if run.status not in ACTIVE)
    if st.session_state.setdefault(f"{page}.settled", settled) != settled:
        st.session_state[f"{page}.settled"] = settled
        st.rerun(scope="app")
    return all_runs


def run_controls(page: str, all_runs, owner: str, limits, progress_text) -> None:
    """A progress bar and a cancel button per run in flight (``progress_text(run)`` says how far), and a resume
    picker for the stopped ones. Widget keys start with ``page``."""
    reg = registry()
    active = [run for run in all_runs if run.status in ACTIVE]
    for run in active:
        cols = st.columns([6, 1])
        text = (f"{'yours: ' if is_yours(run, owner) else ''}#{run.id} {run.config.label}: {run.status}, "
                f"{progress_text(run)}" + (" (cancelling…)" if run.cancel_requested else ""))
        cols[0].progress(min(max(run.progress, 0.0), 1.0), text=text)
        if cols[1].button("Cancel", key=f"{page}.cancel.{run.id}", icon=":material/stop:",
                          disabled=run.cancel_requested):
            supervisor.cancel(reg, run.id)
            st.rerun(scope="fragment")
    resumable = [run for run in all_runs if run.status in RESUMABLE]
    if resumable:
        cols = st.columns([6, 1])
        chosen = cols[0].selectbox("Resume a stopped run from its last checkpoint", resumable,
                                   format_func=lambda r: f"{r.label}: {r.status} ({for_visitors(r.message)})",
                                   key=f"{page}.resume_pick")
        if cols[1].button("Resume", key=f"{page}.resume", icon=":material/play_arrow:"):
            try:
                supervisor.resume(reg, chosen.id, limits)
            except ValueError as error:
                st.error(for_visitors(str(error)))
            st.rerun(scope="fragment")
