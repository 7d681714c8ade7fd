"""Module-level functions for tests/test_jobs.py: worker processes import a task's function by name."""

import os
import time


def square(x, progress=None):
    return x * x


def counted(steps, seconds, progress=None):
    """Reports each of ``steps`` steps, ``seconds`` apart; returns the worker's pid."""
    for step in range(1, steps + 1):
        time.sleep(seconds)
        progress(step, steps, f"step {step}", {"step": step})
    return os.getpid()


def marked(path, progress=None):
    """Writes ``path``: a trace that this task ran."""
    with open(path, "w") as f:
        f.write("ran")
    return path


def failing(progress=None):
    raise ValueError("no such luck")


def dying(progress=None):
    os._exit(3)


def niceness(progress=None):
    return os.nice(0)


def scheduling(progress=None):
    """The worker's scheduling class and niceness."""
    return os.sched_getscheduler(0), os.nice(0)
