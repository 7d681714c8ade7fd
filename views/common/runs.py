"""Background runs on a page: the registry, whose runs are this browser's, where they train, launching within the
caps, and the progress, cancel, resume and restart controls of the runs this visitor may control (the MNIST and
posterior-approximation pages). On a hosted server a visitor controls the runs its browser launched, and a
lecturer (who typed the host's key) every run; on a server of one's own, its user controls every run."""

import logging
import math
import os
from collections.abc import Callable
from pathlib import Path

import streamlit as st

from symlab.labs import run_kinds
from symlab.runs import supervisor
from symlab.runs.registry import Registry, RegistryError, checkpoint_epoch
from symlab.serving import key_guard, pace
from symlab.specs import settings
from symlab.specs.run_kind import ACTIVE, QUEUED, RESUMABLE, RUNNING
from symlab.specs.settings import database_url
from views.common import binding, tables
from views.common.browser import browser_id, session_id, visitor_id

LECTURER_KEY = "runs.lecturer_key"  # the key as typed once accepted, kept for the session (never in the link)


def hosted() -> bool:
    """A shared server (read at each call: a page's settings are the server's as it runs the page)."""
    return binding.server_settings().hosted


@st.cache_resource(show_spinner=False)
def _registry_at(path: str, database_url: str | None) -> Registry:
    return Registry(run_kinds(), path, database_url)


def registry() -> Registry:
    return _registry_at(str(settings.runs_directory()), database_url())


def is_yours(run, owner: str) -> bool:
    """Launched from this browser (``owner``, :func:`views.common.browser.browser_id`), or in this session where it has no id."""
    return (bool(owner) and run.owner == owner) or run.session == session_id()


def caller() -> supervisor.Caller:
    """This visitor, as the supervisor judges who may control a run: its browser, and the lecturer's key if it
    typed one; on a server that is not shared, its one user, who controls every run."""
    return supervisor.Caller(
        owner=browser_id(), source="app", host=not hosted(), lecturer_key=st.session_state.get(LECTURER_KEY, "")
    )


def launch(lab: str, config, limits) -> int:
    """Submit a run of ``lab`` for this visitor within the caps; a ValueError (or RegistryError) says why not. A
    hosted server needs the browser's id to count its launches and let it alone control its runs."""
    owner = browser_id()
    if hosted() and not owner:
        raise ValueError(
            "this browser sends no cookie this server can tell it by, so it cannot count its launches "
            "or let you alone cancel your runs: allow cookies for this site and reload the page"
        )
    return supervisor.submit(registry(), lab, config, limits, session=session_id(), owner=owner)


def launched(run_id: int, noun: str, label: str) -> None:
    """A toast for a launch: its worker is starting, or it waits in the queue."""
    state = "starting…" if registry().get(run_id).status == RUNNING else "queued (it starts when a run ahead ends)"
    st.toast(f"{noun} #{run_id} ({label}): {state}", icon=":material/rocket_launch:")


def explain(error: Exception) -> str:
    """An error's message for this visitor: on a hosted server a registry's failure without the database's address
    (the server's log keeps it) and no server paths."""
    if hosted() and isinstance(error, RegistryError):
        if error.public != str(error):
            logging.getLogger(__name__).warning("%s", error)
        return binding.for_visitors(error.public)
    return binding.for_visitors(str(error))


def lecturer_panel(page: str) -> None:
    """Where the host set a lecturer's key: a password box for it, kept for the session (not in the link); the
    key lets this visitor cancel, resume and restart every run."""
    if not settings.lecturer_key():
        return
    box = f"{page}.lecturer_key"
    st.session_state.setdefault(box, st.session_state.get(LECTURER_KEY, ""))  # typed on another page
    with st.expander("Lecturer", icon=":material/school:", expanded=bool(st.session_state[box])):
        typed = st.text_input(
            "Lecturer's key",
            type="password",
            key=box,
            help="Set by the host (SYMLAB_LECTURER_KEY): cancel, resume and restart every run.",
        )
        verdict = checked_key(box, typed)
        st.session_state[LECTURER_KEY] = typed if verdict.accepted else ""
        if verdict.accepted:
            st.caption("You may cancel, resume and restart every run.")
            queue_panel(page)
        elif verdict.wait_seconds:
            st.warning(
                f"Too many wrong keys: the next key typed is checked in {math.ceil(verdict.wait_seconds)} s.",
                icon=":material/timer:",
            )
        elif typed:
            st.error("That is not the lecturer's key.")


def queue_panel(page: str) -> None:
    """For a lecturer: the runs waiting and training by browser, and one action that cancels a browser's queued
    runs (a flood: their launches then count for no cap)."""
    try:
        rows = supervisor.queue_by_browser(registry())
    except RegistryError as error:
        st.error(explain(error))
        return
    if not rows:
        st.caption("No run is queued or training.")
        return
    mine = browser_id()
    names = {row["owner"]: browser_name(row["owner"], mine) for row in rows}
    tables.show(
        [{"browser": names[row["owner"]], "queued": row["queued"], "training": row["running"]} for row in rows],
        hide_index=True,
    )
    flooding = [row["owner"] for row in rows if row["queued"]]
    if not flooding:
        return
    cols = st.columns([3, 2])
    chosen = cols[0].selectbox(
        "Browser",
        flooding,
        format_func=lambda owner: names[owner],
        key=f"{page}.flood_pick",
        label_visibility="collapsed",
    )
    if cols[1].button("Cancel its queued runs", key=f"{page}.cancel_flood", icon=":material/block:"):
        try:
            cancelled = supervisor.cancel_queued_of(registry(), chosen, by=caller())
        except (ValueError, RegistryError) as error:
            st.error(explain(error))
            return
        st.toast(f"{len(cancelled)} queued runs of {names[chosen]} cancelled", icon=":material/block:")
        st.rerun()


def browser_name(owner: str, mine: str) -> str:
    """A browser as a lecturer tells them apart: the start of its id (a hash, not the cookie)."""
    if not owner:
        return "the command line"
    return f"{owner[:8]}{' (this browser)' if owner == mine else ''}"


def in_line(place: int | None) -> str:
    """A queued run's place in its device's line, in words."""
    if place is None:
        return "waiting for its worker"
    return "next in line" if place == 1 else f"{place - 1} ahead of it in line"


def shared_ledger() -> Registry | None:
    """Where the server's page processes count wrong lecturer keys together: the run registry, None where it cannot
    be opened (each process then counts its own)."""
    try:
        return registry()
    except RegistryError:
        return None


def checked_key(box: str, typed: str) -> key_guard.Verdict:
    """``typed``'s verdict, counted once: a page's reruns with the same key in ``box`` reuse it (a verdict that
    had to wait is asked again)."""
    if not typed:
        return key_guard.Verdict(False)
    last = st.session_state.get(f"{box}.verdict")
    if last is not None and last[0] == typed:
        return last[1]
    verdict = key_guard.GUARD.check(visitor_id(), typed, shared_ledger())
    if not verdict.wait_seconds:
        st.session_state[f"{box}.verdict"] = (typed, verdict)
    return verdict


def where_runs_train() -> str:
    """The executor that runs launched here use, and (on a server of one's own) the registry's database, in words:
    a class has no use for the server's internals."""
    try:
        executor = settings.executor_name()
    except ValueError as error:
        return f"⚠ {error}"
    kept = "closing the tab or restarting the server does not lose them"
    if hosted():
        return f"Runs train on the server: {kept}."
    cluster = os.environ.get("RAY_ADDRESS") or "a local Ray instance"
    place = f"on the Ray cluster at {cluster}" if executor == "ray" else "in their own processes on this machine"
    registry_in = "PostgreSQL" if database_url() else "an SQLite file in the runs directory"
    return f"Runs train {place}: {kept}. The registry is {registry_in}."


def lab_runs(page: str, lab: str, limits) -> list | None:
    """``lab``'s runs, after starting what the queue allows; None, with the error shown, where the registry cannot
    be read. A run that ended since the page last looked reruns the whole page, so that its results show."""
    try:
        reg = registry()
        supervisor.dispatch(reg, limits)
        all_runs = reg.runs(lab=lab)
    except RegistryError as error:
        st.error(explain(error))
        return None
    settled = tuple((run.id, run.status) for run in all_runs if run.status not in ACTIVE)
    if st.session_state.setdefault(f"{page}.settled", settled) != settled:
        st.session_state[f"{page}.settled"] = settled
        st.rerun(scope="app")
    return all_runs


@st.cache_resource(max_entries=256, show_spinner=False)
def _checkpoint_problem(lab: str, path: str, modified_ns: int, size: int) -> str | None:
    """The lab's verdict on a checkpoint, once per version of the file (its path, time and size): pages ask on every
    rerun, and a checkpoint can be tens of megabytes."""
    check = registry().kind(lab).checkpoint_problem
    return check(Path(path)) if check else None


def checkpoint_problem(run) -> str | None:
    """Why ``run``'s newest checkpoint cannot be read, in a few words; None where it can, or where it has none."""
    path = registry().checkpoint_path(run.id)
    try:
        found = path.stat()
    except OSError:
        return None
    return _checkpoint_problem(run.lab, str(path), found.st_mtime_ns, found.st_size)


def resumes_from(reg, run) -> str:
    """Where Resume goes on for ``run``, whose newest checkpoint cannot be read: the checkpoint before it (its epoch,
    where it names one), or the start."""
    kept = reg.checkpoints(run.id)
    if len(kept) < 2:
        return "Resume sets it aside and trains the run from the beginning"
    epoch = checkpoint_epoch(kept[1])
    return f"Resume sets it aside and goes on after epoch {epoch}" if epoch else "Resume goes on from the one before"


def run_controls(page: str, all_runs, owner: str, limits, progress_text) -> None:
    """A progress bar per run in flight (``progress_text(run)`` says how far), with a cancel button on those this
    visitor may control, and a resume and restart picker for the stopped ones it may control. Widget keys start
    with ``page``."""
    reg, by = registry(), caller()
    active = [run for run in all_runs if run.status in ACTIVE]
    places = reg.queue_positions() if any(run.status == QUEUED for run in active) else {}
    for run in active:
        cols = st.columns([6, 1])
        text = (
            f"{'yours: ' if is_yours(run, owner) else ''}#{run.id} {run.config.label}: {run.status}, "
            + (in_line(places.get(run.id)) if run.status == QUEUED else progress_text(run))
            + (" (cancelling…)" if run.cancel_requested else "")
        )
        cols[0].progress(min(max(run.progress, 0.0), 1.0), text=text)
        if by.may_control(run) and cols[1].button(
            "Cancel", key=f"{page}.cancel.{run.id}", icon=":material/stop:", disabled=run.cancel_requested
        ):
            act(lambda: supervisor.cancel(reg, run.id, by=by))
    stopped = [run for run in reversed(all_runs) if run.status in RESUMABLE and by.may_control(run)]
    if stopped:
        resume_picker(page, reg, stopped, by, limits)


def resume_picker(page: str, reg, stopped, by, limits) -> None:
    """Resume (from the newest checkpoint that can be read) or restart (from the start) one of ``stopped``, newest
    first, the newest chosen; a run whose newest checkpoint cannot be read says where Resume goes on from."""

    def why(run) -> str:
        problem = checkpoint_problem(run)
        return f"{problem}: {resumes_from(reg, run)}" if problem else binding.for_visitors(run.message)

    def label(run) -> str:
        return f"{run.label}: {run.status} ({why(run)})"

    cols = st.columns([5, 1, 1])
    chosen = cols[0].selectbox(
        "Resume a stopped run from its last checkpoint, or restart it from the start",
        stopped,
        format_func=label,
        key=f"{page}.resume_pick",
        placeholder="Choose a run",
    )
    if chosen is not None and why(chosen):  # the box cuts a long reason short, on a phone most of all
        cols[0].caption(f"#{chosen.id} {chosen.status}: {why(chosen)}")
    if cols[1].button("Resume", key=f"{page}.resume", icon=":material/play_arrow:", disabled=chosen is None):
        act(lambda: supervisor.resume(reg, chosen.id, limits, by=by))
    if cols[2].button(
        "Restart",
        key=f"{page}.restart",
        icon=":material/restart_alt:",
        disabled=chosen is None,
        help="Train the run again from its first epoch: its checkpoints and metrics are dropped.",
    ):
        act(lambda: supervisor.restart(reg, chosen.id, limits, by=by))


def act(action) -> None:
    """Do what a control asks, then redraw the runs; a refusal (not this visitor's run, a cap) is shown instead."""
    try:
        action()
    except (ValueError, RegistryError) as error:
        st.error(explain(error))
        return
    st.rerun(scope="fragment")


REFRESH_SECONDS = 2.0  # a runs panel's redraws while one of its runs is queued or running
IDLE_REFRESH_SECONDS = 10.0  # … and while none is: others' new runs show within this


def live_panel(page: str, draw: Callable[[], list | None]) -> None:
    """``draw()`` (a runs table; it returns the lab's runs, None where they could not be read) in a fragment that
    redraws itself every :data:`REFRESH_SECONDS` while a run is queued or running, every
    :data:`IDLE_REFRESH_SECONDS` otherwise; a redraw of its timer lets the runs people asked for go first."""
    live = st.session_state.get(f"{page}.runs_live", False)

    @st.fragment(run_every=REFRESH_SECONDS if live else IDLE_REFRESH_SECONDS)
    def panel():
        pace.INTERACTIONS.wait()
        all_runs = draw()
        now_live = any(run.status in ACTIVE for run in all_runs or ())
        if now_live != live:
            st.session_state[f"{page}.runs_live"] = now_live
            st.rerun()  # the timer is fixed where the fragment is defined

    panel()
