"""symlab/serving/base_url.py: every HTML page the server sends tells Streamlit's frontend where the server is."""

import asyncio

from symlab.serving.base_url import PinnedBaseUrl, pinning_script

PAGE = b"<!doctype html><html><head><title>x</title></head><body></body></html>"


def answering(content_type: bytes, body: bytes, seen: list):
    async def app(scope, receive, send):
        seen.append(scope)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body[:10], "more_body": True})
        await send({"type": "http.response.body", "body": body[10:]})

    return app


def request(app, path: str, method: str = "GET") -> tuple[dict, bytes]:
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request"}

    scope = {"type": "http", "method": method, "path": path, "headers": [(b"accept-encoding", b"gzip")]}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    return dict(start["headers"]), b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def test_a_page_carries_the_server_root_first_in_its_head_asked_uncompressed():
    seen = []
    headers, body = request(PinnedBaseUrl(answering(b"text/html; charset=utf-8", PAGE, seen)), "/toy")
    assert body.startswith(b"<!doctype html><html><head><script>window.__streamlit")
    assert b'BACKEND_BASE_URL: window.location.origin + ""' in body and body.endswith(b"</html>")
    assert int(headers[b"content-length"]) == len(body)
    assert (b"accept-encoding", b"gzip") not in seen[0]["headers"]


def test_under_a_base_path_the_root_is_that_path():
    assert b'window.location.origin + "/symlab"' in pinning_script("/symlab/")
    assert b'window.location.origin + ""' in pinning_script("")


def test_anything_but_a_page_passes_untouched():
    for path, content_type, method in (
        ("/static/js/index.js", b"text/javascript", "GET"),
        ("/_stcore/health", b"text/html", "GET"),
        ("/toy", b"text/html", "HEAD"),
    ):
        seen = []
        headers, body = request(PinnedBaseUrl(answering(content_type, PAGE, seen)), path, method)
        assert body == PAGE and int(headers[b"content-length"]) == len(PAGE)
        assert seen[0]["headers"] == [(b"accept-encoding", b"gzip")]  # not even asked uncompressed
