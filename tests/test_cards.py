"""The lab cards' pictures: served by serve.py's route at links that name their content, never as media files."""

import io

import pytest
from asgi import get
from PIL import Image
from starlette.applications import Starlette

from symlab.labs import LABS
from symlab.serving import cards


@pytest.fixture
def served(monkeypatch):
    """The route mounted under a base path, as serve.py mounts it; unmounted again afterwards."""
    monkeypatch.setattr(cards, "_served_under", None)
    return Starlette(routes=cards.routes("/class/"))


def test_no_link_until_a_server_serves_the_route(monkeypatch):
    monkeypatch.setattr(cards, "_served_under", None)
    assert cards.card_link("modes") is None  # the home page then sends the picture itself (AppTest, app.py alone)
    assert cards.card_picture("modes")[:3] == b"\xff\xd8\xff"  # a JPEG


def test_every_labs_picture_is_served_whole_at_its_link_and_kept_for_good(served):
    for lab in LABS:
        link = cards.card_link(lab.name)
        assert link.startswith("/class/cards/") and link.endswith(".jpg")
        status, headers, body = get(served, link)
        assert status == 200 and headers["content-type"] == "image/jpeg"
        assert "immutable" in headers["cache-control"]
        assert body == cards.card_picture(lab.name)
        with Image.open(cards.CARDS / f"{lab.name}.png") as original:
            shown = Image.open(io.BytesIO(body))
            assert shown.width == min(original.width, cards.CARD_MAX_WIDTH_PX)


def test_a_link_names_its_pictures_content(served):
    """A changed picture gets a new link (the browser keeps the old one for good), and an old or made-up link is a
    plain 404."""
    link = cards.card_link("toy")
    digest = link.rsplit(".", 2)[1]
    assert len(digest) == 12 and digest != cards.card_link("modes").rsplit(".", 2)[1]
    for wrong in (link.replace(digest, "0" * 12), "/class/cards/../app.py", "/class/cards/toy.png", "/cards/toy.jpg"):
        status, _, body = get(served, wrong)
        assert status == 404 and b"\xff\xd8" not in body
