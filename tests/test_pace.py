"""People before timers (symlab/serving/pace.py): the page process's load, a waiting panel's slowdown, the wait of
a timer's run for the interactions under way."""

import threading
import time

import pytest

from symlab.serving import pace


class FakeClocks:
    def __init__(self):
        self.now, self.used = 0.0, 0.0

    def advance(self, seconds: float, cores: float) -> None:
        self.now += seconds
        self.used += seconds * cores


def test_the_load_is_the_cores_used_over_the_last_window():
    clocks = FakeClocks()
    load = pace.ProcessLoad(clock=lambda: clocks.now, cpu=lambda: clocks.used)
    assert load.cores() == 0.0  # one sample: nothing to measure yet
    for _ in range(20):  # 5 s at 0.8 of a core
        clocks.advance(0.25, 0.8)
        load.cores()
    assert load.cores() == pytest.approx(0.8)
    for _ in range(12):  # then 3 s idle: the window forgets the busy seconds
        clocks.advance(0.25, 0.0)
        busy = load.cores()
    assert busy < 0.2
    assert len(load.samples) <= pace.BUSY_WINDOW_SECONDS / pace.BUSY_SAMPLE_SECONDS + 2  # bounded, however long


def test_the_process_load_follows_this_process_cpu():
    load = pace.ProcessLoad()
    load.cores()
    started, used = time.monotonic(), time.process_time()
    end = started + 0.6
    while time.monotonic() < end:  # one core busy, as far as the machine lets it
        pass
    # Against the process's own clocks over the same window: on a busy machine the loop gets less than a core.
    measured = load.cores()
    assert time.process_time() - used > 0.1
    assert measured == pytest.approx((time.process_time() - used) / (time.monotonic() - started), abs=0.1)


def test_a_timer_slows_by_whole_factors_with_the_page_process_load():
    assert [pace.slowdown_for(cores) for cores in (0.0, 0.3, 0.35, 0.36, 0.6, 0.61, 1.5)] == [1, 1, 1, 2, 2, 4, 4]


def test_a_timer_run_waits_for_the_interactions_under_way_and_no_longer_than_its_limit():
    interactions = pace.Interactions()
    assert interactions.wait() == 0.0  # nothing under way
    done = threading.Event()

    def someone_clicks(seconds):
        with interactions.running():
            time.sleep(seconds)
        done.set()

    threading.Thread(target=someone_clicks, args=(0.1,)).start()
    time.sleep(0.02)
    start = time.monotonic()
    waited = interactions.wait(limit=1.0)
    assert done.is_set() and 0.05 < time.monotonic() - start < 0.5 and waited > 0
    threading.Thread(target=someone_clicks, args=(1.0,)).start()
    time.sleep(0.02)
    start = time.monotonic()
    interactions.wait(limit=0.1)  # a long click: the animation goes on after the limit
    assert time.monotonic() - start < 0.5


def test_an_interaction_waits_for_no_one():
    interactions = pace.Interactions()
    release = threading.Event()

    def long_click():
        with interactions.running():
            release.wait(5)

    other = threading.Thread(target=long_click)
    other.start()
    time.sleep(0.02)
    with interactions.running():  # this thread's run is someone's too: it goes ahead
        start = time.monotonic()
        assert interactions.wait(limit=1.0) == 0.0
        assert time.monotonic() - start < 0.05
    release.set()
    other.join()
    assert interactions.count == 0


def overlapping_runs(turns: pace.BrowserTurns, browsers: list[str], seconds: float = 0.2) -> int:
    """Runs one page run per browser of ``browsers`` at once, each ``seconds`` long: the most under way together."""
    under_way, most, lock = [0], [0], threading.Lock()

    def run(browser):
        with turns.turn(browser):
            with lock:
                under_way[0] += 1
                most[0] = max(most[0], under_way[0])
            time.sleep(seconds)
            with lock:
                under_way[0] -= 1

    threads = [threading.Thread(target=run, args=(browser,)) for browser in browsers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return most[0]


def test_a_browsers_page_runs_take_turns_and_other_browsers_never_wait_for_them():
    turns = pace.BrowserTurns()
    assert overlapping_runs(turns, ["flood"] * 5) == 1  # ten tabs of one browser: one run at a time
    assert overlapping_runs(turns, ["a", "b", "c"]) == 3
    assert overlapping_runs(turns, ["flood"] * 3 + ["a", "b"]) == 3  # the flood's one, and each other browser's
    assert overlapping_runs(turns, ["", "", ""]) == 3  # browsers that cannot be told apart do not wait
    assert turns.turns == {}  # nothing kept once the runs are done


def test_a_run_waits_for_its_browsers_other_run_no_longer_than_the_limit():
    turns = pace.BrowserTurns(limit=0.2)
    start = time.monotonic()
    assert overlapping_runs(turns, ["slow", "slow"], seconds=1.0) == 2  # the second went ahead after 0.2 s
    assert time.monotonic() - start < 1.6
