"""SWAG (symlab.lib.swag): the running moments against the stored snapshots and against
torch-uncertainty's SWAG, the SGD loop against torch.optim.SGD, the samples against the covariance,
and SGD on a quadratic settling around its known optimum."""

import contextlib
import math

import pytest
import torch
from tiny_networks import mlp_logits
from torch import nn
from torch_uncertainty_parts import torch_uncertainty_part

from symlab.lib import swag

torch.set_num_threads(1)


def data(n=40, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=generator), torch.randint(0, 3, (n,), generator=generator)


def start(seed=1):
    return torch.randn(27, generator=torch.Generator().manual_seed(seed))


SGD = dict(lr=0.05, weight_decay=1e-3, batch_size=8, steps_between=3)


def snapshots(count=8, seed=2, **options):
    settings = SGD | options
    return list(
        swag.sgd_snapshots(
            mlp_logits, start(), *data(), snapshots=count, generator=torch.Generator().manual_seed(seed), **settings
        )
    )


def test_moments_match_the_snapshots():
    thetas = snapshots()
    posterior = swag.swag_moments(thetas, rank=5)
    stacked = torch.stack(thetas).double()
    running_means = stacked.cumsum(0) / torch.arange(1, len(stacked) + 1, dtype=torch.float64)[:, None]
    torch.testing.assert_close(posterior.mean, stacked.mean(0), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(posterior.variance(), stacked.var(0, correction=0), rtol=1e-9, atol=1e-14)
    torch.testing.assert_close(posterior.deviations, (stacked - running_means)[-5:], rtol=1e-12, atol=1e-14)
    assert posterior.count == 8 and posterior.dtype == torch.float32
    assert stacked.var(0).min() > 1e-8  # the snapshots do move


def test_fit_is_the_moments_of_the_seeded_run():
    fitted = swag.swag_fit(
        mlp_logits, start(), *data(), snapshots=8, rank=5, generator=torch.Generator().manual_seed(2), **SGD
    )
    expected = swag.swag_moments(snapshots(), rank=5)
    for field in ("mean", "sq_mean", "deviations"):
        assert torch.equal(getattr(fitted, field), getattr(expected, field))
    other = swag.swag_fit(
        mlp_logits, start(), *data(), snapshots=8, rank=5, generator=torch.Generator().manual_seed(3), **SGD
    )
    assert not torch.equal(fitted.mean, other.mean)


def test_sgd_matches_torch_optim_sgd():
    """The same minibatches (epochs of randperm from the same seed) through torch.optim.SGD with momentum,
    weight decay and a linear warm-up (LambdaLR)."""
    x, y = data()
    warmup, steps_between, count = 4, 3, 3
    ours = list(
        swag.sgd_snapshots(
            mlp_logits,
            start(),
            x,
            y,
            snapshots=count,
            generator=torch.Generator().manual_seed(2),
            warmup_steps=warmup,
            momentum=0.9,
            **SGD,
        )
    )
    w = nn.Parameter(start().clone())
    optimiser = torch.optim.SGD([w], lr=SGD["lr"], momentum=0.9, weight_decay=SGD["weight_decay"])
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: min(1.0, (step + 1) / warmup))
    generator, batches, theirs = torch.Generator().manual_seed(2), [], []
    for step in range(warmup + count * steps_between):
        if not batches:
            batches = list(torch.randperm(len(x), generator=generator).split(SGD["batch_size"]))
        index = batches.pop(0)
        optimiser.zero_grad()
        nn.functional.cross_entropy(mlp_logits(w, x[index]), y[index]).backward()
        optimiser.step()
        schedule.step()
        if step >= warmup and (step - warmup + 1) % steps_between == 0:
            theirs.append(w.detach().clone())
    torch.testing.assert_close(torch.stack(ours), torch.stack(theirs), rtol=1e-5, atol=1e-6)


@pytest.fixture
def torch_uncertainty_swag():
    """torch-uncertainty's SWAG class (tests/torch_uncertainty_parts.py)."""
    return torch_uncertainty_part("methods.swag").SWAG


@contextlib.contextmanager
def default_dtype(dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


class Flat(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(size, dtype=torch.float64))


@pytest.mark.parametrize("snapshot_count, rank", [(8, 5), (10, 20)])
def test_moments_and_samples_match_torch_uncertainty(torch_uncertainty_swag, snapshot_count, rank):
    """Fewer snapshots than the rank (10 of 20) too: D has 10 rows and DᵀD is still divided by K − 1 = 19."""
    thetas, count = snapshots(count=snapshot_count), 12_000
    # float64 throughout: torch-uncertainty draws its noise in the default dtype
    with torch.random.fork_rng(), default_dtype(torch.float64):
        reference = torch_uncertainty_swag(
            Flat(27),
            cycle_start=0,
            cycle_length=1,
            scale=swag.SCALE,
            max_num_models=rank,
            var_clamp=swag.VAR_CLAMP,
            num_estimators=1,
        )
        for epoch, theta in enumerate(thetas, start=1):
            reference.core_model.w.data.copy_(theta.double())
            reference.update_wrapper(epoch)
        torch.manual_seed(9)
        draws = torch.stack([reference.sample(swag.SCALE).w.detach() for _ in range(count)])
    stats = {key.rsplit("w_", 1)[1]: value for key, value in reference.swag_stats.items()}
    posterior = swag.swag_moments(thetas, rank=rank)
    torch.testing.assert_close(posterior.mean, stats["mean"], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(posterior.sq_mean, stats["sq_mean"], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(posterior.deviations, stats["covariance_sqrt"], rtol=1e-12, atol=1e-14)
    # its draws (√scale times the spread) have our covariance at the same scale
    assert_gaussian_moments(draws, posterior.mean, posterior.covariance(swag.SCALE), count)


def assert_gaussian_moments(samples, mean, covariance, count):
    """Within 5 standard errors: σⱼ/√N for the mean, √((Σⱼₖ² + ΣⱼⱼΣₖₖ)/N) for a covariance entry."""
    samples = samples.double()
    sd = covariance.diagonal().sqrt()
    assert ((samples.mean(0) - mean).abs() <= 5 * sd / math.sqrt(count) + 1e-7).all()
    entry_sd = ((covariance.square() + torch.outer(sd.square(), sd.square())) / count).sqrt()
    assert ((torch.cov(samples.T) - covariance).abs() <= 5 * entry_sd + 1e-12).all()


def random_posterior(size=6, count=9, rank=5, seed=10):
    generator = torch.Generator().manual_seed(seed)
    scales = torch.linspace(0.1, 2.0, size, dtype=torch.float64)
    return swag.swag_moments(
        list(scales * torch.randn(count, size, generator=generator, dtype=torch.float64)), rank=rank
    )


@pytest.mark.parametrize("scale", [swag.SCALE, 0.5])
def test_samples_have_the_formula_covariance(scale):
    posterior = random_posterior()
    deviations = posterior.deviations
    expected = scale * (torch.diag(posterior.variance()) + deviations.T @ deviations / (posterior.rank - 1))
    torch.testing.assert_close(posterior.covariance(scale), expected)
    count = 40_000
    samples = posterior.sample(count, torch.Generator().manual_seed(11), scale=scale)
    assert samples.shape == (count, 6) and samples.dtype == torch.float64
    assert_gaussian_moments(samples, posterior.mean, expected, count)
    assert torch.equal(posterior.sample(count, torch.Generator().manual_seed(11), scale=scale), samples)
    assert torch.equal(posterior.sample(4, torch.Generator(), scale=0.0), posterior.mean.expand(4, 6))


def test_sgd_on_a_quadratic_settles_around_its_optimum():
    """ℓ = ½‖w − yᵢ‖² per example, weight decay λ: the optimum is w* = ȳ/(1 + λ). SGD is then
    w ← (1 − η(1 + λ)) w + η ȳ_B, an AR(1) whose stationary variance is at most η² Var(ȳ_B)/(1 − a²)
    (less with epochs of disjoint batches, whose noise sums to 0)."""
    size, n, batch, lr, decay, count = 3, 32, 4, 0.1, 0.1, 20
    targets = torch.randn(n, size, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    optimum = targets.mean(0) / (1 + decay)

    def constant(flat, x):
        return flat.expand(len(x), size)

    def squared(f, y):
        return 0.5 * (f - y).square().sum()

    posterior = swag.swag_fit(
        constant,
        optimum + 10.0,
        targets,
        targets,
        lr=lr,
        weight_decay=decay,
        batch_size=batch,
        steps_between=30,
        snapshots=count,
        warmup_steps=100,
        loss=squared,
        generator=torch.Generator().manual_seed(13),
    )
    a = 1 - lr * (1 + decay)
    batch_variance = targets.var(0) / batch * (n - batch) / (n - 1)
    stationary = lr**2 * batch_variance / (1 - a**2)
    assert ((posterior.mean - optimum).abs() <= 5 * (stationary / count).sqrt()).all()
    assert (posterior.variance() < 3 * stationary).all() and (posterior.variance() > 1e-4 * stationary).all()


def test_divergence_raises_naming_the_step():
    with pytest.raises(FloatingPointError, match="step"):
        snapshots(lr=1e30)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"lr": 0.0}, "learning rate"),
        ({"weight_decay": -1.0}, "weight decay"),
        ({"momentum": 1.0}, "momentum"),
        ({"batch_size": 0}, "batch_size"),
        ({"steps_between": 2.5}, "steps_between"),
        ({"snapshots": 1}, "snapshots"),
        ({"rank": 1}, "rank"),
    ],
)
def test_invalid_options_raise(options, message):
    settings = SGD | {"snapshots": 4} | options
    with pytest.raises(ValueError, match=message):
        swag.swag_fit(mlp_logits, start(), *data(), generator=torch.Generator(), **settings)


def test_invalid_sampling_raises():
    posterior = random_posterior()
    with pytest.raises(ValueError, match="scale"):
        posterior.sample(3, torch.Generator(), scale=-0.1)
    with pytest.raises(ValueError, match="count"):
        posterior.sample(0, torch.Generator())
    with pytest.raises(ValueError, match="at least 2 snapshots"):
        swag.swag_moments([torch.zeros(3)])
