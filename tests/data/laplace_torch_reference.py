"""Writes tests/data/laplace_torch_tanh.safetensors: laplace-torch's full Laplace of a 2-16-2 tanh network at a
converged MAP, for tests/test_laplace.py to hold symlab.lib.laplace against.

laplace-torch's dependencies pull torchvision and a CUDA build of torch, which SymLab does not install, and the
parts used here need neither. To run it:

    pip install --no-deps --target /tmp/laplace-torch laplace-torch==0.3 curvlinops-for-pytorch==3.0.1 \\
        backpack-for-pytorch==1.7.1 asdfghjkl==0.1a5 einops einconv unfoldNd linear_operator opt_einsum
    PYTHONPATH=/tmp/laplace-torch python tests/data/laplace_torch_reference.py

The file holds the data, the MAP, and for the exact Hessian (``CurvlinopsHessian``) and the GGN
(``CurvlinopsGGN``): the posterior covariance, log det of the posterior precision, and the log marginal likelihood
at the training prior precision δ. For the GGN also the δ that maximises laplace-torch's own evidence (a bounded
Brent search over log δ, far tighter than its 100 Adam steps), and what those Adam steps return. For the exact
Hessian, whose smallest eigenvalue h_min is negative, the evidence at δ approaching −h_min, which grows without
bound, and what laplace-torch's Adam returns there.
"""

import json
import math
import warnings
from pathlib import Path

import torch
from laplace import Laplace
from laplace.curvature import CurvlinopsGGN, CurvlinopsHessian
from safetensors.torch import save_file
from scipy.optimize import minimize_scalar
from torch.utils.data import DataLoader, TensorDataset

OUT = Path(__file__).with_name("laplace_torch_tanh.safetensors")
EXAMPLES, WIDTH, PRIOR_PRECISION, SEED = 60, 16, 0.5, 0


def xor_data():
    """Two classes by the sign of x₁x₂, 15 % of the labels flipped: a MAP with hidden units in tanh's curve."""
    generator = torch.Generator().manual_seed(SEED)
    x = torch.randn(EXAMPLES, 2, generator=generator, dtype=torch.float64)
    flipped = torch.rand(EXAMPLES, generator=generator, dtype=torch.float64) < 0.15
    return x, (x[:, 0] * x[:, 1] > 0).long() ^ flipped.long()


def converged_map(x, y):
    """L-BFGS on U(w) = Σᵢ CE + ½δ‖w‖² until the gradient's norm is ~1e-7."""
    torch.manual_seed(SEED)
    net = torch.nn.Sequential(torch.nn.Linear(2, WIDTH), torch.nn.Tanh(), torch.nn.Linear(WIDTH, 2)).double()
    params = list(net.parameters())
    optimizer = torch.optim.LBFGS(
        params,
        lr=1,
        max_iter=20_000,
        tolerance_grad=1e-12,
        tolerance_change=1e-16,
        history_size=50,
        line_search_fn="strong_wolfe",
    )

    def closure():
        optimizer.zero_grad()
        value = torch.nn.functional.cross_entropy(net(x), y, reduction="sum") + 0.5 * PRIOR_PRECISION * sum(
            p.square().sum() for p in params
        )
        value.backward()
        return value

    for _ in range(5):
        optimizer.step(closure)
    closure()
    gradient_norm = float(torch.cat([p.grad.flatten() for p in params]).norm())
    return net, gradient_norm


def fitted(model: Laplace, lowest: float) -> float:
    """argmax_δ of laplace-torch's log marginal likelihood over δ ∈ (max(1e-6, −2 h_min), 1e6)."""

    def negative(log_delta):
        return -float(model.log_marginal_likelihood(prior_precision=torch.tensor([math.exp(log_delta)])))

    low = max(1e-6, -2.0 * lowest)
    return math.exp(
        minimize_scalar(negative, bounds=(math.log(low), math.log(1e6)), method="bounded", options={"xatol": 1e-13}).x
    )


def adam_fit(model: Laplace) -> float:
    """What laplace-torch's own fit returns: optimize_prior_precision(method="marglik"), 100 Adam steps from 1."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.optimize_prior_precision(method="marglik")
    value = float(model.prior_precision)
    model.prior_precision = PRIOR_PRECISION
    return value


def main() -> None:
    x, y = xor_data()
    net, gradient_norm = converged_map(x, y)
    loader = DataLoader(TensorDataset(x, y), batch_size=EXAMPLES)
    tensors = {"x": x, "y": y, "map": torch.cat([p.detach().flatten() for p in net.parameters()])}
    meta = {"prior_precision": PRIOR_PRECISION, "gradient_norm": gradient_norm}
    for name, backend in (("exact", CurvlinopsHessian), ("ggn", CurvlinopsGGN)):
        model = Laplace(
            net,
            "classification",
            subset_of_weights="all",
            hessian_structure="full",
            backend=backend,
            prior_precision=PRIOR_PRECISION,
        )
        model.fit(loader)
        eigenvalues = torch.linalg.eigvalsh(model.H)
        lowest = float(eigenvalues.min())
        tensors[f"{name}/covariance"] = model.posterior_covariance.detach().contiguous()
        meta[name] = {
            "smallest_eigenvalue": lowest,
            "negative_eigenvalues": int((eigenvalues < -1e-8).sum()),
            "log_det_posterior_precision": float(model.log_det_posterior_precision),
            "log_marginal_likelihood": float(model.log_marginal_likelihood()),
            "adam_prior_precision": adam_fit(model),
        }
        if lowest < -1e-8 * float(eigenvalues.abs().max()):  # negative beyond round-off: the evidence as δ ↓ −h_min
            deltas = [-lowest * (1 + 10.0**-k) for k in range(1, 9)]
            meta[name]["evidence_near_boundary"] = [
                [d, float(model.log_marginal_likelihood(prior_precision=torch.tensor([d])))] for d in deltas
            ]
        else:
            meta[name]["fitted_prior_precision"] = fitted(model, lowest)
    save_file(tensors, OUT, metadata={"laplace_torch": json.dumps(meta)})
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)  # curvlinops builds its matrices in the default dtype
    main()
