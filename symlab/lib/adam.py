"""Adam on one tensor of parameters: the kernel of ``torch.optim.Adam(fused=True)`` (one pass over the
parameters, its numbers), called without the optimiser's per-step Python. A training step of a small
network costs a few hundred microseconds, and ``torch.optim.Adam.step`` alone costs tens of them."""

from __future__ import annotations

import torch


class Adam:
    """Updates ``params`` (a contiguous tensor) in place from a gradient of the same shape:
    m ← β₁m + (1 − β₁)g, v ← β₂v + (1 − β₂)g², θ ← θ − lr·m̂/(√v̂ + ε)."""

    def __init__(self, params: torch.Tensor, lr: float, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.exp_avg = torch.zeros_like(params)
        self.exp_avg_sq = torch.zeros_like(params)
        self.steps = torch.zeros((), dtype=torch.float32, device=params.device)

    def step(self, grad: torch.Tensor) -> None:
        self.steps += 1
        torch._fused_adam_(
            [self.params],
            [grad],
            [self.exp_avg],
            [self.exp_avg_sq],
            [],
            [self.steps],
            lr=self.lr,
            beta1=self.betas[0],
            beta2=self.betas[1],
            weight_decay=0.0,
            eps=self.eps,
            amsgrad=False,
            maximize=False,
        )
