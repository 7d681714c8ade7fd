"""symlab.lib.adam calls torch's private fused kernel (torch._fused_adam_): held here against the public
torch.optim.Adam, step by step, on the dtypes the labs train in."""

import pytest
import torch

from symlab.lib.adam import Adam


def gradients(shape, steps, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=generator, dtype=dtype) * (1 + step % 3) for step in range(steps)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lr, betas, eps", [(1e-3, (0.9, 0.999), 1e-8), (0.05, (0.5, 0.9), 1e-6)])
def test_each_step_is_torch_optim_adams(dtype, lr, betas, eps):
    start = torch.randn(7, 5, generator=torch.Generator().manual_seed(1), dtype=dtype)
    ours = start.clone()
    optimiser = Adam(ours, lr=lr, betas=betas, eps=eps)
    theirs = torch.nn.Parameter(start.clone())
    reference = torch.optim.Adam([theirs], lr=lr, betas=betas, eps=eps)
    tolerance = {"rtol": 1e-6, "atol": 1e-7} if dtype == torch.float32 else {"rtol": 1e-13, "atol": 1e-15}
    for grad in gradients(start.shape, 50, dtype):
        optimiser.step(grad)
        theirs.grad = grad.clone()
        reference.step()
        torch.testing.assert_close(ours, theirs.detach(), **tolerance)
    state = reference.state[theirs]
    torch.testing.assert_close(optimiser.exp_avg, state["exp_avg"], **tolerance)
    torch.testing.assert_close(optimiser.exp_avg_sq, state["exp_avg_sq"], **tolerance)
    assert not torch.equal(ours, start)
