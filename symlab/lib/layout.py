"""Where each layer of an MLP sits in its flat parameter vector (:class:`Layout`), without torch: a run's cost and a
page's sizes are worked out from it before anything is computed. :mod:`symlab.lib.mlp` is the MLP itself."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property


def multiply_adds(sizes) -> tuple[int, int]:
    """Multiply-adds of one forward pass per example through layers of sizes ``sizes`` (d₀ … d_L), biases aside:
    all layers' (the network's weight count too), and those past the first (the backward pass sends the gradient
    through these only)."""
    layers = [fan_in * fan_out for fan_in, fan_out in zip(sizes[:-1], sizes[1:])]
    return sum(layers), sum(layers[1:])


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
        return [
            (flat[..., w0:b0].reshape(*batch, fan_out, fan_in), flat[..., b0:end])
            for (w0, b0, end), fan_in, fan_out in zip(self.offsets, self.sizes[:-1], self.sizes[1:])
        ]
