"""tests/fast_lane.py: the fast lane's time against its budget, on a small suite of its own (one fast and one slow
test, a second each) run as CI runs the whole suite (said), as the fast lane runs alone (failed when over), and with
a selection (not judged)."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

pytestmark = pytest.mark.slow  # seven pytest processes of its own

CONFTEST = """
import sys
sys.path.insert(0, {tests!r})
import fast_lane
fast_lane.BUDGET_SECONDS = {budget}


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the slow lane")
    fast_lane.register(config)
"""
SUITE = """
import time
import pytest


def test_fast():
    time.sleep(1.0)


@pytest.mark.slow
def test_slow():
    time.sleep(1.0)
"""


def run_suite(tmp_path: Path, budget: float, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "pytest.ini").write_text("[pytest]\ntestpaths = suite\n")
    (tmp_path / "suite").mkdir(exist_ok=True)
    (tmp_path / "suite" / "conftest.py").write_text(textwrap.dedent(CONFTEST.format(tests=str(TESTS), budget=budget)))
    (tmp_path / "suite" / "test_suite.py").write_text(textwrap.dedent(SUITE))
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_ADDOPTS"}  # only these options
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def named_when_over(stdout: str) -> list[str]:
    """The tests the OVER line names: the indented lines after it."""
    after = stdout.split("OVER", 1)[1].splitlines()[1:]
    named = []
    for line in after:
        if not line.startswith("  "):
            break
        named.append(line.split()[-1])
    return named


def test_the_whole_suite_says_when_its_fast_lane_is_over_budget(tmp_path):
    done = run_suite(tmp_path, 0.5)
    assert "2 passed" in done.stdout and done.returncode == 0, done.stdout
    assert 'fast lane (-m "not slow", 1 tests): 1 s' in done.stdout and "OVER" in done.stdout
    # The slow lane's second is not the fast lane's.
    assert named_when_over(done.stdout) == ["suite/test_suite.py::test_fast"], done.stdout


def test_within_budget_it_says_its_time(tmp_path):
    done = run_suite(tmp_path, 30)
    assert done.returncode == 0 and "against a budget of 30 s" in done.stdout and "OVER" not in done.stdout


def test_the_fast_lane_alone_fails_when_over_budget(tmp_path):
    done = run_suite(tmp_path, 0.5, "-m", "not slow")
    assert "1 passed, 1 deselected" in done.stdout and done.returncode == pytest.ExitCode.TESTS_FAILED
    assert "OVER" in done.stdout


def test_a_selection_is_not_judged(tmp_path):
    for args in (("-k", "fast"), ("suite/test_suite.py",), ("-m", "slow")):
        done = run_suite(tmp_path, 0.5, *args)
        assert done.returncode == 0 and "fast lane" not in done.stdout, args
