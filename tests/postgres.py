"""A throwaway PostgreSQL server for the tests: ``initdb`` in a temporary directory, started with
``pg_ctl`` on a free port and stopped at the end (Debian's ``postgresql`` package provides them).
PostgreSQL refuses to run as root, so under root the server runs as the ``postgres`` user.
:func:`stop_server` and :func:`start_server` take it down and bring it back on the same data and port, as a
restarted database server would be."""

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


class PostgresMissing(RuntimeError):
    pass


# A running server's URL -> how to start it: pg_ctl's path, its data directory, log and options.
_SERVERS: dict[str, tuple[Path, Path, Path, str]] = {}


def _bin_dir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise PostgresMissing("PostgreSQL's initdb was not found: apt-get install -y postgresql")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_server_user(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


@contextlib.contextmanager
def postgres_server():
    """Yields the URL of a fresh server's ``postgres`` database, as the trusted user ``symlab``."""
    bin_dir = _bin_dir()
    root = Path(tempfile.mkdtemp(prefix="symlab-pg-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sockets, "postgres")
    port = _free_port()
    log = root / "server.log"
    run = lambda *args: subprocess.run(
        _as_server_user([str(bin_dir / args[0]), *args[1:]]),
        check=True,  # noqa: E731
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=120,
    )
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    url = f"postgresql://symlab@127.0.0.1:{port}/postgres"
    try:
        run("initdb", "-D", str(data), "-A", "trust", "-U", "symlab", "--no-sync")
        run("pg_ctl", "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o", options, "start")
        _SERVERS[url] = (bin_dir / "pg_ctl", data, log, options)
        yield url
    finally:
        _SERVERS.pop(url, None)
        if (data / "postmaster.pid").exists():
            subprocess.run(
                _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=60,
            )
        shutil.rmtree(root, ignore_errors=True)


def _pg_ctl(server_url: str, *args: str) -> None:
    pg_ctl, data, log, options = _SERVERS[server_url]
    subprocess.run(
        _as_server_user([str(pg_ctl), "-D", str(data), "-l", str(log), "-w", "-t", "60", "-o", options, *args]),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        timeout=120,
    )


def stop_server(server_url: str) -> None:
    """Stop the server (a fast shutdown: open connections end at once), keeping its data."""
    _pg_ctl(server_url, "-m", "fast", "stop")


def start_server(server_url: str) -> None:
    """Start a stopped server again, on the same data directory and port."""
    _pg_ctl(server_url, "start")


def fresh_database(server_url: str, name: str) -> str:
    """A new empty database on the server; its URL."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}"')
        connection.execute(f'CREATE DATABASE "{name}"')
    return server_url.rsplit("/", 1)[0] + f"/{name}"
