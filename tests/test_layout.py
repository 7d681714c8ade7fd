"""Every page and part fits a phone and a projector: at 390, 768, 1024, 1400 and 1920 px, presentation mode
included, no chart is wider than its column, nothing scrolls sideways, and no chart text overlaps other text,
runs past its column or is shortened (tests/layout.py reads all of it from the rendered layout)."""

import pytest
from layout import WIDTHS, check

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Every page, and every part of a page that has parts (a page's tabs and expanders are opened by the check).
TARGETS = ("", "modes", "toy", "mnist", *(f"symmetry?part={part}" for part in
                                            ("fig1", "mass", "proximity", "quality", "training", "network")),
           "align", "align?source=files", "methods")


@pytest.mark.parametrize("target", TARGETS, ids=lambda target: target or "home")
def test_the_page_fits_every_width_in_both_modes(new_page, server_url, target):
    problems = []
    for present in (False, True):
        for width in WIDTHS:
            # A new tab at each width, as a phone or a projector opens the link: a page resized in place is another
            # matter (a square chart then reflows with the window, and Vega can lose track of its column).
            page = new_page()
            page.set_default_timeout(120_000)
            problems += check(page, f"{server_url}/{target}", width, present)
            page.close()
    assert not problems, "\n".join(problems)
