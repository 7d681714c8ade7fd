"""Results computed once for every session: quick ones in the page's run, long ones in a worker with a waiting panel."""

from __future__ import annotations

import concurrent.futures
import uuid
from collections.abc import Callable, Hashable
from concurrent.futures.process import BrokenProcessPool

import streamlit as st

from symlab.serving import pace, shared_results
from symlab.specs.tasks import Progress, Task
from views.common.browser import browser_id


def shared_result(key: Hashable, compute: Callable, capacity: int | None = None, persist: bool = True):
    """``compute()``'s result, kept for every session and computed once even when a class opens
    the same link at the same moment (:class:`symlab.serving.shared_results.SharedResults`; ``capacity``: how many
    results of this kind, ``key[0]``, to keep in memory; ``persist=False``: not in the result store, for
    data cheaper to make again than to keep). Results must be treated as read-only. ``compute`` runs
    in this session's script and may draw its own progress bar."""
    return shared_results.shared().compute(key, compute, capacity, persist)


_MISSING = object()
PENDING = "⏳"  # starts the text of a computation's progress bar while the page waits for it
WAIT_IN_RUN_SECONDS = 0.5  # a computation done by then is drawn in the same run; a longer one, by a waiting panel
WAIT_POLL_SECONDS = 0.5  # how often the waiting panel redraws the progress (slower on a busy server: serving.pace)


def computed(
    task: Task, draw_progress: Callable[[Progress], None] | None = None, meanwhile: Callable[[], None] | None = None
):
    """``task``'s result, computed once for every session in a worker process. Stored, it is returned at
    once; done within :data:`WAIT_IN_RUN_SECONDS`, too. Otherwise the run ends with a waiting panel that
    redraws itself (a fragment), as live training does: the progress the worker reports (``draw_progress``
    draws its payload, e.g. a live ELBO curve), the place in the queue and the time left, estimated from the
    measured costs; done, the page runs again and draws the result. So the page answers at once, and every
    control stays live while the computation runs. A browser's newer request (its controls moved, in any of its
    tabs) drops its older one if it has not started, as does a session that left (its panel stopped asking); the
    workers take browsers in turn. ``meanwhile`` draws what the page shows above the waiting panel (a first
    frame), in a run that waits. A task that
    failed raises RuntimeError, with what to do, in the run after it failed; the run after that asks again."""
    results = shared_results.shared()
    stored = results.get(task.key, _MISSING)
    if stored is not _MISSING:
        return stored
    failed = st.session_state.get("ui.failed")
    if failed is not None and failed[0] == task.key:
        del st.session_state["ui.failed"]  # said once: the session's next run asks again
        raise RuntimeError(failed[1])
    waiter = st.session_state.setdefault("ui.waiter", uuid.uuid4().hex)
    job = results.submit(task, waiter, browser=browser_id() or waiter)  # one request per browser waits: its newest
    previous = st.session_state.get("ui.job")
    if previous is not None and previous is not job:
        results.release(previous, waiter)  # the session asks for something else now
    st.session_state["ui.job"] = job
    # A page with something to show meanwhile (a first frame) waits a fifth as long: its answer is drawn sooner.
    wait = WAIT_IN_RUN_SECONDS if meanwhile is None else WAIT_IN_RUN_SECONDS / 5
    try:
        return job.future.result(timeout=wait)
    except concurrent.futures.TimeoutError:
        pass
    except (concurrent.futures.CancelledError, BrokenProcessPool) as error:
        raise RuntimeError(failure_text(task, error)) from error
    if meanwhile is not None:
        meanwhile()
    waiting_panel(results, task, job, waiter, draw_progress)
    st.stop()


def waiting_panel(
    results: shared_results.SharedResults, task: Task, job: shared_results.Job, waiter, draw_progress
) -> None:
    """The live panel of a computation under way: its progress and wait, redrawn every
    :data:`WAIT_POLL_SECONDS` until it ends; then the whole page runs again (a failure is remembered for
    that run to raise)."""

    @st.fragment(run_every=WAIT_POLL_SECONDS * pace.slowdown_for(pace.PROCESS_LOAD.cores()))
    def panel():
        pace.INTERACTIONS.wait()  # a redraw of its timer: the runs people asked for go first
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


def failure_text(task: Task, error: BaseException) -> str:
    """What the page says of a computation that failed: its error's own words, or, stopped from outside (its
    worker died, the server is shutting down), what happened and what to do."""
    if isinstance(error, concurrent.futures.CancelledError):
        return (
            f"{task.label} gave way before it finished: a newer request of this browser (in another tab) took its "
            "place, one computation per browser at a time, or the server stopped it; move a control or reload to "
            "ask for it again"
        )
    if isinstance(error, BrokenProcessPool):
        return (
            f"{task.label} stopped before it finished ({type(error).__name__}); move a control or reload to try again"
        )
    return str(error)


def wait_text(label: str, progress: Progress, wait: shared_results.Wait) -> str:
    """A waiting page's progress text: where the request stands and about how long it has left."""
    left = "" if wait.seconds is None else f" (about {max(wait.seconds, 1.0):.0f} s left)"
    if wait.ahead and not progress.done:
        return (
            f"{PENDING} {label}: queued behind {wait.ahead} computation{'s' * (wait.ahead > 1)} of other visitors{left}"
        )
    return f"{PENDING} {progress.text or label}{left}"
