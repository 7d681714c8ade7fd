"""Tractable BNN lab in real Chromium: how often the live view redraws while it trains.

    python benchmarks/bench_toy_live.py [--seconds 15] [--url http://127.0.0.1:8501]

Starts its own server (unless --url is given), opens /toy, presses Play and counts, in the
browser, the animation frames in which a chart's drawn path changed. Reports redraws per
second of the posterior-and-predictions chart and of the bounds-and-MSE chart, Adam steps per second, and the ratio of
the redraw rate to the 5/s target (issue 3). The browser shares the machine with the server,
as it does when a lecturer runs both on one laptop.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from conftest import CHROMIUM, running_app  # noqa: E402

TARGET_PER_SECOND = 5.0
# Records, for each chart, the times at which the SVG path of its first trace changed.
WATCH_JS = """
() => {
  window.__redraws = {live: [], curves: []};
  const charts = {live: 0, curves: 1};
  const last = {};
  const tick = () => {
    const plots = document.querySelectorAll('.js-plotly-plot');
    for (const [name, index] of Object.entries(charts)) {
      const plot = plots[index];
      const paths = plot ? [...plot.querySelectorAll('path.js-line')].map(p => p.getAttribute('d')).join('|') : '';
      if (last[name] !== undefined && paths !== last[name]) window.__redraws[name].push(performance.now());
      last[name] = paths;
    }
    requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}
"""
STEP_RE = re.compile(r"Adam step (\d+) /")


def measure(url: str, seconds: float) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{url}/toy")
        page.locator(".js-plotly-plot").nth(1).wait_for(timeout=60_000)
        page.wait_for_timeout(1500)
        page.evaluate(WATCH_JS)
        progress = page.locator('[data-testid="stProgress"]').first
        page.get_by_role("button", name="Play", exact=True).click()
        page.wait_for_function("() => window.__redraws.curves.length > 0", timeout=30_000)
        start_step = int(STEP_RE.search(progress.inner_text()).group(1))
        start = page.evaluate("performance.now()")
        page.wait_for_timeout(seconds * 1000)
        end = page.evaluate("performance.now()")
        end_step = int(STEP_RE.search(progress.inner_text()).group(1))
        redraws = page.evaluate("window.__redraws")
        browser.close()
    elapsed = (end - start) / 1000
    rate = {name: sum(start <= t <= end for t in times) / elapsed for name, times in redraws.items()}
    return {"seconds": elapsed, "live_per_s": rate["live"], "curves_per_s": rate["curves"],
            "steps_per_s": (end_step - start_step) / elapsed}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--url", help="an already running SymLab server")
    args = parser.parse_args()
    if args.url:
        result = measure(args.url, args.seconds)
    else:
        with running_app() as url:
            result = measure(url, args.seconds)
    print(f"measured over {result['seconds']:.1f} s of live training in Chromium")
    print(f"posterior + predictions  {result['live_per_s']:5.2f} redraws/s  ({result['live_per_s'] / TARGET_PER_SECOND:.2f}× the 5/s target)")
    print(f"bounds + test MSE        {result['curves_per_s']:5.2f} redraws/s  ({result['curves_per_s'] / TARGET_PER_SECOND:.2f}× the 5/s target)")
    print(f"Adam steps               {result['steps_per_s']:5.0f} /s")


if __name__ == "__main__":
    main()
