"""Mean-field Gaussian posteriors over an MLP's parameters, and their KL to the prior
(docs/science.md, § Notation, § Mean-field VI).

q(w) = Π_i N(w_i; μ_i, σ_i²) over the flat parameter vector of :mod:`symlab.lib.mlp`, held as
means and log standard deviations (any real log σ is a valid σ, so optimisers work on it). The
prior is isotropic, N(0, p² I).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Generic

import numpy as np
import torch

from symlab.lib import mlp
from symlab.lib.mlp import Array, Layout


def kl_to_prior(mean: torch.Tensor, log_sd: torch.Tensor, prior_scale, sd=None) -> torch.Tensor:
    """KL(N(μ, σ²) ‖ N(0, p²)) in closed form, summed over the last axis:
    Σ_i ½(σ_i² + μ_i²)/p² − log σ_i + log p − ½. Each term is formed from log σ itself (no log of
    an exponential that can underflow) and is ≥ 0 before the sum, so no digits are lost to
    cancellation between large sums; in-place steps keep it to two new arrays.
    ``prior_scale`` is a number or a tensor broadcasting against ``mean`` (one per run); ``sd`` is
    exp(log σ), when the caller has it already."""
    log_prior = torch.log(prior_scale) if isinstance(prior_scale, torch.Tensor) else math.log(prior_scale)
    sd = log_sd.exp() if sd is None else sd
    terms = (mean * mean).addcmul_(sd, sd).mul_(0.5 / prior_scale**2).sub_(log_sd).add_(log_prior - 0.5)
    return terms.sum(-1)


def flat_kl_to_prior(mean: torch.Tensor, log_sd: torch.Tensor, prior_scale: float, sd: torch.Tensor) -> torch.Tensor:
    """:func:`kl_to_prior` of one flat posterior (1-D tensors) from three reductions, ½(μ·μ + σ·σ)/p² −
    Σ log σ + n(log p − ½): two BLAS dot products and a sum, no temporary arrays (a training step's
    ELBO at half the cost). The large sums partly cancel: about 10⁻⁷ of the KL is lost, 0.1 nat for
    an MNIST MLP's KL of 10⁶ nats."""
    n = mean.shape[-1]
    squares = torch.dot(mean, mean) + torch.dot(sd, sd)
    return squares * (0.5 / prior_scale**2) - log_sd.sum() + n * (math.log(prior_scale) - 0.5)


@dataclass(frozen=True, eq=False)
class DiagonalGaussian(Generic[Array]):
    """q over the parameters of the MLP ``layout``: ``mean`` and ``log_sd`` of shape
    ``[..., n_params]`` (leading dimensions: a batch of posteriors), numpy arrays or torch tensors.
    :attr:`sd` is computed once, when first read; training, which changes ``mean`` and ``log_sd``
    in place, reads them through :meth:`sample` and :meth:`kl_to_prior`, which use them as they are."""

    layout: Layout
    mean: Array
    log_sd: Array

    def __post_init__(self):
        if tuple(self.mean.shape) != tuple(self.log_sd.shape) or self.mean.shape[-1:] != (self.layout.n_params,):
            raise ValueError(
                f"means {tuple(self.mean.shape)} and log standard deviations "
                f"{tuple(self.log_sd.shape)} must both be (..., {self.layout.n_params}) "
                f"for the layout {self.layout.sizes}"
            )

    @classmethod
    def from_sd(cls, layout: Layout, mean, sd) -> DiagonalGaussian:
        """q from standard deviations (≥ 0; 0 is a point mass), which :attr:`sd` then returns
        exactly (exp(log σ) can differ from σ in the last bit)."""
        if isinstance(sd, torch.Tensor):
            q = DiagonalGaussian(layout, mean, sd.log())
        else:
            with np.errstate(divide="ignore"):
                q = DiagonalGaussian(layout, mean, np.log(sd))
        q.__dict__["sd"] = sd
        return q

    @classmethod
    def from_layers(cls, means, sds) -> DiagonalGaussian:
        """q from per-layer arrays ``[(W₁, b₁), …]`` of means and of standard deviations (float64,
        one network), checked: finite, the same shapes, standard deviations ≥ 0."""
        layout, mean = mlp.flatten([(np.asarray(W, np.float64), np.asarray(b, np.float64)) for W, b in means])
        sd_layout, sd = mlp.flatten([(np.asarray(W, np.float64), np.asarray(b, np.float64)) for W, b in sds])
        if sd_layout != layout or mean.shape != sd.shape:
            raise ValueError("means and standard deviations must have the same layer shapes")
        if mean.ndim != 1:
            raise ValueError("from_layers takes one network, not a batch")
        if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(sd))):
            raise ValueError("got non-finite means or standard deviations")
        if np.any(sd < 0):
            raise ValueError("standard deviations must be >= 0")
        return cls.from_sd(layout, mean, sd)

    @cached_property
    def sd(self) -> Array:
        return self.log_sd.exp() if isinstance(self.log_sd, torch.Tensor) else np.exp(self.log_sd)

    @property
    def means(self) -> list:
        """The means as (W, b) layers."""
        return self.layout.layers(self.mean)

    @property
    def sds(self) -> list:
        """The standard deviations as (W, b) layers."""
        return self.layout.layers(self.sd)

    @property
    def sizes(self) -> tuple[int, ...]:
        return self.layout.sizes

    @property
    def hidden(self) -> tuple[int, ...]:
        return self.layout.hidden

    def take(self, index) -> DiagonalGaussian[Array]:
        """q with its coordinates reordered, ``v → v[..., index]`` for means and standard deviations
        alike (a permutation of hidden units: :func:`symlab.lib.mlp.permutation_index`)."""
        q = DiagonalGaussian(self.layout, self.mean[..., index], self.log_sd[..., index])
        q.__dict__["sd"] = self.sd[..., index]
        return q

    def sample(self: DiagonalGaussian[torch.Tensor], noise: torch.Tensor) -> torch.Tensor:
        """The reparameterised draw μ + σ ⊙ noise, differentiable in μ and log σ (tensors)."""
        return self.mean + self.log_sd.exp() * noise

    def kl_to_prior(self: DiagonalGaussian[torch.Tensor], prior_scale) -> torch.Tensor:
        """KL(q ‖ N(0, p² I)) per posterior: :func:`kl_to_prior`."""
        return kl_to_prior(self.mean, self.log_sd, prior_scale)


def init_posterior(
    layout: Layout, init_sd: float, generator: torch.Generator, device="cpu"
) -> DiagonalGaussian[torch.Tensor]:
    """Means drawn like torch.nn.Linear's default (U(±1/√fan_in)), standard deviations ``init_sd``."""
    mean = mlp.init_parameters(layout, generator, device=device)
    return DiagonalGaussian(layout, mean, torch.full_like(mean, math.log(init_sd)))
