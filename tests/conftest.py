"""Shared fixtures: a live SymLab server for the browser tests."""

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import fast_lane
import prerequisites
import pytest
from hypothesis import settings

from symlab.labs import run_kinds
from symlab.runs.registry import Registry

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("SYMLAB_CHROMIUM", "/usr/bin/chromium")
# Chromium without its own background traffic (updates, sync, first-run pages): every request the tests see is the app's.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# The session's runs and stored results in a directory of its own: never a checkout's runs/, and never
# results stored by an earlier session (what a test computes, it computes).
os.environ["SYMLAB_RUNS_DIR"] = tempfile.mkdtemp(prefix="symlab-test-runs-")

# Hypothesis: by default new examples each run, and failures kept in .hypothesis/ and replayed first. No
# deadline: the tests look for errors, not speed, and a loaded machine would make one flaky. CI selects
# "ci" (HYPOTHESIS_PROFILE=ci or --hypothesis-profile=ci): the same examples every run, nothing written,
# and a failure printed with the blob that reproduces it (@reproduce_failure).
settings.register_profile("default", settings.get_profile("default"), deadline=None)
settings.register_profile("ci", settings.get_profile("default"), derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", settings.get_current_profile_name()))


def fixtures_used(item) -> set[str]:
    """The fixtures ``item`` uses, with the throwaway PostgreSQL server where its ``database`` is PostgreSQL."""
    used = set(getattr(item, "fixturenames", ()))
    if getattr(getattr(item, "callspec", None), "params", {}).get("database") == "postgresql":
        used.add("postgres_server_url")
    return used


def pytest_configure(config):
    fast_lane.register(config)  # the fast lane's time against its budget (tests/fast_lane.py)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark slow, before -m selects, every test that uses a server of its own (the browser's app, PostgreSQL),
    wherever it stands. Whole slow files say so themselves (``pytestmark = pytest.mark.slow``)."""
    for item in items:
        if fixtures_used(item) & {"server_url", "postgres_server_url"}:
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session):
    """Before the first test: find or install what the selected tests need (tests/prerequisites.py); where that
    cannot be done, stop with one line. Collecting alone (--collect-only) runs nothing, so it installs nothing."""
    if session.config.option.collectonly:
        return
    needs = prerequisites.missing(set().union(*map(fixtures_used, session.items)) if session.items else set())
    if needs:
        problem = prerequisites.install(needs)
        if problem:
            pytest.exit(problem, returncode=pytest.ExitCode.USAGE_ERROR)


@pytest.fixture(scope="session")
def bnn_libraries():
    """bayesian-torch and BLiTZ, installed (tests/prerequisites.py sees this fixture's name)."""


@pytest.fixture(scope="session")
def fonts_installed():
    """The DejaVu and Liberation fonts the letters are rendered from, installed (tests/prerequisites.py)."""


def run_coroutine(coroutine):
    """``asyncio.run(coroutine)`` on its own event loop, in its own thread: Playwright's sync API (the
    browser tests, in this same session) leaves an event loop running in the main thread, where
    asyncio.run refuses."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, coroutine).result()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AppDidNotStart(RuntimeError):
    pass


@contextlib.contextmanager
def app_process(
    env: dict | None = None,
    log_path: Path | None = None,
    cpus: list[int] | None = None,
    root: Path = ROOT,
    script: str = "serve.py",
    preexec=None,
):
    """``streamlit run serve.py`` (the app, warmed as it starts; ``script`` and ``root``: another
    entry point or checkout) on a free port with ``env`` added to its environment, its output
    appended to ``log_path`` (default: a temporary file; a pipe nobody reads would stall a chatty
    server) and, with ``cpus``, pinned to those CPUs; yields (url, process) once it is healthy."""
    port = _free_port()
    log_path = Path(log_path or tempfile.mkstemp(prefix="symlab-server-", suffix=".log")[1])
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "streamlit",
                "run",
                str(root / script),
                "--server.port",
                str(port),
                "--server.address",
                "127.0.0.1",
                "--server.headless",
                "true",
                "--server.fileWatcherType",
                "none",
                "--browser.gatherUsageStats",
                "false",
            ],
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            preexec_fn=(lambda: _before_exec(cpus, preexec)) if cpus or preexec else None,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                    break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise AppDidNotStart(f"the app did not start:\n{log_path.read_text(errors='replace')[-5000:]}")
            time.sleep(0.3)
        yield url, process
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _before_exec(cpus, preexec) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)
    if preexec:
        preexec()


@contextlib.contextmanager
def running_app(runs_dir=None):
    """A fresh ``streamlit run serve.py`` on a free port, keeping MNIST runs in ``runs_dir`` (default:
    a new temporary directory); yields its base URL."""
    runs_dir = str(runs_dir or tempfile.mkdtemp(prefix="symlab-runs-"))
    try:
        with app_process({"SYMLAB_RUNS_DIR": runs_dir}) as (url, _):
            yield url
    except AppDidNotStart as error:
        pytest.fail(str(error))


@pytest.fixture
def registry(tmp_path, monkeypatch):
    """An empty run registry in a fresh runs directory, where the pages and commands find it too
    ($SYMLAB_RUNS_DIR)."""
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "runs"))
    return Registry(run_kinds())


@pytest.fixture(scope="session")
def server_runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("runs")


@pytest.fixture(scope="session")
def server_url(server_runs_dir):
    with running_app(server_runs_dir) as url:
        yield url


@pytest.fixture(scope="session")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: install it with `apt-get install -y chromium`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=CHROMIUM_ARGS,
        )
        yield browser
        browser.close()


# Browser console and network errors: every page a browser test opens is watched, and the test fails
# at teardown on anything unexpected (see BrowserErrors).
# No console error is allowed, and no Vega warning (Vega-Lite logs a chart it draws other than it was written as
# console warnings that start "WARN": an empty layer's infinite extent, a dropped scale setting). The pages carry
# the server's address (symlab/serving/base_url.py), so Streamlit's frontend no longer probes /<page>/_stcore/health
# and /<page>/_stcore/host-config before the root: those 404s are errors like any other.
VEGA_WARNING = "WARN "
LOCAL_HOSTS = ("127.0.0.1", "localhost")
IDLE_QUIET_S = 0.5  # how long no request may start before the network counts as idle


class BrowserErrors:
    """Collects, across browser contexts, uncaught page errors, console errors, failed requests, HTTP
    errors from the app's own server, and any request to another host (the app must work on a classroom
    network without internet: no CDN, fonts or icons from elsewhere)."""

    def __init__(self):
        self.errors: list[str] = []
        self.in_flight: set = set()
        self.last_request = time.monotonic()

    def watch(self, context) -> None:
        context.on("weberror", lambda error: self.errors.append(f"uncaught page error: {error.error}"))
        context.on("console", self._console)
        context.on("request", self._request)
        context.on("requestfinished", lambda request: self.in_flight.discard(request))
        context.on("requestfailed", self._request_failed)
        context.on("response", self._response)

    def wait_for_idle_network(self, page, timeout_s: float = 30) -> None:
        """Wait until no request is in flight (the frontend loads element code lazily): a test that
        navigates or reloads first, so that the requests its navigation would cancel (net::ERR_ABORTED)
        do not read as failures. Idle means for a moment (``IDLE_QUIET_S``): a request the page starts just as the
        last one ends (a font its text has just asked for) counts too, and Playwright delivers its events only while
        the test waits."""
        deadline = time.monotonic() + timeout_s
        while True:
            page.wait_for_timeout(50)  # lets Playwright deliver the pending events
            if not self.in_flight and time.monotonic() - self.last_request >= IDLE_QUIET_S:
                return
            assert time.monotonic() < deadline, f"requests still in flight: {[r.url for r in self.in_flight]}"

    def _console(self, message) -> None:
        url = message.location.get("url", "")
        if message.type == "error" or (message.type == "warning" and message.text.startswith(VEGA_WARNING)):
            self.errors.append(f"console {message.type}: {message.text} (at {url or 'no location'})")

    def _request(self, request) -> None:
        self.in_flight.add(request)
        self.last_request = time.monotonic()
        parts = urlsplit(request.url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname not in LOCAL_HOSTS:
            self.errors.append(f"request to an external host: {request.method} {request.url}")

    def _request_failed(self, request) -> None:
        self.in_flight.discard(request)
        self.errors.append(f"request failed: {request.method} {request.url}: {request.failure}")

    def _response(self, response) -> None:
        own = urlsplit(response.url).hostname in LOCAL_HOSTS
        if own and response.status >= 400:
            self.errors.append(f"HTTP {response.status}: {response.request.method} {response.url}")


@pytest.fixture
def browser_errors():
    return BrowserErrors()


@pytest.fixture
def new_page(browser, server_url, browser_errors):
    """Opens pages, each in a fresh browser context (no shared session or cookies); at teardown, checks
    that no open app page shows a Streamlit exception and that no browser errors were seen."""
    contexts = []

    def open_page():
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        browser_errors.watch(context)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        return page

    yield open_page
    try:
        for context in contexts:
            for page in context.pages:
                if page.url.startswith("http"):
                    exceptions = page.locator('[data-testid="stException"]')
                    assert exceptions.count() == 0, (
                        f"Streamlit exception on {page.url}:\n{exceptions.first.inner_text()}"
                    )
        assert not browser_errors.errors, "browser errors:\n" + "\n".join(browser_errors.errors)
    finally:
        for context in contexts:
            context.close()


@pytest.fixture
def page(new_page):
    return new_page()


@pytest.fixture(scope="module")
def one_torch_thread():
    """As app.py sets for the server (SYMLAB live.torch_threads = 1), which AppTest does not run: with two
    threads on this 2-core machine the batched perceptron training is now and then ~30× slower."""
    import torch  # here, not at the top: the browser tests' servers and helpers never need it

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def haproxy():
    """HAProxy's path (tests/prerequisites.py installs Debian's haproxy where it is missing)."""
    from symlab.serving.proxy import find_haproxy

    return find_haproxy()


@pytest.fixture(scope="session")
def postgres_server_url():
    """A throwaway PostgreSQL server for this test session (tests/postgres.py)."""
    from postgres import PostgresMissing, postgres_server

    try:
        with postgres_server() as url:
            yield url
    except PostgresMissing as error:
        pytest.fail(str(error))


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path, monkeypatch):
    """Each run-registry test twice: on the SQLite file in its runs directory, and on a fresh database of the
    throwaway PostgreSQL server (SYMLAB_DATABASE_URL, which the workers it starts inherit)."""
    monkeypatch.delenv("SYMLAB_DATABASE_URL", raising=False)
    if request.param == "postgresql":
        from postgres import fresh_database

        name = "t_" + "".join(c if c.isalnum() else "_" for c in request.node.name.lower())[-50:]
        monkeypatch.setenv("SYMLAB_DATABASE_URL", fresh_database(request.getfixturevalue("postgres_server_url"), name))
    return request.param


@pytest.fixture
def fresh_results(monkeypatch):
    """An empty shared-results store with one worker process, as this server's (symlab.serving.shared_results.shared())."""
    from symlab.serving import shared_results

    store = shared_results.SharedResults(workers=1)
    monkeypatch.setattr(shared_results, "_shared", store)
    yield store
    store.shutdown()


@pytest.fixture(autouse=True)
def pages_wait_in_their_run(monkeypatch):
    """AppTest runs no fragment, so a page's waiting panel would never draw its result: pages under AppTest
    wait for their computations within the run, as long as they take. (tests/test_jobs.py checks the
    waiting panel itself.)"""
    from views.common import computing

    monkeypatch.setattr(computing, "WAIT_IN_RUN_SECONDS", 600.0)
