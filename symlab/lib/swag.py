"""SWAG, the stochastic weight averaging Gaussian (Maddox et al. 2019, §4 and Algorithm 1), as Laurent
et al. 2024 (App. B.1) ran it: SGD continued from a trained point at a high learning rate (after a
linear ramp), one snapshot θᵢ every ``steps_between`` steps, 20 snapshots, rank 20, sampled at scale 0.1.

From the snapshots, running moments θ̄ = (1/n) Σ θᵢ and θ̄₂ = (1/n) Σ θᵢ², the diagonal variance
σ² = max(θ̄₂ − θ̄², ε), and the deviation matrix D whose rows are the last K deviations θᵢ − θ̄ᵢ, θ̄ᵢ
the running mean just after θᵢ was added (Algorithm 1).

K in the normaliser is the rank asked for (Maddox's ``max_num_models``), not the rows D holds: with fewer
snapshots than K, D has n < K rows and both references still divide DᵀD by K − 1.

Where the scale goes: Maddox's paper writes Σ = ½(diag σ² + DᵀD/(K − 1)) and draws
θ̄ + (1/√2) σ⊙z₁ + (1/√(2(K − 1))) Dᵀz₂; its code (``swag.py``, ``sample``) and torch-uncertainty's
``SWAG`` (whose authors include Laurent) draw instead θ̄ + √s (σ⊙z₁ + Dᵀz₂/√(K − 1)), the paper's
½ being s = 0.5. "Sampled at scale 0.1" is that s: here too the scale multiplies the covariance,
Σ_s = s (diag σ² + DᵀD/(K − 1)), and ``scale=0.5`` gives the paper's Σ.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from symlab.lib.laplace import LogitsFn, Loss, cross_entropy_sum

SCALE = 0.1  # Laurent et al., App. B.1
RANK = 20  # K: the deviations kept (Laurent et al.: 20, as many as snapshots)
VAR_CLAMP = 1e-30  # ε, Maddox's code's floor on θ̄₂ − θ̄² (round-off can make it negative)


@dataclass(frozen=True)
class SwagPosterior:
    """The SWAG moments, float64: θ̄ [P], θ̄₂ [P], D [min(n, K), P] (oldest deviation first), from n snapshots,
    K = ``rank``."""

    mean: torch.Tensor
    sq_mean: torch.Tensor
    deviations: torch.Tensor
    count: int
    rank: int  # K, the normaliser's: DᵀD/(K − 1) however many rows D holds
    dtype: torch.dtype  # the snapshots' dtype: that of the samples

    def variance(self) -> torch.Tensor:
        """σ² = max(θ̄₂ − θ̄², ε)."""
        return (self.sq_mean - self.mean.square()).clamp(min=VAR_CLAMP)

    def covariance(self, scale: float = SCALE) -> torch.Tensor:
        """Σ_s = s (diag σ² + DᵀD/(K − 1)), [P, P]."""
        _check_scale(scale)
        low_rank = self.deviations.T @ self.deviations / (self.rank - 1)
        return scale * (torch.diag(self.variance()) + low_rank)

    def sample(self, count: int, generator: torch.Generator, scale: float = SCALE) -> torch.Tensor:
        """[count, P] draws θ̄ + √s (σ⊙z₁ + Dᵀz₂/√(K − 1)), z₁ ~ N(0, I_P), z₂ ~ N(0, I) over D's rows, drawn in float64
        from ``generator``, returned in the snapshots' dtype."""
        _check_scale(scale)
        if int(count) != count or count < 1:
            raise ValueError(f"count must be a positive integer, not {count}")
        rows, size = self.deviations.shape
        z = torch.randn(count, size + rows, generator=generator, dtype=torch.float64, device=generator.device)
        z1, z2 = z.to(self.mean.device).split([size, rows], dim=1)
        spread = z1 * self.variance().sqrt() + z2 @ self.deviations / math.sqrt(self.rank - 1)
        return (self.mean + math.sqrt(scale) * spread).to(self.dtype)


def _check_scale(scale: float) -> None:
    if not (math.isfinite(scale) and scale >= 0):
        raise ValueError(f"the SWAG scale must be finite and non-negative, not {scale}")


def _check_int(name: str, value, minimum: int = 1) -> None:
    if int(value) != value or value < minimum:
        raise ValueError(f"{name} must be an integer ≥ {minimum}, not {value}")


def swag_moments(snapshots: Iterable[torch.Tensor], rank: int = RANK) -> SwagPosterior:
    """Algorithm 1's running updates over the snapshots θ₁, θ₂, …: θ̄ ← (nθ̄ + θ)/(n + 1),
    θ̄₂ ← (nθ̄₂ + θ²)/(n + 1), then D gains the row θ − θ̄ and keeps its last K = ``rank`` rows."""
    _check_int("rank", rank, minimum=2)
    # From zero moments the first update is θ̄ = θ itself (0·θ̄ + θ), so every snapshot takes the same update.
    mean = sq_mean = torch.zeros((), dtype=torch.float64)
    dtype = torch.float64  # the snapshots' own, from the first one on
    rows: list[torch.Tensor] = []
    count = 0
    for theta in snapshots:
        dtype, theta = theta.dtype, theta.detach().to(torch.float64)
        mean = (count * mean + theta) / (count + 1)
        sq_mean = (count * sq_mean + theta.square()) / (count + 1)
        rows = (rows + [theta - mean])[-rank:]
        count += 1
    if count < 2:
        raise ValueError(f"SWAG needs at least 2 snapshots, got {count}")
    return SwagPosterior(mean=mean, sq_mean=sq_mean, deviations=torch.stack(rows), count=count, rank=rank, dtype=dtype)


def _minibatches(n: int, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Index batches, epoch after epoch, each epoch a fresh permutation from ``generator`` (the last batch
    of an epoch may be smaller)."""
    while True:
        yield from torch.randperm(n, generator=generator, device=generator.device).split(batch_size)


def _learning_rate(step: int, lr: float, warmup_steps: int) -> float:
    """lr·(t + 1)/T during the first T = ``warmup_steps`` steps, then lr."""
    return lr * min(1.0, (step + 1) / warmup_steps) if warmup_steps else lr


def sgd_snapshots(
    logits_fn: LogitsFn,
    flat_start: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    lr: float,
    weight_decay: float,
    batch_size: int,
    steps_between: int,
    snapshots: int,
    generator: torch.Generator,
    warmup_steps: int = 0,
    momentum: float = 0.0,
    loss: Loss = cross_entropy_sum,
) -> Iterator[torch.Tensor]:
    """SGD from ``flat_start`` on ℓ averaged over a minibatch B plus weight decay:
    g = ∇(1/|B|) Σ_{i∈B} ℓ(f(w, xᵢ), yᵢ) + λw, v ← μv + g, w ← w − η_t v; ``warmup_steps`` steps of
    linear ramp, then ``snapshots`` × ``steps_between`` steps at η, yielding a copy of w after every
    ``steps_between`` of them. Raises FloatingPointError naming the step where the loss is not finite."""
    _check_sgd(flat_start, x, y, lr, weight_decay, momentum, batch_size, steps_between, snapshots, warmup_steps)

    def batch_loss(w, xb, yb):
        return loss(logits_fn(w, xb), yb) / len(xb)

    # An inner generator, so that bad settings raise at the call, not at the first snapshot asked for.
    def run() -> Iterator[torch.Tensor]:
        gradient = torch.func.grad_and_value(batch_loss)
        w, velocity = flat_start.detach().clone(), torch.zeros_like(flat_start)
        batches = _minibatches(len(x), batch_size, generator)
        for step in range(warmup_steps + snapshots * steps_between):
            index = next(batches).to(x.device)
            grad, value = gradient(w, x[index], y[index])
            if not bool(torch.isfinite(value)):
                raise FloatingPointError(f"SWAG: SGD diverged at step {step} (the minibatch loss is {float(value)})")
            velocity = momentum * velocity + grad + weight_decay * w
            w = w - _learning_rate(step, lr, warmup_steps) * velocity
            if step >= warmup_steps and (step - warmup_steps + 1) % steps_between == 0:
                yield w.clone()

    return run()


def _check_sgd(
    flat_start, x, y, lr, weight_decay, momentum, batch_size, steps_between, snapshots, warmup_steps
) -> None:
    if flat_start.ndim != 1 or not flat_start.is_floating_point():
        raise ValueError(f"the start must be one flat floating-point vector, not shape {tuple(flat_start.shape)}")
    if len(x) == 0 or len(x) != len(y):
        raise ValueError(f"x and y must hold the same positive number of examples: {len(x)} and {len(y)}")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"the learning rate must be finite and positive, not {lr}")
    if not (math.isfinite(weight_decay) and weight_decay >= 0):
        raise ValueError(f"the weight decay must be finite and non-negative, not {weight_decay}")
    if not 0 <= momentum < 1:
        raise ValueError(f"the momentum must lie in [0, 1), not {momentum}")
    _check_int("batch_size", batch_size)
    _check_int("steps_between", steps_between)
    _check_int("snapshots", snapshots, minimum=2)
    _check_int("warmup_steps", warmup_steps, minimum=0)


def swag_fit(
    logits_fn: LogitsFn,
    flat_start: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    lr: float,
    weight_decay: float,
    batch_size: int,
    steps_between: int,
    snapshots: int = 20,
    rank: int = RANK,
    generator: torch.Generator,
    warmup_steps: int = 0,
    momentum: float = 0.0,
    loss: Loss = cross_entropy_sum,
) -> SwagPosterior:
    """The SWAG posterior of :func:`sgd_snapshots`' snapshots (:func:`swag_moments`, K = ``rank``)."""
    _check_int("rank", rank, minimum=2)
    return swag_moments(
        sgd_snapshots(
            logits_fn,
            flat_start,
            x,
            y,
            lr=lr,
            weight_decay=weight_decay,
            batch_size=batch_size,
            steps_between=steps_between,
            snapshots=snapshots,
            generator=generator,
            warmup_steps=warmup_steps,
            momentum=momentum,
            loss=loss,
        ),
        rank,
    )
