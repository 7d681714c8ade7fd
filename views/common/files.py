"""Networks of one's own: uploads read as data only, and downloads written when clicked."""

from __future__ import annotations

from typing import Callable, Hashable

import pandas as pd
import streamlit as st

from symlab.lib import weights

UPLOAD_NOTICE = ("An uploaded network cannot live in a link: the link keeps every other setting, so share the "
                 "file with it.")
UPLOAD_HELP = (f"A torch.save'd state_dict of an MLP of nn.Linear layers (.pt, .pth), or a safetensors file: a "
               f"point estimate, or a mean-field posterior as this app exports them or as {weights.LIBRARIES} save "
               f"them (each library's σ transform applied). At most "
               f"{weights.MAX_FILE_BYTES // 2**20} MB. The file is read as data only: nothing in it is run.")


def kept_in_session(name: str, inputs: Hashable, compute: Callable):
    """``compute()``, kept in this session under ``name`` while ``inputs`` stay the same (an exception
    keeps nothing)."""
    kept = st.session_state.get(name)
    if kept is None or kept[0] != inputs:
        kept = (inputs, compute())
        st.session_state[name] = kept
    return kept[1]


def upload_id(key: str) -> str | None:
    """Which upload the widget ``key`` holds (each upload of a file gets its own), or None."""
    upload = st.session_state.get(key)
    return None if upload is None else upload.file_id


def uploaded_network(label: str, key: str) -> weights.Network | None:
    """The network in the file uploaded under ``key`` (read once per file, kept in this session), its structure
    shown back for confirmation; a file that is not a usable MLP gets its message and None."""
    upload = st.file_uploader(label, key=key, help=UPLOAD_HELP)
    if upload is None:
        return None
    try:
        network = kept_in_session(f"{key}.network", upload_id(key),
                                  lambda: weights.read_network(upload.getvalue(), upload.name))
    except weights.WeightsError as error:
        st.error(str(error), icon=":material/error:")
        return None
    st.success(f"**{upload.name}**: {network.describe()}.", icon=":material/check_circle:")
    return network


def layer_table(network: weights.Network) -> pd.DataFrame:
    """The inferred structure, one row per nn.Linear layer, for the user to confirm."""
    return pd.DataFrame([{"layer": index + 1, "inputs": W.shape[1], "outputs": W.shape[0],
                          "parameters": W.size + b.size * present, "bias": "yes" if present else "none",
                          "then": "ReLU" if index < len(network.means) - 1 else "—"}
                         for index, ((W, b), present) in enumerate(zip(network.means, network.biases))]).set_index("layer")


def file_download(data: Callable[[], bytes] | bytes, filename: str, label: str, key: str, help: str | None = None,
                  mime: str = "application/octet-stream") -> None:
    """A download of a file (a posterior as safetensors), written only when clicked."""
    st.download_button(label, data, file_name=filename, mime=mime, key=key,
                       icon=":material/download:", on_click="ignore", help=help)
