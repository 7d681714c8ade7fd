"""SymLab's server: ``streamlit run serve.py`` serves the app (app.py) and, as it starts, warms
what a first visitor would otherwise wait for (symlab/serving/warmup.py) without delaying its health check.
Its pages carry the server's address (symlab/serving/base_url.py), so a browser never probes for it; the
lab cards' pictures and the waiting panels' asks have routes of their own (symlab/serving/page_process.py)."""

import streamlit as st
from streamlit import config

from symlab.serving import page_process

app = st.App("app.py", **page_process.start(config.get_option("server.baseUrlPath") or ""))
