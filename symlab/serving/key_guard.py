"""The lecturer's key against guessing. Each wrong key typed on a page makes the next check wait longer: from that
browser after :data:`FREE_PER_BROWSER` wrong keys, and from any browser of this server after :data:`FREE_PER_SERVER`
within the hour (a student with many private windows gets a new browser id each time, not a new server). Past
:data:`LOCKOUT_AFTER` wrong keys within the hour no key is checked for :data:`LOCKOUT_SECONDS` after the last, and the
server's log says so. A key typed while a check must wait is not checked at all, so that waiting is not a way around
the delay. The counts live in the run registry's database, so a server's page processes share them."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from symlab.runs.registry import RegistryError
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


class Ledger(Protocol):
    """Where wrong keys are written down: the run registry's database, shared by every page process of a server
    (:class:`symlab.runs.registry.Registry`), or :class:`MemoryLedger`, one process's."""

    def record_wrong_key(self, browser: str, at: float) -> None: ...

    def wrong_keys_since(self, since: float) -> list[tuple[str, float]]: ...

    def forget_wrong_keys(self, browser: str) -> None: ...


@dataclass
class MemoryLedger:
    """Wrong keys in this process's memory: where no registry is at hand, or it cannot be reached."""

    rows: list = field(default_factory=list)  # (browser, time)

    def record_wrong_key(self, browser: str, at: float) -> None:
        self.rows = [row for row in self.rows if row[1] > at - WINDOW_SECONDS] + [(browser, at)]

    def wrong_keys_since(self, since: float) -> list[tuple[str, float]]:
        return [row for row in self.rows if row[1] > since]

    def forget_wrong_keys(self, browser: str) -> None:
        self.rows = [row for row in self.rows if row[0] != browser]


@dataclass
class KeyGuard:
    """Wrong keys counted by browser and for the whole server, in the ledger a check is given (the registry: one
    count however many page processes serve the class), else in this process's; ``clock``: seconds since the
    epoch."""

    clock: Callable[[], float] = time.time
    _memory: MemoryLedger = field(default_factory=MemoryLedger)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check(self, browser: str, typed: str, ledger: Ledger | None = None) -> Verdict:
        """Whether ``typed``, from ``browser`` (its id), is the lecturer's key, if a check may be made now."""
        with self._lock:
            try:
                return self._check(browser, typed, ledger if ledger is not None else self._memory)
            except RegistryError as error:  # its database away: this process's count, rather than none
                LOG.warning("the lecturer's key: wrong keys counted in this process only (%s)", error)
                return self._check(browser, typed, self._memory)

    def _check(self, browser: str, typed: str, ledger: Ledger) -> Verdict:
        now = self.clock()
        wrong = ledger.wrong_keys_since(now - WINDOW_SECONDS)
        wait = self._wait(browser, wrong, now)
        if wait > 0:
            return Verdict(False, wait)
        if settings.is_lecturer_key(typed):
            ledger.forget_wrong_keys(browser)
            return Verdict(True)
        ledger.record_wrong_key(browser, now)
        if len(wrong) + 1 >= LOCKOUT_AFTER:
            LOG.warning(
                "the lecturer's key: %d wrong keys within the hour, the last from browser %s; no key is checked "
                "for the next %d minutes (someone may be guessing: a longer key, $%s, ends it)",
                len(wrong) + 1,
                browser[:8] or "(no id)",
                LOCKOUT_SECONDS // 60,
                settings.LECTURER_KEY_ENV,
            )
        return Verdict(False)

    @staticmethod
    def _wait(browser: str, wrong: list[tuple[str, float]], now: float) -> float:
        """Seconds until a check may be made, after the hour's ``wrong`` keys (oldest first): the lockout, and the
        browser's and the server's delays after their last wrong key."""
        if not wrong:
            return 0.0
        last = wrong[-1][1]
        mine = [at for owner, at in wrong if owner == browser]
        return max(
            last + LOCKOUT_SECONDS - now if len(wrong) >= LOCKOUT_AFTER else 0.0,
            mine[-1] + delay_after(len(mine), FREE_PER_BROWSER) - now if mine else 0.0,
            last + delay_after(len(wrong), FREE_PER_SERVER) - now,
            0.0,
        )


GUARD = KeyGuard()
