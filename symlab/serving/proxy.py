"""A class server on every core (``symlab serve``): one page process (``streamlit run serve.py``) per core behind
HAProxy, which keeps each browser on one process by a cookie, checks every process's health, and sends a browser
whose process died to a live one; dead processes are started again.

Why a cookie, not the client's address: a classroom behind one NAT address would all land on one process. Why one
browser stays on one process: Streamlit keeps a session, its uploads (HTTP PUT) and its reconnects in the process
that opened it. A browser moved to another process (its own died) starts a new session there, from its link: every
control is in the URL. The page processes share the result store (the runs directory's SQLite file, or
PostgreSQL), so a result computed through one is served by every other; the first alone computes likely results in
idle time, so that no two compute the same guess.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from symlab.specs.settings import IMPORT_ROOT

HOST_NAME = re.compile(
    r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"
)
PROXY_COOKIE = "symlab_page"  # names the page process a browser stays on
PROCESS_HEADER = "X-Symlab-Page"  # the page process that answered, on every response (for tests and for the log)
HEALTH_PATH = "/_stcore/health"
HEALTH_INTERVAL_MS = 1000  # how often the proxy checks each page process; two failures in a row take it out
RESTART_BACKOFF_SECONDS = (1.0, 2.0, 5.0, 10.0, 30.0)  # a process that keeps dying is started again more slowly
STEADY_SECONDS = 60.0  # a process that lived this long has its back-off forgotten
STOP_GRACE_SECONDS = 10.0
INSTALL_HAPROXY = (
    "HAProxy was not found: install it (Debian, Ubuntu: apt-get install haproxy; macOS: brew install haproxy)"
)


class ProxyMissing(RuntimeError):
    """HAProxy is not installed; the message says how to install it."""


def find_haproxy() -> str:
    """HAProxy's path (on PATH, or Debian's /usr/sbin); :class:`ProxyMissing` saying how to install it."""
    found = shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/usr/local/sbin")
    if found is None:
        raise ProxyMissing(INSTALL_HAPROXY)
    return found


def check_address(address: str) -> str:
    """``address`` if it is an IP address or a host name (it goes into HAProxy's configuration as it is)."""
    try:
        ipaddress.ip_address(address)
        return address
    except ValueError:
        pass
    if not HOST_NAME.fullmatch(address) or not re.search("[A-Za-z]", address):  # "3" is neither
        raise ValueError(f"--address must be an IP address or a host name, not {ascii(address)[:80]}")
    return address


def default_replicas() -> int:
    """One page process per core this process may run on."""
    with contextlib.suppress(AttributeError, OSError):
        return max(len(os.sched_getaffinity(0)), 1)
    return max(os.cpu_count() or 1, 1)


@dataclass(frozen=True)
class PageProcess:
    """A page process's name (its cookie's value) and its port on the loopback interface."""

    name: str
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def page_processes(count: int, first_port: int) -> list[PageProcess]:
    return [PageProcess(f"page{index + 1}", first_port + index) for index in range(count)]


def haproxy_config(address: str, port: int, processes: list[PageProcess]) -> str:
    """HAProxy's configuration: the browser's address in front; behind it, each page process, checked on its health
    path, a browser kept on one by :data:`PROXY_COOKIE`, and sent to a live one (``redispatch``) when its own is
    down or fails to answer. New browsers go to the process with the fewest connections (each open page holds one websocket)."""
    servers = "\n".join(
        f"    server {process.name} 127.0.0.1:{process.port} check cookie {process.name}" for process in processes
    )
    return f"""\
global
    maxconn 4096

defaults
    mode http
    # a request to a process that has just died (refused, or reset before it answered) goes to another at once
    option redispatch 1
    retries 3
    retry-on conn-failure empty-response
    timeout connect 5s
    timeout client 60s
    timeout server 120s
    # an open page's websocket: Streamlit pings it, so an hour without a byte is a browser gone
    timeout tunnel 1h
    timeout http-request 15s
    timeout queue 30s

frontend class
    bind {address}:{port}
    default_backend pages

backend pages
    balance leastconn
    cookie {PROXY_COOKIE} insert indirect nocache httponly
    option httpchk GET {HEALTH_PATH}
    http-check expect status 200
    default-server inter {HEALTH_INTERVAL_MS} fall 2 rise 1
    http-response set-header {PROCESS_HEADER} %[srv_name]
{servers}
"""


def serve_script() -> Path:
    """The app's server script, serve.py: in the checkout the package is imported from, else in the current
    directory (a checkout with the package installed from it)."""
    for root in (IMPORT_ROOT, Path.cwd()):
        if (root / "serve.py").is_file() and (root / "app.py").is_file():
            return root / "serve.py"
    raise FileNotFoundError(
        f"serve.py was not found beside the symlab package ({IMPORT_ROOT}) or here: symlab serve runs the app from "
        "a checkout (run it there, or pip install -e . from it)"
    )


def page_command(script: Path, process: PageProcess) -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(script),
        f"--server.port={process.port}",
        "--server.address=127.0.0.1",
        "--server.headless=true",
    ]


def page_environment(index: int, cookie_secret: str, environ=os.environ) -> dict[str, str]:
    """A page process's environment: one cookie secret for all (a browser moved to another process keeps its
    cookies valid), and the idle-time guesses in the first process only, unless the host chose."""
    env = {**environ, "STREAMLIT_SERVER_COOKIE_SECRET": cookie_secret}
    if index > 0 and "SYMLAB_IDLE_WORKERS" not in environ:
        env["SYMLAB_IDLE_WORKERS"] = "0"
    return env


def healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url + HEALTH_PATH, timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


@dataclass
class _Child:
    process: PageProcess | None  # None: the proxy
    command: list[str]
    env: dict
    popen: subprocess.Popen | None = None
    started: float = 0.0
    deaths: int = 0  # in a row, each after the last within STEADY_SECONDS of its start
    restart_at: float | None = None

    @property
    def running(self) -> subprocess.Popen:
        """Its process, once launched."""
        if self.popen is None:
            raise RuntimeError(f"{self.name} has not been started")
        return self.popen

    @property
    def page(self) -> PageProcess:
        """The page process it is (not the proxy)."""
        if self.process is None:
            raise RuntimeError("the proxy is not a page process")
        return self.process

    @property
    def name(self) -> str:
        return self.process.name if self.process else "proxy"


@dataclass
class ClassServer:
    """``replicas`` page processes from ``first_page_port`` on, and HAProxy on ``address``:``port`` in front.
    :meth:`start`, then :meth:`supervise` until a signal, then :meth:`stop`. ``say`` reports each event (a line)."""

    replicas: int
    port: int = 8501
    address: str = "0.0.0.0"
    first_page_port: int = 8601
    environ: dict = field(default_factory=lambda: dict(os.environ))
    say: Callable[[str], None] = print
    log_dir: Path | None = None
    script: Path | None = None  # the page processes' script (default: serve.py; benchmarks count its runs)
    preexec_fn: Callable[[], None] | None = None  # run in each child before it starts (a benchmark's CPU quota)

    def __post_init__(self):
        if self.replicas < 1:
            raise ValueError(f"--replicas must be at least 1 (got {self.replicas})")
        check_address(self.address)
        if not 1 <= self.first_page_port <= 65536 - self.replicas or not 1 <= self.port <= 65535:
            raise ValueError(
                f"the ports must lie in 1-65535: the proxy's {self.port}, the page processes' {self.first_page_port}"
                f"-{self.first_page_port + self.replicas - 1}"
            )
        self.haproxy = find_haproxy()
        self.root = serve_script().parent  # the app's checkout: Streamlit reads .streamlit/config.toml there
        self.script = Path(self.script) if self.script else self.root / "serve.py"
        self.processes = page_processes(self.replicas, self.first_page_port)
        if self.port in {process.port for process in self.processes}:
            raise ValueError(f"the page processes' ports {self.first_page_port}… overlap the proxy's port {self.port}")
        self.workdir = Path(tempfile.mkdtemp(prefix="symlab-serve-"))
        self.config_path = self.workdir / "haproxy.cfg"
        self.config_path.write_text(haproxy_config(self.address, self.port, self.processes))
        self._check_config()
        secret = secrets.token_hex(32)
        self.children = [
            _Child(process, page_command(self.script, process), page_environment(index, secret, self.environ))
            for index, process in enumerate(self.processes)
        ]
        self.children.append(_Child(None, [self.haproxy, "-db", "-f", str(self.config_path)], dict(self.environ)))
        self.restarts = 0

    @property
    def url(self) -> str:
        shown = "127.0.0.1" if self.address in ("0.0.0.0", "::", "") else self.address
        return f"http://{shown}:{self.port}"

    def _check_config(self) -> None:
        checked = subprocess.run(
            [self.haproxy, "-c", "-q", "-f", str(self.config_path)], capture_output=True, text=True
        )
        if checked.returncode != 0:
            raise RuntimeError(f"HAProxy refused its configuration: {(checked.stderr or checked.stdout).strip()}")

    def _launch(self, child: _Child) -> None:
        log: int | IO[bytes] = subprocess.DEVNULL
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            log = open(self.log_dir / f"{child.name}.log", "ab")  # noqa: SIM115 (the child holds it)
        try:
            # Its own process group: a Ctrl-C in the terminal reaches this supervisor, which stops each in turn.
            child.popen = subprocess.Popen(
                child.command,
                env=child.env,
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self.preexec_fn,
            )
        finally:
            if not isinstance(log, int):
                log.close()
        child.started, child.restart_at = time.monotonic(), None

    def start(self, ready_timeout: float = 180.0) -> None:
        """Start the page processes, wait until each answers its health check, then open the proxy."""
        for child in self.children[:-1]:
            self._launch(child)
            self.say(f"{child.name}: 127.0.0.1:{child.page.port}, pid {child.running.pid}")
        deadline = time.monotonic() + ready_timeout
        waiting = list(self.children[:-1])
        while waiting:
            for child in list(waiting):
                if child.running.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"{child.name} exited with code {child.running.returncode} as it started")
                if healthy(child.page.url, timeout=1.0):
                    waiting.remove(child)
            if waiting and time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{', '.join(c.name for c in waiting)} did not answer within {ready_timeout:.0f} s")
            time.sleep(0.2)
        self._launch(self.children[-1])
        self.say(f"proxy: HAProxy on {self.address}:{self.port}, pid {self.children[-1].running.pid}")

    def check_once(self) -> None:
        """Start again each process that has exited, after its back-off."""
        now = time.monotonic()
        for child in self.children:
            if child.popen is None or child.popen.poll() is None:
                continue
            if child.restart_at is None:
                lived = now - child.started
                child.deaths = 1 if lived >= STEADY_SECONDS else child.deaths + 1
                delay = RESTART_BACKOFF_SECONDS[min(child.deaths, len(RESTART_BACKOFF_SECONDS)) - 1]
                child.restart_at = now + delay
                self.say(f"{child.name}: exited with code {child.popen.returncode}; starting again in {delay:.0f} s")
            elif now >= child.restart_at:
                self._launch(child)
                self.restarts += 1
                self.say(f"{child.name}: started again, pid {child.popen.pid}")

    def supervise(self, stop: threading.Event, poll_seconds: float = 0.5) -> None:
        while not stop.wait(poll_seconds):
            self.check_once()

    def stop(self) -> None:
        """The proxy first (no new request reaches a stopping process), then the page processes, each given
        :data:`STOP_GRACE_SECONDS` to end its sessions and workers."""
        for child in (self.children[-1], *self.children[:-1]):
            if child.popen is not None and child.popen.poll() is None:
                child.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for child in self.children:
            if child.popen is None:
                continue
            try:
                child.popen.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.popen.pid, signal.SIGKILL)
                child.popen.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def pids(self) -> dict[str, int]:
        return {child.name: child.popen.pid for child in self.children if child.popen and child.popen.poll() is None}
