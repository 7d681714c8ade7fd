"""Results kept for every session of this page process, looked up by their arguments.

Streamlit's ``st.cache_resource`` hashes a call's arguments with its own hasher (walking a config dataclass field by
field) and ``st.cache_data`` also unpickles a copy of the result on every call: tens to hundreds of microseconds a
call, several calls a chart, on every page run. The pages' cached functions take hashable arguments (numbers,
text, tuples, frozen configs), so :func:`cached` looks them up by Python's own hash; a result is shared, not
copied, and must be treated as read-only (as ``st.cache_resource``'s). As with Streamlit's caches, an argument whose
name starts with an underscore is not part of the key (an object that goes with the others, as a config's data)."""

from __future__ import annotations

import functools
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TypeVar

Result = TypeVar("Result")


def cached(max_entries: int) -> Callable[[Callable[..., Result]], Callable[..., Result]]:
    """Keep the ``max_entries`` results last used, each computed once even when sessions ask for it at the same
    moment (a class opening one link): the others wait for the first. An exception is not kept."""
    if max_entries < 1:
        raise ValueError(f"max_entries must be at least 1, not {max_entries}")

    def decorate(function: Callable[..., Result]) -> Callable[..., Result]:
        results: OrderedDict = OrderedDict()
        computing: dict = {}  # key -> the lock its first caller holds while computing it
        lock = threading.Lock()
        names = list(inspect.signature(function).parameters)
        keyed = [not name.startswith("_") for name in names]

        def key_of(args, kwargs):
            if not all(keyed):
                args = tuple(value for value, kept_ in zip(args, keyed) if kept_) + args[len(keyed) :]
                kwargs = {name: value for name, value in kwargs.items() if not name.startswith("_")}
            return (args, tuple(sorted(kwargs.items()))) if kwargs else args

        def kept(key):
            with lock:
                if key in results:
                    results.move_to_end(key)
                    return True, results[key]
                return False, computing.setdefault(key, threading.Lock())

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            key = key_of(args, kwargs)
            found, value = kept(key)
            if found:
                return value
            with value:  # the key's lock: one caller computes, the others wait here and then find it
                found, result = kept(key)
                if found:
                    return result
                try:
                    result = function(*args, **kwargs)
                except BaseException:
                    with lock:
                        computing.pop(key, None)
                    raise
                with lock:  # kept before its lock goes: a caller arriving now finds the result, not a new lock
                    results[key] = result
                    computing.pop(key, None)
                    while len(results) > max_entries:
                        results.popitem(last=False)
                return result

        def clear() -> None:
            with lock:
                results.clear()

        setattr(wrapper, "clear", clear)  # noqa: B010  (mypy knows no attributes of a function but by setattr)
        return wrapper

    return decorate
