"""People before timers: how busy the page process is, and how its timers' runs give way to the clicks.

Every session's scripts run in one process, under one interpreter lock: the redraws of waiting panels (a timer's
run) compete with the clicks of everyone else. Three rules keep the clicks first:

* a waiting panel redraws less often while the process is busy (:func:`slowdown_for`);
* a timer's run waits, a little, for the interactions under way (:class:`Interactions`) before it starts;
* a browser's page runs take turns (:class:`BrowserTurns`): however many sessions one browser opens, one of its
  runs at a time is under way, so a student cycling heavy links in ten tabs takes one session's share.

No Streamlit here (views/common/computing.py and app.py apply it): the rules are tested directly.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable

BUSY_WINDOW_SECONDS = 2.0  # the page process's CPU use is averaged over this long
BUSY_SAMPLE_SECONDS = 0.25  # at most one sample of its CPU clock per this long
# Cores of page runs above which a timer's interval is × the slowdown: the class's budget for page runs is a third
# of a core.
SLOWDOWNS = {0.35: 2, 0.6: 4}
YIELD_SECONDS, YIELD_POLL_SECONDS = 0.3, 0.01  # a timer's run waits at most this long for interactions
BROWSER_TURN_LIMIT_SECONDS = 10.0  # a page run waits at most this long for its browser's other run


class ProcessLoad:
    """The cores this process's threads used recently: its CPU clock over the last ~:data:`BUSY_WINDOW_SECONDS`.
    Safe to call from every session's thread."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, cpu: Callable[[], float] = time.process_time):
        self.clock, self.cpu = clock, cpu
        self.samples: deque[tuple[float, float]] = deque()
        self.lock = threading.Lock()

    def cores(self) -> float:
        now, used = self.clock(), self.cpu()
        with self.lock:
            if not self.samples or now - self.samples[-1][0] >= BUSY_SAMPLE_SECONDS:
                self.samples.append((now, used))
            while len(self.samples) > 2 and now - self.samples[1][0] >= BUSY_WINDOW_SECONDS:
                self.samples.popleft()
            then, used_then = self.samples[0]
        return (used - used_then) / (now - then) if now - then >= BUSY_SAMPLE_SECONDS else 0.0


def slowdown_for(cores: float) -> int:
    """A timer's slowdown (1, 2 or 4) for a page process using ``cores``."""
    return max([1, *(slowdown for bound, slowdown in SLOWDOWNS.items() if cores > bound)])


class Interactions:
    """The runs people asked for (a click, a slider, a page) under way in this process, which a timer's run lets
    go first: it waits up to :data:`YIELD_SECONDS` for them to end."""

    def __init__(self):
        self.count = 0
        self.lock = threading.Lock()
        self.here = threading.local()  # whether this thread's run is one of them

    @contextlib.contextmanager
    def running(self):
        with self.lock:
            self.count += 1
        self.here.running = True
        try:
            yield
        finally:
            self.here.running = False
            with self.lock:
                self.count -= 1

    def wait(self, limit: float = YIELD_SECONDS, sleep: Callable[[float], None] = time.sleep) -> float:
        """Sleep (the interpreter lock free meanwhile) while another thread runs an interaction, at most ``limit``
        seconds; the seconds waited. A run that is itself an interaction waits for none."""
        if getattr(self.here, "running", False):
            return 0.0
        waited = 0.0
        while self.count > 0 and waited < limit:
            sleep(YIELD_POLL_SECONDS)
            waited += YIELD_POLL_SECONDS
        return waited


class BrowserTurns:
    """A browser's page runs one at a time in this process: a run waits (at most ``limit`` seconds, then goes
    ahead) while another session of its browser has one under way. Runs of different browsers never wait here."""

    def __init__(self, limit: float = BROWSER_TURN_LIMIT_SECONDS):
        self.limit = limit
        self.lock = threading.Lock()
        self.turns: dict[str, list] = {}  # browser -> [its lock, the runs holding or waiting for it]

    @contextlib.contextmanager
    def turn(self, browser: str):
        """Around a page run of ``browser`` ("": a browser that cannot be told apart, which never waits)."""
        if not browser:
            yield
            return
        with self.lock:
            entry = self.turns.setdefault(browser, [threading.Lock(), 0])
            entry[1] += 1
        had_turn = entry[0].acquire(timeout=self.limit)
        try:
            yield
        finally:
            if had_turn:
                entry[0].release()
            with self.lock:
                entry[1] -= 1
                if entry[1] == 0:
                    del self.turns[browser]


PROCESS_LOAD = ProcessLoad()
INTERACTIONS = Interactions()
BROWSER_TURNS = BrowserTurns()
