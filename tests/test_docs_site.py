"""The documentation site as a reader opens it: built by mkdocs (as CI builds it), its formulas typeset in Chromium by
the KaTeX it serves itself, with no raw TeX left and nothing fetched from elsewhere."""

import functools
import http.server
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The built site, served over HTTP on this machine (as `mkdocs serve` or any static host serves it)."""
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)], cwd=ROOT, check=True, timeout=120
    )
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(out))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def opened(browser, url: str):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: message.type == "error" and errors.append(message.text))
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    return page, requests, errors


def test_the_science_page_shows_typeset_formulas_and_no_raw_tex(site, browser):
    page, requests, errors = opened(browser, f"{site}/science/")
    try:
        counts = page.evaluate(
            """() => ({
                maths: document.querySelectorAll('.arithmatex').length,
                typeset: document.querySelectorAll('.arithmatex .katex').length,
                failed: document.querySelectorAll('.katex-error').length,
                dollars: (document.querySelector('main, [role=main], .col-md-9') || document.body).innerText
                    .split('$').length - 1,
                delimiters: [...document.querySelectorAll('.arithmatex')].filter(e => /\\\\[\\(\\[]/.test(
                    e.innerText)).length,
            })"""
        )
        assert counts["maths"] > 300, counts  # the science page's formulas (718 when written)
        assert counts["typeset"] == counts["maths"] and counts["failed"] == 0, counts
        assert counts["dollars"] == 0 and counts["delimiters"] == 0, counts
        assert not errors
        assert all(url.startswith(site) for url in requests), [url for url in requests if not url.startswith(site)]
    finally:
        page.close()


def test_starred_symbols_are_not_italics(site, browser):
    page, _, errors = opened(browser, f"{site}/labs/")
    try:
        text = page.inner_text("body")
        assert "α* ≈ 4.82σ" in text and "‖μ*‖" in text and "det Σ*" in text
        assert not page.evaluate("() => [...document.querySelectorAll('em')].some(e => /^[,.) ]/.test(e.innerText))")
        assert not errors
    finally:
        page.close()
