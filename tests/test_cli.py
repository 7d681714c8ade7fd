"""The headless twin, run as a user would: ``python -m symlab ...``."""

import json
import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "symlab", *args], capture_output=True, text=True, timeout=300)


def test_help_lists_the_labs():
    result = run("--help")
    assert result.returncode == 0 and "modes" in result.stdout


def test_modes_json_reports_threshold_near_two_and_a_half():
    result = run("modes", "--sigma", "0.5", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for key in ("sigma", "alphas", "interpolation", "det_cov", "kl", "threshold"):
        assert key in report
    assert len(report["alphas"]) == len(report["interpolation"]) == len(report["kl"]) == 100
    assert report["threshold"] == pytest.approx(2.5, rel=0.05)
    assert report["interpolation"][0] is None  # α = 0: undefined, not NaN in JSON


def test_modes_table_is_readable():
    result = run("modes", "--sigma", "1", "--points", "6")
    assert result.returncode == 0
    assert "threshold α*" in result.stdout and len(result.stdout.splitlines()) == 9


def test_modes_mc_protocol_json():
    result = run("modes", "--sigma", "1", "--protocol", "mc", "--points", "3", "--alpha-max", "8",
                 "--samples", "500", "--steps", "300", "--dim", "3", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["protocol"] == "mc-diag" and report["dim"] == 3
    assert report["interpolation"][1] == pytest.approx(0.5, abs=0.05)  # α = 4: between the modes
    assert report["interpolation"][2] < 0.05  # α = 8: on one mode


@pytest.mark.parametrize("args", [
    ["modes"],
    ["modes", "--sigma", "abc"],
    ["modes", "--sigma", "-1"],
    ["modes", "--sigma", "nan"],
    ["modes", "--sigma", "1", "--points", "1"],
    ["modes", "--sigma", "1", "--protocol", "magic"],
    ["modes", "--sigma", "1", "--alpha-max", "inf"],
    ["nolab"],
    [],
])
def test_bad_arguments_give_a_message_not_a_traceback(args):
    result = run(*args)
    assert result.returncode == 2
    assert "error" in result.stderr and "Traceback" not in result.stderr


def test_toy_single_run_json():
    result = run("toy", "--alpha", "0.5", "--method", "sgm", "--mi", "infonce", "--K", "4", "--seed", "1",
                 "--steps", "200", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for key in ("elbo", "test_mse", "log_evidence", "mu", "sigma"):
        assert key in report
    assert report["method"] == "sgm" and report["config"]["K"] == 4 and len(report["mu"]) == 2
    assert report["elbo"] <= report["log_evidence"] + 0.05


def test_toy_table_json():
    result = run("toy", "--table", "--alphas", "0.5,1", "--seeds", "2", "--steps", "100", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["table"]
    assert [(r["alpha"], r["method"]) for r in rows] == [(0.5, "mfvi"), (0.5, "sgm"), (1.0, "mfvi"), (1.0, "sgm")]
    assert all(r["seeds"] == 2 and r["elbo_std"] >= 0 for r in rows)


@pytest.mark.parametrize("args", [
    ["toy", "--alpha", "-1"], ["toy", "--method", "hmc"], ["toy", "--K", "1"], ["toy", "--alphas", "a,b"],
    ["toy", "--noise", "0"], ["toy", "--table", "--seeds", "0"],
])
def test_toy_bad_arguments(args):
    result = run(*args, "--steps", "5")
    assert result.returncode == 2
    assert "error" in result.stderr and "Traceback" not in result.stderr


def test_mnist_json_trains_registers_and_reports(tmp_path):
    result = run("mnist", "--hidden", "16", "--method", "sgm", "--K", "4", "--epochs", "2", "--train-subset", "1000",
                 "--samples", "2", "--runs-dir", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for key in ("run_id", "status", "test_acc", "test_nll", "test_ece", "train_elbo", "train_elbo_sym",
                "mutual_info", "history", "device"):
        assert key in report
    assert report["status"] == "finished" and len(report["history"]) == 2 and report["test_acc"] > 0.3
    from symlab.runs import Registry

    assert Registry(tmp_path).get(report["run_id"]).source == "cli"  # the app lists it too


def test_mnist_sweep_prints_table_one(tmp_path):
    result = run("mnist-sweep", "--hidden", "8,16", "--methods", "mfvi,sgm", "--K", "4", "--seeds", "2",
                 "--epochs", "1", "--train-subset", "500", "--samples", "2", "--runs-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Test accuracy by width")
    assert sum(" MFVI " in line or "SGM K=4" in line for line in lines) == 4
    assert all("±" in line for line in lines if " MFVI " in line or "SGM K=4" in line)


def test_mnist_errors_are_messages_not_tracebacks(tmp_path):
    for args, message in ((("--method", "adam"), "invalid choice"),
                          (("--hidden", "0"), "must be >= 1"),
                          (("--data-dir", str(tmp_path / "none"), "--epochs", "1"), "does not exist")):
        result = run("mnist", *args, "--runs-dir", str(tmp_path / "runs"))
        assert result.returncode != 0 and message in result.stderr and "Traceback" not in result.stderr
    result = run("mnist-data")
    assert result.returncode == 0 and "all four files verified" in result.stdout
