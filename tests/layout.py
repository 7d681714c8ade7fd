"""What a page looks like at a given width, checked from the rendered layout in Chromium: no chart wider than
its column, no sideways scroll, no chart text over other text, past its column, or shortened to "…".

Used by tests/test_layout.py; also a command that opens pages of a fresh server and prints what it finds:

    python tests/layout.py symmetry?part=mass align --widths 390 1400 [--present] [--shots DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import warnings
from pathlib import Path

WIDTHS = (390, 768, 1024, 1400, 1920)
PRESENT_WIDTHS = (390, 1024, 1920)  # presentation mode: a phone, a projector's two usual resolutions
HEIGHT = 900
SHOT_MAX_PX = 12_000  # the tallest screenshot taken
RECHECK_MS = 2_000  # how long after a problem the page is looked at again
AT = " · where: "  # in a problem, before where its boxes lay across the window (LAYOUT_JS)

# Problems on the page as drawn, each a sentence (some followed by AT and where the boxes lay). Texts are those of
# Vega's SVG (axis labels and titles, legend labels, chart titles, text marks); two overlap where their boxes share
# more than OVERLAP_PX in both directions.
LAYOUT_JS = """(AT) => {
  const VEGA_CHARTS = '[data-testid="stVegaLiteChart"], .symlab-player .chart';  // Streamlit's, and players'
  const OVERLAP_PX = 1.5, EDGE_PX = 1, TEXT_EDGE_PX = 4;  // a glyph's box reaches a little past its ink
  const MIN_PLOT_PX = 120, COVER_PX = 3;  // a plot lower than this is squashed; boxes that share more overlap
  const problems = [];
  const root = document.documentElement;
  if (root.scrollWidth > root.clientWidth + EDGE_PX)
    problems.push(`the page scrolls sideways: ${root.scrollWidth} px wide in a ${root.clientWidth} px window`);
  for (const scroller of document.querySelectorAll('[data-testid="stMain"], [data-testid="stAppViewContainer"]')) {
    if (scroller.scrollWidth > scroller.clientWidth + EDGE_PX)
      problems.push(`${scroller.dataset.testid} scrolls sideways: ${scroller.scrollWidth} px in ${scroller.clientWidth}`);
  }
  const visible = (e) => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const span = (r) => `${Math.round(r.left)}-${Math.round(r.right)}`;  // where a box lies across the window, in px
  document.querySelectorAll(VEGA_CHARTS).forEach((chart, index) => {
    if (!visible(chart)) return;  // in a closed tab or expander
    const svg = chart.querySelector('svg.marks') || chart.querySelector('canvas');
    if (!svg) return;
    const title = (chart.querySelector('svg.marks .role-title-text') || {}).textContent || `chart ${index + 1}`;
    // A player's chart (views/common/animation.js) is its own cell of the player's grid.
    const column = chart.matches('.symlab-player .chart') ? chart
      : chart.closest('[data-testid="stElementContainer"]') || chart.parentElement;
    const box = svg.getBoundingClientRect(), room = column.getBoundingClientRect();
    if (box.right > room.right + EDGE_PX || box.left < room.left - EDGE_PX)
      problems.push(`"${title}" is ${Math.round(box.width)} px wide in a ${Math.round(room.width)} px column`
                    + `${AT}chart ${span(box)}, column ${span(room)} px`);
    if (box.right > root.clientWidth + EDGE_PX)
      problems.push(`"${title}" runs ${Math.round(box.right - root.clientWidth)} px past the window`);
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() && visible(t)
      && getComputedStyle(t).opacity !== '0' && t.getAttribute('opacity') !== '0');
    const boxes = texts.map(t => t.getBoundingClientRect());
    texts.forEach((t, i) => {
      const b = boxes[i], words = t.textContent.trim();
      if (words.endsWith('…')) problems.push(`"${title}": text shortened to "${words}"`);
      // A glyph's box reaches above and below its ink by about a fifth of its height (more at larger fonts).
      const overhang = Math.max(TEXT_EDGE_PX, 0.2 * b.height);
      if (b.top < box.top - overhang || b.bottom > box.bottom + overhang)
        problems.push(`"${title}": "${words}" is cut at the chart's edge${AT}text ${Math.round(b.top)}-`
                      + `${Math.round(b.bottom)}, chart ${Math.round(box.top)}-${Math.round(box.bottom)} px down`);
      if (b.left < room.left - TEXT_EDGE_PX || b.right > room.right + TEXT_EDGE_PX || b.right > root.clientWidth)
        problems.push(`"${title}": "${words}" runs past its column${AT}text ${span(b)}, chart ${span(box)}, `
                      + `column ${span(room)} px`);
      for (let j = 0; j < i; j++) {
        const c = boxes[j];
        const wide = Math.min(b.right, c.right) - Math.max(b.left, c.left);
        const high = Math.min(b.bottom, c.bottom) - Math.max(b.top, c.top);
        if (wide > OVERLAP_PX && high > OVERLAP_PX)
          problems.push(`"${title}": "${words}" overlaps "${texts[j].textContent.trim()}"`);
      }
    });
    // A plot squashed by its own y-axis title: the title, turned, longer than the plot it labels (the plot: the
    // largest background inside the chart's own).
    const plots = [...svg.querySelectorAll('path.background')].map(p => p.getBoundingClientRect())
      .filter(p => p.width > 0 && p.height > 0 && p.height < box.height - EDGE_PX);
    const plot = plots.sort((a, b) => b.width * b.height - a.width * a.height)[0];
    if (plot) svg.querySelectorAll('.role-axis-title text').forEach(label => {
      const l = label.getBoundingClientRect();
      if (l.height > l.width && (plot.height < MIN_PLOT_PX || l.height > plot.height + TEXT_EDGE_PX))
        problems.push(`"${title}": its plot is ${Math.round(plot.height)} px high, under its y title `
                      + `"${label.textContent.trim()}" (${Math.round(l.height)} px)`);
    });
  });
  // A 3-D landscape (views/common/surfaces.py, Plotly): inside its column and the window; its legend's entries
  // (Plotly's SVG) inside it, none over another.
  document.querySelectorAll('.symlab-surface').forEach((view, index) => {
    if (!visible(view)) return;
    const title = `3-D view ${index + 1}`;
    const column = view.closest('[data-testid="stElementContainer"]') || view.parentElement;
    const box = view.getBoundingClientRect(), room = column.getBoundingClientRect();
    if (box.right > room.right + EDGE_PX || box.left < room.left - EDGE_PX || box.right > root.clientWidth + EDGE_PX)
      problems.push(`the ${title} is ${Math.round(box.width)} px wide in a ${Math.round(room.width)} px column`
                    + `${AT}view ${span(box)}, column ${span(room)} px`);
    const canvas = view.querySelector('canvas');
    if (!canvas || canvas.getBoundingClientRect().width > box.width + EDGE_PX)
      problems.push(`the ${title} draws ${canvas ? 'past its box' : 'nothing'}`);
    const texts = [...view.querySelectorAll('.legend text')].filter(t => t.textContent.trim() && visible(t));
    const boxes = texts.map(t => t.getBoundingClientRect());
    texts.forEach((t, i) => {
      const b = boxes[i], words = t.textContent.trim();
      if (b.left < box.left - TEXT_EDGE_PX || b.right > box.right + TEXT_EDGE_PX || b.bottom > box.bottom + TEXT_EDGE_PX)
        problems.push(`the ${title}'s legend entry "${words}" runs past it${AT}text ${span(b)}, view ${span(box)} px`);
      for (let j = 0; j < i; j++) {
        const c = boxes[j];
        const wide = Math.min(b.right, c.right) - Math.max(b.left, c.left);
        const high = Math.min(b.bottom, c.bottom) - Math.max(b.top, c.top);
        if (wide > OVERLAP_PX && high > OVERLAP_PX)
          problems.push(`the ${title}'s legend entry "${words}" overlaps "${texts[j].textContent.trim()}"`);
      }
    });
  });
  // A table wider than its place: its last columns hidden, with no scroll bar to say so.
  document.querySelectorAll('[data-testid="stTable"]').forEach(table => {
    const inner = table.querySelector('table');
    if (!visible(table) || !inner) return;
    const hidden = inner.getBoundingClientRect().width - table.getBoundingClientRect().width;
    if (hidden > EDGE_PX)
      problems.push(`a table is ${Math.round(hidden)} px wider than its place: "${inner.innerText.trim().slice(0, 40)}"`);
  });
  // A metric's label cut short (Streamlit ends it with "…" where its column is narrow).
  document.querySelectorAll('[data-testid="stMetricLabel"]').forEach(label => {
    if (!visible(label)) return;
    for (const e of [label, ...label.querySelectorAll('*')])
      if (e.scrollWidth > e.clientWidth + EDGE_PX && getComputedStyle(e).overflow !== 'visible') {
        problems.push(`the metric label "${label.innerText.trim()}" is cut short`);
        break;
      }
  });
  // Seen: drawn, and not in a tab that is not showing (its panel keeps its place, hidden) nor transparent.
  const shown = (e) => visible(e) && e.checkVisibility({opacityProperty: true, visibilityProperty: true});
  // Elements over one another: two of the page's elements (or a table's toolbar and another element) whose boxes
  // share more than COVER_PX both ways, where neither holds the other (a title under a progress bar, a toolbar
  // over the caption above its table).
  const leaves = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementContainer"]')]
    .filter(e => shown(e) && !e.querySelector('[data-testid="stElementContainer"]'));
  const toolbars = [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stElementToolbar"]')]
    .filter(e => visible(e) && e.parentElement.checkVisibility({visibilityProperty: true}));  // shown on a tap
  const named = (e) => (e.querySelector('[data-testid]:not([data-testid="stElementContainer"])') || e).dataset.testid
    + ` "${(e.innerText || '').trim().slice(0, 40)}"`;
  const parts = [...leaves, ...toolbars];
  const rects = parts.map(e => e.getBoundingClientRect());
  for (let i = 0; i < parts.length; i++)
    for (let j = 0; j < i; j++) {
      const a = rects[i], b = rects[j];
      if (parts[i].contains(parts[j]) || parts[j].contains(parts[i])) continue;
      const wide = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const high = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (wide > COVER_PX && high > COVER_PX)
        problems.push(`${named(parts[i])} lies over ${named(parts[j])}${AT}${span(a)} and ${span(b)} px, `
                      + `${Math.round(high)} px of height shared`);
    }
  return problems;
}"""

# The page as drawn now: how many elements, and each chart's size (null until Vega has drawn it). The frontend
# reports the run finished before it has drawn every element (a chart's code loads on first use), and a page
# waiting for a computation redraws its progress (in a fragment, or in the browser); so a page is drawn once no computation is
# pending and this stays the same for SETTLED_LOOKS looks in a row.
DRAWN_JS = """() => { const VEGA_CHARTS = '[data-testid="stVegaLiteChart"], .symlab-player .chart';
  return JSON.stringify([document.querySelectorAll('[data-testid="stElementContainer"]').length,
  // a computation the page waits for (views/common/computing.py's progress text starts with ⏳; the browser's own
  // panel, views/common/waiting.js, while it asks)
  [...document.querySelectorAll('[data-testid="stProgress"], .symlab-waiting')].some(p => p.innerText.trim().startsWith('⏳'))
    ? null : 'ready',
  ...[...document.querySelectorAll(VEGA_CHARTS)]
    .filter(c => c.getBoundingClientRect().width > 0)  // a chart in a closed tab is drawn when the tab opens
    .map(c => {
    const s = c.querySelector('svg.marks'); if (!s) return null;
    const r = s.getBoundingClientRect(); return [Math.round(r.width), Math.round(r.height)]; }),
  // a 3-D landscape: drawn once Plotly has laid it out (its chunk loads on first use)
  ...[...document.querySelectorAll('.symlab-surface')].map(v => v._fullLayout && v.querySelector('canvas')
    ? [Math.round(v.getBoundingClientRect().width), v.querySelectorAll('.legend text').length] : null)]); }"""
SETTLED_LOOKS, LOOK_SECONDS = 3, 0.15  # a layout that moves later is looked at again (RECHECK_MS)


def wait_until_drawn(page, timeout_ms: int = 120_000) -> None:
    """The script has run, and every element and chart is drawn, at its settled size."""
    page.wait_for_function(
        '() => document.querySelector(\'[data-testid="stApp"][data-test-script-state="notRunning"]\')'
        " && !document.querySelector('[data-testid=\"stStatusWidget\"]')",
        timeout=timeout_ms,
    )
    looks = []
    for _ in range(int(timeout_ms / 1000 / LOOK_SECONDS)):
        looks = [*looks[-SETTLED_LOOKS + 1 :], page.evaluate(DRAWN_JS)]
        if len(looks) == SETTLED_LOOKS and len(set(looks)) == 1 and "null" not in looks[0]:
            return
        page.wait_for_timeout(LOOK_SECONDS * 1000)
    raise AssertionError(f"the page never settled: {looks}")


def open_everything(page) -> None:
    """Open every closed expander, so that the charts in them are drawn and checked."""
    page.evaluate("""() => document.querySelectorAll('[data-testid="stExpander"] details:not([open]) > summary')
                               .forEach(summary => summary.click())""")


TABLES = '[data-testid="stMain"] [data-testid="stDataFrame"]'


def toolbar_problems(page) -> list[str]:
    """A table's toolbar (search, download, full screen) shows over its top edge when the table is touched or hovered:
    each table hovered in turn, what its toolbar then covers."""
    found = []
    tables = page.locator(TABLES)
    for index in range(tables.count()):
        table = tables.nth(index)
        if not table.is_visible():
            continue
        table.scroll_into_view_if_needed()
        table.hover()
        page.wait_for_timeout(300)  # the toolbar fades in
        found += [
            problem for problem in page.evaluate(LAYOUT_JS, AT) if "stElementToolbar" in problem.split(" lies over ")[0]
        ]
    page.mouse.move(0, 0)
    return found


def lasting_problems(page) -> list[str]:
    """The layout's problems, once drawn, that are still there a moment later. A page the check finds settled can
    still be drawn once more (a chart's resize can lag its column's on a busy machine); what then went away is
    reported as a warning, and what stays as a problem."""
    wait_until_drawn(page)
    found = page.evaluate(LAYOUT_JS, AT) + toolbar_problems(page)
    if not found:
        return []
    page.wait_for_timeout(RECHECK_MS)
    wait_until_drawn(page)
    lasting = page.evaluate(LAYOUT_JS, AT) + toolbar_problems(page)
    kept = {problem.split(AT)[0] for problem in lasting}
    for problem in found:
        if problem.split(AT)[0] not in kept:
            warnings.warn(f"{page.url}: a layout problem that went away {RECHECK_MS} ms later: {problem}", stacklevel=2)
    return lasting


def problems_on(page, where: str) -> list[str]:
    """The layout problems of the page as it is now, and in each of its tabs, each prefixed with ``where``."""
    open_everything(page)
    found = [f"{where}: {problem}" for problem in lasting_problems(page)]
    tabs = page.get_by_role("tab")
    for index in range(1, tabs.count()):
        tab = tabs.nth(index)
        name = tab.inner_text().strip()
        tab.click()
        open_everything(page)
        found += [f"{where}, tab {name!r}: {problem}" for problem in lasting_problems(page)]
    if tabs.count():
        tabs.nth(0).click()
    return found


TABLES_JS = """() => ({
  grids: document.querySelectorAll('[data-testid="stDataFrame"]').length,
  text: parseFloat(getComputedStyle(document.querySelector('[data-testid="stMarkdownContainer"] p')
    || document.body).fontSize),
  cells: [...document.querySelectorAll('[data-testid="stTable"] td')].map(cell => parseFloat(getComputedStyle(cell).fontSize)),
})"""


def projector_table_problems(page) -> list[str]:
    """In presentation mode a table's text is as large as the page's (the grid's canvas keeps 13 px and about ten
    rows), in every tab."""
    seen = page.evaluate(TABLES_JS)
    problems = [f"{seen['grids']} grid table(s), whose text stays at 13 px"] if seen["grids"] else []
    small = [size for size in seen["cells"] if size < 0.95 * seen["text"]]
    return problems + ([f"table text at {min(small)} px against the page's {seen['text']} px"] if small else [])


def check(page, url: str, width: int, present: bool, shots: Path | None = None) -> list[str]:
    """Open ``url`` in ``page`` at ``width`` px (presentation mode with ``present``) and return its problems."""
    page.set_viewport_size({"width": width, "height": HEIGHT})
    target = url + (("&" if "?" in url else "?") + "present=1" if present else "")
    page.goto(target)
    found = problems_on(page, f"{target.split('/', 3)[-1] or 'home'} at {width} px")
    if present:
        found += [f"{target} at {width} px: {problem}" for problem in projector_table_problems(page)]
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
        name = target.split("/", 3)[-1].replace("?", "_").replace("&", "_").replace("=", "-") or "home"
        # The app scrolls inside its main block, so a whole-page picture needs a window as tall as that block.
        tall = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
        page.set_viewport_size({"width": width, "height": min(max(tall, HEIGHT), SHOT_MAX_PX)})
        wait_until_drawn(page)
        page.screenshot(path=str(shots / f"{name}_{width}{'_present' if present else ''}.png"))
        page.set_viewport_size({"width": width, "height": HEIGHT})
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help='pages, as in the URL after the server\'s address ("" is home)')
    parser.add_argument("--widths", nargs="+", type=int, default=list(WIDTHS))
    parser.add_argument("--present", action="store_true", help="presentation mode (?present=1)")
    parser.add_argument("--shots", type=Path, help="save a full-page screenshot of each to this folder")
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent
    sys.path[:0] = [str(here), str(here.parent)]  # conftest, and the app's packages
    from conftest import CHROMIUM, running_app
    from playwright.sync_api import sync_playwright

    problems = []
    with running_app(tempfile.mkdtemp(prefix="symlab-layout-")) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page()
        page.set_default_timeout(60_000)
        for path in args.paths:
            for width in args.widths:
                found = check(page, f"{url}/{path}", width, args.present, args.shots)
                print(f"{path or 'home'} at {width} px: {len(found)} problem(s)", flush=True)
                problems += found
        browser.close()
    print("\n".join(problems) or "no problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
