"""Resident memory of a process and of everything it started, from /proc: what the tests and benchmarks hold a
server's memory to."""

from __future__ import annotations

import threading
import time
from pathlib import Path


def descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        try:
            children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
        except OSError:
            continue
        found += map(int, children)
        frontier += map(int, children)
    return found


def rss_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


class MemorySampler(threading.Thread):
    """Peak VmRSS of the server and of the server with everything it started, since the last :meth:`reset`."""

    def __init__(self, pid: int, interval: float = 0.1):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.peak_server = self.peak_all = 0.0
        self.stopped = threading.Event()

    def now(self) -> tuple[float, float]:
        server = rss_mib(self.pid)
        return server, server + sum(rss_mib(child) for child in descendants(self.pid))

    def reset(self) -> None:
        self.peak_server, self.peak_all = self.now()

    def run(self) -> None:
        while not self.stopped.is_set():
            server, everything = self.now()
            self.peak_server, self.peak_all = max(self.peak_server, server), max(self.peak_all, everything)
            time.sleep(self.interval)
