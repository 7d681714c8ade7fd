"""Where a computation a page waits for stands, asked by the waiting page's browser at a route of the server's own.

A waiting panel drawn by the page process redrew itself twice a second, each time a page run (a fragment's):
about 6 ms of the page process's CPU a redraw, a tenth of it under a class's load (810 redraws a minute at N = 30).
Here the page gives the browser a token for its computation; the browser asks ``<base>/progress/<token>`` twice a
second (a few hundred microseconds, no page run) and draws the bar itself; once the computation is done, it runs
the page again, which draws the result. Each ask also keeps the request alive, as the panel's redraw did: a page
whose browser has stopped asking is gone, and its queued computation is dropped (``SharedResults.touch``)."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

from symlab.serving import shared_results
from symlab.serving.base_url import path_prefix
from symlab.specs.tasks import Progress

PENDING = "⏳"  # starts the text of a computation's progress bar while the page waits for it
ROUTE = "/progress"  # under the server's base path; none of Streamlit's routes starts so
FORGET_SECONDS = 60.0  # a token nobody has asked about for this long is forgotten
_served_under: str | None = None  # the base path this process's server serves the route under (serve.py), or None


def wait_text(label: str, progress: Progress, wait: shared_results.Wait) -> str:
    """A waiting page's progress text: where the request stands and about how long it has left."""
    left = "" if wait.seconds is None else f" (about {max(wait.seconds, 1.0):.0f} s left)"
    if wait.ahead and not progress.done:
        return (
            f"{PENDING} {label}: queued behind {wait.ahead} computation{'s' * (wait.ahead > 1)} of other visitors{left}"
        )
    return f"{PENDING} {progress.text or label}{left}"


@dataclass
class _Watch:
    results: shared_results.SharedResults
    job: shared_results.Job
    waiter: Hashable
    label: str
    asked: float  # when the page or its browser last asked (the clock's time)


class Watches:
    """The computations this process's pages wait for, each under a token its browser asks about. Safe from every
    thread: the pages' runs hand tokens out, the server's event loop answers the asks."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self._by_token: dict[str, _Watch] = {}
        self._tokens: dict[tuple[Hashable, int], str] = {}  # (waiter, id of its job) -> token
        self._lock = threading.Lock()

    def token(self, results: shared_results.SharedResults, job: shared_results.Job, waiter: Hashable, label: str):
        """The token under which ``waiter``'s browser asks about ``job``: the same on every run that waits for it."""
        now = self.clock()
        with self._lock:
            self._forget_older_than(now - FORGET_SECONDS)
            token = self._tokens.get((waiter, id(job)))
            if token is None or self._by_token[token].job is not job:
                token = secrets.token_urlsafe(18)
                self._tokens[(waiter, id(job))] = token
            self._by_token[token] = _Watch(results, job, waiter, label, now)
            return token

    def report(self, token: str) -> dict | None:
        """What the browser draws: ``done`` (the page's next run draws the result, or says why there is none), the
        bar's ``fraction`` and its ``text``; None for a token this process does not know (another process's, one
        forgotten, or made up). Asking keeps the request alive."""
        with self._lock:
            watch = self._by_token.get(token)
            if watch is None:
                return None
            watch.asked = self.clock()
        if watch.job.future.done():
            return {"done": True, "fraction": 1.0, "text": f"{PENDING} {watch.label}: done"}
        watch.results.touch(watch.job, watch.waiter)
        progress = watch.job.progress
        wait = watch.results.wait(watch.job)
        return {"done": False, "fraction": progress.fraction, "text": wait_text(watch.label, progress, wait)}

    def _forget_older_than(self, then: float) -> None:
        """(Under the lock.)"""
        for token in [token for token, watch in self._by_token.items() if watch.asked < then]:
            watch = self._by_token.pop(token)
            if self._tokens.get((watch.waiter, id(watch.job))) == token:
                del self._tokens[(watch.waiter, id(watch.job))]

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_token)


WATCHES = Watches()  # this process's


def served() -> bool:
    """Whether this process's server answers the browsers' asks (serve.py's route); where it does not (AppTest,
    ``streamlit run app.py``), a page redraws its own waiting panel."""
    return _served_under is not None


def progress_link(token: str) -> str:
    """Where the browser asks about ``token``."""
    return f"{_served_under or ''}{ROUTE}/{token}"


def routes(base_path: str = "", watches: Watches | None = None) -> list:
    """The route that answers the asks under ``base_path``, for ``st.App(routes=...)``; from then on the pages'
    waiting panels are drawn by their browsers."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    global _served_under
    _served_under = path_prefix(base_path)
    watches = WATCHES if watches is None else watches

    async def progress(request):
        report = watches.report(request.path_params["token"])
        headers = {"Cache-Control": "no-store"}
        if report is None:
            return JSONResponse({"done": True, "unknown": True}, status_code=404, headers=headers)
        return JSONResponse(report, headers=headers)

    return [Route(f"{_served_under}{ROUTE}/{{token}}", progress, methods=["GET"])]
