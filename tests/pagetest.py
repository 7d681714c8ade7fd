"""What the pages' AppTest modules share: open a page at a link, read its metrics, drive its players."""

from pathlib import Path

import pandas as pd
from streamlit.testing.v1 import AppTest

from symlab.specs import animation
from views.common.animation import sent as player_document

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


# --- the browser's players (views/common/animation.py): AppTest runs no component's script -------------------


def player(at: AppTest, key: str) -> dict:
    """What the page sent the browser's player ``key`` (its component key): its charts, its frames (gzipped),
    its id and the frame it starts at."""
    [element] = [
        e for e in at.get("bidi_component") if e.proto.component_name == "symlab_player" and e.proto.id.endswith(key)
    ]
    return player_document(element.proto)


def frames_of(sent: dict) -> dict:
    """A player's frames as the browser unpacks them (symlab.specs.animation's document)."""
    return animation.decode_payload(sent["animation"])


def frame_rows(sent: dict, chart: str, dataset: str, frame: int) -> pd.DataFrame:
    """Chart ``chart``'s dataset ``dataset`` at ``frame``, as the browser rebuilds it: its series one after another,
    each row with its ``series`` label."""
    held = animation.rows_at(frames_of(sent), frame)[chart][dataset]
    return pd.concat([pd.DataFrame(columns).assign(series=label) for label, columns in held.items()], ignore_index=True)


def tell(at: AppTest, key: str, frame: int, playing: bool = False) -> AppTest:
    """The browser's player ``key`` telling the page where it stands, as a click on Play, Pause, Step or Reset
    does."""
    at.session_state[key] = {"position": {"id": player(at, key)["id"], "frame": frame, "playing": playing}}
    return at.run()
