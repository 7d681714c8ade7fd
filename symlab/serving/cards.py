"""The lab cards' pictures, served by a route of the server's own (serve.py) at a link that names their content.

Through ``st.image`` a picture is a media file of the session's run, deleted at the end of the session's next run:
a visitor who taps a card before its picture has loaded got a 404 for it in the console, and every home-page run
hashed the six pictures' bytes again. Here each picture is made once per process, its link holds a digest of its
bytes, so the browser keeps it for good (a new picture is a new link), and no run touches it."""

from __future__ import annotations

import functools
import hashlib
import io
from pathlib import Path

from PIL import Image

from symlab.serving.base_url import path_prefix

CARDS = Path(__file__).resolve().parents[1] / "assets" / "cards"
CARD_MAX_WIDTH_PX = 1460  # Streamlit's widest content: a wider picture would only be scaled down by the browser
ROUTE = "/cards"  # under the server's base path; none of Streamlit's routes starts so
_served_under: str | None = None  # the base path this process's server serves the route under (serve.py), or None


@functools.cache
def card_picture(name: str) -> bytes | None:
    """A lab card's picture (assets/cards/<name>.png) as a JPEG no wider than the page, or None where it has none."""
    path = CARDS / f"{name}.png"
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


@functools.cache
def file_name(name: str) -> str:
    """``<name>.<digest>.jpg``: the link changes whenever the picture does."""
    picture = card_picture(name)
    if picture is None:
        raise FileNotFoundError(f"the lab card {name!r} has no picture in {CARDS}")
    return f"{name}.{hashlib.sha256(picture).hexdigest()[:12]}.jpg"


def card_link(name: str) -> str | None:
    """The picture's path on this server, or None where the route is not served (AppTest, ``streamlit run app.py``)
    or the lab has no picture."""
    if _served_under is None or card_picture(name) is None:
        return None
    return f"{_served_under}{ROUTE}/{file_name(name)}"


def routes(base_path: str = "") -> list:
    """The route that serves every card's picture under ``base_path``, for ``st.App(routes=...)``; from then on the
    home page links to it."""
    from starlette.responses import Response
    from starlette.routing import Route

    global _served_under
    _served_under = path_prefix(base_path)
    by_file = {file_name(path.stem): path.stem for path in sorted(CARDS.glob("*.png"))}

    async def picture(request):
        name = by_file.get(request.path_params["file"])
        if name is None:
            return Response("no such picture", status_code=404, media_type="text/plain")
        headers = {"Cache-Control": "public, max-age=31536000, immutable"}  # its link names its content
        return Response(card_picture(name), media_type="image/jpeg", headers=headers)

    return [Route(f"{_served_under}{ROUTE}/{{file}}", picture, methods=["GET", "HEAD"])]
