"""The server's address, written into the page it sends, so that the browser does not guess it.

Streamlit's page finds its server by trying the page's own path first: on /toy it asks for
/toy/_stcore/health and /toy/_stcore/host-config (two 404s in every visitor's console) before the root. It takes
the address as given from ``window.__streamlit.BACKEND_BASE_URL``, which a host embedding Streamlit may set. This
middleware is that host: it adds the setting to every HTML page the server sends (the app's one ``index.html``,
served for every page's path), pointing at the server's root (``server.baseUrlPath`` included)."""

from __future__ import annotations

import json

RESERVED = (
    "/_stcore/",
    "/static/",
    "/media/",
    "/component/",
    "/app/static/",
    "/cards/",
    "/progress/",
)  # never the app's page


def path_prefix(base_path: str) -> str:
    """``base_path`` (Streamlit's ``server.baseUrlPath``: "", "class", "/class/") as the prefix of the server's paths:
    "" or "/class"."""
    return "/" + base_path.strip("/") if base_path.strip("/") else ""


def pinning_script(base_path: str) -> bytes:
    """The ``<script>`` that tells Streamlit's page the server's root, ``base_path`` under the page's origin."""
    base = path_prefix(base_path)
    return (
        b"<script>window.__streamlit = Object.assign(window.__streamlit || {}, "
        b"{BACKEND_BASE_URL: window.location.origin + " + json.dumps(base).encode() + b"});</script>"
    )


def with_script(html: bytes, script: bytes) -> bytes:
    """``html`` with ``script`` first in its head (before Streamlit's own script reads the setting)."""
    head = html.find(b"<head>")
    if head < 0:
        return html
    at = head + len(b"<head>")
    return html[:at] + script + html[at:]


class PinnedBaseUrl:
    """ASGI middleware: every ``text/html`` answer to a GET of a page's path carries :func:`pinning_script`."""

    def __init__(self, app, base_path: str = ""):
        self.app, self.script = app, pinning_script(base_path)

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "")
        if scope["type"] != "http" or scope.get("method") != "GET" or any(part in path + "/" for part in RESERVED):
            await self.app(scope, receive, send)
            return
        # The page is small: asked for uncompressed, it can be edited before it is sent.
        scope = {
            **scope,
            "headers": [(name, value) for name, value in scope["headers"] if name.lower() != b"accept-encoding"],
        }
        start: dict | None = None  # an HTML response's start, held until its whole body is edited
        body: list[bytes] = []

        async def edited(message):
            nonlocal start
            if message["type"] == "http.response.start":
                headers = dict((name.lower(), value) for name, value in message.get("headers", []))
                if headers.get(b"content-type", b"").startswith(b"text/html"):
                    start = message
                else:
                    await send(message)
                return
            if start is None:  # not HTML: it goes as it came
                await send(message)
                return
            body.append(message.get("body", b""))
            if message.get("more_body"):
                return
            html = with_script(b"".join(body), self.script)
            kept = [(name, value) for name, value in start.get("headers", []) if name.lower() != b"content-length"]
            await send({**start, "headers": [*kept, (b"content-length", str(len(html)).encode())]})
            await send({"type": "http.response.body", "body": html})

        await self.app(scope, receive, edited)
