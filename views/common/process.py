"""What a page process sets up or makes once, for every session's runs.

Here rather than in app.py: app.py runs anew on every page run, and a cached function defined there is rebuilt
(its source read and hashed) on each of them."""

from __future__ import annotations

import functools

from streamlit import config

from symlab.runs.device import describe_device, set_threads
from symlab.serving.heap import return_large_blocks


@functools.cache
def large_blocks_returned() -> bool:
    """Once per process (serve.py does it first; ``streamlit run app.py`` does not run serve.py)."""
    return return_large_blocks()


@functools.cache
def threads_set(count: int) -> int:
    """The labs' tensors are small: one thread (the default) is fastest, and it leaves the other cores to the
    other sessions (several threads per session oversubscribe the CPU and slow every tick ~3×). Set once per
    process: it scans every loaded library for the BLAS, a few milliseconds of each page run otherwise."""
    return set_threads(count)


@functools.cache
def device_text() -> str:
    return describe_device()


@functools.cache
def theme_read_once() -> bool:
    """Streamlit's reader of config sections, with the theme's sections read once per configuration; whether it is
    in place.

    Each run's ``new_session`` message carries the theme's six sections (``[theme]``, ``[theme.light]``, …), and
    Streamlit reads each by scanning every config option for the section's (``config.get_options_for_section``: a
    few hundred options under a lock): six scans, 0.4–0.5 ms of every page run and timer's redraw. A theme option
    cannot be set while the server runs (``st.set_option`` takes only ``client.*`` options then), so each theme
    section's options are kept as first read, for the configuration they were read from (one parsed again is a new
    one); every other section is read as before. Streamlit's own code builds the message from the same values
    (tests/test_process.py checks it is byte for byte the same)."""
    reader = config.get_options_for_section
    read: dict[tuple[str, int], dict] = {}

    def get_options_for_section(section: str) -> dict:
        if section != "theme" and not section.startswith("theme."):
            return reader(section)
        key = (section, id(config.get_config_options()))
        if key not in read:
            read[key] = reader(section)
        return dict(read[key])  # a copy, as Streamlit's reader gives: its caller may change it

    setattr(get_options_for_section, "streamlits", reader)  # noqa: B010  (mypy allows a function's attribute so)
    config.get_options_for_section = get_options_for_section
    return True
