"""Each lab page's CPU per run in the page process (the Streamlit server), one student at a time.

    python benchmarks/bench_pages.py [--repeat 7] [--pages modes,toy] [--local] [--json]

A server of its own (hosted, ``SYMLAB_HOSTED=1``, as a class's; ``--local`` without) and one protocol
session at a time (benchmarks/streamlit_protocol.py, no browser). For every page, with its shared results
already stored (each page is opened and its first control moved once before measuring):

* open: the default link, in a new session;
* rerun: the same state again (what a student's reload of the script, or a widget that changes nothing, costs);
* control: its first control moved one step, to a state whose result is stored (moving back and forth);
* tick: a frame of the page's player, played in the browser (pages with one): the page process's CPU for Play,
  a few seconds of play and Pause, over the frames played (the page runs at Play and at Pause alone).

CPU-ms is the server process's CPU clock (all its threads, ``clock_gettime`` on its process clock) from the
request sent to the end of the run it caused, the median over ``--repeat``; the computations a page waits for
run in worker processes and are not counted. Times are per run: a class of N students costs about
N × (requests per second per student) × these. The machine's rates (bench_interactions.py's three) come
first, measured in this process, to compare machines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from conftest import app_process  # noqa: E402
from streamlit_protocol import Session  # noqa: E402

from symlab.labs import LABS  # noqa: E402
from symlab.runs.device import measured_rates  # noqa: E402

PAGES = ("", *(lab.name for lab in LABS))  # "" is the home page
KINDS = ("open", "rerun", "control", "tick")
RESULT_TIMEOUT = 300.0  # a first computation of the page's (in the workers) before measuring


def process_cpu(pid: int) -> float:
    """Seconds of CPU the process ``pid`` has used, all its threads (living and ended) included."""
    return time.clock_gettime(((~pid) << 3) | 2)  # Linux's per-process CPU clock (CPUCLOCK_SCHED)


async def measured(pid: int, request) -> float | None:
    """CPU-ms of the page process from sending a request to the end of its run (None: no answer)."""
    before = process_cpu(pid)
    answered = await request
    return None if answered is None else (process_cpu(pid) - before) * 1000


async def settled(session: Session) -> None:
    """Until the page shows the result of what the last request asked for (computed by the workers)."""
    if session.awaiting is not None:
        await session.result(RESULT_TIMEOUT)
    await asyncio.sleep(0.2)


async def page_costs(url: str, pid: int, page: str, repeat: int, play_seconds: float) -> dict:
    rows = {kind: [] for kind in KINDS}
    warm = Session(url, timeout=RESULT_TIMEOUT)
    await warm.connect()
    try:
        await warm.open(page)
        await settled(warm)
        control = warm.controls()[0] if warm.controls() else None
        if control is not None:  # store the result one step away, then walk between the two states
            home_value = control.value
            await warm.set_widget(control, step_from(control))
            await settled(warm)
            await warm.set_widget(control, home_value)
            await settled(warm)
    finally:
        await warm.close()
    for _ in range(repeat):
        session = Session(url, timeout=RESULT_TIMEOUT)
        await session.connect()
        try:
            rows["open"].append(await measured(pid, session.open(page)))
            await settled(session)
            rows["rerun"].append(await measured(pid, session.request("widget", session.rerun_message())))
            await settled(session)
            control = session.controls()[0] if session.controls() else None
            if control is not None:
                rows["control"].append(await measured(pid, session.set_widget(control, step_from(control))))
                await settled(session)
        finally:
            await session.close()
    rows["tick"] = await tick_costs(url, pid, page, play_seconds)
    return {kind: summary([v for v in values if v is not None]) for kind, values in rows.items()}


async def tick_costs(url: str, pid: int, page: str, seconds: float) -> list[float]:
    """CPU-ms per frame of the page's player: the page process's CPU for Play, ``seconds`` of play in the browser
    and Pause, over the frames played."""
    session = Session(url, timeout=RESULT_TIMEOUT)
    await session.connect()
    try:
        await session.open(page)
        await settled(session)
        player = session.player()
        if player is None:
            return []
        before = process_cpu(pid)
        await session.play(player, True)
        await asyncio.sleep(seconds)
        frames = min(round(seconds * 1000 / player.data["interval_ms"]), player.data["frames"] - 1)
        await session.play(player, False, frames)
        spent = (process_cpu(pid) - before) * 1000
        return [spent / max(frames, 1)]
    finally:
        await session.close()


def step_from(widget):
    """The widget's value one step up (down at the top of its range)."""
    proto, step = widget.proto, widget.proto.step or 1
    if widget.kind == "slider":
        value = widget.value[0] + step if widget.value[0] + step <= proto.max else widget.value[0] - step
        return [value, *widget.value[1:]]
    return widget.value + step if widget.value + step <= proto.max else widget.value - step


def summary(values: list[float]) -> dict:
    return dict(
        count=len(values), median_ms=statistics.median(values) if values else None, min_ms=min(values, default=None)
    )


def report(results: dict) -> str:
    machine = ", ".join(f"{k} {v:.3g}" for k, v in results["rates"].items())
    out = [
        f"Page CPU per run (ms, median of {results['repeat']}; the page process only), "
        f"{'hosted' if results['hosted'] else 'local'} server; machine: {machine}",
        f"{'page':<10} " + " ".join(f"{kind:>9}" for kind in KINDS),
    ]
    for page, row in results["pages"].items():
        cells = [
            f"{row[kind]['median_ms']:9.1f}" if row[kind]["median_ms"] is not None else f"{'—':>9}" for kind in KINDS
        ]
        out.append(f"{page or 'home':<10} " + " ".join(cells))
    return "\n".join(out)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--pages", help="comma-separated url paths (home, modes, toy, …; default: all)")
    parser.add_argument("--local", action="store_true", help="a local server's settings, not a class's")
    parser.add_argument("--play-seconds", type=float, default=6.0, help="seconds of play for the tick figure")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    pages = PAGES if not args.pages else tuple("" if p == "home" else p for p in args.pages.split(","))
    unknown = set(pages) - set(PAGES)
    if unknown:
        parser.error(f"unknown pages {sorted(unknown)}; choose from home, {', '.join(PAGES[1:])}")
    results = dict(rates=measured_rates().in_units(), hosted=not args.local, repeat=args.repeat, pages={})
    env = {} if args.local else {"SYMLAB_HOSTED": "1"}
    with app_process(env) as (url, process):
        for page in pages:
            print(f"/{page} …", file=sys.stderr, flush=True)
            results["pages"][page] = asyncio.run(page_costs(url, process.pid, page, args.repeat, args.play_seconds))
    print(json.dumps(results) if args.json else report(results))
    return results


if __name__ == "__main__":
    main()
