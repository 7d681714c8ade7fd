"""Many independently trained networks, stepped as one computation (docs/science.md, § Posterior
approximations): the reference posterior's checkpoints and a deep ensemble's members.

Each network has its own initialisation and its own minibatch order, from generators seeded by
(seed, network index), so network i comes out the same whether it is trained alone or among
others (:func:`train_networks` with one network is the one-at-a-time baseline). One step computes
every network's gradient as one backward pass through :func:`symlab.lib.networks.batched_logits` over the
stacked flat parameters (batched matrix products), then one SGD update of the
whole stack: SGD with momentum μ and L2 weight decay λ, v ← μv + g + λw, w ← w − ηv,
with a step schedule of the learning rate (Laurent et al. App. B.1: SGD, lr 0.04 halved at epochs
15 and 30, batch 64, weight decay).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from symlab.lib.networks import Architecture, batched_logits, last_layer_inputs


@dataclass(frozen=True)
class Recipe:
    """SGD settings: ``epochs`` over ``n`` training images in batches of ``batch_size``; the learning rate
    ``lr`` is halved at each epoch in ``halve_at``."""

    epochs: int = 3
    batch_size: int = 64
    lr: float = 0.04
    momentum: float = 0.0
    weight_decay: float = 5e-4
    halve_at: tuple[int, ...] = ()
    dropout: float = 0.0  # on the last layer's inputs, as Laurent et al.'s MC dropout networks are trained

    def validate(self) -> Recipe:
        problems = []
        if not (isinstance(self.epochs, int) and self.epochs >= 1):
            problems.append(f"epochs must be a whole number >= 1, got {self.epochs!r}")
        if not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            problems.append(f"batch_size must be a whole number >= 1, got {self.batch_size!r}")
        if not (self.lr > 0):
            problems.append(f"lr must be > 0, got {self.lr!r}")
        if not (0 <= self.momentum < 1):
            problems.append(f"momentum must be in [0, 1), got {self.momentum!r}")
        if not (0 <= self.dropout < 1):
            problems.append(f"dropout must be in [0, 1), got {self.dropout!r}")
        if not (self.weight_decay >= 0):
            problems.append(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    def lr_at(self, epoch: int) -> float:
        return self.lr * 0.5 ** sum(epoch >= e for e in self.halve_at)


def network_generator(seed: int, index: int, purpose: int) -> torch.Generator:
    """Network ``index``'s own stream for ``purpose`` (0: initialisation, 1: minibatch order, 2: dropout)."""
    return torch.Generator().manual_seed(((seed * 1_000_003 + index) * 7 + purpose) % (2**63 - 1))


def initial_networks(arch: Architecture, indices: range, seed: int) -> torch.Tensor:
    """Networks ``[len(indices), P]``, network i drawn from its own initialisation stream."""
    return torch.cat([arch.init(1, network_generator(seed, i, 0)) for i in indices])


def minibatch_orders(n: int, indices: range, seed: int, epoch_count: int) -> list[torch.Tensor]:
    """Per epoch, each network's permutation of the ``n`` training images ``[networks, n]``."""
    generators = [network_generator(seed, i, 1) for i in indices]
    return [torch.stack([torch.randperm(n, generator=g) for g in generators]) for _ in range(epoch_count)]


def batch_loss_gradients(
    arch: Architecture, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, keep: torch.Tensor | None = None
) -> torch.Tensor:
    """Each network's mean cross-entropy gradient ``[nets, P]`` on its own minibatch ``x[nets, B, …]``,
    ``y[nets, B]`` (dropout's ``keep`` mask as :func:`batched_logits` takes it): the gradient of the sum of
    the networks' losses, as each loss has its own parameters."""
    flat = flat.detach().requires_grad_(True)
    logits = batched_logits(arch, flat, x, keep)
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="sum") / y.shape[1]
    return torch.autograd.grad(loss, flat)[0]


def dropout_masks(arch: Architecture, generators: list[torch.Generator], size: int, rate: float, dtype):
    """Each network's dropout mask for a minibatch, ``[nets, size, features]`` (None without dropout)."""
    if rate == 0:
        return None
    features = last_layer_inputs(arch)
    return torch.stack([(torch.rand(size, features, generator=g) >= rate).to(dtype) for g in generators]) / (1 - rate)


def train_networks(
    arch: Architecture, x: torch.Tensor, y: torch.Tensor, recipe: Recipe, seed: int, indices: range, on_epoch=None
) -> torch.Tensor:
    """Train networks ``indices`` (each its own init and minibatch order) on images ``x[n, 1, 28, 28]`` and
    labels ``y[n]`` together, on their device; returns their flat parameters ``[len(indices), P]``.
    ``on_epoch(epoch, flat)`` after each epoch. Raises FloatingPointError when a network's parameters stop being
    finite. The random streams are drawn on the CPU wherever the networks train, so a GPU trains the same networks
    (to rounding): an epoch's orders cross once, a minibatch's dropout masks once a step."""
    recipe.validate()
    flat = initial_networks(arch, indices, seed).to(x.device, x.dtype)
    velocity = torch.zeros_like(flat)
    n = len(y)
    masks = [network_generator(seed, i, 2) for i in indices]
    for epoch, orders in enumerate(minibatch_orders(n, indices, seed, recipe.epochs)):
        lr = recipe.lr_at(epoch)
        orders = orders.to(x.device)
        for start in range(0, n, recipe.batch_size):
            batch = orders[:, start : start + recipe.batch_size]
            keep = dropout_masks(arch, masks, batch.shape[1], recipe.dropout, x.dtype)
            keep = None if keep is None else keep.to(x.device)
            grads = batch_loss_gradients(arch, flat, x[batch], y[batch], keep)
            velocity.mul_(recipe.momentum).add_(grads).add_(flat, alpha=recipe.weight_decay)
            flat.sub_(velocity, alpha=lr)
        if not torch.isfinite(flat).all():
            bad = (~torch.isfinite(flat).all(-1)).nonzero().flatten().tolist()
            raise FloatingPointError(
                f"training diverged in epoch {epoch + 1}: networks {bad[:5]} are not finite (lr {lr:g} too large?)"
            )
        if on_epoch is not None:
            on_epoch(epoch, flat)
    return flat
