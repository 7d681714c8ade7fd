"""The pages' process-wide cache (views/common/memo.py): once per key, however many sessions ask at once."""

import threading
import time

import pytest

from views.common import memo


def test_a_result_is_computed_once_for_callers_that_ask_at_the_same_moment():
    calls = []

    @memo.cached(4)
    def slow(x, scale=1):
        calls.append(x)
        time.sleep(0.05)
        return [x * scale]

    results = []
    threads = [threading.Thread(target=lambda: results.append(slow(3, scale=2))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [3]
    assert results == [[6]] * 8 and all(result is results[0] for result in results)  # shared, not copied
    assert slow(3) == [3] and calls == [3, 3]  # other arguments, another result


def test_the_least_recently_used_result_goes_first():
    calls = []

    @memo.cached(2)
    def square(x):
        calls.append(x)
        return x * x

    for x in (1, 2, 1, 3, 1, 2):  # 3 pushes out 2 (1 was used since): 2 is computed again
        square(x)
    assert calls == [1, 2, 3, 2]
    square.clear()
    square(1)
    assert calls == [1, 2, 3, 2, 1]


def test_an_exception_is_raised_to_each_caller_and_not_kept():
    attempts = []

    @memo.cached(2)
    def flaky(x):
        attempts.append(x)
        if len(attempts) == 1:
            raise RuntimeError("first try fails")
        return x

    with pytest.raises(RuntimeError, match="first try"):
        flaky(5)
    assert flaky(5) == 5 and attempts == [5, 5]


def test_unhashable_arguments_are_refused_and_a_size_below_one_too():
    @memo.cached(2)
    def identity(x):
        return x

    with pytest.raises(TypeError):
        identity({"a": 1})
    with pytest.raises(ValueError, match="at least 1"):
        memo.cached(0)


def test_an_argument_named_with_an_underscore_is_not_part_of_the_key():
    calls = []

    @memo.cached(4)
    def drawn(config, _data, present=False, _extra=None):
        calls.append(config)
        return (config, present)

    assert drawn(1, [1, 2]) == (1, False)
    assert drawn(1, [3], _extra={"x": 1}) == (1, False) and calls == [1]  # unhashable, and left out
    assert drawn(1, [3], present=True) == (1, True) and calls == [1, 1]
