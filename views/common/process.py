"""What a page process sets up or makes once, for every session's runs.

Here rather than in app.py: app.py runs anew on every page run, and a cached function defined there is rebuilt
(its source read and hashed) on each of them."""

from __future__ import annotations

import functools
import io
from pathlib import Path

from PIL import Image

from symlab.runs.device import describe_device, set_threads
from symlab.serving.heap import return_large_blocks

ASSETS = Path(__file__).resolve().parents[2] / "assets"
CARD_MAX_WIDTH_PX = 1460  # Streamlit's widest content: it would scale a wider picture down on every run


@functools.cache
def large_blocks_returned() -> bool:
    """Once per process (serve.py does it first; ``streamlit run app.py`` does not run serve.py)."""
    return return_large_blocks()


@functools.cache
def threads_set(count: int) -> int:
    """The labs' tensors are small: one thread (the default) is fastest, and it leaves the other cores to the
    other sessions (several threads per session oversubscribe the CPU and slow every tick ~3×). Set once per
    process: it scans every loaded library for the BLAS, a few milliseconds of each page run otherwise."""
    return set_threads(count)


@functools.cache
def device_text() -> str:
    return describe_device()


@functools.cache
def card_picture(name: str) -> bytes | None:
    """A lab card's picture (assets/cards/<name>.png) as st.image sends it, a JPEG no wider than the page, made once
    per process: given the PNG, st.image decodes, scales and re-encodes it on every run (80 % of the home page's
    CPU); given these bytes, it sends them as they are."""
    path = ASSETS / "cards" / f"{name}.png"
    if not path.exists():
        return None
    picture = Image.open(path).convert("RGB")
    if picture.width > CARD_MAX_WIDTH_PX:
        picture = picture.resize(
            (CARD_MAX_WIDTH_PX, round(picture.height * CARD_MAX_WIDTH_PX / picture.width)), Image.Resampling.LANCZOS
        )
    encoded = io.BytesIO()
    picture.save(encoded, format="JPEG", quality=90)
    return encoded.getvalue()
