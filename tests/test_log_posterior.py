"""The posterior-approximations lab's full-batch log posterior (the density its HMC reference samples), against a
network-by-network sum of PyTorch's own cross-entropy."""

import torch
import torch.nn.functional as F

from symlab.labs.methods import experiment as methods
from symlab.labs.methods.config import WEIGHT_DECAY, MethodsConfig


def test_the_log_posterior_is_each_networks_log_likelihood_plus_its_gaussian_prior():
    config = MethodsConfig(train_size=1000)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(30, 1, 28, 28, generator=g), torch.randint(0, 10, (30,), generator=g)
    w = config.arch.init(3, g)
    variance = 1 / (1000 * WEIGHT_DECAY)
    expected = torch.stack(
        [
            -F.cross_entropy(config.arch.logits(one, x), y, reduction="sum") - one.square().sum() / (2 * variance)
            for one in w
        ]
    )
    torch.testing.assert_close(methods.log_posterior(config, x, y)(w), expected, rtol=1e-5, atol=1e-4)
    assert methods.prior_variance(config) == variance
