"""Full-batch Hamiltonian Monte Carlo over flat parameter vectors, many chains as one batched computation
(Neal 2011, §5.3; the reference posterior of Izmailov et al. 2021).

For an unnormalised log density ℓ(θ), θ ∈ ℝᴾ, and a diagonal mass matrix M = diag(1/v), a transition draws a
momentum r ~ N(0, M) and follows the leapfrog map L times with step ε,

    r ← r + ½ε∇ℓ(θ),  θ ← θ + ε v⊙r,  r ← r + ½ε∇ℓ(θ),

then accepts the end point with probability α = min(1, exp(H(θ, r) − H(θ', r'))), H = −ℓ(θ) + ½ Σ v r².
The map is reversible and keeps volume, so for any fixed ε, L and v each chain leaves p(θ) ∝ exp ℓ(θ)
invariant. A transition whose energy error exceeds ``DIVERGENCE`` (or is not finite) is rejected and counted as
divergent.

Warm-up tunes each chain's ε and v and then freezes them, so the draws kept afterwards come from a fixed, valid
kernel:
- ε by dual averaging, so that the mean acceptance probability approaches ``target_accept`` (Hoffman & Gelman
  2014, §3.2, with their γ = 0.05, t₀ = 10, κ = 0.75), from the step found by their doubling heuristic;
- v (``adapt_mass``) on Stan's schedule (:func:`warmup_windows`): after each window of doubling length, v becomes
  the variances of that window's draws, shrunk towards 10⁻³ as Stan does, and ε is found and averaged afresh;
- then, in the last 5 % of warm-up, one factor on every chain's ε, set from batches of transitions at a fixed ε
  (:func:`_calibrate_step`). Dual averaging brings the mean α *over its fluctuating iterates* to the target; α
  falls steeply and concavely in log ε, so α at their average lies above it (0.91 for a target of 0.8 on the
  tractable BNN). A fixed ε's batches measure the α that the kept kernel will have.
Each transition takes L = ⌈τ/ε⌉ steps (at most ``max_leapfrog``), so every chain integrates for about the same
time τ = ``trajectory_length``, its ε jittered by ±``step_jitter`` (:func:`_transition`).
Chains run in lockstep: ℓ takes a ``[C, P]`` batch and returns ``[C]``; a chain
that needs fewer steps than another waits (its state is masked), so one transition costs the longest chain's L
evaluations of ℓ and its gradient.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

LogDensity = Callable[[torch.Tensor], torch.Tensor]  # [C, P] -> [C]

DIVERGENCE = 1000.0  # an energy error this large: the integrator left the typical set (Stan's threshold)
# Dual averaging's constants (Hoffman & Gelman 2014, §3.2.1).
GAMMA, T0, KAPPA = 0.05, 10.0, 0.75
# Stan's regularisation of the estimated variances: shrunk towards this, with the weight of 5 draws.
MASS_FLOOR, MASS_PRIOR_DRAWS = 1e-3, 5
# The calibration of ε: its share of warm-up, its batches, and the power k of the law 1 − α ∝ εᵏ it fits: the
# rejection rate goes as ε² in many dimensions (the energy error's sd is O(ε²)); 2.3 measured on the tractable BNN.
CALIBRATION_SHARE, CALIBRATION_BATCHES, CALIBRATION_POWER = 0.05, 5, 2.0


@dataclass(frozen=True)
class HmcSettings:
    warmup: int = 500
    samples: int = 500
    trajectory_length: float = 1.0
    target_accept: float = 0.8
    max_leapfrog: int = 256
    adapt_mass: bool = True
    step_jitter: float = 0.2

    def __post_init__(self):
        if not (isinstance(self.warmup, int) and self.warmup >= 0):
            raise ValueError(f"warmup must be a whole number ≥ 0, not {self.warmup!r}")
        if not (isinstance(self.samples, int) and self.samples >= 1):
            raise ValueError(f"samples must be a whole number ≥ 1, not {self.samples!r}")
        if not (math.isfinite(self.trajectory_length) and self.trajectory_length > 0):
            raise ValueError(f"the trajectory length must be finite and positive, not {self.trajectory_length!r}")
        if not 0 < self.target_accept < 1:
            raise ValueError(f"the target acceptance must lie in (0, 1), not {self.target_accept!r}")
        if not (isinstance(self.max_leapfrog, int) and self.max_leapfrog >= 1):
            raise ValueError(f"max_leapfrog must be a whole number ≥ 1, not {self.max_leapfrog!r}")
        if not 0 <= self.step_jitter < 1:
            raise ValueError(f"the step jitter must lie in [0, 1), not {self.step_jitter!r}")


@dataclass(frozen=True)
class ChainState:
    """Where each of C chains stands, and its frozen kernel: all a run needs to go on drawing."""

    position: torch.Tensor  # [C, P]
    log_density: torch.Tensor  # [C]
    gradient: torch.Tensor  # [C, P]
    step_size: torch.Tensor  # [C]
    inverse_mass: torch.Tensor  # [C, P], v


@dataclass(frozen=True)
class Draws:
    """What C chains drew after warm-up: S draws each."""

    samples: torch.Tensor  # [C, S, P]
    log_density: torch.Tensor  # [C, S]
    accept_prob: torch.Tensor  # [C, S], α of each transition
    accepted: torch.Tensor  # [C, S] bool
    divergent: torch.Tensor  # [C, S] bool

    @property
    def acceptance(self) -> torch.Tensor:
        """Per chain, the fraction of transitions accepted."""
        return self.accepted.double().mean(1)


def with_gradient(log_density: LogDensity, theta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """ℓ(θ) [C] and ∇ℓ(θ) [C, P]. The chains are independent, so the gradient of Σ_c ℓ(θ_c) is each chain's own."""
    with torch.enable_grad():
        theta = theta.detach().requires_grad_(True)
        value = log_density(theta)
        if value.shape != theta.shape[:1]:
            raise ValueError(
                f"the log density must return one value per chain, shape {tuple(theta.shape[:1])}, "
                f"not {tuple(value.shape)}"
            )
        (gradient,) = torch.autograd.grad(value.sum(), theta)
    return value.detach(), gradient.detach()


def leapfrog_steps(step_size: torch.Tensor, settings: HmcSettings) -> torch.Tensor:
    return torch.clamp(torch.ceil(settings.trajectory_length / step_size), 1, settings.max_leapfrog).long()


def _kinetic(momentum: torch.Tensor, inverse_mass: torch.Tensor) -> torch.Tensor:
    return 0.5 * (inverse_mass * momentum.square()).sum(-1)


def _normal(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Standard normals shaped as ``like``, drawn from ``generator`` on its own device (the CPU's, so that chains on
    a GPU draw the same momenta as on the CPU) and moved to ``like``'s."""
    return torch.randn(like.shape, generator=generator, device=generator.device, dtype=like.dtype).to(like.device)


def _uniform(like: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    return torch.rand(like.shape, generator=generator, device=generator.device, dtype=like.dtype).to(like.device)


def _transition(log_density, state: ChainState, steps: torch.Tensor, generator: torch.Generator, jitter: float = 0.0):
    """One HMC transition of every chain: (new state, α, accepted, divergent). Each chain's ε is drawn afresh from
    ε·U(1 − jitter, 1 + jitter), independently of the state, so the kernel still leaves p invariant, and a
    trajectory whose time L·ε is near half a period of some direction (θ → −θ, where θ² never moves: an ESS of 79
    for a variance from 4000 draws) does not stay there (Neal 2011, §5.4.2.2)."""
    v, eps = state.inverse_mass, state.step_size[:, None]
    if jitter:
        eps = eps * (1 + jitter * (2 * _uniform(state.step_size, generator)[:, None] - 1))
    momentum = _normal(state.position, generator) / v.sqrt()
    energy = -state.log_density + _kinetic(momentum, v)
    theta, value, gradient, r = state.position, state.log_density, state.gradient, momentum
    for step in range(int(steps.max())):
        moving = (step < steps)[:, None]
        r_half = r + 0.5 * eps * gradient
        theta_next = theta + eps * v * r_half
        value_next, gradient_next = with_gradient(log_density, torch.where(moving, theta_next, theta))
        r_next = r_half + 0.5 * eps * gradient_next
        theta = torch.where(moving, theta_next, theta)
        r = torch.where(moving, r_next, r)
        value = torch.where(moving[:, 0], value_next, value)
        gradient = torch.where(moving, gradient_next, gradient)
    error = -value + _kinetic(r, v) - energy
    divergent = ~torch.isfinite(error) | (error > DIVERGENCE)
    accept_prob = torch.where(divergent, torch.zeros_like(error), torch.exp(-error.clamp(min=0.0)))
    accepted = _uniform(accept_prob, generator) < accept_prob
    keep = accepted[:, None]
    new = ChainState(
        torch.where(keep, theta, state.position),
        torch.where(accepted, value, state.log_density),
        torch.where(keep, gradient, state.gradient),
        state.step_size,
        v,
    )
    return new, accept_prob, accepted, divergent


def _with_kernel(state: ChainState, step_size=None, inverse_mass=None) -> ChainState:
    return ChainState(
        state.position,
        state.log_density,
        state.gradient,
        state.step_size if step_size is None else step_size,
        state.inverse_mass if inverse_mass is None else inverse_mass,
    )


def initial_step_size(log_density, state: ChainState, generator: torch.Generator, tries: int = 60) -> torch.Tensor:
    """Hoffman & Gelman's heuristic (Alg. 4), per chain: from ε = 1, double ε while one leapfrog step's α stays
    above ½, or halve it while α stays below ½."""
    eps = torch.ones_like(state.step_size)
    one_step = torch.ones_like(eps, dtype=torch.long)
    direction = None
    settled = torch.zeros_like(eps, dtype=torch.bool)
    for _ in range(tries):
        _, alpha, _, _ = _transition(log_density, _with_kernel(state, step_size=eps), one_step, generator)
        above = alpha > 0.5
        if direction is None:
            direction = torch.where(above, 2.0, 0.5).to(eps.dtype)
        settled |= above != (direction > 1)
        if bool(settled.all()):
            break
        eps = torch.where(settled, eps, eps * direction)
    return eps


class _DualAveraging:
    """log ε_{m} = μ − √m/γ · h̄_m, h̄_m the running mean of (target − α) with t₀'s damping; the final ε is the
    κ-weighted average of the iterates."""

    def __init__(self, step_size: torch.Tensor, target: float):
        self.mu = torch.log(10 * step_size)
        self.target = target
        self.h_bar = torch.zeros_like(step_size)
        self.log_eps_bar = torch.zeros_like(step_size)
        self.m = 0

    def update(self, accept_prob: torch.Tensor) -> torch.Tensor:
        self.m += 1
        weight = 1.0 / (self.m + T0)
        self.h_bar = (1 - weight) * self.h_bar + weight * (self.target - accept_prob)
        log_eps = self.mu - math.sqrt(self.m) / GAMMA * self.h_bar
        eta = self.m**-KAPPA
        self.log_eps_bar = eta * log_eps + (1 - eta) * self.log_eps_bar
        return torch.exp(log_eps)

    def final(self) -> torch.Tensor:
        return torch.exp(self.log_eps_bar)


def start(log_density: LogDensity, position: torch.Tensor, inverse_mass: torch.Tensor | None = None) -> ChainState:
    """Chains at ``position`` [C, P], with ε = 1 and v = ``inverse_mass`` (default 1) until warm-up tunes them."""
    if position.ndim != 2 or not position.is_floating_point():
        raise ValueError(f"the start must be a [chains, parameters] floating-point tensor, not {tuple(position.shape)}")
    value, gradient = with_gradient(log_density, position)
    if not bool(torch.isfinite(value).all()):
        raise FloatingPointError(
            f"the log density is not finite at the start of chain(s) "
            f"{torch.nonzero(~torch.isfinite(value)).flatten().tolist()}"
        )
    if inverse_mass is None:
        inverse_mass = torch.ones_like(position)
    elif inverse_mass.shape != position.shape or not bool((inverse_mass > 0).all()):
        raise ValueError(f"the inverse mass must be positive and shaped as the start, {tuple(position.shape)}")
    return ChainState(position.detach(), value, gradient, torch.ones_like(value), inverse_mass.to(position))


def _adapt_step(log_density, state, iterations: int, settings: HmcSettings, generator, on_step=None):
    """``iterations`` transitions tuning ε by dual averaging; returns the state with the averaged ε and the
    positions visited [C, iterations, P]."""
    state = _with_kernel(state, step_size=initial_step_size(log_density, state, generator))
    averaging = _DualAveraging(state.step_size, settings.target_accept)
    visited = []
    for _ in range(iterations):
        steps = leapfrog_steps(state.step_size, settings)
        state, alpha, _, _ = _transition(log_density, state, steps, generator, settings.step_jitter)
        state = _with_kernel(state, step_size=averaging.update(alpha))
        visited.append(state.position)
        if on_step:
            on_step()
    final = averaging.final() if iterations else state.step_size
    return _with_kernel(state, step_size=final), torch.stack(visited, 1) if visited else None


def _calibrate_step(log_density, state, iterations: int, settings: HmcSettings, generator, on_step=None):
    """``iterations`` transitions in ``CALIBRATION_BATCHES`` batches, each at a fixed ε = c·ε₀ (ε₀ each chain's
    step from dual averaging; c = 1 first). After each batch, the law 1 − ᾱ = A·cᵏ is fitted to every batch so far
    by least squares (ᾱ a batch's mean α, pooled over chains and transitions: C chains share one posterior, and
    one chain's few α are too noisy), and the next c solves 1 − A·cᵏ = target, within a factor of 4 either way.
    The kernel kept has the last fit's c."""
    base, factor = state.step_size, 1.0
    cross = square = 0.0  # the least-squares sums Σ n·(1 − ᾱ)·cᵏ and Σ n·c²ᵏ over the batches so far
    for part in torch.arange(iterations).tensor_split(min(CALIBRATION_BATCHES, iterations)):
        state = _with_kernel(state, step_size=base * factor)
        steps, alphas = leapfrog_steps(state.step_size, settings), []
        for _ in range(len(part)):
            state, alpha, _, _ = _transition(log_density, state, steps, generator, settings.step_jitter)
            alphas.append(alpha)
            if on_step:
                on_step()
        pooled, power = torch.stack(alphas), factor**CALIBRATION_POWER
        cross += pooled.numel() * (1.0 - float(pooled.mean())) * power
        square += pooled.numel() * power**2
        scale = cross / square  # A
        if scale > 0:
            factor = min(max(((1.0 - settings.target_accept) / scale) ** (1 / CALIBRATION_POWER), 0.25), 4.0)
        else:  # every α = 1 so far: ε may grow by the most allowed
            factor = 4.0
    return _with_kernel(state, step_size=base * factor)


def _shrunk_variance(draws: torch.Tensor) -> torch.Tensor:
    """Per chain and coordinate, Stan's (n/(n+5))·s² + 10⁻³·5/(n+5) of ``draws`` [C, n, P]."""
    n = draws.shape[1]
    variance = draws.var(1, unbiased=True) if n > 1 else torch.ones_like(draws[:, 0])
    return (n / (n + MASS_PRIOR_DRAWS)) * variance + MASS_FLOOR * (MASS_PRIOR_DRAWS / (n + MASS_PRIOR_DRAWS))


def _with_calibration(windows: list[tuple[str, int]], warmup: int) -> list[tuple[str, int]]:
    """The last window's final ``CALIBRATION_SHARE`` of warm-up (at least one transition where warm-up has ten)
    given to :func:`_calibrate_step`."""
    calibration = max(int(CALIBRATION_SHARE * warmup), 1 if warmup >= 10 else 0)
    kind, length = windows[-1]
    if not calibration or length <= calibration:
        return windows
    return [*windows[:-1], (kind, length - calibration), ("calibrate", calibration)]


def warmup_windows(warmup: int, adapt_mass: bool = True) -> list[tuple[str, int]]:
    """Stan's schedule: 15 % tuning ε alone, then windows of 25, 50, 100, … transitions (the last one to 90 %)
    each ending with v set from its draws, then 10 % tuning ε alone, the last half of it calibrating ε's scale.
    Too short a warm-up for that, or v fixed: ε alone, then its calibration."""
    first, last = int(0.15 * warmup), int(0.1 * warmup)
    slow = warmup - first - last
    if slow < 20 or not adapt_mass:
        return _with_calibration([("step", warmup)], warmup)
    windows, size, used = [], 25, 0
    while used < slow:
        size = slow - used if slow - used < 3 * size else size  # the last window takes what remains
        windows.append(("mass", size))
        used, size = used + size, 2 * size
    return _with_calibration([("step", first), *windows, ("step", last)], warmup)


def warm_up(
    log_density: LogDensity,
    position: torch.Tensor,
    settings: HmcSettings,
    generator: torch.Generator,
    progress: Callable[[int, int], None] | None = None,
    inverse_mass: torch.Tensor | None = None,
) -> ChainState:
    """Chains from ``position`` [C, P] after ``settings.warmup`` tuning transitions, their kernel frozen.
    ``inverse_mass`` [C, P], a first guess at v (the posterior's variances, e.g. 1/curvature), spares the first
    window the cost of ε small enough for v = 1 on a badly scaled posterior."""
    state = start(log_density, position, inverse_mass)
    done = 0

    def step():
        nonlocal done
        done += 1
        if progress:
            progress(done, settings.warmup)

    for kind, length in warmup_windows(settings.warmup, settings.adapt_mass):
        if kind == "calibrate":
            state = _calibrate_step(log_density, state, length, settings, generator, step)
            continue
        state, visited = _adapt_step(log_density, state, length, settings, generator, step)
        if kind == "mass":
            state = _with_kernel(state, inverse_mass=_shrunk_variance(visited))
    return state


def draw(
    log_density: LogDensity,
    state: ChainState,
    count: int,
    settings: HmcSettings,
    generator: torch.Generator,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[ChainState, Draws]:
    """``count`` transitions of the frozen kernel from ``state``: the state after them, and every draw. Call it
    again with the returned state (and the same generator) to go on: that is how a run resumes."""
    steps = leapfrog_steps(state.step_size, settings)
    samples, values, alphas, accepts, divergences = [], [], [], [], []
    for index in range(count):
        state, alpha, accepted, divergent = _transition(log_density, state, steps, generator, settings.step_jitter)
        samples.append(state.position)
        values.append(state.log_density)
        alphas.append(alpha)
        accepts.append(accepted)
        divergences.append(divergent)
        if progress:
            progress(index + 1, count)
    parts = (torch.stack(part, 1) for part in (samples, values, alphas, accepts, divergences))
    return state, Draws(*parts)


def hmc(
    log_density: LogDensity,
    position: torch.Tensor,
    settings: HmcSettings,
    generator: torch.Generator,
) -> tuple[ChainState, Draws]:
    """Warm-up, then ``settings.samples`` draws per chain."""
    state = warm_up(log_density, position, settings, generator)
    return draw(log_density, state, settings.samples, settings, generator)
