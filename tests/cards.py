"""The home page's lab cards: a picture of each lab's key chart, taken from the app as drawn in Chromium and
shipped in assets/cards/. Rerun after changing one of these charts:

    python tests/cards.py [--out assets/cards] [--labs modes toy ...]

MNIST's picture needs runs: it trains three small MFVI runs (widths 16, 64, 256; a minute in all) first.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import mnist_runs

ROOT = Path(__file__).resolve().parents[1]
CARDS = ROOT / "assets" / "cards"
WIDTH, SCALE = 1400, 2  # the window the pictures are taken in (a desktop), at twice its pixels: sharp on any screen
# Blank room around the chart, in CSS px: a title's first letter at the picture's very edge ("Interpolation") lost its
# stem when the home page shrinks the picture 3-4 times ("ınterpolation").
MARGIN_PX = 12
# lab -> (the page to open, the tab to show first or None, the title of the chart to take)
PICTURES = {
    "modes": ("modes", None, "Interpolation"),
    # Trained: the link's step replays the seeded training (at step 0 the picture showed only the starts).
    "toy": ("toy?adam_step=2000", None, "Exact posterior (grey) and q over (w₁, w₂)"),
    "mnist": ("mnist", "Results", "Closest two units against width"),
    "symmetry": ("symmetry?part=proximity", None, None),
    "align": ("align", None, None),
    "methods": ("methods", None, "MMD², symmetries removed"),
}
MNIST_WIDTHS = (16, 64, 256)


def train_mnist_runs(runs_dir: Path) -> None:
    for hidden in MNIST_WIDTHS:
        mnist_runs.train(runs_dir, hidden, train_subset=5000, timeout=600)


def chart(page, title: str | None):
    """The chart titled ``title`` (None: the page's first)."""
    charts = page.locator('[data-testid="stVegaLiteChart"], .symlab-player .chart')
    if title is None:
        return charts.first
    return charts.filter(has_text=title).first


def take_pictures(out: Path, labs=tuple(PICTURES)) -> list[Path]:
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]
    from conftest import CHROMIUM, running_app
    from layout import wait_until_drawn
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    runs_dir = Path(tempfile.mkdtemp(prefix="symlab-cards-"))
    if "mnist" in labs:
        train_mnist_runs(runs_dir)
    taken = []
    with running_app(runs_dir) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page(viewport={"width": WIDTH, "height": 1000}, device_scale_factor=SCALE)
        page.set_default_timeout(180_000)
        for lab, (target, tab, title) in ((lab, PICTURES[lab]) for lab in labs):
            page.goto(f"{url}/{target}")
            wait_until_drawn(page, 300_000)
            if tab is not None:
                page.get_by_role("tab", name=tab).click()
                page.mouse.move(0, 0)  # off the chart: its toolbar shows while the pointer is over it
                wait_until_drawn(page)
            path = out / f"{lab}.png"
            taken_chart = chart(page, title)
            taken_chart.scroll_into_view_if_needed()
            box = taken_chart.bounding_box()
            page.screenshot(
                path=str(path),
                clip={
                    "x": box["x"] - MARGIN_PX,
                    "y": box["y"] - MARGIN_PX,
                    "width": box["width"] + 2 * MARGIN_PX,
                    "height": box["height"] + 2 * MARGIN_PX,
                },
            )
            taken.append(path)
            print(f"{lab}: {path}", flush=True)
        browser.close()
    return taken


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=CARDS, help="where to write <lab>.png (default: assets/cards)")
    parser.add_argument(
        "--labs",
        nargs="+",
        choices=tuple(PICTURES),
        default=tuple(PICTURES),
        help="the labs whose pictures to take (default: all)",
    )
    args = parser.parse_args(argv)
    take_pictures(args.out, args.labs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
