"""What a page process sets up as it starts, and what it gives Streamlit's server (``st.App``): one home for serve.py
and for the load test's counting copy of it (benchmarks/counted_serve.py)."""

from __future__ import annotations

from starlette.middleware import Middleware

from symlab.serving import cards, waiting
from symlab.serving.base_url import PinnedBaseUrl
from symlab.serving.heap import return_large_blocks
from symlab.serving.signals import exit_normally_on_sigterm
from symlab.serving.warmup import lifespan
from symlab.specs.settings import check_lecturer_key


def start(base_path: str = "") -> dict:
    """Set the process up and return ``st.App``'s keyword arguments for a server under ``base_path``: its warm-up
    (the lifespan), its routes and its middleware."""
    check_lecturer_key()  # a key too short to keep a class from guessing it: the server does not start
    return_large_blocks()  # before the first upload: freed, it goes back to the system (symlab/serving/heap.py)
    exit_normally_on_sigterm()  # its pools' semaphores unlinked as it stops (symlab/serving/signals.py)
    return dict(
        lifespan=lifespan,
        # The lab cards' pictures, at links that name their content; where a computation a page waits for stands.
        routes=[*cards.routes(base_path), *waiting.routes(base_path)],
        # Its pages carry the server's address, so that a browser never probes for it.
        middleware=[Middleware(PinnedBaseUrl, base_path=base_path)],
    )
