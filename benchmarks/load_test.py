"""Load test: N students at once against one SymLab server, as protocol-level sessions or in Chromium.

    python benchmarks/load_test.py --protocol --sessions 30 --seconds 60 --hosted --json   # the server alone
    python benchmarks/load_test.py --protocol --sessions 30,100 --seconds 60 --hosted        # the class and the demo

Protocol mode (--protocol): one process holds every session, each speaking Streamlit's own websocket
protocol (benchmarks/streamlit_protocol.py), so the measurement is the server's, not the browsers'
(in a classroom the browsers are the students' own). It starts its own server on localhost (never
--url), with at most 300 sessions for at most 900 s. Each session is a student: it opens a lab
(spread over every lab), then every 2-5 s one action: nudges a slider or number box (50 %), picks a
preset (15 %), presses Play and lets the browser's player play ~--play-seconds before Pause (20 %),
or opens another page (15 %). Latency: from the message sent to the end of the run it caused
(p50 / p95 / max over opens, widget moves, presets and buttons; fragment ticks apart); requests
that waited for a shared computation (training in the worker processes) are counted apart too.
A computation a request waits for ends the request's run at once with a waiting panel; the time from the
request to the page showing its result is measured apart ("result"), and counts as a timeout error past
--timeout. --replicas N starts N servers on one runs directory (they share its result store), each session
staying with one, as behind a sticky proxy. Errors by kind: exception (an exception element in a delta, or
a script that failed to compile), disconnect, timeout (no end of run, or no result, within --timeout),
page_not_found. The server's RSS (peak) and
CPU (cores busy) come from /proc. It ends with one JSON line: sessions, errors, p50_ms, p95_ms,
max_ms, server_rss_peak_mib, server_cpu_cores (the last phase's), rates, and every phase under "phases".
Targets: N = 30: 0 errors, p95 <= 1 s; N = 100 (with --replicas 2): 0 errors, p95 <= 2 s.

Per student: the servers are benchmarks/counted_serve.py (serve.py writing down each script run's CPU), and
each run counts to the request its session sent last before it began, so each phase has "page_cpu": CPU-ms
per request by kind (open, widget, preset, button, tick, upload) and ticks by page, beside
"page_cores_per_student" (the page processes' cores over N). "rates" are the machine's
(bench_interactions.py's three, measured here first), to compare machines. The class arrives once the
servers' page processes are quiet (their warm-up done: "settled_after_s"); --no-settle sends it at once.
--players K: K of the N sessions keep a player playing throughout (toy, modes, align, symmetry in turn), and
the latencies are the others'; --players-still: they sit on those pages (the baseline to compare with).

Chromium mode (the default) checks what a browser really shows, for small N:

    python benchmarks/load_test.py --sessions 1,10,30 --seconds 120             # the full measurement
    python benchmarks/load_test.py --sessions 1,10,30 --seconds 120 --hosted    # server with SYMLAB_HOSTED=1
    python benchmarks/load_test.py --sessions 1,3 --seconds 30                   # a quick check
    python benchmarks/load_test.py --url http://127.0.0.1:8501 --sessions 10     # an already running server
    add --env KEY=VALUE (repeatable) for more server settings, --json [PATH] for machine-readable results.

What it does. First, on a fresh server of its own, one student visits every page (Home, Mode
interpolation with a few slider moves, Tractable BNN playing a few seconds, MNIST with its Results
tab; no run is launched): the server's peak memory for that tour is what one session needs, the
figure to hold against a small host such as Streamlit Community Cloud. Then, on a second fresh
server, one phase per N in --sessions, one after the other: N browser contexts of one headless
Chromium (Playwright's async API, all in one thread), started --stagger seconds apart, each active
for --seconds. Each simulated student opens /modes and moves the α slider with ArrowRight/ArrowLeft,
pausing 0.5-2 s between moves; after its first block of moves (and later with probability
--toy-prob after each block of 10-25 s) it goes to /toy through the sidebar, presses Play, watches
live training for 4-8 s, presses Pause and goes back to /modes.

How it measures, inside the page (performance.now(), one clock, no Python scheduling in between):
  * input -> chart: a capturing keydown listener stamps the key press; a requestAnimationFrame
    poll (wait_for_function, polling="raf") waits until the SVG path of the first chart's reverse-KL
    line differs from its value before the press, and returns the elapsed time. The chart is drawn
    only from the figure the server sends after rerunning the script, so this spans the whole round
    trip: the slider's own client-side delay, the websocket message, the script run, the delta, and
    Vega's redraw. The time from the key press to the first websocket message sent (the client's
    share) is reported too ("key->send").
  * Play -> first update: the same, from the click on Play to the first change of any line of the
    four live charts (Vega-Lite, drawn as SVG).
  * live training rate: Adam steps per second from the progress text ("Adam step N / 4000") between
    the first update and 4-8 s later.
  * errors, by kind: exception (an stException element on the page), pageerror (an uncaught
    JavaScript error), console (console.error), timeout (an update or a page that did not arrive in
    --timeout / --nav-timeout seconds; the message says what the page showed instead, e.g. a
    "Please wait..." that never went away), http (a response >= 400 or a failed request), websocket (the
    app's websocket closed or failed while the session was on), connection (Streamlit's "Connecting"
    status appeared after the page had loaded: the app lost its server), external (a request to
    another host, e.g. an icon from fonts.gstatic.com: the app must work on a classroom network
    without internet, as tests/conftest.py also checks). 404s of Streamlit's base-path probe
    (/modes/_stcore/health, streamlit#7074) are ignored. Reported apart, not counted against the
    targets: harness (the script's own trouble, e.g. the slider lost focus).
  * memory: a thread samples VmRSS (/proc/PID/status) of the streamlit process and, apart, the sum
    over its descendants (MNIST workers) every 0.5 s: the peak per phase; VmHWM at the end. It also
    samples CPU time (cores busy) of the server, of this script's Chromium, and of the whole machine.
    With --url the server's pid is found from its listening port (or give --server-pid).

Targets (the hosting issue): no errors at N = 30; p95 input -> chart <= 1 s at N = 10, on a 2-core
machine. Ratios are against N = 1 (or the first phase) measured in the same run. The browser runs
on the same machine as the server: with 30 Chromium renderers on 2 cores part of the latency is the
browser's own work, so compare the server's and the browser's CPU columns before blaming the
server. To separate them, --server-cpus 0 --browser-cpus 1 pins each to its own cores (a
different question: a 1-core server), or run the browser on another machine with --url (then
without memory figures). The server's log goes to --server-log (default: a temporary file);
tracebacks in it are summarised at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import functools
import itertools
import json
import math
import os
import random
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import websockets  # noqa: E402
from conftest import CHROMIUM, CHROMIUM_ARGS, app_process  # noqa: E402
from playwright.async_api import async_playwright, expect  # noqa: E402
from streamlit_protocol import XSRF_TOKEN, Session  # noqa: E402

from symlab.labs import LABS  # noqa: E402
from symlab.runs.device import measured_rates  # noqa: E402
from symlab.specs.tasks import SLOWEST_MACHINE  # noqa: E402

MiB = 1024 * 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1
MODES, TOY, MNIST, HOME = "Mode interpolation", "Tractable BNN", "MNIST", "Home"
PAGE_TITLES = {HOME: "SymLab", MODES: "Mode interpolation", TOY: "Tractable BNN", MNIST: "MNIST"}
MODES_CHARTS, TOY_CHARTS = 8, 4  # charts on each page once drawn
APP_ERRORS = ("exception", "pageerror", "console", "timeout", "http", "websocket", "connection", "external")
TARGET_P95_MS, TARGET_P95_AT, NO_ERRORS_AT = 1000.0, 10, 30

# Installed in every page before the app's own scripts: input stamps, websocket sends, the
# connection-status watch, and the chart signatures the waits compare.
INIT_JS = r"""
(() => {
  if (window.__lt) return;
  const s = window.__lt = {armed: false, t0: null, firstSend: null, before: null, conn: false, connArmed: false, sig: {}};
  const stamp = () => { if (s.armed) { s.armed = false; s.t0 = performance.now(); } };
  window.addEventListener('keydown', stamp, true);
  window.addEventListener('click', stamp, true);
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (data) {
    if (s.t0 !== null && s.firstSend === null) s.firstSend = performance.now();
    return send.call(this, data);
  };
  s.sig.modes = () => {  // the first chart (Vega-Lite, "Along e₁"): its lines, q's among them
    const chart = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].find(c => !c.closest('[data-stale="true"]'));
    const lines = chart ? [...chart.querySelectorAll('.role-mark.mark-line path')].map(p => p.getAttribute('d')) : [];
    return lines.length ? lines.join('|') : null;
  };
  s.sig.toy = () => {  // the live charts are Vega-Lite (SVG), updated in place
    const charts = [...document.querySelectorAll('[data-testid="stVegaLiteChart"]')].filter(c => !c.closest('[data-stale="true"]'));
    if (charts.length < 4) return null;
    return charts.map(c => [...c.querySelectorAll('.role-mark.mark-line path, .role-mark.mark-area path')]
      .map(p => p.getAttribute('d')).join('|')).join('||');
  };
  s.progress = () => {
    const bar = document.querySelector('[data-testid="stProgress"], .symlab-waiting');
    const m = bar && /Adam step (\d+) \/ (\d+)/.exec(bar.innerText);
    return m ? {step: Number(m[1]), total: Number(m[2]), now: performance.now()} : null;
  };
  setInterval(() => {
    const el = document.querySelector('[data-testid="stConnectionStatus"]');
    if (el && !s.conn && s.connArmed && window.__ltReport)
      window.__ltReport('connection', ('status: ' + (el.innerText || '').trim()).slice(0, 200));
    s.conn = !!el;
  }, 250);
})();
"""
# Before an input: focus the α slider (the first on /modes; an <input type=range> inside it), remember the chart, arm the input stamp.
ARM_JS = """name => {
  const s = window.__lt, slider = document.querySelector('[data-testid="stSlider"] input[type="range"]');
  if (name === 'modes' && slider) slider.focus();
  s.before = s.sig[name](); s.t0 = null; s.firstSend = null; s.armed = true;
  return slider ? Number(slider.value) : null;
}"""
CHANGED_JS = """name => {
  const s = window.__lt;
  if (s.t0 === null) return false;
  const d = s.sig[name]();
  if (d === null || d === s.before) return false;
  const now = performance.now(), progress = s.progress();
  return {ms: now - s.t0, send: s.firstSend === null ? null : s.firstSend - s.t0, now,
          step: progress ? progress.step : null};
}"""
READY_JS = """([title, charts]) => {
  const h = document.querySelector('h1');
  if (!h || !h.innerText.includes(title)) return false;
  if (document.querySelector('[data-testid="stStatusWidget"]')) return false;
  if (document.querySelector('[data-stale="true"]')) return false;
  return document.querySelectorAll('[data-testid="stVegaLiteChart"] svg.marks').length >= charts;
}"""
# What a page that did not come shows instead: Streamlit's connection status, its "Please wait..."
# placeholder, a script still running.
STATE_JS = """() => {
  const conn = document.querySelector('[data-testid="stConnectionStatus"]');
  const h = document.querySelector('h1');
  return [conn ? 'connection status: ' + conn.innerText.trim() : '',
          document.body.innerText.includes('Please wait') ? '"Please wait..." shown' : '',
          document.querySelector('[data-testid="stStatusWidget"]') ? 'script running' : '',
          'title: ' + (h ? h.innerText.trim().slice(0, 40) : 'none')].filter(Boolean).join('; ');
}"""
EXCEPTIONS_JS = (
    "() => [...document.querySelectorAll('[data-testid=\"stException\"]')].map(e => e.innerText.slice(0, 300))"
)


# ------------------------------------------------------------------------------------------ server


ALL_CPUS = sorted(os.sched_getaffinity(0))


def cpu_list(text: str) -> list[int]:
    """ "0", "0,1" or "0-3" -> the CPUs' numbers."""
    cpus = set()
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return sorted(cpus)


@contextlib.contextmanager
def app_server(extra_env: dict, log_path: Path, cpus: list[int] | None = None):
    """tests/conftest.py's app server with its output in ``log_path`` and, with ``cpus``, pinned to
    those CPUs; yields (url, pid)."""
    with app_servers(1, extra_env, log_path, cpus) as servers:
        yield servers[0]


@contextlib.contextmanager
def app_servers(
    count: int,
    extra_env: dict,
    log_path: Path,
    cpus: list[int] | None = None,
    script: str = "serve.py",
    quota: CpuQuota | None = None,
):
    """``count`` app servers (``script``: serve.py or another entry point) on one runs directory (replicas: they
    share its result store), under ``quota`` if given; yields their (url, pid) pairs."""
    runs_dir = tempfile.mkdtemp(prefix="symlab-load-runs-")
    with open(log_path, "ab") as log:
        log.write(f"\n===== {count} server(s), extra env {extra_env} =====\n".encode())
    try:
        with contextlib.ExitStack() as stack:
            # Not this process's affinity, which --browser-cpus may have narrowed.
            servers = [
                stack.enter_context(
                    app_process(
                        {"SYMLAB_RUNS_DIR": runs_dir, **extra_env},
                        log_path,
                        cpus or ALL_CPUS,
                        script=script,
                        preexec=quota.join if quota else None,
                    )
                )
                for _ in range(count)
            ]
            yield [(url, process.pid) for url, process in servers]
    finally:
        shutil.rmtree(runs_dir, ignore_errors=True)


XSRF_COOKIE = "_streamlit_xsrf"  # what tells a browser apart on the server (views/common/browser.py)
# The slowest machine the latency targets hold on (symlab.specs.tasks.SLOWEST_MACHINE), in the benchmarks' units.
SLOWEST_RATES = {name: SLOWEST_MACHINE.in_units()[name] for name in ("matmul_gflops", "elements_g_per_s")}
CPU_ROOT = Path("/sys/fs/cgroup/cpu")  # cgroup v1's CPU controller (root)
CPU_PERIOD_US = 100_000


RATE_NAMES = ("matmul_gflops", "elements_g_per_s")


def slowest_machine_cores(rates: dict, cores: int = NCPU, by: tuple[str, ...] = RATE_NAMES) -> tuple[float, float]:
    """The cores the servers may use here to run as fast as ``cores`` of the slowest machine: each of this
    machine's rates named in ``by`` against the slowest's, the largest slow-down of them (page runs, a few thousand
    numbers at a time, followed the element rate where it was 2.5x lower than another machine's: 2.6x slower; on a
    machine whose element rate is 4-5x the slowest's and matrix products 1.6-1.9x, they followed the products:
    ``by=("matmul_gflops",)``). (cores, factor)."""
    factor = min(*(SLOWEST_RATES[name] / rates[name] for name in by), 1.0)
    return cores * factor, factor


class CpuQuota:
    """A cgroup (v1, as root) holding the servers and everything they start to ``cores`` CPU-seconds a second."""

    def __init__(self, cores: float):
        self.cores = cores
        self.path = CPU_ROOT / f"symlab-load-{os.getpid()}"
        self.path.mkdir(exist_ok=True)
        (self.path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
        (self.path / "cpu.cfs_quota_us").write_text(str(max(int(cores * CPU_PERIOD_US), 1000)))

    def join(self) -> None:
        """In a child before it runs its program: it and what it forks are held to the quota."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def throttled_s(self) -> float:
        for line in (self.path / "cpu.stat").read_text().splitlines():
            if line.startswith("throttled_time"):
                return int(line.split()[1]) / 1e9
        return 0.0

    def remove(self) -> None:
        for pid in (self.path / "cgroup.procs").read_text().split():  # leftovers back to the root, then remove
            with contextlib.suppress(OSError):
                (CPU_ROOT / "cgroup.procs").write_text(pid)
        with contextlib.suppress(OSError):
            self.path.rmdir()


@contextlib.contextmanager
def proxied_servers(count: int, extra_env: dict, log_path: Path, quota: CpuQuota | None, runs_dir: Path | None = None):
    """``symlab serve``'s class server (symlab.serving.proxy): ``count`` page processes (counted_serve.py) behind
    HAProxy, all under ``quota``, on ``runs_dir`` (kept; default: a new one, removed after); yields (the proxy's
    URL, the ClassServer)."""
    from class_server import free_port_block

    from symlab.serving.proxy import ClassServer

    own_runs_dir = runs_dir is None
    runs_dir = tempfile.mkdtemp(prefix="symlab-load-runs-") if own_runs_dir else str(runs_dir)
    first = free_port_block(count + 1)
    log_dir = Path(tempfile.mkdtemp(prefix="symlab-load-logs-"))
    server = ClassServer(
        count,
        port=first,
        address="127.0.0.1",
        first_page_port=first + 1,
        environ={**os.environ, "SYMLAB_RUNS_DIR": runs_dir, **extra_env},
        say=lambda line: print(f"  class server: {line}", file=sys.stderr, flush=True),
        log_dir=log_dir,
        script=Path(__file__).resolve().parents[1] / COUNTED_SERVER,
        preexec_fn=quota.join if quota else None,
    )
    stop = threading.Event()
    supervisor = threading.Thread(target=server.supervise, args=(stop,), daemon=True)
    try:
        server.start()
        supervisor.start()
        yield server.url, server
    finally:
        stop.set()
        server.stop()
        with open(log_path, "ab") as log:
            for path in sorted(log_dir.glob("*.log")):
                log.write(f"\n===== {path.stem} =====\n".encode() + path.read_bytes())
        shutil.rmtree(log_dir, ignore_errors=True)
        if own_runs_dir:
            shutil.rmtree(runs_dir, ignore_errors=True)


def pid_listening_on(port: int) -> int | None:
    """The pid of the process listening on ``port`` (this user's processes only)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as f:
            for line in list(f)[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        return int(pid)
    return None


# ------------------------------------------------------------------------------------ /proc sampling


def status_kib(pid: int, *names: str) -> dict:
    """Fields of /proc/PID/status in KiB (VmRSS, VmHWM, ...); {} once the process is gone."""
    values = {}
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in names:
                values[key] = int(rest.split()[0])
    return values


def process_table() -> dict[int, tuple[int, int]]:
    """{pid: (ppid, CPU ticks)} for every readable process."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{name}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
            table[int(name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return table


def descendants(pid: int, table: dict) -> set[int]:
    children: dict[int, list[int]] = {}
    for child, (parent, _) in table.items():
        children.setdefault(parent, []).append(child)
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def machine_ticks() -> tuple[int, int]:
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


class Sampler(threading.Thread):
    """Every ``interval`` s: the server's VmRSS, its descendants' summed VmRSS, and the CPU ticks of
    the server tree, of this script's other descendants (Chromium) and of the machine."""

    def __init__(self, server_pid: int | list[int] | None, interval: float = 0.5):
        super().__init__(daemon=True)
        self.server_pids = (
            [] if server_pid is None else [server_pid] if isinstance(server_pid, int) else list(server_pid)
        )
        self.server_pid, self.interval = (self.server_pids or [None])[0], interval
        self.samples: list[dict] = []
        self.halt = threading.Event()

    def sample(self) -> dict:
        """Summed over the servers (replicas): RSS, their descendants' RSS, CPU ticks."""
        table = process_table()
        mains = set(self.server_pids)
        server_tree = set().union(*(descendants(pid, table) for pid in mains)) - mains
        mine = descendants(os.getpid(), table) - server_tree - mains
        rss = sum(status_kib(pid, "VmRSS").get("VmRSS", 0) for pid in mains) if mains else None
        children_rss = sum(status_kib(pid, "VmRSS").get("VmRSS", 0) for pid in server_tree)
        server_ticks = {pid: table[pid][1] for pid in server_tree | mains if pid in table}
        main_ticks = {pid: ticks for pid, ticks in server_ticks.items() if pid in mains}
        return dict(
            t=time.monotonic(),
            rss=rss,
            children_rss=children_rss,
            children=len(server_tree),
            server_ticks=server_ticks,
            main_ticks=main_ticks,
            browser_ticks={pid: table[pid][1] for pid in mine if pid in table},
            machine=machine_ticks(),
        )

    def run(self):
        while not self.halt.is_set():
            with contextlib.suppress(Exception):
                self.samples.append(self.sample())
            self.halt.wait(self.interval)

    def stop(self):
        self.halt.set()
        self.join()

    def window(self, start: float, end: float) -> dict:
        """Peak memory and CPU (cores busy) between two time.monotonic() instants."""
        inside = [s for s in self.samples if start <= s["t"] <= end]
        if len(inside) < 2:
            return {}

        def cores(key):
            first, last = {}, {}
            for s in inside:
                for pid, ticks in s[key].items():
                    first.setdefault(pid, ticks)
                    last[pid] = ticks
            return sum(last[p] - first[p] for p in last) / CLK_TCK / (inside[-1]["t"] - inside[0]["t"])

        rss = [s["rss"] for s in inside if s["rss"] is not None]
        (busy0, total0), (busy1, total1) = inside[0]["machine"], inside[-1]["machine"]
        return dict(
            rss_start_mib=rss[0] / 1024 if rss else None,
            rss_peak_mib=max(rss) / 1024 if rss else None,
            children_rss_peak_mib=max(s["children_rss"] for s in inside) / 1024,
            children_peak=max(s["children"] for s in inside),
            server_cpu_cores=cores("server_ticks"),
            server_main_cpu_cores=cores("main_ticks"),
            browser_cpu_cores=cores("browser_ticks"),
            machine_cpu_cores=(busy1 - busy0) / max(total1 - total0, 1) * NCPU,
        )


# ------------------------------------------------------------------------------------------ students


class Student:
    """One browser context: a student with their own Streamlit session."""

    def __init__(self, browser, url: str, args, rng: random.Random, name: str):
        self.browser, self.url, self.args, self.rng, self.name = browser, url, args, rng, name
        self.timeout_ms, self.nav_timeout_ms = args.timeout * 1000, args.nav_timeout * 1000
        self.latencies: list[float] = []  # key press -> chart redrawn, ms
        self.sends: list[float] = []  # key press -> first websocket message, ms
        self.play_ms: list[float] = []  # Play -> first chart update, ms
        self.steps_per_s: list[float] = []
        self.nav_ms: list[float] = []  # sidebar link -> page drawn, ms
        self.load_ms: list[float] = []  # first page load, ms
        self.errors: Counter = Counter()
        self.messages: dict[str, list[str]] = {}
        self.seen_exceptions: set = set()
        self.visit = 0
        self.quiet = True  # websocket closes are expected (no page yet, reloads, closing)
        self.context = self.page = None

    def error(self, kind: str, message: str):
        self.errors[kind] += 1
        kept = self.messages.setdefault(kind, [])
        message = message[:400]
        if len(kept) < 5 and message not in kept:  # a few distinct messages of each kind
            kept.append(message)

    # -- set-up and hooks

    async def open(self, path: str, page_name: str, charts: int = 0):
        self.context = await self.browser.new_context(viewport={"width": 1400, "height": 1000})
        await self.context.add_init_script(INIT_JS)
        await self.context.expose_binding("__ltReport", lambda source, kind, message: self.error(kind, message))
        page = self.page = await self.context.new_page()
        page.set_default_timeout(max(self.nav_timeout_ms, self.timeout_ms))
        page.on("pageerror", lambda exc: self.error("pageerror", str(exc)))
        page.on("console", self.on_console)
        page.on("request", self.on_request)
        page.on("response", self.on_response)
        page.on("requestfailed", self.on_request_failed)
        page.on("websocket", self.on_websocket)
        start = time.monotonic()
        await page.goto(self.url + path, wait_until="domcontentloaded", timeout=self.nav_timeout_ms)
        await self.wait_ready(page_name, charts)
        self.load_ms.append((time.monotonic() - start) * 1000)
        await self.armed_connection_watch()

    async def armed_connection_watch(self):
        self.quiet = False
        await self.page.evaluate("() => { window.__lt.connArmed = true; }")

    def source(self, url: str) -> str | None:
        """Whose a resource is: None for the app's, "external" for another host's (an error of its own:
        the app must work on a classroom network without internet, as tests/conftest.py checks),
        "probe" for the frontend's base-path probe (opened at /modes it first asks
        /modes/_stcore/health and /modes/_stcore/host-config, which 404 by design: streamlit#7074)."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss"):
            return None
        if not url.startswith(self.url + "/"):
            return "external"
        if parts.path.endswith(("/_stcore/health", "/_stcore/host-config")) and parts.path.count("/") > 2:
            return "probe"
        return None

    def on_request(self, request):
        if self.source(request.url) == "external":
            self.error("external", f"{request.method} {request.url}")

    def on_console(self, message):
        if message.type == "error" and self.source((message.location or {}).get("url", "")) is None:
            self.error("console", message.text)  # (failures of external requests are counted once, above)

    def on_response(self, response):
        if response.status >= 400 and self.source(response.url) is None:
            self.error("http", f"{response.status} {response.url}")

    def on_request_failed(self, request):
        failure = request.failure or ""
        # ERR_ABORTED: cancelled by a navigation or by closing the page, not the server's doing.
        if "ERR_ABORTED" not in failure and self.source(request.url) is None:
            self.error("http", f"{failure} {request.url}")

    def on_websocket(self, websocket):
        def closed(*_):
            if not self.quiet:
                self.error("websocket", f"closed: {websocket.url}")

        websocket.on("close", closed)
        websocket.on("socketerror", lambda error: None if self.quiet else self.error("websocket", f"error: {error}"))

    async def close(self):
        self.quiet = True
        if self.context is not None:
            with contextlib.suppress(Exception):
                await self.context.close()

    # -- page helpers

    async def wait_ready(self, page_name: str, charts: int = 0, timeout_ms: float | None = None):
        await self.page.wait_for_function(
            READY_JS, arg=[PAGE_TITLES[page_name], charts], polling=100, timeout=timeout_ms or self.nav_timeout_ms
        )
        self.visit += 1

    async def state(self) -> str:
        try:
            return await self.page.evaluate(STATE_JS)
        except Exception as exc:  # noqa: BLE001
            return f"page unreadable: {exc!s:.80}"

    def failure(self, exc: Exception, what: str) -> tuple[str, str]:
        return ("timeout" if "Timeout" in type(exc).__name__ else "harness"), f"{what}: {exc!s:.160}"

    async def check_exceptions(self):
        with contextlib.suppress(Exception):
            for text in await self.page.evaluate(EXCEPTIONS_JS):
                if (self.visit, text) not in self.seen_exceptions:
                    self.seen_exceptions.add((self.visit, text))
                    self.error("exception", text.replace("\n", " | "))

    async def navigate(self, page_name: str, charts: int = 0):
        """Click the page's sidebar link and wait until it is drawn; on a timeout, reload it."""
        start = time.monotonic()
        try:
            await self.page.locator('[data-testid="stSidebarNav"] a', has_text=page_name).first.click(
                timeout=self.nav_timeout_ms
            )
            await self.wait_ready(page_name, charts)
            self.nav_ms.append((time.monotonic() - start) * 1000)
        except Exception as exc:  # noqa: BLE001 - a page that does not come is an app error
            kind, message = self.failure(exc, f"going to {page_name}")
            self.error(kind, f"{message} [{await self.state()}]")
            await self.reload(page_name, charts)
        await self.check_exceptions()

    async def reload(self, page_name: str, charts: int):
        path = {HOME: "/", MODES: "/modes", TOY: "/toy", MNIST: "/mnist"}[page_name]
        self.quiet = True
        await self.page.goto(self.url + path, wait_until="domcontentloaded", timeout=self.nav_timeout_ms)
        await self.wait_ready(page_name, charts, timeout_ms=2 * self.nav_timeout_ms)
        await self.armed_connection_watch()

    # -- what the student does

    async def move_slider(self) -> None:
        page = self.page
        alpha = await page.evaluate(ARM_JS, "modes")
        # A random walk pulled towards α = 4, around the threshold α* ≈ 5σ.
        right = 0.5 if alpha is None else min(0.9, max(0.1, 0.5 + (4.0 - alpha) * 0.1))
        await page.keyboard.press("ArrowRight" if self.rng.random() < right else "ArrowLeft")
        try:
            result = await (
                await page.wait_for_function(CHANGED_JS, arg="modes", polling="raf", timeout=self.timeout_ms)
            ).json_value()
        except Exception as exc:  # noqa: BLE001
            pressed = await page.evaluate("() => window.__lt.t0 !== null")
            if not pressed:
                self.error("harness", "the key press did not reach the page (the slider lost focus?)")
            elif "Timeout" in type(exc).__name__:
                self.error(
                    "timeout", f"no chart update {self.args.timeout:g} s after a slider move [{await self.state()}]"
                )
            else:
                self.error("harness", f"slider: {exc!s:.200}")
            return
        self.latencies.append(result["ms"])
        if result["send"] is not None:
            self.sends.append(result["send"])
        await self.check_exceptions()

    async def play_toy(self, seconds: float) -> None:
        """Play, time the first update and the rate of Adam steps for ``seconds``, Pause."""
        page = self.page
        play = page.get_by_role("button", name="Play", exact=True)
        pause = page.get_by_role("button", name="Pause", exact=True)
        progress = await page.evaluate("() => window.__lt.progress()")
        if progress and progress["step"] > progress["total"] - 200 * (seconds + 2):  # no room left: start over
            await page.get_by_role("button", name="Reset", exact=True).click()
            await page.wait_for_function(
                "() => { const p = window.__lt.progress(); return p && p.step === 0; }",
                polling=100,
                timeout=self.timeout_ms,
            )
        await expect(play).to_be_enabled(timeout=self.timeout_ms)
        await page.evaluate(ARM_JS, "toy")
        await play.click()
        try:
            first = await (
                await page.wait_for_function(CHANGED_JS, arg="toy", polling="raf", timeout=self.timeout_ms)
            ).json_value()
        except Exception as exc:  # noqa: BLE001
            kind, message = self.failure(exc, f"no live chart update {self.args.timeout:g} s after Play")
            self.error(kind, f"{message} [{await self.state()}]")
        else:
            self.play_ms.append(first["ms"])
            await asyncio.sleep(seconds)
            last = await page.evaluate("() => window.__lt.progress()")
            if last and first["step"] is not None and last["now"] > first["now"]:
                self.steps_per_s.append((last["step"] - first["step"]) / ((last["now"] - first["now"]) / 1000))
        await self.check_exceptions()
        await pause.click()
        await expect(play).to_be_enabled(timeout=self.timeout_ms)
        await page.wait_for_function(
            "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", polling=100, timeout=self.timeout_ms
        )

    async def toy_visit(self):
        await self.navigate(TOY, TOY_CHARTS)
        try:
            await self.play_toy(self.rng.uniform(4.0, 8.0))
        except Exception as exc:  # noqa: BLE001
            kind, message = self.failure(exc, "toy")
            self.error(kind, f"{message} [{await self.state()}]")
        await self.navigate(MODES, MODES_CHARTS)

    async def run(self, seconds: float):
        """A student: slider moves on /modes, now and then a visit to /toy, for ``seconds``."""
        try:
            await self.open("/modes", MODES, MODES_CHARTS)
        except Exception as exc:  # noqa: BLE001
            kind, message = self.failure(exc, "first load")
            self.error(kind, f"{message} [{await self.state() if self.page else 'no page'}]")
            return
        end, first = time.monotonic() + seconds, True
        try:
            while time.monotonic() < end:
                block_end = min(
                    end, time.monotonic() + (self.rng.uniform(5, 12) if first else self.rng.uniform(10, 25))
                )
                while time.monotonic() < block_end:
                    await self.move_slider()
                    await asyncio.sleep(self.rng.uniform(0.5, 2.0))
                if time.monotonic() < end and (first or self.rng.random() < self.args.toy_prob):
                    await self.toy_visit()
                first = False
        except Exception as exc:  # noqa: BLE001 - an app that stops answering ends this student
            kind, message = self.failure(exc, "session ended")
            self.error(kind, f"{message} [{await self.state()}]")


async def tour(browser, url: str, args) -> Student:
    """One session through every page: Home, modes (slider moves), toy (Play), MNIST + Results."""
    student = Student(browser, url, args, random.Random(args.seed), "tour")
    try:
        await student.open("/", HOME)
        await student.navigate(MODES, MODES_CHARTS)
        for _ in range(5):
            await student.move_slider()
            await asyncio.sleep(0.5)
        await student.navigate(TOY, TOY_CHARTS)
        await student.play_toy(args.tour_play)
        await student.navigate(MNIST)
        await student.page.get_by_role("tab", name="Results").click()
        await student.page.get_by_text("Compare runs").first.wait_for(timeout=student.nav_timeout_ms)
        await student.page.wait_for_function(
            "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')",
            polling=100,
            timeout=student.nav_timeout_ms,
        )
        await student.check_exceptions()
        await asyncio.sleep(2)
    except Exception as exc:  # noqa: BLE001
        kind, message = student.failure(exc, "tour")
        student.error(kind, f"{message} [{await student.state() if student.page else 'no page'}]")
    finally:
        await student.close()
    return student


# ------------------------------------------------------------------------------------------ phases


def percentile(values, q: float):
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def merged_errors(sessions) -> tuple[Counter, dict]:
    """The sessions' errors by kind, and up to 5 distinct messages of each kind, the most widespread
    first, with how many sessions saw them (Chromium students and protocol sessions alike)."""
    errors, seen = Counter(), {}
    for s in sessions:
        errors.update(s.errors)
        for kind, kept in s.messages.items():
            for message in kept:
                seen.setdefault(kind, Counter())[message] += 1
    messages = {
        kind: [f"{m} (in {n} session{'s' * (n > 1)})" for m, n in counter.most_common(5)]
        for kind, counter in seen.items()
    }
    return errors, messages


def merge(students: list[Student]) -> dict:
    errors, messages = merged_errors(students)
    latencies = [v for s in students for v in s.latencies]
    sends = [v for s in students for v in s.sends]
    play = [v for s in students for v in s.play_ms]
    rates = [statistics.median(s.steps_per_s) for s in students if s.steps_per_s]
    nav = [v for s in students for v in s.nav_ms]
    load = [v for s in students for v in s.load_ms]
    return dict(
        updates=len(latencies),
        p50_ms=percentile(latencies, 50),
        p95_ms=percentile(latencies, 95),
        max_ms=max(latencies, default=None),
        key_to_send_p50_ms=percentile(sends, 50),
        toy_plays=len(play),
        steps_per_s_median=statistics.median(rates) if rates else None,
        steps_per_s_min=min(rates, default=None),
        play_p50_ms=percentile(play, 50),
        play_p95_ms=percentile(play, 95),
        nav_p50_ms=percentile(nav, 50),
        nav_p95_ms=percentile(nav, 95),
        load_p50_ms=percentile(load, 50),
        load_p95_ms=percentile(load, 95),
        errors=dict(errors),
        app_errors=sum(errors[k] for k in APP_ERRORS),
        error_samples=messages,
    )


async def phase(browser, url: str, n: int, args, sampler: Sampler | None) -> dict:
    students = [Student(browser, url, args, random.Random(f"{args.seed}-{n}-{i}"), f"N={n} #{i + 1}") for i in range(n)]

    async def one(i, student):
        await asyncio.sleep(i * args.stagger)
        try:
            await student.run(args.seconds)
        finally:
            await student.close()

    start = time.monotonic()
    await asyncio.gather(*(one(i, s) for i, s in enumerate(students)))
    end = time.monotonic()
    result = dict(sessions=n, wall_s=end - start, **merge(students))
    if sampler:
        time.sleep(args.sample_interval * 2)
        result.update(sampler.window(start, end))
    return result


# ------------------------------------------------------------------------------------------ report


def server_log_summary(path: Path) -> dict:
    """Tracebacks in the server's log, by their last line, and other error/warning lines."""
    tracebacks, others = Counter(), Counter()
    with contextlib.suppress(OSError):
        lines = path.read_text(errors="replace").splitlines()
        i = 0
        while i < len(lines):
            if lines[i].startswith("Traceback (most recent call last)"):
                j = i + 1
                while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
                    j += 1
                tracebacks[lines[j].strip()[:300] if j < len(lines) else "?"] += 1
                i = j + 1
                continue
            if re.search(r"error|warning|exception", lines[i], re.IGNORECASE):
                others[lines[i].strip()[:300]] += 1
            i += 1
    return dict(log=str(path), tracebacks=dict(tracebacks), other_lines=dict(others.most_common(10)))


def fmt(value, spec="5.0f", none="—"):
    return none if value is None else format(value, spec)


def report(results: dict) -> str:
    out = []
    config = results["config"]
    pinned = "".join(
        f", {who} on CPUs {','.join(map(str, config[key]))}"
        for who, key in (("server", "server_cpus"), ("browser", "browser_cpus"))
        if config.get(key)
    )
    out.append(
        f"SymLab load test — {NCPU} CPUs{pinned}, {config['seconds']:g} s of activity per session, "
        f"server env {config['server_env'] or '{}'}{', ' + config['url'] if config['url'] else ''}"
    )
    tour_result = results.get("tour")
    if tour_result:
        hwm = tour_result.get("vmhwm_mib")
        out.append(
            f"\nOne session visiting every page (Home, modes, toy playing {config['tour_play']:g} s, MNIST + "
            f"Results){' on a fresh server' if not config['url'] else ''}:"
        )
        out.append(
            f"  server RSS idle {fmt(tour_result.get('rss_start_mib'), '.0f')} MiB → peak "
            f"{fmt(tour_result.get('rss_peak_mib'), '.0f')} MiB"
            + (f", VmHWM {hwm:.0f} MiB" if hwm else "")
            + f"; descendants' peak {fmt(tour_result.get('children_rss_peak_mib'), '.0f')} MiB; "
            f"errors {tour_result['errors'] or 'none'}"
        )
        for kind, kept in sorted(tour_result["error_samples"].items(), key=lambda item: item[0] not in APP_ERRORS):
            out.extend(f"    {kind}: {m}" for m in kept[: 3 if kind in APP_ERRORS else 1])
    phases = results["phases"]
    if not phases:
        return "\n".join(out)
    base = phases[0]
    out.append(f"\nInput → chart latency (α slider on /modes); ratios against N = {base['sessions']}:")
    header = (
        f"{'N':>3} {'updates':>7} {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7} {'p50×':>5} {'p95×':>5} "
        f"{'key→send':>8} │ {'plays':>5} {'steps/s':>7} {'Play→upd p50/p95 ms':>20} │ {'nav p95':>7} "
        f"{'errors':>6} │ {'RSS MiB start→peak':>18} {'+desc.':>6} │ {'CPU srv/browser/all':>19}"
    )
    out.append(header)
    out.append("─" * len(header))
    for p in phases:
        ratio50 = p["p50_ms"] / base["p50_ms"] if p["p50_ms"] and base["p50_ms"] else None
        ratio95 = p["p95_ms"] / base["p95_ms"] if p["p95_ms"] and base["p95_ms"] else None
        rss = f"{fmt(p.get('rss_start_mib'))} → {fmt(p.get('rss_peak_mib'))}"
        cpu = (
            f"{fmt(p.get('server_cpu_cores'), '.2f')}/{fmt(p.get('browser_cpu_cores'), '.2f')}/"
            f"{fmt(p.get('machine_cpu_cores'), '.2f')}"
        )
        play = f"{fmt(p['play_p50_ms'])} / {fmt(p['play_p95_ms'])}"
        out.append(
            f"{p['sessions']:>3} {p['updates']:>7} {fmt(p['p50_ms'], '7.0f')} {fmt(p['p95_ms'], '7.0f')} "
            f"{fmt(p['max_ms'], '7.0f')} {fmt(ratio50, '5.2f'):>5} {fmt(ratio95, '5.2f'):>5} "
            f"{fmt(p['key_to_send_p50_ms'], '8.0f'):>8} │ {p['toy_plays']:>5} "
            f"{fmt(p['steps_per_s_median'], '7.0f'):>7} {play:>20} │ {fmt(p['nav_p95_ms'], '7.0f'):>7} "
            f"{p['app_errors']:>6} │ {rss:>18} {fmt(p.get('children_rss_peak_mib'), '6.0f'):>6} │ {cpu:>19}"
        )
    out.append(
        "steps/s: median over sessions of each one's median rate while playing; nav: sidebar click → page "
        "drawn; CPU in cores busy (server tree / this script's Chromium / whole machine)."
    )
    out.append("\nErrors by kind:")
    for p in phases:
        counted = ", ".join(f"{k} {v}" for k, v in sorted(p["errors"].items()) if k in APP_ERRORS) or "none"
        apart = ", ".join(f"{k} {v}" for k, v in sorted(p["errors"].items()) if k not in APP_ERRORS)
        out.append(
            f"  N={p['sessions']}: {counted}{f'  (not counted: {apart})' if apart else ''}; "
            f"first page load p50/p95 {fmt(p['load_p50_ms'])} / {fmt(p['load_p95_ms'])} ms"
        )
        for kind, kept in sorted(p["error_samples"].items(), key=lambda item: item[0] not in APP_ERRORS):
            out.extend(f"      {kind}: {m}" for m in kept[: 3 if kind in APP_ERRORS else 1])
    out.append("\nTargets:")
    by_n = {p["sessions"]: p for p in phases}
    if NO_ERRORS_AT in by_n:
        errors = by_n[NO_ERRORS_AT]["app_errors"]
        out.append(f"  no errors at N = {NO_ERRORS_AT}: {'PASS' if errors == 0 else 'FAIL'} ({errors} errors)")
    else:
        out.append(f"  no errors at N = {NO_ERRORS_AT}: not measured in this run")
    if TARGET_P95_AT in by_n and by_n[TARGET_P95_AT]["p95_ms"] is not None:
        p95 = by_n[TARGET_P95_AT]["p95_ms"]
        out.append(
            f"  p95 ≤ {TARGET_P95_MS:.0f} ms at N = {TARGET_P95_AT}: {'PASS' if p95 <= TARGET_P95_MS else 'FAIL'} "
            f"({p95:.0f} ms, {p95 / TARGET_P95_MS:.2f}× the target)"
        )
    else:
        out.append(f"  p95 ≤ {TARGET_P95_MS:.0f} ms at N = {TARGET_P95_AT}: not measured in this run")
    if results.get("vmhwm_mib"):
        out.append(f"\nServer VmHWM at the end of the phases: {results['vmhwm_mib']:.0f} MiB")
    log = results.get("server_log")
    if log:
        out.append(
            f"Server log {log['log']}: "
            + (", ".join(f"{n}× {line}" for line, n in log["tracebacks"].items()) or "no tracebacks")
        )
        for line, n in log["other_lines"].items():
            out.append(f"  {n}× {line}")
    return "\n".join(out)


# ------------------------------------------------------------------------------- protocol students

# The lab pages a protocol student visits ("" is the home page), from the lab registry.
PROTOCOL_PAGES = ("", *(lab.name for lab in LABS))
# What a student waits for ("reconnect": the page run again after its server died); "tick" is apart.
PROTOCOL_USER_REQUESTS = ("open", "widget", "preset", "button", "reconnect")
MAX_PROTOCOL_SESSIONS, MAX_BROWSER_SESSIONS, MAX_SECONDS = 300, 40, 900
PROTOCOL_TARGETS = {30: 1000.0, 100: 2000.0}  # N -> p95 (ms), with no errors (N = 100 on --replicas 2)
PLAYER_PAGES = ("toy", "modes", "align", "symmetry")  # pages with a player, for --players
COUNTED_SERVER = "benchmarks/counted_serve.py"  # serve.py, writing down each script run's CPU


async def protocol_student(session: Session, rng: random.Random, seconds: float, play_seconds: float) -> None:
    """A student: opens a lab, then every 2-5 s one action — nudge a slider or number box, pick a
    preset, press Play and watch ~``play_seconds`` before Pause, or go to another page."""
    deadline = time.monotonic() + seconds
    await session.open(rng.choice(PROTOCOL_PAGES[1:]))
    while time.monotonic() < deadline:
        await asyncio.sleep(rng.uniform(2, 5))
        choice = rng.random()
        preset, controls, player = session.widget(".preset"), session.controls(), session.player()
        if choice < 0.5 and controls:
            widget = rng.choice(controls)
            await session.set_widget(widget, nudged(widget, rng))
        elif choice < 0.65 and preset and len(preset.proto.options) > 1:
            await session.set_widget(preset, rng.choice(preset.proto.options[1:]), "preset")
        elif choice < 0.85 and player is not None:  # played in the browser: the page hears of Play and Pause
            await session.play(player, True)
            watched = min(rng.uniform(0.8, 1.2) * play_seconds, max(deadline - time.monotonic(), 0))
            await asyncio.sleep(watched)
            await session.play(player, False, round(watched * 1000 / player.data["interval_ms"]))
        else:
            await session.open(rng.choice([p for p in PROTOCOL_PAGES if p != session.page]))


async def protocol_player(session: Session, page: str, seconds: float, play: bool) -> None:
    """A student who opens a page with a player and, with ``play``, keeps it playing for ``seconds`` (Play again
    whenever it reaches its end); without, sits there."""
    deadline = time.monotonic() + seconds
    await session.open(page)
    player, played = session.player(), -math.inf
    while time.monotonic() < deadline:
        # Played in the browser: the page hears of Play again where the frames run out.
        if (
            play
            and player is not None
            and time.monotonic() - played > player.data["frames"] * player.data["interval_ms"] / 1000
        ):
            await session.play(player, True)
            played = time.monotonic()
        await asyncio.sleep(1.0)


def flood_links(rng: random.Random) -> list[tuple[str, str]]:
    """Heavy links with a fresh seed each (results nobody has stored), as a hostile student cycles them."""
    seed = rng.randrange(1000, 10**6)
    return [
        ("align", f"seed={seed}"),
        ("symmetry", f"part=fig1&seed={seed}"),
        ("toy", f"seed={seed}&surface=true"),
        ("modes", f"alpha={rng.randrange(1, 200) / 10:g}&surface=true"),
        ("methods", f"seed={seed % 100}"),
    ]


async def protocol_flooder(session: Session, rng: random.Random, seconds: float) -> None:
    """One of a hostile student's tabs (all of one browser): open heavy links with new seeds, one after another,
    never waiting for a result, for ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for page, query in flood_links(rng):
            if time.monotonic() >= deadline:
                return
            await session.open(page, query)
            await asyncio.sleep(rng.uniform(0.2, 0.5))


UPLOAD_UNITS = 5000  # the uploaders' network: 784 → 5 000 → 10, float32, 16 MB
UPLOAD_TIMEOUT = 300.0  # an upload's run reads and analyses the file, in turn with the others: not a click's wait


async def protocol_uploader(session: Session, files: list[tuple[str, bytes]], seconds: float) -> None:
    """A student who uploads a 16 MB network on the symmetry explorer's network part again and again (each upload a
    new file to read and analyse), waiting for each analysis, for ``seconds``."""
    deadline = time.monotonic() + seconds
    await session.open("symmetry", "part=network")
    for index in itertools.count():
        uploader = session.widget(".upload")
        if uploader is None:
            session.error("upload", "/symmetry?part=network: no file uploader drawn")
            return
        if time.monotonic() >= deadline:
            return
        name, data = files[index % len(files)]
        await session.upload(uploader, name, data, UPLOAD_TIMEOUT)


def upload_files() -> list[tuple[str, bytes]]:
    import hostile_files

    return [(f"net{seed}.pt", hostile_files.wide_network(UPLOAD_UNITS, seed)) for seed in (0, 1)]


def nudged(widget, rng: random.Random):
    """One or two steps up or down, within the control's range (a slider's arrow keys, a number box's +/-)."""
    proto = widget.proto
    step = proto.step or 1
    if widget.kind == "slider":
        value = widget.value[0] + rng.choice((-2, -1, 1, 2)) * step
        return [min(max(value, proto.min), proto.max), *widget.value[1:]]
    value = widget.value + rng.choice((-1, 1)) * step
    return min(max(value, proto.min), proto.max)


async def protocol_phase(
    urls: list[str], n: int, args, sampler: Sampler | None, run_log: Path | None = None, kill=None
) -> dict:
    """One phase of ``n`` students (and the players, uploaders and flooders asked for); ``kill``: called
    --kill-after seconds in, to kill a page process."""
    # Each session stays with one server, as behind a sticky proxy (or the proxy's cookie keeps it on one).
    sessions = [
        Session(urls[i % len(urls)], timeout=args.timeout, sticky=args.proxy, reconnect=args.proxy) for i in range(n)
    ]
    own_ticks = sum(os.times()[:2])

    players = min(args.players, n)

    async def one(i: int, session: Session) -> None:
        await asyncio.sleep(i * args.stagger)
        try:
            await session.connect()
        except (TimeoutError, OSError, websockets.InvalidHandshake) as exc:
            session.error("disconnect", f"connect: {exc}")
            return
        try:
            if i < players:
                await protocol_player(
                    session, PLAYER_PAGES[i % len(PLAYER_PAGES)], args.seconds, not args.players_still
                )
            else:
                await protocol_student(session, random.Random(f"{args.seed}-{n}-{i}"), args.seconds, args.play_seconds)
        finally:
            await session.close()

    uploaders = [Session(urls[i % len(urls)], timeout=args.timeout, sticky=args.proxy) for i in range(args.uploaders)]
    files = upload_files() if uploaders else []
    # One browser's tabs: one cookie jar (Streamlit's XSRF cookie, which tells a browser apart; the proxy's, set by
    # the first tab's page load), on the server the first session of the class reaches.
    flooders = [Session(urls[0], timeout=args.timeout, sticky=args.proxy) for _ in range(args.flooders)]

    async def flooding(index: int, session: Session) -> None:
        try:
            session.cookies = dict(flooders[0].cookies)
            await session.connect()
            await protocol_flooder(session, random.Random(f"flood-{args.seed}-{n}-{index}"), args.seconds)
        except (TimeoutError, OSError, websockets.InvalidHandshake) as exc:
            session.error("disconnect", f"connect: {exc}")
        finally:
            await session.close()

    async def flood() -> None:
        if not flooders:
            return
        flooders[0].cookies = {XSRF_COOKIE: XSRF_TOKEN}
        if args.proxy:
            flooders[0].cookies.update(await asyncio.to_thread(flooders[0].page_cookies))
        await asyncio.gather(*(flooding(i, session) for i, session in enumerate(flooders)))

    async def uploading(session: Session) -> None:
        try:
            await session.connect()
            await protocol_uploader(session, files, args.seconds + n * args.stagger)
        except (TimeoutError, OSError, websockets.InvalidHandshake) as exc:
            session.error("disconnect", f"connect: {exc}")
        finally:
            await session.close()

    killed = {}

    async def killing() -> None:
        if kill is not None and args.kill_after is not None:
            await asyncio.sleep(args.kill_after)
            killed.update(kill(), at_s=args.kill_after)

    start = time.monotonic()
    await asyncio.gather(
        *(one(i, s) for i, s in enumerate(sessions)), *(uploading(s) for s in uploaders), flood(), killing()
    )
    end = time.monotonic()
    result = dict(
        sessions=n,
        wall_s=end - start,
        **merge_protocol(sessions[players:]),
        client_cpu_cores=(sum(os.times()[:2]) - own_ticks) / (end - start),
    )
    if players:
        result["players"] = dict(
            sessions=players,
            playing=not args.players_still,
            ticks=sum(a.what == "tick" for s in sessions[:players] for a in s.answered),
            errors=sum(sum(s.errors.values()) for s in sessions[:players]),
        )
    if run_log is not None:
        result["page_cpu"] = page_cpu(sessions, read_runs(run_log, start, end))
    if uploaders:
        result["uploaders"] = merge_uploaders(uploaders)
    if killed:
        result["killed"] = dict(
            killed,
            reconnects=sum(s.reconnects for s in sessions),
            lost_state=sum(s.lost_state for s in sessions),
            interrupted=sum(s.interrupted for s in sessions),
            reconnect_ms=sorted(a.ms for s in sessions for a in s.answered if a.what == "reconnect"),
        )
    if flooders:
        result["flooders"] = dict(
            sessions=len(flooders),
            opens=sum(a.what == "open" for s in flooders for a in s.answered),
            waited=sum(a.waited for s in flooders for a in s.answered),
            results=sum(len(s.results) for s in flooders),
            errors=dict(sum((s.errors for s in flooders), Counter())),
        )
    if sampler:
        time.sleep(args.sample_interval * 2)
        window = sampler.window(start, end)
        if window.get("server_main_cpu_cores") is not None:
            result["page_cores_per_student"] = window["server_main_cpu_cores"] / n
        result.update(
            server_rss_peak_mib=window.get("rss_peak_mib"),
            server_rss_start_mib=window.get("rss_start_mib"),
            workers_rss_peak_mib=window.get("children_rss_peak_mib"),
            server_cpu_cores=window.get("server_cpu_cores"),
            server_main_cpu_cores=window.get("server_main_cpu_cores"),
            machine_cpu_cores=window.get("machine_cpu_cores"),
        )
    return result


RUN_START_SLACK = 0.002  # s: a run may be logged as starting a hair before its request's send was stamped


def read_runs(path: Path, start: float, end: float) -> dict[str, list[tuple[float, float]]]:
    """The script runs (benchmarks/counted_serve.py's log) that started between ``start`` and ``end``, by session:
    (start, CPU-ms) each."""
    runs: dict[str, list[tuple[float, float]]] = {}
    for line in path.read_text().splitlines():
        session_id, began, _, cpu_ms, _ = line.split()
        if start <= float(began) <= end:
            runs.setdefault(session_id, []).append((float(began), float(cpu_ms)))
    return runs


def page_cpu(sessions: list[Session], runs: dict[str, list[tuple[float, float]]]) -> dict:
    """The page process's CPU per request, by kind: each run of a session is the work of the last request that
    session sent before the run began (a request's own run, the reruns it asked for, the waiting panel's redraws
    are requests of their own: ticks), and by page, ticks apart. Also what all runs took, to compare with the
    process's total."""
    spent: Counter = Counter()
    count: Counter = Counter()
    tick_pages: Counter = Counter()
    tick_spent: Counter = Counter()
    page_requests: Counter = Counter()
    page_spent: Counter = Counter()
    matched = 0.0
    for session in sessions:
        requests = sorted(session.answered, key=lambda a: a.sent)
        sent = [a.sent for a in requests]
        for a in requests:
            count[a.what] += 1
            tick_pages[a.page or "home"] += a.what == "tick"
            page_requests[a.page or "home"] += a.what in PROTOCOL_USER_REQUESTS
        for began, cpu_ms in runs.get(session.session_id, ()):
            index = bisect.bisect_right(sent, began + RUN_START_SLACK) - 1
            if index >= 0:
                spent[requests[index].what] += cpu_ms
                matched += cpu_ms
                if requests[index].what == "tick":
                    tick_spent[requests[index].page or "home"] += cpu_ms
                elif requests[index].what in PROTOCOL_USER_REQUESTS:
                    page_spent[requests[index].page or "home"] += cpu_ms
    all_runs = sum(cpu for session_runs in runs.values() for _, cpu in session_runs)
    return dict(
        by_request={
            what: dict(
                count=count[what],
                cpu_ms_per_request=spent[what] / count[what] if count[what] else None,
                cpu_s=spent[what] / 1000,
            )
            for what in ("open", "widget", "preset", "button", "tick", "upload")
            if count[what]
        },
        ticks_by_page={
            page: dict(count=n, cpu_ms_per_tick=tick_spent[page] / n) for page, n in tick_pages.items() if n
        },
        requests_by_page={
            page: dict(count=n, cpu_ms_per_request=page_spent[page] / n, cpu_s=page_spent[page] / 1000)
            for page, n in sorted(page_requests.items())
            if n
        },
        runs_cpu_s=all_runs / 1000,
        matched_cpu_s=matched / 1000,
    )


def merge_protocol(sessions: list[Session]) -> dict:
    errors, messages = merged_errors(sessions)
    answered = [a for s in sessions for a in s.answered]
    results = [r for s in sessions for r in s.results]
    by_kind = {what: [a.ms for a in answered if a.what == what] for what in (*PROTOCOL_USER_REQUESTS, "tick")}
    user = [a for a in answered if a.what in PROTOCOL_USER_REQUESTS]
    waited, others = [a.ms for a in user if a.waited], [a.ms for a in user if not a.waited]
    user_ms = [a.ms for a in user]
    first_sent = min((a.sent for a in answered), default=0.0)
    return dict(
        slowest=[
            dict(
                page=a.page or "home", what=a.what, ms=round(a.ms), at_s=round(a.sent - first_sent, 1), waited=a.waited
            )
            for a in sorted(user, key=lambda a: -a.ms)[:12]
        ],
        requests=len(user),
        errors=sum(errors.values()),
        errors_by_kind=dict(errors),
        error_samples=messages,
        p50_ms=percentile(user_ms, 50),
        p95_ms=percentile(user_ms, 95),
        max_ms=max(user_ms, default=None),
        by_request={
            what: dict(count=len(v), p50_ms=percentile(v, 50), p95_ms=percentile(v, 95), max_ms=max(v, default=None))
            for what, v in by_kind.items()
        },
        ticks=len(by_kind["tick"]),
        skipped_ticks=sum(s.skipped_ticks for s in sessions),
        polls=sum(getattr(s, "polls", 0) for s in sessions),  # asks of waiting panels the browser draws (no run)
        waited=len(waited),
        waited_p50_ms=percentile(waited, 50),
        waited_p95_ms=percentile(waited, 95),
        p95_ms_without_waits=percentile(others, 95),
        by_page={
            page or "home": dict(
                requests=len(mine),
                waited=sum(a.waited for a in mine),
                p50_ms=percentile([a.ms for a in mine], 50),
                p95_ms=percentile([a.ms for a in mine], 95),
                over_1s=sum(a.ms > 1000 for a in mine),
            )
            for page in sorted({a.page for a in user})
            for mine in [[a for a in user if a.page == page]]
        },
        received_mib=sum(s.received_bytes for s in sessions) / MiB,
        # Computations the students waited for: request → the full run that drew the result.
        results=len(results),
        results_p50_ms=percentile([r.ms for r in results], 50),
        results_p95_ms=percentile([r.ms for r in results], 95),
        results_max_ms=max((r.ms for r in results), default=None),
        results_abandoned=sum(s.abandoned for s in sessions),
        results_by_page={
            page: dict(
                count=len(mine),
                p50_ms=percentile([r.ms for r in mine], 50),
                p95_ms=percentile([r.ms for r in mine], 95),
            )
            for page in sorted({r.page for r in results})
            for mine in [[r for r in results if r.page == page]]
        },
    )


def merge_uploaders(sessions: list[Session]) -> dict:
    """The uploading students apart: their uploads (request → the run that analysed the file), their errors."""
    errors, messages = merged_errors(sessions)
    uploads = [a.ms for s in sessions for a in s.answered if a.what == "upload"]
    return dict(
        sessions=len(sessions),
        uploads=len(uploads),
        p50_ms=percentile(uploads, 50),
        p95_ms=percentile(uploads, 95),
        max_ms=max(uploads, default=None),
        errors=sum(errors.values()),
        errors_by_kind=dict(errors),
        error_samples=messages,
    )


SETTLE_CORES, SETTLE_SECONDS, SETTLE_LIMIT_SECONDS = 0.05, 2.0, 90.0


def settled(pids: list[int]) -> float:
    """Wait until the servers' page processes have been quiet (under :data:`SETTLE_CORES` of a core in all) for
    :data:`SETTLE_SECONDS`: their warm-up done, as a class finds a server started before it (at most
    :data:`SETTLE_LIMIT_SECONDS`). The seconds it took."""

    def cpu_seconds() -> float:
        table = process_table()
        return sum(table[pid][1] for pid in pids if pid in table) / CLK_TCK

    start = time.monotonic()
    while time.monotonic() - start < SETTLE_LIMIT_SECONDS:
        before = cpu_seconds()
        time.sleep(SETTLE_SECONDS)
        if cpu_seconds() - before < SETTLE_CORES * SETTLE_SECONDS:
            break
    return time.monotonic() - start


def run_protocol(args, server_env: dict) -> dict:
    results = dict(
        mode="protocol",
        config=dict(
            sessions=args.sessions,
            seconds=args.seconds,
            stagger=args.stagger,
            replicas=args.replicas,
            proxy=args.proxy,
            runs_dir=str(args.runs_dir) if args.runs_dir else None,
            kill_after_s=args.kill_after,
            flooders=args.flooders,
            uploaders=args.uploaders,
            players=args.players,
            players_still=args.players_still,
            play_seconds=args.play_seconds,
            timeout_s=args.timeout,
            server_env=server_env,
            cpus=NCPU,
        ),
        rates=measured_rates().in_units(),
        phases=[],
    )
    log_path = Path(args.server_log or tempfile.mkstemp(prefix="symlab-load-", suffix=".log")[1])
    run_log = Path(tempfile.mkstemp(prefix="symlab-runs-", suffix=".log")[1])
    server_env = {**server_env, "SYMLAB_RUN_LOG": str(run_log)}
    quota = None
    if args.slowest_machine:
        cores, factor = slowest_machine_cores(results["rates"], by=tuple(args.slowest_by.split(",")))
        results["cpu_quota"] = dict(cores=cores, factor=factor, slowest_rates=SLOWEST_RATES)
        quota = CpuQuota(cores)
    try:
        with contextlib.ExitStack() as stack:
            if args.proxy:
                url, class_server = stack.enter_context(
                    proxied_servers(args.replicas, server_env, log_path, quota, args.runs_dir)
                )
                urls, pids = [url], [pid for name, pid in class_server.pids().items() if name != "proxy"]
                kill = functools.partial(kill_page_process, class_server, "page1")
            else:
                servers = stack.enter_context(
                    app_servers(args.replicas, server_env, log_path, args.server_cpus, COUNTED_SERVER, quota)
                )
                urls, pids = [url for url, _ in servers], [pid for _, pid in servers]
                kill = None
            run_protocol_phases(args, results, urls, pids, run_log, kill)
    finally:
        if quota:
            results["cpu_quota"]["throttled_s"] = quota.throttled_s()
            quota.remove()
    results["server_log"] = server_log_summary(log_path)
    return results


def kill_page_process(class_server, name: str) -> dict:
    """Kill ``name`` as an out-of-memory kill would (SIGKILL); the class server starts it again."""
    pid = class_server.pids()[name]
    os.kill(pid, signal.SIGKILL)
    print(f"  killed {name} (pid {pid})", file=sys.stderr, flush=True)
    return dict(process=name, pid=pid)


def run_protocol_phases(args, results: dict, urls: list[str], pids: list[int], run_log: Path, kill=None) -> None:
    """Each phase of --sessions against the servers at ``urls`` (page processes ``pids``), into ``results``;
    ``kill`` kills a page process --kill-after seconds into each."""
    sampler = Sampler(pids, args.sample_interval)
    sampler.start()
    try:
        if not args.no_settle:
            results["settled_after_s"] = settled(pids)
        for n in args.sessions:
            print(f"phase N = {n}: {n} protocol sessions × {args.seconds:g} s …", file=sys.stderr, flush=True)
            phase_result = asyncio.run(protocol_phase(urls, n, args, sampler, run_log, kill))
            results["phases"].append(phase_result)
            print(
                f"  {phase_result['requests']} requests, p95 {fmt(phase_result['p95_ms'])} ms, "
                f"errors {phase_result['errors_by_kind'] or 0}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        sampler.stop()
    results["vmhwm_mib"] = sum(status_kib(pid, "VmHWM").get("VmHWM", 0) for pid in pids) / 1024


def protocol_report(results: dict) -> str:
    config = results["config"]
    servers = config.get("replicas", 1)
    rates = results.get("rates") or {}
    shared_by = "server" if servers == 1 else f"{servers} servers (replicas)"
    if config.get("proxy"):
        shared_by = f"symlab serve's {servers} page process{'es' if servers > 1 else ''} behind HAProxy"
    quota = results.get("cpu_quota")
    out = [
        f"SymLab protocol load test — {NCPU} CPUs shared by {shared_by} "
        f"and client, {config['seconds']:g} s of activity per session, sessions {config['stagger']:g} s apart, "
        f"server env {config['server_env'] or '{}'}",
        (
            f"Servers held to {quota['cores']:.2f} cores (a CPU quota): this machine × {quota['factor']:.2f}, as fast "
            f"as {NCPU} cores at {quota['slowest_rates']['matmul_gflops']:g} GFLOP/s and "
            f"{quota['slowest_rates']['elements_g_per_s']:g} G elements/s; throttled {quota.get('throttled_s', 0):.0f} s"
            if quota
            else ""
        ),
        (
            f"Machine, one thread: {rates['matmul_gflops']:.0f} GFLOP/s in products, {rates['elements_g_per_s']:.2f} G "
            f"elements/s, {rates['normals_m_per_s']:.0f} M normal draws/s"
            if rates
            else ""
        ),
        "Latency: request sent → end of the run it caused (ms); user requests are open, widget, preset, button;",
        "waited: user requests whose run waited for a shared computation (training in the worker processes).",
        "",
    ]
    header = (
        f"{'N':>4} {'requests':>8} {'p50':>6} {'p95':>6} {'max':>6} │ {'open p95':>8} {'widget p95':>10} "
        f"{'button p95':>10} │ {'waited':>6} {'its p95':>7} {'others p95':>10} │ {'ticks':>6} {'tick p95':>8} "
        f"{'skipped':>7} │ {'errors':>6} │ {'RSS peak MiB':>12} {'CPU server/client':>17}"
    )
    out += [header, "─" * len(header)]
    for p in results["phases"]:
        by = p["by_request"]
        out.append(
            f"{p['sessions']:>4} {p['requests']:>8} {fmt(p['p50_ms'], '6.0f')} {fmt(p['p95_ms'], '6.0f')} "
            f"{fmt(p['max_ms'], '6.0f')} │ {fmt(by['open']['p95_ms'], '8.0f')} "
            f"{fmt(by['widget']['p95_ms'], '10.0f')} {fmt(by['button']['p95_ms'], '10.0f')} │ "
            f"{p['waited']:>6} {fmt(p['waited_p95_ms'], '7.0f')} {fmt(p['p95_ms_without_waits'], '10.0f')} │ "
            f"{p['ticks']:>6} {fmt(by['tick']['p95_ms'], '8.0f')} {p['skipped_ticks']:>7} │ {p['errors']:>6} │ "
            f"{fmt(p.get('server_rss_peak_mib'), '12.0f')} "
            f"{fmt(p.get('server_cpu_cores'), '.2f'):>8}/{fmt(p.get('client_cpu_cores'), '.2f'):<8}"
        )
    for p in results["phases"]:
        main, server = p.get("server_main_cpu_cores"), p.get("server_cpu_cores")
        if main is not None and server is not None:
            out.append(
                f"  N={p['sessions']}: cores busy: the servers' page runs {main:.2f} "
                f"({p['page_cores_per_student']:.4f} per student), their compute workers "
                f"{server - main:.2f}, the whole machine {fmt(p.get('machine_cpu_cores'), '.2f')} of {NCPU}"
            )
        if p.get("page_cpu"):
            cpu = p["page_cpu"]
            out.append(
                f"  N={p['sessions']}: page CPU per request (ms, each script run counted to the request it "
                "followed): "
                + ", ".join(
                    f"{what} {row['cpu_ms_per_request']:.1f} ({row['count']}, {row['cpu_s']:.1f} s)"
                    for what, row in cpu["by_request"].items()
                )
                + f"; script runs {cpu['runs_cpu_s']:.1f} CPU-s of the page processes' "
                f"{fmt(main * p['wall_s'] if main is not None else None, '.1f')}"
            )
            out.append(
                f"  N={p['sessions']}: ticks by page (live players, waiting panels, runs tables): "
                + ", ".join(
                    f"/{page} {row['count']} × {row['cpu_ms_per_tick']:.1f} ms"
                    for page, row in cpu["ticks_by_page"].items()
                )
                + f"; {p.get('polls', 0)} asks of waiting panels the browser draws (no page run)"
            )
            out.append(
                f"  N={p['sessions']}: page CPU per user request by page: "
                + ", ".join(
                    f"/{page} {row['cpu_ms_per_request']:.1f} ms ({row['count']}, {row['cpu_s']:.1f} s)"
                    for page, row in cpu.get("requests_by_page", {}).items()
                )
            )
        if p.get("players"):
            pl = p["players"]
            out.append(
                f"  N={p['sessions']}: {pl['sessions']} of them {'playing' if pl['playing'] else 'still'} "
                f"throughout ({pl['ticks']} ticks, {pl['errors']} errors); the figures above are the others'"
            )
        if p.get("results"):
            out.append(
                f"  N={p['sessions']}: {p['results']} computations waited for, request → result drawn: p50 "
                f"{fmt(p['results_p50_ms'], '.0f')} ms, p95 {fmt(p['results_p95_ms'], '.0f')} ms, max "
                f"{fmt(p['results_max_ms'], '.0f')} ms; {p['results_abandoned']} left for another request first; "
                + ", ".join(
                    f"/{page} p95 {fmt(row['p95_ms'], '.0f')} ms ({row['count']})"
                    for page, row in p["results_by_page"].items()
                )
            )
        out.append(
            "  "
            + " · ".join(
                f"/{page}: {row['requests']} requests, {row['waited']} waited, p95 "
                f"{fmt(row['p95_ms'], '.0f')} ms, {row['over_1s']} over 1 s"
                for page, row in p.get("by_page", {}).items()
            )
        )
        for kind, kept in p["error_samples"].items():
            out.extend(f"  N={p['sessions']} {kind}: {m}" for m in kept[:3])
        if p.get("uploaders"):
            up = p["uploaders"]
            out.append(
                f"  N={p['sessions']}: beside them, {up['sessions']} sessions uploading a 16 MB network again "
                f"and again: {up['uploads']} uploads read and analysed, upload → analysis shown p50 "
                f"{fmt(up['p50_ms'], '.0f')} ms, p95 {fmt(up['p95_ms'], '.0f')} ms; {up['errors']} errors "
                f"{up['errors_by_kind'] or ''}"
            )
            for kind, kept in up["error_samples"].items():
                out.extend(f"  N={p['sessions']} uploader {kind}: {m}" for m in kept[:3])
        if p.get("killed"):
            k = p["killed"]
            ms = k["reconnect_ms"]
            out.append(
                f"  N={p['sessions']}: {k['process']} killed {k['at_s']:g} s in; {k['reconnects']} sessions connected "
                f"again (their page's run: median {fmt(statistics.median(ms) if ms else None, '.0f')} ms, max "
                f"{fmt(max(ms) if ms else None, '.0f')} ms), {k['interrupted']} requests cut short, "
                f"{k['lost_state']} sessions lost state"
            )
        if p.get("flooders"):
            fl = p["flooders"]
            out.append(
                f"  N={p['sessions']}: beside them, one browser's {fl['sessions']} tabs flooding heavy links with new "
                f"seeds: {fl['opens']} opens answered, {fl['waited']} of them waiting for a computation; errors "
                f"{fl['errors'] or 0}. The latencies and results above are the N students'."
            )
    out.append("\nTargets (0 errors and p95 within the bound):")
    by_n = {p["sessions"]: p for p in results["phases"]}
    for n, bound in PROTOCOL_TARGETS.items():
        p = by_n.get(n)
        if p is None or p["p95_ms"] is None:
            out.append(f"  N = {n}: p95 ≤ {bound:.0f} ms: not measured in this run")
            continue
        ok = p["errors"] == 0 and p["p95_ms"] <= bound
        out.append(
            f"  N = {n}: p95 ≤ {bound:.0f} ms, 0 errors: {'PASS' if ok else 'FAIL'} "
            f"(p95 {p['p95_ms']:.0f} ms = {p['p95_ms'] / bound:.2f}× the bound, {p['errors']} errors)"
        )
    log = results["server_log"]
    out.append(
        f"Server log {log['log']}: "
        + (", ".join(f"{n}× {line}" for line, n in log["tracebacks"].items()) or "no tracebacks")
    )
    return "\n".join(out)


def protocol_summary(results: dict) -> dict:
    """The last phase's headline figures at the top level, every phase under "phases"."""
    last = results["phases"][-1] if results["phases"] else {}
    keys = ("sessions", "errors", "p50_ms", "p95_ms", "max_ms", "server_rss_peak_mib", "server_cpu_cores")
    return {**{k: last.get(k) for k in keys}, "vmhwm_mib": results.get("vmhwm_mib"), **results}


# ------------------------------------------------------------------------------------------ main


async def run_all(args, server_env: dict) -> dict:
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"Chromium not found at {CHROMIUM} (set SYMLAB_CHROMIUM)")
    results = dict(
        config=dict(
            sessions=args.sessions,
            seconds=args.seconds,
            stagger=args.stagger,
            toy_prob=args.toy_prob,
            timeout_s=args.timeout,
            tour_play=args.tour_play,
            server_env=server_env,
            url=args.url,
            cpus=NCPU,
            server_cpus=args.server_cpus,
            browser_cpus=args.browser_cpus,
        ),
        phases=[],
    )
    log_path = Path(args.server_log or tempfile.mkstemp(prefix="symlab-load-", suffix=".log")[1])

    def progress(text):
        print(text, file=sys.stderr, flush=True)

    async def measure(url, pid, do_tour, do_phases):
        sampler = Sampler(pid, args.sample_interval) if pid else None
        if sampler:
            sampler.start()
        try:
            if do_tour:
                progress(f"tour of every page on {url} …")
                start = time.monotonic()
                student = await tour(browser, url, args)
                time.sleep(args.sample_interval * 2)
                results["tour"] = dict(
                    errors=dict(student.errors),
                    error_samples=student.messages,
                    **(sampler.window(start - 1, time.monotonic()) if sampler else {}),
                )
                if pid and not args.url:
                    results["tour"]["vmhwm_mib"] = status_kib(pid, "VmHWM").get("VmHWM", 0) / 1024
            if do_phases:
                for n in args.sessions:
                    progress(f"phase N = {n}: {n} sessions × {args.seconds:g} s …")
                    results["phases"].append(await phase(browser, url, n, args, sampler))
                    progress(
                        f"  {results['phases'][-1]['updates']} updates, p95 "
                        f"{fmt(results['phases'][-1]['p95_ms'])} ms, errors {results['phases'][-1]['errors']}"
                    )
                if pid:
                    results["vmhwm_mib"] = status_kib(pid, "VmHWM").get("VmHWM", 0) / 1024
        finally:
            if sampler:
                sampler.stop()

    if args.browser_cpus:  # Playwright's driver and Chromium inherit it (and so does this script)
        os.sched_setaffinity(0, args.browser_cpus)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
        )
        try:
            if args.url:
                pid = args.server_pid or pid_listening_on(urllib.parse.urlsplit(args.url).port or 80)
                if not pid:
                    progress("server pid not found: no memory figures (give --server-pid)")
                await measure(args.url.rstrip("/"), pid, not args.skip_tour, True)
            else:
                if not args.skip_tour:
                    with app_server(server_env, log_path, args.server_cpus) as (url, pid):
                        await measure(url, pid, True, False)
                if args.sessions:
                    with app_server(server_env, log_path, args.server_cpus) as (url, pid):
                        await measure(url, pid, False, True)
                results["server_log"] = server_log_summary(log_path)
        finally:
            await browser.close()
    return results


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sessions",
        default="1,10,30",
        type=lambda text: [int(n) for n in text.split(",") if n.strip()],
        help="comma-separated N, one phase each, in order (default 1,10,30)",
    )
    parser.add_argument("--seconds", type=float, default=120.0, help="activity per session in each phase (default 120)")
    parser.add_argument(
        "--protocol",
        action="store_true",
        help="sessions speak Streamlit's websocket protocol from this process (no browser), against a "
        f"server this script starts; up to {MAX_PROTOCOL_SESSIONS} sessions",
    )
    parser.add_argument(
        "--stagger", type=float, help="seconds between session starts (default 0.5 in Chromium, 0.1 with --protocol)"
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="with --protocol: this many servers on one runs directory, each session staying with one "
        "(as behind a sticky proxy; default 1)",
    )
    parser.add_argument(
        "--proxy",
        action="store_true",
        help="with --protocol: the servers are symlab serve's class server, --replicas page processes behind "
        "HAProxy, and every session drives the proxy's address, kept on its process by the proxy's cookie",
    )
    parser.add_argument(
        "--slowest-machine",
        action="store_true",
        help="with --protocol: the servers (and all they start) under a CPU quota (a cgroup, as root) of this "
        f"machine's cores scaled by its rates against the slowest machine's ({SLOWEST_RATES['matmul_gflops']:g} "
        f"GFLOP/s, {SLOWEST_RATES['elements_g_per_s']:g} G elements/s): the larger slow-down of the two",
    )
    parser.add_argument(
        "--slowest-by",
        default=",".join(RATE_NAMES),
        choices=[",".join(RATE_NAMES), "matmul_gflops", "elements_g_per_s"],
        help="with --slowest-machine: the rates the quota follows (default both, the larger slow-down); "
        "matmul_gflops where this machine's element rate is far above its products' (the page runs follow the "
        "products there)",
    )
    parser.add_argument(
        "--uploaders",
        type=int,
        default=0,
        help="with --protocol: this many more sessions upload a 16 MB network on the symmetry "
        "explorer, one upload after another, throughout each phase (default 0)",
    )
    parser.add_argument(
        "--runs-dir",
        type=Path,
        default=None,
        help="with --proxy: the servers' runs directory, kept (a result store warmed by symlab warm, to measure a "
        "warm server; default: a new one, removed after)",
    )
    parser.add_argument(
        "--kill-after",
        type=float,
        default=None,
        metavar="S",
        help="with --proxy: kill the first page process (SIGKILL) S seconds into each phase; its sessions connect "
        "again through the proxy, as the frontend does, and each whose controls then show other values has lost "
        "its state",
    )
    parser.add_argument(
        "--flooders",
        type=int,
        default=0,
        metavar="K",
        help="with --protocol: K more sessions, all tabs of one browser (one cookie), open heavy links with new "
        "seeds (align, symmetry, toy and modes with their 3-D landscape, methods) one after another throughout; "
        "the latencies and results are the N students' (default 0)",
    )
    parser.add_argument(
        "--players",
        type=int,
        default=0,
        metavar="K",
        help="with --protocol: K of the N sessions open a page with a player (toy, modes, align, "
        "symmetry in turn) and keep it playing throughout; the others are students as usual, "
        "and the latencies are theirs",
    )
    parser.add_argument(
        "--players-still",
        action="store_true",
        help="the --players sessions open their pages but never press Play: the baseline",
    )
    parser.add_argument(
        "--no-settle",
        action="store_true",
        help="with --protocol: the class arrives the moment the server answers, during its warm-up "
        "(default: once its page processes are quiet, as for a server started before class)",
    )
    parser.add_argument(
        "--play-seconds",
        type=float,
        default=10.0,
        help="with --protocol: how long a student watches after Play before Pause (default 10)",
    )
    parser.add_argument(
        "--toy-prob",
        type=float,
        default=0.5,
        help="chance of a /toy visit after each block of slider moves (the first block always)",
    )
    parser.add_argument("--timeout", type=float, default=15.0, help="seconds an update may take (default 15)")
    parser.add_argument("--nav-timeout", type=float, default=30.0, help="seconds a page may take to draw (default 30)")
    parser.add_argument("--tour-play", type=float, default=5.0, help="seconds of live training in the tour")
    parser.add_argument("--skip-tour", action="store_true", help="skip the one-session tour of every page")
    parser.add_argument("--url", help="an already running SymLab server (no server is started)")
    parser.add_argument("--server-pid", type=int, help="with --url: the server's pid, for memory figures")
    parser.add_argument("--hosted", action="store_true", help="start the server with SYMLAB_HOSTED=1")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable for the started server (repeatable)",
    )
    parser.add_argument(
        "--server-cpus",
        type=cpu_list,
        metavar="LIST",
        help="pin the started server to these CPUs, e.g. 0 or 0-1 (default: all)",
    )
    parser.add_argument(
        "--browser-cpus",
        type=cpu_list,
        metavar="LIST",
        help="pin Chromium (and this script) to these CPUs, e.g. 1 (default: all)",
    )
    parser.add_argument("--server-log", help="file for the started server's output (default: a temporary file)")
    parser.add_argument("--sample-interval", type=float, default=0.5, help="seconds between /proc samples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--json",
        nargs="?",
        const="-",
        metavar="PATH",
        help="also the results as JSON: one line after the table, or into PATH",
    )
    args = parser.parse_args(argv)
    if args.stagger is None:
        args.stagger = 0.1 if args.protocol else 0.5
    if args.protocol and args.url:
        parser.error("--protocol drives only a server it starts itself on localhost; not with --url")
    if args.replicas < 1 or (args.replicas > 1 and not args.protocol):
        parser.error("--replicas: a whole number >= 1, with --protocol")
    if (args.proxy or args.slowest_machine) and not args.protocol:
        parser.error("--proxy and --slowest-machine go with --protocol")
    if args.runs_dir is not None and not args.proxy:
        parser.error("--runs-dir goes with --proxy")
    if args.kill_after is not None and not args.proxy:
        parser.error("--kill-after goes with --proxy (a killed process is started again by symlab serve's supervisor)")
    most = MAX_PROTOCOL_SESSIONS if args.protocol else MAX_BROWSER_SESSIONS
    if any(n < 1 or n > most for n in args.sessions):
        parser.error(f"--sessions: each N in 1..{most}{'' if args.protocol else ' (more with --protocol)'}")
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds: in (0, {MAX_SECONDS}]")
    server_env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--env wants KEY=VALUE, not {item!r}")
        server_env[key] = value
    if args.hosted:
        server_env["SYMLAB_HOSTED"] = "1"
    if args.url and (server_env or args.server_cpus):
        parser.error("--env, --hosted and --server-cpus configure a server this script starts; not with --url")
    return args, server_env


def main(argv=None):
    args, server_env = parse_args(argv)
    if args.protocol:
        results = protocol_summary(run_protocol(args, server_env))
        print(protocol_report(results))
    else:
        results = asyncio.run(run_all(args, server_env))
        print(report(results))
    if args.json == "-":
        print(json.dumps(results, default=str))
    elif args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str) + "\n")


if __name__ == "__main__":
    main()
