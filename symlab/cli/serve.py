"""A class server from one command: ``symlab serve [--replicas N] [--warm]`` (symlab.serving.proxy), and ``symlab warm``,
the store warmed alone (before a class, or into a Docker volume)."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from symlab.cli.common import int_at_least
from symlab.serving import proxy
from symlab.specs.settings import check_lecturer_key


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve",
        help="serve the app to a class: a page process per core behind HAProxy (streamlit run serve.py: one process)",
        description=(
            "Start one page process (streamlit run serve.py) per core and, in front of them, HAProxy, which keeps "
            "each browser on one process by a cookie, checks each process's health and sends a browser whose "
            "process died to a live one; a process that dies is started again. They share the runs directory's "
            "result store. Needs HAProxy (apt-get install haproxy). Stops on Ctrl-C or SIGTERM."
        ),
    )
    p.add_argument(
        "--replicas",
        type=int_at_least(1, 64),
        default=None,
        help=f"page processes (default: one per core, here {proxy.default_replicas()})",
    )
    p.add_argument("--port", type=int_at_least(1, 65535), default=8501, help="the proxy's port (default 8501)")
    p.add_argument("--address", default="0.0.0.0", help="the proxy's address (default 0.0.0.0: every interface)")
    p.add_argument(
        "--first-page-port",
        type=int_at_least(1, 65535),
        default=8601,
        help="the first page process's port on 127.0.0.1; the others follow it (default 8601)",
    )
    p.add_argument(
        "--warm",
        action="store_true",
        help="before opening, compute what the idle pool would: every preset of every lab and each state one step "
        "of one control away from the default links and the presets, on every core, with a progress bar",
    )
    p.add_argument("--log-dir", default=None, help="each process's output in DIR/<name>.log (default: none)")
    p.set_defaults(run=_run_serve, format=_format_serve, json=False)

    w = subparsers.add_parser(
        "warm",
        help="compute what a class is likely to ask for into the result store, then exit (symlab serve --warm)",
        description=(
            "Compute into the runs directory's result store (or SYMLAB_DATABASE_URL's) what the idle pool would: "
            "every preset of every lab and each state one step of one control away from the default links and the "
            "presets, on every core, with a progress bar. Results stored already are not computed again."
        ),
    )
    w.add_argument("--json", action="store_true", help="print one JSON object instead of a line")
    w.set_defaults(run=_run_warm, format=_format_warm)


def _run_warm(args=None) -> dict:
    from symlab.serving import warmup  # the labs and numpy: --help and parsing need neither

    return warmup.warm_store(proxy.default_replicas(), progress=_progress_bar())


def _run_serve(args) -> dict:
    check_lecturer_key()  # before anything starts: a key a class could guess
    replicas = args.replicas or proxy.default_replicas()
    report: dict = {"replicas": replicas}
    if args.warm:
        report["warm"] = _run_warm()
        print(_format_warm(report["warm"]), file=sys.stderr, flush=True)
    say = lambda line: print(f"symlab serve: {line}", file=sys.stderr, flush=True)  # noqa: E731
    server = proxy.ClassServer(
        replicas,
        port=args.port,
        address=args.address,
        first_page_port=args.first_page_port,
        say=say,
        log_dir=Path(args.log_dir) if args.log_dir else None,
    )
    try:
        server.start()
        say(f"serving {server.url} with {replicas} page process{'es' if replicas > 1 else ''}; Ctrl-C stops it")
        stop = threading.Event()
        previous = {number: signal.signal(number, lambda *_: stop.set()) for number in (signal.SIGINT, signal.SIGTERM)}
        try:
            server.supervise(stop)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)
    finally:
        server.stop()
    report["restarts"] = server.restarts
    return report


def _progress_bar(width: int = 30):
    interactive = sys.stderr.isatty()
    shown = [-1]

    def progress(done: int, total: int) -> None:
        share = done / total if total else 1.0
        tenth = int(share * 10)
        if not interactive and tenth == shown[0] and done < total:
            return  # a log gets a line per tenth, a terminal one bar redrawn
        shown[0] = tenth
        bar = "#" * round(share * width)
        end = "\n" if done >= total or not interactive else ""
        print(f"\rwarming the result store [{bar:<{width}}] {done}/{total}", end=end, file=sys.stderr, flush=True)

    return progress


def _format_warm(warm: dict) -> str:
    failed = f", {warm['failed']} failed ({'; '.join(warm['failures'])})" if warm["failed"] else ""
    return (
        f"warmed in {warm['seconds']:g} s on {warm['workers']} workers: {warm['computed']} results computed, "
        f"{warm['stored_already']} of {warm['results']} stored or shipped already{failed}"
    )


def _format_serve(report: dict) -> str:
    processes = f"{report['replicas']} page process{'es' if report['replicas'] > 1 else ''}"
    return f"stopped: {processes}, {report['restarts']} started again"
