"""Imported by the compute workers' fork server (symlab.serving.shared_results) before it forks any worker: it keeps
the workers off the server's main module, and loads MNIST for them all.

A process that multiprocessing starts imports its parent's ``__main__`` module by path before it runs
anything. In a Streamlit server that module is the page script being run: Streamlit installs it as
``__main__`` at the start of every page run, from any session's thread, at any moment, so no lock in
the server can keep it out of the instant a worker starts. Run in a worker, the page would draw in
Streamlit's bare mode and repeat its side effects. The workers need nothing from their parent's main
module (a task is a function in symlab's modules), so the processes this fork server forks skip it.
"""

import multiprocessing.spawn

from symlab.lib import mnist_data
from symlab.specs import settings


def _skip_parents_main(_name_or_path: str) -> None:
    """In place of multiprocessing.spawn's import of the parent's main module (by name or by path)."""


# Private names of multiprocessing.spawn, which typeshed leaves out.
multiprocessing.spawn._fixup_main_from_name = _skip_parents_main  # type: ignore[attr-defined]
multiprocessing.spawn._fixup_main_from_path = _skip_parents_main  # type: ignore[attr-defined]


def _load_mnist_for_every_worker() -> None:
    """MNIST read once here (a quarter of a second), so that every process forked from this server shares it:
    each upload's analysis used to read and verify all four files again. Missing or broken files are left for
    the process that needs them to report."""
    try:
        mnist_data.load_mnist_once(settings.mnist_directory())
    except (mnist_data.MnistDataError, OSError):
        pass


_load_mnist_for_every_worker()
