"""What a page process sets up once (views/common/process.py): the theme's sections read once per configuration."""

import copy

import pytest
from streamlit import config
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime import app_session

from views.common import process

THEME_SECTIONS = ("light", "dark", "sidebar", "light.sidebar", "dark.sidebar")


def theme_message() -> bytes:
    """The theme part of a run's new_session message, built as Streamlit's _create_new_session_message builds it."""
    message = ForwardMsg()
    theme = message.new_session.custom_theme
    app_session._populate_theme_msg(theme)
    for section in THEME_SECTIONS:
        part = theme
        for name in section.split("."):
            part = getattr(part, name)
        app_session._populate_theme_msg(part, f"theme.{section}")
    return message.SerializeToString(deterministic=True)


@pytest.fixture
def streamlits_reader(monkeypatch):
    """Streamlit's own reader in place, and put back after the test, whatever the test installs."""
    reader = getattr(config.get_options_for_section, "streamlits", config.get_options_for_section)
    monkeypatch.setattr(config, "get_options_for_section", reader)
    process.theme_read_once.cache_clear()
    yield reader
    process.theme_read_once.cache_clear()


def configuration_parsed_again(monkeypatch, **values) -> dict:
    """A configuration in place of the process's, as parsing the files again makes one, with ``values`` set
    ("theme.base" as theme__base)."""
    options = {name: copy.copy(option) for name, option in config.get_config_options().items()}
    for name, value in values.items():
        options[name.replace("__", ".")].set_value(value, "a test")
    monkeypatch.setattr(config, "_config_options", options)
    return options


@pytest.mark.parametrize("theme", [{}, {"theme__base": "dark", "theme__light__primaryColor": "#0072b2"}])
def test_the_new_session_message_is_streamlits_own_and_the_theme_is_read_once(streamlits_reader, monkeypatch, theme):
    configuration_parsed_again(monkeypatch, **theme)
    streamlits = theme_message()
    assert (b"#0072b2" in streamlits) == bool(theme)
    scans = []
    monkeypatch.setattr(
        config, "get_options_for_section", lambda section: scans.append(section) or streamlits_reader(section)
    )
    process.theme_read_once()
    assert theme_message() == streamlits
    assert theme_message() == streamlits
    assert sorted(scans) == sorted(["theme", *(f"theme.{s}" for s in THEME_SECTIONS)])  # once each, for two messages
    config.get_options_for_section("server")
    assert scans[-1] == "server"  # every other section is read each time
    assert config.get_options_for_section("theme") is not config.get_options_for_section("theme")  # copies


def test_a_configuration_parsed_again_is_read_again(streamlits_reader, monkeypatch):
    configuration_parsed_again(monkeypatch, theme__base="light")
    process.theme_read_once()
    assert config.get_options_for_section("theme")["base"] == "light"
    configuration_parsed_again(monkeypatch, theme__base="dark")
    assert config.get_options_for_section("theme")["base"] == "dark"


def test_the_server_runs_on_uvloop_and_httptools():
    """The event loop and HTTP parser the page processes run on, as Streamlit and uvicorn pick them where installed:
    a waiting panel's ask costs a sixth of the CPU it costs on asyncio's loop and h11."""
    from streamlit.web import bootstrap
    from uvicorn.protocols.http.auto import AutoHTTPProtocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    assert bootstrap._get_uvloop_loop_factory() is not None
    assert AutoHTTPProtocol is HttpToolsProtocol
