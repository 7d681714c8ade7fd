"""One HTTP request straight through an ASGI app (a route of the server's own), no server or client library."""

from conftest import run_coroutine


def get(app, path: str) -> tuple[int, dict, bytes]:
    """A GET of ``path``: the answer's status, headers and body."""
    scope = {"type": "http", "method": "GET", "path": path, "raw_path": path.encode(), "query_string": b""}
    scope |= {"headers": [], "scheme": "http", "server": ("test", 80), "root_path": "", "http_version": "1.1"}
    answer = {"body": b""}

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {name.decode(): value.decode() for name, value in message["headers"]}
        else:
            answer["body"] += message.get("body", b"")

    run_coroutine(app(scope, receive, send))
    return answer["status"], answer["headers"], answer["body"]
