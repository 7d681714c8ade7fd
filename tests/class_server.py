"""A class server for the tests, as a host starts it: ``python -m symlab serve --replicas N`` on free ports, HAProxy in
front (tests/prerequisites.py installs it), its output in a log the tests read the page processes' pids from."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from symlab.serving import proxy

ROOT = Path(__file__).resolve().parents[1]
STARTED = re.compile(r"symlab serve: (page\d+): (?:127\.0\.0\.1:\d+, pid|started again, pid) (\d+)")


def free_port_block(count: int) -> int:
    """The first of ``count`` consecutive ports that are free now."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        sockets = []
        try:
            for port in range(first, first + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError(f"no {count} consecutive free ports")


@dataclass
class ClassServerProcess:
    url: str
    process: subprocess.Popen
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def pids(self) -> dict[str, int]:
        """Each page process's newest pid, as the server reported it."""
        return {name: int(pid) for name, pid in STARTED.findall(self.log())}

    def wait_for_line(self, text: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log():
            assert self.process.poll() is None, f"symlab serve exited:\n{self.log()[-3000:]}"
            assert time.monotonic() < deadline, f"no {text!r} within {timeout:g} s:\n{self.log()[-3000:]}"
            time.sleep(0.2)


@contextlib.contextmanager
def class_server(replicas: int = 2, env: dict | None = None, runs_dir: Path | None = None):
    """``symlab serve --replicas replicas`` on free ports; yields a :class:`ClassServerProcess` once it serves."""
    first = free_port_block(replicas + 1)
    log_path = Path(tempfile.mkstemp(prefix="symlab-serve-", suffix=".log")[1])
    runs_dir = runs_dir or Path(tempfile.mkdtemp(prefix="symlab-serve-runs-"))
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "symlab",
                "serve",
                f"--replicas={replicas}",
                f"--port={first}",
                "--address=127.0.0.1",
                f"--first-page-port={first + 1}",
            ],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "SYMLAB_RUNS_DIR": str(runs_dir), **(env or {})},
        )
    server = ClassServerProcess(f"http://127.0.0.1:{first}", process, log_path)
    try:
        server.wait_for_line("symlab serve: serving", timeout=180)
        deadline = time.monotonic() + 30
        while not proxy.healthy(server.url):  # the proxy's own first health checks
            assert time.monotonic() < deadline, f"the proxy did not answer:\n{server.log()[-3000:]}"
            time.sleep(0.2)
        yield server
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
