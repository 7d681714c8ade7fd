"""Shared results (symlab/shared_results.py): computed once, in worker processes, dropped when nobody waits."""

import multiprocessing.spawn
import subprocess
import sys
import threading
import time
import types
from concurrent.futures import CancelledError, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

import jobtasks
import pytest

from symlab.serving import shared_results, waiting
from symlab.specs.tasks import Task

pytestmark = pytest.mark.slow


@pytest.fixture
def results():
    store = shared_results.SharedResults(capacity=8, workers=1)
    yield store
    store.shutdown()


def test_concurrent_identical_computations_run_once():
    store, calls, started = shared_results.SharedResults(), [], threading.Event()

    def slow():
        calls.append(1)
        started.set()
        time.sleep(0.3)
        return "value"

    values = []
    threads = [threading.Thread(target=lambda: values.append(store.compute("k", slow))) for _ in range(5)]
    threads[0].start()
    started.wait(5)
    for thread in threads[1:]:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert values == ["value"] * 5 and len(calls) == 1
    assert store.compute("k", lambda: "other") == "value"


def test_a_failure_reaches_every_waiter_and_is_not_stored():
    store = shared_results.SharedResults()
    with pytest.raises(ValueError):
        store.compute("k", jobtasks.failing)
    assert "k" not in store and store.compute("k", lambda: 3) == 3


def test_the_least_recently_used_result_of_each_kind_is_dropped():
    store = shared_results.SharedResults(capacity=2)
    store.compute(("trained", 0), lambda: "kept")
    for frame in range(5):
        store.compute(("frame", frame), lambda: frame, capacity=3)
    store.compute(("trained", 1), lambda: 1)
    store.compute(("trained", 0), lambda: "recomputed")  # used again: now the most recent
    store.compute(("trained", 2), lambda: 2)
    assert [("frame", f) in store for f in range(5)] == [False, False, True, True, True]
    assert ("trained", 0) in store and ("trained", 1) not in store and ("trained", 2) in store
    assert store.get(("trained", 0)) == "kept"


def test_a_task_runs_in_a_worker_once_for_every_waiter(results):
    task = Task(("counted",), jobtasks.counted, (3, 0.3), "Counting")
    first, second = results.submit(task, "alice"), results.submit(task, "bob")
    assert first is second and first.waiters == {"alice", "bob"}
    seen = set()
    while not first.future.done():
        if first.progress.payload:
            seen.add(first.progress.payload["step"])
        time.sleep(0.05)
    pid = first.future.result(timeout=60)
    assert pid != __import__("os").getpid()
    assert seen and seen <= {1, 2, 3} and first.progress.text.startswith("step")
    assert results.get(task.key) == pid and results.submit(task, "carol").future.result() == pid


def test_workers_yield_the_cores_to_the_server(results):
    assert (
        results.submit(Task(("nice",), jobtasks.niceness), "w").future.result(timeout=60)
        == shared_results.COMPUTE_NICENESS
    )


def test_a_queued_task_nobody_waits_for_is_dropped(results, tmp_path):
    busy = results.submit(Task(("busy",), jobtasks.counted, (2, 0.5)), "alice")
    trace = tmp_path / "ran"
    queued = results.submit(Task(("marked",), jobtasks.marked, (str(trace),)), "bob")
    assert results.wait(queued).ahead == 1
    results.release(queued, "bob")  # bob moved a slider: his old setting is not trained
    assert queued.future.cancelled()
    busy.future.result(timeout=60)
    time.sleep(0.5)
    assert not trace.exists() and ("marked",) not in results


def test_a_running_task_goes_on_for_its_other_waiters(results):
    task = Task(("shared",), jobtasks.counted, (2, 0.3))
    job = results.submit(task, "alice")
    results.submit(task, "bob")
    results.release(job, "alice")
    assert job.future.result(timeout=60) and task.key in results and job.dropped is None


def test_a_browser_waits_for_one_computation_its_newest(results):
    """A student's tabs share one place in the queue: a newer request from any of them replaces the older one,
    unless another browser waits for it too."""
    busy = results.submit(Task(("busy",), jobtasks.counted, (2, 0.5)), "teacher")
    first = results.submit(Task(("square", 2), jobtasks.square, (2,)), "tab 1", browser="flood")
    shared = results.submit(Task(("square", 3), jobtasks.square, (3,)), "tab 2", browser="flood")
    results.submit(Task(("square", 3), jobtasks.square, (3,)), "alice", browser="alice")
    assert first.future.cancelled() and first.dropped == "replaced" and ("square", 2) not in results
    newest = results.submit(Task(("square", 4), jobtasks.square, (4,)), "tab 3", browser="flood")
    assert not shared.future.cancelled() and shared.waiters == {"alice"}  # alice still waits for it
    assert newest.future.result(timeout=60) == 16 and shared.future.result(timeout=60) == 9
    busy.future.result(timeout=60)


def test_the_pool_serves_browsers_in_turn_not_in_arrival_order(results):
    """A browser served a moment ago waits behind one that has not been served yet, whatever came first."""
    first = results.submit(Task(("busy", "flood"), jobtasks.counted, (2, 0.4)), "tab 1", browser="flood")
    again = results.submit(Task(("square", 5), jobtasks.square, (5,)), "tab 2", browser="flood")
    other = results.submit(Task(("square", 6), jobtasks.square, (6,)), "alice", browser="alice")
    assert results.wait(other).ahead == 1 and results.wait(again).ahead == 2  # the running one; then alice's
    assert again.future.result(timeout=60) == 25 and other.future.result(timeout=60) == 36
    assert first.started < other.started < again.started


def test_a_failed_task_is_reported_and_not_stored(results):
    job = results.submit(Task(("failing",), jobtasks.failing), "w")
    with pytest.raises(ValueError, match="no such luck"):
        job.future.result(timeout=60)
    assert ("failing",) not in results


def test_a_dead_worker_fails_its_task_and_the_next_task_gets_a_new_pool(results):
    job = results.submit(Task(("dying",), jobtasks.dying), "w")
    with pytest.raises(BrokenProcessPool):
        job.future.result(timeout=60)
    assert results.submit(Task(("square", 7), jobtasks.square, (7,)), "w").future.result(timeout=60) == 49


@pytest.fixture
def page(tmp_path):
    """A page as Streamlit installs it for a page run: a __main__ module with a file, which leaves
    ``main ran`` beside it if anything runs it."""
    script = tmp_path / "page.py"
    script.write_text(f"open({str(tmp_path / 'main ran')!r}, 'w').write('ran')\n")
    module = types.ModuleType("__main__")
    module.__file__ = str(script)
    return module


def test_a_worker_does_not_run_the_servers_main_script(results, page, tmp_path, monkeypatch):
    # Streamlit makes the page being run the __main__ module; a worker started now must not run it.
    monkeypatch.setitem(sys.modules, "__main__", page)
    assert results.submit(Task(("square", 3), jobtasks.square, (3,)), "w").future.result(timeout=60) == 9
    assert not (tmp_path / "main ran").exists()


def test_a_page_run_starting_as_a_worker_starts_does_not_run_in_it(results, page, tmp_path, monkeypatch):
    # Another session's page run may install its page as __main__ at the very instant a worker starts,
    # after anything the pool could do first: the worker still skips it.
    preparation_data = multiprocessing.spawn.get_preparation_data

    def page_run_starts_now(name):
        sys.modules["__main__"] = page
        return preparation_data(name)

    monkeypatch.setitem(sys.modules, "__main__", sys.modules["__main__"])  # put back afterwards
    monkeypatch.setattr(multiprocessing.spawn, "get_preparation_data", page_run_starts_now)
    assert results.submit(Task(("square", 4), jobtasks.square, (4,)), "w").future.result(timeout=60) == 16
    assert not (tmp_path / "main ran").exists()


def test_shutdown_cancels_what_is_queued():
    store = shared_results.SharedResults(workers=1)
    busy = store.submit(Task(("busy",), jobtasks.counted, (3, 0.3)), "a")
    queued = store.submit(Task(("square", 2), jobtasks.square, (2,)), "b")
    while not busy.progress.done:  # the worker has started
        time.sleep(0.05)
    store.shutdown()
    with pytest.raises(CancelledError):
        queued.future.result(timeout=10)


def test_workers_leave_when_the_server_is_killed(tmp_path):
    # A server killed outright cannot shut its pool down: its workers must not live on without it.
    script = tmp_path / "server.py"
    script.write_text(
        "import os, sys, time\n"
        "sys.path[:0] = [sys.argv[1], sys.argv[2]]\n"
        "import jobtasks\n"
        "from symlab.serving import shared_results\n"
        "from symlab.specs.tasks import Task\n"
        "store = shared_results.SharedResults(workers=1)\n"
        "print(store.submit(Task(('pid',), jobtasks.counted, (1, 0.01)), 'w').future.result(timeout=60), flush=True)\n"
        "time.sleep(60)\n"
    )
    server = subprocess.Popen(
        [
            sys.executable,
            str(script),
            str(shared_results.__file__).rsplit("/symlab/", 1)[0],
            str(Path(jobtasks.__file__).parent),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    worker = int(server.stdout.readline())
    assert process_alive(worker)
    server.kill()
    server.wait()
    deadline = time.monotonic() + 10
    while process_alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not process_alive(worker)


def process_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_page_answers_at_once_and_draws_the_result_when_it_comes(monkeypatch):
    from streamlit.testing.v1 import AppTest

    from views.common import computing

    monkeypatch.setattr(computing, "WAIT_IN_RUN_SECONDS", 0.05)
    results = shared_results.SharedResults(workers=1)
    monkeypatch.setattr(shared_results, "_shared", results)

    def page():
        import jobtasks
        import streamlit as st

        from symlab.specs.tasks import Task
        from views.common import computing

        st.write(f"result {computing.computed(Task(('counted', 4), jobtasks.counted, (4, 0.3), 'Counting'))}")

    try:
        started = time.monotonic()
        at = AppTest.from_function(page, default_timeout=60).run()
        assert time.monotonic() - started < 5 and not at.exception  # the run ended while the task still ran
        pending = [p for p in at.get("progress") if p.proto.text.startswith(waiting.PENDING)]
        assert pending and not any("result" in m.value for m in at.markdown)
        job = next(iter(results._jobs.values()))
        assert job.future.result(timeout=60)
        at.run()  # what the waiting panel does once the job is done
        assert any(m.value == f"result {job.future.result()}" for m in at.markdown)
        assert not [p for p in at.get("progress") if p.proto.text.startswith(waiting.PENDING)]
    finally:
        results.shutdown()


def test_a_pool_stopped_ends_its_running_task_at_once():
    """A server's stop ends the tasks under way with their workers: a pool left to finish them held its exit."""
    executor = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork"))
    running, queued = executor.submit(time.sleep, 60), executor.submit(time.sleep, 60)
    deadline = time.monotonic() + 30
    while not running.running() and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    shared_results.stop_pool(executor)
    with pytest.raises(BrokenProcessPool):
        running.result(timeout=10)
    assert queued.cancelled() or isinstance(queued.exception(timeout=10), BrokenProcessPool)
    assert time.monotonic() - started < 10
