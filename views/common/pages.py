"""Each lab's page for ``st.navigation``: a page of views/ is its module's ``main``, imported once per process."""

from __future__ import annotations

import importlib
from pathlib import PurePosixPath

import streamlit as st


def lab_page(lab) -> st.Page:
    """``lab``'s page. A page given to Streamlit as a file is executed anew on every run, its cached functions
    re-keyed from their source each time (``inspect.getsource`` tokenises the file: a tenth of a run); the
    ``main`` of a module imported once is not. So a page in views/ is its module's ``main()`` (the module runs it
    itself only as a script: AppTest, ``streamlit run views/<lab>.py``); a page elsewhere runs as a file.
    Streamlit names a page by its URL path, so a page built here again (``st.switch_page``) is the one the
    navigation holds."""
    path = PurePosixPath(lab.page)
    if path.parent != PurePosixPath("views"):
        return st.Page(lab.page, title=lab.title, icon=lab.icon, url_path=lab.name)
    module = importlib.import_module(f"views.{path.stem}")
    if not callable(getattr(module, "main", None)):
        raise TypeError(
            f"{lab.page} defines no main(): a page of views/ draws itself in main() (CONTRIBUTING.md, a new lab)"
        )
    return st.Page(module.main, title=lab.title, icon=lab.icon, url_path=lab.name)
