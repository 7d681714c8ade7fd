"""The headless twin, run as a user would: ``python -m symlab ...``."""

import json
import math
import subprocess
import sys

import pytest
from mnist_runs import small_sweep

from symlab.labs import run_kinds
from symlab.labs.toy import experiment as toy

pytestmark = pytest.mark.slow


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
    result = run(
        "modes",
        "--sigma",
        "1",
        "--protocol",
        "mc",
        "--points",
        "3",
        "--alpha-max",
        "8",
        "--samples",
        "500",
        "--steps",
        "300",
        "--dim",
        "3",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["protocol"] == "mc-diag" and report["dim"] == 3
    assert report["interpolation"][1] == pytest.approx(0.5, abs=0.05)  # α = 4: between the modes
    assert report["interpolation"][2] < 0.05  # α = 8: on one mode


@pytest.mark.parametrize(
    "args",
    [
        ["modes", "--sigma", "abc"],
        ["modes", "--sigma", "-1"],
        ["modes", "--sigma", "nan"],
        ["modes", "--sigma", "1", "--points", "1"],
        ["modes", "--sigma", "1", "--protocol", "magic"],
        ["modes", "--sigma", "1", "--alpha-max", "inf"],
        ["nolab"],
        [],
    ],
)
def test_bad_arguments_give_a_message_not_a_traceback(args):
    result = run(*args)
    assert result.returncode == 2
    assert "error" in result.stderr and "Traceback" not in result.stderr


def test_toy_single_run_json():
    result = run(
        "toy",
        "--alpha",
        "0.5",
        "--method",
        "sgm",
        "--mi",
        "infonce",
        "--K",
        "4",
        "--seed",
        "1",
        "--steps",
        "200",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for key in ("elbo", "test_mse", "exact_test_mse", "log_evidence", "mu", "sigma", "outcome", "notice", "starts"):
        assert key in report
    assert report["method"] == "sgm" and report["config"]["K"] == 4 and len(report["mu"]) == 2
    assert report["elbo"] <= report["log_evidence"]
    assert report["restarts"] == len(report["starts"]) == 4 and [s["start"] for s in report["starts"]] == [1, 2, 3, 4]
    assert report["elbo"] == max(s["elbo"] for s in report["starts"])
    assert report["outcome"] in toy.OUTCOMES and report["exact_test_mse"] > 0


def test_toy_names_a_stuck_fit_in_json_and_in_the_table():
    result = run("toy", "--alpha", "3", "--seed", "11", "--restarts", "1", "--json")
    report = json.loads(result.stdout)
    assert report["outcome"] == toy.STUCK and report["stuck_starts"] == 1
    assert report["notice"] == toy.stuck_notice("use another --seed or raise --restarts")
    origin = json.loads(
        run("toy", "--alpha", "3", "--seed", "11", "--init", "origin", "--steps", "1000", "--json").stdout
    )
    assert origin["stuck_starts"] == 4 and "--init random" in origin["notice"]  # its starts differ only in noise
    assert report["test_mse"] > 5 * report["exact_test_mse"]
    readable = run("toy", "--alpha", "3", "--seed", "11", "--restarts", "1", "--steps", "1000").stdout
    assert "NOTE: both units on one side" in readable and "exact posterior's 0.37" in readable


def test_toy_table_json():
    result = run("toy", "--table", "--alphas", "0.5,1", "--seeds", "2", "--steps", "100", "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["table"]
    assert [(r["alpha"], r["method"]) for r in rows] == [(0.5, "mfvi"), (0.5, "sgm"), (1.0, "mfvi"), (1.0, "sgm")]
    assert all(r["seeds"] == 2 and r["elbo_std"] >= 0 for r in rows)


@pytest.mark.parametrize(
    "args",
    [
        ["toy", "--alpha", "-1"],
        ["toy", "--method", "hmc"],
        ["toy", "--K", "1"],
        ["toy", "--alphas", "a,b"],
        ["toy", "--noise", "0"],
        ["toy", "--table", "--seeds", "0"],
    ],
)
def test_toy_bad_arguments(args):
    result = run(*args, "--steps", "5")
    assert result.returncode == 2
    assert "error" in result.stderr and "Traceback" not in result.stderr


def test_mnist_json_trains_registers_and_reports(tmp_path):
    result = run(
        "mnist",
        "--hidden",
        "16",
        "--method",
        "sgm",
        "--K",
        "4",
        "--epochs",
        "2",
        "--train-subset",
        "1000",
        "--samples",
        "2",
        "--runs-dir",
        str(tmp_path),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for key in (
        "run_id",
        "status",
        "test_acc",
        "test_nll",
        "test_ece",
        "train_elbo",
        "train_elbo_sym",
        "mutual_info",
        "history",
        "device",
    ):
        assert key in report
    # Chance is 0.1; 16 steps whose rate falls to 0 on the cosine schedule reach 0.22 (seed 0).
    assert report["status"] == "finished" and len(report["history"]) == 2 and report["test_acc"] > 0.15
    from symlab.runs.registry import Registry

    assert Registry(run_kinds(), tmp_path).get(report["run_id"]).source == "cli"  # the app lists it too


def test_mnist_blocks_json_has_the_symmetrisation_keys(tmp_path):
    result = run(
        "mnist",
        "--hidden",
        "8",
        "--method",
        "sgm",
        "--mi",
        "blocks",
        "--block-size",
        "4",
        "--epochs",
        "2",
        "--train-subset",
        "500",
        "--samples",
        "2",
        "--init-sd",
        "0.5",
        "--runs-dir",
        str(tmp_path),
        "--json",
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["mi_estimator"] == "blocks" and report["mi_trained"] is True
    assert report["log_group_size"] == pytest.approx(2 * math.log(24))  # two blocks of 4
    assert 0 <= report["mutual_info"] <= report["log_group_size"] and 0 <= report["mi_active"] <= 1
    assert 0 < report["nearest_unit_kl_min"] <= report["nearest_unit_kl_median"]
    assert isinstance(report["units_at_prior"], int)
    assert all("nearest_unit_kl_min" in epoch and "block_mi" in epoch for epoch in report["history"])
    table = run(
        "mnist",
        "--hidden",
        "8",
        "--epochs",
        "1",
        "--train-subset",
        "300",
        "--samples",
        "2",
        "--runs-dir",
        str(tmp_path),
    )
    assert table.returncode == 0 and "J min" in table.stdout and "measured on q, not trained on" in table.stdout


def test_mnist_sweep_prints_table_one(tmp_path):
    result = run(*small_sweep(seeds=2), "--runs-dir", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # One epoch on 500 images at width 8 leaves the networks near chance: the table says so first.
    assert lines[0].startswith("NOT TRAINED: The MFVI runs of width 8 classify")
    assert lines[1].startswith("Test accuracy by width")
    rows = [line for line in lines[2:] if " MFVI " in line or "SGM K=4" in line]
    assert len(rows) == 4 and all("±" in line for line in rows)


def test_mnist_errors_are_messages_not_tracebacks(tmp_path):
    for args, message in (
        (("--method", "adam"), "invalid choice"),
        (("--hidden", "0"), "'0' must be a whole number in [1, "),
        (("--block-size", "6"), "'6' must be a whole number in [2, 5]"),
        (("--mi", "exact"), "invalid choice"),
        (("--data-dir", str(tmp_path / "none"), "--epochs", "1"), "does not exist"),
    ):
        result = run("mnist", *args, "--runs-dir", str(tmp_path / "runs"))
        assert result.returncode != 0 and message in result.stderr and "Traceback" not in result.stderr
    result = run("mnist-data")
    assert result.returncode == 0 and "all four files verified" in result.stdout


# --- the symmetry explorer ------------------------------------------------------------------------


def symmetry_json(*args):
    result = run("symmetry", *args, "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr == ""  # --json: no progress lines either
    return json.loads(result.stdout)


def test_symmetry_help_lists_the_parts():
    result = run("symmetry", "--help")
    assert result.returncode == 0
    for part in ("perceptrons", "mass", "proximity", "quality", "training"):
        assert part in result.stdout


def test_symmetry_perceptrons_json():
    report = symmetry_json("perceptrons", "--nets", "300")
    assert report["nets"] == 300 and report["config"]["nets"] == 300 and report["kept"] >= 290
    assert list(report["stages"]) == ["raw", "scaled", "sorted"]
    raw, sorted_ = report["stages"]["raw"], report["stages"]["sorted"]
    assert 0.4 <= raw["share_v1_above_v2"] <= 0.6 and sorted_["share_v1_above_v2"] == 0
    (a1, b1), (a2, b2) = raw["peaks"][:2]  # the doubled mode: mirror images
    assert abs(a1 - b2) < 0.5 and abs(b1 - a2) < 0.5 and abs(a1 - b1) > 1
    assert sorted_["swap_asymmetry_mmd2"] > 0.1 > abs(raw["swap_asymmetry_mmd2"])
    assert report["mass"]["converged"] == report["kept"]
    assert not {"_result", "result"} & set(report["mass"])  # the min-mass solution stays in memory


def test_symmetry_mass_json():
    report = symmetry_json("mass", "--nets", "200", "--mlp-steps", "20", "--mlp-width", "8")
    for name in ("perceptrons", "mlps"):
        part = report[name]
        for key in (
            "nets",
            "diverged",
            "mass_before_median",
            "mass_after_median",
            "ratio_median",
            "ratio_min",
            "ratio_max",
            "converged",
            "iterations",
            "degenerate_units",
            "max_output_change",
            "seconds",
        ):
            assert key in part, (name, key)
        assert (
            part["converged"] == part["nets"] > 0
            and part["ratio_min"] <= part["ratio_median"] <= part["ratio_max"] <= 1
        )
        assert part["mass_after_median"] <= part["mass_before_median"]
    assert report["perceptrons"]["nets"] <= 200 and report["mlps"]["nets"] == 4
    assert report["mlps"]["config"]["width"] == 8 and report["mlps"]["config"]["steps"] == 20


def test_symmetry_proximity_json():
    report = symmetry_json("proximity", "--widths", "2,8,64")
    assert report["config"]["widths"] == [2, 8, 64]
    rows = report["rows"]
    assert [row["width"] for row in rows] == [2, 8, 64]
    assert all(row["relative_distance"] < row["bound"] for row in rows)
    assert [row["bound_vacuous"] for row in rows] == [True, True, False]
    assert [row["below_bound"] for row in rows] == [None, None, True]
    assert rows[2]["relative_distance"] < rows[1]["relative_distance"] < rows[0]["relative_distance"]
    assert rows[0]["pair"] == [0, 1] and rows[2]["n_parameters"] == 3 * 64 + 1


def test_symmetry_quality_json():
    report = symmetry_json("quality", "--samples", "50", "--members", "20", "--steps", "200")
    rows = {row["method"]: row for row in report["rows"]}
    assert list(rows) == ["mfvi", "sgm", "ensemble", "noise_floor"]
    assert all(set(row) == {"method", "mmd2_raw", "mmd2_removed"} for row in rows.values())
    assert rows["sgm"]["mmd2_raw"] < rows["mfvi"]["mmd2_raw"] and abs(rows["noise_floor"]["mmd2_raw"]) < 0.01
    assert report["config"]["samples"] == 50 and report["config"]["toy"]["alpha"] == 0.25
    assert set(report) == {"config", "rows"}  # the samples stay in memory


def test_symmetry_training_json():
    report = symmetry_json("training", "--steps", "50", "--instances", "2", "--width", "16")
    assert report["config"]["steps"] == 50 and report["config"]["instances"] == 2 and report["diverged"] == 0
    assert len(report["tau_per_step"]) == 50 and all(-1 <= t <= 1 for t in report["tau_per_step"])
    assert -1 <= report["tau_min"] <= report["tau_mean"] <= 1
    assert report["test_accuracy_mean"] > 0.3  # 50 SGD steps already learn something
    assert 0 <= report["steps_with_permutation"] <= 50


@pytest.mark.parametrize(
    "args, first_line",
    [
        (["perceptrons", "--nets", "300"], "300 perceptrons trained in"),
        (["mass", "--nets", "200", "--mlp-steps", "20", "--mlp-width", "8"], "min-mass (median masses"),
        (["proximity", "--widths", "2,8,64"], "nearest equivalent mode, random weights"),
        (["quality", "--samples", "50", "--members", "20", "--steps", "200"], "median MMD² to the exact posterior"),
        (["training", "--steps", "50", "--instances", "2", "--width", "16"], "2 MLPs, width 16 × 1, 50 SGD steps"),
    ],
    ids=["perceptrons", "mass", "proximity", "quality", "training"],
)
def test_symmetry_tables_are_readable(args, first_line, capsys):
    # In this process: the same code as `python -m symlab` (the JSON tests above run that), faster.
    from symlab import cli

    assert cli.main(["symmetry", *args]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith(first_line), out
    assert len(lines) >= 4 and "{" not in out and "nan" not in out
    assert "Traceback" not in err and "Warning" not in err


def assert_usage_error(args, message, capsys):
    """``cli.main(args)`` exits with status 2 and ``message`` on stderr: no traceback, nothing on stdout."""
    from symlab import cli

    with pytest.raises(SystemExit) as exit_:
        cli.main(args)
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and message in err, err[-2000:]
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (["symmetry"], "the following arguments are required: <part>"),
        (["symmetry", "bogus"], "invalid choice: 'bogus'"),
        (["symmetry", "perceptrons", "--nets", "0"], "'0' must be a whole number in [10, 100000]"),
        (["symmetry", "proximity", "--widths", "1,8"], "--widths: '1' must be a whole number in [2, 16384]"),
        (["symmetry", "training", "--lr", "50", "--steps", "1"], "'50' must be a finite number in [0.005, 10]"),
    ],
)
def test_symmetry_bad_arguments_give_a_message(args, message, capsys):
    assert_usage_error(args, message, capsys)


# --- the alignment lab ------------------------------------------------------------------------------


def test_align_json_has_the_barriers_and_distances():
    result = run("align", "--width", "16", "--steps", "300", "--samples", "8", "--path-points", "11", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    for key in ("barrier_before", "barrier_after", "w2_before", "w2_after"):
        assert isinstance(report[key], float) and report[key] >= 0
    assert report["w2_after"] <= report["w2_before"]
    assert report["sizes"] == [2, 16, 16, 2] and len(report["paths"]["w2"]["loss"]) == 11
    assert sorted(report["permutations"][0]) == list(range(16))
    assert result.stderr == ""  # no progress lines with --json


def test_align_table_is_readable(capsys):
    from symlab import cli

    assert cli.main(["align", "--width", "8", "--depth", "1", "--steps", "100", "--samples", "4"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert lines[0].startswith("moons: two MFVI posteriors of a 2-8-2 MLP, 100 Adam steps")
    assert [line.split()[0] for line in lines[3:6]] == ["unaligned", "weight", "W₂"]
    assert " ± " in lines[3] and lines[6].startswith("loss barrier: nats ± Monte-Carlo standard error over the 4")
    assert "{" not in out and "nan" not in out
    assert "Adam step 100/100" in err and len(err.splitlines()) <= 11


@pytest.mark.parametrize(
    "args, message",
    [
        (["align", "--task", "cifar"], "invalid choice: 'cifar'"),
        (["align", "--noise", "2"], "'2' must be a finite number in [0, 1]"),
        (["align", "--width", "1"], "'1' must be a whole number in [2, 512]"),
        (["align", "--path-points", "2"], "'2' must be a whole number in [3, 201]"),
        (["align", "--lr", "5"], "'5' must be a finite number in [0.0001, 0.1]"),
    ],
)
def test_align_bad_arguments_give_a_message(args, message, capsys):
    assert_usage_error(args, message, capsys)


def test_align_reports_diverged_training(capsys, monkeypatch):
    from symlab import cli
    from symlab.labs.align import experiment as align_lab

    real_load = align_lab.load_task

    def nan_inputs(config, mnist=None):  # the surest way to a NaN ELBO
        data = real_load(config, mnist)
        return align_lab.Dataset(data.x_train * float("nan"), data.y_train, data.x_test, data.y_test)

    monkeypatch.setattr(align_lab, "load_task", nan_inputs)
    with pytest.raises(SystemExit) as exit_:
        cli.main(["align", "--width", "8", "--depth", "1", "--steps", "50", "--json"])
    _, err = capsys.readouterr()
    assert exit_.value.code == 1 and "diverged" in err, err
