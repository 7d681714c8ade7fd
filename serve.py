"""SymLab's server: ``streamlit run serve.py`` serves the app (app.py) and, as it starts, warms
what a first visitor would otherwise wait for (symlab/warmup.py) without delaying its health check."""

import streamlit as st

from symlab.serving.warmup import lifespan

app = st.App("app.py", lifespan=lifespan)
