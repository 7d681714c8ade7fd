"""Imported by the compute workers' fork server (symlab.serving.shared_results) before it forks any worker.

A process that multiprocessing starts imports its parent's ``__main__`` module by path before it runs
anything. In a Streamlit server that module is the page script being run: Streamlit installs it as
``__main__`` at the start of every page run, from any session's thread, at any moment, so no lock in
the server can keep it out of the instant a worker starts. Run in a worker, the page would draw in
Streamlit's bare mode and repeat its side effects. The workers need nothing from their parent's main
module (a task is a function in symlab's modules), so the processes this fork server forks skip it.
"""

import multiprocessing.spawn


def _skip_parents_main(_name_or_path: str) -> None:
    """In place of multiprocessing.spawn's import of the parent's main module (by name or by path)."""


multiprocessing.spawn._fixup_main_from_name = _skip_parents_main
multiprocessing.spawn._fixup_main_from_path = _skip_parents_main
