"""The command line answers at once: ``symlab --help`` and every command's ``--help`` cost at most 0.5 CPU-s more
than ``python -c pass``, and neither they nor reading a page's link load numpy or torch (each lab's settings live in
a ``config`` module that needs neither; the computations load them when they run)."""

import resource
import subprocess
import sys

import pytest

from symlab.cli import build_parser

BUDGET_CPU_SECONDS = 0.5


def cpu_seconds(command: list[str]) -> float:
    """The least user + system CPU time of three runs of ``command`` (a subprocess, waited for)."""
    times = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(command, check=True, capture_output=True, timeout=120)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        times.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return min(times)


def commands() -> list[str]:
    return sorted(build_parser()._subparsers._group_actions[0].choices)


@pytest.mark.parametrize("command", ["", *commands()])
def test_help_costs_at_most_half_a_cpu_second_beyond_python_itself(command):
    python = cpu_seconds([sys.executable, "-c", "pass"])
    args = [command, "--help"] if command else ["--help"]
    spent = cpu_seconds([sys.executable, "-m", "symlab", *args])
    assert spent - python <= BUDGET_CPU_SECONDS, (
        f"symlab {' '.join(args)}: {spent:.2f} CPU-s, python alone {python:.2f}"
    )


def test_parsing_a_command_or_a_page_link_loads_no_numpy_or_torch():
    code = """
import sys
from symlab.cli import build_parser
from symlab.labs import LABS
from symlab.specs import settings
from symlab.specs.urlstate import parse_query
parser = build_parser()
for argv in (["modes", "--sigma", "2"], ["toy", "--alpha", "0.5"], ["mnist", "--hidden", "8"], ["align", "--depth", "1"],
             ["methods", "--epochs", "1"], ["symmetry", "perceptrons", "--nets", "10"], ["mnist-sweep", "--hidden", "8"]):
    parser.parse_args(argv)
hosting = settings.Hosting.from_env()
for lab in LABS:
    values, notices = parse_query({"seed": "3", "alpha": "x"}, lab.page_params(hosting))
    lab.page_presets()
print(sorted(name for name in sys.modules if name.split(".")[0] in ("numpy", "torch")))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
