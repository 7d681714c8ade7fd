"""Many networks trained as one computation: each comes out as it would trained alone."""

import pytest
import torch

from symlab.lib import ensembles, networks


def _data(n=96, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, 28, 28, generator=g)
    return x, torch.randint(0, 10, (n,), generator=g)


@pytest.mark.parametrize("name", ["convnet", "mlp"])
def test_batched_training_equals_one_network_at_a_time(name):
    arch = networks.architecture(name, 8)
    x, y = _data()
    recipe = ensembles.Recipe(epochs=2, batch_size=32, lr=0.05, momentum=0.9, weight_decay=1e-3, halve_at=(1,))
    together = ensembles.train_networks(arch, x, y, recipe, seed=3, indices=range(4))
    alone = torch.cat([ensembles.train_networks(arch, x, y, recipe, seed=3, indices=range(i, i + 1)) for i in range(4)])
    start = ensembles.initial_networks(arch, range(4), 3)
    assert (together - start).abs().max() > 1e-2  # they trained
    assert torch.allclose(together, alone, atol=1e-5, rtol=0)  # float32 rounding of a different summation order
    assert (together[0] - together[1]).abs().max() > 1e-2  # and are different networks


def test_a_network_is_the_same_whichever_batch_it_is_trained_in():
    arch = networks.architecture("mlp", 4)
    x, y = _data(64)
    recipe = ensembles.Recipe(epochs=1, batch_size=16)
    first = ensembles.train_networks(arch, x, y, recipe, seed=1, indices=range(0, 3))
    later = ensembles.train_networks(arch, x, y, recipe, seed=1, indices=range(2, 5))
    assert torch.allclose(first[2], later[0], atol=1e-6)


def test_the_gradient_is_each_networks_own():
    arch = networks.architecture("convnet")
    flat = arch.init(2, torch.Generator().manual_seed(0)).double()
    x, y = _data(10)
    xs, ys = torch.stack([x[:5], x[5:]]).double(), torch.stack([y[:5], y[5:]])
    grads = ensembles.batch_loss_gradients(arch, flat, xs, ys)
    for i in range(2):
        w = flat[i].clone().requires_grad_(True)
        loss = torch.nn.functional.cross_entropy(arch.logits(w, xs[i]), ys[i])
        assert torch.allclose(grads[i], torch.autograd.grad(loss, w)[0], atol=1e-12)


def test_the_learning_rate_halves_on_schedule():
    recipe = ensembles.Recipe(lr=0.04, halve_at=(15, 30))
    assert [recipe.lr_at(e) for e in (0, 14, 15, 29, 30, 59)] == [0.04, 0.04, 0.02, 0.02, 0.01, 0.01]


def test_divergence_is_an_error_naming_the_epoch():
    arch = networks.architecture("mlp", 4)
    x, y = _data(64)
    with pytest.raises(FloatingPointError, match="epoch 1"):
        ensembles.train_networks(arch, x * 1e6, y, ensembles.Recipe(epochs=1, lr=1e36), seed=0, indices=range(2))


def test_bad_recipes_are_refused_with_every_problem_named():
    with pytest.raises(ValueError, match="epochs.*batch_size.*lr"):
        ensembles.Recipe(epochs=0, batch_size=0, lr=-1).validate()
