"""SymLab's server: ``streamlit run serve.py`` serves the app (app.py) and, as it starts, warms
what a first visitor would otherwise wait for (symlab/serving/warmup.py) without delaying its health check.
Its pages carry the server's address (symlab/serving/base_url.py), so a browser never probes for it."""

import streamlit as st
from starlette.middleware import Middleware
from streamlit import config

from symlab.serving.base_url import PinnedBaseUrl
from symlab.serving.heap import return_large_blocks
from symlab.serving.warmup import lifespan
from symlab.specs.settings import check_lecturer_key

check_lecturer_key()  # a key too short to keep a class from guessing it: the server does not start
return_large_blocks()  # before the first upload: freed, it goes back to the system (symlab/serving/heap.py)
app = st.App(
    "app.py",
    lifespan=lifespan,
    middleware=[Middleware(PinnedBaseUrl, base_path=config.get_option("server.baseUrlPath") or "")],
)
