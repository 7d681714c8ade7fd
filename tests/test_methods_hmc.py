"""The posterior-approximation lab's HMC reference: its stages resume exactly, every row gains its scores against
HMC's draws, the diagnostics see permuted copies, and the two references' rankings are compared."""

import json

import numpy as np
import pytest
import torch
from test_methods import TINY, _run_all

from symlab import cli
from symlab.labs.methods import experiment as ex
from symlab.lib import hmc, networks
from symlab.lib.glyphs import load_glyphs
from symlab.lib.mnist_data import load_mnist
from symlab.specs.hmc import HmcConfig

pytestmark = pytest.mark.slow

SAMPLER = HmcConfig(hmc_chains=2, hmc_warmup=6, hmc_samples=12)  # two draw stages: 10, then 2
HMC_TINY = ex.MethodsConfig(**TINY, hmc=True, sampler=SAMPLER)


@pytest.fixture(scope="module")
def tiny_data():
    return ex.prepare_data(load_mnist(), HMC_TINY, load_glyphs())


@pytest.fixture(scope="module")
def hmc_comparison(tiny_data):
    return _run_all(ex.Comparison(HMC_TINY, tiny_data))


def test_every_row_and_the_checkpoints_are_scored_against_hmc(hmc_comparison):
    report = json.loads(json.dumps(hmc_comparison.report()))
    assert report["stages"] == ex.stage_count(ex.MethodsConfig(**TINY)) + 4
    for row in [*report["rows"], report["hmc"]["checkpoints"]]:
        assert set(ex.HMC_KEYS) <= set(row)
        assert np.isfinite(row["mmd_hmc"]) and np.isfinite(row["mmd_hmc_no_symmetry"])
        assert 0 <= row["agreement_hmc"] <= 1 and 0 <= row["tv_hmc"] <= 1
    run = report["hmc"]
    assert run["chains"] == 2 and run["draws_per_chain"] == 12 and len(run["mode_hops"]) == 2
    assert {"acceptance", "ess", "rhat_raw", "rhat_canonical"} <= set(run)
    assert 0 <= run["acceptance"] <= 1 and run["rhat_raw"] >= 1 - 1e-9 and run["seconds"] > 0
    assert len(report["projection"]["raw"]["hmc"][0]) == 24
    low, high = run["split_half_mmd_interval"]
    assert low <= run["split_half_mmd"] <= high and np.isfinite(run["split_half_mmd_raw"])
    assert run["rhat_predictive"] >= 1 - 1e-9 and run["rhat_predictive_max"] >= run["rhat_predictive"]
    assert 0 <= run["rhat_predictive_share_mixed"] <= 1 and isinstance(run["converged"], bool)
    for row in report["rows"]:
        for key in ("mmd_no_symmetry", "mmd_hmc_no_symmetry"):
            low, high = row[f"{key}_interval"]
            assert low < high, (row["method"], key)
    low, high = report["reference_split_half_mmd_interval"]
    assert low <= report["reference_split_half_mmd"] <= high


def test_converged_means_mixed_predictions_and_halves_closer_than_the_lead():
    rows = [
        {"method": method, "modes": 1, "mmd_hmc_no_symmetry": value}
        for method, value in (("laplace", 0.10), ("swag", 0.30), ("mfvi", 0.9))
    ]
    run = {"rhat_predictive": 1.05, "split_half_mmd_interval": [0.0, 0.1]}
    assert ex.hmc_converged(run, rows)
    assert not ex.hmc_converged({**run, "rhat_predictive": 1.2}, rows)
    assert not ex.hmc_converged({**run, "split_half_mmd_interval": [0.1, 0.25]}, rows)


def test_stages_are_named_in_order(hmc_comparison):
    names = [hmc_comparison.stage_name(stage) for stage in range(hmc_comparison.stages)]
    assert names[-4:] == ["HMC warm-up (2 chains)", "HMC draws 1–10", "HMC draws 11–12", "scores against HMC"]


@pytest.mark.parametrize("stopped_after", [1, 2])  # the warm-up, or the warm-up and the first draws
def test_a_run_resumed_inside_hmc_draws_what_an_unbroken_one_does(hmc_comparison, tiny_data, tmp_path, stopped_after):
    first = ex.Comparison(HMC_TINY, tiny_data)
    hmc_start = first.method_stages_end
    for _ in range(hmc_start + stopped_after):
        first.run_stage()
    first.save(tmp_path / "checkpoint.safetensors")
    resumed = ex.Comparison(HMC_TINY, tiny_data)
    resumed.load(tmp_path / "checkpoint.safetensors")
    _run_all(resumed)
    torch.testing.assert_close(resumed.hmc_draws.samples, hmc_comparison.hmc_draws.samples, rtol=0, atol=0)
    for ours, theirs in zip(resumed.rows, hmc_comparison.rows):
        assert {k: ours[k] for k in ex.HMC_KEYS} == {k: theirs[k] for k in ex.HMC_KEYS}


def test_hmc_against_its_own_draws_agrees_everywhere(hmc_comparison, tiny_data):
    draws = hmc_comparison.hmc_draws.samples
    reference = ex.hmc_reference(HMC_TINY, draws, tiny_data)
    scores = ex.hmc_scores(HMC_TINY, draws.reshape(-1, draws.shape[-1]), reference, tiny_data)
    assert scores["agreement_hmc"] == 1.0 and scores["tv_hmc"] < 1e-12
    other = ex.hmc_scores(HMC_TINY, hmc_comparison.reference, reference, tiny_data)
    assert (
        abs(scores["mmd_hmc"]) < other["mmd_hmc"] and abs(scores["mmd_hmc_no_symmetry"]) < other["mmd_hmc_no_symmetry"]
    )


def test_diagnostics_count_moves_between_copies_and_see_through_them():
    """Three chains around one network: one stays in its copy, one in a permuted copy, one moves between the two on
    every draw. Raw R̂ is far above one and the third chain's hops number its moves; canonicalised, they agree."""
    config = ex.MethodsConfig(hmc=True)
    arch, rng = config.arch, np.random.default_rng(0)
    centre = arch.init(1, torch.Generator().manual_seed(0)).double().numpy()[0]
    samples = centre + 1e-3 * rng.standard_normal((3, 40, arch.n_params))
    swapped = (np.array([3, 2, 1, 0]), np.array([2, 3, 0, 1]))  # whole groups swapped, and within each
    samples[1] = networks.convnet_permutation(arch, samples[1], *swapped)
    samples[2, 1::2] = networks.convnet_permutation(arch, samples[2, 1::2], *swapped)
    samples = torch.tensor(samples)
    zeros = torch.zeros(3, 40, dtype=torch.float64)
    draws = hmc.Draws(samples, -samples.square().sum(-1), zeros + 1, zeros > -1, zeros > 1)
    last = samples[:, -1]
    state = hmc.ChainState(last, zeros[:, 0], last, zeros[:, 0] + 0.1, torch.ones_like(last))
    run = ex.hmc_diagnostics(config, state, draws)
    assert run["mode_hops"] == [0, 0, 39] and run["copies_visited"] == 2
    assert run["rhat_raw"] > 1.3 and run["rhat_canonical"] < 1.15 and run["rhat_canonical_median"] < 1.03
    assert run["acceptance"] == 1.0 and run["divergences"] == 0


def _report(mmd_order, hmc_order, seed=0):
    rows = [
        {
            "method": method,
            "modes": 1,
            "mmd": a,
            "mmd_no_symmetry": a,
            "mmd_hmc": b,
            "mmd_hmc_no_symmetry": b,
            "tv_hmc": 1 - b,
            "agreement_hmc": b,
            **{key: 0.5 for key in ex.uncertainty.METRIC_KEYS},
        }
        for method, a, b in zip(("dropout", "mfvi", "sgm", "swag"), mmd_order, hmc_order)
    ]
    return {"config": ex.MethodsConfig(seed=seed).to_dict(), "rows": rows, "hmc": {"acceptance": 0.8}}


def test_kendalls_tau_compares_the_two_references_rankings():
    same = ex.ranking_agreement(_report([0.1, 0.2, 0.3, 0.4], [1.0, 2.0, 3.0, 4.0]))
    assert same["kendall_tau"] == pytest.approx(1.0) and same["closest_to_hmc"] == "dropout/1"
    assert same["closest_to_hmc_predictive"] == "swag/1"
    reversed_ = ex.ranking_agreement(_report([0.1, 0.2, 0.3, 0.4], [4.0, 3.0, 2.0, 1.0]))
    assert reversed_["kendall_tau_raw"] == pytest.approx(-1.0) and reversed_["closest_to_hmc"] == "swag/1"
    summary = ex.seed_summary(
        [_report([0.1, 0.2, 0.3, 0.4], [1.0, 2.0, 3.0, 4.0]), _report([0.1, 0.2, 0.3, 0.4], [4.0, 3.0, 2.0, 1.0], 1)]
    )
    assert summary["rankings"]["kendall_tau"] == pytest.approx([1.0, -1.0])
    assert summary["rows"][0]["mmd_hmc"] == pytest.approx(2.5)
    without = ex.seed_summary([{**_report([0.1, 0.2, 0.3, 0.4], [1, 2, 3, 4]), "hmc": None}])
    assert without["rankings"] == {} and "mmd_hmc" not in without["rows"][0]


def test_the_command_runs_the_hmc_reference_and_prints_its_table(tmp_path, capsys):
    args = [
        "methods",
        "--hmc",
        "--hmc-chains",
        "2",
        "--hmc-warmup",
        "6",
        "--hmc-samples",
        "12",
        "--runs-dir",
        str(tmp_path),
    ]
    for name, value in TINY.items():
        args += [f"--{name.replace('_', '-')}", str(value)]
    assert cli.main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert all(set(ex.HMC_KEYS) <= set(row) for row in report["rows"])
    assert {"acceptance", "ess", "rhat_raw", "rhat_canonical"} <= set(report["hmc"])
    assert report["config"]["sampler"]["hmc_chains"] == 2
    assert cli.main(args) == 0
    table = capsys.readouterr().out
    assert "against HMC (2 chains × 12 draws after 6 warm-up" in table and "split-R̂" in table
    assert "\ncheckpoints" in table


def test_a_runs_hmc_draws_export_with_their_diagnostics(tmp_path, capsys, hmc_comparison, tiny_data):
    from safetensors import safe_open
    from safetensors.torch import load_file

    from symlab.labs import run_kinds
    from symlab.runs.registry import Registry

    registry = Registry(run_kinds(), tmp_path / "runs")
    run_id = registry.create("methods", HMC_TINY, "cpu", status="finished")
    hmc_comparison.save(registry.checkpoint_path(run_id))
    target = tmp_path / "draws.safetensors"
    args = ["methods", "--export-hmc", str(run_id), str(target), "--runs-dir", str(tmp_path / "runs")]
    assert cli.main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["contents"] == "HMC draws" and report["parameters"]["samples"] == [2, 12, 350]
    torch.testing.assert_close(load_file(target)["samples"], hmc_comparison.hmc_draws.samples, rtol=0, atol=0)
    with safe_open(str(target), "pt") as handle:
        assert json.loads(handle.metadata()["diagnostics"])["chains"] == 2
    # A comparison without HMC has no draws to export, and says so.
    plain = ex.Comparison(ex.MethodsConfig(**TINY), tiny_data)
    plain.run_stage()
    other = registry.create("methods", plain.config, "cpu", status="finished")
    plain.save(registry.checkpoint_path(other))
    with pytest.raises(SystemExit) as refused:
        cli.main(["methods", "--export-hmc", str(other), str(target), "--runs-dir", str(tmp_path / "runs")])
    assert refused.value.code == 2 and "drawn nothing by HMC" in capsys.readouterr().err


def test_the_shipped_hmc_draws_give_the_shipped_diagnostics():
    """The default comparisons ship with their HMC draws: the draws give back each report's R̂, ESS and hops."""
    reports = ex.shipped_reports()
    assert reports and all(report["hmc"] for report in reports)
    for report in reports:
        state, draws = ex.shipped_hmc_draws(report["config"]["seed"])
        config = ex.MethodsConfig.from_dict(report["config"])
        assert tuple(draws.samples.shape) == (config.sampler.hmc_chains, config.sampler.hmc_samples, 350)
        again, shipped = ex.hmc_diagnostics(config, state, draws), report["hmc"]
        for key in ("rhat_raw", "rhat_canonical", "ess_raw", "ess_canonical", "rhat_log_density", "acceptance"):
            assert again[key] == pytest.approx(shipped[key], rel=1e-9), key
        assert again["mode_hops"] == shipped["mode_hops"]


def test_the_shipped_hmc_draws_give_the_shipped_noise_floor_and_predictive_rhat():
    """The split-half MMD² and the predictive's R̂ in each shipped report come back from its shipped draws; the
    shipped reference is labelled as not converged, with the numbers that say so."""
    mnist, glyphs = load_mnist(), load_glyphs()
    for report in ex.shipped_reports():
        config = ex.MethodsConfig.from_dict(report["config"])
        _, draws = ex.shipped_hmc_draws(config.seed)
        again = ex.hmc_noise(config, draws, ex.prepare_data(mnist, config, glyphs))
        for key in ("rhat_predictive", "rhat_predictive_max", "split_half_mmd", "split_half_mmd_raw"):
            assert again[key] == pytest.approx(report["hmc"][key], rel=1e-6), key
        assert report["hmc"]["converged"] is ex.hmc_converged(report["hmc"], report["rows"])
        assert report["hmc"]["converged"] is False and report["hmc"]["rhat_predictive"] > ex.RHAT_MIXED
