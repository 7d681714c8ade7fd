"""The posterior-approximation lab: MMD with symmetry removal on cases whose answer is known, dropout's weight
samples, the comparison end to end on a tiny setting, its checkpoint and resumption, and the command line."""

import json

import numpy as np
import pytest
import torch
from test_networks import random_symmetry

from symlab import cli
from symlab.labs.methods import experiment as ex
from symlab.lib import ensembles, laplace, mmd, networks
from symlab.lib.glyphs import load_glyphs
from symlab.lib.mnist_data import load_mnist
from symlab.specs.results import TRAINED_ACCURACY, training_verdict

pytestmark = pytest.mark.slow

TINY = dict(reference=20, samples=10, modes=2, epochs=1, train_size=1000, test_size=500)


@pytest.mark.parametrize("name", ["convnet", "mlp"])
def test_mmd_with_removal_sees_throughrandom_symmetry(name):
    """A sample set equal to the reference up to symmetries: with removal its MMD is the estimator's value for
    identical sets (up to the bandwidths, which the copies' round-off distances of 1e-16 shift a little); without,
    it is far above it."""
    arch = networks.architecture(name, 5)
    rng = np.random.default_rng(0)
    # A posterior around one network (random networks would be no test: their law is symmetric already).
    base = arch.init(1, torch.Generator().manual_seed(0)).double().numpy()
    reference = base + 0.1 * base.std() * rng.normal(size=(40, arch.n_params))
    copies = random_symmetry(arch, reference, rng)
    config = ex.MethodsConfig(architecture=name, width=5, **TINY)
    canonical = networks.remove_symmetries(arch, reference, config.removal)
    scores = ex.mmd_scores(config, torch.tensor(copies), reference, canonical)
    identical = mmd.layerwise_mmd(ex.layer_sets(arch, canonical), ex.layer_sets(arch, canonical), seed=config.seed)
    assert scores["mmd_no_symmetry"] == pytest.approx(identical, abs=1e-3)
    assert abs(identical) < 0.06  # -2(1 - k̄)/m at worst for m = 40 identical points: ≈ 0
    assert scores["mmd"] > identical + 0.05


def test_mmd_orders_sets_by_how_far_they_are_from_the_reference():
    arch = networks.architecture("convnet")
    config = ex.MethodsConfig(**TINY)
    g = torch.Generator().manual_seed(1)
    reference = arch.init(60, g).double().numpy()
    canonical = networks.remove_symmetries(arch, reference, config.removal)
    same_law = ex.mmd_scores(config, arch.init(30, g).double(), reference, canonical)
    wider = ex.mmd_scores(config, 3 * arch.init(30, g).double(), reference, canonical)
    assert abs(same_law["mmd"]) < 0.05
    assert wider["mmd"] > same_law["mmd"] + 0.1
    assert set(same_law["mmd_by_reference"]) == {"15", "30", "60"}


def test_dropout_samples_are_dropout_forward_passes():
    arch = networks.architecture("convnet")
    flat = arch.init(1, torch.Generator().manual_seed(2))[0].double()
    samples = networks.dropout_weights(arch, flat, 0.2, 4000, torch.Generator().manual_seed(3))
    x = torch.randn(3, 1, 28, 28, dtype=torch.float64)
    # One sample: the network with its last layer's inputs masked, the mask read off the sample's weights.
    weight = arch.parameters(flat)["fc.weight"]
    kept = arch.parameters(samples[0])["fc.weight"][0] / weight[0]
    assert set(torch.unique(kept.round(decimals=9)).tolist()) <= {0.0, 1.25}
    keep = kept.expand(1, 3, -1)
    assert torch.allclose(
        networks.batched_logits(arch, samples[:1], x), networks.batched_logits(arch, flat[None], x, keep)
    )
    # Only the last layer moves, and on average not at all (E[mask / (1 - p)] = 1).
    last = arch.layers[-1][1]
    assert torch.equal(samples[:, : last.start], flat[: last.start].expand(4000, -1))
    assert torch.allclose(samples.mean(0), flat, atol=0.05 * flat.abs().max().item())
    assert (samples[:, last] == 0).double().mean().item() == pytest.approx(0.2, abs=0.01)


@pytest.fixture(scope="module")
def tiny_data():
    return ex.prepare_data(load_mnist(), ex.MethodsConfig(**TINY), load_glyphs())


def _run_all(comparison):
    while not comparison.finished:
        comparison.run_stage()
    return comparison


@pytest.fixture(scope="module")
def tiny_comparison(tiny_data):
    return _run_all(ex.Comparison(ex.MethodsConfig(**TINY), tiny_data))


def test_a_comparison_has_every_method_and_every_column(tiny_comparison):
    report = json.loads(json.dumps(tiny_comparison.report()))
    rows = {(row["method"], row["modes"]) for row in report["rows"]}
    assert rows == {(m, k) for m in ex.METHODS for k in (1, 2)} - {("sghmc", 2), ("ensemble", 1)}
    for row in report["rows"]:
        assert set(ex.ROW_KEYS) <= set(row)
        assert all(
            np.isfinite(row[key])
            for key in ("mmd", "mmd_no_symmetry", "accuracy", "nll", "ece", "brier", "aupr", "fpr95", "id_mi", "ood_mi")
        )
        assert 0 <= row["accuracy"] <= 1 and row["id_mi"] >= 0
    assert report["reference_checkpoints"] == 20 and report["samples_per_method"] == 10
    assert set(report["projection"]) == {"raw", "canonical"}
    assert len(report["projection"]["raw"]["reference"][0]) == 20
    assert len(report["paper_rows"]) == len(ex.PAPER_ROWS)


def test_a_resumed_comparison_ends_as_an_uninterrupted_one(tiny_comparison, tiny_data, tmp_path):
    config = ex.MethodsConfig(**TINY)
    first = ex.Comparison(config, tiny_data)
    for _ in range(4):  # the reference, the starts, two methods
        first.run_stage()
    first.save(tmp_path / "checkpoint.safetensors")
    resumed = ex.Comparison(config, tiny_data)
    resumed.load(tmp_path / "checkpoint.safetensors")
    assert resumed.stage == 4
    _run_all(resumed)
    for ours, theirs in zip(resumed.rows, tiny_comparison.rows):
        assert {k: v for k, v in ours.items() if k != "seconds"} == {k: v for k, v in theirs.items() if k != "seconds"}


def test_a_checkpoint_of_other_settings_or_a_broken_one_is_refused(tiny_data, tmp_path):
    config = ex.MethodsConfig(**TINY)
    comparison = ex.Comparison(config, tiny_data)
    comparison.run_stage()
    path = tmp_path / "checkpoint.safetensors"
    comparison.save(path)
    other = ex.Comparison(ex.MethodsConfig(**{**TINY, "seed": 1}), tiny_data)
    with pytest.raises(ValueError, match="another comparison"):
        other.load(path)
    path.write_bytes(path.read_bytes()[:100])
    from symlab.labs.methods.training import MethodsTraining

    training = MethodsTraining.__new__(MethodsTraining)
    training.comparison = ex.Comparison(config, tiny_data)
    with pytest.raises(ex.CheckpointError, match="damaged or is not this comparison's checkpoint"):
        training.load(path)


def test_bad_settings_are_refused_with_every_problem_named():
    with pytest.raises(ValueError, match="reference.*samples"):
        ex.MethodsConfig(reference=5, samples=1000).validate()
    with pytest.raises(ValueError, match="at least modes"):
        ex.MethodsConfig(samples=10, modes=10).validate() and ex.MethodsConfig(samples=10, modes=11).validate()


def test_the_paper_table_is_table_one():
    rows = {(row["method"], row["modes"]): row for row in ex.paper_rows()}
    assert rows[("laplace", 1)]["mmd"] == 10.6 and rows[("ensemble", 10)]["accuracy"] == 95.3
    assert rows[("swag", 10)]["mmd_no_symmetry"] == 1.3


@pytest.mark.slow
def test_the_command_prints_the_issues_keys(tmp_path, capsys):
    args = [
        "methods",
        "--reference",
        "20",
        "--samples",
        "10",
        "--modes",
        "2",
        "--epochs",
        "1",
        "--train-size",
        "1000",
        "--test-size",
        "500",
        "--runs-dir",
        str(tmp_path),
        "--json",
    ]
    assert cli.main(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert {"rows", "reference_checkpoints", "samples_per_method"} <= set(report)
    keys = {
        "method",
        "modes",
        "mmd",
        "mmd_no_symmetry",
        "accuracy",
        "nll",
        "ece",
        "brier",
        "aupr",
        "fpr95",
        "id_mi",
        "ood_mi",
    }
    assert all(keys <= set(row) for row in report["rows"])
    # One epoch on 1000 images leaves the starts untrained: the JSON and the table say so.
    assert report["trained"] is False and "untrained networks" in report["trained_reason"]
    assert cli.main(args[:-1]) == 0
    table = capsys.readouterr().out
    assert "paper" in table and "Laplace" in table and "MMD no sym" in table
    assert table.startswith("NOT TRAINED: The 2 starts classify")


@pytest.mark.parametrize("name", ["convnet", "mlp"])
def test_sgm_samples_are_q_moved_by_random_symmetries(name):
    arch = networks.architecture(name, 6)
    g = torch.Generator().manual_seed(4)
    draws = arch.init(50, g).double()
    moved = ex.symmetrised(arch, draws, g)
    x = torch.randn(3, 1, 28, 28, dtype=torch.float64)
    assert torch.allclose(networks.batched_logits(arch, moved, x), networks.batched_logits(arch, draws, x), atol=1e-10)
    np.testing.assert_allclose(
        networks.remove_symmetries(arch, moved.numpy()), networks.remove_symmetries(arch, draws.numpy()), atol=1e-12
    )
    assert (moved != draws).any(-1).double().mean() > 0.5  # most draws moved


def test_sgm_information_over_the_convnets_group_is_exact():
    """I(w) over all 32 symmetries: log 32 where the permuted copies of q are far apart, 0 for a q every
    symmetry leaves alone; and SGM's loss subtracts it."""
    from symlab.lib import bnn

    arch = networks.architecture("convnet")
    group = networks.convnet_group(arch)
    assert len({tuple(row.tolist()) for row in group}) == 32 and torch.equal(group[0], torch.arange(arch.n_params))
    information = ex.symmetry_information(arch, torch.Generator())
    mu = arch.init(1, torch.Generator().manual_seed(5))[0].double()
    log_sd = torch.full_like(mu, np.log(1e-3))
    assert information(mu, mu, log_sd).item() == pytest.approx(np.log(32), abs=1e-9)
    constant = torch.full_like(mu, 0.3)
    assert information(constant + 0.01, constant, torch.zeros_like(mu)).item() == pytest.approx(0.0, abs=1e-12)
    # Against the definition, element by element.
    w = mu + 0.05 * torch.randn(arch.n_params, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    sd = torch.full_like(mu, 0.05)
    terms = torch.stack([torch.distributions.Normal(mu[index], sd[index]).log_prob(w).sum() for index in group])
    expected = terms[0] - (torch.logsumexp(terms, 0) - np.log(32))
    assert bnn.group_information(w, mu, sd.log(), group).item() == pytest.approx(expected.item(), rel=1e-9)


def test_a_runs_reference_exports_as_a_checkpoint_set(tmp_path, capsys, tiny_comparison):
    from safetensors.torch import load_file

    from symlab.labs import run_kinds
    from symlab.runs.registry import Registry

    registry = Registry(run_kinds(), tmp_path / "runs")
    run_id = registry.create("methods", tiny_comparison.config, "cpu", status="finished")
    tiny_comparison.save(registry.checkpoint_path(run_id))
    target = tmp_path / "set.safetensors"
    assert (
        cli.main(["methods", "--export", str(run_id), str(target), "--runs-dir", str(tmp_path / "runs"), "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["parameters"]["conv1.weight"] == [20, 4, 1, 5, 5]
    stacked = load_file(target)
    arch = tiny_comparison.config.arch
    module = arch.module()
    module.load_state_dict({name: tensor[3] for name, tensor in stacked.items()})
    assert torch.equal(torch.nn.utils.parameters_to_vector(module.parameters()), tiny_comparison.reference[3])
    with pytest.raises(SystemExit) as refused:
        cli.main(["methods", "--export", "99", str(target), "--runs-dir", str(tmp_path / "runs")])
    assert refused.value.code == 2 and "no run #99" in capsys.readouterr().err


def test_the_summary_over_seeds_pairs_each_seeds_rows():
    def report(seed, offset):
        rows = [
            {
                "method": m,
                "modes": k,
                **{
                    key: offset + (0.5 if k == 1 else 0.1) + (0.01 if m == "sgm" else 0)
                    for key in (*ex.MMD_KEYS, *ex.uncertainty.METRIC_KEYS)
                },
            }
            for m in ("mfvi", "sgm")
            for k in (1, 10)
        ]
        return {"config": {**ex.MethodsConfig(seed=seed).to_dict()}, "rows": rows}

    summary = ex.seed_summary([report(0, 0.0), report(1, 0.2)])
    assert summary["seeds"] == 2
    assert summary["multi_minus_single"]["mfvi"] == pytest.approx([-0.4, -0.4])
    assert summary["sgm_minus_mfvi"][1]["mmd"] == pytest.approx([0.01, 0.01])
    mfvi_one = next(r for r in summary["rows"] if r["method"] == "mfvi" and r["modes"] == 1)
    assert mfvi_one["mmd"] == pytest.approx(0.6) and mfvi_one["mmd_sd"] == pytest.approx(np.std([0.5, 0.7], ddof=1))
    assert ex.same_but_seed(ex.MethodsConfig(seed=3), ex.MethodsConfig(seed=4))
    assert not ex.same_but_seed(ex.MethodsConfig(seed=3), ex.MethodsConfig(seed=4, epochs=2))


def test_laplace_weighs_its_curvature_images_as_the_whole_training_set():
    """The GGN over 1000 images, scaled to N = 4000, beside δ = Nλ: the samples' Mahalanobis norm under
    Λ = (N/1000)·G + NλI averages P (a chi-square's mean), within 5 standard errors √(2/(P·S)); unscaled
    (G + NλI, 4× too little data) it is ~10 % off."""
    torch.set_num_threads(1)
    config = ex.MethodsConfig(**{**TINY, "train_size": 4000})
    data = ex.prepare_data(load_mnist(), config, load_glyphs())
    start = ensembles.initial_networks(config.arch, range(1), config.seed)[0]
    count = 400
    samples = ex.method_samples("laplace", config, data, start, start, count, 0).double()
    images = ex.CURVATURE_IMAGES
    ggn = laplace.nll_ggn(config.arch.logits, start, data.x[:images], data.y[:images])
    size = len(ggn)
    precision = (config.train_size / images) * ggn + config.train_size * ex.WEIGHT_DECAY * torch.eye(
        size, dtype=torch.float64
    )
    deviation = samples - start.double()
    ratio = float(((deviation @ precision) * deviation).sum(1).mean()) / size
    assert abs(ratio - 1) < 5 * (2 / (size * count)) ** 0.5


def test_a_comparison_of_networks_that_did_not_learn_says_so(tiny_comparison):
    """One epoch on 1000 images: the starts classify ~10 % of the digits, and the report says the ranking is of
    untrained networks (the command's JSON and table: test_the_command_prints_the_issues_keys)."""
    report = tiny_comparison.report()
    assert report["trained"] is False and max(report["start_accuracy"]) < TRAINED_ACCURACY
    assert "below the 50 % floor" in report["trained_reason"]


def test_the_training_verdict_takes_the_median_against_the_floor():
    assert training_verdict([0.9, 0.95, 0.1], "the starts")["trained"] is True
    low = training_verdict([0.9, 0.2, 0.1], "the starts")
    assert low["trained"] is False and low["trained_reason"].startswith("The starts classify 20.0 %")
    assert training_verdict([], "the starts") == {"trained": None, "trained_reason": "The starts are not trained yet"}
