"""The lecturer's key against guessing. Each wrong key typed on a page makes the next check wait longer: from that
browser after :data:`FREE_PER_BROWSER` wrong keys, and from any browser of this process after :data:`FREE_PER_SERVER`
within the hour (a student with many private windows gets a new browser id each time, not a new server). Past
:data:`LOCKOUT_AFTER` wrong keys within the hour no key is checked for :data:`LOCKOUT_SECONDS`, and the server's log
says so. A key typed while a check must wait is not checked at all, so that waiting is not a way around the delay."""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from symlab.specs import settings

LOG = logging.getLogger("symlab.serving.key_guard")
FREE_PER_BROWSER = 3  # typing slips: a browser's first wrong keys cost nothing
FREE_PER_SERVER = 10  # wrong keys within the hour, from all browsers, before every check waits
WINDOW_SECONDS = 3600.0
LONGEST_DELAY_SECONDS = 300.0
# Wrong keys within the hour (the delays allow them in about 14 minutes): no key is checked for half an hour.
LOCKOUT_AFTER = 20
LOCKOUT_SECONDS = 1800.0


def delay_after(wrong: int, free: int) -> float:
    """Seconds a check waits after ``wrong`` wrong keys of which ``free`` cost nothing: 1, 2, 4, … up to
    :data:`LONGEST_DELAY_SECONDS`."""
    return 0.0 if wrong < free else min(2.0 ** (wrong - free), LONGEST_DELAY_SECONDS)


@dataclass(frozen=True)
class Verdict:
    """A typed key's check: ``accepted`` (it is the lecturer's), or refused; ``wait_seconds`` > 0 where it was not
    checked because checks must wait that long yet."""

    accepted: bool
    wait_seconds: float = 0.0


@dataclass
class _Browser:
    wrong: int = 0
    last_wrong: float = -float("inf")


@dataclass
class KeyGuard:
    """Wrong keys counted by browser and for the whole process; ``clock``: seconds, monotonic."""

    clock: Callable[[], float] = time.monotonic
    _browsers: dict = field(default_factory=dict)
    _server_wrong: collections.deque = field(default_factory=collections.deque)  # when each wrong key came
    _locked_until: float = -float("inf")
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, browser: str, typed: str) -> Verdict:
        """Whether ``typed``, from ``browser`` (its id), is the lecturer's key, if a check may be made now."""
        with self._lock:
            now = self.clock()
            wait = self._wait(browser, now)
            if wait > 0:
                return Verdict(False, wait)
            if settings.is_lecturer_key(typed):
                self._browsers.pop(browser, None)
                return Verdict(True)
            self._count_wrong(browser, now)
            return Verdict(False)

    def _wait(self, browser: str, now: float) -> float:
        while self._server_wrong and self._server_wrong[0] <= now - WINDOW_SECONDS:
            self._server_wrong.popleft()
        mine = self._browsers.get(browser, _Browser())
        server_last = self._server_wrong[-1] if self._server_wrong else -float("inf")
        return max(
            self._locked_until - now,
            mine.last_wrong + delay_after(mine.wrong, FREE_PER_BROWSER) - now,
            server_last + delay_after(len(self._server_wrong), FREE_PER_SERVER) - now,
            0.0,
        )

    def _count_wrong(self, browser: str, now: float) -> None:
        mine = self._browsers.setdefault(browser, _Browser())
        mine.wrong, mine.last_wrong = mine.wrong + 1, now
        self._server_wrong.append(now)
        if len(self._server_wrong) >= LOCKOUT_AFTER:
            self._locked_until = now + LOCKOUT_SECONDS
            self._server_wrong.clear()
            LOG.warning(
                "the lecturer's key: %d wrong keys within the hour, the last from browser %s; no key is checked "
                "for the next %d minutes (someone may be guessing: a longer key, $%s, ends it)",
                LOCKOUT_AFTER,
                browser[:8] or "(no id)",
                LOCKOUT_SECONDS // 60,
                settings.LECTURER_KEY_ENV,
            )


GUARD = KeyGuard()
