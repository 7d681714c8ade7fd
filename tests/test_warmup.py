"""The server's warm-up (serve.py, symlab/warmup.py): the default links' results are ready before the
first visitor."""

import threading
import time

import pytest
from pagetest import open_page

from symlab.labs import LABS
from symlab.lib import mnist_data
from symlab.serving import warmup

pytestmark = pytest.mark.slow

WARMED = [lab for lab in LABS if lab.tasks]


def test_warm_up_computes_what_each_default_link_asks_for(fresh_results):
    assert {lab.name for lab in WARMED} >= {"align", "symmetry"}
    # In a thread of its own, as the server runs it: it lowers its thread's priority.
    thread = threading.Thread(target=warmup.warm_up)
    thread.start()
    thread.join()
    tasks = [task for lab in WARMED for task in lab.page_tasks(lab.default_values())]
    deadline = time.monotonic() + 300
    while not all(task.key in fresh_results for task in tasks):
        assert time.monotonic() < deadline, "the warm-up did not finish"
        time.sleep(0.5)
    submitted = fresh_results.tasks_submitted
    for lab in WARMED:
        at = open_page(lab.name)
        assert not at.exception and not at.error
    # The pages asked for exactly the warmed keys: nothing new was computed in a worker.
    assert fresh_results.tasks_submitted == submitted


def test_the_mnist_check_is_made_before_the_first_visit_and_kept(monkeypatch):
    mnist_data._checked.cache_clear()
    warmup.check_data_files()
    monkeypatch.setattr(mnist_data, "check_mnist", lambda directory: ["read again"])
    assert mnist_data.check_mnist_once() == []  # what the page asks on every run: kept from the warm-up


def test_a_first_visit_opens_every_page_over_the_server_own_websocket():
    from conftest import app_process

    with app_process() as (url, _):
        pages = ["", *(lab.name for lab in LABS)]
        seconds = warmup.visit_pages(url.replace("http://", "ws://") + "/_stcore/stream", pages, timeout=120)
    assert list(seconds) == pages and all(0 < s < 120 for s in seconds.values())


def test_the_server_stream_is_found_from_its_settings(monkeypatch):
    from streamlit import config

    options = {"server.address": "0.0.0.0", "server.port": 8765, "server.baseUrlPath": "/class/"}
    monkeypatch.setattr(config, "get_option", options.get)
    assert warmup._server_stream_url() == "ws://127.0.0.1:8765/class/_stcore/stream"
    options.update({"server.address": "10.0.0.5", "server.baseUrlPath": ""})
    assert warmup._server_stream_url() == "ws://10.0.0.5:8765/_stcore/stream"


def test_warming_before_class_stores_the_idle_pools_guesses_once(tmp_path, monkeypatch):
    """symlab serve --warm: what the idle pool would compute, stored before the server opens; a second warming
    finds it all stored."""
    from symlab.serving import store

    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path))
    likely = warmup.likely_tasks()
    assert len(likely) > 100  # every preset and its neighbours, each lab
    rates = warmup.shared_results.measured_rates()
    cheapest = sorted(likely, key=lambda task: task.cost.floor_seconds(rates))[:3]
    seen = []
    report = warmup.warm_store(2, cheapest, progress=lambda done, total: seen.append((done, total)))
    assert (report["results"], report["computed"], report["failed"]) == (3, 3 - report["stored_already"], 0)
    assert seen[0] == (0, report["computed"]) and seen[-1] == (report["computed"], report["computed"])
    results = store.ResultStore(tmp_path)
    assert results.keys_present(task.key for task in cheapest) == {task.key for task in cheapest}
    again = warmup.warm_store(1, cheapest)
    assert (again["computed"], again["stored_already"]) == (0, 3)


def test_a_warm_up_the_servers_stop_cuts_short_is_not_logged_as_a_failure(caplog, monkeypatch):
    """Closing its connections first, a stopping server cut the first visits short ("received 1012 (service
    restart)"), which the log showed as "warm-up failed" with a traceback."""
    monkeypatch.setattr(warmup, "STOP_NOTICE_SECONDS", 2.0)

    def cut_short():
        raise ConnectionError("received 1012 (service restart)")

    stopping = threading.Event()
    threading.Timer(0.2, stopping.set).start()  # the lifespan's end comes after the connections close
    with caplog.at_level("INFO", logger=warmup.LOG.name):
        warmup._logged(cut_short, stopping)()
    assert "cut short as the server stops" in caplog.text and "warm-up failed" not in caplog.text
    caplog.clear()
    with caplog.at_level("INFO", logger=warmup.LOG.name):
        warmup._logged(cut_short, threading.Event())()  # no stop follows: a failure
    assert "warm-up failed" in caplog.text and caplog.records[-1].exc_info is not None
