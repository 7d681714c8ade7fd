"""The browser's waiting panel: where a computation stands, asked by token at the server's route
(symlab/serving/waiting.py), and the page's side of it (views/common/computing.py)."""

import concurrent.futures
import json

import pytest
from asgi import get
from starlette.applications import Starlette

from symlab.serving import shared_results, waiting
from symlab.specs.tasks import Progress, Task
from views.common import computing


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class FakeResults:
    """What a watch asks of the shared results: where a job stands, and that its waiter still waits."""

    def __init__(self, wait=shared_results.Wait(2, 7.4)):
        self.touched, self.waits = [], wait

    def touch(self, job, waiter):
        self.touched.append((job, waiter))

    def wait(self, job):
        return self.waits


def a_job(key=("kind", 1), done=None, dropped=None) -> shared_results.Job:
    future = concurrent.futures.Future()
    if isinstance(done, BaseException):
        future.set_exception(done)
    elif done == "cancelled":
        future.cancel()
    elif done is not None:
        future.set_result(done)
    return shared_results.Job(key, "Training", future, dropped=dropped)


def get_json(app, path: str) -> tuple[int, dict, dict]:
    status, headers, body = get(app, path)
    return status, headers, json.loads(body)


def test_the_wait_text_says_where_the_request_stands():
    queued = waiting.wait_text("Training", Progress(), shared_results.Wait(2, 7.4))
    assert queued == f"{waiting.PENDING} Training: queued behind 2 computations of other visitors (about 7 s left)"
    running = waiting.wait_text("Training", Progress(3, 10, "Adam step 3 / 10"), shared_results.Wait(0, 0.2))
    assert running == f"{waiting.PENDING} Adam step 3 / 10 (about 1 s left)"
    assert waiting.wait_text("Training", Progress(), shared_results.Wait(0, None)) == f"{waiting.PENDING} Training"


def test_a_token_names_one_waiters_job_on_every_run_and_each_ask_keeps_it_alive():
    watches, results, job = waiting.Watches(Clock()), FakeResults(), a_job()
    token = watches.token(results, job, "w1", "Training")
    assert watches.token(results, job, "w1", "Training") == token  # the page's next run: the same token
    other = watches.token(results, job, "w2", "Training")
    assert other != token and len(token) >= 24  # another session's own, and not guessable
    assert watches.token(results, a_job(), "w1", "Training") != token  # a new job: a new token
    job.progress = Progress(3, 10, "Adam step 3 / 10")
    report = watches.report(token)
    assert report == {"done": False, "fraction": 0.3, "text": f"{waiting.PENDING} Adam step 3 / 10 (about 7 s left)"}
    assert results.touched == [(job, "w1")]
    assert watches.report("made-up") is None


def test_a_job_that_ended_is_done_however_it_ended():
    watches, results = waiting.Watches(Clock()), FakeResults()
    for outcome in (42, RuntimeError("diverged"), "cancelled"):
        token = watches.token(results, a_job(done=outcome), "w", "Training")
        assert watches.report(token)["done"] is True
    assert results.touched == []  # nothing waits any more: no job to keep alive


def test_a_token_nobody_asks_about_is_forgotten():
    clock = Clock()
    watches, results = waiting.Watches(clock), FakeResults()
    old = watches.token(results, a_job(), "w", "Training")
    clock.now += waiting.FORGET_SECONDS / 2
    asked = watches.token(results, a_job(), "w2", "Training")
    watches.report(asked)
    clock.now += waiting.FORGET_SECONDS / 2 + 1
    watches.token(results, a_job(), "w3", "Training")  # a page's run: the old ones go
    assert watches.report(old) is None and watches.report(asked) is not None and len(watches) == 2


def test_the_route_answers_a_known_token_and_says_404_to_others(monkeypatch):
    monkeypatch.setattr(waiting, "_served_under", None)
    watches, results, job = waiting.Watches(Clock()), FakeResults(shared_results.Wait(0, None)), a_job()
    app = Starlette(routes=waiting.routes("/class", watches))
    assert waiting.served()
    token = watches.token(results, job, "w", "Training")
    link = waiting.progress_link(token)
    assert link == f"/class/progress/{token}"
    status, headers, body = get_json(app, link)
    assert status == 200 and headers["cache-control"] == "no-store"
    assert body == {"done": False, "fraction": 0.0, "text": f"{waiting.PENDING} Training"}
    job.future.set_result(1)
    assert get_json(app, link)[2]["done"] is True
    status, _, body = get_json(app, "/class/progress/not-a-token")
    assert status == 404 and body["done"] is True  # the browser then runs the page again, which asks anew


@pytest.mark.parametrize(
    "outcome, said",
    [
        (RuntimeError("diverged at step 7"), "diverged at step 7"),
        ("cancelled", "gave way before it finished"),
        (concurrent.futures.process.BrokenProcessPool("gone"), "stopped before it finished (BrokenProcessPool)"),
    ],
)
def test_a_job_that_ended_without_a_result_is_said_once_by_the_page(outcome, said):
    """The page's run after a waiting panel ended (either panel: the browser's or its own) says why there is no
    result; a job of another task, or one still running or done, says nothing."""
    task = Task(("kind", 1), print, (), "Training")
    assert said in computing.failed_text(task, a_job(done=outcome))
    assert computing.failed_text(task, a_job(("kind", 2), done=outcome)) is None
    assert computing.failed_text(task, a_job()) is None
    assert computing.failed_text(task, a_job(done=3)) is None
    assert computing.failed_text(task, None) is None


def test_a_job_dropped_because_its_page_stopped_asking_is_asked_for_again():
    """A panel that stopped asking for a while (a phone asleep, a busy connection) had its queued job dropped; the
    page's next run on the same setting asks again rather than saying it gave way (a load run's /align page raised
    it). A job another request of the browser replaced is still said: asking again would take that one's place."""
    task = Task(("kind", 1), print, (), "Training")
    assert computing.failed_text(task, a_job(done="cancelled", dropped="left")) is None
    assert "gave way" in computing.failed_text(task, a_job(done="cancelled", dropped="replaced"))
    assert "gave way" in computing.failed_text(task, a_job(done="cancelled", dropped="stopped"))
