"""Results shared beyond one process and one start: a server's results outlive it, and two servers on one
PostgreSQL database serve each other's (as replicas behind a sticky proxy would). Each server here is a real
``streamlit run serve.py``, visited at the protocol level (benchmarks/streamlit_protocol.py)."""

import sys
from pathlib import Path

import pytest
from conftest import app_process, run_coroutine

from symlab.labs.symmetry.experiment import ProximityConfig
from symlab.serving import store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from streamlit_protocol import Session  # noqa: E402

pytestmark = pytest.mark.slow
# A link whose result no server ships or computes in idle time (two steps from any preset).
PAGE, QUERY = "symmetry", "part=proximity&d_in=3&max_width=256"
KEY = ("proximity", ProximityConfig(widths=(2, 4, 8, 16, 32, 64, 128, 256), d_in=3))
QUIET = {"SYMLAB_IDLE_WORKERS": "0"}  # nothing computed but what the visits ask for


async def visit(url: str) -> None:
    """Open the link and wait until its page shows the result."""
    session = Session(url, timeout=120)
    await session.connect()
    try:
        await session.open(PAGE, QUERY)
        if session.answered[-1].waited:
            assert await session.result(120) is not None
        assert not session.errors, session.messages
    finally:
        await session.close()


def written(results: store.ResultStore) -> list:
    """When each stored result was written: a result computed again is written again."""
    with results._connection() as connection:
        return [tuple(row) for row in connection.execute("SELECT key, created FROM results ORDER BY key").fetchall()]


def test_a_result_survives_a_restart_of_the_server(tmp_path):
    env = {**QUIET, "SYMLAB_RUNS_DIR": str(tmp_path / "runs")}
    results = store.ResultStore(tmp_path / "runs")
    log = tmp_path / "first.log"
    with app_process(env, log_path=log) as (url, first):
        run_coroutine(visit(url))
    assert KEY in results  # computed by this server, in the runs directory's store
    # Stopped by SIGTERM (app_process), it ended as Python ends: its worker pool's semaphores unlinked (uvicorn
    # raised the signal again and the process died of it, the resource tracker warning of 8 "leaked semaphore
    # objects"), and nothing reads as a failure.
    stopped = log.read_text()
    assert first.returncode == 0 and "leaked semaphore" not in stopped and "Traceback" not in stopped, stopped[-2000:]
    before = written(results)
    with app_process(env) as (url, _):
        run_coroutine(visit(url))
    assert written(results) == before  # read back, not computed again


def test_two_servers_on_one_database_serve_each_others_results(tmp_path, postgres_server_url):
    from postgres import fresh_database

    database = fresh_database(postgres_server_url, "replicas")
    env = {**QUIET, "SYMLAB_DATABASE_URL": database, "SYMLAB_RUNS_DIR": str(tmp_path / "runs")}
    shared = store.ResultStore(tmp_path / "elsewhere", url=database)
    with app_process(env) as (first, _), app_process(env) as (second, _):
        run_coroutine(visit(first))
        assert KEY in shared
        before = written(shared)
        run_coroutine(visit(second))
        assert written(shared) == before  # the second server served the first one's result
