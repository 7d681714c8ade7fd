"""Results computed once for every session: quick ones in the page's run, long ones in a worker with a waiting panel."""

from __future__ import annotations

import concurrent.futures
import json
import uuid
from collections.abc import Callable, Hashable
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import streamlit as st

from symlab.serving import pace, shared_results, waiting
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
WAIT_IN_RUN_SECONDS = 0.5  # a computation done by then is drawn in the same run; a longer one, by a waiting panel
WAIT_POLL_SECONDS = 0.5  # how often the waiting panel redraws the progress (slower on a busy server: serving.pace)
# The panel drawn by the browser (views/common/waiting.js): the look of Streamlit's own progress bar.
WAITING_CSS = """
.symlab-waiting { margin: 0.25rem 0 1rem; }
.symlab-waiting .text { font-size: 0.875rem; margin-bottom: 0.4rem; overflow-wrap: anywhere; }
.symlab-waiting .bar { height: 0.5rem; background: rgba(49, 51, 63, 0.12); border-radius: 0.25rem; overflow: hidden; }
.symlab-waiting .bar > div { height: 100%; width: 0; background: #1C6BBF; border-radius: 0.25rem; }
"""
_WAITING_COMPONENT = None


def computed(
    task: Task, draw_progress: Callable[[Progress], None] | None = None, meanwhile: Callable[[], None] | None = None
):
    """``task``'s result, computed once for every session in a worker process. Stored, it is returned at
    once; done within :data:`WAIT_IN_RUN_SECONDS`, too. Otherwise the run ends with a waiting panel: the progress
    the worker reports (``draw_progress`` draws its payload, e.g. a live ELBO curve), the place in the queue and the
    time left, estimated from the measured costs; done, the page runs again and draws the result. So the page
    answers at once, and every control stays live while the computation runs. A browser's newer request (its
    controls moved, in any of its tabs) drops its older one if it has not started, as does a session that left (its
    panel stopped asking); the workers take browsers in turn. ``meanwhile`` draws what the page shows above the
    waiting panel (a first frame), in a run that waits. A task that failed raises RuntimeError, with what to do, in
    the first run after it failed; the run after that asks again."""
    results = shared_results.shared()
    stored = results.get(task.key, _MISSING)
    if stored is not _MISSING:
        return stored
    previous = st.session_state.get("ui.job")
    failure = failed_text(task, previous)
    if failure is not None:
        del st.session_state["ui.job"]  # said once: the session's next run asks again
        raise RuntimeError(failure)
    waiter = st.session_state.setdefault("ui.waiter", uuid.uuid4().hex)
    job = results.submit(task, waiter, browser=browser_id() or waiter)  # one request per browser waits: its newest
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
    if draw_progress is None and waiting.served():
        browsers_panel(results, task, job, waiter)
    else:
        waiting_panel(results, task, job, waiter, draw_progress)
    st.stop()


def failed_text(task: Task, job: shared_results.Job | None) -> str | None:
    """What the page says of ``job``, the session's last, where it was ``task``'s and ended without a result: failed,
    or stopped from outside. None otherwise, and where the job was dropped because its waiters left (a panel
    that stopped asking, a phone asleep): the session is back, and asks again."""
    if job is None or job.key != task.key or not job.future.done() or job.dropped == "left":
        return None
    error = concurrent.futures.CancelledError() if job.future.cancelled() else job.future.exception()
    return None if error is None else failure_text(task, error)


def browsers_panel(results: shared_results.SharedResults, task: Task, job: shared_results.Job, waiter) -> None:
    """The waiting panel drawn by the browser (views/common/waiting.js), which asks the server's route where the
    computation stands (symlab/serving/waiting.py): no page run until it is done."""
    global _WAITING_COMPONENT
    if _WAITING_COMPONENT is None:
        script = Path(__file__).with_name("waiting.js").read_text(encoding="utf-8")
        _WAITING_COMPONENT = st.components.v2.component(
            "symlab_waiting", js=script, css=WAITING_CSS, isolate_styles=False
        )
    token = waiting.WATCHES.token(results, job, waiter, task.label)
    progress = job.progress
    document = {
        "token": token,
        "url": waiting.progress_link(token),
        "interval_ms": round(1000 * WAIT_POLL_SECONDS),
        "fraction": progress.fraction,
        "text": waiting.wait_text(task.label, progress, results.wait(job)),
    }
    _WAITING_COMPONENT(
        data=json.dumps(document, separators=(",", ":")).encode(),
        key="ui.waiting",
        default={"done": None},
        on_done_change=lambda: None,
    )


def waiting_panel(
    results: shared_results.SharedResults, task: Task, job: shared_results.Job, waiter, draw_progress
) -> None:
    """The live panel of a computation under way, redrawn by the page every :data:`WAIT_POLL_SECONDS` until it ends
    (a fragment: where its progress has a drawing of its own, or where no route answers the browser's asks); then
    the whole page runs again."""

    @st.fragment(run_every=WAIT_POLL_SECONDS * pace.slowdown_for(pace.PROCESS_LOAD.cores()))
    def panel():
        pace.INTERACTIONS.wait()  # a redraw of its timer: the runs people asked for go first
        results.touch(job, waiter)
        if job.future.done():
            st.rerun()
        progress = job.progress
        st.progress(progress.fraction, text=waiting.wait_text(task.label, progress, results.wait(job)))
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
