"""Analyses that misbehave, run by tests/test_uploads.py in the processes of symlab.serving.uploads (which import
them by name: module-level functions)."""

import os
import time

import numpy as np


def allocate(files, size: int):
    return np.ones(size // 8).sum()


def spin(files):
    while True:
        pass


def sleep(files, seconds: float):
    time.sleep(seconds)


def sleep_and_time(files, seconds: float) -> list:
    started = time.time()
    time.sleep(seconds)
    return [started, time.time()]


def exit_with(files, code: int):
    os._exit(code)


def not_data(files):
    return object()


def spin_for(files, seconds: float) -> float:
    """Busy for ``seconds`` of wall time; the CPU time it got."""
    started, cpu = time.monotonic(), time.process_time()
    while time.monotonic() - started < seconds:
        pass
    return time.process_time() - cpu


def loaded_modules(files, names: list) -> list:
    """Those of ``names`` this process had imported before it was asked anything."""
    import sys

    return [name for name in names if name in sys.modules]
