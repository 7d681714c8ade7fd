"""End-to-end in real Chromium: the app as a student uses it."""

import json
import re
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import mnist_runs
import pytest
from conftest import running_app
from layout import wait_until_drawn
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect
from vegatest import VEGA_CHART_JS, image_values, png_rows

from symlab.labs import LABS
from symlab.labs.toy import experiment as toy
from symlab.labs.toy import live
from symlab.serving import precomputed
from symlab.specs import animation
from views.common.charts import BLUE_RED, VIRIDIS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = __import__("pathlib").Path(__file__).resolve().parents[1] / "tests" / "artifacts"


def save_screenshot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def wait_for_run(page, timeout_ms=30_000):
    """Wait until the script has run and is not running: the frontend marks its root with the run's state
    ("initial" until the first run, then "running", "rerunRequested", ... "notRunning") and shows a
    running indicator while the script runs."""
    page.wait_for_function(
        '() => document.querySelector(\'[data-testid="stApp"][data-test-script-state="notRunning"]\')'
        " && !document.querySelector('[data-testid=\"stStatusWidget\"]')",
        timeout=timeout_ms,
    )


def metric_value(page, label):
    metric = page.locator('[data-testid="stMetric"]', has_text=label).first
    return metric.locator('[data-testid="stMetricValue"]').inner_text()


CHART = '[data-testid="stVegaLiteChart"] svg.marks, .symlab-player .chart svg.marks'  # a Vega-Lite chart, drawn


def drawn_chart(page, title: str) -> dict:
    """The chart titled ``title`` as drawn (:data:`VEGA_CHART_JS`), once Vega has drawn it: it does so after the
    script's run ends, and later still on a busy machine."""
    page.wait_for_function(f"title => ({VEGA_CHART_JS})(title) !== null", arg=title)
    return page.evaluate(VEGA_CHART_JS, title)


def density_lines(page):
    """The modes page's first chart's lines (the target's and q's densities along e₁), as drawn."""
    return drawn_chart(page, "Along e₁")["lines"]


def wait_for_chart_change(page, before):
    """Vega redraws after Streamlit delivers the new data; poll until it has."""
    page.wait_for_function(
        f"before => {{ const chart = ({VEGA_CHART_JS})('Along e₁');"
        "return chart !== null && JSON.stringify(chart.lines) !== before; }",
        arg=json.dumps(before),
    )


def test_modes_page_slider_changes_the_chart(page, server_url):
    page.goto(server_url)
    page.locator('[data-testid="stSidebarNav"] a', has_text="Mode interpolation").click()
    page.wait_for_url(re.compile(r"/modes\?"))
    page.locator(CHART).first.wait_for()
    wait_for_run(page)
    assert metric_value(page, "α⁻¹‖μ*‖") == "0.500"
    before = density_lines(page)
    assert len(before) == 2  # the target and q

    slider = page.get_by_role("slider").first
    slider.focus()
    page.keyboard.press("End")  # α to its maximum, 20: far beyond α*
    page.wait_for_url(re.compile(r"alpha=20\.0"))
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-testid=\"stMetricValue\"]')].some(e => e.innerText === '0.000')"
    )
    wait_for_run(page)
    wait_for_chart_change(page, before)
    assert page.locator('[data-testid="stException"]').count() == 0

    with page.expect_download() as download_info:
        page.get_by_role("button", name="Sweep (CSV)").click()
    csv_text = open(download_info.value.path()).read().splitlines()
    assert csv_text[0].startswith("alpha,interpolation,det_cov,kl") and len(csv_text) == 101
    save_screenshot(page, "modes")


def test_shared_link_restores_the_view_and_play_animates(page, server_url):
    page.goto(f"{server_url}/modes?alpha=2.0&sigma=0.5&dim=2&forward=1")
    page.locator(CHART).first.wait_for()
    wait_for_run(page)
    assert metric_value(page, "α⁻¹‖μ*‖") == "0.500"
    assert page.locator('[data-testid="stSliderThumbValue"]').first.inner_text() == "2.00"
    assert page.locator("text=q (forward KL)").count() > 0

    label = page.locator(".symlab-player .label")
    # The player fills its label once its charts are built, which can come after the page's other charts.
    expect(label).to_have_text(re.compile(r"^Adam step 0 / 1000: "), timeout=60_000)
    page.get_by_role("button", name="Play", exact=True).click()
    page.wait_for_function(f"() => ({PLAYER_STEP_JS})() > 0")
    page.get_by_role("button", name="Pause", exact=True).click()
    page.get_by_role("button", name="Step", exact=True).click()
    page.get_by_role("button", name="Reset", exact=True).click()
    page.wait_for_function(f"() => ({PLAYER_STEP_JS})() === 0")
    wait_for_run(page)
    assert page.locator('[data-testid="stException"]').count() == 0


def test_malformed_link_shows_a_notice(page, server_url):
    page.goto(f"{server_url}/modes?alpha=banana&sigma=99")
    page.locator(CHART).first.wait_for()
    notice = page.locator('[data-testid="stAlert"]', has_text="adjusted")
    notice.wait_for()
    assert "alpha=banana" in notice.inner_text() and "clamped" in notice.inner_text()
    assert page.locator('[data-testid="stException"]').count() == 0


def test_deep_link_on_a_freshly_started_server(page, browser_errors):
    """A deep link opened by the first session after a start lands on its page, with its parameters."""
    with running_app() as url:
        page.goto(f"{url}/modes?alpha=6.0")
        page.locator(CHART).first.wait_for()
        wait_for_run(page)
        assert "/modes" in page.url and "alpha=6.0" in page.url
        assert page.get_by_text("does not seem to exist").count() == 0
        links = page.locator('[data-testid="stSidebarNav"] a').all_inner_texts()
        assert [link.splitlines()[-1] for link in links] == ["Home", *(lab.title for lab in LABS)]
        assert float(metric_value(page, "α⁻¹‖μ*‖")) < 0.01  # α = 6 > α*: on one mode
        browser_errors.wait_for_idle_network(page)
        page.goto("about:blank")  # before this server stops: its reconnection attempts would fail


# The toy page's live charts (Vega-Lite), played in the browser (views/common/animation.js), each drawn in an SVG of its
# own: marking every <svg> and finding the marks on all of them later shows that the player updated the charts in
# place rather than embedding them anew.
LIVE_CHARTS = ".symlab-player .chart svg.marks"
MARK_LIVE_CHARTS_JS = (
    f"() => [...document.querySelectorAll('{LIVE_CHARTS}')].map(svg => {{ svg.__kept = true; }}).length"
)
KEPT_LIVE_CHARTS_JS = f"() => [...document.querySelectorAll('{LIVE_CHARTS}')].map(svg => svg.__kept === true)"
TOY_TITLES = ["Exact posterior (grey) and q over (w₁, w₂)", "Predictions", "Lower bounds under log p(D)", "Test MSE"]
PLAYER_STEP_JS = (
    "() => Number(/Adam step (\\d+) \\//.exec(document.querySelector('.symlab-player .label').textContent)[1])"
)


TEXT_LEFT_OF_ITS_CHART_JS = (
    "() => [...document.querySelectorAll('.symlab-player .chart')].flatMap(c => [...c.querySelectorAll('text')]"
    ".filter(t => t.getBoundingClientRect().left < c.getBoundingClientRect().left - 1).map(t => t.textContent))"
)


# Text that a chart's SVG cuts off: a legend taller than the room its chart left for it (a player lays its charts out
# again at every frame).
TEXT_CUT_BY_ITS_CHART_JS = (
    "() => [...document.querySelectorAll('.symlab-player .chart svg.marks')].flatMap(svg => {"
    " const box = svg.getBoundingClientRect(); return [...svg.querySelectorAll('text')]"
    ".filter(t => t.textContent && (t.getBoundingClientRect().bottom > box.bottom + 1"
    " || t.getBoundingClientRect().right > box.right + 1)).map(t => t.textContent); })"
)


def player_step(page) -> int:
    """The Adam step the browser's player shows."""
    return page.evaluate(PLAYER_STEP_JS)


def play_to_step(page, step: int) -> None:
    """Press Play, wait (a minute at most) until the player shows Adam step ``step`` or later, press Pause."""
    page.get_by_role("button", name="Play", exact=True).click()
    page.wait_for_function(f"step => ({PLAYER_STEP_JS})() >= step", arg=step, timeout=60_000)
    page.get_by_role("button", name="Pause", exact=True).click()


def open_toy(page, url: str) -> None:
    """Open the toy page and wait for its four live charts and the end of its runs (the whole run trained)."""
    page.goto(url)
    page.locator(LIVE_CHARTS).nth(3).wait_for(timeout=60_000)
    page.locator(".symlab-player").get_by_role("button", name="Play", exact=True).and_(
        page.locator(":enabled")
    ).wait_for(timeout=60_000)
    wait_for_run(page)


def test_tractable_bnn_trains_live(page, server_url):
    open_toy(page, f"{server_url}/toy?alpha=0.25&seed=3")
    assert player_step(page) == 0
    bounds = page.evaluate(VEGA_CHART_JS, TOY_TITLES[2])
    assert bounds["x_title"] == "Adam step" and bounds["y_title"] == "ELBO; SGM: ELBO + I (nats)"
    assert len(bounds["rules"]) == 1
    assert page.evaluate(MARK_LIVE_CHARTS_JS) == 4
    play_to_step(page, 200)
    page.wait_for_function(
        f"([title, before]) => {{ const now = ({VEGA_CHART_JS})(title);"
        " return now !== null && now.lines.join() !== before; }",
        arg=[TOY_TITLES[2], ",".join(bounds["lines"])],
    )
    wait_for_run(page)
    # Ten frames and more later: the same four charts, updated in place, and the posterior's ellipses moved.
    assert page.evaluate(KEPT_LIVE_CHARTS_JS) == [True] * 4
    titles = page.evaluate(
        "() => [...document.querySelectorAll('.symlab-player .role-title-text')].map(t => t.textContent)"
    )
    assert len(titles) == 4 and all(full.startswith(shown.rstrip("…")) for full, shown in zip(TOY_TITLES, titles))
    posterior = page.wait_for_function(f"title => ({VEGA_CHART_JS})(title)", arg=TOY_TITLES[0]).json_value()
    assert posterior["series"].keys() == {"equivalent modes (α, −α), (−α, α)"}
    assert page.locator('[data-testid="stException"]').count() == 0
    save_screenshot(page, "toy")


@pytest.mark.parametrize("width", [390, 1400])
def test_a_waiting_panel_is_drawn_by_the_browser_with_no_page_run_until_its_result(browser, server_url, width):
    """The toy's live training at a link nobody has trained takes seconds in a worker: the browser draws its waiting
    panel, asking the server's route where it stands (symlab/serving/waiting.py), and sends the page nothing until
    the training is done; then one run draws the whole run, ready to play."""
    context = browser.new_context(viewport={"width": width, "height": 1000})
    page = context.new_page()
    asks, sent = [], []
    page.on("request", lambda request: asks.append(request.url) if "/progress/" in request.url else None)
    page.on("websocket", lambda socket: socket.on("framesent", lambda payload: sent.append(time.monotonic())))
    try:
        page.goto(f"{server_url}/toy?seed={5000 + width}&n=40")
        panel = page.locator(".symlab-waiting")
        panel.wait_for(timeout=60_000)
        assert panel.get_attribute("role") == "progressbar" and panel.inner_text().strip().startswith("⏳")
        drawn = time.monotonic()
        panel.wait_for(state="detached", timeout=180_000)
        wait_for_run(page, timeout_ms=60_000)
        assert len(asks) >= 2 and all(urlsplit(ask).path.startswith("/progress/") for ask in asks)
        assert len([at for at in sent if at > drawn]) <= 1  # the one run that draws the result, no redraws
        expect(page.get_by_role("button", name="Play", exact=True)).to_be_enabled()
        assert page.locator('[data-testid="stException"]').count() == 0
        assert page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth") == 0
    finally:
        context.close()


@pytest.mark.parametrize("width", [390, 1400])
def test_the_toy_plays_in_the_browser_with_play_pause_step_reset_and_speed(browser, server_url, browser_errors, width):
    """The whole run plays in the browser: while it plays, the page is not run (no message to the server); Pause
    tells the page the frame (the link and the numbers follow), Step goes one frame (20 Adam steps) on, Reset
    back to the start, and a faster speed plays faster. The charts stay in their column, at a phone's width too."""
    context = browser.new_context(viewport={"width": width, "height": 1000})
    browser_errors.watch(context)
    page = context.new_page()
    sent = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(time.monotonic())))
    open_toy(page, f"{server_url}/toy?seed=5")  # a run whose axis labels widen as it plays
    player = page.locator(".symlab-player")
    elbo = metric_value(page, "MFVI: ELBO")

    player.get_by_role("button", name="Step", exact=True).click()
    page.wait_for_url(re.compile(r"adam_step=20&"))
    wait_for_run(page)
    assert player_step(page) == 20 and metric_value(page, "MFVI: ELBO") != elbo

    player.get_by_role("button", name="Play", exact=True).click()
    page.wait_for_function(f"() => ({PLAYER_STEP_JS})() >= 60")
    quiet_from = time.monotonic()  # Play's one message is sent: from here the browser plays alone
    page.wait_for_function(f"() => ({PLAYER_STEP_JS})() >= 300")
    assert [t for t in sent if t > quiet_from] == [], "the page was run while the browser played"
    player.get_by_role("button", name="Pause", exact=True).click()
    wait_for_run(page)
    paused = player_step(page)
    page.wait_for_url(re.compile(rf"adam_step={paused}&"))
    # Played frames widen the axes' labels: each chart is laid out again, and no text starts left of its chart.
    assert page.evaluate(TEXT_LEFT_OF_ITS_CHART_JS) == [] and page.evaluate(TEXT_CUT_BY_ITS_CHART_JS) == []
    assert metric_value(page, "MFVI: ELBO") != elbo

    # What the browser rebuilt from the frames' changes is the frame the server encoded, number for number.
    held = page.evaluate("document.querySelector('.symlab-player').heldData()")
    config = toy.ToyConfig(seed=5).validate()
    computed = precomputed.compute(live.live_task(config))  # as the server's worker computes it: one torch thread
    expected = animation.rows_at(animation.decode(computed.animation), held["frame"])
    assert held["frame"] == paused // 20 and held["charts"] == expected

    player.get_by_role("button", name="Reset", exact=True).click()
    page.wait_for_url(re.compile(r"adam_step=0&"))
    wait_for_run(page)
    assert player_step(page) == 0 and metric_value(page, "MFVI: ELBO") == elbo

    def steps_in(seconds: float) -> int:
        start = player_step(page)
        player.get_by_role("button", name="Play", exact=True).click()
        time.sleep(seconds)
        player.get_by_role("button", name="Pause", exact=True).click()
        wait_for_run(page)
        return player_step(page) - start

    normal = steps_in(1.5)
    player.get_by_label("Speed").select_option("4")
    assert steps_in(1.5) > 2 * normal > 0

    overflow = page.evaluate(
        "() => [...document.querySelectorAll('.symlab-player .chart')].filter(c => c.scrollWidth > c.clientWidth + 1).length"
    )

    assert overflow == 0 and page.evaluate("document.documentElement.scrollWidth") <= width
    save_screenshot(page, f"toy_player_{width}")
    context.close()


PLAYER_FRAME_JS = "() => document.querySelector('.symlab-player').heldData().frame"
# The other players, each at a link whose frames are stored or quick: its page, its link, its charts, its first frame.
PLAYERS = {
    "modes": ("modes?alpha=2.0", 2, 0),
    "symmetry": ("symmetry?part=fig1", 3, 10),
    "align": ("align", 4, 10),
}


@pytest.mark.parametrize("width", [390, 1400])
@pytest.mark.parametrize("name", list(PLAYERS))
def test_every_other_player_plays_in_the_browser_with_play_pause_step_and_reset(
    browser, server_url, browser_errors, name, width
):
    """The mode interpolation's Adam path, the symmetry explorer's epochs and the alignment's walk play in the
    browser as the toy's training does: no message to the server while they play, Step one frame on, Pause where
    it stands, Reset to frame 0; the charts in their column at a phone's width and a desktop's."""
    link, charts, first = PLAYERS[name]
    context = browser.new_context(viewport={"width": width, "height": 1000})
    browser_errors.watch(context)
    page = context.new_page()
    sent = []
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(time.monotonic())))
    page.goto(f"{server_url}/{link}")
    page.locator(".symlab-player .chart svg.marks").nth(charts - 1).wait_for(timeout=180_000)
    wait_for_run(page, timeout_ms=180_000)
    player = page.locator(".symlab-player")
    assert page.evaluate(PLAYER_FRAME_JS) == first
    assert page.evaluate(TEXT_CUT_BY_ITS_CHART_JS) == []  # as first drawn
    player.get_by_role("button", name="Reset", exact=True).click()
    page.wait_for_function(f"() => ({PLAYER_FRAME_JS})() === 0")
    player.get_by_role("button", name="Step", exact=True).click()
    page.wait_for_function(f"() => ({PLAYER_FRAME_JS})() === 1")
    wait_for_run(page)
    player.get_by_role("button", name="Play", exact=True).click()
    page.wait_for_function(f"() => ({PLAYER_FRAME_JS})() >= 2")
    quiet_from = time.monotonic()  # Play's one message is sent: from here the browser plays alone
    page.wait_for_function(f"() => ({PLAYER_FRAME_JS})() >= 4", timeout=30_000)
    played_until = time.monotonic()
    assert [t for t in sent if quiet_from < t < played_until] == [], "the page was run while the browser played"
    player.get_by_role("button", name="Pause", exact=True).click()
    paused = page.evaluate(PLAYER_FRAME_JS)
    page.wait_for_timeout(1500)  # it stays where it was paused
    assert page.evaluate(PLAYER_FRAME_JS) == paused >= 4
    wait_for_run(page)
    assert page.evaluate(TEXT_LEFT_OF_ITS_CHART_JS) == [] and page.evaluate(TEXT_CUT_BY_ITS_CHART_JS) == []
    overflow = page.evaluate(
        "() => [...document.querySelectorAll('.symlab-player .chart')].filter(c => c.scrollWidth > c.clientWidth + 1).length"
    )
    assert overflow == 0 and page.evaluate("document.documentElement.scrollWidth") <= width
    assert page.locator('[data-testid="stException"]').count() == 0
    save_screenshot(page, f"{name}_player_{width}")
    context.close()


STUCK_NOTICE = "both units on one side, a local optimum of ReLU(w₁x) + ReLU(w₂x); press New seed or raise Restarts"


def test_tractable_bnn_names_a_stuck_start_and_restarts_recover(page, server_url):
    """α = 3, seed 11, one start: as it trains, both methods end with both units on one side, and the page says
    so and what to do; with four starts (typed into the sidebar) the kept fits reach a mode."""
    open_toy(page, f"{server_url}/toy?alpha=3&seed=11&restarts=1")
    stuck = page.locator('[data-testid="stAlert"]', has_text=STUCK_NOTICE)
    assert stuck.count() == 0  # the starts themselves are not stuck
    play_to_step(page, 2000)  # the page hears of the frame at Pause, and names what it shows
    wait_for_run(page)
    stuck.nth(1).wait_for()
    named = stuck.all_inner_texts()
    assert len(named) == 2 and f"MFVI: {STUCK_NOTICE}" in named[0] and f"SGM (q_G): {STUCK_NOTICE}" in named[1]
    assert page.get_by_text("MFVI: start 1 of 1 kept (both units on one side), 1 stuck on one side").count() == 1
    save_screenshot(page, "toy_stuck")

    restarts = page.get_by_role("spinbutton", name="Restarts")
    restarts.fill("4")
    restarts.press("Enter")
    page.wait_for_url(re.compile(r"restarts=4"))
    wait_for_run(page)
    play_to_step(page, 1000)
    wait_for_run(page)
    assert stuck.count() == 0
    kept = page.locator('[data-testid="stCaptionContainer"]', has_text="kept").inner_text()
    assert "MFVI: start" in kept and kept.count("of 4 kept (at a mode)") == 2, kept
    assert page.locator('[data-testid="stException"]').count() == 0


def test_mnist_runs_launched_in_the_browser_survive_a_reload_and_finish(
    page, server_url, server_runs_dir, browser_errors
):
    from symlab.labs import run_kinds
    from symlab.runs.registry import Registry
    from symlab.specs.run_kind import FINISHED

    page.goto(f"{server_url}/mnist?hidden=256&epochs=4&subset=20000&samples=2&seed=11&init_sd=0.001")
    wait_for_run(page)
    page.get_by_role("button", name="Launch MFVI and SGM (same seed)").click()
    progress = page.locator('[data-testid="stProgress"]', has_text="seed 11")
    progress.first.wait_for()
    assert progress.count() == 2  # one running, one queued behind it
    browser_errors.wait_for_idle_network(page)
    page.reload()  # as if the tab were closed and opened again
    page.locator('[data-testid="stProgress"]', has_text="SGM K=16, width 256, seed 11").wait_for()
    registry = Registry(run_kinds(), server_runs_dir)
    deadline = __import__("time").monotonic() + 120
    while not all(run.status == FINISHED for run in registry.runs()):
        assert __import__("time").monotonic() < deadline, registry.runs()
        page.wait_for_timeout(1000)
    page.wait_for_function(
        "() => document.querySelectorAll('[data-testid=\"stProgress\"]').length === 0", timeout=20_000
    )  # the live view noticed, without a reload
    page.get_by_role("tab", name="Results").click()
    page.get_by_text("Accuracy against width").first.wait_for()
    assert page.locator('[data-testid="stException"]').count() == 0
    save_screenshot(page, "mnist")


def test_on_a_hosted_server_only_the_launching_browser_may_cancel_its_run(browser, browser_errors, tmp_path):
    """Two browsers (contexts: each its own cookies) on a hosted server: the one that launched a run sees its
    Cancel button; the other sees the run but no Cancel button and nothing of it to resume."""
    from conftest import app_process

    from symlab.labs import run_kinds
    from symlab.runs import supervisor
    from symlab.runs.registry import Registry
    from symlab.specs.run_kind import ACTIVE

    runs_dir = tmp_path / "runs"
    with app_process({"SYMLAB_HOSTED": "1", "SYMLAB_RUNS_DIR": str(runs_dir)}) as (url, _):
        pages = []
        for _ in range(2):
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            browser_errors.watch(context)
            pages.append(context.new_page())
        launcher, other = pages
        try:
            launcher.goto(f"{url}/mnist?hidden=64&epochs=10&subset=20000&samples=2&seed=3")
            wait_for_run(launcher)
            launcher.get_by_role("button", name="Launch MFVI", exact=True).click()
            launcher.locator('[data-testid="stProgress"]', has_text="yours: #1").wait_for()
            cancel = launcher.get_by_role("button", name="Cancel")
            assert cancel.count() == 1

            other.goto(f"{url}/mnist")
            other.locator('[data-testid="stProgress"]', has_text="#1 MFVI, width 64, seed 3").wait_for()
            wait_for_run(other)
            assert "yours" not in other.locator('[data-testid="stProgress"]').first.inner_text()
            assert other.get_by_role("button", name="Cancel").count() == 0

            cancel.click()  # the launcher cancels: a stopped run it may resume, the other browser may not
            launcher.get_by_role("button", name="Resume").wait_for()
            other.reload()
            other.get_by_role("tab", name="Launch and watch").wait_for()
            wait_for_run(other)
            assert other.get_by_role("button", name="Resume").count() == 0
            assert other.get_by_role("button", name="Restart").count() == 0
            for page in pages:
                assert page.locator('[data-testid="stException"]').count() == 0
        finally:
            registry = Registry(run_kinds(), runs_dir)
            for run in registry.runs(ACTIVE):  # nothing trains on after the test
                supervisor.cancel(registry, run.id)
            for page in pages:
                page.context.close()


def test_mnist_block_estimator_run_shows_its_diagnostics_per_epoch(page, server_url, server_runs_dir):
    from symlab.labs import run_kinds
    from symlab.runs.registry import Registry
    from symlab.specs.run_kind import FINISHED

    # σ by Adam keeps σ₀ 0.3 over these 48 steps, and the pairs' term acts; fitted by curvature, σ leaves σ₀ and
    # this run's term had no gradient (mi_active 0).
    page.goto(
        f"{server_url}/mnist?hidden=16&epochs=3&subset=2000&samples=2&seed=5&method=sgm&mi=blocks&block=2"
        "&init_sd=0.3&sdfit=adam&schedule=constant"
    )
    wait_for_run(page)
    page.get_by_role("button", name="Launch SGM blocks").click()
    registry = Registry(run_kinds(), server_runs_dir)
    deadline = __import__("time").monotonic() + 120
    while not [run for run in registry.runs() if run.config.mi == "blocks" and run.status == FINISHED]:
        assert __import__("time").monotonic() < deadline, registry.runs()
        page.wait_for_timeout(1000)
    [run] = [run for run in registry.runs() if run.config.mi == "blocks"]
    epochs = registry.metrics([run.id])[run.id]
    assert run.config.sd_fit == "adam" and run.result["mi_active"] > 0  # σ 0.3 on 16 units: close pairs, the term acts
    # Compared runs get the per-epoch diagnostic charts: one point per epoch of this run.
    page.goto(f"{server_url}/mnist?compare={run.token}")  # a link names a run by its token
    wait_for_run(page)
    page.get_by_role("tab", name="Results").click()
    page.get_by_text("Closest two units against width").first.wait_for()
    # The run's points as drawn (Vega's SVG marks, by chart title; the comparison's charts come last).
    points_js = (
        "title => { const charts = [...document.querySelectorAll('[data-testid=\"stVegaLiteChart\"]')]"
        " .filter(c => (c.querySelector('.role-title-text') || {}).textContent === title);"
        " const chart = charts[charts.length - 1]; if (!chart) return null;"
        " const rows = [...chart.querySelectorAll('.role-mark.mark-symbol path')].map(p => p.__data__.datum)"
        " .filter(d => d.series.startsWith('#RUN ')).sort((a, b) => a.x - b.x);"
        " return rows.length ? {x: rows.map(d => d.x), y: rows.map(d => d.y)} : null; }"
    ).replace("RUN", str(run.id))
    for title, key in (("Closest two units", "nearest_unit_kl_min"), ("Units at the prior", "units_at_prior")):
        page.wait_for_function(
            f"title => {{ const p = ({points_js})(title); return p && p.y.length === 3; }}", arg=title, timeout=20_000
        )
        drawn = page.evaluate(f"title => ({points_js})(title)", title)
        assert drawn["x"] == [1, 2, 3]  # one point per epoch
        assert drawn["y"] == pytest.approx([epoch[key] for epoch in epochs])
    fraction = page.evaluate(f"title => ({points_js})(title)", "Block MI on q: I_H / log|H|")
    assert fraction["y"] == pytest.approx([e["block_mi"] / e["block_log_group_size"] for e in epochs])
    assert page.locator('[data-testid="stException"]').count() == 0
    save_screenshot(page, "mnist_blocks")


def test_home_page_links_to_each_lab(page, server_url):
    media = []
    page.on(
        "request", lambda request: media.append(request.url) if "/media/" in urlsplit(request.url).path[:7] else None
    )
    page.goto(server_url)
    page.get_by_role("heading", name="SymLab").wait_for()
    # The cards' pictures come from serve.py's route, whole, and none as a session's media file (deleted at the
    # session's next run: a card tapped before its picture loaded got a 404).
    page.wait_for_function(
        "() => { const shown = [...document.querySelectorAll('img[src*=\"/cards/\"]')];"
        f" return shown.length === {len(LABS)} && shown.every(img => img.complete && img.naturalWidth > 0); }}"
    )
    assert media == []
    wait_for_run(page)
    links = page.locator('[data-testid="stMain"] [data-testid="stPageLink"] a')
    links.nth(len(LABS) - 1).wait_for()  # drawn a moment after the run ends, with the cards' pictures
    assert links.count() == len(LABS)
    assert [text.splitlines()[-1] for text in links.all_inner_texts()] == [lab.title for lab in LABS]
    assert [lab.title for lab in LABS][:5] == [
        "Mode interpolation",
        "Tractable BNN",
        "MNIST",
        "Symmetry explorer",
        "Alignment",
    ]
    save_screenshot(page, "home")
    links.filter(has_text="Tractable BNN").click()
    page.wait_for_url(re.compile(r"/toy\?"))
    page.get_by_role("heading", name="Tractable BNN").wait_for()
    page.locator(LIVE_CHARTS).first.wait_for()


# Every labelled control, by its label: sliders, number and text inputs, selectboxes and toggles by
# their input's value, segmented controls and radio buttons by the option that is on.
CONTROLS_JS = """() => {
    const values = {};
    for (const input of document.querySelectorAll('[data-testid="stApp"] input[aria-label]')) {
        if (!input.closest('[role="radiogroup"]'))
            values[input.getAttribute('aria-label')] = input.type === 'checkbox' ? String(input.checked) : input.value;
    }
    for (const group of document.querySelectorAll('[data-testid="stApp"] [role="radiogroup"][aria-label]')) {
        values[group.getAttribute('aria-label')] = [...group.querySelectorAll(
                '[role="radio"][aria-checked="true"], input[type="radio"]:checked')]
            .map(option => (option.closest('[data-testid="stRadioOption"]') || option).innerText.trim()).join(',');
    }
    return values;
}"""


def settled_controls(page, expected):
    """The page's controls once the link's values show and the run that wrote the URL has finished.
    "Presentation mode" is every lab's last control: until it shows, the sidebar is still being drawn
    (a run with cached results can look finished between its first and last widgets)."""
    page.wait_for_function(
        f"expected => {{ const values = ({CONTROLS_JS})();"
        " return Object.entries(expected).every(([k, v]) => values[k] === v)"
        " && 'Presentation mode' in values; }",
        arg=expected,
    )
    wait_for_run(page)
    return page.evaluate(CONTROLS_JS)


SHARED_LINKS = {  # every URL-bound control, at a value other than its default (MNIST's compare: no runs to pick)
    "modes": (
        "alpha=7.5&sigma=0.75&dim=5&forward=1",
        {
            "Mode distance α": "7.5",
            "Component std dev σ": "0.75",
            "Dimension d (for det Σ*)": "5",
            "Show the forward-KL fit": "true",
        },
    ),
    "toy": (
        "alpha=1.5&noise=0.3&n=40&prior=2.0&mi=infonce&K=8&lr=0.05&batch=20&init=origin&restarts=2&seed=42"
        "&alphas=0.5%2C+1.5&seeds=3",
        {
            "True slope α (y = α|x| + ε)": "1.5",
            "Noise std dev": "0.3",
            "Training points N": "40",
            "Prior std dev": "2",
            "SGM's mutual information": "infonce",
            "K (InfoNCE)": "8",
            "Learning rate (Adam)": "0.05",
            "Batch size": "20",
            "Initial means": "origin",
            "Restarts": "2",
            "Seed": "42",
            "α values (comma-separated)": "0.5, 1.5",
            "Seeds": "3",
        },
    ),
    "mnist": (
        "hidden=128&depth=2&method=sgm&K=32&epochs=3&subset=5000&batch=64&lr=0.002&prior=0.5&init_sd=0.01"
        "&samples=5&seed=7&device=cpu&estimator=local",
        {
            "Gradient estimator": "local",
            "Hidden units per layer": "128",
            "Hidden layers": "2",
            "Method": "SGM",
            "K (SGM's InfoNCE terms)": "32",
            "Epochs": "3",
            "Training subset (0 = all 60 000)": "5000",
            "Batch size": "64",
            "Learning rate (Adam)": "0.00200",
            "Prior std dev": "0.50",
            "Initial posterior std dev": "0.01000",
            "Prediction samples M": "5",
            "Seed": "7",
            "Device": "cpu",
            "Runs": "",
        },
    ),
    # The training part's controls (each part shows only its own; all of them are in the link).
    "symmetry": (
        "part=training&width=64&depth=2&sgd_lr=0.05&steps=500&schedule=constant&key=first_out&seed=3",
        {
            "Part": "Permutations in training",
            "Hidden width": "64",
            "Hidden layers": "2",
            "SGD learning rate (MLPs)": "0.05",
            "SGD steps": "500",
            "Learning-rate schedule": "constant",
            "Sort units by": "weight to the first next unit",
            "Seed": "3",
        },
    ),
    # Half moons still (MNIST hides the noise slider and reads the digits); small and short, so it trains in ~2 s.
    "align": (
        "width=16&depth=1&train=200&noise=0.2&steps=300&lr=0.02&prior=0.5&samples=8&order=aligned&seed=3",
        {
            "Task": "half moons (2-D)",
            "Hidden units per layer": "16",
            "Hidden layers": "1",
            "Training points": "200",
            "Noise on the moons": "0.2",
            "Adam steps": "300",
            "Learning rate": "0.02",
            "Prior scale p (N(0, p²) on every weight)": "0.5",
            "Posterior samples per point of the path": "8",
            "Seed": "3",
            "Units of q_B": "in the aligned order",
        },
    ),
}


@pytest.mark.parametrize("lab", SHARED_LINKS)
def test_shared_link_round_trips(new_page, server_url, lab):
    """Open a link with non-default values, copy the URL the app settles on, open that in a fresh
    browser: the same controls, and the URL stays as it was."""
    query, expected = SHARED_LINKS[lab]
    page = new_page()
    page.goto(f"{server_url}/{lab}?{query}")
    controls = settled_controls(page, expected)
    assert page.locator('[data-testid="stAlert"]', has_text="adjusted").count() == 0
    shared = page.url
    assert urlsplit(shared).path == f"/{lab}"
    assert dict(parse_qsl(query)).items() <= dict(parse_qsl(urlsplit(shared).query)).items(), shared

    fresh = new_page()
    fresh.goto(shared)
    assert settled_controls(fresh, expected) == controls
    assert fresh.url == shared


def test_keyboard_moves_the_alpha_slider_and_starts_training(new_page, server_url):
    page = new_page()
    page.goto(f"{server_url}/modes")
    page.locator(CHART).first.wait_for()
    wait_for_run(page)
    for _ in range(40):  # from the top of the page, Tab to α's slider
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.getAttribute('aria-label')") == "Mode distance α":
            break
    else:
        pytest.fail("Tab never reached the α slider")
    page.keyboard.press("ArrowRight")
    page.wait_for_url(re.compile(r"alpha=2\.05&"))
    assert page.locator('[data-testid="stSliderThumbValue"]').first.inner_text() == "2.05"

    page = new_page()
    open_toy(page, f"{server_url}/toy")
    page.get_by_role("button", name="Play", exact=True).focus()
    page.keyboard.press("Enter")
    page.wait_for_function(f"() => ({PLAYER_STEP_JS})() > 0")
    page.get_by_role("button", name="Pause", exact=True).focus()
    page.keyboard.press("Space")
    page.get_by_role("button", name="Play", exact=True).and_(page.locator(":enabled")).wait_for()


# The epoch player's densities (Vega-Lite), as drawn: each an image in Vega's SVG, its PNG decoded here into a grid
# z[row = y][column = x] (a fraction of the peak density) on the cells' indices, the same on both axes.
HEATMAPS_JS = """() => [...document.querySelectorAll('.symlab-player .chart')]
    .filter(chart => chart.querySelector('.role-mark.mark-image image'))
    .map(chart => ({title: chart.querySelector('.role-title-text').textContent,
                    image: chart.querySelector('.role-mark.mark-image image').getAttribute('href')}))"""


def heatmaps(page) -> list[dict]:
    # Vega sets an image's href once the picture has loaded: wait for all three.
    page.wait_for_function(
        f"() => {{ const shown = ({HEATMAPS_JS})(); "
        "return shown.length === 3 && shown.every(chart => chart.image.startsWith('data:')); }"
    )
    shown = []
    for chart in page.evaluate(HEATMAPS_JS):
        z = image_values(chart["image"], VIRIDIS).tolist()
        shown.append(dict(title=chart["title"], z=z, x=list(range(len(z[0]))), y=list(range(len(z)))))
    return shown


EPOCH_JS = """() => { const label = document.querySelector('.symlab-player .label');
    const m = label && /^Epoch (\\d+) \\/ 10/.exec(label.textContent); return m ? Number(m[1]) : null; }"""


def swap_asymmetry(z):
    """Σ|Z − Zᵀ| / Σ(Z + Zᵀ): 0 for a density symmetric under v₁ ↔ v₂, 1 for one with no mirror image."""
    n = len(z)
    return sum(abs(z[i][j] - z[j][i]) for i in range(n) for j in range(n)) / sum(
        z[i][j] + z[j][i] for i in range(n) for j in range(n)
    )


def share_v1_above_v2(heatmap):
    """The density's mass with v₁ > v₂ (z[row = v₂][column = v₁])."""
    x, y, z = heatmap["x"], heatmap["y"], heatmap["z"]
    total = sum(map(sum, z))
    return sum(z[i][j] for i in range(len(y)) for j in range(len(x)) if x[j] > y[i]) / total


def test_symmetry_explorer_doubles_and_removes_the_mode_and_modes_crowd_with_width(page, server_url):
    page.goto(f"{server_url}/symmetry")
    page.get_by_role("heading", name="The doubled mode (Fig. 1)").wait_for(timeout=120_000)
    page.wait_for_function(
        f"() => ({HEATMAPS_JS})().length === 3", timeout=120_000
    )  # the three density heatmaps are drawn
    wait_for_run(page, timeout_ms=120_000)
    assert page.url.startswith(f"{server_url}/symmetry?part=fig1&")
    assert 0.4 <= float(metric_value(page, "share with v₁ > v₂, raw")) <= 0.6
    assert page.get_by_text("mirror images across v₁ = v₂").count() == 1
    assert page.evaluate(EPOCH_JS) == 10

    raw, scaled, ordered = heatmaps(page)
    assert raw["title"] == "Raw" and ordered["title"] == "After scaling and permutation removal"
    for heatmap in (raw, scaled, ordered):
        assert len(heatmap["z"]) == len(heatmap["z"][0]) == 60  # the 60 × 60 grid, one pixel per cell
    # Measured with seeds 0-4: raw 0.09-0.10 and 0.48-0.50 (the same for scaled); sorted 0.98 and
    # 0.005-0.007, what the smoothing spreads across the diagonal.
    assert swap_asymmetry(raw["z"]) < 0.2 and swap_asymmetry(scaled["z"]) < 0.2
    assert swap_asymmetry(ordered["z"]) > 0.9
    assert 0.4 <= share_v1_above_v2(raw) <= 0.6
    assert share_v1_above_v2(ordered) < 0.02

    page.get_by_role("button", name="Reset", exact=True).click()
    page.wait_for_function(f"() => ({EPOCH_JS})() === 0")
    wait_for_run(page)
    page.get_by_role("button", name="Play", exact=True).click()
    page.wait_for_function(f"() => ({EPOCH_JS})() >= 1")
    # It plays to the last epoch and stops there (0.7 s an epoch).
    page.wait_for_function(f"() => ({EPOCH_JS})() === 10", timeout=60_000)
    page.get_by_role("button", name="Play", exact=True).and_(page.locator(":enabled")).wait_for()
    wait_for_run(page)
    assert swap_asymmetry(heatmaps(page)[0]["z"]) < 0.2
    page.mouse.move(0, 0)  # Play's tooltip would cover the sentence above it
    save_screenshot(page, "symmetry_fig1")

    page.goto(f"{server_url}/symmetry?part=proximity")
    page.get_by_role("heading", name="Mode proximity").wait_for(timeout=120_000)
    wait_for_run(page, timeout_ms=120_000)
    assert metric_value(page, "widths with a bound < 2") == "7 / 12"
    chart = drawn_chart(page, "Equivalent modes crowd together")
    distance, bound = chart["series"]["nearest copy: ‖gw − w‖ / ‖w‖"], chart["series"]["Thm 3.1 bound 2D / log n!"]
    assert distance["x"] == bound["x"] == [2**k for k in range(1, 13)]
    assert chart["rules"] == [2]  # the trivial bound
    assert (chart["x_title"], chart["y_title"]) == ("hidden width n", "distance relative to ‖w‖")
    assert distance["y"][-1] < distance["y"][0] / 100  # the nearest copy closes in as the width grows
    assert all(0 < d < b for d, b in zip(distance["y"], bound["y"]))
    save_screenshot(page, "symmetry_proximity")


# The alignment lab's path, played in the browser: its label states t and the point.
ALIGN_T_JS = """() => { const label = document.querySelector('.symlab-player .label');
    const m = label && /^t = ([\\d.]+)\\s+\\(point (\\d+) of 20\\)/.exec(label.textContent);
    return m ? {t: m[1], point: Number(m[2])} : null; }"""


def player_button(page, name):
    return page.locator(".symlab-player").get_by_role("button", name=name, exact=True)


def align_t(page):
    return page.evaluate(ALIGN_T_JS)


def wait_for_align_point(page, point, timeout_ms=30_000):
    page.wait_for_function(
        f"point => {{ const now = ({ALIGN_T_JS})(); return now && now.point === point; }}",
        arg=point,
        timeout=timeout_ms,
    )


def barrier(ts, losses):
    """max over t of the loss above the straight line between the endpoints' losses (symlab.lib.align.barrier)."""
    return max(loss - ((1 - t) * losses[0] + t * losses[-1]) for t, loss in zip(ts, losses))


def test_a_link_nobody_has_trained_shows_its_training_live(page, server_url):
    # Not the default link (the warm-up trains that one): this visitor's page waits for a worker
    # process, showing its progress and the ELBO curves it reports, then the results. Two seconds of
    # training (three layers of 64 units, 3000 steps): a computation done within half a second would be
    # drawn in the page's own run, with no panel.
    page.goto(f"{server_url}/align?width=64&depth=3&steps=3000&seed=77")
    page.locator('[data-testid="stProgress"]', has_text="⏳ Training q_A and q_B: Adam step").wait_for(timeout=60_000)
    page.wait_for_function(f"() => ({VEGA_CHART_JS})('Training both posteriors')", timeout=60_000)
    page.locator('[data-testid="stMetric"]', has_text="loss barrier before").wait_for(timeout=180_000)
    # Then the path's predictive maps (a second, shorter computation; the path plays meanwhile), and the player
    # with all four charts.
    page.locator('[data-testid="stProgress"], .symlab-waiting', has_text="⏳").first.wait_for(
        state="detached", timeout=180_000
    )
    wait_for_run(page, timeout_ms=180_000)
    page.locator(".symlab-player .chart svg.marks").nth(3).wait_for()
    assert page.locator('[data-testid="stProgress"], .symlab-waiting', has_text="⏳").count() == 0
    assert "seed=77" in page.url and "depth=3" in page.url


def test_alignment_collapses_the_loss_barrier_and_the_path_plays(page, server_url):
    # Tall: Streamlit scrolls inside its own container, so a screenshot shows the viewport only.
    page.set_viewport_size({"width": 1500, "height": 4200})
    page.goto(f"{server_url}/align")
    # The server's warm-up trains the default link's posteriors as it starts: done, or under way.
    page.locator('[data-testid="stMetric"]', has_text="loss barrier before").wait_for(timeout=180_000)
    wait_for_run(page, timeout_ms=180_000)
    assert page.url.startswith(f"{server_url}/align?source=trained&task=moons&width=64&depth=2&")
    assert "order=own" in page.url and "seed=0" in page.url
    assert page.locator('[data-testid="stProgress"]', has_text="Training q_A").count() == 0

    # Seed 0 computes 0.402 ± 0.029 and 0.004 ± 0.003: the barrier collapses below its noise; W₂ between the
    # posteriors shrinks.
    (before, before_se), (after, after_se) = (
        map(float, metric_value(page, label).split(" ± ")) for label in ("loss barrier before", "loss barrier after")
    )
    assert before > 0.2 and after < 0.05 and after < 2 * after_se < before, (before, after, after_se)
    assert float(metric_value(page, "W₂ after alignment")) < float(metric_value(page, "W₂(q_A, q_B) before"))

    # The player's charts (Vega-Lite): the paths' points as drawn, and the rule at the player's t.
    loss = drawn_chart(page, "Loss along the path")
    assert loss["x_title"] == "t (0: q_A, 1: q_B)" and loss["rules"] == [0.5]
    paths = {name: dict(trace, name=name) for name, trace in loss["series"].items()}
    assert list(paths) == ["unaligned", "weight matching", "W₂ alignment"]
    for trace in paths.values():
        assert len(trace["x"]) == len(trace["y"]) == 21 and trace["x"][0] == 0 and trace["x"][-1] == 1
    unaligned, aligned = paths["unaligned"]["y"], paths["W₂ alignment"]["y"]
    assert max(unaligned) > max(unaligned[0], unaligned[-1]) + 0.2  # the middle of the path forgets the task
    ts = paths["W₂ alignment"]["x"]
    assert all(abs(y - ((1 - t) * aligned[0] + t * aligned[-1])) < 0.05 for t, y in zip(ts, aligned))
    # The headline numbers are those of the plotted paths.
    assert abs(barrier(paths["unaligned"]["x"], unaligned) - before) < 0.001
    assert abs(barrier(ts, aligned) - after) < 0.001
    assert drawn_chart(page, "Accuracy along the path")["rules"] == [0.5]
    for layer in (1, 2):  # each hidden layer's unit-to-unit distances: one pixel per pair of units
        title = f"Hidden layer {layer}: assignment"
        page.wait_for_function(f"title => ({VEGA_CHART_JS})(title)?.images[0]?.startsWith('data:')", arg=title)
        [image] = page.evaluate(VEGA_CHART_JS, title)["images"]
        assert png_rows(image).shape == (64, 64, 3)
    for title in ("Unaligned", "W₂ alignment"):  # the maps: P(class 1) on a 60 × 60 grid, once loaded
        page.wait_for_function(f"title => ({VEGA_CHART_JS})(title)?.images[0]?.startsWith('data:')", arg=title)
        [image] = page.evaluate(VEGA_CHART_JS, title)["images"]
        assert image_values(image, BLUE_RED).shape == (60, 60)

    with page.expect_download() as download_info:
        page.get_by_role("button", name="Paths (CSV)").click()
    csv_text = open(download_info.value.path()).read().splitlines()
    assert csv_text[0] == "t,loss_before,accuracy_before,loss_weights,accuracy_weights,loss_w2,accuracy_w2"
    assert len(csv_text) == 22

    # The player: Step, Reset, Play, Pause.
    assert align_t(page) == {"t": "0.50", "point": 10}
    player_button(page, "Step").click()
    wait_for_align_point(page, 11)
    assert align_t(page) == {"t": "0.55", "point": 11}
    page.wait_for_function(f"() => ({VEGA_CHART_JS})('Loss along the path')?.rules[0] === 0.55")
    player_button(page, "Reset").click()
    wait_for_align_point(page, 0)
    assert align_t(page) == {"t": "0.00", "point": 0}
    wait_for_run(page)
    player_button(page, "Play").click()
    page.wait_for_function(
        f"() => {{ const now = ({ALIGN_T_JS})(); return now && now.point >= 2; }}", timeout=30_000
    )  # 0.6 s a point
    player_button(page, "Pause").click()
    player_button(page, "Play").and_(page.locator(":enabled")).wait_for()
    wait_for_run(page)
    paused = align_t(page)
    assert 2 <= paused["point"] < 20, paused
    page.wait_for_timeout(2000)  # three ticks' time: it stays where it was paused
    assert align_t(page) == paused
    # The mark is the float t = point · step (0.30000000000000004 at point 6); the label rounds it.
    assert page.evaluate(VEGA_CHART_JS, "Loss along the path")["rules"] == pytest.approx([float(paused["t"])])
    assert page.locator('[data-testid="stException"]').count() == 0

    # Units of q_B in the aligned order: in the URL, and the matched pairs run down the diagonal.
    page.get_by_role("radiogroup", name="Units of q_B").get_by_text("in the aligned order", exact=True).click()
    page.wait_for_url(re.compile(r"[?&]order=aligned(&|$)"))
    page.wait_for_function(
        f"() => ({VEGA_CHART_JS})('Hidden layer 1: assignment')?.x_title === 'unit of q_B (aligned order)'"
    )
    wait_for_run(page)
    for layer in (1, 2):
        pairs = drawn_chart(page, f"Hidden layer {layer}: assignment")["series"]["assigned pair"]
        # Unit u of q_A is drawn at y = 63 − u (row 0 on top): each unit matched with its own column.
        assert pairs["x"] == [63 - y for y in pairs["y"]] == list(range(64))
    assert page.locator('[data-testid="stException"]').count() == 0
    page.mouse.move(0, 0)  # no tooltip over the page
    save_screenshot(page, "align")


# --- networks of one's own: upload, align, download -------------------------------------------------


def network_files(directory):
    """A 784-128-10 MLP saved with torch.save, a copy of it with its hidden units permuted and its weights
    nudged (the same function, up to the nudge, in another permutation copy), and hostile files: one holding
    code, a truncated one, a convolutional layer."""
    import os

    import torch

    torch.manual_seed(7)
    net = torch.nn.Sequential(torch.nn.Linear(784, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    order = torch.randperm(128)
    state = net.state_dict()
    nudge = 0.01 * torch.randn(128, 784)
    permuted = {
        "0.weight": state["0.weight"][order] + nudge,
        "0.bias": state["0.bias"][order],
        "2.weight": state["2.weight"][:, order],
        "2.bias": state["2.bias"],
    }
    sentinel = directory / "code-ran"

    class Payload:
        def __reduce__(self):
            return os.system, (f"touch {sentinel}",)

    paths = {name: directory / f"{name}.pt" for name in ("a", "b", "hostile", "truncated", "conv")}
    torch.save(state, paths["a"])
    torch.save(permuted, paths["b"])
    torch.save({"0.weight": Payload()}, paths["hostile"])
    paths["truncated"].write_bytes(paths["a"].read_bytes()[:100_000])
    torch.save(torch.nn.Conv2d(1, 8, 3).state_dict(), paths["conv"])
    return paths, sentinel, float(nudge.norm())


def upload(page, label, path):
    """Put ``path`` into the uploader labelled ``label``. By label, not position: the frontend draws each uploader
    when its code has loaded, so for a moment after a run the second uploader's input can be the only one there."""
    uploader = page.locator('[data-testid="stFileUploader"]').filter(has=page.get_by_text(label, exact=True))
    uploader.locator('input[type="file"]').set_input_files(str(path))


def test_bnn_library_files_load_and_align_in_the_browser(page, server_url, browser_errors):
    """Posteriors saved by bayesian-torch, BLiTZ and torchbnn (files the libraries wrote) read on both pages, the
    library named, and align to the numbers the command line gives."""
    from symlab.labs.align import experiment as align_lab
    from symlab.lib import weights

    formats = Path(__file__).parent / "data" / "bnn_formats"
    page.goto(f"{server_url}/symmetry?part=network")
    wait_for_run(page)
    upload(page, "Your network", formats / "bayesian-torch.pt")
    page.get_by_text("read from a bayesian-torch posterior (σ = softplus(ρ))").wait_for()
    page.get_by_text("A mean-field posterior: the analyses are of its means.").wait_for(timeout=60_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    wait_until_drawn(page)  # every chart drawn, its code loaded: leaving earlier would abort those requests
    browser_errors.wait_for_idle_network(page)

    page.goto(f"{server_url}/align?source=files")
    wait_for_run(page)
    upload(page, "Network A", formats / "blitz.pt")
    page.locator('[data-testid="stAlert"]', has_text="read from a BLiTZ posterior").wait_for()
    upload(page, "Network B", formats / "torchbnn.pt")
    page.get_by_text("W₂ after alignment").wait_for(timeout=60_000)
    page.get_by_text("Alignment: one descent (one hidden layer: each assignment is exact)").wait_for()
    wait_for_run(page)
    expected = align_lab.align_networks(*(weights.read_network(formats / name) for name in ("blitz.pt", "torchbnn.pt")))
    assert float(metric_value(page, "W₂ after alignment")) == pytest.approx(expected.w2_after, abs=1.5e-3)
    assert float(metric_value(page, "W₂(A, B) before")) == pytest.approx(expected.w2_before, abs=1.5e-3)
    # Every component drawn (the downloads' code loads last): closing earlier aborts its request.
    page.get_by_role("button", name="B aligned to A (safetensors)").wait_for()
    wait_until_drawn(page)
    browser_errors.wait_for_idle_network(page)
    assert page.locator('[data-testid="stException"]').count() == 0
    save_screenshot(page, "align_library_files")


def test_your_own_networks_upload_align_and_download(page, server_url, server_runs_dir, tmp_path):
    import numpy as np

    from symlab.lib import weights

    paths, sentinel, nudge = network_files(tmp_path)
    # The symmetry explorer: one network in, its structure confirmed, its nearest copy and sorted weights shown.
    page.goto(f"{server_url}/symmetry?part=network&key=max_in")
    wait_for_run(page)
    assert "cannot live in a link" in page.locator('[data-testid="stAlert"]', has_text="link").inner_text()
    assert "64MB per file" in page.locator('[data-testid="stFileUploader"]').inner_text()  # the server's cap
    for name, message in (
        ("hostile", "refused: the file holds objects other than tensors"),
        ("truncated", "truncated or corrupt PyTorch file"),
        ("conv", "a convolutional layer's"),
    ):
        upload(page, "Your network", paths[name])
        page.locator('[data-testid="stAlert"]', has_text=message).wait_for()
        assert page.locator('[data-testid="stException"]').count() == 0
    assert not sentinel.exists()
    upload(page, "Your network", paths["a"])
    page.get_by_text("784 → 128 → 10: 2 nn.Linear layers").wait_for()
    page.get_by_text("with its units sorted by largest incoming weight").wait_for(timeout=60_000)
    wait_for_run(page)
    relative = float(metric_value(page, "nearest copy ‖gw − w‖ / ‖w‖"))
    assert 0 < relative < float(metric_value(page, "Thm 3.1 bound 2D / log n!"))
    # The weights as uploaded, and sorted, as drawn: each picture's values as fractions of its colour range
    # (± the 99th percentile of |W|), unit 0's row on top.
    shown = []
    for title in ("Hidden layer 1, as uploaded", "Hidden layer 1, units sorted"):
        page.wait_for_function(
            f"title => {{ const c = ({VEGA_CHART_JS})(title);"
            " return c !== null && c.images.length === 1 && c.images[0].startsWith('data:'); }",
            arg=title,
            timeout=20_000,
        )
        shown.append(image_values(page.evaluate(VEGA_CHART_JS, title)["images"][0], BLUE_RED)[::-1])
    W = weights.read_network(paths["a"]).means[0][0]
    inputs = np.sort(np.argsort(-W.var(axis=0), kind="stable")[:64])  # the 64 inputs that vary most across units
    limit = np.quantile(np.abs(W[:, inputs]), 0.99)
    assert shown[0].shape == (128, 64)
    assert abs(shown[0] - np.clip((W[:, inputs] + limit) / (2 * limit), 0, 1)).max() <= 3 / 1024  # colours' rounding
    order = np.argsort(W.max(axis=1), kind="stable")  # max_in: by each unit's largest incoming weight
    assert (order != np.arange(128)).any() and (shown[1] == shown[0][order]).all()
    assert page.locator('[data-testid="stException"]').count() == 0
    save_screenshot(page, "symmetry_network")

    # Alignment: two networks in, B aligned to A (a permuted, nudged copy: W₂ falls to the nudge's size).
    page.goto(f"{server_url}/align?source=files")
    wait_for_run(page)
    upload(page, "Network A", paths["a"])
    page.locator('[data-testid="stAlert"]', has_text="a.pt: 784 → 128 → 10").wait_for()
    upload(page, "Network B", paths["b"])
    # Both trained and aligned once the path is drawn (a chart of the current run: none marked stale). Where it is
    # not, the screenshot and the page's messages say what the page showed instead.
    try:
        page.wait_for_function(
            f"title => ({VEGA_CHART_JS})(title) !== null", arg="The path from A to B", timeout=120_000
        )
    except PlaywrightTimeout:
        save_screenshot(page, "align_files_no_path")
        shown = page.locator('[data-testid="stAlert"], [data-testid="stCaptionContainer"], [data-testid="stException"]')
        raise AssertionError(f"no path chart; the page says: {shown.all_inner_texts()}") from None
    wait_for_run(page)
    before, after = float(metric_value(page, "W₂(A, B) before")), float(metric_value(page, "W₂ after alignment"))
    assert after <= round(nudge, 3) + 0.001 and before > 3 * nudge, (before, after, nudge)
    pairs = drawn_chart(page, "Hidden layer 1: assignment")["series"]["assigned pair"]
    # The picture holds A's first 64 units and B's first 64 columns: each of A's units matched among them marked once.
    from symlab.labs.align import experiment as align_lab

    perm = align_lab.align_networks(*(weights.read_network(paths[name]) for name in "ab")).permutations[0]
    assert sorted(pairs["x"]) == sorted(
        int(unit) for unit in perm[: align_lab.ASSIGNMENT_UNITS] if unit < align_lab.ASSIGNMENT_UNITS
    )
    assert page.get_by_text(f"first {align_lab.ASSIGNMENT_UNITS} units of q_A").count() == 1
    assert page.locator('[data-testid="stException"]').count() == 0
    save_screenshot(page, "align_files")

    # MNIST: a run's posterior downloads and reads back as a 784-16-10 mean-field posterior.
    mnist_runs.train(server_runs_dir, hidden=16, train_subset=1000, timeout=300)
    page.goto(f"{server_url}/mnist")
    wait_for_run(page)
    page.get_by_role("tab", name="Results").click()
    button = page.get_by_role("button", name="Posterior (safetensors)")
    button.wait_for()
    with page.expect_download() as download_info:
        button.click()
    network = weights.read_network(download_info.value.path())
    assert network.is_posterior and network.sizes[0] == 784 and network.sizes[-1] == 10
    assert download_info.value.suggested_filename.endswith("_posterior.safetensors")


# Every page and part is opened at every width by tests/test_layout.py, whose browser_errors fail it on any console
# error or Vega warning; these links check what that cannot see: no request for the server's address at all.
CLEAN_CONSOLE_LINKS = ["", "toy", "symmetry?part=quality", "mnist?present=true"]


@pytest.mark.parametrize("link", CLEAN_CONSOLE_LINKS)
def test_a_page_opens_with_a_clean_console_and_no_probe_for_the_server(new_page, server_url, browser_errors, link):
    """No console error, no Vega warning (the browser_errors fixture fails the test at teardown on either) and no
    request to /<page>/_stcore/…: the page knows where the server is (symlab/serving/base_url.py)."""
    page = new_page()
    probes = []
    page.on(
        "request",
        lambda request: (
            probes.append(request.url) if re.search(r"/[a-z]+/_stcore/", urlsplit(request.url).path) else None
        ),
    )
    page.goto(f"{server_url}/{link}")
    page.locator("h1").first.wait_for()
    wait_for_run(page, 120_000)
    if link.split("?")[0] in ("", "methods", "mnist"):
        page.wait_for_timeout(1000)  # tables and pictures drawn just after the run
    else:
        page.locator(CHART).first.wait_for(timeout=60_000)
    browser_errors.wait_for_idle_network(page)
    assert probes == []


# ------------------------------------------------------------------------------------------ 3-D landscapes

LANDSCAPE_JS = """() => {
  const root = document.querySelector('.symlab-surface');
  if (!root || !root.data || !root._fullLayout || !root.querySelector('canvas')) return null;
  const camera = root.layout.scene.camera;
  return {names: root.data.map(t => t.name), eye: camera && camera.eye, traces: root.data.map(t => JSON.stringify(t.x)),
          same: window.__landscape === root};
}"""


def drawn_landscape(page, timeout_ms=60_000) -> dict:
    page.wait_for_function(LANDSCAPE_JS, timeout=timeout_ms)
    return page.evaluate(LANDSCAPE_JS)


def turn_landscape(page) -> dict:
    """Drag across the landscape as a visitor turns it; the camera's eye where it was left."""
    view = page.locator(".symlab-surface").first
    view.wait_for(state="visible")  # a rerun under way can hold the page's elements back a moment
    view.scroll_into_view_if_needed()
    page.evaluate("() => { window.__landscape = document.querySelector('.symlab-surface'); }")
    box = view.bounding_box()
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    for step in range(1, 11):
        page.mouse.move(x + 12 * step, y + 4 * step)
        page.wait_for_timeout(20)
    page.mouse.up()
    page.wait_for_function("() => document.querySelector('.symlab-surface').layout.scene.camera")
    return page.evaluate("() => document.querySelector('.symlab-surface').layout.scene.camera.eye")


def assert_same_eye(found: dict, expected: dict) -> None:
    assert all(abs(found[axis] - expected[axis]) < 1e-6 for axis in "xyz"), (found, expected)


def test_toy_landscape_draws_turns_and_follows_training_in_place(new_page, server_url):
    page = new_page()
    open_toy(page, f"{server_url}/toy?surface=true&alpha=1&seed=3")
    first = drawn_landscape(page)
    assert first["names"] == [
        "log p(w | D) (nats)",
        "equivalent modes",
        "MFVI: 1 and 2 sd",
        "SGM: 1 and 2 sd",
    ]
    wait_for_run(page)
    eye = turn_landscape(page)
    assert eye != first["eye"]
    play_to_step(page, 100)
    page.wait_for_function(
        f"before => {{ const now = ({LANDSCAPE_JS})(); return now && now.traces[2] !== before; }}",
        arg=first["traces"][2],
    )
    wait_for_run(page)
    now = drawn_landscape(page)
    assert now["same"], "the landscape was drawn anew, not updated in place"
    assert now["traces"][0] == first["traces"][0]  # the same grid
    assert_same_eye(now["eye"], eye)  # where the visitor turned it


def test_modes_landscape_moves_with_the_player_in_place(new_page, server_url):
    page = new_page()
    page.goto(f"{server_url}/modes?surface=true&alpha=6")
    first = drawn_landscape(page)
    assert first["names"][1:] == ["Adam's path so far", "q at this step", "optimum from q's start"]
    wait_for_run(page)
    eye = turn_landscape(page)
    assert eye != first["eye"]
    for _ in range(3):
        page.get_by_role("button", name="Step", exact=True).click()
        wait_for_run(page)
    # Adam's path so far: steps 0, 10, 20, 30.
    page.wait_for_function(
        f"() => {{ const now = ({LANDSCAPE_JS})(); return now && JSON.parse(now.traces[1]).length === 4; }}"
    )
    now = drawn_landscape(page)
    assert now["same"] and now["traces"][2] != first["traces"][2]
    assert_same_eye(now["eye"], eye)


def test_on_a_phone_the_align_landscapes_axes_have_titles_short_enough_for_the_scene(new_page, server_url):
    """At 390 px the y title "→ π(q_B) (W₂)" ran into the z title and was cut at the left edge (WebGL draws the
    titles, so no layout check can see them): a phone gets the short titles, a desktop the full ones."""
    from views import align as align_view

    titles_js = "() => ['xaxis', 'yaxis', 'zaxis'].map(axis => document.querySelector('.symlab-surface').layout.scene[axis].title.text)"
    for width, expected in ((390, list(align_view.NARROW_TITLES)), (1400, None)):
        page = new_page()
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{server_url}/align?surface=true&width=8&depth=1&steps=150&samples=4&seed=2")
        drawn_landscape(page, 120_000)
        titles = page.evaluate(titles_js)
        if expected is not None:
            assert titles == expected
        else:
            assert titles[1] == "→ π(q_B) (W₂)" and titles[2] == "test loss (nats)"


def test_align_landscape_draws_the_plane_and_turns(new_page, server_url):
    page = new_page()
    page.goto(f"{server_url}/align?surface=true&width=8&depth=1&steps=150&samples=4&seed=2")
    first = drawn_landscape(page, 120_000)
    assert first["names"] == [
        "test loss (nats)",
        "q_A → q_B, unaligned",
        "q_A → π(q_B), W₂-aligned",
        "q_A, q_B, π(q_B)",
    ]
    wait_for_run(page)
    assert turn_landscape(page) != first["eye"]
    assert drawn_landscape(page)["same"]
