"""SymLab's alignment (symlab.lib.align.align) against Git Re-Basin's weight matching (Ainsworth et al.
2023), reimplemented here: it must end at least as close as the best of 100 of the original's
random-order descents, on both objectives."""

from collections import defaultdict

import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

from symlab.labs.align import experiment as align_lab
from symlab.lib import align
from symlab.lib.gaussian import DiagonalGaussian

# --- Git Re-Basin's weight matching -------------------------------------------------------------
# A numpy transcription of samuela/git-re-basin, src/weight_matching.py (mlp_permutation_spec,
# get_permuted_param, weight_matching), kept to its structure: parameters are a dict of arrays named
# as its Flax MLP names them (kernels are (in, out), the transpose of SymLab's W), each permutation
# P_i lists the (array, axis) pairs it acts on, and each iteration visits the permutations in a
# random order, solves A = Σ w_a · (w_b permuted on its other axes)ᵀ by linear_sum_assignment(A,
# maximize=True), takes the answer unconditionally and records progress when newL > oldL + 1e-12;
# it stops after an iteration without progress. Two departures: the order of iteration k comes from
# numpy's generator seeded (rng_seed, k) instead of jax.random.permutation(rngmix(rng, k)), and with
# standard deviations given each kernel and bias has a twin "…/sd" on the same axes, so A gains the
# σ terms and the descent minimises W₂² instead of ‖μ_A − μ_B‖².
# Checked (tests below): with the order fixed to 0, 1, … it takes the same steps as SymLab's descent
# from the identity (the same permutations on random nets of one to four hidden layers, both
# objectives), and on one hidden layer it converges in one step to the exact assignment.


def mlp_permutation_spec(num_hidden_layers: int, keys) -> tuple[dict, dict]:
    """(perm_to_axes, axes_to_perm) for the arrays named in ``keys``."""
    axes_to_perm = {
        "Dense_0/kernel": (None, "P_0"),
        **{f"Dense_{i}/kernel": (f"P_{i - 1}", f"P_{i}") for i in range(1, num_hidden_layers)},
        **{f"Dense_{i}/bias": (f"P_{i}",) for i in range(num_hidden_layers)},
        f"Dense_{num_hidden_layers}/kernel": (f"P_{num_hidden_layers - 1}", None),
        f"Dense_{num_hidden_layers}/bias": (None,),
    }
    axes_to_perm = {key: axes_to_perm[key.removesuffix("/sd")] for key in keys}
    perm_to_axes = defaultdict(list)
    for key, axis_perms in axes_to_perm.items():
        for axis, perm in enumerate(axis_perms):
            if perm is not None:
                perm_to_axes[perm].append((key, axis))
    return dict(perm_to_axes), axes_to_perm


def as_params(layers, sds=None) -> dict:
    """SymLab's [(W, b), …] (W out × in) as the original's parameter dict, with the σ twins if given."""
    params = {}
    for suffix, part in (("", layers), ("/sd", sds or [])):
        for i, (W, b) in enumerate(part):
            params[f"Dense_{i}/kernel{suffix}"] = np.asarray(W).T
            params[f"Dense_{i}/bias{suffix}"] = np.asarray(b)
    return params


def get_permuted_param(axes_to_perm, perm, key, params, except_axis=None):
    w = params[key]
    for axis, p in enumerate(axes_to_perm[key]):
        if axis != except_axis and p is not None:
            w = np.take(w, perm[p], axis=axis)
    return w


def reference_weight_matching(
    layers_a, layers_b, rng_seed, max_iter=100, sds_a=None, sds_b=None, order=None
) -> list[np.ndarray]:
    """Permutations of q_B's hidden units (SymLab's convention: new unit k = old unit perms[l][k]).
    ``order``: visit the layers in this fixed order every iteration instead (for the checks)."""
    params_a, params_b = as_params(layers_a, sds_a), as_params(layers_b, sds_b)
    perm_to_axes, axes_to_perm = mlp_permutation_spec(len(layers_a) - 1, params_a)
    perm_sizes = {p: params_a[axes[0][0]].shape[axes[0][1]] for p, axes in perm_to_axes.items()}
    perm = {p: np.arange(n) for p, n in perm_sizes.items()}
    perm_names = list(perm.keys())
    for iteration in range(max_iter):
        progress = False
        visits = np.random.default_rng((rng_seed, iteration)).permutation(len(perm_names)) if order is None else order
        for p_ix in visits:
            p = perm_names[p_ix]
            n = perm_sizes[p]
            A = np.zeros((n, n))
            for wk, axis in perm_to_axes[p]:
                w_a = params_a[wk]
                w_b = get_permuted_param(axes_to_perm, perm, wk, params_b, except_axis=axis)
                w_a = np.moveaxis(w_a, axis, 0).reshape((n, -1))
                w_b = np.moveaxis(w_b, axis, 0).reshape((n, -1))
                A += w_a @ w_b.T
            ri, ci = linear_sum_assignment(A, maximize=True)
            assert (ri == np.arange(len(ri))).all()
            oldL = np.vdot(A, np.eye(n)[perm[p]])
            newL = np.vdot(A, np.eye(n)[ci, :])
            progress = progress or newL > oldL + 1e-12
            perm[p] = ci
        if not progress:
            break
    return [perm[f"P_{i}"] for i in range(len(perm_names))]


def reference_distance(layers_a, layers_b, perms, sds_a=None, sds_b=None) -> float:
    """‖θ_A − P θ_B‖ over the arrays of :func:`as_params` (with σ: the W₂ distance)."""
    params_a, params_b = as_params(layers_a, sds_a), as_params(layers_b, sds_b)
    _, axes_to_perm = mlp_permutation_spec(len(layers_a) - 1, params_a)
    perm = {f"P_{i}": p for i, p in enumerate(perms)}
    return float(
        np.sqrt(
            sum(
                np.sum((params_a[key] - get_permuted_param(axes_to_perm, perm, key, params_b)) ** 2) for key in params_a
            )
        )
    )


# --- the cases ----------------------------------------------------------------------------------


def perturbed_copy_pair(sizes, seed: int, noise: float) -> tuple[DiagonalGaussian, DiagonalGaussian]:
    """q_A with PyTorch-like means (U(±1/√fan_in)) and standard deviations U(0.01, 0.1); q_B is q_A with
    every hidden layer permuted, each mean moved by ``noise`` × its array's spread and each standard
    deviation by ``noise`` × 0.03. From noise ≈ 3 on 784-64-64-64-10 the permutation is mostly lost
    and coordinate descent has many local minima (on the means, the reference's 100 runs end at 50-70
    different distances)."""
    rng = np.random.default_rng(seed)
    means, sds = [], []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1 / np.sqrt(fan_in)
        means.append((rng.uniform(-bound, bound, (fan_out, fan_in)), rng.uniform(-bound, bound, fan_out)))
        sds.append((rng.uniform(0.01, 0.1, (fan_out, fan_in)), rng.uniform(0.01, 0.1, fan_out)))
    moved = align.permute(DiagonalGaussian.from_layers(means, sds), [rng.permutation(h) for h in sizes[1:-1]])
    means_b = [tuple(a + noise * a.std() * rng.standard_normal(a.shape) for a in layer) for layer in moved.means]
    sds_b = [tuple(np.abs(a + noise * 0.03 * rng.standard_normal(a.shape)) for a in layer) for layer in moved.sds]
    return DiagonalGaussian.from_layers(means, sds), DiagonalGaussian.from_layers(means_b, sds_b)


def reference_distances(qa, qb, objective: str, runs: int = 100) -> np.ndarray:
    """The distance each of ``runs`` seeds of the reference ends at."""
    sds = dict(sds_a=qa.sds, sds_b=qb.sds) if objective == "w2" else {}
    return np.array(
        [
            reference_distance(qa.means, qb.means, reference_weight_matching(qa.means, qb.means, seed, **sds), **sds)
            for seed in range(runs)
        ]
    )


def assert_no_farther_than_the_reference(qa, qb, objective: str, runs: int = 100) -> None:
    reference = reference_distances(qa, qb, objective, runs)
    result = align.align(qa, qb, objective)
    distance = np.sqrt(result.history[-1])
    sds = dict(sds_a=qa.sds, sds_b=qb.sds) if objective == "w2" else {}
    assert reference_distance(qa.means, qb.means, result.perms, **sds) == pytest.approx(distance, rel=1e-12)
    assert distance <= reference.min() * (1 + 1e-9), (distance, reference.min(), result.start)
    assert distance <= np.median(reference)


@pytest.mark.parametrize("objective", align.OBJECTIVES)
@pytest.mark.parametrize("seed", [0, 1])
def test_three_narrow_hidden_layers_no_farther_than_the_best_of_20_reference_runs(seed, objective):
    """The fast lane's twin of the next test (a twentieth of a second each): 784-16-16-16-10, noise 3, where the
    reference's 20 runs end at 7-10 different distances."""
    qa, qb = perturbed_copy_pair((784, 16, 16, 16, 10), seed, 3.0)
    assert_no_farther_than_the_reference(qa, qb, objective, runs=20)


@pytest.mark.slow  # 100 reference runs: 3-28 s each
@pytest.mark.parametrize("objective", align.OBJECTIVES)
@pytest.mark.parametrize("seed", [0, 1])
def test_three_hidden_layers_no_farther_than_the_best_of_100_reference_runs(seed, objective):
    """784-64-64-64-10, noise 3: the three fixed-order starts alone ended farther than the reference's
    best on both seeds and both objectives (seed 0: 24.8589 against 24.7955 on the means, 30.4613
    against 30.4570 for W₂; the default starts: 24.7548 and 30.4570). Over seeds 0-7 they lost on 9
    of 16; the default starts on 1 (seed 2, the means: 24.5762 against 24.5735, 0.011 %)."""
    assert_no_farther_than_the_reference(*perturbed_copy_pair((784, 64, 64, 64, 10), seed, 3.0), objective)


@pytest.fixture(scope="module")
def moons_pair():
    """The pair the alignment lab trains on its default settings (about 2 s)."""
    config = align_lab.AlignConfig()
    return align_lab.train_pair(config, align_lab.load_task(config))


@pytest.mark.slow  # the pair trained, then 100 reference runs
@pytest.mark.parametrize("objective", align.OBJECTIVES)
def test_the_moons_pair_no_farther_than_the_reference(moons_pair, objective):
    """2-64-64-2: the reference's best is layer 1 first (means: 8.9324; the three fixed-order starts:
    8.9365; the default starts: 8.9249)."""
    assert_no_farther_than_the_reference(moons_pair.qa, moons_pair.qb, objective)


@pytest.fixture(scope="module")
def trained_mnist_nets():
    """Eight 784-64-64-64-10 MLPs trained by SGD on MNIST from one seed (the symmetry lab's trainer, about 30 s)."""
    from symlab.labs.symmetry import experiment as symmetry_lab
    from symlab.lib.mnist_data import load_mnist

    config = symmetry_lab.MlpConfig(width=64, depth=3, instances=8, steps=3000, seed=1)
    run = symmetry_lab.train_mlps(config, load_mnist(None))
    return [[(W[net], b[net]) for W, b in run.layers] for net in range(8)]


def point_estimate(layers) -> DiagonalGaussian:
    return DiagonalGaussian.from_layers(layers, [(np.zeros_like(W), np.zeros_like(b)) for W, b in layers])


@pytest.mark.slow
def test_trained_mnist_nets_no_farther_than_the_references_median(trained_mnist_nets):
    """Weight matching of four pairs of SGD-trained nets. Measured (docs/science.md, § W2 alignment): the
    default starts end at or below the reference's best of 100 on all four pairs, the three fixed-order starts
    above it on all four. The best of 100 random restarts is itself a random draw, so one pair may lose by a
    hair on another machine's arithmetic: three of four, and no pair 0.05 % farther, are required."""
    beaten = 0
    for first in range(0, 8, 2):
        qa, qb = (point_estimate(net) for net in trained_mnist_nets[first : first + 2])
        reference = reference_distances(qa, qb, "means")
        distance = np.sqrt(align.align(qa, qb, "means").history[-1])
        fixed_order = np.sqrt(align.align(qa, qb, "means", starts=3).history[-1])
        assert distance <= np.median(reference) and distance <= fixed_order, first
        assert distance <= reference.min() * 1.0005, (first, distance, reference.min())
        beaten += distance <= reference.min() * (1 + 1e-9)
    assert beaten >= 3


@pytest.mark.slow  # 100 reference runs: 20-28 s
@pytest.mark.parametrize("objective", align.OBJECTIVES)
def test_two_wide_hidden_layers_no_farther_than_the_reference(objective):
    assert_no_farther_than_the_reference(*perturbed_copy_pair((784, 128, 128, 10), 0, 5.0), objective)


@pytest.mark.parametrize("objective", align.OBJECTIVES)
def test_one_hidden_layer_is_the_reference_exactly(objective):
    """One hidden layer: one exact assignment, whatever the order; the same permutation."""
    qa, qb = perturbed_copy_pair((784, 128, 10), 0, 3.0)
    sds = dict(sds_a=qa.sds, sds_b=qb.sds) if objective == "w2" else {}
    result = align.align(qa, qb, objective)
    np.testing.assert_array_equal(result.perms[0], reference_weight_matching(qa.means, qb.means, 0, **sds)[0])
    assert result.starts == 1


# --- the reimplementation's checks ----------------------------------------------------------------


@pytest.mark.parametrize("objective", align.OBJECTIVES)
@pytest.mark.parametrize(
    "sizes", [(3, 5, 2), (2, 8, 8, 2), (4, 6, 7, 5, 3), (10, 12, 12, 12, 12, 4)], ids=lambda s: "-".join(map(str, s))
)
def test_the_reference_in_fixed_order_takes_symlabs_steps(sizes, objective):
    """Layers visited 0, 1, … from the identity: the reference and SymLab's first descent agree."""
    for seed in range(3):
        qa, qb = perturbed_copy_pair(sizes, seed, 3.0)
        sds = dict(sds_a=qa.sds, sds_b=qb.sds) if objective == "w2" else {}
        reference = reference_weight_matching(qa.means, qb.means, 0, order=range(len(sizes) - 2), **sds)
        for found, expected in zip(align.align(qa, qb, objective, starts=1).perms, reference):
            np.testing.assert_array_equal(found, expected)


def test_the_reference_on_one_hidden_layer_converges_in_one_iteration():
    """The original's own test: with a single hidden layer it converges after one step."""
    qa, qb = perturbed_copy_pair((2, 10, 3), 123, 3.0)
    once = reference_weight_matching(qa.means, qb.means, 0, max_iter=1)
    np.testing.assert_array_equal(once[0], reference_weight_matching(qa.means, qb.means, 0)[0])
    assert not np.array_equal(once[0], np.arange(10))


# --- the starts ---------------------------------------------------------------------------------


def test_starts_are_counted_capped_and_reproducible():
    deep, shallow = perturbed_copy_pair((20, 12, 12, 12, 4), 0, 3.0), perturbed_copy_pair((20, 12, 4), 0, 3.0)
    result = align.align(*deep)
    assert result.starts == align.DEFAULT_STARTS and align.align(*shallow).starts == 1
    again = align.align(*deep)
    assert all(np.array_equal(p, q) for p, q in zip(result.perms, again.perms)) and result.start == again.start
    for bad in (0, align.MAX_STARTS + 1, 2.0):
        with pytest.raises(ValueError, match="starts"):
            align.align(*deep, starts=bad)
    with pytest.raises(ValueError, match="seed"):
        align.align(*deep, seed=-1)


@pytest.mark.parametrize("seed", range(3))
def test_more_starts_never_end_farther(seed):
    """More starts repeat the fewer's descents first; three are the fixed-order descents."""
    qa, qb = perturbed_copy_pair((30, 16, 16, 16, 5), seed, 3.0)
    results = [align.align(qa, qb, "w2", starts=starts) for starts in (1, 3, 6, 12, 32)]
    distances = [result.history[-1] for result in results]
    assert distances == sorted(distances, reverse=True)
    assert results[0].start == "identity" and results[1].start in align.START_POINTS
    assert [result.starts for result in results] == [1, 3, 6, 12, 32]
