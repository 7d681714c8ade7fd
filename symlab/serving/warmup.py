"""What a starting server does before its first visitor (``streamlit run serve.py``), and in idle time after.

Before it answers: it starts the worker processes (they load torch in parallel), imports the
labs and the pages' libraries, a few seconds, so that no visitor's script waits for an import
(and no two sessions import the same modules at once), stores the default links' shipped
results (symlab.serving.precomputed) and checks the MNIST files. Then, in a background thread at a lower
priority than the visitors' page runs: it submits each lab's default-link tasks (Lab.tasks) to the
workers, which compute those not shipped (or stored), runs one toy training step, and opens every page once
over the server's own websocket, as a browser would: a page's first run in a process builds its charts' specs
and fills its cached functions (tens of milliseconds a chart), which a class opening the link at once would
otherwise pay thirty times over. So opening a lab's default link finds its results computed or under way.

After that, whenever no person's computation has been queued or running for a moment, it computes
in the idle pool (one process at the system's idle priority: :meth:`symlab.serving.shared_results.SharedResults.precompute`)
what visitors are likely to ask for next and the result store does not hold yet: each lab's presets,
then every state one step of one control away from the default link and from each preset.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import importlib
import logging
import os
import threading
import time

from symlab.labs import LABS, computation_modules
from symlab.lib import mnist_data
from symlab.serving import precomputed, shared_results
from symlab.specs import settings
from symlab.specs.settings import Hosting, SettingsError
from symlab.specs.tasks import Task, kind_of
from symlab.specs.urlstate import neighbours

WARM_UP_WAITER = "server warm-up"  # a warm-up task's waiter: it is never dropped
WARM_UP_NICENESS = 10  # the warm-up thread's: a visitor's page run comes first
# The pages' libraries, loaded before the first visitor rather than by the first visitor's script
# (streamlit.emojis: the pattern behind a notice's icon, a third of a second to compile).
PAGE_LIBRARIES = ("torch", "scipy.optimize", "pandas", "altair", "streamlit.emojis")
IDLE_AFTER_SECONDS = 2.0  # no person's computation for this long: the idle pool takes the next likely task
IDLE_POLL_SECONDS = 0.5
LOG = logging.getLogger("symlab.serving.warmup")


def import_libraries() -> float:
    """Import what the pages import; the seconds it took."""
    start = time.monotonic()
    for name in (*PAGE_LIBRARIES, *computation_modules()):
        importlib.import_module(name)
    return time.monotonic() - start


def store_shipped_results() -> None:
    """The default links' precomputed results, in the shared store (a few hundred milliseconds)."""
    stored = precomputed.store_into(shared_results.shared(), precomputed.default_tasks(_hosting()))
    LOG.info("warm-up: %d shipped default results stored", len(stored))


def check_data_files() -> None:
    """The MNIST page's check of the data files (half a second), once, before a class opens the page."""
    problems = mnist_data.check_mnist_once(settings.mnist_directory())
    LOG.info("warm-up: MNIST files %s", "; ".join(problems) if problems else "verified")


def warm_up() -> None:
    """Submit each lab's default-link tasks to the worker pool, then take one toy training step."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WARM_UP_NICENESS)
    results = shared_results.shared()
    hosting = _hosting()
    for lab in (lab for lab in LABS if lab.tasks):
        for task in lab.page_tasks(lab.default_values(hosting)):
            results.submit(task, WARM_UP_WAITER, keep=True)  # found stored where shipped
    _first_training_step()


FIRST_VISIT_TIMEOUT_SECONDS = 120.0  # for the server to answer, and for each page's run


def visit_pages(
    ws_url: str, pages, timeout: float = FIRST_VISIT_TIMEOUT_SECONDS, headers: dict | None = None
) -> dict[str, float]:
    """Open each page of ``pages`` (URL paths, "" the home page) once in one session at ``ws_url`` (the server's
    ``/_stcore/stream``), as a browser's first visit does: the seconds each page's run took. ``headers``: sent with
    the websocket's opening request (a proxy's cookie)."""
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
    from websockets.sync.client import connect
    from websockets.typing import Subprotocol

    early = ForwardMsg.ScriptFinishedStatus.FINISHED_EARLY_FOR_RERUN
    seconds = {}
    with connect(
        ws_url, subprotocols=[Subprotocol("streamlit")], max_size=None, open_timeout=timeout, additional_headers=headers
    ) as socket:
        for page in pages:
            request = BackMsg()
            request.rerun_script.page_name = page
            start = time.monotonic()
            socket.send(request.SerializeToString())
            while True:  # until the end of the run (a page waiting for a computation ends at once)
                message = ForwardMsg()
                message.ParseFromString(socket.recv(timeout=timeout))
                if message.WhichOneof("type") == "script_finished" and message.script_finished != early:
                    break
            seconds[page] = time.monotonic() - start
    return seconds


def _server_stream_url() -> str:
    """This server's websocket, on the loopback interface unless it listens on one address only."""
    from streamlit import config

    address = config.get_option("server.address") or "127.0.0.1"
    address = "127.0.0.1" if address in ("0.0.0.0", "::", "localhost") else address
    base = (config.get_option("server.baseUrlPath") or "").strip("/")
    return f"ws://{address}:{config.get_option('server.port')}/{base + '/' if base else ''}_stcore/stream"


def _first_visits() -> None:
    seconds = visit_pages(_server_stream_url(), ["", *(lab.name for lab in LABS)])
    LOG.info("warm-up: every page opened once: %s", ", ".join(f"/{page} {s:.1f} s" for page, s in seconds.items()))


def _hosting():
    try:
        return Hosting.from_env()
    except SettingsError:  # the pages say what is wrong; the warm-up uses the switch's defaults
        return None


def _first_training_step() -> None:
    """One Adam step of the toy BNN: torch's lazy initialisation, paid before the first Play."""
    # Here, not at the top: importing this module (serve.py does) must not load torch before the server has
    # started its compute workers, which load it on the other core meanwhile.
    from symlab.labs.toy import experiment as toy
    from symlab.lib import two_relu

    config = toy.ToyConfig().validate()
    trainer = two_relu.ToyTrainer(toy.starts_of("mfvi", config) + toy.starts_of("sgm", config))
    trainer.step()
    trainer.evaluate()


def likely_tasks(hosting=None) -> list[Task]:
    """What visitors are likely to ask for next, most likely first, each once: every lab's default link
    and presets, then the states one step of one control away from each of them."""
    tasks: dict = {}
    rings: tuple[list, list] = ([], [])
    for lab in (lab for lab in LABS if lab.tasks):
        specs = lab.page_params(hosting)
        default = lab.default_values(hosting)
        presets = lab.page_presets()
        states = [default, *({**default, **presets.state(name, specs)} for name in presets)]
        rings[0].extend((lab, state) for state in states)
        rings[1].extend((lab, near) for state in states for near in neighbours(state, specs))
    for lab, state in (*rings[0], *rings[1]):
        for task in lab.page_tasks(state):
            tasks.setdefault(task.key, task)
    return list(tasks.values())


def precompute_in_idle_time(stop: threading.Event, tasks: list[Task] | None = None) -> int:
    """Compute ``tasks`` (default: :func:`likely_tasks`) not in the result store yet, one at a time in the
    idle pool, each only once no person's computation has been queued or running for
    :data:`IDLE_AFTER_SECONDS`; until ``stop`` is set or every one is stored. Returns how many it computed."""
    results = shared_results.shared()
    if results.store is None:
        return 0
    tasks = likely_tasks(_hosting()) if tasks is None else tasks
    present = results.store.keys_present(task.key for task in tasks)
    pending = [task for task in tasks if task.key not in present]
    LOG.info("idle time: %d likely results to compute (%d stored already)", len(pending), len(present))
    computed = 0
    for task in pending:
        if not _wait_for_idle(results, stop):
            break
        future = results.precompute(task)
        if future is None:  # stored meanwhile, or a person's job computes it
            continue
        while not stop.is_set():
            try:
                future.result(timeout=IDLE_POLL_SECONDS)
                computed += 1
                break
            except TimeoutError:
                continue
            except Exception as error:  # noqa: BLE001 (a failed guess costs nothing: the next one)
                LOG.info("idle time: %s failed (%s: %s)", kind_of(task.key), type(error).__name__, error)
                break
    return computed


def warm_store(workers: int, tasks: list[Task] | None = None, progress=None) -> dict:
    """Compute ``tasks`` (default: :func:`likely_tasks`, what the idle pool would compute) into the result store
    before a server opens, on ``workers`` worker processes at once; ``progress(done, total)`` after each. The
    default links' shipped results are stored first. Returns the counts and the seconds it took."""
    started = time.monotonic()
    store = shared_results.settings_store(shared_results.live_limits())
    results = shared_results.SharedResults(workers=workers, torch_threads=1, store=store)
    try:
        shipped = set(precomputed.store_into(results, precomputed.default_tasks(_hosting())))
        tasks = likely_tasks(_hosting()) if tasks is None else tasks
        present = store.keys_present(task.key for task in tasks) | {task.key for task in tasks if task.key in shipped}
        pending = [task for task in tasks if task.key not in present]
        failed: list[str] = []
        if progress:
            progress(0, len(pending))
        jobs = [results.submit(task, WARM_UP_WAITER, keep=True) for task in pending]
        for done, future in enumerate(concurrent.futures.as_completed([job.future for job in jobs]), 1):
            if future.exception() is not None:
                failed.append(f"{type(future.exception()).__name__}: {future.exception()}")
            if progress:
                progress(done, len(pending))
    finally:
        results.shutdown()
    return dict(
        results=len(tasks),
        stored_already=len(present),  # or shipped with the app (symlab.serving.precomputed)
        computed=len(pending) - len(failed),
        failed=len(failed),
        failures=failed[:5],
        workers=workers,
        seconds=round(time.monotonic() - started, 1),
    )


def _wait_for_idle(results: shared_results.SharedResults, stop: threading.Event) -> bool:
    """Until no person's computation has been queued or running for :data:`IDLE_AFTER_SECONDS`; False if
    ``stop`` came first."""
    quiet_since = time.monotonic()
    while not stop.is_set():
        if results.busy():
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= IDLE_AFTER_SECONDS:
            return True
        stop.wait(IDLE_POLL_SECONDS)
    return False


@contextlib.asynccontextmanager
async def lifespan(app):
    """The server's start-up and shutdown (``st.App(..., lifespan=lifespan)`` in serve.py)."""
    shared_results.shared().start()  # the workers load torch on the other core meanwhile
    LOG.info("warm-up: the pages' libraries imported in %.1f s", import_libraries())
    store_shipped_results()
    check_data_files()
    stop = threading.Event()

    # Then the first visits: the server answers by then (this function has let it start).
    def warm_up_then_visit() -> None:
        warm_up()
        _first_visits()

    threading.Thread(target=_logged(warm_up_then_visit, stop), name="symlab-warm-up", daemon=True).start()
    if shared_results.live_limits().idle_workers > 0:
        threading.Thread(
            target=_logged(lambda: precompute_in_idle_time(stop), stop), name="symlab-idle-time", daemon=True
        ).start()
    yield
    stop.set()
    shared_results.shared().shutdown()


STOP_NOTICE_SECONDS = 5.0  # a warm-up's failure this close before the server's stop is the stop's doing


def _logged(function, stopping: threading.Event):
    """``function``, its failure logged; one the server's stop cut short (its pages and workers gone first, then
    ``stopping`` set, within :data:`STOP_NOTICE_SECONDS`) is said in a line, not as a failure."""

    def run():
        try:
            function()
        except Exception as error:  # a failed warm-up costs the first visitor time, nothing else
            if stopping.wait(STOP_NOTICE_SECONDS):
                LOG.info("warm-up: cut short as the server stops (%s: %s)", type(error).__name__, error)
            else:
                LOG.exception("warm-up failed")

    return run
