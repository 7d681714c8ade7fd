"""Stochastic-gradient Hamiltonian Monte Carlo over a network's flat parameter vector (Chen et al. 2014),
each step taken by the library ``posteriors`` 0.1.3 (``posteriors.sgmcmc.sghmc``): the SGHMC row of
Laurent et al. (2024), §4 and Table 1.

posteriors' step, for a log density ℓ, learning rate ε, friction α, temperature T (momentum scale 1):

    θ_{t+1} = θ_t + ε m_t
    m_{t+1} = m_t + ε ∇ℓ(θ_t; batch_t) − ε α m_t + N(0, 2 α ε T I),

whose law tends, as ε → 0, to p_T(θ, m) ∝ exp((ℓ(θ) − ½|m|²)/T); there is no Metropolis correction, so an
O(ε) bias remains. posteriors asks for ℓ averaged over the batch and T = 1/N (its docs,
"log_posteriors.md"), so that ε means the same for any N and batch size. For a network f and N data:

    ℓ(w; B) = (1/|B|) Σ_{i∈B} log softmax(f(w, x_i))_{y_i} − |w|²/(2 N v),

the log posterior per datum under the prior N(0, v I), run at temperature T/N to sample p(w | data)^{1/T}.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator

import torch


def _posteriors_sghmc():
    """posteriors' SGHMC, imported when a chain runs: it brings tensordict and torch's compiler (seconds), which
    nothing else here needs."""
    with warnings.catch_warnings():
        # tensordict 0.15 warns, per state class, that a class-level tensor default is shared; it is harmless
        # here because every step builds a new state (inplace=False), never writing into a default.
        warnings.simplefilter("ignore", FutureWarning)
        from posteriors.sgmcmc import sghmc

    return sghmc


def mean_log_posterior(
    logits_fn: Callable, flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, n_data: int, prior_var: float
) -> torch.Tensor:
    """The log posterior per datum on a batch, up to a constant:
    (1/|B|) Σ_i log softmax(f(w, x_i))_{y_i} − |w|²/(2 N v)."""
    log_lik = torch.log_softmax(logits_fn(flat, x), dim=-1).gather(-1, y[:, None]).mean()
    return log_lik - flat.dot(flat) / (2 * n_data * prior_var)


def shuffled_batches(n: int, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """Index batches without end: each pass a fresh permutation of range(n) from ``generator``, cut into
    ``batch_size`` pieces (the last piece of a pass may be shorter)."""
    while True:
        order = torch.randperm(n, generator=generator, device=generator.device)
        yield from order.split(batch_size)


@contextlib.contextmanager
def _global_rng_from(seed: int, device: torch.device):
    """posteriors draws its noise with ``torch.randn_like``, from the global generator: start it from
    ``seed`` for a reproducible chain, and give the caller's global state back afterwards."""
    cuda = [device] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.default_generator.manual_seed(seed)
        if cuda:
            with torch.cuda.device(device):
                torch.cuda.manual_seed(seed)
        yield


def _check_chain_args(lr, friction, temperature, burn_in, thinning, count):
    problems = [
        msg
        for bad, msg in [
            (not lr > 0, f"lr must be > 0, got {lr}"),
            (not friction > 0, f"friction must be > 0, got {friction}"),
            (
                not lr * friction < 2,
                f"lr * friction must be < 2 (else the friction alone makes the momenta grow), got {lr * friction}",
            ),
            (not temperature > 0, f"temperature must be > 0, got {temperature}"),
            (burn_in < 0, f"burn_in must be >= 0, got {burn_in}"),
            (thinning < 1, f"thinning must be >= 1, got {thinning}"),
            (count < 1, f"count must be >= 1, got {count}"),
        ]
        if bad
    ]
    if problems:
        raise ValueError("; ".join(problems))


def _check_finite(state, step: int, steps: int) -> None:
    if not (
        torch.isfinite(state.params).all()
        and torch.isfinite(state.momenta).all()
        and torch.isfinite(state.log_posterior)
    ):
        raise FloatingPointError(
            f"SGHMC diverged at step {step} of {steps}: the parameters, momenta or log "
            f"posterior ({float(state.log_posterior):.4g}) are no longer finite"
        )


def sghmc_chain(
    log_density: Callable,
    start: torch.Tensor,
    batches: Iterator,
    *,
    lr: float,
    friction: float,
    temperature: float,
    burn_in: int,
    thinning: int,
    count: int,
    generator: torch.Generator,
    on_step: Callable | None = None,
) -> torch.Tensor:
    """``count`` states of posteriors' SGHMC chain (module docstring) on ``log_density(θ, batch)``, one
    batch from ``batches`` per step: after ``burn_in`` steps, every ``thinning``-th state, as
    Tensor[count, P]. The momenta start from their stationary law N(0, T I) and the noise from a seed,
    both drawn from ``generator``. ``on_step(step, log_density)`` is called after each step. Raises
    FloatingPointError naming the step where the chain stops being finite."""
    _check_chain_args(lr, friction, temperature, burn_in, thinning, count)
    transform = _posteriors_sghmc().build(
        lambda params, batch: (log_density(params, batch), ()), lr=lr, alpha=friction, temperature=temperature
    )
    momenta = temperature**0.5 * torch.randn(start.shape, generator=generator, dtype=start.dtype, device=start.device)
    seed = int(torch.randint(2**62, (), generator=generator, device=generator.device))
    state = transform.init(start.detach().clone(), momenta=momenta)
    steps = burn_in + thinning * count
    samples = start.new_empty((count, *start.shape))
    with _global_rng_from(seed, start.device):
        for step in range(1, steps + 1):
            state, _ = transform.update(state, next(batches), inplace=False)
            _check_finite(state, step, steps)
            if step > burn_in and (step - burn_in) % thinning == 0:
                samples[(step - burn_in) // thinning - 1] = state.params
            if on_step is not None:
                on_step(step, float(state.log_posterior))
    return samples


def sghmc_samples(
    logits_fn: Callable,
    flat_start: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    prior_var: float,
    lr: float,
    friction: float,
    batch_size: int,
    burn_in: int,
    thinning: int,
    count: int,
    generator: torch.Generator,
    temperature: float = 1.0,
    on_step: Callable | None = None,
) -> torch.Tensor:
    """Samples of p(w | x, y)^{1/T} for the classifier ``logits_fn(flat, x)`` under the prior N(0, v I):
    :func:`sghmc_chain` on :func:`mean_log_posterior` at posteriors' temperature T/N, minibatches of
    ``batch_size`` drawn from ``generator`` without replacement within each pass. Tensor[count, P]."""
    n = len(x)
    if len(y) != n or n == 0:
        raise ValueError(f"x and y must hold the same, nonzero number of data, got {len(x)} and {len(y)}")
    if not 1 <= batch_size <= n:
        raise ValueError(f"batch_size must be in [1, {n}], got {batch_size}")
    if not prior_var > 0:
        raise ValueError(f"prior_var must be > 0, got {prior_var}")

    def log_density(flat, index):
        index = index.to(x.device)
        return mean_log_posterior(logits_fn, flat, x[index], y[index], n, prior_var)

    return sghmc_chain(
        log_density,
        flat_start,
        shuffled_batches(n, batch_size, generator),
        lr=lr,
        friction=friction,
        temperature=temperature / n,
        burn_in=burn_in,
        thinning=thinning,
        count=count,
        generator=generator,
        on_step=on_step,
    )
