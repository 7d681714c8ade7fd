"""SymLab home page and navigation: ``streamlit run app.py``."""

from pathlib import Path

import streamlit as st

from symlab.labs import LABS
from symlab.runs.device import describe_device, set_threads
from views.common import binding

ASSETS = Path(__file__).parent / "assets"
# A local file: a material-icon favicon would be fetched from fonts.gstatic.com, which a classroom
# network or an offline laptop may not reach.
st.set_page_config(page_title="SymLab", page_icon=str(ASSETS / "icon.svg"), layout="wide")
st.logo(str(ASSETS / "logo.svg"), size="large", icon_image=str(ASSETS / "icon.svg"))
SETTINGS = binding.server_settings(report=True)


@st.cache_resource(show_spinner=False)
def threads_set(count: int) -> int:
    """The labs' tensors are small: one thread (the default) is fastest, and it leaves the other cores to the
    other sessions (several threads per session oversubscribe the CPU and slow every tick ~3×). Set once per
    process: it scans every loaded library for the BLAS, a few milliseconds of each page run otherwise."""
    return set_threads(count)


threads_set(SETTINGS.live.torch_threads)
if SETTINGS.hosted:
    st.sidebar.caption(f"Shared server, caps for everyone: {SETTINGS.describe()}.")


@st.cache_resource(show_spinner=False)
def device_text() -> str:
    return describe_device()


def home():
    st.title("SymLab")
    st.markdown(
        "SymLab shows how the symmetries of neural-network weights break variational inference. "
        "Permuting a network's hidden units leaves its function unchanged, so its posterior has many "
        "equivalent modes, and in wide networks these modes sit close together. "
        "A single Gaussian fitted by reverse KL then settles *between* close modes instead of on one, "
        "where the network predicts badly. "
        "Each lab below lets you watch one step of that argument, with the formulas beside the pictures. "
        "Every control lives in the page's link, so a copied URL restores exactly what you see."
    )
    st.subheader("The labs")
    for lab, page in zip(LABS, LAB_PAGES):
        st.page_link(page, label=f"**{lab.title}**")
        st.caption(lab.blurb)
    st.caption(f"Compute device: {device_text()}")
    st.caption("Papers: Gelberg, van der Ouderaa, van der Wilk, Gal (2024), *Variational Inference Failures "
               "Under Model Symmetries*; Laurent, Aldea, Franchi (ICLR 2024); Rossi, Singh, Hannagan (NeurIPS 2023).")


LAB_PAGES = [st.Page(lab.page, title=lab.title, icon=lab.icon, url_path=lab.name) for lab in LABS]
navigation = st.navigation([st.Page(home, title="Home", icon=":material/home:", default=True), *LAB_PAGES])
navigation.run()
