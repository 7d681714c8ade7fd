"""What the pages' AppTest modules share: open a page at a link, read its metrics."""

from pathlib import Path

from streamlit.testing.v1 import AppTest

PAGES = Path(__file__).resolve().parents[1] / "views"


def open_page(name: str, timeout: float = 180, state: dict | None = None, **query) -> AppTest:
    """``views/<name>.py`` run once, opened at a link carrying the query parameters ``query``, in a session
    that already holds ``state``."""
    at = AppTest.from_file(str(PAGES / f"{name}.py"), default_timeout=timeout)
    at.query_params.update(query)
    for key, value in (state or {}).items():
        at.session_state[key] = value
    return at.run()


def metrics(at) -> dict:
    """The page's metrics, label -> shown value."""
    return {m.label: m.value for m in at.metric}


class Upload:
    """A file as Streamlit's uploader hands it to a page (AppTest cannot upload): its name, its id, its bytes."""

    def __init__(self, name: str, data: bytes, file_id: str | None = None):
        self.name, self._data = name, data
        self.file_id = file_id or f"{name}-{len(data)}-{hash(data)}"

    def getvalue(self) -> bytes:
        return self._data


def uploading(monkeypatch, files: dict) -> None:
    """Make the pages' uploaders (views.common.files.upload_field) hold ``files``: label -> :class:`Upload`."""
    from views.common import files as file_views

    monkeypatch.setattr(file_views, "upload_field", lambda label, key: files.get(label))
