"""MNIST classifiers as functions of one flat parameter vector, for methods that need nothing but
that function (the posterior approximations lab; docs/science.md, § Posterior approximations).

Two architectures:

- ``mlp``: the other labs' one-hidden-layer ReLU MLP 784-h-10, its flat vector in
  :class:`symlab.lib.mlp.Layout`'s order (W₁, b₁, W₂, b₂);
- ``convnet``: a 350-parameter convolutional net in the spirit of Laurent et al.'s OptuNet
  (392 parameters, a grouped second convolution; its exact layers are not published):
  5×5 convolution, stride 2, to 4 channels → ReLU → 3×3 convolution 4 → 4 in 2 groups → ReLU →
  average pooling to 2×2 → linear 16 → 10. Flat order: each layer's weight, then its bias.

An :class:`Architecture` gives the torch module (structure only), :meth:`Architecture.logits`, a
pure function of ``(flat, x)`` that torch.func can differentiate and vmap (:func:`batched_logits`:
many networks in one computation), PyTorch's default initialisation drawn from a seeded generator,
each layer's slice of the flat vector (for layer-wise MMD), and the permutation and scaling
symmetries taken out (:func:`remove_symmetries`).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from symlab.lib import mlp, symmetry
from symlab.lib.mlp import Array, Layout
from symlab.lib.options import ARCHITECTURES, CLASSES, REMOVAL_KEYS

INPUT_SHAPE = (1, 28, 28)

# The convnet's symmetries. Its first layer's 4 channels feed the grouped convolution in 2 groups of 2
# (channels 0-1 → outputs 0-1, channels 2-3 → outputs 2-3). A permutation may reorder channels within a
# group, and swap the two groups together with their outputs; a permutation that mixed groups would need
# weights the grouped convolution does not have. Each output channel feeds 4 pooled features (channel-major).
GROUPS, CHANNELS, POOLED = 2, 4, 4


@dataclass(frozen=True)
class Architecture:
    """``name`` is ``"mlp"`` (``width`` hidden units) or ``"convnet"`` (fixed sizes)."""

    name: str
    width: int = 16
    # The module whose parameters a flat vector fills (built in __post_init__).
    _template: nn.Module = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.name not in ARCHITECTURES:
            raise ValueError(f"architecture must be one of {ARCHITECTURES}, got {self.name!r}")
        if self.name == "mlp" and not (isinstance(self.width, int) and self.width >= 1):
            raise ValueError(f"an MLP needs a whole number of hidden units >= 1, got {self.width!r}")
        # Built here, not on first use: that may be inside a torch.func transform, which forbids requires_grad_.
        object.__setattr__(self, "_template", self.module().requires_grad_(False))

    @property
    def label(self) -> str:
        return f"MLP 784-{self.width}-10" if self.name == "mlp" else "ConvNet (350 parameters)"

    def module(self) -> nn.Module:
        """The network as a torch module; its parameters, in order, are the flat vector's pieces."""
        if self.name == "mlp":
            parts = {
                "flatten": nn.Flatten(),
                "hidden": nn.Linear(784, self.width),
                "relu": nn.ReLU(),
                "output": nn.Linear(self.width, CLASSES),
            }
        else:
            parts = {
                "conv1": nn.Conv2d(1, CHANNELS, 5, stride=2),
                "relu1": nn.ReLU(),
                "conv2": nn.Conv2d(CHANNELS, CHANNELS, 3, groups=GROUPS),
                "relu2": nn.ReLU(),
                "pool": nn.AdaptiveAvgPool2d(2),
                "flatten": nn.Flatten(),
                "fc": nn.Linear(CHANNELS * POOLED, CLASSES),
            }
        return nn.Sequential(OrderedDict(parts))

    @cached_property
    def shapes(self) -> dict[str, tuple[int, ...]]:
        return {name: tuple(p.shape) for name, p in self._template.named_parameters()}

    @cached_property
    def n_params(self) -> int:
        return sum(math.prod(shape) for shape in self.shapes.values())

    @cached_property
    def layers(self) -> tuple[tuple[str, slice], ...]:
        """Each layer's name and slice of the flat vector (its weight and bias together)."""
        spans: dict[str, tuple[int, int]] = {}
        start = 0
        for name, shape in self.shapes.items():
            layer = name.rsplit(".", 1)[0]
            first, _ = spans.get(layer, (start, start))
            start += math.prod(shape)
            spans[layer] = (first, start)
        return tuple((layer, slice(a, b)) for layer, (a, b) in spans.items())

    def parameters(self, flat: Array) -> dict[str, Array]:
        """Views of ``flat[..., n_params]`` shaped as the module's parameters."""
        if flat.shape[-1] != self.n_params:
            raise ValueError(f"{self.label} has {self.n_params} parameters, got a vector of {flat.shape[-1]}")
        out: dict[str, Array] = {}
        start = 0
        for name, shape in self.shapes.items():
            size = math.prod(shape)
            out[name] = flat[..., start : start + size].reshape(*flat.shape[:-1], *shape)
            start += size
        return out

    def logits(self, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Logits ``[n, 10]`` of one network ``flat[n_params]`` on images ``x[n, 1, 28, 28]``."""
        return torch.func.functional_call(self._template, self.parameters(flat), (x,))

    def init(self, count: int, generator: torch.Generator, dtype=torch.float32) -> torch.Tensor:
        """``count`` networks ``[count, n_params]`` drawn as PyTorch's default: every weight and bias of
        a layer U(±1/√fan_in), fan_in = the inputs one output sees (in-channels per group × kernel)."""
        pieces = []
        for name, shape in self.shapes.items():
            layer = name.rsplit(".", 1)[0]
            fan_in = math.prod(self.shapes[f"{layer}.weight"][1:])
            bound = 1.0 / math.sqrt(fan_in)
            pieces.append(
                torch.empty(count, math.prod(shape), dtype=dtype).uniform_(-bound, bound, generator=generator)
            )
        return torch.cat(pieces, -1)


@functools.lru_cache(maxsize=64)
def architecture(name: str, width: int = 16) -> Architecture:
    """The architecture (one object per name and width: its module is built once)."""
    return Architecture(name, width)


def batched_logits(
    arch: Architecture, flat: torch.Tensor, x: torch.Tensor, keep: torch.Tensor | None = None
) -> torch.Tensor:
    """Logits ``[nets, n, 10]`` of networks ``flat[nets, P]``, each on its own images ``x[nets, n, 1, 28, 28]``
    or all on the same ``x[n, 1, 28, 28]``, as one computation: batched matrix products over the stack (the
    MLP through :func:`symlab.lib.mlp.forward`; the convnet's convolutions as grouped convolutions, a group
    per network). Differentiable: the gradient of the summed losses is every
    network's own gradient. ``keep[nets, n, features]``, if given, multiplies the last layer's inputs
    (dropout's mask, already divided by the keep probability)."""
    nets = flat.shape[0]
    x = x.expand(nets, *x.shape) if x.dim() == len(INPUT_SHAPE) + 1 else x
    if arch.name == "mlp":
        hidden, output = mlp_layers(arch, flat)
        features = torch.relu(mlp.forward([hidden], x.reshape(nets, x.shape[1], -1)))
        return mlp.forward([output], features if keep is None else features * keep)
    p, n = arch.parameters(flat), x.shape[1]
    # Networks as groups of one convolution: images [n, nets, 28, 28], each network's kernels its own groups.
    h = F.conv2d(
        x.reshape(nets, n, 28, 28).transpose(0, 1),
        p["conv1.weight"].reshape(nets * CHANNELS, 1, 5, 5),
        p["conv1.bias"].reshape(-1),
        stride=2,
        groups=nets,
    )
    h = F.conv2d(
        torch.relu(h),
        p["conv2.weight"].reshape(nets * CHANNELS, CHANNELS // GROUPS, 3, 3),
        p["conv2.bias"].reshape(-1),
        groups=nets * GROUPS,
    )
    pooled = F.adaptive_avg_pool2d(torch.relu(h), 2).reshape(n, nets, CHANNELS * POOLED).transpose(0, 1)
    pooled = pooled if keep is None else pooled * keep
    return torch.baddbmm(p["fc.bias"][:, None, :], pooled, p["fc.weight"].mT)


def last_layer_inputs(arch: Architecture) -> int:
    """How many inputs the output layer has: dropout's units (Laurent et al.: dropout on the last layer)."""
    return arch.shapes[f"{arch.layers[-1][0]}.weight"][1]


def dropout_weights(
    arch: Architecture, flat: torch.Tensor, rate: float, count: int, generator: torch.Generator
) -> torch.Tensor:
    """``count`` weight samples ``[count, P]`` of MC dropout at ``rate`` on the last layer's inputs: the
    network ``flat[P]`` with each of the output layer's input columns kept with probability 1 − rate and
    scaled by 1/(1 − rate), or zeroed. Predicting with one is a dropout forward pass whose mask is the
    same for every input."""
    if not 0 <= rate < 1:
        raise ValueError(f"the dropout rate must be in [0, 1), got {rate!r}")
    keep = (torch.rand(count, last_layer_inputs(arch), generator=generator) >= rate).to(flat.dtype) / (1 - rate)
    samples = flat.expand(count, -1).clone()
    weight = arch.parameters(samples)[f"{arch.layers[-1][0]}.weight"]  # a view: scaling it scales samples
    weight.mul_(keep[:, None, :])
    return samples


# ---------------------------------------------------------------------------------------------
# Symmetries
# ---------------------------------------------------------------------------------------------


def mlp_layers(arch: Architecture, flat: np.ndarray | torch.Tensor) -> list:
    """The MLP's (W, b) views (:mod:`symlab.lib.symmetry`'s form) of ``flat[..., P]``."""
    return Layout((784, arch.width, CLASSES)).layers(flat)


def remove_symmetries(arch: Architecture, flat, key: str = "first", scaling: bool = True) -> np.ndarray:
    """Networks ``flat[..., P]`` in a canonical form of their symmetry class (Laurent et al. App. C.2):
    with ``scaling``, every hidden unit's incoming weights (bias excluded) normalised to norm 1, its
    outgoing weights scaled inversely (Neyshabur et al., as their Table 1); then each hidden layer's
    units sorted by ``key`` — ``"first"``: the unit's first incoming parameter (a dense unit's weight
    from the first input, a channel's top-left weight of its first input channel's kernel), ``"max"``:
    its largest incoming weight. The function every network computes is unchanged."""
    if key not in REMOVAL_KEYS:
        raise ValueError(f"the removal key must be one of {REMOVAL_KEYS}, got {key!r}")
    flat = np.asarray(flat, dtype=np.float64)
    if arch.name == "mlp":
        layers = mlp_layers(arch, flat)
        if scaling:
            layers = symmetry.normalise_units(layers)
        layers = symmetry.sorting_permutations(layers, "first_in" if key == "first" else "max_in")[0]
        return np.concatenate([part for W, b in layers for part in (W.reshape(*flat.shape[:-1], -1), b)], -1)
    return _canonical_convnet(arch, flat, key, scaling)


def convnet_permutation(arch: Architecture, flat, first: np.ndarray, second: np.ndarray):
    """``flat[..., P]`` with the first layer's channels reordered by ``first[..., 4]`` and the grouped layer's
    by ``second[..., 4]`` (new channel k = old channel perm[k]); each must keep groups whole and move a group
    of the first layer with the same group of the second. numpy or torch, like ``flat``."""
    p = arch.parameters(flat)
    take = (
        (lambda a, i, axis: np.take_along_axis(a, i, axis))
        if isinstance(flat, np.ndarray)
        else (lambda a, i, axis: torch.take_along_dim(a, torch.as_tensor(np.array(i)), axis))
    )
    batch = flat.shape[:-1]
    first, second = np.broadcast_to(first, (*batch, CHANNELS)), np.broadcast_to(second, (*batch, CHANNELS))
    per_group = CHANNELS // GROUPS
    # The grouped layer's new output k (group k // 2) reads old output second[k] and, as its j-th input,
    # the old first-layer channel first[group * 2 + j], at that channel's place within its old group.
    local_inputs = first.reshape(*batch, GROUPS, per_group) % per_group
    local_for_output = np.repeat(local_inputs, per_group, axis=-2)  # [..., 4 outputs, 2 inputs]
    w1 = take(p["conv1.weight"], first[..., None, None, None], -4)
    b1 = take(p["conv1.bias"], first, -1)
    w2 = take(p["conv2.weight"], second[..., None, None, None], -4)
    w2 = take(w2, local_for_output[..., None, None], -3)
    b2 = take(p["conv2.bias"], second, -1)
    columns = (second[..., :, None] * POOLED + np.arange(POOLED)).reshape(*batch, 1, CHANNELS * POOLED)
    w3 = take(p["fc.weight"], columns, -1)
    pieces = [w1, b1, w2, b2, w3, p["fc.bias"]]
    if isinstance(flat, np.ndarray):
        return np.concatenate([piece.reshape(*batch, -1) for piece in pieces], -1)
    return torch.cat([piece.reshape(*batch, -1) for piece in pieces], -1)


def _canonical_convnet(arch: Architecture, flat: np.ndarray, key: str, scaling: bool) -> np.ndarray:
    flat = _normalise_convnet(arch, flat) if scaling else flat
    return convnet_permutation(arch, flat, *_convnet_sorting(arch, flat, key))


def _convnet_sorting(arch: Architecture, flat: np.ndarray, key: str) -> tuple[np.ndarray, np.ndarray]:
    """The orders (first layer's channels, grouped layer's channels) that sort ``flat`` by ``key``."""
    p = arch.parameters(flat)
    batch = flat.shape[:-1]
    per_group = CHANNELS // GROUPS
    score = (
        (lambda w: w.reshape(*w.shape[:-3], -1)[..., 0])
        if key == "first"
        else (lambda w: w.reshape(*w.shape[:-3], -1).max(-1))
    )
    # Within each group: the first layer's channels by their key, then the group's outputs by theirs (an
    # output's first incoming weight reads the group's first channel, so after the channels are sorted).
    first = _sorted_within_groups(score(p["conv1.weight"]), per_group)
    reordered = arch.parameters(
        convnet_permutation(arch, flat, first, np.broadcast_to(np.arange(CHANNELS), first.shape))
    )
    second = _sorted_within_groups(score(reordered["conv2.weight"]), per_group)
    # Then the groups, by the key of each group's first output.
    sorted_second = np.take_along_axis(score(reordered["conv2.weight"]), second, -1)
    group_order = np.argsort(sorted_second.reshape(*batch, GROUPS, per_group)[..., 0], -1, kind="stable")
    block = (group_order[..., :, None] * per_group + np.arange(per_group)).reshape(*batch, CHANNELS)
    return np.take_along_axis(first, block, -1), np.take_along_axis(second, block, -1)


def copy_labels(arch: Architecture, flat, key: str = "first") -> np.ndarray:
    """Which permuted copy each network ``flat[..., P]`` sits in: the orders of its hidden units that
    :func:`remove_symmetries` applies, one row ``[..., units]`` per network. Two networks share a label exactly
    when the same symmetry carries both to canonical form; a chain whose label changes has crossed into another
    copy."""
    if key not in REMOVAL_KEYS:
        raise ValueError(f"the removal key must be one of {REMOVAL_KEYS}, got {key!r}")
    flat = np.asarray(flat, dtype=np.float64)
    if arch.name == "mlp":
        layers = symmetry.normalise_units(mlp_layers(arch, flat))
        return np.concatenate(symmetry.sorting_orders(layers, "first_in" if key == "first" else "max_in"), -1)
    return np.concatenate(_convnet_sorting(arch, _normalise_convnet(arch, flat), key), -1)


def _sorted_within_groups(values: np.ndarray, per_group: int) -> np.ndarray:
    """For ``values[..., channels]``, the permutation sorting each consecutive group of ``per_group``."""
    grouped = values.reshape(*values.shape[:-1], -1, per_group)
    order = np.argsort(grouped, -1, kind="stable") + np.arange(0, values.shape[-1], per_group)[:, None]
    return order.reshape(values.shape)


def _normalise_convnet(arch: Architecture, flat: np.ndarray) -> np.ndarray:
    """Each hidden channel's incoming kernel scaled to norm 1 (bias with it) and its outgoing weights by the
    inverse: ReLU and average pooling are positively homogeneous. The first layer first, as its scales
    change the second layer's kernels."""
    flat = flat.copy()
    p = arch.parameters(flat)
    batch = flat.shape[:-1]
    per_group = CHANNELS // GROUPS
    norm1 = _safe_norm(p["conv1.weight"])  # [..., 4]
    p["conv1.weight"] /= norm1[..., None, None, None]
    p["conv1.bias"] /= norm1
    # The grouped layer's output k reads first-layer channels (k // 2) * 2 + j as its input j.
    inputs = (np.arange(CHANNELS)[:, None] // per_group) * per_group + np.arange(per_group)
    p["conv2.weight"] *= norm1[..., inputs][..., None, None]
    norm2 = _safe_norm(p["conv2.weight"])
    p["conv2.weight"] /= norm2[..., None, None, None]
    p["conv2.bias"] /= norm2
    p["fc.weight"] *= np.repeat(norm2, POOLED, -1).reshape(*batch, 1, CHANNELS * POOLED)
    return flat


def _safe_norm(kernels: np.ndarray) -> np.ndarray:
    """Each output channel's kernel norm; 1 for an all-zero kernel (nothing to normalise)."""
    norm = np.sqrt((kernels.reshape(*kernels.shape[:-3], -1) ** 2).sum(-1))
    return np.where(norm > 0, norm, 1.0)


def convnet_group(arch: Architecture) -> torch.Tensor:
    """Every permutation symmetry of the convnet as a flat index ``[32, P]`` (row g: ``flat[g_index]`` is the
    network moved by g; the identity first): 2 orders of the groups × 2! × 2! orders within them, for each
    of the two layers."""
    per_group = CHANNELS // GROUPS
    within = list(itertools.permutations(range(per_group)))
    elements = []
    for order in itertools.permutations(range(GROUPS)):
        for a0, a1, b0, b1 in itertools.product(within, repeat=4):
            first = np.concatenate([order[0] * per_group + np.array(a0), order[1] * per_group + np.array(a1)])
            second = np.concatenate([order[0] * per_group + np.array(b0), order[1] * per_group + np.array(b1)])
            elements.append(convnet_permutation(arch, torch.arange(arch.n_params), first, second))
    return torch.stack(elements)


def random_convnet_permutation(rng: np.random.Generator, batch: tuple[int, ...] = ()) -> tuple[np.ndarray, np.ndarray]:
    """A uniformly random symmetry of the convnet: a permutation within each group for each layer, and a
    random order of the groups applied to both."""
    per_group = CHANNELS // GROUPS
    count = math.prod(batch)
    firsts, seconds = [], []
    for _ in range(max(count, 1)):
        groups = rng.permutation(GROUPS)
        first = np.concatenate([g * per_group + rng.permutation(per_group) for g in groups])
        second = np.concatenate([g * per_group + rng.permutation(per_group) for g in groups])
        firsts.append(first)
        seconds.append(second)
    shape = (*batch, CHANNELS)
    return np.array(firsts).reshape(shape), np.array(seconds).reshape(shape)
