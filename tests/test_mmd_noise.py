"""The noise behind every MMD² of the methods lab: the bootstrap (symlab.lib.mmd) held to resampled sets scored by
brute force, a reference's halves, and the rule that names a closest sample set only above its noise."""

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from symlab.labs.methods import experiment as ex
from symlab.lib import chains, mmd


def _brute_mmd2(x, y, metric: str, bandwidth: float) -> float:
    """The unbiased MMD² of two sets with repeats, leaving out each pair of a point with a copy of itself."""
    name, scale = ("sqeuclidean", bandwidth**2) if metric == "l2" else ("cityblock", bandwidth)
    (xs, x_origin), (ys, y_origin) = x, y
    within = []
    for points, origin in ((xs, x_origin), (ys, y_origin)):
        kernel = np.exp(-cdist(points, points, name) / scale)
        within.append(kernel[origin[:, None] != origin[None]].mean())
    return within[0] + within[1] - 2 * np.exp(-cdist(xs, ys, name) / scale).mean()


def test_a_bootstrap_replicate_is_the_resampled_sets_unbiased_mmd():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(12, 3)), rng.normal(size=(15, 3)) + 0.4
    x_counts, y_counts = mmd.bootstrap_counts(12, 4, rng), mmd.bootstrap_counts(15, 4, rng)
    replicates = mmd.bootstrap_mmd(x, y, x_counts, y_counts, kernels_per_family=3, seed=5)
    estimate = mmd.mmd_aggregate(x, y, kernels_per_family=3, seed=5)
    np.testing.assert_allclose(replicates[0], estimate.mmd2, atol=1e-6)  # all-ones counts: the estimate itself
    for b in range(1, 4):
        ix, iy = np.repeat(np.arange(12), x_counts[b].astype(int)), np.repeat(np.arange(15), y_counts[b].astype(int))
        brute = [
            _brute_mmd2((x[ix], ix), (y[iy], iy), "l2" if family == "gaussian" else "l1", h)
            for family, h in zip(estimate.families, estimate.bandwidths)
        ]
        np.testing.assert_allclose(replicates[b], brute, rtol=1e-10, atol=1e-12)


def test_a_resample_of_one_point_has_no_estimate_and_the_interval_leaves_it_out():
    x, y = np.array([[0.0], [1.0]]), np.array([[0.5], [2.0], [3.0]])
    counts = np.array([[1.0, 1.0], [2.0, 0.0]])
    replicates = mmd.bootstrap_mmd(x, y, counts, np.ones((2, 3)), kernels_per_family=2)
    assert np.isfinite(replicates[0]).all() and np.isnan(replicates[1]).all()
    assert mmd.interval(np.array([1.0, np.nan, 3.0]), 0.5) == pytest.approx((1.5, 2.5))


def test_the_bootstrap_spread_matches_the_spread_over_fresh_sets():
    """Over fresh draws of both sets, the estimate's standard deviation; the bootstrap's, from one pair of sets,
    should come within a factor of two of it."""
    rng = np.random.default_rng(1)
    fresh = [mmd.layerwise_mmd([rng.normal(size=(40, 2))], [rng.normal(size=(40, 2)) + 0.5]) for _ in range(60)]
    x, y = rng.normal(size=(40, 2)), rng.normal(size=(40, 2)) + 0.5
    boot = mmd.bootstrap_layerwise_mmd([x], [y], replicates=300)
    assert 0.5 < np.nanstd(boot) / np.std(fresh) < 2


def test_chain_halves_split_chains_or_one_chains_draws():
    draws = np.arange(4 * 6 * 2, dtype=float).reshape(4, 6, 2)
    first, second = ex.chain_halves(draws)
    np.testing.assert_array_equal(first, draws[:2].reshape(-1, 2))
    np.testing.assert_array_equal(second, draws[2:].reshape(-1, 2))
    first, second = ex.chain_halves(draws[:1])
    np.testing.assert_array_equal(first, draws[0, :3]) and np.testing.assert_array_equal(second, draws[0, 3:])
    assert chains.split_chain(draws).shape == (8, 3, 2)


def _report(values: dict, floor, seed=0, width=0.01):
    rows = [
        {
            "method": method,
            "modes": 1,
            "mmd_no_symmetry": value,
            "mmd_no_symmetry_interval": [value - width, value + width],
        }
        for method, value in values.items()
    ]
    return {"config": {"seed": seed}, "rows": rows, "reference_split_half_mmd_interval": floor}


def test_a_closest_set_is_named_only_above_the_floor_its_error_and_the_intervals():
    clear = [_report({"laplace": 0.10, "swag": 0.30, "mfvi": 0.9}, [-0.01, 0.02], seed) for seed in range(3)]
    claim = ex.closest_claim(clear, "mmd_no_symmetry", ex.checkpoint_floor)
    assert claim["closest"] == "laplace/1" and claim["runner_up"] == "swag/1" and claim["distinguishable"]
    assert claim["lead"] == pytest.approx(0.2) and claim["closest_on_seeds"] == 3
    below_floor = [_report({"laplace": 0.10, "swag": 0.30}, [0.2, 0.36], seed) for seed in range(3)]
    assert not ex.closest_claim(below_floor, "mmd_no_symmetry", ex.checkpoint_floor)["distinguishable"]
    overlapping = [_report({"laplace": 0.10, "swag": 0.30}, [0.0, 0.01], seed, width=0.15) for seed in range(3)]
    assert not ex.closest_claim(overlapping, "mmd_no_symmetry", ex.checkpoint_floor)["distinguishable"]
    noisy = [
        _report({"laplace": 0.1, "swag": 0.1 + lead}, [0, 0.001], i, 0.001) for i, lead in enumerate((0.4, 0.01, 0.01))
    ]
    claim = ex.closest_claim(noisy, "mmd_no_symmetry", ex.checkpoint_floor)
    assert claim["lead"] < 2 * claim["lead_se"] and not claim["distinguishable"]
    unmeasured = [_report({"laplace": 0.10, "swag": 0.30}, None)]
    assert ex.closest_claim(unmeasured, "mmd_no_symmetry", ex.checkpoint_floor)["floor"] is None
