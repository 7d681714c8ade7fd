"""What a starting server does before its first visitor (``streamlit run serve.py``).

Before it answers: it starts the worker processes (they load torch in parallel) and imports the
labs and the pages' libraries, a few seconds, so that no visitor's script waits for an import
(and no two sessions import the same modules at once). Then, in a background thread: it submits
each lab's default-link tasks (Lab.warm) to the workers and runs one toy training step, so that
opening a lab's default link finds its results computed or under way.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import threading
import time

from symlab import jobs

WARM_UP_WAITER = "server warm-up"  # a warm-up task's waiter: it is never dropped
WARM_UP_NICENESS = 10  # the warm-up thread's: a visitor's page run comes first
# The pages' libraries, loaded before the first visitor rather than by the first visitor's script.
PAGE_LIBRARIES = ("symlab.labs", "torch", "scipy.optimize", "pandas", "altair", "plotly.io")
LOG = logging.getLogger("symlab.warmup")


def import_libraries() -> float:
    """Import what the pages import; the seconds it took."""
    start = time.monotonic()
    for name in PAGE_LIBRARIES:
        importlib.import_module(name)
    return time.monotonic() - start


def warm_up() -> None:
    """Submit each lab's default-link tasks to the worker pool, then take one toy training step."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WARM_UP_NICENESS)
    from symlab.hosting import Hosting, SettingsError
    from symlab.labs import LABS

    try:
        hosting = Hosting.from_env()
    except SettingsError:  # the pages say what is wrong; the warm-up uses the switch's defaults
        hosting = None
    results = jobs.shared()
    for lab in LABS:
        for task in lab.warm(hosting) if lab.warm else ():
            results.submit(task, WARM_UP_WAITER)
    _first_training_step()


def _first_training_step() -> None:
    """One Adam step of the toy BNN: torch's lazy initialisation, paid before the first Play."""
    from symlab.labs.toy import experiment as toy

    config = toy.ToyConfig().validate()
    trainer = toy.ToyTrainer([toy.RunSpec("mfvi", config), toy.RunSpec("sgm", config)])
    trainer.step()
    trainer.evaluate()


@contextlib.asynccontextmanager
async def lifespan(app):
    """The server's start-up and shutdown (``st.App(..., lifespan=lifespan)`` in serve.py)."""
    jobs.shared().start()
    LOG.info("warm-up: the pages' libraries imported in %.1f s", import_libraries())
    threading.Thread(target=_logged(warm_up), name="symlab-warm-up", daemon=True).start()
    yield
    jobs.shared().shutdown()


def _logged(function):
    def run():
        try:
            function()
        except Exception:  # a failed warm-up costs the first visitor time, nothing else
            LOG.exception("warm-up failed")
    return run
