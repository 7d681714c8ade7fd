"""benchmarks/bench_pages.py: each page's CPU per run in the page process, by kind of run."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_pages  # noqa: E402


def test_the_process_cpu_clock_counts_another_process_threads():
    import os
    import subprocess

    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ninput()",
        ],
        stdin=subprocess.PIPE,
    )
    try:
        import time

        time.sleep(1.0)
        assert 0.25 < bench_pages.process_cpu(child.pid) < 1.0
        assert bench_pages.process_cpu(os.getpid()) > 0
    finally:
        child.communicate(b"\n", timeout=10)


@pytest.mark.slow
def test_a_page_costs_are_measured_for_each_kind_of_run(capsys):
    results = bench_pages.main(["--pages", "modes", "--repeat", "2", "--play-seconds", "2", "--json"])
    row = results["pages"]["modes"]
    for kind in bench_pages.KINDS:  # modes has a control and a player: every kind is there
        assert row[kind]["count"] >= 1 and 0 < row[kind]["median_ms"] < 5000, (kind, row)
    assert results["rates"]["matmul_gflops"] > 1
    assert '"pages"' in capsys.readouterr().out
