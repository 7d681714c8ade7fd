"""First load of every page on a freshly started server, in Chromium: how long the first visitor waits.

    python benchmarks/bench_first_load.py [--hosted] [--delay 0] [--pages modes,toy] [--class-path] [--repeat 3]
        [--one-server] [--slowest-machine] [--json]

For each page (Home and every lab's default link; with ``--class-path`` each step of the class path, its preset in
the link, too), ``--repeat`` times, it starts a new server (``streamlit run serve.py``; with ``--one-server`` one
for every visit, as a class meets it), waits for its health check, waits ``--delay`` seconds more (0: the visitor
arrives as the server comes up; a lecturer usually starts it minutes before the class), then opens the
page in an already running Chromium and reads, in the page's own clock (performance.now(), from
the navigation's start):
  * first chart: the first (Vega-Lite) chart drawn (Home and MNIST's default view, with
    no run yet, have none: for them the page complete counts);
  * complete: the script has finished (the app's script state is "notRunning"), nothing is waiting
    for a computation (no progress bar starting with ⏳);
  * Plotly bundle: whether the page fetched Streamlit's Plotly chunk (every chart is Vega-Lite: none should);
  * reloads: how often the page loaded again within a visit (each time is counted from the first navigation).
The target: first chart within 3 s on every page. The table gives each page's median and slowest
visit (this machine is shared and noisy: one visit says little). ``--slowest-machine`` holds the server (and all
it starts) to this machine's cores scaled by its rates against the slowest machine's (a cgroup CPU quota, as
root: benchmarks/load_test.py's), so the times are those of the slowest machine we serve on.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from conftest import CHROMIUM, app_process  # noqa: E402

from symlab.labs import LABS  # noqa: E402

TARGET_SECONDS = 3.0
CHART_SELECTOR = (  # Streamlit's charts, or a player's played in the browser (views/common/animation.js)
    '[data-testid="stVegaLiteChart"] canvas, [data-testid="stVegaLiteChart"] svg.marks, .symlab-player .chart svg.marks'
)
PLOTLY_BUNDLE = "PlotlyChart"  # the name of Streamlit's Plotly chunk (4.7 MB), fetched only by a page drawing Plotly
# Every time is read on one clock, the epoch's (the document's origin plus its own time): should the page load
# again within a visit, each document's performance.now() starts from zero, and times read from two documents
# would not compare.
NOW_JS = "[performance.timeOrigin, performance.timeOrigin + performance.now()]"
FIRST_CHART_JS = f"() => document.querySelector({json.dumps(CHART_SELECTOR)}) ? {NOW_JS} : false"
WITHOUT_CHARTS = ("", "mnist")  # Home, and MNIST's default view before any run: no chart to wait for
# Where a visit's time goes: the app's JavaScript run (DOMContentLoaded, which waits for its module script; the load
# event also waits for fonts and pictures, which can come after the title), the page's title drawn (the server's first
# answer to the page run), the first chart drawn.
TITLE_JS = f"""() => document.querySelector('[data-testid="stMain"] h1') ? {NOW_JS} : false"""
COMPLETE_JS = f"""() => {{
  if (!document.querySelector('h1')) return false;
  if (!document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]')) return false;
  const bars = document.querySelectorAll('[data-testid="stProgress"], .symlab-waiting');  // the page's or the browser's
  if ([...bars].some(p => p.innerText.includes('⏳'))) return false;
  return {NOW_JS};
}}"""
LOADED_JS = (
    "() => [performance.timeOrigin, "
    "performance.timeOrigin + performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd]"
)
EXCEPTION_JS = (
    "() => [...document.querySelectorAll('[data-testid=\"stException\"]')].map(e => e.innerText.slice(0, 200))"
)


def measure(browser, url: str, path: str, timeout_s: float) -> dict:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    bundles = []
    page.on("request", lambda request: bundles.append(request.url) if PLOTLY_BUNDLE in request.url else None)
    try:
        page.goto(f"{url}/{path}", wait_until="commit")
        started = page.evaluate("performance.timeOrigin")  # the navigation's start, on the epoch's clock (ms)
        documents = {started}

        def since_start(origin_and_time) -> float:
            origin, epoch_ms = origin_and_time
            documents.add(origin)
            return (epoch_ms - started) / 1000

        def wait_for(js: str, polling) -> float:
            return since_start(page.wait_for_function(js, polling=polling, timeout=timeout_s * 1000).json_value())

        title = wait_for(TITLE_JS, "raf")
        first = None if path.split("?")[0] in WITHOUT_CHARTS else wait_for(FIRST_CHART_JS, "raf")
        complete = wait_for(COMPLETE_JS, 100)
        loaded = since_start(page.evaluate(LOADED_JS))
        return dict(
            script_loaded_s=loaded,
            title_s=title,
            first_chart_s=first,
            complete_s=complete,
            documents=len(documents),  # more than one: the page loaded again during the visit
            exceptions=page.evaluate(EXCEPTION_JS),
            plotly_bundle=bool(bundles),
        )
    finally:
        page.close()


def first_shown(row: dict) -> float:
    """When the visitor saw the page's first chart, or the whole page where it has none."""
    return row["complete_s"] if row["first_chart_s"] is None else row["first_chart_s"]


def fmt(seconds) -> str:
    return "no chart" if seconds is None else f"{seconds:5.2f}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosted", action="store_true", help="the server with SYMLAB_HOSTED=1")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds between the health check and the visit")
    parser.add_argument("--pages", help="comma-separated url paths ('' or home for Home); default: Home and every lab")
    parser.add_argument("--repeat", type=int, default=3, help="fresh servers per page (default 3)")
    parser.add_argument("--timeout", type=float, default=90.0)
    parser.add_argument("--class-path", action="store_true", help="also each class-path step's link (its preset)")
    parser.add_argument("--one-server", action="store_true", help="one server for every visit (warm: see --delay)")
    parser.add_argument(
        "--slowest-machine",
        action="store_true",
        help="the server under a CPU quota (a cgroup, as root) that makes this machine as fast as the slowest one",
    )
    parser.add_argument("--json", action="store_true", help="also one JSON line with the results")
    args = parser.parse_args(argv)
    paths = (
        [("" if p == "home" else p) for p in args.pages.split(",")] if args.pages else ["", *(lab.name for lab in LABS)]
    )
    if args.class_path:
        paths = list(dict.fromkeys([*paths, *class_path_links(args.hosted)]))
    env = {"SYMLAB_RUNS_DIR": tempfile.mkdtemp(prefix="symlab-first-load-")}
    if args.hosted:
        env["SYMLAB_HOSTED"] = "1"
    rates, quota = machine_and_quota(args.slowest_machine)
    from playwright.sync_api import sync_playwright

    rows = []
    try:
        with sync_playwright() as playwright, contextlib.ExitStack() as servers:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])

            def server():
                started = app_process(env, preexec=quota.join if quota else None)
                url, _ = servers.enter_context(started)
                time.sleep(args.delay)
                return url

            shared_url = server() if args.one_server else None
            for path in paths:
                for _ in range(args.repeat):
                    if shared_url:
                        rows.append(dict(page=path or "home", **measure(browser, shared_url, path, args.timeout)))
                    else:
                        with contextlib.ExitStack() as own:
                            url, _ = own.enter_context(app_process(env, preexec=quota.join if quota else None))
                            time.sleep(args.delay)
                            rows.append(dict(page=path or "home", **measure(browser, url, path, args.timeout)))
                    print(
                        f"{rows[-1]['page']:>10}: first chart {fmt(rows[-1]['first_chart_s'])} s, "
                        f"complete {rows[-1]['complete_s']:5.2f} s",
                        file=sys.stderr,
                        flush=True,
                    )
            browser.close()
    finally:
        if quota is not None:
            quota.remove()
    pages = summarise(rows)
    where = "one server for every visit" if args.one_server else f"{args.repeat} fresh server(s) per page"
    print(
        f"First load{' (hosted)' if args.hosted else ''}, visit {args.delay:g} s after the health check, {where}; "
        f"Chromium on the same machine. This machine: {rates['matmul_gflops']:.0f} GFLOP/s, "
        f"{rates['elements_g_per_s']:.1f} G elements/s"
        + (f"; the server held to {quota.cores:.2f} cores, as the slowest machine's 2." if quota else ".")
    )
    width = max(10, *(len(page["page"]) for page in pages))
    print(
        f"{'page':>{width}} {'first chart s':>13} {'slowest s':>9} {'median × 3 s':>12} {'complete s':>10}  "
        f"{'app loaded s':>12} {'title s':>7}  {'Plotly bundle':>13} {'reloads':>7}  exceptions"
    )
    print(
        "(first chart: the median visit's; a page that draws none: when it completed. App loaded: the app's "
        "JavaScript, in the browser; title: the page run's first element drawn)"
    )
    for page in pages:
        ratio = page["first_shown_s"] / TARGET_SECONDS
        print(
            f"{page['page']:>{width}} {page['first_shown_s']:13.2f} {page['slowest_s']:9.2f} {ratio:12.2f} "
            f"{page['complete_s']:10.2f}  {page['script_loaded_s']:12.2f} {page['title_s']:7.2f}  "
            f"{'loaded' if page['plotly_bundle'] else 'none':>13} {page['reloads']:7d}  {page['exceptions'] or 'none'}"
        )
    worst = max(page["first_shown_s"] for page in pages)
    print(
        f"worst page's median first chart {worst:.2f} s: {'PASS' if worst <= TARGET_SECONDS else 'FAIL'} "
        f"(target ≤ {TARGET_SECONDS:g} s)"
    )
    if args.json:
        print(
            json.dumps(
                dict(
                    hosted=args.hosted,
                    delay_s=args.delay,
                    repeat=args.repeat,
                    visits=rows,
                    pages=pages,
                    worst_median_first_chart_s=worst,
                    rates=rates,
                    quota_cores=quota.cores if quota else None,
                )
            )
        )


def class_path_links(hosted: bool) -> list[str]:
    """Each class-path step's link, relative to the app's root, as the home page gives it."""
    from symlab.specs.settings import Hosting
    from views.common.lessons import class_path, step_link

    hosting = Hosting.defaults(hosted)
    return [step_link(step, hosting) for step in class_path().steps]


def machine_and_quota(slowest: bool):
    """This machine's rates (as the load test reports them) and, with ``slowest``, the CPU quota that holds a server
    to the slowest machine's speed (None without)."""
    from load_test import CpuQuota, slowest_machine_cores

    from symlab.runs.device import measured_rates

    rates = measured_rates().in_units()
    if not slowest:
        return rates, None
    cores, _ = slowest_machine_cores(rates)
    return rates, CpuQuota(cores)


def summarise(rows: list[dict]) -> list[dict]:
    """Per page, in order: the median and slowest first chart (or completion, where none), the median completion."""
    pages = []
    for name in dict.fromkeys(row["page"] for row in rows):
        visits = [row for row in rows if row["page"] == name]
        shown = [first_shown(row) for row in visits]
        pages.append(
            dict(
                page=name,
                first_shown_s=statistics.median(shown),
                slowest_s=max(shown),
                complete_s=statistics.median(row["complete_s"] for row in visits),
                script_loaded_s=statistics.median(row["script_loaded_s"] for row in visits),
                title_s=statistics.median(row["title_s"] for row in visits),
                exceptions=sum(len(row["exceptions"]) for row in visits),
                reloads=sum(row["documents"] - 1 for row in visits),
                plotly_bundle=any(row["plotly_bundle"] for row in visits),
            )
        )
    return pages


if __name__ == "__main__":
    main()
