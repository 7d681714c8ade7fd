"""Networks of one's own: uploads read and analysed in a process of their own, and downloads written when clicked."""

from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd
import streamlit as st

from symlab.lib import weights
from symlab.serving import uploads
from symlab.specs.urlstate import escaped
from views.common import binding
from views.common.browser import visitor_id

UPLOAD_NOTICE = (
    "An uploaded network cannot live in a link: the link keeps every other setting, so share the file with it."
)
UPLOAD_HELP = (
    f"A torch.save'd state_dict of an MLP of nn.Linear layers (.pt, .pth), or a safetensors file: a "
    f"point estimate, or a mean-field posterior as this app exports them or as {weights.LIBRARIES} save "
    "them (each library's σ transform applied). The file is read as data only, in a process of its own: "
    "nothing in it is run."
)
NAME_CHARS = 120  # of an uploaded file's name as shown: two lines on a phone
SHOWN_EVERY_SECONDS = 3.0  # how often a running analysis's elapsed time is redrawn (each a message to the page)


def analysis_limits() -> uploads.AnalysisLimits:
    return uploads.AnalysisLimits.from_live(binding.server_settings().live)


def upload_field(label: str, key: str):
    """A file uploader (the browser refuses files over the upload limit, Streamlit's server.maxUploadSize, which is
    weights.MAX_FILE_MB: tests/test_weights.py checks they agree)."""
    return st.file_uploader(label, key=key, help=UPLOAD_HELP)


def upload_name(upload) -> str:
    """An uploaded file's name as the page shows it and its analysis quotes it: the last part of a path (a client
    may send one: it names no place here), its control, bidi and zero-width characters escaped, and cut in the
    middle past :data:`NAME_CHARS`, keeping its ending (the extension)."""
    name = escaped(re.split(r"[/\\]", upload.name)[-1]) or "(no name)"
    if len(name) <= NAME_CHARS:
        return name
    keep = NAME_CHARS // 2 - 1
    return f"{name[:keep]}…{name[-keep:]}"


def plain(text: str) -> str:
    """``text`` shown as it is where Streamlit reads Markdown: a file's name or a key from inside a file is
    anyone's text, and must not become a link, an image, a formula, an icon or a colour."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>$~:&])", r"\\\1", text)


def analysed(name: str, function: Callable, files: list, options: tuple = ()):
    """``function([(file name, bytes), …], *options)`` in a process of its own (:mod:`symlab.serving.uploads`),
    kept in this session under ``name`` while the files and ``options`` stay, a refusal as much as a result (a
    file that could not be read is not read again at every rerun). Returns the result, or raises
    :class:`uploads.UploadRefused`."""
    inputs = (tuple(upload.file_id for upload in files), options)
    kept = st.session_state.get(name)
    if kept is None or kept[0] != inputs:
        st.session_state.pop(name, None)  # the previous result goes before the next is made
        kept = (inputs, _analyse(function, files, options))
        st.session_state[name] = kept
    if isinstance(kept[1], uploads.UploadRefused):
        raise kept[1]
    return kept[1]


def _analyse(function: Callable, files: list, options: tuple):
    limits = analysis_limits()
    status = st.empty()
    names = ", ".join(upload_name(upload) for upload in files)
    shown = [-SHOWN_EVERY_SECONDS]

    def waiting(ahead: int) -> None:
        status.info(
            f"Waiting for {ahead} {'analysis' if ahead == 1 else 'analyses'} of other uploads to finish: this server "
            f"runs {limits.concurrent} at a time.",
            icon=":material/hourglass_top:",
        )

    def working(seconds: float) -> None:
        if seconds - shown[0] >= SHOWN_EVERY_SECONDS:
            shown[0] = seconds
            pace = f", at {limits.core_share:.0%} of a core: the rest is the class's" if limits.core_share < 1 else ""
            status.info(
                f"Reading and analysing {plain(names)}: {seconds:.0f} s (at most {limits.cpu_seconds} s of "
                f"CPU time here{pace}).",
                icon=":material/hourglass_top:",
            )

    try:
        return uploads.analyse(
            function,
            [(upload_name(upload), upload.getvalue()) for upload in files],
            options,
            limits=limits,
            waiting=waiting,
            working=working,
            owner=visitor_id(),
        )
    except uploads.UploadRefused as error:
        return error
    finally:
        status.empty()


def show_refusal(error: uploads.UploadRefused) -> None:
    st.error(plain(str(error)), icon=":material/error:")


def show_read(container, upload, description: str) -> None:
    """What an uploaded file was read as, its name as text."""
    container.success(f"{plain(upload_name(upload))}: {description}.", icon=":material/check_circle:")


def layer_table(rows: list[dict]) -> pd.DataFrame:
    """The inferred structure, one row per nn.Linear layer (weights.Network.layer_rows), for the user to confirm."""
    return pd.DataFrame(rows).set_index("layer")


def file_download(
    data: Callable[[], bytes] | bytes,
    filename: str,
    label: str,
    key: str,
    help: str | None = None,
    mime: str = "application/octet-stream",
) -> None:
    """A download of a file (a posterior as safetensors), written only when clicked."""
    st.download_button(
        label, data, file_name=filename, mime=mime, key=key, icon=":material/download:", on_click="ignore", help=help
    )
