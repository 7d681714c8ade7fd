"""Hostile uploads against a hosted server, in Chromium: what each one costs the server and what the page says.

    python benchmarks/upload_attacks.py                     # every case, this checkout, SYMLAB_HOSTED=1
    python benchmarks/upload_attacks.py --root /tmp/other   # another checkout of SymLab (before and after)
    python benchmarks/upload_attacks.py --cases stride0,class --students 8 --json

Each case starts from the server as the previous one left it, in a fresh browser context (a new student),
and uploads its file(s) on the page that reads networks (/symmetry?part=network; /align?source=files for
pairs). It waits until the page shows a result, an error or an exception (at most --timeout seconds) and
reports: the first line of what the page showed, the seconds it took, the peak resident memory of the
server's own process and of everything it started (workers) while the case ran, and the server's memory
afterwards. "class": --students contexts each upload a 16 MB network (784 → 5 000 → 10) at once, then leave;
the server's memory is read again --leave-wait seconds later (Streamlit drops a closed session's state and
files 120 s after its websocket closes), after one more visitor has come and gone. Memory comes from /proc
(VmRSS), sampled every 0.1 s.

--memory-limit-gib puts the server and everything it starts in a memory cgroup of that size (as root, cgroup
v1), so that an attack that would take the machine's memory kills the server alone; a server that died is
started again for the next case.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import hostile_files  # noqa: E402
from conftest import CHROMIUM, CHROMIUM_ARGS, app_process  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402
from process_memory import MemorySampler, descendants  # noqa: E402

MiB = 2**20
WIDE_UNITS = 5000  # 784 → 5 000 → 10, float32: 16 MB
# Settled: the page idle with a message or the analysis's table; for a pair, with the table or an error (each file's
# own message comes as it arrives, before the pair is read).
OUTCOME_JS = """(pair) => {
  const shown = [...document.querySelectorAll('[data-testid="stException"], [data-testid="stAlert"]')]
    .map(e => e.innerText.trim()).filter(t => !t.includes('An uploaded network cannot live in a link'));
  const table = document.querySelector('[data-testid="stTable"]');
  const failed = document.querySelector('[data-testid="stException"]') || shown.some(t => t.startsWith('error'));
  const idle = document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]')
    && !document.querySelector('[data-testid="stStatusWidget"]');
  return idle && (pair ? (table || failed) : (shown.length || table)) ? (shown.join(' | ') || 'analysed') : null;
}"""


def build_files(directory: Path, bomb_bytes: int) -> dict[str, list[Path]]:
    """Each case's upload(s), written once into ``directory``."""

    def written(name: str, make) -> Path:
        path = directory / name
        if not path.exists():
            path.write_bytes(make())
        return path

    wide = written("wide.pt", lambda: hostile_files.wide_network(WIDE_UNITS, seed=0))
    return {
        "stride0": [written("stride0.pt", hostile_files.stride_zero_view)],
        "overlap": [written("overlap.pt", hostile_files.overlapping_view)],
        "deflate": [written("deflate.pt", lambda: hostile_files.deflated(bomb_bytes))],
        "chain": [written("chain.pt", hostile_files.deep_chain)],
        "nohidden": [written("nohidden.pt", hostile_files.no_hidden_units)],
        "markup": [written(hostile_files.MARKUP_NAME, hostile_files.small_network)],
        "wide": [wide],
        "wide_pair": [wide, written("wide_b.pt", lambda: hostile_files.wide_network(WIDE_UNITS, seed=1))],
        "class": [wide],
    }


def outcome(page, timeout_s: float, alive: Callable[[], bool], pair: bool = False) -> str:
    """What the page shows once its run has ended with a result or a message; or why there is none."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not alive():
            return "no answer: the server died"
        try:
            page.wait_for_function(OUTCOME_JS, arg=pair, timeout=2000, polling=500)
            return page.evaluate(OUTCOME_JS, pair).replace("\n", " ")[:160]
        except Exception:  # noqa: BLE001 (not yet)
            continue
    return f"no answer within {timeout_s:.0f} s"


def upload_and_wait(page, url: str, paths: list[Path], timeout_s: float, alive) -> str:
    pairs = len(paths) == 2
    page.goto(f"{url}/align?source=files" if pairs else f"{url}/symmetry?part=network")
    page.wait_for_selector('[data-testid="stFileUploader"] input[type="file"]', state="attached", timeout=60_000)
    for label, path in zip(("Network A", "Network B") if pairs else ("Your network",), paths):
        uploader = page.locator('[data-testid="stFileUploader"]').filter(has=page.get_by_text(label, exact=True))
        uploader.locator('input[type="file"]').set_input_files(str(path))
        time.sleep(1.0)  # the upload's own run starts before the next
    return outcome(page, timeout_s, alive, pairs)


def run_case(browser, url: str, sampler: MemorySampler, name: str, paths: list[Path], args, alive) -> dict:
    students = args.students if name == "class" else 1
    contexts = [browser.new_context(viewport={"width": 1400, "height": 1000}) for _ in range(students)]
    sampler.reset()
    start_mib = sampler.now()[0]
    started = time.monotonic()
    outcomes: list[str] = []
    try:
        pages = [context.new_page() for context in contexts]
        for page in pages:
            page.set_default_timeout(60_000)
        if students == 1:
            outcomes.append(upload_and_wait(pages[0], url, paths, args.timeout, alive))
        else:
            outcomes = concurrent_uploads(pages, url, paths, args.timeout, alive)
    finally:
        seconds = time.monotonic() - started
        peaks = sampler.peak_server, sampler.peak_all
        for context in contexts:
            context.close()
    row = {
        "case": name,
        "file_kb": round(sum(path.stat().st_size for path in paths) / 1024, 1),
        "students": students,
        "outcome": outcomes[0] if len(set(outcomes)) == 1 else " / ".join(outcomes),
        "seconds": round(seconds, 1),
        "server_start_mib": round(start_mib),
        "server_peak_mib": round(peaks[0]),
        "all_peak_mib": round(peaks[1]),
    }
    if name == "class":
        time.sleep(args.leave_wait)
        latecomer(browser, url)
    row["server_after_mib"], row["all_after_mib"] = (round(value) for value in sampler.now())
    return row


def latecomer(browser, url: str) -> None:
    """A visitor after the class has gone: a page run, then a closed tab (a server sees to sessions that left as it
    serves the next ones)."""
    context = browser.new_context()
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=60_000)
    context.close()
    time.sleep(3.0)


def concurrent_uploads(pages, url: str, paths: list[Path], timeout_s: float, alive) -> list[str]:
    """Every page uploads at once (Playwright's sync API is one thread: the uploads are started, then awaited)."""
    for page in pages:
        page.goto(f"{url}/symmetry?part=network")
    for page in pages:
        page.wait_for_selector('[data-testid="stFileUploader"] input[type="file"]', state="attached")
    for page in pages:
        page.locator('[data-testid="stFileUploader"] input[type="file"]').set_input_files(str(paths[0]))
    deadline = time.monotonic() + timeout_s
    return [outcome(page, max(deadline - time.monotonic(), 1), alive) for page in pages]


class MemoryCgroup:
    """A cgroup v1 memory controller group of ``limit`` bytes holding the server and what it starts."""

    ROOT = Path("/sys/fs/cgroup/memory")

    def __init__(self, limit: int):
        self.path = self.ROOT / f"symlab-upload-attacks-{os.getpid()}"
        self.path.mkdir(exist_ok=True)
        (self.path / "memory.limit_in_bytes").write_text(str(limit))

    def hold(self, pid: int) -> None:
        for member in (pid, *descendants(pid)):
            (self.path / "cgroup.procs").write_text(str(member))

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="the SymLab checkout to serve (default: this one)")
    parser.add_argument("--cases", default="stride0,overlap,deflate,chain,nohidden,markup,wide,wide_pair,class")
    parser.add_argument("--students", type=int, default=8, help="uploads at once in the class case (default 8)")
    parser.add_argument("--timeout", type=float, default=420.0, help="seconds to wait for a page's answer")
    parser.add_argument("--leave-wait", type=float, default=150.0, help="seconds after the class left (default 150)")
    parser.add_argument("--bomb-gib", type=float, default=6.0, help="what the DEFLATE file expands to (GiB)")
    parser.add_argument("--files", type=Path, default=Path(tempfile.gettempdir()) / "symlab-upload-attacks")
    parser.add_argument("--memory-limit-gib", type=float, help="the server's memory, as a cgroup (default: none)")
    parser.add_argument(
        "--session-ttl",
        type=int,
        default=120,
        help="seconds Streamlit keeps a closed session (server.disconnectedSessionTTL, default 120)",
    )
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="more server settings")
    parser.add_argument("--json", action="store_true", help="one JSON line per case instead of the table")
    return parser


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    rows = attack(args)
    if not args.json:
        print_table(rows)
    return 0


def attack(args) -> list[dict]:
    """Every case of ``args.cases`` against a hosted server (started again where one died): a row each."""
    args.files.mkdir(parents=True, exist_ok=True)
    files = build_files(args.files, int(args.bomb_gib * 2**30))
    cases = [name.strip() for name in args.cases.split(",") if name.strip()]
    env = {
        "SYMLAB_HOSTED": "1",
        "SYMLAB_RUNS_DIR": tempfile.mkdtemp(prefix="symlab-attack-runs-"),
        "SYMLAB_IDLE_WORKERS": "0",
        "STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL": str(args.session_ttl),
        **dict(item.split("=", 1) for item in args.env),
    }
    cgroup = MemoryCgroup(int(args.memory_limit_gib * 2**30)) if args.memory_limit_gib else None
    rows = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=CHROMIUM_ARGS,
            )
            while cases:
                rows += serve_cases(browser, cases, files, env, cgroup, args)
            browser.close()
    finally:
        if cgroup:
            cgroup.remove()
    return rows


def serve_cases(browser, cases: list[str], files: dict, env: dict, cgroup, args) -> list[dict]:
    """Run ``cases`` in order on one server, taking each off the list, until they are done or the server dies;
    their rows."""
    rows = []
    with app_process(env, root=args.root) as (url, process):
        if cgroup:
            cgroup.hold(process.pid)
        sampler = MemorySampler(process.pid)
        sampler.start()
        print(
            f"server {url} (pid {process.pid}) from {args.root}: {sampler.now()[0]:.0f} MiB at start",
            file=sys.stderr,
            flush=True,
        )
        while cases:
            name = cases.pop(0)
            row = run_case(browser, url, sampler, name, files[name], args, lambda: process.poll() is None)
            if process.poll() is not None:
                row["outcome"] = f"server killed (exit {process.returncode}); page: {row['outcome']}"
            rows.append(row)
            print(json.dumps(row), file=sys.stdout if args.json else sys.stderr, flush=True)
            if process.poll() is not None:
                break
        sampler.stopped.set()
    return rows


def print_table(rows: list[dict]) -> None:
    print(f"\n{'case':10} {'file':>9} {'s':>6} {'server: start':>13} {'peak':>8} {'after':>8} {'all peak':>9}  outcome")
    for row in rows:
        print(
            f"{row['case']:10} {row.get('file_kb', 0):>7.0f}KB {row.get('seconds', 0):>6.1f} "
            f"{row.get('server_start_mib', 0):>10}MiB {row.get('server_peak_mib', 0):>5}MiB "
            f"{row.get('server_after_mib', 0):>5}MiB {row.get('all_peak_mib', 0):>6}MiB  {row['outcome']}"
        )


if __name__ == "__main__":
    sys.exit(main())
