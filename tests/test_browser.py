"""End-to-end in real Chromium: the app as a student uses it."""

import re

import pytest

from conftest import running_app

pytestmark = pytest.mark.browser

ARTIFACTS = __import__("pathlib").Path(__file__).resolve().parents[1] / "tests" / "artifacts"


def wait_for_run(page):
    """Streamlit shows a running indicator while the script runs; wait until it settles."""
    page.wait_for_selector('[data-testid="stApp"]')
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=30_000)


def metric_value(page, label):
    metric = page.locator('[data-testid="stMetric"]', has_text=label).first
    return metric.locator('[data-testid="stMetricValue"]').inner_text()


FIRST_LINE_JS = "document.querySelectorAll('.js-plotly-plot')[0].querySelectorAll('path.js-line')[1].getAttribute('d')"


def first_line_path(page):
    return page.evaluate(FIRST_LINE_JS)


def wait_for_chart_change(page, before):
    """Plotly redraws after Streamlit delivers the new figure; poll until it has."""
    page.wait_for_function(f"before => {FIRST_LINE_JS} !== before", arg=before)


def test_modes_page_slider_changes_the_chart(page, server_url):
    page.goto(server_url)
    page.locator('[data-testid="stSidebarNav"] a', has_text="Mode interpolation").click()
    page.wait_for_url(re.compile(r"/modes\?"))
    page.locator('.js-plotly-plot').first.wait_for()
    wait_for_run(page)
    assert metric_value(page, "α⁻¹‖μ*‖") == "0.500"
    before = first_line_path(page)

    slider = page.get_by_role("slider").first
    slider.focus()
    page.keyboard.press("End")  # α to its maximum, 20: far beyond α*
    page.wait_for_url(re.compile(r"alpha=20\.0"))
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=\"stMetricValue\"]')]"
        ".some(e => e.innerText === '0.000')")
    wait_for_run(page)
    wait_for_chart_change(page, before)
    assert page.locator('[data-testid="stException"]').count() == 0

    with page.expect_download() as download_info:
        page.get_by_role("button", name="Sweep (CSV)").click()
    csv_text = open(download_info.value.path()).read().splitlines()
    assert csv_text[0].startswith("alpha,interpolation,det_cov,kl") and len(csv_text) == 101
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "modes.png"), full_page=True)


def test_shared_link_restores_the_view_and_play_animates(page, server_url):
    page.goto(f"{server_url}/modes?alpha=2.0&sigma=0.5&dim=2&forward=1")
    page.locator('.js-plotly-plot').first.wait_for()
    wait_for_run(page)
    assert metric_value(page, "α⁻¹‖μ*‖") == "0.500"
    assert page.locator('[data-testid="stSliderThumbValue"]').first.inner_text() == "2.00"
    assert page.locator("text=q (forward KL)").count() > 0

    progress = page.locator('[data-testid="stProgress"]').first
    assert "Adam step 0 /" in progress.inner_text()
    page.get_by_role("button", name="Play", exact=True).click()
    page.wait_for_function(
        "() => /Adam step [1-9]\\d* \\//.test(document.querySelector('[data-testid=\"stProgress\"]').innerText)")
    page.get_by_role("button", name="Pause", exact=True).click()
    page.get_by_role("button", name="Reset", exact=True).click()
    page.wait_for_function(
        "() => /Adam step 0 \\//.test(document.querySelector('[data-testid=\"stProgress\"]').innerText)")


def test_malformed_link_shows_a_notice(page, server_url):
    page.goto(f"{server_url}/modes?alpha=banana&sigma=99")
    page.locator('.js-plotly-plot').first.wait_for()
    notice = page.locator('[data-testid="stAlert"]', has_text="adjusted")
    notice.wait_for()
    assert "alpha=banana" in notice.inner_text() and "clamped" in notice.inner_text()
    assert page.locator('[data-testid="stException"]').count() == 0


def test_deep_link_on_a_freshly_started_server(page):
    """The first session after a start is the one Streamlit runs in its legacy pages/ mode."""
    with running_app() as url:
        page.goto(f"{url}/modes?alpha=6.0")
        page.locator('.js-plotly-plot').first.wait_for()
        wait_for_run(page)
        assert "/modes" in page.url and "alpha=6.0" in page.url
        assert page.get_by_text("does not seem to exist").count() == 0
        links = page.locator('[data-testid="stSidebarNav"] a').all_inner_texts()
        assert [link.splitlines()[-1] for link in links] == ["Home", "Mode interpolation", "Tractable BNN", "MNIST"]
        assert float(metric_value(page, "α⁻¹‖μ*‖")) < 0.01  # α = 6 > α*: on one mode


def test_tractable_bnn_trains_live(page, server_url):
    page.goto(f"{server_url}/toy?alpha=0.25&seed=3")
    page.locator('.js-plotly-plot').first.wait_for()
    wait_for_run(page)
    progress = page.locator('[data-testid="stProgress"]').first
    assert "Adam step 0 /" in progress.inner_text()
    elbo_line_js = "document.querySelectorAll('.js-plotly-plot')[1].querySelector('path.js-line').getAttribute('d')"
    before = page.evaluate(elbo_line_js)
    page.get_by_role("button", name="Play", exact=True).click()
    page.wait_for_function(
        "() => { const m = /Adam step (\\d+) \\//.exec(document.querySelector('[data-testid=\"stProgress\"]').innerText);"
        " return m && Number(m[1]) >= 200; }", timeout=60_000)
    page.get_by_role("button", name="Pause", exact=True).click()
    page.wait_for_function(f"before => {elbo_line_js} !== before", arg=before)
    assert page.locator('[data-testid="stException"]').count() == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "toy.png"), full_page=True)


def test_mnist_runs_launched_in_the_browser_survive_a_reload_and_finish(page, server_url, server_runs_dir):
    from symlab.runs import FINISHED, Registry

    page.goto(f"{server_url}/mnist?hidden=256&epochs=4&subset=20000&samples=2&seed=11")
    wait_for_run(page)
    page.get_by_role("button", name="Launch MFVI and SGM (same seed)").click()
    progress = page.locator('[data-testid="stProgress"]', has_text="seed 11")
    progress.first.wait_for()
    assert progress.count() == 2  # one running, one queued behind it
    page.reload()  # as if the tab were closed and opened again
    page.locator('[data-testid="stProgress"]', has_text="SGM K=16, width 256, seed 11").wait_for()
    registry = Registry(server_runs_dir)
    deadline = __import__("time").monotonic() + 120
    while not all(run.status == FINISHED for run in registry.runs()):
        assert __import__("time").monotonic() < deadline, registry.runs()
        page.wait_for_timeout(1000)
    page.wait_for_function("() => document.querySelectorAll('[data-testid=\"stProgress\"]').length === 0",
                           timeout=20_000)  # the live view noticed, without a reload
    page.get_by_role("tab", name="Results").click()
    page.get_by_text("Accuracy against width").first.wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "mnist.png"), full_page=True)
