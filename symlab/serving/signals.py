"""A page process stopped by SIGTERM ends as Python ends, its ``atexit`` handlers run.

Under Streamlit's server, uvicorn answers SIGTERM with a graceful shutdown (the lifespan's end included) and then
raises the signal again under the handler it found at its start, the default one, so that the process dies of it:
at once, without the interpreter's exit. That skipped ``multiprocessing``'s finalizers, which unlink the semaphores
of the worker pools' queues, and the resource tracker warned of them as the server stopped ("leaked semaphore
objects"). serve.py is imported once uvicorn is serving, its handler in place; :func:`exit_normally_on_sigterm`
puts in its place one that asks the server to stop as uvicorn's does (``should_exit``, the attribute uvicorn gives
for stopping a server from code), without noting the signal to raise again.

The interpreter's exit then ends with a collection of the whole heap (torch's and the sessions' objects), 1.4 s of a
2 s stop; the objects are frozen once the exit handlers have run, so that collection passes them by."""

from __future__ import annotations

import atexit
import gc
import signal


def exit_normally_on_sigterm() -> bool:
    """Whether the server's handler was found (uvicorn's ``Server.handle_exit``) and replaced; call it in the main
    thread while the server runs (serve.py, which Streamlit imports then)."""
    server = getattr(signal.getsignal(signal.SIGTERM), "__self__", None)
    if server is None or not hasattr(server, "should_exit") or not hasattr(server, "force_exit"):
        return False

    def stop_server(signum: int, frame) -> None:
        if server.should_exit:  # asked twice: stop without waiting for the connections, as uvicorn does
            server.force_exit = True
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop_server)
    # Runs after the exit handlers registered since, and before any registered earlier: either way the pools'
    # finalizers are called by multiprocessing's handler, not found by a collection.
    atexit.register(gc.freeze)
    return True
