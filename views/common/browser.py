"""Which browser a session is in: one id for every tab and session of a browser, the same across reloads. The runs a
browser launched are its own by it (views/common/runs.py), and it is the unit of a fair share of the page process
and the compute workers (symlab.serving.pace, symlab.serving.shared_results)."""

import hashlib
import uuid

import streamlit as st

XSRF_COOKIE = "_streamlit_xsrf"  # Streamlit's own, set in every browser while XSRF protection is on (the default)


def xsrf_token(cookie: str | None) -> bytes | None:
    """The random token of Streamlit's XSRF cookie, "2|mask|masked token|time" with the token XOR the repeated
    4-byte mask: the server masks it afresh on each page load, so the cookie's text changes and the token stays."""
    if cookie is None:
        return None
    try:
        version, mask_hex, masked_hex, _ = cookie.strip("\"'").split("|")
        mask, masked = bytes.fromhex(mask_hex), bytes.fromhex(masked_hex)
    except (AttributeError, ValueError):
        return None
    if version != "2" or len(mask) != 4 or not masked:
        return None
    return bytes(byte ^ mask[i % 4] for i, byte in enumerate(masked))


def browser_id() -> str:
    """This browser's id: a one-way hash of its XSRF token, the same across reloads and tabs of the browser; ""
    where the browser sends no such cookie."""
    token = xsrf_token(st.context.cookies.get(XSRF_COOKIE))
    return hashlib.sha256(b"symlab run owner\0" + token).hexdigest()[:32] if token else ""


def session_id() -> str:
    """This session's own id, made on its first run: what stands for a visitor whose browser sends no cookie."""
    if "runs.session" not in st.session_state:
        st.session_state["runs.session"] = uuid.uuid4().hex
    return st.session_state["runs.session"]


def visitor_id() -> str:
    """Who a fair share or a count is kept for: this browser, or this session where the browser sends no cookie."""
    return browser_id() or session_id()
