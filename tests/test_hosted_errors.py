"""A hosted server shows a visitor that something failed, never what: no traceback, no path, no address."""

from pathlib import Path

import pytest
from streamlit import config
from streamlit.testing.v1 import AppTest

from views.common import lessons

ROOT = Path(__file__).resolve().parents[1]
SECRET = "/srv/symlab/runs postgresql://symlab@db.internal:5432/runs"


@pytest.fixture
def error_details():
    """The server-wide setting app.py changes, restored for the tests after this one."""
    before = config.get_option("client.showErrorDetails")
    yield
    config.set_option("client.showErrorDetails", before)


def failing_home(monkeypatch) -> AppTest:
    def broken():
        raise RuntimeError(f"cannot open {SECRET}")

    monkeypatch.setattr(lessons, "show_path", broken)
    return AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()


def test_a_hosted_server_redacts_an_unexpected_error(monkeypatch, error_details):
    monkeypatch.setenv("SYMLAB_HOSTED", "1")
    at = failing_home(monkeypatch)
    [shown] = at.exception
    assert "redacted" in shown.message and not shown.stack_trace
    assert SECRET not in shown.message and "postgresql" not in shown.message


def test_a_server_of_ones_own_shows_the_whole_error(monkeypatch, error_details):
    monkeypatch.delenv("SYMLAB_HOSTED", raising=False)
    config.set_option("client.showErrorDetails", "full")
    at = failing_home(monkeypatch)
    [shown] = at.exception
    assert SECRET in shown.message and shown.stack_trace


def test_a_hosted_page_names_no_server_path_in_its_errors(monkeypatch, tmp_path):
    """A missing MNIST directory, as the alignment page reports it: the place in words, not the path."""
    missing = tmp_path / "srv" / "secret-mnist"
    monkeypatch.setenv("SYMLAB_MNIST_DIR", str(missing))
    for hosted, shown in (("1", "the MNIST directory"), ("", str(missing))):
        monkeypatch.setenv("SYMLAB_HOSTED", hosted)
        at = AppTest.from_file(str(ROOT / "views" / "align.py"), default_timeout=60)
        at.query_params.update(task="mnist")
        at.run()
        assert not at.exception
        [error] = at.error
        assert shown in error.value and (hosted == "" or str(missing) not in error.value)
