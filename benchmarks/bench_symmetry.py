"""Symmetry explorer: (a) Laurent's Fig. 1 perceptrons trained as one batched tensor program
against a plain Python loop training the same 2-2-1 nets one at a time with torch; (b) the min-mass
solve (batched damped Newton, symlab.lib.symmetry.min_mass) against scipy's L-BFGS-B on the same
objective, for one- and two-hidden-layer MNIST-shaped nets. One process; ratios against the
baselines.

    python benchmarks/bench_symmetry.py [--quick | --smoke] [--json]

(a) The loop extrapolates from a few hundred nets (its time per net does not depend on how many
there are). (b) Nets are 784-w-10 and 784-w-w-10 with PyTorch's default initialisation and every
hidden unit rescaled by e^λ, λ ~ N(0, 1), so there is mass to remove; L-BFGS-B gets the analytic
gradient and stops where min_mass does (max |∂mass/∂λ| ≤ 1e-10 · mass). "same" compares the two
final masses to 1e-9 relative.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from scipy import optimize

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from symlab.labs.symmetry import experiment as symmetry_lab  # noqa: E402
from symlab.lib import mlp, symmetry  # noqa: E402
from symlab.runs.device import measured_rates  # noqa: E402

TOL = 1e-10  # min_mass's default: max |gradient| ≤ TOL · mass


# --- (a) perceptrons ----------------------------------------------------------------------------


def batched_rate(nets: int) -> dict:
    config = symmetry_lab.PerceptronConfig(nets=nets)
    start = time.perf_counter()
    run = symmetry_lab.train_perceptrons(config)
    seconds = time.perf_counter() - start
    return {
        "nets": nets,
        "seconds": seconds,
        "nets_per_second": nets / seconds,
        "median_final_loss": float(np.median(run.final_loss)),
        "kept": int(run.kept.sum()),
    }


def loop_rate(count: int) -> dict:
    """The same protocol (PyTorch init, SGD lr 2, BCE, batch 10, 10 epochs, 400 points, a fresh
    shuffle per epoch), one net after the other, each step a separate small torch program."""
    config = symmetry_lab.PerceptronConfig()
    x_np, y_np = symmetry_lab.make_blobs(config.points, config.separation, config.seed)
    x, y = torch.tensor(x_np, dtype=torch.float32), torch.tensor(y_np, dtype=torch.float32)
    g = torch.Generator().manual_seed(config.seed)
    layout = mlp.Layout((2, 2, 1))
    n = x.shape[0]
    losses = []
    start = time.perf_counter()
    for _ in range(count):
        params = [p.clone().requires_grad_() for layer in layout.layers(mlp.init_parameters(layout, g)) for p in layer]
        W1, b1, W2, b2 = params
        for _ in range(config.epochs):
            order = torch.randperm(n, generator=g)
            for first in range(0, n, config.batch):
                idx = order[first : first + config.batch]
                logits = (torch.relu(x[idx] @ W1.T + b1) @ W2.T + b2)[:, 0]
                loss = F.binary_cross_entropy_with_logits(logits, y[idx])
                grads = torch.autograd.grad(loss, params)
                with torch.no_grad():
                    for p, grad in zip(params, grads):
                        p -= config.lr * grad
        with torch.no_grad():
            logits = (torch.relu(x @ W1.T + b1) @ W2.T + b2)[:, 0]
            losses.append(float(F.binary_cross_entropy_with_logits(logits, y)))
    seconds = time.perf_counter() - start
    return {
        "nets": count,
        "seconds": seconds,
        "nets_per_second": count / seconds,
        "median_final_loss": float(np.median(losses)),
    }


# --- (b) min-mass -------------------------------------------------------------------------------


def mnist_shaped_net(rng: np.random.Generator, widths: list[int]) -> list:
    sizes = [784, *widths, 10]
    layers = [
        (rng.uniform(-1, 1, (o, i)) / math.sqrt(i), rng.uniform(-1, 1, o) / math.sqrt(i))
        for i, o in zip(sizes[:-1], sizes[1:])
    ]
    return symmetry.scale_units(layers, [rng.standard_normal(w) for w in widths])


def mass_and_gradient(layers):
    """The mass as a function of the flat hidden log-scales λ, with its gradient (written here, apart
    from min_mass): Σ_l Σ_ij W_ij² exp(2(λ_i^l − λ_j^{l−1}))."""
    squares = [W**2 for W, _ in layers]
    widths = [sq.shape[0] for sq in squares[:-1]]
    cuts = np.cumsum(widths)[:-1]

    def f(flat):
        lam = [np.zeros(squares[0].shape[1]), *np.split(flat, cuts), np.zeros(squares[-1].shape[0])]
        total, grads = 0.0, [np.zeros(w) for w in widths]
        for index, sq in enumerate(squares):
            terms = sq * np.exp(2 * (lam[index + 1][:, None] - lam[index][None, :]))
            total += terms.sum()
            if index < len(widths):
                grads[index] += 2 * terms.sum(1)
            if index > 0:
                grads[index - 1] -= 2 * terms.sum(0)
        return total, np.concatenate(grads)

    return f


def lbfgs_min_mass(layers) -> tuple[float, float, int]:
    """L-BFGS-B's gtol is absolute and the final mass unknown in advance: aim at TOL × the current
    mass and restart from where it stopped until the relative criterion holds (all runs counted)."""
    f = mass_and_gradient(layers)
    lam = np.zeros(sum(W.shape[0] for W, _ in layers[:-1]))
    value, gradient = f(lam)
    iterations = 0
    for _ in range(5):
        result = optimize.minimize(
            f,
            lam,
            jac=True,
            method="L-BFGS-B",
            options={"gtol": 0.9 * TOL * value, "ftol": 0.0, "maxiter": 100_000, "maxfun": 200_000, "maxcor": 20},
        )
        lam, value, gradient, iterations = result.x, float(result.fun), result.jac, iterations + int(result.nit)
        if np.max(np.abs(gradient)) <= TOL * value:
            break
    return value, float(np.max(np.abs(gradient)) / value), iterations


def timed(fn, repeats):
    best, value = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        best = min(best, time.perf_counter() - start)
    return best, value


def min_mass_row(widths: list[int], seed: int, repeats: int) -> dict:
    layers = mnist_shaped_net(np.random.default_rng(seed), widths)
    newton_s, newton = timed(lambda: symmetry.min_mass(layers), repeats)
    lbfgs_s, (lbfgs_mass, lbfgs_gradient, lbfgs_iterations) = timed(lambda: lbfgs_min_mass(layers), repeats)
    after = float(newton.mass_after)
    return {
        "shape": "784-" + "-".join(map(str, widths)) + "-10",
        "width": widths[0],
        "depth": len(widths),
        "newton_seconds": newton_s,
        "newton_iterations": newton.iterations,
        "newton_converged": bool(newton.converged),
        "newton_relative_gradient": float(newton.gradient),
        "lbfgs_seconds": lbfgs_s,
        "lbfgs_iterations": lbfgs_iterations,
        "lbfgs_relative_gradient": lbfgs_gradient,
        "lbfgs_over_newton": lbfgs_s / newton_s,
        "mass_before": float(newton.mass_before),
        "newton_mass": after,
        "lbfgs_mass": lbfgs_mass,
        "relative_mass_difference": (after - lbfgs_mass) / lbfgs_mass,
        "same_mass": abs(after - lbfgs_mass) <= 1e-9 * lbfgs_mass,
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="fewer nets and widths (about 20 s)")
    size.add_argument("--smoke", action="store_true", help="a few nets, one small width (what a test runs)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    args = parser.parse_args(argv)
    say = (lambda *a, **k: None) if args.json else print
    measured = measured_rates()
    rates = measured.in_units()
    say(measured.described())

    torch.manual_seed(0)
    symmetry_lab.train_perceptrons(symmetry_lab.PerceptronConfig(nets=50, epochs=1))  # warm-up
    loop = loop_rate(4 if args.smoke else 40 if args.quick else 300)
    say(f"perceptrons (2-2-1, 10 epochs, 400 points, batch 10); torch threads: {torch.get_num_threads()}")
    say(
        f"  Python loop, one net at a time  {loop['nets']:>6} nets  {loop['seconds']:7.2f} s  "
        f"{loop['nets_per_second']:9.1f} nets/s   median final loss {loop['median_final_loss']:.4f}"
    )
    batched = []
    for nets in (200,) if args.smoke else (1000, 5000) if args.quick else (1000, 5000, 10_000):
        row = batched_rate(nets)
        row["speedup"] = row["nets_per_second"] / loop["nets_per_second"]
        batched.append(row)
        say(
            f"  batched train_perceptrons       {nets:>6} nets  {row['seconds']:7.2f} s  "
            f"{row['nets_per_second']:9.1f} nets/s   median final loss {row['median_final_loss']:.4f}   "
            f"{row['speedup']:6.1f}x the loop   (kept {row['kept']})"
        )

    widths = (16,) if args.smoke else (16, 64, 256) if args.quick else (16, 64, 256, 1024)
    say("\nmin-mass of one net: damped Newton (min_mass) vs scipy L-BFGS-B with the analytic gradient")
    say(
        f"  {'net':>20} {'Newton s':>9} {'it':>3} {'L-BFGS-B s':>11} {'it':>5} {'L-BFGS/Newton':>14} "
        f"{'mass before':>12} {'mass after':>12} {'rel. diff':>10} {'same':>5} {'|grad|/mass N, L':>18}"
    )
    mass_rows = []
    for depth in (1, 2):
        for width in widths:
            row = min_mass_row([width] * depth, seed=width + depth, repeats=1 if width >= 1024 else 3)
            mass_rows.append(row)
            say(
                f"  {row['shape']:>20} {row['newton_seconds']:9.4f} {row['newton_iterations']:>3} "
                f"{row['lbfgs_seconds']:11.4f} {row['lbfgs_iterations']:>5} {row['lbfgs_over_newton']:13.1f}x "
                f"{row['mass_before']:12.6g} {row['newton_mass']:12.8g} {row['relative_mass_difference']:10.1e} "
                f"{'yes' if row['same_mass'] else 'NO':>5} {row['newton_relative_gradient']:8.1e}, "
                f"{row['lbfgs_relative_gradient']:8.1e}"
            )
    report = {
        "rates": rates,
        "perceptrons": {"loop": loop, "batched": batched},
        "min_mass": mass_rows,
        "torch_threads": torch.get_num_threads(),
    }
    if args.json:
        print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
