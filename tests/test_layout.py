"""Every page and part fits a phone and a projector: at 390, 768, 1024, 1400 and 1920 px (presentation mode at
390, 1024 and 1920), no chart is wider than its column, nothing scrolls sideways, and no chart text overlaps other text,
runs past its column or is shortened (tests/layout.py reads all of it from the rendered layout)."""

import pytest
from layout import PRESENT_WIDTHS, WIDTHS, check, problems_on, wait_until_drawn

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Every page, and every part of a page that has parts (a page's tabs and expanders are opened by the check). The
# pages with a 3-D landscape are checked with it switched on: the default page and the landscape below it.
TARGETS = (
    "",
    "modes?surface=true",
    "toy?surface=true",
    "mnist",
    *(f"symmetry?part={part}" for part in ("fig1", "mass", "proximity", "quality", "training", "network")),
    "align?surface=true",
    "align?source=files",
    "methods",
)


@pytest.mark.parametrize("target", TARGETS, ids=lambda target: target or "home")
def test_the_page_fits_every_width_in_both_modes(new_page, server_url, target):
    problems = []
    for present, widths in ((False, WIDTHS), (True, PRESENT_WIDTHS)):
        for width in widths:
            # A new tab at each width, as a phone or a projector opens the link (a page resized in place:
            # test_a_square_plot_settles_at_every_width_as_the_window_is_resized).
            page = new_page()
            page.set_default_timeout(120_000)
            problems += check(page, f"{server_url}/{target}", width, present)
            page.close()
    assert not problems, "\n".join(problems)


# Pages with square plots (the plot's height follows its width, charts.square_plot), and a run of column widths
# where Vega once chased its own tail: the y-axis ticks followed the height, their labels the axis's width, and
# "fit-x" the labels (a stack overflow in Chromium: at 382-384 px on the toy page, 380 px on align).
SQUARE_PLOT_PAGES = ("toy", "align")


@pytest.mark.parametrize("target", SQUARE_PLOT_PAGES)
def test_a_square_plot_settles_at_every_width_as_the_window_is_resized(new_page, server_url, target):
    page = new_page()
    page.set_viewport_size({"width": 380, "height": 900})
    page.goto(f"{server_url}/{target}")
    wait_until_drawn(page)
    for width in range(380, 440):  # in place, one pixel at a time: each width a new fit of every square plot
        page.set_viewport_size({"width": width, "height": 900})
        page.wait_for_timeout(100)
    wait_until_drawn(page)  # and new_page's teardown fails on any browser error seen on the way


# The pages a phone turned sideways and a laptop with the sidebar open showed wrong: titles cut, plots squashed by
# their own axis titles, metric labels cut short, a table's toolbar over the text above it, the sidebar opening.
NARROW_TARGETS = ("align", "mnist", "methods", "symmetry?part=training")
SIDEBAR = '[data-testid="stSidebar"]'
PHONE = (
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
    "Mobile Safari/537.36"
)


def sidebar_width(page) -> int:
    """How much of the window the sidebar covers (0 when closed: it slides out to the left)."""
    box = page.locator(SIDEBAR).bounding_box()
    return 0 if box is None else max(0, round(box["x"] + box["width"]))


@pytest.mark.parametrize("target", NARROW_TARGETS)
def test_a_phone_turned_sideways_and_back_keeps_the_page_whole_and_the_sidebar_closed(
    browser, browser_errors, server_url, target
):
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True, user_agent=PHONE
    )
    browser_errors.watch(context)
    try:
        page = context.new_page()
        page.set_default_timeout(120_000)
        page.goto(f"{server_url}/{target}")
        problems = problems_on(page, f"{target} at 390 × 844")
        for width, height in ((844, 390), (390, 844)):  # turned in place, the page not reloaded
            page.set_viewport_size({"width": width, "height": height})
            problems += problems_on(page, f"{target} turned to {width} × {height}")
            assert sidebar_width(page) == 0, f"turned to {width} × {height}, the sidebar opened"
        assert not problems, "\n".join(problems)
    finally:
        context.close()
    assert not browser_errors.errors, "\n".join(browser_errors.errors)


@pytest.mark.parametrize("target", NARROW_TARGETS)
def test_a_laptop_at_844_px_with_the_sidebar_open(new_page, server_url, target):
    page = new_page()
    page.set_default_timeout(120_000)
    page.set_viewport_size({"width": 844, "height": 900})
    page.goto(f"{server_url}/{target}")
    wait_until_drawn(page)
    assert sidebar_width(page) >= 200  # a desktop browser at 844 px opens it
    problems = problems_on(page, f"{target} at 844 px, sidebar open")
    assert not problems, "\n".join(problems)
