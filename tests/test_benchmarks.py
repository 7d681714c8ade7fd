"""Every script in benchmarks/ at its smallest setting, run as a user runs it, so none rots unseen.

Each prints one JSON line last (``--json``), with the machine's rates measured in the same process; the test reads
it and checks the keys its docstring promises. The scripts the other bench tests run (first load, interactions,
MNIST, pages, the load test and its protocol client, the GPU check, the symmetrisation study, the upload attacks)
are not repeated here; the two helpers the load test starts (counted_serve.py, streamlit_protocol.py) run in its
test.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from symlab.specs.tasks import Rates

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
RATES = {"matmul_gflops", "elements_g_per_s", "normals_m_per_s"}
RAW_RATES = {"matmul_flops", "elementwise", "normals"}  # bench_run_cost and bench_surfaces report them unscaled

pytestmark = pytest.mark.slow


def run_benchmark(script: str, *args: str, timeout: float = 300) -> dict:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    rates = report["rates"]
    assert set(rates) in (RATES, RAW_RATES) and all(value > 0 for value in rates.values()), rates
    return report


def test_the_rates_read_as_the_benchmarks_print_them():
    rates = Rates(matmul_flops=66e9, elementwise=3.0e9, normals=138e6)
    assert rates.in_units() == pytest.approx(dict(matmul_gflops=66.0, elements_g_per_s=3.0, normals_m_per_s=138.0))
    assert rates.described() == ("machine, one thread: 66 GFLOP/s in products, 3.00 G elements/s, 138 M normal draws/s")


def test_bench_align_smoke():
    [row] = run_benchmark("bench_align.py", "--smoke", "--json")["rows"]
    assert (row["width"], row["depth"], row["ratio_to_smallest"]) == (16, 1, 1.0)
    assert row["same"] is True and row["speedup"] > 0 and row["w2_after"] <= row["w2_before"]


def test_bench_blocks_smoke():
    report = run_benchmark("bench_blocks.py", "--smoke")
    assert (report["images"], report["rounds"], report["steps"]) == (512, 1, 2)
    for state in ("start", "trained"):
        for variant in ("blocks_b2", "blocks_b4", "infonce_k16"):
            assert report[f"{variant}_over_mfvi_{state}"] > 0
            assert 0 <= report[f"{variant}_active_{state}"] <= 1


def test_bench_cluster_smoke():
    report = run_benchmark("bench_cluster.py", "--runs", "2", "--json")
    assert report["runs"] == 2 and report["total_ratio"] > 0 and report["overhead_ratio"] > 0


def test_bench_modes_smoke():
    report = run_benchmark("bench_modes.py", "--smoke", "--json")
    assert (report["mc_steps"], report["mc_samples"]) == (20, 100)
    # The exact threshold against the coarse reference (bisected to 0.2 at the smallest setting): near 5σ.
    assert abs(report["exact_threshold"] - 5.0) < 0.5 and report["exact_threshold_error"] < 0.2
    assert report["mc_over_exact_curve"] > 0 and report["slider_median_ms"] > 0


def test_bench_reference_smoke():
    report = run_benchmark("bench_reference.py", "--smoke", "--json")
    assert report["images"] == 256 and [row["networks"] for row in report["rows"]] == [2, 2]
    assert all(row["speedup_vs_stack_of_one"] > 0 and row["speedup_vs_module_loop"] > 0 for row in report["rows"])


def test_bench_run_cost_smoke():
    report = run_benchmark("bench_run_cost.py", "--rows", "every 1 of 20 epochs", "--json")
    [row] = report["rows"]
    assert row["row"] == "every 1 of 20 epochs" and row["cpu_s"] > 0 and row["estimated_s"] > 0
    assert row["ratio"] == pytest.approx(row["cpu_s"] / row["estimated_s"]) and isinstance(row["within"], bool)


def test_bench_surfaces_smoke():
    report = run_benchmark("bench_surfaces.py", "--repeat", "1", "--json")
    assert [row["lab"] for row in report["rows"]] == ["toy", "modes", "align"]
    for row in report["rows"]:
        assert row["first_frame_bytes"] > 0 and row["landscape_frame_bytes"] > 0
        assert row["compute_ratio"] >= 0 and row["frame_ratio"] > 0


def test_bench_symmetry_smoke():
    report = run_benchmark("bench_symmetry.py", "--smoke", "--json")
    assert report["perceptrons"]["loop"]["nets"] == 4 and [r["nets"] for r in report["perceptrons"]["batched"]] == [200]
    assert [row["shape"] for row in report["min_mass"]] == ["784-16-10", "784-16-16-10"]
    assert all(row["same_mass"] for row in report["min_mass"])


def test_bench_toy_smoke():
    report = run_benchmark("bench_toy.py", "--smoke", "--json")
    assert report["batched_runs"] == 4 and report["live_frames"] == 4
    assert report["exact_posterior_ms"] > 0 and report["live_bytes"] > 0 and report["table_over_one_start"] > 0


@pytest.mark.browser
def test_bench_toy_live_smoke(browser):
    report = run_benchmark("bench_toy_live.py", "--seconds", "2", "--json")
    [app] = report["apps"].values()
    assert report["seconds"] == 2 and app["ticks_per_s"] > 0 and len(app["titles"]) == len(app["per_s"]) == 4
