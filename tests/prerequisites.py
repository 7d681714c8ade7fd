"""What the selected tests need beyond requirements.txt, found or installed before any of them runs.

- Chromium, for the browser tests (Playwright drives Debian's ``chromium``);
- PostgreSQL's ``initdb`` and ``pg_ctl``, for the throwaway database servers (Debian's ``postgresql``);
- HAProxy, the proxy in front of ``symlab serve``'s page processes (Debian's ``haproxy``);
- the fonts the out-of-distribution letters are rendered from (Debian's DejaVu and Liberation);
- the BNN libraries whose files the weights reader is tested on (``requirements-formats.txt``, installed
  with ``--no-deps``: their own requirements would bring torchvision and another torch).

What is missing is installed, in one line saying what and why: Debian packages with apt-get (as root), the
libraries with pip. Where that cannot be done (not root, no apt-get, or ``SYMLAB_TEST_INSTALL=0``), the run
stops before the first test with one line saying what to install, never a wall of failures.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from symlab.lib import glyphs

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = os.environ.get("SYMLAB_CHROMIUM", "/usr/bin/chromium")


@dataclass(frozen=True)
class Need:
    name: str  # what it is, in the one line
    why: str  # which tests
    fixtures: frozenset  # a test using one of these needs it
    present: object  # () -> bool
    debian: tuple = ()  # the packages that provide it
    pip: str | None = None  # or the requirements file that does


def _postgres_present() -> bool:
    return bool(glob.glob("/usr/lib/postgresql/*/bin/initdb")) or shutil.which("initdb") is not None


def _formats_present() -> bool:
    return all(importlib.util.find_spec(module) is not None for module in ("bayesian_torch", "blitz"))


NEEDS = (
    Need(
        "chromium",
        "the browser tests",
        frozenset({"browser", "page", "new_page", "server_url"}),
        lambda: Path(CHROMIUM).exists(),
        debian=("chromium",),
    ),
    Need(
        "postgresql",
        "the database tests",
        frozenset({"postgres_server_url"}),
        _postgres_present,
        debian=("postgresql",),
    ),
    Need(
        "haproxy",
        "the class server's tests (symlab serve)",
        frozenset({"class_server", "haproxy"}),
        lambda: shutil.which("haproxy") is not None or Path("/usr/sbin/haproxy").exists(),
        debian=("haproxy",),
    ),
    Need(
        "fonts",
        "the letters' rendering test",
        frozenset({"fonts_installed"}),
        lambda: all((glyphs.FONT_DIR / name).is_file() for name in glyphs.FONT_FILES),
        debian=("fonts-dejavu-core", "fonts-dejavu-extra", "fonts-liberation"),
    ),
    Need(
        "bayesian-torch and BLiTZ",
        "the BNN-format tests",
        frozenset({"bnn_libraries"}),
        _formats_present,
        pip="requirements-formats.txt",
    ),
)


def missing(fixture_names) -> list[Need]:
    """The needs of tests using ``fixture_names`` that this machine lacks."""
    used = set(fixture_names)
    return [need for need in NEEDS if need.fixtures & used and not need.present()]


def describe(needs: list[Need]) -> str:
    return ", ".join(f"{need.name} ({need.why})" for need in needs)


def install(needs: list[Need]) -> str | None:
    """Install ``needs``; None when done, else the one line that says why not and what to run."""
    packages = [package for need in needs for package in need.debian]
    requirements = [need.pip for need in needs if need.pip]
    hint = "; ".join(
        filter(
            None,
            [
                f"apt-get install -y {' '.join(packages)}" if packages else "",
                *(f"pip install --no-deps -r {file}" for file in requirements),
            ],
        )
    )
    if os.environ.get("SYMLAB_TEST_INSTALL", "1") == "0":
        return f"missing {describe(needs)}: install them ({hint}), or deselect those tests"
    if packages and (os.geteuid() != 0 or shutil.which("apt-get") is None):
        return (
            f"missing {describe(needs)}, and this is not root with apt-get to install them: {hint}"
            ' (or deselect those tests, e.g. -m "not slow")'
        )
    print(f"installing {describe(needs)}: {hint}", file=sys.__stderr__, flush=True)
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = ([["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]] if packages else []) + [
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-r", str(ROOT / file)] for file in requirements
    ]
    for step in steps:
        done = subprocess.run(step, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return f"could not install {describe(needs)}: `{' '.join(step)}` failed ({last})"
    still = [need for need in needs if not need.present()]
    return f"installed, but still missing {describe(still)}" if still else None
