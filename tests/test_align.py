"""Alignment of mean-field posteriors across permutations, the interpolation path and the barrier
(symlab.lib.align), and the lab's experiment (symlab.labs.align.experiment)."""

import itertools
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from scipy.stats import norm

from symlab.labs.align import experiment as align_lab
from symlab.lib import align, mlp, symmetry
from symlab.lib.gaussian import DiagonalGaussian
from symlab.specs import results


def random_posterior(sizes, seed, sd_scale=0.1) -> DiagonalGaussian:
    rng = np.random.default_rng(seed)
    shapes = list(zip(sizes[:-1], sizes[1:]))
    means = [(rng.standard_normal((o, i)), rng.standard_normal(o)) for i, o in shapes]
    sds = [(sd_scale * rng.uniform(0.1, 1.0, (o, i)), sd_scale * rng.uniform(0.1, 1.0, o)) for i, o in shapes]
    return DiagonalGaussian.from_layers(means, sds)


def random_perms(sizes, seed) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.permutation(h) for h in sizes[1:-1]]


SIZES = [(3, 5, 2), (2, 8, 8, 2), (4, 6, 7, 5, 3), (10, 32, 32, 10)]


# --- the distribution and its permutations ------------------------------------------------------


def test_permute_keeps_the_function_of_every_sample():
    q = random_posterior((3, 6, 5, 2), 0)
    perms = random_perms((3, 6, 5, 2), 1)
    moved = align.permute(q, perms)
    x = np.random.default_rng(2).standard_normal((20, 3))
    noise = q.layout.layers(align.standard_noise(q.sizes, 4, seed=3).numpy())
    # A sample of the permuted q with the noise permuted alike is the permuted sample: same outputs.
    noise_moved = [noise]
    for index, perm in enumerate(perms):
        noise_moved = [symmetry.permute_units(noise_moved[0], index, np.broadcast_to(perm, (4, len(perm))))]
    for s in range(4):
        sample = [(mW + sW * eW[s], mb + sb * eb[s]) for (mW, mb), (sW, sb), (eW, eb) in zip(q.means, q.sds, noise)]
        sample_moved = [
            (mW + sW * eW[s], mb + sb * eb[s])
            for (mW, mb), (sW, sb), (eW, eb) in zip(moved.means, moved.sds, noise_moved[0])
        ]
        np.testing.assert_allclose(mlp.forward(sample_moved, x), mlp.forward(sample, x), atol=1e-12)
    assert align.w2_distance(q, moved) > 1.0  # a different point of weight space


def test_permute_by_the_inverse_undoes_it():
    q = random_posterior((3, 6, 5, 2), 0)
    perms = random_perms((3, 6, 5, 2), 1)
    back = align.permute(align.permute(q, perms), [np.argsort(p) for p in perms])
    assert align.w2_distance(q, back) == 0.0


def test_w2_distance_is_the_closed_form_and_matches_quantile_functions():
    qa, qb = random_posterior((2, 3, 1), 0), random_posterior((2, 3, 1), 1, sd_scale=1.0)
    closed = math.sqrt(
        sum(
            np.sum((a - b) ** 2)
            for la, lb in ((qa.means, qb.means), (qa.sds, qb.sds))
            for pa, pb in zip(la, lb)
            for a, b in zip(pa, pb)
        )
    )
    assert align.w2_distance(qa, qb) == pytest.approx(closed, rel=1e-12)
    # Independently: for product measures W₂² sums over coordinates, and in 1-D it is
    # ∫₀¹ (F⁻¹(u) − G⁻¹(u))² du, here by quadrature on the quantile functions.
    u = (np.arange(200_000) + 0.5) / 200_000
    total = 0.0
    for (ma, mb), (sa, sb) in zip(zip(_flat(qa.means), _flat(qb.means)), zip(_flat(qa.sds), _flat(qb.sds))):
        total += np.mean((norm.ppf(u, ma, sa) - norm.ppf(u, mb, sb)) ** 2)
    assert math.sqrt(total) == pytest.approx(closed, rel=1e-3)
    assert align.mean_distance(qa, qb) < align.w2_distance(qa, qb)


def _flat(layers):
    return np.concatenate([np.concatenate([W.ravel(), b]) for W, b in layers])


def test_invalid_posteriors_and_pairs_are_refused():
    q = random_posterior((2, 3, 1), 0)
    with pytest.raises(ValueError, match=">= 0"):
        DiagonalGaussian.from_layers(q.means, [(-W, b) for W, b in q.sds])
    with pytest.raises(ValueError, match="same layer shapes"):
        DiagonalGaussian.from_layers(q.means, random_posterior((2, 4, 1), 0).sds)
    with pytest.raises(ValueError, match="non-finite"):
        DiagonalGaussian.from_layers([(W * np.nan, b) for W, b in q.means], q.sds)
    with pytest.raises(ValueError, match="different networks"):
        align.align(q, random_posterior((2, 4, 1), 0))
    with pytest.raises(ValueError, match="objective"):
        align.align(q, q, objective="kl")
    with pytest.raises(ValueError, match="max_sweeps"):
        align.align(q, q, max_sweeps=0)


# --- alignment ----------------------------------------------------------------------------------


@pytest.mark.parametrize("objective", align.OBJECTIVES)
@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "-".join(map(str, s)))
@pytest.mark.parametrize("seed", range(3))
def test_a_permuted_copy_is_recovered_exactly(sizes, seed, objective):
    qa = random_posterior(sizes, seed)
    perms = random_perms(sizes, seed + 100)
    qb = align.permute(qa, perms)
    result = align.align(qa, qb, objective)
    for found, applied in zip(result.perms, perms):
        np.testing.assert_array_equal(found, np.argsort(applied))  # undoes the permutation
    assert align.w2_distance(qa, align.permute(qb, result.perms)) == 0.0
    assert result.converged and result.history[-1] == 0.0


@pytest.mark.parametrize("start", [align.incoming_matching, align.outgoing_matching])
@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "-".join(map(str, s)))
def test_each_one_pass_start_recovers_a_permuted_copy(sizes, start):
    qa = random_posterior(sizes, 0)
    perms = random_perms(sizes, 1)
    for found, applied in zip(start(qa, align.permute(qa, perms)), perms):
        np.testing.assert_array_equal(found, np.argsort(applied))


@pytest.mark.parametrize("objective", align.OBJECTIVES)
@pytest.mark.parametrize("sizes", SIZES, ids=lambda s: "-".join(map(str, s)))
@pytest.mark.parametrize("seed", range(4))
def test_alignment_never_increases_the_distance(sizes, seed, objective):
    qa, qb = random_posterior(sizes, seed), random_posterior(sizes, seed + 50)
    result = align.align(qa, qb, objective)
    before = align.layer_distances(qa, qb, objective).sum()
    after = align.layer_distances(qa, align.permute(qb, result.perms), objective).sum()
    assert after <= before * (1 + 1e-12)
    assert np.all(np.diff(result.history) <= 1e-9 * before)  # every sweep
    assert result.history[-1] == pytest.approx(after, rel=1e-12)
    assert result.converged and result.sweeps >= 1
    for perm, h in zip(result.perms, sizes[1:-1]):
        assert sorted(perm) == list(range(h))


@pytest.mark.parametrize("objective", align.OBJECTIVES)
def test_the_result_is_a_fixed_point_of_every_layer(objective):
    sizes = (4, 6, 7, 5, 3)
    qa, qb = random_posterior(sizes, 0), random_posterior(sizes, 1)
    result = align.align(qa, qb, objective)
    aligned = align.permute(qb, result.perms)
    for index in range(3):
        cost = align.unit_distances(qa, aligned, index, objective)
        _, cols = linear_sum_assignment(cost)
        assert cost[np.arange(len(cols)), cols].sum() >= np.trace(cost) - 1e-9 * np.trace(cost)


@pytest.mark.parametrize("objective", align.OBJECTIVES)
@pytest.mark.parametrize("seed", range(5))
def test_one_hidden_layer_reaches_the_global_minimum(seed, objective):
    sizes = (3, 5, 2)
    qa, qb = random_posterior(sizes, seed), random_posterior(sizes, seed + 10)
    best = min(
        align.layer_distances(qa, align.permute(qb, [np.array(p)]), objective).sum()
        for p in itertools.permutations(range(5))
    )
    result = align.align(qa, qb, objective)
    assert result.history[-1] == pytest.approx(best, rel=1e-12)


def test_two_layers_come_close_to_the_global_minimum():
    """Coordinate descent is a local method: on small two-layer nets its result is compared with
    all 4! × 4! pairs of permutations (it reached the minimum on 17 of these 20 pairs, at most 5.3 %
    above it; from the identity alone, 13 of 20 and 32 %)."""
    sizes, gaps = (3, 4, 4, 2), []
    for seed in range(20):
        qa, qb = random_posterior(sizes, seed), random_posterior(sizes, seed + 10)
        best = min(
            align.layer_distances(qa, align.permute(qb, [np.array(p1), np.array(p2)]), "w2").sum()
            for p1 in itertools.permutations(range(4))
            for p2 in itertools.permutations(range(4))
        )
        found = align.align(qa, qb, "w2").history[-1]
        assert found >= best * (1 - 1e-12)
        gaps.append(found / best - 1)
    assert np.mean(np.array(gaps) < 1e-9) >= 0.8 and max(gaps) < 0.1


def test_unit_distances_are_the_assignment_costs():
    sizes = (3, 5, 4, 2)
    qa, qb = random_posterior(sizes, 0), random_posterior(sizes, 1)
    cost = align.unit_distances(qa, qb, 0, "w2")
    similarity = align.unit_similarity(qa, qb, 0, "w2")
    # ‖a − b‖² = ‖a‖² + ‖b‖² − 2⟨a, b⟩ row by row: the same assignment either way.
    squares_a, squares_b = np.diag(align.unit_similarity(qa, qa, 0)), np.diag(align.unit_similarity(qb, qb, 0))
    np.testing.assert_allclose(cost, squares_a[:, None] + squares_b[None, :] - 2 * similarity, atol=1e-10)
    # Swapping units i and j of q_B changes the total by exactly the change in these costs.
    perm = np.arange(5)
    perm[[1, 3]] = perm[[3, 1]]
    change = (
        align.layer_distances(qa, align.permute(qb, [perm, np.arange(4)]), "w2").sum()
        - align.layer_distances(qa, qb, "w2").sum()
    )
    assert change == pytest.approx(cost[1, 3] + cost[3, 1] - cost[1, 1] - cost[3, 3], abs=1e-9)


def test_weight_matching_ignores_the_standard_deviations():
    sizes = (3, 6, 2)
    qa = random_posterior(sizes, 0)
    # q_B: the same means, its standard deviations those of a permuted q_A.
    perm = random_perms(sizes, 1)
    qb = DiagonalGaussian.from_layers(qa.means, align.permute(qa, perm).sds)
    np.testing.assert_array_equal(align.align(qa, qb, "means").perms[0], np.arange(6))
    assert align.mean_distance(qa, qb) == 0.0 and align.w2_distance(qa, qb) > 0


# --- the path ---------------------------------------------------------------------------------


def test_interpolation_endpoints_are_the_posteriors_exactly():
    qa, qb = random_posterior((3, 6, 5, 2), 0), random_posterior((3, 6, 5, 2), 1)
    for t, q in ((0.0, qa), (1.0, qb)):
        q_t = align.interpolate(qa, qb, t)
        for got, want in ((q_t.means, q.means), (q_t.sds, q.sds)):
            for (W, b), (W0, b0) in zip(got, want):
                np.testing.assert_array_equal(W, W0)
                np.testing.assert_array_equal(b, b0)
    middle = align.interpolate(qa, qb, 0.25)
    np.testing.assert_allclose(middle.sds[1][0], 0.75 * qa.sds[1][0] + 0.25 * qb.sds[1][0])
    assert align.w2_distance(qa, middle) == pytest.approx(0.25 * align.w2_distance(qa, qb))


def test_predictive_with_zero_spread_is_the_mean_network():
    sizes = (4, 6, 3)
    q = random_posterior(sizes, 0)
    point = DiagonalGaussian.from_layers(q.means, [(np.zeros_like(W), np.zeros_like(b)) for W, b in q.sds])
    x = torch.randn(50, 4, generator=torch.Generator().manual_seed(0))
    y = torch.randint(0, 3, (50,), generator=torch.Generator().manual_seed(1))
    loss, accuracy, influence = align.evaluate(point, align.standard_noise(sizes, 5, 0), x, y)
    logits = torch.tensor(mlp.forward(q.means, x.double().numpy()))
    assert loss == pytest.approx(float(F.cross_entropy(logits, y)), rel=1e-5)
    assert accuracy == pytest.approx(float((logits.argmax(1) == y).double().mean()))
    # Every draw is the mean network: each weighs on the loss alike, and the loss has no Monte-Carlo error.
    np.testing.assert_allclose(influence, 1.0, rtol=1e-6)
    assert align.loss_error(influence) == pytest.approx(0.0, abs=1e-6)


def test_predictive_averages_probabilities_not_logits():
    sizes = (1, 2, 2)
    q = random_posterior(sizes, 0, sd_scale=3.0)
    noise = align.standard_noise(sizes, 3, 0)
    x = torch.tensor([[0.7]])
    log_probs = align.predictive_log_probs(q, noise, x)
    by_hand = []
    for s in range(3):
        sample = [
            (mW + sW * eW, mb + sb * eb)
            for (mW, mb), (sW, sb), (eW, eb) in zip(q.means, q.sds, q.layout.layers(noise[s].double().numpy()))
        ]
        by_hand.append(torch.softmax(torch.tensor(mlp.forward(sample, x.double().numpy())), -1))
    np.testing.assert_allclose(log_probs.exp().numpy(), torch.stack(by_hand).mean(0).numpy(), rtol=1e-5)


@pytest.mark.parametrize(
    "values, expected",
    [
        ([1.0, 1.0, 1.0], 0.0),
        ([0.0, 2.0, 1.0], 1.5),  # straight line at t = ½ is 0.5
        ([1.0, 0.2, 1.0], 0.0),  # a dip is no barrier
        ([0.0, 0.0, 0.0, 0.0, 3.0], 0.0),  # rising along the line's end
    ],
)
def test_barrier_heights(values, expected):
    ts = np.linspace(0, 1, len(values))
    assert align.barrier(ts, values) == pytest.approx(expected)


def test_accuracy_barrier_is_the_drop_below_the_line():
    assert align.barrier([0, 0.5, 1], [0.9, 0.6, 0.8], higher_is_worse=False) == pytest.approx(0.25)


@pytest.mark.parametrize("ts, values", [([0, 1], [1.0]), ([0.1, 1], [1, 1]), ([0, 0.9], [1, 1]), ([0], [1])])
def test_barrier_needs_a_path_from_zero_to_one(ts, values):
    with pytest.raises(ValueError, match="from 0 to 1"):
        align.barrier(ts, values)


# --- the experiment -----------------------------------------------------------------------------


def test_moons_are_two_balanced_interleaved_classes():
    x, y = align_lab.make_moons(1000, 0.0, np.random.default_rng(0))
    assert x.shape == (1000, 2) and set(y) == {0, 1} and y.sum() == 500
    np.testing.assert_allclose(x.mean(0), 0, atol=0.1)
    np.testing.assert_allclose(x.std(0), 1, atol=0.1)
    again, _ = align_lab.make_moons(1000, 0.0, np.random.default_rng(0))
    np.testing.assert_array_equal(x, again)
    # Not linearly separable: the best threshold along any direction errs on > 5 % of the points.
    for angle in np.linspace(0, np.pi, 36, endpoint=False):
        proj = x @ np.array([np.cos(angle), np.sin(angle)])
        order = np.argsort(proj)
        errors = np.cumsum(y[order] == 0) + (y.sum() - np.cumsum(y[order] == 1))  # class 1 above the cut
        best = min(errors.min(), len(y) - errors.max())
        assert best > 50


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("task", "cifar", "task must be one of"),
        ("width", 1, "width"),
        ("depth", 0, "depth"),
        ("train_size", 5, "train_size"),
        ("noise", -0.1, "noise"),
        ("steps", 0, "steps"),
        ("lr", 0.0, "lr"),
        ("lr", float("nan"), "lr"),
        ("prior_scale", 0.0, "prior_scale"),
        ("init_sd", 2.0, "init_sd"),
        ("samples", 0, "samples"),
        ("path_points", 2, "path_points"),
        ("seed", -1, "seed"),
        ("width", 3.5, "width"),
        ("depth", True, "depth"),
    ],
)
def test_invalid_configs_are_refused(field, value, message):
    with pytest.raises(ValueError, match=message):
        align_lab.AlignConfig(**{field: value}).validate()


def test_every_bad_field_is_named_at_once():
    with pytest.raises(ValueError) as error:
        align_lab.AlignConfig(task="cifar", width=1, lr=0.0).validate()
    assert all(f"{name} must be" in str(error.value) for name in ("task", "width", "lr"))


def test_mnist_task_needs_its_data():
    with pytest.raises(ValueError, match="MNIST"):
        align_lab.load_task(align_lab.AlignConfig(task="mnist"))


SMALL = align_lab.AlignConfig(width=16, depth=2, steps=300, samples=8, path_points=11, seed=3)


@pytest.fixture(scope="module")
def small_run():
    data = align_lab.load_task(SMALL)
    pair = align_lab.train_pair(SMALL, data)
    return data, pair, align_lab.alignment_report(pair, data)


def test_training_raises_the_elbo_and_gives_two_different_posteriors(small_run):
    _, pair, report = small_run
    assert pair.elbo.shape == (50, 2) and pair.elbo_steps[-1] == SMALL.steps
    assert np.all(pair.elbo[-1] > pair.elbo[0] + 0.3)
    assert align.w2_distance(pair.qa, pair.qb) > 1.0
    assert report.accuracy_a > 0.85 and report.accuracy_b > 0.85


def test_training_is_reproducible():
    config = align_lab.AlignConfig(width=4, depth=1, steps=20, seed=5)
    data = align_lab.load_task(config)
    one, two = align_lab.train_pair(config, data), align_lab.train_pair(config, data)
    np.testing.assert_array_equal(one.elbo, two.elbo)
    assert align.w2_distance(one.qb, two.qb) == 0.0


def test_report_keys_and_consistency(small_run):
    _, pair, report = small_run
    public = results.to_json(report)
    for key in (
        "barrier_before",
        "barrier_after",
        "w2_before",
        "w2_after",
        "barrier_weight_matching",
        "w2_weight_matching",
        "paths",
        "permutations",
        "summary",
    ):
        assert key in public
    assert not any(key.startswith("_") for key in public)
    assert not {"alignments", "ends", "noise"} & set(public)  # in memory only: for the page
    assert public["config"] == results.to_json(SMALL) and public["w2_after"] == report.w2_after
    assert report.w2_after <= report.w2_before
    assert report.w2_before == pytest.approx(align.w2_distance(pair.qa, pair.qb))
    assert report.w2_after == pytest.approx(
        align.w2_distance(pair.qa, align.permute(pair.qb, [np.array(p) for p in report.permutations]))
    )
    # Every path starts at q_A with the same noise: the same loss at t = 0.
    starts = {name: path["loss"][0] for name, path in report.paths.items()}
    assert len(set(starts.values())) == 1
    assert report.paths["before"]["t"] == list(np.linspace(0, 1, 11))
    for name, row in report.summary.items():
        assert row["barrier"] == align.barrier(report.paths[name]["t"], report.paths[name]["loss"])
        assert len(row["layer_w2"]) == 3 and len(row["units_moved"]) == 2


def test_the_delta_method_error_of_a_barrier_is_the_spread_over_independent_draws(small_run):
    """Brute force: 150 independent sets of 16 draws, each scoring q_A, the midpoint and q_B. The spread of the
    midpoint's rise above the line, L(½) − ½L(0) − ½L(1), over the sets is what :func:`align.loss_error` says from
    one set's influences (measured: 0.93–0.94 of it, the log's curvature apart); one point's error likewise."""
    data, pair, _ = small_run
    points = (pair.qa, align.interpolate(pair.qa, pair.qb, 0.5), pair.qb)
    rises, rise_errors, losses, loss_errors = [], [], [], []
    for index in range(150):
        noise = align.standard_noise(SMALL.sizes, 16, 1000 + index)
        scores = [align.evaluate(q, noise, data.x_test, data.y_test) for q in points]
        influences = np.stack([score.influence for score in scores])
        rises.append(scores[1].loss - 0.5 * scores[0].loss - 0.5 * scores[2].loss)
        rise_errors.append(align.loss_error(influences, [-0.5, 1.0, -0.5]))
        losses.append(scores[1].loss)
        loss_errors.append(align.loss_error(influences[1]))
    assert 0.8 < np.mean(rise_errors) / np.std(rises, ddof=1) < 1.2
    assert 0.8 < np.mean(loss_errors) / np.std(losses, ddof=1) < 1.2


def test_a_barriers_error_is_that_of_its_highest_point(small_run):
    data, pair, report = small_run
    noise = align.standard_noise(SMALL.sizes, SMALL.samples, SMALL.seed * 2 + 4)
    ts = np.linspace(0, 1, SMALL.path_points)
    path = align.path(pair.qa, pair.qb, ts, noise, data.x_test, data.y_test)
    top = int(np.argmax(np.array(path["loss"]) - ((1 - ts) * path["loss"][0] + ts * path["loss"][-1])))
    weights = np.zeros(len(ts))
    weights[[0, top, -1]] = [-(1 - ts[top]), 1.0, -ts[top]]
    expected = align.loss_error(path["influence"], weights)
    assert report.barrier_before_se == pytest.approx(expected, rel=1e-9) and expected > 0
    assert report.summary["before"]["barrier_se"] == report.barrier_before_se
    assert "influence" not in report.paths["before"]  # the draws' influences stay out of the report
    assert align.barrier_error([0.0, 1.0], [1.0, 2.0], np.ones((2, 4))) == 0.0  # no inner point: no rise


def test_the_barrier_collapses_after_alignment_on_the_default_task():
    """The lab's claim on its default settings (seed 0: 0.402 ± 0.029 → 0.004 ± 0.003 nats, below twice its
    Monte-Carlo error; seeds 0-9: 0.37-0.61 → ≤ 0.034)."""
    report = align_lab.run(align_lab.AlignConfig())
    assert report.barrier_before > 0.2 and report.barrier_before > 5 * report.barrier_before_se
    assert report.barrier_after < 0.05 and report.barrier_after < 2 * report.barrier_after_se
    assert report.barrier_weight_matching < 0.05
    assert report.w2_after < 0.6 * report.w2_before


def test_diverged_training_is_reported_not_returned():
    config = align_lab.AlignConfig(width=4, depth=1, steps=10, seed=0)
    data = align_lab.load_task(config)
    broken = align_lab.Dataset(data.x_train * float("nan"), data.y_train, data.x_test, data.y_test)
    with pytest.raises(results.TrainingDiverged, match="diverged at step 1"):
        align_lab.train_pair(config, broken)


def test_progress_is_reported_with_the_elbo_so_far():
    config = align_lab.AlignConfig(width=4, depth=1, steps=100, seed=0)
    calls = []
    align_lab.train_pair(config, align_lab.load_task(config), lambda *args: calls.append(args))
    assert [c[0] for c in calls] == list(range(2, 101, 2))
    step, steps, elbo_steps, elbo = calls[-1]
    assert steps == 100 and elbo.shape == (50, 2) and list(elbo_steps) == list(range(2, 101, 2))


def test_predictive_grid_is_a_probability_map(small_run):
    data, pair, report = small_run
    extent = align_lab.moons_extent(data)
    xs, ys, p = align_lab.predictive_grid(pair.qa, report.noise, extent, resolution=20)
    assert p.shape == (20, 20) and np.all((p >= 0) & (p <= 1))
    assert xs[0] == extent[0][0] and ys[-1] == extent[1][1]
    assert p.min() < 0.1 and p.max() > 0.9  # both classes somewhere


def test_assignment_view_is_the_cost_matrix_in_either_order(small_run):
    _, pair, report = small_run
    for index, perm in enumerate(report.alignments["w2"].perms):
        perms = report.alignments["w2"].perms
        own = align_lab.assignment_view(pair.qa, pair.qb, perms, index, aligned=False)
        aligned = align_lab.assignment_view(pair.qa, pair.qb, perms, index, aligned=True)
        others = [p if i != index else np.arange(len(p)) for i, p in enumerate(report.alignments["w2"].perms)]
        cost = align.unit_distances(pair.qa, align.permute(pair.qb, others), index, "w2")
        assert np.allclose(own.distance**2, np.maximum(cost, 0))  # W₂ distances of the other layers' alignment
        assert list(own.matched) == list(perm) and list(aligned.matched) == list(range(len(perm)))
        assert np.allclose(aligned.distance, own.distance[:, perm]) and list(aligned.columns) == list(perm)
        assert np.allclose(own.above_nearest.min(axis=1), 0) and (own.above_nearest >= 0).all()
        # The matches, one per row and column, minimise the total cost: the assignment the alignment reached.
        rows, columns = linear_sum_assignment(cost)
        assert cost[np.arange(len(perm)), perm].sum() <= cost[rows, columns].sum() + 1e-6
