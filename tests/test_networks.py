"""The posterior-approximation lab's networks: the flat vector and torch's module agree, the batched
forward equals one network at a time, and symmetry removal is a canonical form of each symmetry class."""

import numpy as np
import pytest
import torch

from symlab.lib import networks, symmetry

ARCHS = [networks.architecture("convnet"), networks.architecture("mlp", 6)]


@pytest.fixture(params=ARCHS, ids=lambda a: a.name)
def arch(request):
    return request.param


def test_the_convnet_is_small_with_a_grouped_second_convolution():
    arch = networks.architecture("convnet")
    assert arch.n_params == 350
    assert arch.module().conv2.groups == 2
    assert [name for name, _ in arch.layers] == ["conv1", "conv2", "fc"]
    assert sum(s.stop - s.start for _, s in arch.layers) == arch.n_params


def test_the_flat_vector_is_the_modules_parameters_in_order(arch):
    flat = arch.init(1, torch.Generator().manual_seed(0))[0]
    module = arch.module()
    torch.nn.utils.vector_to_parameters(flat, module.parameters())
    x = torch.randn(4, 1, 28, 28)
    assert torch.equal(torch.nn.utils.parameters_to_vector(module.parameters()), flat)
    assert torch.allclose(module(x), arch.logits(flat, x), atol=1e-6)


def test_the_mlp_is_the_other_labs_layout():
    arch = networks.architecture("mlp", 5)
    flat = arch.init(1, torch.Generator().manual_seed(0)).double()
    W1, b1 = networks.mlp_layers(arch, flat[0])[0]
    assert torch.equal(W1, arch.parameters(flat[0])["hidden.weight"])
    assert torch.equal(b1, arch.parameters(flat[0])["hidden.bias"])


def test_default_initialisation_bounds_follow_each_layers_fan_in(arch):
    flat = arch.init(200, torch.Generator().manual_seed(1))
    for name, part in arch.parameters(flat).items():
        layer = name.rsplit(".", 1)[0]
        fan_in = int(np.prod(arch.shapes[f"{layer}.weight"][1:]))
        bound = 1 / np.sqrt(fan_in)
        assert part.abs().max() <= bound
        assert part.abs().max() > 0.9 * bound  # drawn over the whole interval, not a narrower one


def test_batched_logits_equal_one_network_at_a_time(arch):
    flat = arch.init(3, torch.Generator().manual_seed(2)).double()
    own = torch.randn(3, 5, 1, 28, 28, dtype=torch.float64)
    shared = own[0]
    expected_own = torch.stack([arch.logits(flat[i], own[i]) for i in range(3)])
    expected_shared = torch.stack([arch.logits(flat[i], shared) for i in range(3)])
    assert torch.allclose(networks.batched_logits(arch, flat, own), expected_own, atol=1e-12)
    assert torch.allclose(networks.batched_logits(arch, flat, shared), expected_shared, atol=1e-12)


@pytest.mark.parametrize("key", networks.REMOVAL_KEYS)
@pytest.mark.parametrize("scaling", [False, True])
def test_removal_keeps_the_function(arch, key, scaling):
    flat = arch.init(4, torch.Generator().manual_seed(3)).double()
    x = torch.randn(6, 1, 28, 28, dtype=torch.float64)
    canonical = torch.tensor(networks.remove_symmetries(arch, flat.numpy(), key, scaling))
    assert torch.allclose(
        networks.batched_logits(arch, canonical, x), networks.batched_logits(arch, flat, x), atol=1e-10
    )
    assert not torch.allclose(canonical, flat)  # it did move something


def random_symmetry(arch, flat: np.ndarray, rng) -> np.ndarray:
    """A random element of the network's symmetry group applied to each network of ``flat[nets, P]``: permuted
    hidden units (the convnet's channels within their groups, or whole groups) and positive scalings of every
    hidden unit."""
    if arch.name == "mlp":
        layers = networks.mlp_layers(arch, flat)
        perm = np.stack([rng.permutation(arch.width) for _ in range(len(flat))])
        layers = symmetry.permute_units(symmetry.as_layers(layers), 0, perm)
        layers = symmetry.scale_units(layers, [rng.normal(size=(len(flat), arch.width))])
        return np.concatenate([part for W, b in layers for part in (W.reshape(len(flat), -1), b)], -1)
    first, second = networks.random_convnet_permutation(rng, (len(flat),))
    moved = networks.convnet_permutation(arch, flat, first, second)
    p = arch.parameters(moved)
    first_scales, second_scales = (np.exp(rng.normal(size=(len(flat), networks.CHANNELS))) for _ in range(2))
    p["conv1.weight"] *= first_scales[..., None, None, None]
    p["conv1.bias"] *= first_scales
    inputs = (np.arange(networks.CHANNELS)[:, None] // 2) * 2 + np.arange(2)  # output k's inputs, by channel
    p["conv2.weight"] /= first_scales[..., inputs][..., None, None]
    p["conv2.weight"] *= second_scales[..., None, None, None]
    p["conv2.bias"] *= second_scales
    p["fc.weight"] /= np.repeat(second_scales, networks.POOLED, -1)[:, None, :]
    return moved


@pytest.mark.parametrize("key", networks.REMOVAL_KEYS)
def test_removal_maps_a_whole_symmetry_class_to_one_network(arch, key):
    rng = np.random.default_rng(4)
    flat = arch.init(5, torch.Generator().manual_seed(4)).double().numpy()
    moved = random_symmetry(arch, flat, rng)
    x = torch.randn(3, 1, 28, 28, dtype=torch.float64)
    assert torch.allclose(
        networks.batched_logits(arch, torch.tensor(moved), x),
        networks.batched_logits(arch, torch.tensor(flat), x),
        atol=1e-9,
    )
    assert np.abs(moved - flat).max() > 0.1
    np.testing.assert_allclose(
        networks.remove_symmetries(arch, moved, key), networks.remove_symmetries(arch, flat, key), atol=1e-12
    )


@pytest.mark.parametrize("key", networks.REMOVAL_KEYS)
def test_copy_labels_change_under_a_symmetry_and_not_under_a_small_step(arch, key):
    """A network moved by a random symmetry sits in another copy (another label) unless the move happened to be the
    one that leaves its sorting alone; a step too small to reorder any unit keeps the label."""
    rng = np.random.default_rng(7)
    flat = arch.init(20, torch.Generator().manual_seed(7)).double().numpy()
    moved = random_symmetry(arch, flat, rng)
    labels, moved_labels = networks.copy_labels(arch, flat, key), networks.copy_labels(arch, moved, key)
    assert labels.shape[:-1] == (20,)
    changed = (labels != moved_labels).any(-1)
    same_network = np.abs(networks.remove_symmetries(arch, moved, key) - networks.remove_symmetries(arch, flat, key))
    assert same_network.max() < 1e-12 and changed.sum() >= 15
    assert (networks.copy_labels(arch, flat + 1e-9 * rng.standard_normal(flat.shape), key) == labels).all()


def test_a_permutation_that_mixes_groups_is_not_a_symmetry_and_the_ones_offered_are():
    arch = networks.architecture("convnet")
    flat = arch.init(1, torch.Generator().manual_seed(5)).double().numpy()
    x = torch.randn(3, 1, 28, 28, dtype=torch.float64)
    out = lambda f: networks.batched_logits(arch, torch.tensor(f), x)  # noqa: E731
    mixed = networks.convnet_permutation(arch, flat, np.array([0, 2, 1, 3]), np.array([0, 2, 1, 3]))
    assert not torch.allclose(out(mixed), out(flat), atol=1e-6)
    swapped = networks.convnet_permutation(arch, flat, np.array([3, 2, 1, 0]), np.array([2, 3, 0, 1]))
    assert torch.allclose(out(swapped), out(flat), atol=1e-10)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="architecture"):
        networks.architecture("resnet")
    with pytest.raises(ValueError, match="hidden units"):
        networks.architecture("mlp", 0)
    arch = networks.architecture("convnet")
    with pytest.raises(ValueError, match="350 parameters"):
        arch.parameters(torch.zeros(349))
    with pytest.raises(ValueError, match="removal key"):
        networks.remove_symmetries(arch, np.zeros(350), "median")
