"""Tiny networks as functions of one flat parameter vector (the ``logits_fn(flat, x)`` that the posterior
approximations take), for tests small enough to check by brute force."""

import torch

MLP_PARAMETERS = 27  # 4·3 + 3 + 3·3 + 3


def mlp_logits(flat, x, activation=torch.relu):
    """A 4-3-3 MLP (``activation`` between the layers) on inputs ``x[n, 4]``."""
    W1, b1, W2, b2 = flat[:12].view(3, 4), flat[12:15], flat[15:24].view(3, 3), flat[24:27]
    return activation(x @ W1.T + b1) @ W2.T + b2


def tanh_mlp(flat, x):
    """The 4-3-3 MLP with tanh: smooth, so finite differences see no kink."""
    return mlp_logits(flat, x, torch.tanh)


def conv_logits():
    """A ReLU conv net on images ``x[n, 1, 6, 6]`` (a 3×3 convolution to 2 channels, a linear layer to 3
    classes) through ``torch.func.functional_call``: (its logits_fn, its 119 parameters)."""
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(32, 3))
    names = [(name, p.shape) for name, p in net.named_parameters()]
    sizes = [shape.numel() for _, shape in names]

    def logits(flat, x):
        params = {name: piece.view(shape) for (name, shape), piece in zip(names, flat.split(sizes))}
        return torch.func.functional_call(net, params, (x,))

    return logits, sum(sizes)


def classification_problem(net: str, n: int, generator: torch.Generator):
    """(logits_fn, parameter count, inputs, labels of 3 classes) for the "mlp" or the "conv" net."""
    if net == "mlp":
        logits, size, x = mlp_logits, MLP_PARAMETERS, torch.randn(n, 4, generator=generator)
    else:
        (logits, size), x = conv_logits(), torch.randn(n, 1, 6, 6, generator=generator)
    return logits, size, x, torch.randint(3, (n,), generator=generator)
