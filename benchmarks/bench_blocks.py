"""Cost of an SGM-blocks step against an MFVI step (width 400, batch 128, CPU, one torch thread).

Two states of q, because the block estimator's cost depends on how close the units are:
- "start": the lab's initialisation with σ = 10⁻³ (every block is certified saturated by the
  screen on a few coordinates);
- "trained": one epoch of MFVI from σ = 0.05 on 20 000 images (units a few hundred nats apart:
  the screen cannot certify them, every block is evaluated exactly).
Every variant steps from a copy of the same state on the same minibatches and noise; variants are
interleaved over --rounds and the fastest round counts. Prints ratios to the MFVI step, then one
JSON line. Target: SGM-blocks (B = 2 and B = 4) ≤ 1.3× MFVI.

    python benchmarks/bench_blocks.py [--rounds 5] [--steps 60] [--images 20000] [--smoke]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from symlab.labs.mnist import experiment as mnist
from symlab.lib import mnist_data  # noqa: E402
from symlab.runs.device import measured_rates  # noqa: E402

WIDTH, BATCH = 400, 128
VARIANTS = {
    "mfvi": dict(method="mfvi"),
    "blocks_b2": dict(method="sgm", mi="blocks", block_size=2),
    "blocks_b4": dict(method="sgm", mi="blocks", block_size=4),
    "infonce_k16": dict(method="sgm", mi="infonce", K=16),
}


def trainer(tensors, init_sd: float, **variant) -> mnist.MnistTrainer:
    config = mnist.MnistConfig(
        hidden=WIDTH, batch_size=BATCH, init_sd=init_sd, train_subset=len(tensors.train_y), device="cpu", **variant
    )
    return mnist.MnistTrainer(config, tensors, torch.device("cpu"))


def state(tensors, name: str) -> dict:
    if name == "start":
        return trainer(tensors, 1e-3).state_dict()
    warm = trainer(tensors, 0.05)
    warm.train_epoch()
    return warm.state_dict()


def time_steps(tensors, start: dict, variant: dict, steps: int) -> tuple[float, float]:
    """Seconds per step over ``steps`` steps from ``start``, and the fraction with an active I term."""
    run = trainer(tensors, 1e-3, **variant)
    # The start's q, curvature and optimiser; a variant's own state (SGM's information gradient) starts afresh.
    state = run.state_dict()
    state.update({name: value for name, value in start.items() if name in state and name != "config"})
    run.load_state_dict(copy.deepcopy(state))
    generator = torch.Generator().manual_seed(1)
    order = torch.randperm(len(tensors.train_y), generator=generator)
    if run.config.method == "sgm" and run.config.mi == "blocks":
        run.block_plan = run._plan_blocks(0)
    noises = [torch.randn(run.layout.n_params, generator=generator) for _ in range(steps)]
    active = 0
    started = time.perf_counter()
    for step in range(steps):
        batch = order[step * BATCH : (step + 1) * BATCH]
        estimates = run.step(tensors.train_x[batch], tensors.train_y[batch], noises[step], generator)
        active += bool(estimates.get("active"))
    return (time.perf_counter() - started) / steps, active / steps


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--images", type=int, default=20_000, help="training images (the trained state's epoch)")
    parser.add_argument("--smoke", action="store_true", help="one round of 2 steps on 512 images (what a test runs)")
    args = parser.parse_args(argv)
    if args.smoke:
        args.rounds, args.steps, args.images = 1, 2, 512
    torch.set_num_threads(1)
    measured = measured_rates()
    rates = measured.in_units()
    print(measured.described())
    data = mnist_data.load_mnist()
    config = mnist.MnistConfig(hidden=WIDTH, train_subset=args.images)
    tensors = mnist.prepare_tensors(data, config, torch.device("cpu"))
    report = {"rates": rates, "images": args.images, "rounds": args.rounds, "steps": args.steps}
    for state_name in ("start", "trained"):
        start = state(tensors, state_name)
        best = {name: float("inf") for name in VARIANTS}
        active = {}
        for _ in range(args.rounds):
            for name, variant in VARIANTS.items():
                seconds, active[name] = time_steps(tensors, start, variant, args.steps)
                best[name] = min(best[name], seconds)
        print(f"q at {state_name}: MFVI step {1000 * best['mfvi']:.2f} ms (shown for scale; compare ratios)")
        for name in VARIANTS:
            if name != "mfvi":
                ratio = best[name] / best["mfvi"]
                report[f"{name}_over_mfvi_{state_name}"] = round(ratio, 3)
                report[f"{name}_active_{state_name}"] = active[name]
                print(f"  {name:<12} {ratio:5.2f}× MFVI   (I term active in {100 * active[name]:.0f} % of steps)")
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
