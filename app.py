"""SymLab home page and navigation: ``streamlit run app.py``."""

from pathlib import Path

import streamlit as st
import torch

from pages import ui
from symlab.device import describe_device

ui.leave_legacy_multipage_mode()
ASSETS = Path(__file__).parent / "assets"
# A local file: a material-icon favicon would be fetched from fonts.gstatic.com, which a classroom
# network or an offline laptop may not reach.
st.set_page_config(page_title="SymLab", page_icon=str(ASSETS / "icon.svg"), layout="wide")
st.logo(str(ASSETS / "logo.svg"), size="large", icon_image=str(ASSETS / "icon.svg"))
SETTINGS = ui.server_settings(report=True)
# The labs' tensors are small: one torch thread (the default) is fastest, and it leaves the other
# cores to the other sessions (several threads per session oversubscribe the CPU and slow every tick ~3×).
torch.set_num_threads(SETTINGS.live.torch_threads)
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
    for page, text in (
        (MODES, "One Gaussian, two modes, and the threshold α* ≈ 5σ where reverse KL stops interpolating "
                "(Gelberg et al. 2024, §3)."),
        (TOY, "The two-weight ReLU network trained live: the exact posterior against mean-field VI and its "
              "symmetrised version, SGM (§5, Fig. 4, Tables 2–3)."),
        (MNIST, "Launch MFVI and SGM runs of Bayesian MLPs, watch them train, and compare accuracy across widths "
                "like the paper's Table 1 (§5)."),
        (SYMMETRY, "Take the symmetries out: the doubled mode of Laurent et al.'s Fig. 1 and its removal, min-mass "
                   "rescaling, how close equivalent modes are as width grows (Thm 3.1), MMD to the exact posterior, "
                   "and whether units change places during training."),
        (ALIGN, "Two mean-field posteriors from different seeds, matched across permutations: the loss barrier on "
                "the path between them before and after alignment (Rossi et al. 2023)."),
    ):
        st.page_link(page, label=f"**{page.title}**")
        st.caption(text)
    st.caption(f"Compute device: {device_text()}")
    st.caption("Papers: Gelberg, van der Ouderaa, van der Wilk, Gal (2024), *Variational Inference Failures "
               "Under Model Symmetries*; Laurent, Aldea, Franchi (ICLR 2024); Rossi, Singh, Hannagan (NeurIPS 2023).")


MODES = st.Page("pages/modes.py", title="Mode interpolation", icon=":material/ssid_chart:", url_path="modes")
TOY = st.Page("pages/toy.py", title="Tractable BNN", icon=":material/hub:", url_path="toy")
MNIST = st.Page("pages/mnist.py", title="MNIST", icon=":material/grid_on:", url_path="mnist")
SYMMETRY = st.Page("pages/symmetry.py", title="Symmetry explorer", icon=":material/flip:", url_path="symmetry")
ALIGN = st.Page("pages/align.py", title="Alignment", icon=":material/compare_arrows:", url_path="align")
navigation = st.navigation([st.Page(home, title="Home", icon=":material/home:", default=True), MODES, TOY, MNIST,
                            SYMMETRY, ALIGN])
navigation.run()
