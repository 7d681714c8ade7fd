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
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import torch

from symlab.lib.layout import Layout

# Arrays of parameters: NumPy's (read from files, float64 grids) or torch's (trained), never a mix.
Array = TypeVar("Array", np.ndarray, torch.Tensor)


def flatten(layers) -> tuple[Layout, np.ndarray | torch.Tensor]:
    """The layout and flat vector of ``[(W₁, b₁), …]`` (the same leading batch dimensions in every
    array): the inverse of :meth:`Layout.layers`."""
    batch = tuple(layers[0][0].shape[:-2])
    layout = Layout((layers[0][0].shape[-1], *(W.shape[-2] for W, _ in layers)))
    for index, ((W, b), fan_in, fan_out) in enumerate(zip(layers, layout.sizes[:-1], layout.sizes[1:])):
        if tuple(W.shape) != (*batch, fan_out, fan_in) or tuple(b.shape) != (*batch, fan_out):
            raise ValueError(
                f"layer {index}: W must be (..., {fan_out}, {fan_in}) and b (..., {fan_out}) "
                f"with leading dimensions {batch}; got {tuple(W.shape)} and {tuple(b.shape)}"
            )
    return layout, _concatenate([part for W, b in layers for part in (W.reshape(*batch, -1), b)])


def forward(layers, x):
    """The MLP's outputs ``[..., n, d_out]`` on inputs ``x[..., n, d_in]``: ReLU hidden layers, a
    linear output layer. The layers' leading (batch) dimensions broadcast against x's."""
    relu = torch.relu_ if isinstance(x, torch.Tensor) else (lambda h: np.maximum(h, 0.0, out=h))
    h = x
    for index, (W, b) in enumerate(layers):
        h = _affine(h, W, b)
        if index < len(layers) - 1:
            h = relu(h)  # in place: h is this layer's own output
    return h


THIN = 16  # a layer with fewer inputs than this gets its weight gradient as a transposed product


def cross_entropy_gradient(layers, x: torch.Tensor, labels: torch.Tensor, grads) -> torch.Tensor:
    """The mean cross-entropy of the MLP with ``layers`` (its (W, b) views, :meth:`Layout.layers`) on
    ``(x, labels)``; its gradient is written into ``grads``, the same views of a gradient vector. One
    network, or a batch of networks (W ``[nets, out, in]``), each with its own inputs ``x[nets, n, d_in]`` and
    labels ``[nets, n]`` or all sharing ``x[n, d_in]`` and ``labels[n]``: the loss is then one per net.
    The backward pass written out: no autograd graph, and each layer's gradient lands in its place, so no
    copy gathers them (a third faster than autograd for an MNIST minibatch; callers keep the views from step
    to step). The logits are formed as ``[classes, n]``: a softmax over few classes then runs along n, and
    no matrix product has only a few columns, MKL's slow case (so is a thin first layer's gradient, formed
    transposed)."""
    batched = layers[0][0].dim() == 3
    *hidden, (W_out, b_out) = layers
    inputs, h = [], x.expand(len(W_out), *x.shape) if batched and x.dim() == 2 else x
    for W, b in hidden:
        inputs.append(h)
        h = torch.relu_(torch.baddbmm(b.unsqueeze(-2), h, W.mT) if batched else torch.addmm(b, h, W.t()))
    inputs.append(h)
    logits = torch.baddbmm(b_out.unsqueeze(-1), W_out, h.mT) if batched else torch.addmm(b_out[:, None], W_out, h.t())
    log_probs = torch.log_softmax(logits, -2)
    target = labels.unsqueeze(-2).expand(*log_probs.shape[:-2], 1, labels.shape[-1])
    loss = log_probs.gather(-2, target).mean((-2, -1)).neg_()
    upstream = log_probs.exp_()  # ∂loss/∂logits = (softmax − one-hot) / n, as [classes, n]
    upstream.scatter_add_(-2, target, torch.full(target.shape, -1.0, dtype=upstream.dtype, device=upstream.device))
    upstream.div_(labels.shape[-1])
    torch.matmul(upstream, h, out=grads[-1][0])
    torch.sum(upstream, -1, out=grads[-1][1])
    upstream = upstream.mT
    for index in range(len(hidden) - 1, -1, -1):
        # Through layer index + 1 and this layer's ReLU (it passes the gradient where it was active).
        upstream = _relu_backward(upstream @ layers[index + 1][0], inputs[index + 1], 0.0)
        (W, _), (grad_W, grad_b) = layers[index], grads[index]
        if W.shape[-1] < THIN:
            grad_W.copy_(torch.matmul(inputs[index].mT, upstream).mT)
        else:
            torch.matmul(upstream.mT, inputs[index], out=grad_W)
        torch.sum(upstream, -2, out=grad_b)
    return loss


def fisher_diagonal(layers, x: torch.Tensor, generator: torch.Generator, out) -> None:
    """An unbiased estimate of the per-example mean of the loss's Hessian diagonal, written into ``out`` (the
    :meth:`Layout.layers` views of a parameter-sized vector): Σ_n (∂ℓ(x_n, ŷ_n)/∂θ)² / n with each label ŷ_n
    drawn from the network's own softmax. Its expectation over ŷ is the Gauss-Newton diagonal, which for a ReLU
    MLP equals the Hessian diagonal wherever that exists (the outputs are piecewise linear in any one weight).
    One network, ``x[n, d_in]``; a linear layer's per-example gradient is an outer product, so the sum of its
    squares is one matrix product of the squared factors."""
    *hidden, (W_out, b_out) = layers
    inputs, h = [], x
    for W, b in hidden:
        inputs.append(h)
        h = torch.relu(torch.addmm(b, h, W.t()))
    inputs.append(h)
    with torch.no_grad():
        probs = torch.softmax(torch.addmm(b_out, h, W_out.t()), -1)
        drawn = torch.multinomial(probs, 1, generator=generator)
        upstream = probs.scatter_add_(-1, drawn, torch.full_like(drawn, -1.0, dtype=probs.dtype))  # ∂ℓ_n/∂logits
        scale = 1.0 / x.shape[0]
        for index in range(len(layers) - 1, -1, -1):
            (W, _), (out_W, out_b) = layers[index], out[index]
            torch.matmul(upstream.square().t(), inputs[index].square(), out=out_W).mul_(scale)
            torch.sum(upstream.square(), 0, out=out_b).mul_(scale)
            if index:
                upstream = _relu_backward(upstream @ W, inputs[index], 0.0)


_relu_backward = torch.ops.aten.threshold_backward  # the gradient where the input was above 0, else 0


def _affine(h, W, b):
    """h Wᵀ + b, a new array. Torch's fused addmm and baddbmm (as torch.nn.Linear does) for one network or
    a batch of them: one pass over the outputs instead of two."""
    if isinstance(h, torch.Tensor) and W.dim() == 2 and h.dim() == 2:
        return torch.addmm(b, h, W.mT)
    if isinstance(h, torch.Tensor) and W.dim() == 3 and h.dim() in (2, 3):
        return torch.baddbmm(b.unsqueeze(-2), h.expand(len(W), *h.shape[-2:]), W.mT)
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


def init_parameters(
    layout: Layout, generator: torch.Generator, batch: tuple[int, ...] = (), dtype=torch.float32, device="cpu"
) -> torch.Tensor:
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
    arange: Callable[[int], Any]
    if isinstance(perms[0], torch.Tensor):
        arange = lambda n: torch.arange(n, device=perms[0].device)  # noqa: E731
    else:
        arange, perms = lambda n: np.arange(n), [np.asarray(perm) for perm in perms]  # noqa: E731
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
