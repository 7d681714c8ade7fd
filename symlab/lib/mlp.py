"""The ReLU MLPs every lab uses: one representation and one forward pass (docs/science.md,
§ Notation, § Weight-space symmetries).

A network's parameters are one flat vector W₁, b₁, W₂, b₂, … (each W is out × in, row-major);
its :class:`Layout` (the layer sizes) says where each layer sits and gives (W, b) views of it.
Leading dimensions are a batch of networks: ``flat[..., n_params]`` has views ``W[..., out, in]``
and ``b[..., out]``. Layouts, views, the forward pass and unit rows take numpy arrays and torch
tensors alike (parameters are drawn with torch generators); the symmetry operations
(:mod:`symlab.lib.symmetry`) act on the (W, b) views.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch


@dataclass(frozen=True)
class Layout:
    """Layer sizes (d_in, h₁, …, d_out) and where each layer's weights sit in the flat vector."""

    sizes: tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "sizes", tuple(int(size) for size in self.sizes))
        if len(self.sizes) < 3 or min(self.sizes) < 1:
            raise ValueError(f"an MLP needs an input, at least one hidden layer and an output: {self.sizes}")

    @property
    def hidden(self) -> tuple[int, ...]:
        return self.sizes[1:-1]

    @cached_property
    def offsets(self) -> tuple[tuple[int, int, int], ...]:
        """(start of W, start of b, end of b) for each layer."""
        spans, start = [], 0
        for fan_in, fan_out in zip(self.sizes[:-1], self.sizes[1:]):
            spans.append((start, start + fan_out * fan_in, start + fan_out * fan_in + fan_out))
            start = spans[-1][2]
        return tuple(spans)

    @property
    def n_params(self) -> int:
        return self.offsets[-1][2]

    def layers(self, flat) -> list:
        """(W, b) views into ``flat[..., n_params]`` (writing to them writes to ``flat``)."""
        if flat.shape[-1:] != (self.n_params,):
            raise ValueError(f"the layout {self.sizes} has {self.n_params} parameters, got shape {tuple(flat.shape)}")
        batch = tuple(flat.shape[:-1])
        return [(flat[..., w0:b0].reshape(*batch, fan_out, fan_in), flat[..., b0:end])
                for (w0, b0, end), fan_in, fan_out in zip(self.offsets, self.sizes[:-1], self.sizes[1:])]


def flatten(layers) -> tuple[Layout, np.ndarray | torch.Tensor]:
    """The layout and flat vector of ``[(W₁, b₁), …]`` (the same leading batch dimensions in every
    array): the inverse of :meth:`Layout.layers`."""
    batch = tuple(layers[0][0].shape[:-2])
    layout = Layout((layers[0][0].shape[-1], *(W.shape[-2] for W, _ in layers)))
    for index, ((W, b), fan_in, fan_out) in enumerate(zip(layers, layout.sizes[:-1], layout.sizes[1:])):
        if tuple(W.shape) != (*batch, fan_out, fan_in) or tuple(b.shape) != (*batch, fan_out):
            raise ValueError(f"layer {index}: W must be (..., {fan_out}, {fan_in}) and b (..., {fan_out}) "
                             f"with leading dimensions {batch}; got {tuple(W.shape)} and {tuple(b.shape)}")
    return layout, _concatenate([part for W, b in layers for part in (W.reshape(*batch, -1), b)])


def forward(layers, x):
    """The MLP's outputs ``[..., n, d_out]`` on inputs ``x[..., n, d_in]``: ReLU hidden layers, a
    linear output layer. The layers' leading (batch) dimensions broadcast against x's."""
    relu = torch.relu if isinstance(x, torch.Tensor) else (lambda h: np.maximum(h, 0.0))
    h = x
    for index, (W, b) in enumerate(layers):
        h = _affine(h, W, b)
        if index < len(layers) - 1:
            h = relu(h)
    return h


def cross_entropy_gradient(layout: Layout, flat: torch.Tensor, x: torch.Tensor, labels: torch.Tensor,
                           out: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of the MLP ``flat`` (one unbatched parameter vector) on ``(x, labels)``;
    its gradient w.r.t. ``flat`` is written into ``out`` (same shape). The backward pass written out:
    no autograd graph, and each layer's gradient lands in its place in ``out``, so no copy gathers
    them (a third faster than autograd for an MNIST minibatch)."""
    layers, grads = layout.layers(flat), layout.layers(out)
    inputs, h = [], x
    for index, (W, b) in enumerate(layers):
        inputs.append(h)
        h = torch.addmm(b, h, W.t())
        if index < len(layers) - 1:
            h = torch.relu(h)
    log_probs = torch.log_softmax(h, 1)
    rows = torch.arange(len(labels), device=labels.device)
    loss = -log_probs[rows, labels].mean()
    upstream = log_probs.exp_()  # ∂loss/∂logits = (softmax − one-hot) / n
    upstream[rows, labels] -= 1.0
    upstream.div_(len(labels))
    for index in range(len(layers) - 1, -1, -1):
        (W, _), (grad_W, grad_b) = layers[index], grads[index]
        torch.mm(upstream.t(), inputs[index], out=grad_W)
        torch.sum(upstream, 0, out=grad_b)
        if index:
            upstream = (upstream @ W).mul_(inputs[index] > 0)  # ReLU passes gradient where it was active
    return loss


def _affine(h, W, b):
    """h Wᵀ + b. One network on a matrix of torch inputs takes torch's fused addmm (as
    torch.nn.Linear does): one pass over the outputs instead of two."""
    if isinstance(h, torch.Tensor) and h.dim() == 2 and W.dim() == 2:
        return torch.addmm(b, h, W.mT)
    return h @ W.swapaxes(-1, -2) + b[..., None, :]


def draw_parameters(layout: Layout, draw, batch: tuple[int, ...] = ()) -> torch.Tensor:
    """Flat parameters ``[*batch, n_params]`` drawn layer by layer: ``draw(shape, fan_in)`` gives the
    layer's weights for the whole batch, then its biases. One network's layer is one draw (weights
    and biases are adjacent): a CUDA generator gives different numbers when a draw is split."""
    pieces = []
    for fan_in, fan_out in zip(layout.sizes[:-1], layout.sizes[1:]):
        if batch:
            pieces += [draw((*batch, fan_out, fan_in), fan_in).reshape(*batch, -1), draw((*batch, fan_out), fan_in)]
        else:
            pieces.append(draw((fan_out * fan_in + fan_out,), fan_in))
    return torch.cat(pieces, -1)


def init_parameters(layout: Layout, generator: torch.Generator, batch: tuple[int, ...] = (),
                    dtype=torch.float32, device="cpu") -> torch.Tensor:
    """Flat parameters ``[*batch, n_params]`` like torch.nn.Linear's default: every weight and bias
    of a layer U(±1/√fan_in)."""
    def uniform(shape, fan_in):
        bound = 1.0 / math.sqrt(fan_in)
        return torch.empty(shape, dtype=dtype, device=device).uniform_(-bound, bound, generator=generator)

    return draw_parameters(layout, uniform, batch)


def permutation_index(layout: Layout, perms):
    """Index vector ``idx`` with ``(g·v) = v[..., idx]`` for any flat vector v, g given by one
    permutation per hidden layer: W_l → P_l W_l P_{l−1}ᵀ, b_l → P_l b_l (row i of the new layer is
    row perms[l][i] of the old). numpy or torch, like ``perms``."""
    if isinstance(perms[0], torch.Tensor):
        arange = lambda n: torch.arange(n, device=perms[0].device)  # noqa: E731
    else:
        arange, perms = np.arange, [np.asarray(perm) for perm in perms]
    full = [arange(layout.sizes[0]), *perms, arange(layout.sizes[-1])]
    pieces = []
    for (w0, b0, _), rows, cols, fan_in in zip(layout.offsets, full[1:], full[:-1], layout.sizes[:-1]):
        pieces.append(w0 + (rows[:, None] * fan_in + cols[None, :]).reshape(-1))
        pieces.append(b0 + rows)
    return _concatenate(pieces)


def unit_rows(layers, index: int, incoming: bool = True, outgoing: bool = True):
    """Each unit of hidden layer ``index`` as one row ``[..., units, features]``: its incoming
    weights and bias, then its outgoing weights (the parameters it alone owns). Permuting the
    layer permutes the rows; permuting a neighbouring layer permutes the columns."""
    W_in, b = layers[index]
    pieces = [W_in, b[..., None]] if incoming else []
    if outgoing:
        pieces.append(layers[index + 1][0].swapaxes(-1, -2))
    return _concatenate(pieces)


def _concatenate(pieces):
    """Along the last axis, numpy arrays or torch tensors."""
    return torch.cat(pieces, -1) if isinstance(pieces[0], torch.Tensor) else np.concatenate(pieces, -1)
