"""The Laplace approximation (symlab.lib.laplace): the exact Hessian against finite differences, the GGN
against Jᵀ Λ J built example by example, the posterior against the exact one of a linear-Gaussian model and
against laplace-torch's at a converged MAP, the samples against the covariance, and the fitted prior precision
against a grid and laplace-torch."""

import itertools
import json
import math
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from scipy.stats import multivariate_normal
from tiny_networks import conv_logits, tanh_mlp

from symlab.lib import laplace

torch.set_num_threads(1)


def data(n=10, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=generator), torch.randint(0, 3, (n,), generator=generator)


def random_point(size, seed=1, dtype=torch.float64):
    return torch.randn(size, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def finite_difference_hessian(f, w, h):
    """Central second differences: [f(w+he_j+he_k) − f(w+he_j−he_k) − f(w−he_j+he_k) + f(w−he_j−he_k)]/4h²."""
    size = len(w)
    hessian = torch.zeros(size, size, dtype=torch.float64)
    eye = torch.eye(size, dtype=torch.float64) * h
    for j in range(size):
        for k in range(j, size):
            value = (
                f(w + eye[j] + eye[k]) - f(w + eye[j] - eye[k]) - f(w - eye[j] + eye[k]) + f(w - eye[j] - eye[k])
            ) / (4 * h * h)
            hessian[j, k] = hessian[k, j] = value
    return hessian


def test_exact_hessian_matches_finite_differences():
    x, y = data()
    w, delta = random_point(27), 0.7
    exact = laplace.nll_hessian(tanh_mlp, w, x, y, chunk_size=3) + delta * torch.eye(27, dtype=torch.float64)
    numeric = finite_difference_hessian(
        lambda v: laplace.negative_log_posterior(tanh_mlp, v, x, y, prior_precision=delta, chunk_size=4), w, 1e-4
    )
    assert exact.abs().max() > 1.0
    torch.testing.assert_close(exact, numeric, rtol=1e-5, atol=1e-5 * float(exact.abs().max()))


def test_cross_entropy_output_hessian_is_diag_p_minus_ppT():
    logits = torch.randn(5, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    labels = torch.tensor([0, 3, 1, 1, 2])
    p = logits.softmax(-1)
    expected = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
    torch.testing.assert_close(laplace.output_hessians(logits, labels), expected, rtol=1e-12, atol=1e-14)


def brute_force_ggn(logits_fn, w, x, y):
    """Σᵢ Jᵢᵀ (diag pᵢ − pᵢpᵢᵀ) Jᵢ with each Jᵢ from torch.autograd.functional.jacobian."""
    total = torch.zeros(len(w), len(w), dtype=torch.float64)
    for xi in x.double():
        J = torch.autograd.functional.jacobian(lambda v: logits_fn(v, xi[None])[0], w)
        p = logits_fn(w, xi[None])[0].softmax(-1)
        total += J.T @ (torch.diag(p) - torch.outer(p, p)) @ J
    return total


def test_ggn_matches_brute_force_on_a_conv_net():
    logits_fn, size = conv_logits()
    generator = torch.Generator().manual_seed(3)
    x, y = torch.randn(7, 1, 6, 6, generator=generator), torch.randint(0, 3, (7,), generator=generator)
    w = 0.5 * random_point(size, seed=4)
    ggn = laplace.nll_ggn(logits_fn, w, x, y, chunk_size=3)
    expected = brute_force_ggn(logits_fn, w, x, y)
    assert expected.abs().max() > 0.1
    torch.testing.assert_close(ggn, expected, rtol=1e-10, atol=1e-12)
    assert torch.linalg.eigvalsh(ggn).min() > -1e-10 * float(ggn.abs().max())


def test_diagonal_fisher_is_the_sum_of_squared_per_example_gradients():
    logits_fn, size = conv_logits()
    generator = torch.Generator().manual_seed(5)
    x, y = torch.randn(7, 1, 6, 6, generator=generator), torch.randint(0, 3, (7,), generator=generator)
    w = 0.5 * random_point(size, seed=6, dtype=torch.float32)
    expected = torch.zeros(size, dtype=torch.float64)
    for xi, yi in zip(x.double(), y):
        v = w.double().requires_grad_(True)
        (gradient,) = torch.autograd.grad(laplace.cross_entropy_sum(logits_fn(v, xi[None]), yi[None]), v)
        expected += gradient.square()
    fisher = laplace.diagonal_fisher(logits_fn, w, x, y, chunk_size=3)
    assert fisher.dtype == torch.float64 and expected.max() > 0.1
    torch.testing.assert_close(fisher, expected, rtol=1e-10, atol=1e-12)


def linear_gaussian(n=30, d=4, noise_var=0.25, seed=5):
    """y = Xw + ε, ε ~ N(0, s²): its posterior under N(0, δ⁻¹I) is exactly Gaussian."""
    generator = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=generator, dtype=torch.float64)
    y = X @ torch.randn(d, generator=generator, dtype=torch.float64) + 0.5 * torch.randn(
        n, generator=generator, dtype=torch.float64
    )

    def loss(f, target):  # the Gaussian negative log-likelihood, constants included
        return 0.5 * (f[:, 0] - target).square().sum() / noise_var + 0.5 * len(f) * math.log(2 * math.pi * noise_var)

    return X, y, loss, noise_var


def linear(flat, x):
    return (x @ flat)[:, None]


@pytest.mark.parametrize("curvature", laplace.CURVATURES)
def test_linear_gaussian_posterior_and_evidence_are_exact(curvature):
    X, y, loss, noise_var = linear_gaussian()
    delta = 2.0
    precision = X.T @ X / noise_var + delta * torch.eye(X.shape[1], dtype=torch.float64)
    mean = torch.linalg.solve(precision, X.T @ y / noise_var)
    posterior = laplace.laplace_fit(
        linear, mean, X, y, prior_precision=delta, curvature=curvature, loss=loss, chunk_size=7
    )
    torch.testing.assert_close(posterior.covariance(), torch.linalg.inv(precision), rtol=1e-10, atol=1e-13)
    torch.testing.assert_close(posterior.precision(), precision, rtol=1e-10, atol=1e-10)
    evidence = multivariate_normal(
        mean=torch.zeros(len(y)).numpy(), cov=(noise_var * torch.eye(len(y)) + X @ X.T / delta).numpy()
    ).logpdf(y.numpy())
    assert posterior.log_marginal_likelihood() == pytest.approx(evidence, rel=1e-10)
    assert posterior.negative_curvature == 0


def mlp_posterior(curvature="ggn", delta=3.0, dtype=torch.float32):
    x, y = data(n=40)
    return laplace.laplace_fit(
        tanh_mlp, random_point(27, dtype=dtype), x, y, prior_precision=delta, curvature=curvature, chunk_size=16
    )


def test_samples_have_the_posterior_mean_and_covariance():
    posterior = mlp_posterior()
    count = 20_000
    samples = posterior.sample(count, torch.Generator().manual_seed(6))
    assert samples.dtype == torch.float32 and samples.shape == (count, 27)
    covariance = torch.linalg.inv(
        laplace.nll_ggn(tanh_mlp, posterior.mean, *data(n=40)) + 3.0 * torch.eye(27, dtype=torch.float64)
    )
    torch.testing.assert_close(posterior.covariance(), covariance, rtol=1e-9, atol=1e-12)
    samples = samples.double()
    sd = covariance.diagonal().sqrt()
    # 5 standard errors: the mean's is σⱼ/√N, a covariance entry's √((Σⱼₖ² + ΣⱼⱼΣₖₖ)/N) for Gaussian samples
    assert ((samples.mean(0) - posterior.mean).abs() <= 5 * sd / math.sqrt(count) + 1e-6).all()
    entry_sd = ((covariance.square() + torch.outer(sd.square(), sd.square())) / count).sqrt()
    assert ((torch.cov(samples.T) - covariance).abs() <= 5 * entry_sd).all()


def test_samples_are_reproducible_from_the_seed():
    posterior = mlp_posterior()
    first, again = (posterior.sample(5, torch.Generator().manual_seed(7)) for _ in range(2))
    assert torch.equal(first, again)
    assert not torch.equal(first, posterior.sample(5, torch.Generator().manual_seed(8)))
    samples = laplace.laplace_samples(
        tanh_mlp,
        random_point(27, dtype=torch.float32),
        *data(n=40),
        count=5,
        generator=torch.Generator().manual_seed(7),
        prior_precision=3.0,
        chunk_size=16,
    )
    assert torch.equal(samples, first)


REFERENCE = Path(__file__).parent / "data" / "laplace_torch_tanh.safetensors"  # laplace_torch_reference.py writes it
REFERENCE_WIDTH = 16


def reference_tanh(flat, x):
    """The reference's 2-16-2 tanh network, its parameters in torch.nn.Sequential's order."""
    w = REFERENCE_WIDTH
    W1, b1, W2, b2 = flat[: 2 * w].view(w, 2), flat[2 * w : 3 * w], flat[3 * w : 5 * w].view(2, w), flat[5 * w :]
    return torch.tanh(x @ W1.T + b1) @ W2.T + b2


@pytest.fixture(scope="module")
def laplace_torch():
    """laplace-torch 0.3's full Laplace of the tanh network at a converged MAP: (tensors, numbers)."""
    with safe_open(str(REFERENCE), "pt") as handle:
        numbers = json.loads(handle.metadata()["laplace_torch"])
    return load_file(str(REFERENCE)), numbers


def relative_error(ours, theirs) -> float:
    return float((ours - theirs).abs().max() / theirs.abs().max())


@pytest.mark.parametrize("curvature", laplace.CURVATURES)
def test_the_laplace_posterior_matches_laplace_torch_at_a_converged_map(laplace_torch, curvature):
    """The exact Hessian there has 22 negative eigenvalues: they are kept, not clipped, and the covariance, the
    log-determinant and the evidence agree with laplace-torch's (which keeps them too)."""
    tensors, numbers = laplace_torch
    expected, delta = numbers[curvature], numbers["prior_precision"]
    assert numbers["gradient_norm"] < 1e-6  # a MAP: ∇U ≈ 0
    posterior = laplace.laplace_fit(
        reference_tanh, tensors["map"], tensors["x"], tensors["y"], prior_precision=delta, curvature=curvature
    )
    assert relative_error(posterior.covariance(), tensors[f"{curvature}/covariance"]) < 1e-8
    log_det = float(torch.log(posterior.eigenvalues + delta).sum())
    assert log_det == pytest.approx(expected["log_det_posterior_precision"], rel=1e-8)
    assert posterior.log_marginal_likelihood() == pytest.approx(expected["log_marginal_likelihood"], rel=1e-8)
    assert posterior.negative_curvature == expected["negative_eigenvalues"] == (22 if curvature == "exact" else 0)
    assert float(posterior.eigenvalues.min()) == pytest.approx(expected["smallest_eigenvalue"], rel=1e-8, abs=1e-12)


def test_negative_curvature_is_kept_in_the_covariance(laplace_torch):
    """Along ∇²L's eigenvector of eigenvalue h < 0 the posterior variance is 1/(h + δ), more than the prior's 1/δ."""
    tensors, numbers = laplace_torch
    delta = numbers["prior_precision"]
    posterior = laplace.laplace_fit(
        reference_tanh, tensors["map"], tensors["x"], tensors["y"], prior_precision=delta, curvature="exact"
    )
    negative = posterior.eigenvalues < -1e-6
    along = posterior.eigenvectors[:, negative]
    torch.testing.assert_close(
        along.T @ posterior.covariance() @ along,
        torch.diag(1 / (posterior.eigenvalues[negative] + delta)),
        rtol=1e-8,
        atol=1e-10,
    )
    assert float((1 / (posterior.eigenvalues[negative] + delta)).min()) > 1 / delta


def test_the_fitted_prior_precision_matches_laplace_torch_on_the_ggn(laplace_torch):
    """laplace-torch's evidence maximised by a tight search; its own 100 Adam steps stop short of it. At the top
    log Z(δ) is flat, so the argmax is known only to about √ε of the evidence's rounding: the eigenvalues' last bits,
    which differ between CPUs' vector units, move it by 6e-8 (AVX-512 against the reference's). The evidence there is
    the same to 1e-12."""
    tensors, numbers = laplace_torch
    posterior = laplace.laplace_fit(
        reference_tanh, tensors["map"], tensors["x"], tensors["y"], prior_precision=1.0, fit_prior=True
    )
    theirs = numbers["ggn"]["fitted_prior_precision"]
    assert posterior.prior_precision == pytest.approx(theirs, rel=1e-6)
    evidence = lambda delta: laplace.log_marginal_likelihood(  # noqa: E731
        0.0, tensors["map"].double(), posterior.eigenvalues, delta
    )
    assert evidence(posterior.prior_precision) == pytest.approx(evidence(theirs), rel=1e-12)


def test_no_prior_precision_is_fitted_where_the_evidence_has_no_maximum(laplace_torch):
    """With ∇²L's smallest eigenvalue h_min < 0, log Z(δ) → ∞ as δ ↓ −h_min: laplace-torch's evidence grows
    there, ours agrees with it, and the fit refuses, naming h_min and the remedies."""
    tensors, numbers = laplace_torch
    expected = numbers["exact"]
    near = expected["evidence_near_boundary"]
    assert all(b[1] > a[1] for a, b in itertools.pairwise(near)) and near[-1][1] > expected["log_marginal_likelihood"]
    posterior = laplace.laplace_fit(
        reference_tanh,
        tensors["map"],
        tensors["x"],
        tensors["y"],
        prior_precision=numbers["prior_precision"],
        curvature="exact",
    )
    for delta, value in near:
        ours = laplace.log_marginal_likelihood(posterior.nll, posterior.mean, posterior.eigenvalues, delta)
        assert ours == pytest.approx(value, rel=1e-6)
    with pytest.raises(laplace.IndefiniteCurvature, match=r"smallest eigenvalue is -0\.3942.*GGN") as raised:
        laplace.laplace_fit(
            reference_tanh,
            tensors["map"],
            tensors["x"],
            tensors["y"],
            prior_precision=1.0,
            curvature="exact",
            fit_prior=True,
        )
    assert "no maximum" in str(raised.value) and "above 0.3942" in str(raised.value)


def test_an_indefinite_posterior_precision_is_refused_not_clipped():
    """At a point that is not a minimum, ∇²L + δI can be indefinite: no Gaussian has that curvature."""
    x, y = data(n=40)
    w = random_point(27)
    lowest = float(torch.linalg.eigvalsh(laplace.nll_hessian(tanh_mlp, w, x, y)).min())
    assert lowest < -0.1
    with pytest.raises(laplace.IndefiniteCurvature, match="not positive definite") as raised:
        laplace.laplace_fit(tanh_mlp, w, x, y, prior_precision=-lowest / 2, curvature="exact")
    assert f"{lowest / 2:.4g}" in str(raised.value) and "GGN" in str(raised.value)
    fine = laplace.laplace_fit(tanh_mlp, w, x, y, prior_precision=-2 * lowest, curvature="exact")
    assert fine.negative_curvature > 0 and torch.linalg.eigvalsh(fine.covariance()).min() > 0


def test_a_subset_scaled_to_the_data_size_weighs_as_the_whole_set():
    """data_size = k·n on n examples is the posterior of those examples repeated k times: the same sums."""
    x, y = data(n=12)
    w, delta = random_point(27), 5.0
    scaled = laplace.laplace_fit(tanh_mlp, w, x, y, prior_precision=delta, data_size=36)
    repeated = laplace.laplace_fit(tanh_mlp, w, x.repeat(3, 1), y.repeat(3), prior_precision=delta)
    torch.testing.assert_close(scaled.covariance(), repeated.covariance(), rtol=1e-10, atol=1e-13)
    assert scaled.log_marginal_likelihood() == pytest.approx(repeated.log_marginal_likelihood(), rel=1e-10)
    with pytest.raises(ValueError, match="data_size"):
        laplace.laplace_fit(tanh_mlp, w, x, y, prior_precision=delta, data_size=5)


def test_fitted_prior_precision_maximises_the_evidence():
    posterior = mlp_posterior("ggn", delta=1.0, dtype=torch.float64)
    fitted = laplace.fit_prior_precision(posterior.mean, posterior.eigenvalues)
    grid = torch.logspace(-6, 6, 4001, dtype=torch.float64)
    values = [laplace.log_marginal_likelihood(0.0, posterior.mean, posterior.eigenvalues, float(d)) for d in grid]
    best = float(grid[int(torch.tensor(values).argmax())])
    assert abs(math.log(fitted / best)) <= math.log(10) * 12 / 4000
    # MacKay's condition at the optimum: δ‖w*‖² = γ = Σⱼ hⱼ/(hⱼ + δ), the effective number of parameters
    gamma = float((posterior.eigenvalues / (posterior.eigenvalues + fitted)).sum())
    assert fitted * float(posterior.mean.square().sum()) == pytest.approx(gamma, rel=1e-5)
    refit = laplace.laplace_fit(tanh_mlp, posterior.mean, *data(n=40), prior_precision=1.0, fit_prior=True)
    assert refit.prior_precision == pytest.approx(fitted, rel=1e-6)


@pytest.mark.parametrize(
    "options, message",
    [
        ({"prior_precision": 0.0}, "prior precision"),
        ({"prior_precision": float("nan")}, "prior precision"),
        ({"prior_precision": 1.0, "curvature": "kfac"}, "curvature"),
        ({"prior_precision": 1.0, "chunk_size": 0}, "chunk_size"),
    ],
)
def test_invalid_options_raise(options, message):
    with pytest.raises(ValueError, match=message):
        laplace.laplace_fit(tanh_mlp, random_point(27), *data(), **options)


def test_invalid_data_and_counts_raise():
    x, y = data()
    with pytest.raises(ValueError, match="same positive number"):
        laplace.laplace_fit(tanh_mlp, random_point(27), x, y[:-1], prior_precision=1.0)
    with pytest.raises(ValueError, match="flat"):
        laplace.laplace_fit(tanh_mlp, random_point(27)[None], x, y, prior_precision=1.0)
    with pytest.raises(ValueError, match="count"):
        mlp_posterior().sample(0, torch.Generator())


def test_a_non_finite_map_raises_floating_point_error():
    w = random_point(27)
    w[3] = float("nan")
    with pytest.raises(FloatingPointError, match="not finite"):
        laplace.laplace_fit(tanh_mlp, w, *data(), prior_precision=1.0)
