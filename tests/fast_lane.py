"""The fast lane's budget: ``python -m pytest -m "not slow"`` finishes within :data:`BUDGET_SECONDS` on a two-core
machine, collection included, on one core as the README runs it.

Run alone, the fast lane measures itself from start to end, and fails when over the budget, naming its slowest tests
(move the heaviest to the slow lane, each with a small fast twin). The whole suite, run as CI runs it (one process,
the default test paths, no selection), measures the fast lane as it goes (its collection, and every fast test's
setup, call and teardown) and says it against the budget without failing: inside an hour of other tests, what the
slow ones leave running (servers stopping, workers ending) lands in the fast tests' times.
"""

from __future__ import annotations

import time

import pytest

BUDGET_SECONDS = 240.0
SHOWN = 8  # the slowest fast tests named when over


class FastLaneClock:
    def __init__(self, config: pytest.Config):
        self.config = config
        self.started = time.monotonic()
        self.collected_at: float | None = None
        self.fast: set[str] = set()
        self.spent: dict[str, float] = {}

    def mode(self) -> str | None:
        """``"alone"`` for the fast lane itself, ``"whole"`` for the whole suite; None for any other selection, or
        a run on several processes (pytest-xdist), whose times are not one core's."""
        option = self.config.option
        if getattr(option, "numprocesses", None) or hasattr(self.config, "workerinput"):
            return None
        if (
            option.keyword
            or getattr(option, "lf", False)  # --last-failed (the cache provider's)
            or option.maxfail
            or self.config.args_source != pytest.Config.ArgsSource.TESTPATHS
        ):
            return None
        markers = " ".join(option.markexpr.split())
        return "alone" if markers == "not slow" else "whole" if not markers else None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        self.fast = {item.nodeid for item in items if item.get_closest_marker("slow") is None}

    def pytest_collection_finish(self, session):
        self.collected_at = time.monotonic()

    def pytest_runtest_logreport(self, report):
        if report.nodeid in self.fast:
            self.spent[report.nodeid] = self.spent.get(report.nodeid, 0.0) + report.duration

    def seconds(self, mode: str) -> tuple[float, float]:
        """The fast lane's time and, of it, its collection's."""
        collection = (self.collected_at or self.started) - self.started
        if mode == "alone":
            return time.monotonic() - self.started, collection
        return collection + sum(self.spent.values()), collection

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session, exitstatus):
        mode = self.mode()
        if mode is None or not self.fast or exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return
        seconds, collection = self.seconds(mode)
        line = (
            f'fast lane (-m "not slow", {len(self.fast)} tests): {seconds:.0f} s, collection {collection:.0f} s, '
            f"against a budget of {BUDGET_SECONDS:.0f} s"
        )
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if seconds <= BUDGET_SECONDS:
            if reporter:
                reporter.write_line(line)
            return
        slowest = sorted(self.spent.items(), key=lambda item: -item[1])[:SHOWN]
        if reporter:
            reporter.write_line(f"{line}: OVER", red=True, bold=True)
            for nodeid, spent in slowest:
                reporter.write_line(f"  {spent:6.1f} s  {nodeid}")
        if mode == "alone":
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(FastLaneClock(config), "fast_lane_clock")
