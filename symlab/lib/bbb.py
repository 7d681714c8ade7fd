"""Bayes by backprop (Blundell et al. 2015) for any network given as ``logits_fn(flat, x)``: the mean-field
Gaussian q(w) = N(μ, diag σ²) over the flat parameter vector, σ = softplus(ρ) as in BLiTZ, fitted by Adam
on the negative ELBO per datum: the BNN rows of Laurent et al. (2024), §4 and App. B.1 (BLiTZ's default
priors, 3 Monte Carlo samples of the ELBO per step, no weight decay).

The prior. BLiTZ 0.2.8's BayesianLinear and BayesianConv2d default to the scale mixture
π N(0, σ₁²) + (1 − π) N(0, σ₂²) with π = 1 and σ₁ = 0.1 (σ₂ = 0.4, resp. 0.002, has weight 0): the prior is
N(0, 0.1² I), so the KL is the closed form of :func:`symlab.lib.gaussian.kl_to_prior`. (BLiTZ estimates
it from the one sampled w, log q(w) − log p(w), and adds 1e-6 to the prior's density, which flattens
log p beyond |w| ≈ 0.55; here it is exact.) BLiTZ starts ρ at −7 (σ ≈ 9e-4), the default here.

The loss, for a minibatch B of the N data and S draws w_s = μ + σ ⊙ ε_s, ε_s ~ N(0, I):

    L(μ, ρ) = (1/S) Σ_s (1/|B|) Σ_{i∈B} −log softmax(f(w_s, x_i))_{y_i} + λ KL(q ‖ p) / N,

an unbiased estimate of −ELBO/N when λ (``kl_weight``) is 1; the paper's KLD weight for MNIST is lost
from its text, so 1 is the default.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from symlab.lib.adam import Adam
from symlab.lib.gaussian import kl_to_prior

BLITZ_PRIOR_SCALE = 0.1
BLITZ_INIT_RHO = -7.0


def log_softplus(rho: torch.Tensor) -> torch.Tensor:
    """log σ = log softplus(ρ) = log log(1 + e^ρ), finite for every ρ: below ρ = −20 it is ρ to within
    e^ρ/2 < 1e-9 (softplus itself would underflow to 0 and its log to −∞)."""
    return torch.where(rho < -20, rho, F.softplus(rho.clamp(min=-20)).log())


def elbo_terms(
    logits_fn: Callable,
    mean: torch.Tensor,
    rho: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    noise: torch.Tensor,
    prior_scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two terms of the negative ELBO, differentiable in μ and ρ: the expected cross-entropy per datum
    over the draws w_s = μ + softplus(ρ) ⊙ ``noise[s]`` (noise: Tensor[S, P]),
    (1/S) Σ_s (1/|B|) Σ_i −log softmax(f(w_s, x_i))_{y_i}, and KL(q ‖ N(0, p² I)) in closed form."""
    sd = F.softplus(rho)
    weights = mean + sd * noise
    logits = torch.func.vmap(logits_fn, in_dims=(0, None))(weights, x)
    nll = F.cross_entropy(logits.flatten(0, 1), y.repeat(len(noise)))
    return nll, kl_to_prior(mean, log_softplus(rho), prior_scale, sd=sd)


def _check_fit_args(flat_init, x, y, epochs, batch_size, lr, prior_scale, kl_weight, mc_samples, gamma):
    n = len(x)
    problems = [
        msg
        for bad, msg in [
            (flat_init.ndim != 1, f"flat_init must be one flat vector, got shape {tuple(flat_init.shape)}"),
            (len(y) != n or n == 0, f"x and y must hold the same, nonzero number of data, got {n} and {len(y)}"),
            (epochs < 1, f"epochs must be >= 1, got {epochs}"),
            (not 1 <= batch_size <= max(n, 1), f"batch_size must be in [1, {n}], got {batch_size}"),
            (not lr > 0, f"lr must be > 0, got {lr}"),
            (not prior_scale > 0, f"prior_scale must be > 0, got {prior_scale}"),
            (not kl_weight >= 0, f"kl_weight must be >= 0, got {kl_weight}"),
            (mc_samples < 1, f"mc_samples must be >= 1, got {mc_samples}"),
            (not gamma > 0, f"gamma must be > 0, got {gamma}"),
        ]
        if bad
    ]
    if problems:
        raise ValueError("; ".join(problems))


def bbb_fit(
    logits_fn: Callable,
    flat_init: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    lr: float,
    generator: torch.Generator,
    prior_scale: float = BLITZ_PRIOR_SCALE,
    kl_weight: float = 1.0,
    mc_samples: int = 3,
    init_rho: float | torch.Tensor = BLITZ_INIT_RHO,
    milestones: tuple[int, ...] = (),
    gamma: float = 0.5,
    information: Callable | None = None,
    on_step: Callable | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """q = N(μ, σ²) fitted by Adam on (μ, ρ) for ``epochs`` passes over (x, y), from μ = ``flat_init`` and
    ρ = ``init_rho``: each pass a fresh permutation cut into minibatches of ``batch_size``, each step the
    loss of the module docstring with ``mc_samples`` draws, all randomness from ``generator``. The learning
    rate is multiplied by ``gamma`` after each epoch in ``milestones`` (torch's MultiStepLR; the paper's
    MNIST recipe halves it after epochs 15 and 30). With ``information(w, μ, log σ)``, an estimate of the
    mutual information I between a symmetry and w ~ q from one draw, the loss is that of SGM, the negative
    ELBO of the symmetrised posterior: −(ELBO + I)/N, I averaged over the step's draws (Gelberg et al. §4).
    ``on_step(step, loss)`` is called after each step.
    Returns (μ, σ), detached. Raises FloatingPointError naming the step where the loss or the parameters
    stop being finite."""
    _check_fit_args(flat_init, x, y, epochs, batch_size, lr, prior_scale, kl_weight, mc_samples, gamma)
    n = len(x)
    theta = torch.stack(
        [flat_init.detach(), torch.broadcast_to(torch.as_tensor(init_rho), flat_init.shape).to(flat_init)]
    )
    optimiser = Adam(theta, lr)
    step = 0
    for epoch in range(1, epochs + 1):
        optimiser.lr = lr * gamma ** sum(epoch > m for m in milestones)
        order = torch.randperm(n, generator=generator, device=generator.device).to(x.device)
        for index in order.split(batch_size):
            step += 1
            leaf = theta.detach().requires_grad_()
            noise = torch.randn(
                (mc_samples, theta.shape[1]), generator=generator, dtype=theta.dtype, device=theta.device
            )
            nll, kl = elbo_terms(logits_fn, leaf[0], leaf[1], x[index], y[index], noise, prior_scale)
            loss = nll + (kl_weight / n) * kl
            if information is not None:
                loss = loss - _mean_information(information, leaf, noise) / n
            _raise_if_diverged(bool(torch.isfinite(loss)), step, epoch)
            (grad,) = torch.autograd.grad(loss, leaf)
            optimiser.step(grad)
            if on_step is not None:
                on_step(step, float(loss.detach()))
    _raise_if_diverged(bool(torch.isfinite(theta).all()), step, epochs)
    return theta[0].clone(), F.softplus(theta[1])


def _mean_information(information: Callable, leaf: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """The information term averaged over the step's draws w_s = μ + σ ⊙ noise_s."""
    log_sd = log_softplus(leaf[1])
    sd = F.softplus(leaf[1])
    return torch.stack([information(leaf[0] + sd * eps, leaf[0], log_sd) for eps in noise]).mean().to(leaf.dtype)


def _raise_if_diverged(finite: bool, step: int, epoch: int) -> None:
    if not finite:
        raise FloatingPointError(
            f"Bayes by backprop diverged at step {step} (epoch {epoch}): the loss or the "
            f"variational parameters are no longer finite"
        )


def bbb_samples(mean: torch.Tensor, sd: torch.Tensor, count: int, generator: torch.Generator) -> torch.Tensor:
    """``count`` independent draws w = μ + σ ⊙ ε, ε ~ N(0, I) from ``generator``: Tensor[count, P]."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    noise = torch.randn((count, *mean.shape), generator=generator, dtype=mean.dtype, device=mean.device)
    return mean + sd * noise
