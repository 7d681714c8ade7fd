"""The lecturer's key against guessing (symlab.serving.key_guard): one session sent 73 wrong keys in 20 s with no delay
and the right key was then accepted; now wrong keys slow every next check, from that browser and from the whole
server, and many lock the key out, with the server's log saying so."""

import logging

import pytest

from symlab.runs.registry import RegistryError
from symlab.serving import key_guard
from symlab.specs import settings
from symlab.specs.settings import Hosting, SettingsError

KEY = "a-lecturers-key-of-some-length"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def guard(monkeypatch):
    monkeypatch.setenv(settings.LECTURER_KEY_ENV, KEY)
    return key_guard.KeyGuard(clock=Clock())


def test_a_browsers_wrong_keys_make_its_next_check_wait_longer(guard):
    for _ in range(key_guard.FREE_PER_BROWSER):
        assert guard.check("alice", "guess") == key_guard.Verdict(False)
    waited = []
    for _ in range(5):
        verdict = guard.check("alice", KEY)  # the right key too: not checked while it must wait
        assert not verdict.accepted and verdict.wait_seconds > 0
        waited.append(verdict.wait_seconds)
        guard.clock.now += verdict.wait_seconds
        assert guard.check("alice", "guess") == key_guard.Verdict(False)
    assert waited == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert guard.check("bob", KEY).accepted  # another browser is not held by alice's (the server's count is low)
    guard.clock.now += 32.0
    assert guard.check("alice", KEY).accepted
    assert guard.check("alice", "guess") == key_guard.Verdict(False)  # the right key cleared her count


def test_fresh_browser_ids_do_not_escape_the_servers_delay(guard):
    """A private window is a new browser id: past the server's free wrong keys, every browser's check waits."""
    for window in range(key_guard.FREE_PER_SERVER):
        assert guard.check(f"window{window}", "guess") == key_guard.Verdict(False)
    verdict = guard.check("another window", KEY)
    assert not verdict.accepted and verdict.wait_seconds == 1.0
    guard.clock.now += key_guard.WINDOW_SECONDS  # an hour later the wrong keys are forgotten
    assert guard.check("another window", KEY).accepted


def test_the_73_keys_in_20_seconds_of_the_probe_get_a_handful_of_checks(guard):
    checked = 0
    for attempt in range(73):
        guard.clock.now = 1000.0 + attempt * 20 / 73
        verdict = guard.check(f"window{attempt % 4}", KEY if attempt == 72 else f"guess{attempt}")
        checked += not verdict.wait_seconds
    assert checked <= key_guard.FREE_PER_SERVER + 4
    assert not verdict.accepted  # the right key, typed last, was not even checked


def test_many_wrong_keys_lock_the_key_out_and_the_log_says_so(guard, caplog):
    """Guessing as fast as the delays allow, each key from a new window, the lockout comes within the hour."""
    checked = 0
    with caplog.at_level(logging.WARNING, logger="symlab.serving.key_guard"):
        while not caplog.records:
            verdict = guard.check(f"window{checked}", "guess")
            assert not verdict.accepted
            guard.clock.now += verdict.wait_seconds
            checked += not verdict.wait_seconds
    assert checked == key_guard.LOCKOUT_AFTER and guard.clock.now - 1000.0 < key_guard.WINDOW_SECONDS
    [record] = caplog.records
    assert f"{key_guard.LOCKOUT_AFTER} wrong keys within the hour" in record.getMessage()
    assert "no key is checked for the next 30 minutes" in record.getMessage()
    assert guard.check("lecturer", KEY).wait_seconds > key_guard.LONGEST_DELAY_SECONDS
    guard.clock.now += key_guard.LOCKOUT_SECONDS
    assert guard.check("lecturer", KEY).accepted


class AwayLedger:
    def wrong_keys_since(self, since):
        raise RegistryError("the run registry's database could not be reached")


def test_an_unreachable_registry_leaves_each_process_counting_its_own(guard, caplog):
    with caplog.at_level(logging.WARNING, logger="symlab.serving.key_guard"):
        for window in range(key_guard.FREE_PER_SERVER):
            assert guard.check(f"window{window}", "guess", AwayLedger()) == key_guard.Verdict(False)
    assert guard.check("another window", KEY, AwayLedger()).wait_seconds == 1.0
    assert "counted in this process only (the run registry's database could not be reached)" in caplog.text


def test_a_key_too_short_to_resist_guessing_is_refused_at_start_up(monkeypatch):
    monkeypatch.setenv(settings.LECTURER_KEY_ENV, "s3cret")
    assert settings.lecturer_key() is None and not settings.is_lecturer_key("s3cret")
    with pytest.raises(SettingsError, match="shorter than 12 characters"):
        settings.check_lecturer_key()
    with pytest.raises(SettingsError, match="SYMLAB_LECTURER_KEY"):
        Hosting.from_env()
    monkeypatch.setenv(settings.LECTURER_KEY_ENV, "x" * settings.MIN_LECTURER_KEY_CHARS)
    settings.check_lecturer_key()
    assert settings.is_lecturer_key("x" * settings.MIN_LECTURER_KEY_CHARS)
