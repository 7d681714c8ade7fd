"""benchmarks/bench_mnist.py at its smallest setting: a thousand images, one round, the ratios and the rates."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_mnist  # noqa: E402

pytestmark = pytest.mark.slow


def test_the_epoch_ratios_come_with_the_machines_rates(capsys):
    summary = bench_mnist.main(
        ["--images", "1024", "--rounds", "1", "--accuracy-seeds", "0", "--estimator-draws", "0", "--threads", "1"]
        + ["--json"]
    )
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == json.loads(json.dumps(summary)) and summary["images"] == 1024
    for ratio in ("mfvi_over_deterministic", "sgm8_over_mfvi", "sgm64_over_mfvi", "mfvi_adam_over_deterministic"):
        assert 0.2 < summary[ratio] < 50, ratio  # each variant trained its epoch and was timed
    assert summary["mfvi_over_bayesian_torch"] is None or summary["mfvi_over_bayesian_torch"] > 0
    assert 0.2 < summary["sgm8_adam_over_mfvi_adam"] < 50
    assert summary["rates"]["matmul_gflops"] > 0 and summary["rates"]["elements_g_per_s"] > 0
