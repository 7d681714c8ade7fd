"""What a starting server does before its first visitor (``streamlit run serve.py``).

Before it answers: it starts the worker processes (they load torch in parallel), imports the
labs and the pages' libraries, a few seconds, so that no visitor's script waits for an import
(and no two sessions import the same modules at once), and stores the default links' shipped
results (symlab.precomputed). Then, in a background thread at a lower priority than the
visitors' page runs: it submits each lab's default-link tasks (Lab.warm) to the workers, which
compute those not shipped, and runs one toy training step, so that opening a lab's default link
finds its results computed or under way.
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
# torch._dynamo: torch.optim imports it with the first optimiser, 1.5 s holding the interpreter.
PAGE_LIBRARIES = ("symlab.labs", "torch", "torch._dynamo", "scipy.optimize", "pandas", "altair", "plotly.io")
LOG = logging.getLogger("symlab.warmup")


def import_libraries() -> float:
    """Import what the pages import; the seconds it took."""
    start = time.monotonic()
    for name in PAGE_LIBRARIES:
        importlib.import_module(name)
    return time.monotonic() - start


def store_shipped_results() -> None:
    """The default links' precomputed results, in the shared store (a few hundred milliseconds)."""
    from symlab import precomputed

    stored = precomputed.store_into(jobs.shared(), precomputed.default_tasks(_hosting()))
    LOG.info("warm-up: %d shipped default results stored", len(stored))


def warm_up() -> None:
    """Submit each lab's default-link tasks to the worker pool, then take one toy training step."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WARM_UP_NICENESS)
    from symlab import precomputed

    results = jobs.shared()
    for task in precomputed.default_tasks(_hosting()):
        results.submit(task, WARM_UP_WAITER)  # found stored where shipped
    _first_training_step()


def _hosting():
    from symlab.hosting import Hosting, SettingsError

    try:
        return Hosting.from_env()
    except SettingsError:  # the pages say what is wrong; the warm-up uses the switch's defaults
        return None


def _first_training_step() -> None:
    """One Adam step of the toy BNN: torch's lazy initialisation, paid before the first Play."""
    from symlab.labs.toy import experiment as toy

    config = toy.ToyConfig().validate()
    trainer = toy.ToyTrainer(toy.starts_of("mfvi", config) + toy.starts_of("sgm", config))
    trainer.step()
    trainer.evaluate()


@contextlib.asynccontextmanager
async def lifespan(app):
    """The server's start-up and shutdown (``st.App(..., lifespan=lifespan)`` in serve.py)."""
    jobs.shared().start()  # the workers load torch on the other core meanwhile
    LOG.info("warm-up: the pages' libraries imported in %.1f s", import_libraries())
    store_shipped_results()
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
