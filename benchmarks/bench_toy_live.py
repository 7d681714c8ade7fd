"""Tractable BNN lab in real Chromium: how often the live view redraws while it plays, and what that costs
the browser and the server; with ``--before REF``, the app at that git ref against the working tree, with ratios
(an app whose server ticks the player, as before the toy played in the browser, is measured the same way).

    python benchmarks/bench_toy_live.py [--seconds 15] [--before REF] [--repeats 1] [--url http://127.0.0.1:8501] [--json]

For each app (the ref's, checked out with ``git worktree add`` into a temporary directory and removed
afterwards; then the working tree's) it starts a server, opens /toy in Chromium, presses Play and
measures, over ``--seconds``:

- each live chart's redraws per second: the player's ticks (changes of the progress bar's label) in
  which what the chart draws changed. A MutationObserver marks the charts whose DOM changed; in such
  an animation frame the chart's signature is compared with the last one: the ``d`` of its lines
  (Vega's SVG: its line, area and symbol marks' paths and its rules; cells and pictures, which do not
  move, are left out). A Vega canvas counts as redrawn when Vega cleared it; a chart counts once a tick;
- the player's ticks shown per second and Adam steps per second (20 steps a tick: the browser's
  load slows the fragment's timer, and with it training);
- browser CPU per tick: user + system CPU seconds of Chromium's whole process tree (renderer, GPU,
  browser processes; /proc) divided by the ticks shown, and per view redraw (redraws of the chart of
  the bounds, which changes every tick);
- the renderer's main-thread busy time per view redraw (Chrome DevTools Protocol ``Performance``
  metrics: TaskDuration, with its script and style + layout shares);
- the server's CPU per Adam step (the Streamlit process, /proc).

Everything in a tick is counted, not only the charts: the player's buttons, progress bar and metrics
redraw too. The machine is shared and noisy: the report gives after/before ratios beside the bare
numbers, and ``--repeats`` alternates the two apps and reports medians. The browser shares the machine
with the server, as it does when a lecturer runs both on one laptop.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from conftest import CHROMIUM, app_process  # noqa: E402

from symlab.runs.device import measured_rates  # noqa: E402

TARGET_PER_SECOND = 5.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Before the page's own scripts: the chart registry, the redraw log and the canvas hook.
INIT_JS = r"""
(() => {
  const s = window.__bench = {charts: [], redraws: {}, last: {}, dirty: new Set(), canvas: new Set(), on: false, ticks: [],
                            tick: 0, drawnTick: {}};
  const CHARTS = '[data-testid="stVegaLiteChart"], .symlab-player .chart';  // Streamlit's charts, or a player's
  const clear = CanvasRenderingContext2D.prototype.clearRect;
  CanvasRenderingContext2D.prototype.clearRect = function (...args) {
    const chart = this.canvas && this.canvas.closest && this.canvas.closest(CHARTS);
    if (chart) s.canvas.add(chart);
    return clear.apply(this, args);
  };
  const signature = chart => {
    const marks = chart.querySelector('.marks');
    if (!marks || marks.tagName !== 'svg') return null;  // canvas: by its clears
    return [...marks.querySelectorAll(
        '.mark-line path, .mark-area path, .mark-symbol path, .mark-rule line')]
      .map(p => p.getAttribute('d') || [p.getAttribute('transform'), p.getAttribute('x2'), p.getAttribute('y2')].join(','))
      .join('|');
  };
  const observer = new MutationObserver(records => {
    for (const r of records) {
      const el = r.target.nodeType === 1 ? r.target : r.target.parentElement;
      s.dirty.add((el && el.closest(CHARTS)) || document);
    }
  });
  const start = () => {
    if (!document.body) return requestAnimationFrame(start);
    observer.observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});
    const tick = () => {
      const charts = [...document.querySelectorAll(CHARTS)];
      const now = performance.now();
      // The player's label: the browser's player (views/common/animation.js), or the server's progress bar.
      const bar = document.querySelector('.symlab-player .label') || document.querySelector('[data-testid="stProgress"], .symlab-waiting');
      const label = bar ? bar.innerText : '';
      if (label !== s.lastLabel) {  // the player's tick: the progress bar's label changed
        if (s.on && s.lastLabel !== undefined) s.ticks.push(now);
        s.lastLabel = label;
        s.tick += 1;
      }
      charts.forEach((chart, index) => {
        const changed = s.dirty.has(chart) || s.dirty.has(document) || s.canvas.has(chart);
        if (!changed) return;
        const sig = signature(chart);
        const key = String(index);
        // A chart's redraw: the first change of what it draws during a tick of the player.
        const redrawn = () => {
          const log = s.redraws[key] = s.redraws[key] || [];
          if (s.on && s.drawnTick[key] !== s.tick) log.push(now);
          s.drawnTick[key] = s.tick;
        };
        if (sig === null) {  // a canvas: Vega cleared it to draw it again
          if (s.canvas.has(chart)) redrawn();
        } else if (sig !== '' && sig !== s.last[key]) {
          if (s.last[key] !== undefined) redrawn();
          s.last[key] = sig;
        }
      });
      s.dirty.clear();
      s.canvas.clear();
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  };
  start();
  s.titles = () => [...document.querySelectorAll(CHARTS)].map(chart => {
    const title = chart.querySelector('.role-title-text'), labelled = chart.querySelector('[aria-label]');
    return title ? title.textContent : labelled ? labelled.getAttribute('aria-label') : 'untitled';
  });
})();
"""
STEP_RE = re.compile(r"Adam step (\d+) /")
CHARTS = '[data-testid="stVegaLiteChart"], .symlab-player .chart'  # Streamlit's charts, or the browser player's
PROGRESS = (
    '.symlab-player .label, [data-testid="stProgress"], .symlab-waiting'  # the player's, the page's or the browser's
)


# ------------------------------------------------------------------------------------------- servers


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and of its children that have been waited for."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / CLK_TCK


def children(pid: int) -> list[int]:
    found = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
    return found


def chromium_cpu() -> float:
    """CPU seconds of every Chromium process below this one (Playwright's driver starts them)."""
    total, stack = 0.0, children(os.getpid())
    while stack:
        pid = stack.pop()
        stack += children(pid)
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/comm") as f:
                if "chrom" in f.read():
                    total += cpu_seconds(pid)
    return total


@contextlib.contextmanager
def app_server(root: Path):
    """``streamlit run app.py`` from ``root`` (a checkout; an older one has no serve.py) on a free
    port; yields (url, server pid)."""
    runs_dir = tempfile.mkdtemp(prefix="symlab-bench-runs-")
    try:
        with app_process({"SYMLAB_RUNS_DIR": runs_dir}, root=root, script="app.py") as (url, process):
            yield url, process.pid
    finally:
        shutil.rmtree(runs_dir, ignore_errors=True)


@contextlib.contextmanager
def checkout(ref: str):
    """The repository at ``ref`` in a temporary git worktree, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="symlab-before-")) / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet", str(path), ref], check=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False)
        shutil.rmtree(path.parent, ignore_errors=True)


# ------------------------------------------------------------------------------------------- measure


def measure(url: str, seconds: float, server_pid: int | None = None) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.add_init_script(INIT_JS)
        page.goto(f"{url}/toy")
        page.locator(CHARTS).first.wait_for(timeout=60_000)
        page.get_by_role("button", name="Play", exact=True).and_(page.locator(":enabled")).wait_for(timeout=60_000)
        page.wait_for_timeout(2500)
        titles = page.evaluate("window.__bench.titles()")
        curves = next((i for i, t in enumerate(titles) if t.startswith("Lower bounds")), len(titles) - 1)
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        progress = page.locator(PROGRESS).first
        page.evaluate("window.__bench.on = true")
        page.get_by_role("button", name="Play", exact=True).click()
        page.wait_for_function("() => window.__bench.ticks.length > 1", timeout=30_000)
        start_step = int(STEP_RE.search(progress.inner_text()).group(1))
        metrics0, cpu0 = cdp.send("Performance.getMetrics"), chromium_cpu()
        server0 = cpu_seconds(server_pid) if server_pid else None
        start = page.evaluate("performance.now()")
        page.wait_for_timeout(seconds * 1000)
        end = page.evaluate("performance.now()")
        metrics1, cpu1 = cdp.send("Performance.getMetrics"), chromium_cpu()
        server1 = cpu_seconds(server_pid) if server_pid else None
        end_step = int(STEP_RE.search(progress.inner_text()).group(1))
        redraws, ticks = page.evaluate("[window.__bench.redraws, window.__bench.ticks]")
        page.get_by_role("button", name="Pause", exact=True).click()
        browser.close()
    elapsed = (end - start) / 1000

    def metric(metrics, name):
        return next(m["value"] for m in metrics["metrics"] if m["name"] == name)

    counts = [sum(start <= t <= end for t in redraws.get(str(i), [])) for i in range(len(titles))]
    tick_count = max(sum(start <= t <= end for t in ticks), 1)
    view = max(counts[curves] if titles else tick_count, 1)
    main = {
        name: (metric(metrics1, name) - metric(metrics0, name)) / view
        for name in ("TaskDuration", "ScriptDuration", "LayoutDuration", "RecalcStyleDuration")
    }
    steps = end_step - start_step
    return {
        "seconds": elapsed,
        "titles": titles,
        "per_s": [c / elapsed for c in counts],
        "view_per_s": view / elapsed,
        "steps_per_s": steps / elapsed,
        "ticks_per_s": tick_count / elapsed,
        "cpu_per_tick": (cpu1 - cpu0) / tick_count,
        "cpu_per_redraw": (cpu1 - cpu0) / view,
        "browser_cpu_share": (cpu1 - cpu0) / elapsed,
        "main_per_redraw": main["TaskDuration"],
        "script_per_redraw": main["ScriptDuration"],
        "layout_per_redraw": main["LayoutDuration"] + main["RecalcStyleDuration"],
        "server_cpu_per_step": (server1 - server0) / max(steps, 1) if server_pid else None,
    }


def median_result(results: list[dict]) -> dict:
    merged = {}
    for key, value in results[0].items():
        if key == "titles":
            merged[key] = value
        elif isinstance(value, list):
            merged[key] = [statistics.median(r[key][i] for r in results) for i in range(len(value))]
        elif value is not None:
            merged[key] = statistics.median(r[key] for r in results)
        else:
            merged[key] = None
    return merged


# ------------------------------------------------------------------------------------------- report


def panel(title: str) -> str:
    """Which part of the live view a chart draws, whatever the app version splits it into."""
    if title.startswith("Lower bounds") or title.startswith("Test MSE"):
        return "curves"
    return "posterior and predictions"


def report_one(name: str, result: dict) -> None:
    print(f"{name}: measured over {result['seconds']:.1f} s of live training in Chromium")
    for title, rate in zip(result["titles"], result["per_s"]):
        print(f"  {title[:58]:58s} {rate:5.2f} redraws/s  ({rate / TARGET_PER_SECOND:.2f}× the 5/s target)")
    print(f"  Adam steps                                                 {result['steps_per_s']:5.0f} /s")
    print(
        f"  player ticks shown (progress bar updates)                  {result['ticks_per_s']:5.2f} /s"
        f"  (browser CPU per tick {result['cpu_per_tick'] * 1e3:.0f} ms)"
    )
    print(
        f"  browser CPU per view redraw                                {result['cpu_per_redraw'] * 1e3:5.0f} ms"
        f"  (Chromium used {result['browser_cpu_share']:.2f} CPU)"
    )
    print(
        f"  renderer main thread per view redraw                       {result['main_per_redraw'] * 1e3:5.0f} ms"
        f"  (script {result['script_per_redraw'] * 1e3:.0f}, style + layout {result['layout_per_redraw'] * 1e3:.0f})"
    )
    if result["server_cpu_per_step"] is not None:
        print(
            f"  server CPU per Adam step                                   {result['server_cpu_per_step'] * 1e3:5.2f} ms"
        )


def report_pair(before: dict, after: dict, ref: str) -> None:
    print(f"\nafter (working tree) / before ({ref}):")
    for i, title in enumerate(after["titles"]):
        old = [j for j, t in enumerate(before["titles"]) if panel(t) == panel(title)]
        if not old:
            continue
        was = before["per_s"][old[0]]
        print(
            f"  {title[:44]:44s} {after['per_s'][i]:5.2f} vs {was:5.2f} redraws/s "
            f"({before['titles'][old[0]][:30]})  ratio {after['per_s'][i] / max(was, 1e-9):5.2f}"
        )
    rows = (
        ("live view redraws/s", "view_per_s"),
        ("player ticks shown/s", "ticks_per_s"),
        ("Adam steps/s", "steps_per_s"),
        ("browser CPU per tick", "cpu_per_tick"),
        ("browser CPU per view redraw", "cpu_per_redraw"),
        ("renderer main thread per redraw", "main_per_redraw"),
        ("  of which script", "script_per_redraw"),
        ("  of which style + layout", "layout_per_redraw"),
        ("server CPU per Adam step", "server_cpu_per_step"),
    )
    for label, key in rows:
        if before.get(key) is None or after.get(key) is None:
            continue
        unit, scale = ("", 1) if key in ("view_per_s", "ticks_per_s", "steps_per_s") else (" ms", 1e3)
        print(
            f"  {label:34s} {after[key] * scale:8.2f}{unit} vs {before[key] * scale:8.2f}{unit}"
            f"  ratio {after[key] / max(before[key], 1e-12):5.2f}"
        )


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=15.0, help="of play measured (2: its smallest, which a test runs)"
    )
    parser.add_argument("--url", help="an already running SymLab server (measures that one only)")
    parser.add_argument("--before", metavar="REF", help="also measure the app at this git ref, and compare")
    parser.add_argument("--repeats", type=int, default=1, help="measurements of each app, alternating; medians")
    parser.add_argument("--json", action="store_true", help="also one JSON line: the machine's rates and each app's")
    args = parser.parse_args(argv)
    measured = measured_rates()
    rates = measured.in_units()
    print(measured.described())
    if args.url:
        merged = {"server at " + args.url: measure(args.url, args.seconds)}
    else:
        apps = [("working tree", ROOT)]
        with contextlib.ExitStack() as stack:
            if args.before:
                apps.insert(0, (args.before, stack.enter_context(checkout(args.before))))
            results = {name: [] for name, _ in apps}
            for _ in range(args.repeats):
                for name, root in apps:
                    with app_server(root) as (url, pid):
                        results[name].append(measure(url, args.seconds, pid))
        merged = {name: median_result(found) for name, found in results.items()}
    for name, result in merged.items():
        report_one(name + (f" (median of {args.repeats})" if args.repeats > 1 else ""), result)
    if args.before:
        report_pair(merged[args.before], merged["working tree"], args.before)
    report = {"rates": rates, "seconds": args.seconds, "apps": merged}
    if args.json:
        print(json.dumps(report, default=float))
    return report


if __name__ == "__main__":
    main()
