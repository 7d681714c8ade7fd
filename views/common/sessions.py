"""What the server keeps of a visitor who has left: dropped once the session cannot come back.

A session whose browser goes away (a closed tab, a phone asleep, a dropped network) is kept for
``server.disconnectedSessionTTL`` seconds, so that the browser can reconnect to it. Streamlit 1.67 frees a
session's uploaded files and its downloads' deferred callables only when it shuts the session down, which it does
for a session closed for good, never for one whose time to reconnect ran out (streamlit#12607: an uploaded file
stays in memory after its tab is closed). So, at most every :data:`SWEEP_SECONDS`, a page run frees what
Streamlit would have freed at their shutdown for every session it no longer knows (neither active nor waiting for
its browser): their uploads, and their references to media and deferred downloads. Their session state goes with
them, when Streamlit drops an expired session at a later disconnection.
"""

from __future__ import annotations

import threading
import time

from streamlit import runtime

SWEEP_SECONDS = 10.0
_lock = threading.Lock()
_last_sweep = [0.0]


def sweep_now_and_then() -> int:
    """:func:`sweep` when the last one is :data:`SWEEP_SECONDS` old (every page run calls this); how many
    sessions it freed."""
    now = time.monotonic()
    with _lock:
        if now - _last_sweep[0] < SWEEP_SECONDS:
            return 0
        _last_sweep[0] = now
    return sweep()


def sweep() -> int:
    """Free what Streamlit keeps of every session it no longer knows; how many there were."""
    if not runtime.exists():
        return 0
    server = runtime.get_instance()
    # Active, or kept for its browser to reconnect. (A test's stand-in runtime has no session manager.)
    known = getattr(getattr(server, "_session_mgr", None), "get_session_info", None)
    if not callable(known):
        return 0
    departed = [session_id for session_id in _sessions_holding_files(server) if known(session_id) is None]
    for session_id in departed:
        server.uploaded_file_mgr.remove_session_files(session_id)
        server.media_file_mgr.clear_session_refs(session_id)
    if departed:
        server.media_file_mgr.remove_orphaned_files()
    return len(departed)


def _sessions_holding_files(server) -> set[str]:
    """Sessions with uploaded files, or with media and deferred downloads (Streamlit lists neither publicly)."""
    uploads = getattr(getattr(server, "uploaded_file_mgr", None), "file_storage", {})
    media = getattr(getattr(server, "media_file_mgr", None), "_files_by_session_and_coord", {})
    return set(uploads) | set(media)
