"""What the server keeps of visitors who left (views/common/sessions.py): freed once their sessions cannot come back,
kept while they can."""

from streamlit import runtime
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from views.common import sessions


class Media:
    """The media file manager's part the sweep uses: which sessions hold references, and what it is told."""

    def __init__(self, holding):
        self._files_by_session_and_coord = {session_id: {"coord": "file"} for session_id in holding}
        self.cleared, self.orphans_removed = [], 0

    def clear_session_refs(self, session_id):
        self.cleared.append(session_id)
        self._files_by_session_and_coord.pop(session_id, None)

    def remove_orphaned_files(self):
        self.orphans_removed += 1


class Sessions:
    def __init__(self, known):
        self.known = set(known)

    def get_session_info(self, session_id):
        return object() if session_id in self.known else None


class Server:
    def __init__(self, known, uploads, media):
        self._session_mgr, self.uploaded_file_mgr, self.media_file_mgr = Sessions(known), uploads, media


def test_the_uploads_and_downloads_of_sessions_that_cannot_return_are_freed(monkeypatch):
    uploads = MemoryUploadedFileManager("/_stcore/upload_file")
    for session_id in ("here", "reconnecting", "gone"):
        uploads.add_file(
            session_id, UploadedFileRec(f"{session_id}-file", "net.pt", "application/octet-stream", b"\0" * 1000)
        )
    media = Media(["here", "gone", "gone-too"])
    server = Server({"here", "reconnecting"}, uploads, media)  # active, or kept for its browser to come back
    monkeypatch.setattr(runtime, "exists", lambda: True)
    monkeypatch.setattr(runtime, "get_instance", lambda: server)
    assert sessions.sweep() == 2
    assert set(uploads.file_storage) == {"here", "reconnecting"}
    assert sorted(media.cleared) == ["gone", "gone-too"] and media.orphans_removed == 1
    assert sessions.sweep() == 0 and media.orphans_removed == 1  # nothing more to free


def test_a_page_run_sweeps_at_most_every_few_seconds(monkeypatch):
    swept = []
    monkeypatch.setattr(sessions, "sweep", lambda: swept.append(1) or 0)
    monkeypatch.setattr(sessions, "_last_sweep", [0.0])
    for _ in range(50):
        sessions.sweep_now_and_then()
    assert swept == [1]


def test_without_a_server_there_is_nothing_to_sweep(monkeypatch):
    monkeypatch.setattr(runtime, "exists", lambda: False)
    assert sessions.sweep() == 0


def test_a_test_runtime_without_sessions_is_left_alone(monkeypatch):
    monkeypatch.setattr(runtime, "exists", lambda: True)
    monkeypatch.setattr(runtime, "get_instance", lambda: object())  # AppTest's runtime stands in like this
    assert sessions.sweep() == 0
