"""R̂ and ESS (symlab/lib/chains.py) against ArviZ, an independent implementation, and against what they must say
of chains whose law is known."""

import arviz
import numpy as np
import pytest

from symlab.lib import chains


def ar1_chains(count: int, length: int, rho: float, shifts, seed: int, shape=()) -> np.ndarray:
    """``count`` AR(1) chains x_t = ρ x_{t−1} + √(1−ρ²) ε_t (stationary N(0, 1)), chain c shifted by shifts[c]."""
    rng = np.random.default_rng(seed)
    x = np.empty((count, length, *shape))
    x[:, 0] = rng.standard_normal((count, *shape))
    for t in range(1, length):
        x[:, t] = rho * x[:, t - 1] + np.sqrt(1 - rho**2) * rng.standard_normal((count, *shape))
    return x + np.reshape(shifts, (count,) + (1,) * (1 + len(shape)))


CASES = [
    pytest.param(4, 200, 0.0, (0, 0, 0, 0), (), id="iid"),
    pytest.param(4, 201, 0.9, (0, 0, 0, 0), (3,), id="correlated-odd-length"),
    pytest.param(3, 100, 0.5, (0, 0, 2), (2, 2), id="one-chain-apart"),
    pytest.param(2, 50, -0.6, (0, 0.1), (), id="anticorrelated"),
    pytest.param(1, 400, 0.7, (0,), (), id="one-chain"),
]


@pytest.mark.parametrize("count, length, rho, shifts, shape", CASES)
def test_rhat_and_ess_match_arviz(count, length, rho, shifts, shape):
    draws = ar1_chains(count, length, rho, shifts, seed=length, shape=shape)
    dataset = arviz.convert_to_dataset(draws)
    expected_ess = arviz.ess(dataset, method="bulk")["x"].values
    np.testing.assert_allclose(chains.ess(draws), expected_ess, rtol=1e-10)
    if count > 1:  # ArviZ's R̂ needs two chains
        expected_rhat = arviz.rhat(dataset, method="rank")["x"].values
        np.testing.assert_allclose(chains.rhat(draws), expected_rhat, rtol=1e-10)


def test_agreeing_chains_read_as_converged_and_apart_ones_do_not():
    together = ar1_chains(4, 2000, 0.5, (0, 0, 0, 0), seed=1)
    apart = ar1_chains(4, 2000, 0.5, (0, 0, 0, 3), seed=1)
    assert float(chains.rhat(together)) < 1.01
    assert float(chains.rhat(apart)) > 1.2
    # AR(1) with ρ: the integrated autocorrelation time is (1 + ρ)/(1 − ρ) = 3.
    assert float(chains.ess(together)) == pytest.approx(8000 / 3, rel=0.15)


def test_a_swapped_copy_of_a_mode_reads_as_unconverged():
    """Two chains in mirrored modes of a symmetric posterior: each weight's R̂ is far above 1, while a quantity
    the symmetry leaves alone (here the sum) agrees."""
    base = ar1_chains(2, 1000, 0.3, (0, 0), seed=2, shape=(2,)) * 0.1
    base[0] += (1.0, -1.0)
    base[1] += (-1.0, 1.0)
    assert chains.rhat(base).min() > 1.5  # rank-normalised, R̂ of chains wholly apart saturates (1.83 here)
    assert float(chains.rhat(base.sum(-1))) < 1.01


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="chains, draws"):
        chains.rhat(np.zeros(10))


@pytest.mark.parametrize("count, length, rho, shifts, shape", CASES)
def test_the_mean_standard_error_matches_arviz(count, length, rho, shifts, shape):
    draws = ar1_chains(count, length, rho, shifts, seed=length + 1, shape=shape)
    expected = arviz.mcse(arviz.convert_to_dataset(draws), method="mean")["x"].values
    np.testing.assert_allclose(chains.mcse_mean(draws), expected, rtol=1e-10)


def test_switches_count_each_change_of_label_per_chain():
    labels = np.array([[0, 0, 1, 1, 0], [1, 1, 1, 1, 1]])
    assert chains.switches(labels).tolist() == [2, 0]


def test_the_error_across_chains_is_the_spread_of_their_means_written_out():
    draws = np.random.default_rng(4).normal(size=(5, 7, 2))
    means = [[draws[c, :, k].sum() / 7 for c in range(5)] for k in range(2)]
    by_hand = [np.sqrt(sum((m - sum(ms) / 5) ** 2 for m in ms) / 4) / np.sqrt(5) for ms in means]
    np.testing.assert_allclose(chains.mcse_across_chains(draws), by_hand, rtol=1e-12)
    assert np.isnan(chains.mcse_across_chains(draws[:1])).all()


def test_a_proportion_the_chains_never_leave_has_an_error_of_the_rule_of_threes_scale():
    """All 4 × 500 draws on one side: the ESS's error and the chains' spread are 0, yet the proportion is not known
    to be exactly 1; with n = 400 effective draws, Agresti–Coull's error is about 1.4/n (a 95 % bound 3/n)."""
    always = np.ones((4, 500))
    error = chains.mcse_proportion(always, effective_draws=400)
    assert chains.mcse_mean(always) == 0 and chains.mcse_across_chains(always) == 0
    assert error == pytest.approx(np.sqrt(402 / 404 * 2 / 404 / 404), rel=1e-12)
    assert 1.3 / 400 < error < 1.5 / 400
    mixed = (np.random.default_rng(1).random((4, 500)) < 0.3).astype(float)
    assert chains.mcse_proportion(mixed, 1e9) >= max(chains.mcse_mean(mixed), chains.mcse_across_chains(mixed))


def test_where_the_diagnostics_part_from_arviz_as_the_science_page_says():
    """One chain: a split-R̂ of its halves, where ArviZ gives NaN; 6 draws per chain: no ESS, where ArviZ gives one."""
    rng = np.random.default_rng(0)
    one, few = rng.normal(size=(1, 200)), rng.normal(size=(4, 6))
    assert np.isfinite(chains.rhat(one[..., None])).all() and np.isnan(arviz.rhat(one))
    assert np.isnan(chains.ess(few[..., None])).all() and np.isfinite(arviz.ess(few))
