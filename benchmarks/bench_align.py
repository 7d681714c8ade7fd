"""Alignment lab: time to align two mean-field posteriors (symlab.lib.align.align, W₂ objective) against
width and depth, for MNIST-shaped MLPs 784-w×depth-10. One process; ratios against (a) the smallest
network, (b) the three fixed-order starts alone (``starts=3``, SymLab's alignment before the random
orders and reshuffled restarts: what the extra starts cost, and how much closer they end), and (c)
the same descents with their cost matrices built from pairwise unit differences (a broadcast over
h × h × features) instead of one matrix product of unit features.

    python benchmarks/bench_align.py [--quick | --smoke] [--json] [--noise X]

q_A has PyTorch-like means (U(±1/√fan_in)) and standard deviations U(0.01, 0.1); q_B is q_A with
every hidden layer randomly permuted and every mean and standard deviation perturbed by noise of
the means' own scale × ``--noise`` (0.5: there is a permutation to find and it is not exact; from
about 3 on, coordinate descent has many local minima and the extra starts find closer ones).
"gain" is how much closer than three starts the default ends (W₂, relative); "same" checks that
the pairwise baseline ends at the same distance (1e-9 relative). Times are the best of three runs,
with one BLAS thread.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

# One BLAS thread (set before numpy loads): on a small shared machine, two threads made these
# matrix products 10-80× slower and erratic (0.15 ms vs 5-12 ms for 64 × 849 by 849 × 64).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from symlab.lib import align  # noqa: E402
from symlab.lib.gaussian import DiagonalGaussian  # noqa: E402
from symlab.runs.device import measured_rates  # noqa: E402


def posterior_pair(
    width: int, depth: int, seed: int = 0, noise: float = 0.5
) -> tuple[DiagonalGaussian, DiagonalGaussian]:
    rng = np.random.default_rng(seed)
    sizes = [784, *[width] * depth, 10]
    means, sds = [], []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1 / math.sqrt(fan_in)
        means.append((rng.uniform(-bound, bound, (fan_out, fan_in)), rng.uniform(-bound, bound, fan_out)))
        sds.append((rng.uniform(0.01, 0.1, (fan_out, fan_in)), rng.uniform(0.01, 0.1, fan_out)))
    qa = DiagonalGaussian.from_layers(means, sds)
    moved = align.permute(qa, [rng.permutation(h) for h in sizes[1:-1]])

    def jitter(layers, scale_of):
        return [
            (
                W + noise * scale_of(W) * rng.standard_normal(W.shape),
                b + noise * scale_of(b) * rng.standard_normal(b.shape),
            )
            for W, b in layers
        ]

    qb = DiagonalGaussian.from_layers(
        jitter(moved.means, lambda a: 1 / math.sqrt(a.shape[-1]) if a.ndim == 2 else 0.0),
        [(np.abs(W), np.abs(b)) for W, b in jitter(moved.sds, lambda a: 0.05)],
    )
    return qa, qb


def pairwise_products(a, b):
    """The baseline's cost: −½‖row_i(a) − row_j(b)‖² from the broadcast difference of every pair. It
    differs from ⟨row_i(a), row_j(b)⟩ by a constant per row and per column, so every assignment and
    every gain is the same."""
    return -0.5 * np.sum((a[:, None, :] - b[None, :, :]) ** 2, axis=-1)


def timed(function, repeats: int) -> tuple[float, object]:
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def measure(width: int, depth: int, baseline: bool, repeats: int, noise: float) -> dict:
    qa, qb = posterior_pair(width, depth, noise=noise)
    seconds, result = timed(lambda: align.align(qa, qb, "w2"), repeats)
    three_seconds, three = timed(lambda: align.align(qa, qb, "w2", starts=3), repeats)
    row = {
        "width": width,
        "depth": depth,
        "parameters": sum(W.size + b.size for W, b in qa.means),
        "seconds": seconds,
        "starts": result.starts,
        "sweeps": result.sweeps,
        "start": result.start,
        "w2_before": align.w2_distance(qa, qb),
        "w2_after": math.sqrt(result.history[-1]),
        "three_starts_seconds": three_seconds,
        "cost_of_starts": seconds / three_seconds,
        "w2_after_three_starts": math.sqrt(three.history[-1]),
        "gain": 1 - math.sqrt(result.history[-1] / three.history[-1]),
    }
    if baseline:
        fast = align._inner_products
        align._inner_products = pairwise_products
        try:
            base_seconds, base = timed(lambda: align.align(qa, qb, "w2"), repeats)
        finally:
            align._inner_products = fast
        row.update(
            pairwise_seconds=base_seconds,
            speedup=base_seconds / seconds,
            same=abs(base.history[-1] - result.history[-1]) <= 1e-9 * result.history[-1],
        )
    return row


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="widths up to 256, one repeat")
    size.add_argument("--smoke", action="store_true", help="one 784-16-10 pair, one repeat (what a test runs)")
    parser.add_argument("--json", action="store_true", help="one JSON line: the machine's rates and every row")
    parser.add_argument("--noise", type=float, default=0.5, help="q_B's perturbation, × the means' scale")
    args = parser.parse_args(argv)
    widths = [16] if args.smoke else [16, 64, 256] if args.quick else [16, 64, 256, 1024]
    depths = (1,) if args.smoke else (1, 2, 3)
    repeats = 1 if args.quick or args.smoke else 3
    measured = measured_rates()
    rates = measured.in_units()
    rows = [measure(w, d, baseline=w <= 256, repeats=repeats, noise=args.noise) for d in depths for w in widths]
    base = rows[0]["seconds"]
    for row in rows:
        row["ratio_to_smallest"] = row["seconds"] / base
    report = {"rates": rates, "rows": rows}
    if args.json:
        print(json.dumps(report))
        return report
    print(measured.described())
    print(
        f"{'net':>22} {'params':>10} {'align (ms)':>11} {'× smallest':>11} {'starts':>7} {'× 3 starts':>11} "
        f"{'gain':>7} {'sweeps':>7} {'start':>22} {'W2 before':>10} {'after':>8} {'pairwise':>9} {'same':>5}"
    )
    for row in rows:
        net = "784-" + "-".join([str(row["width"])] * row["depth"]) + "-10"
        extra = f"{row['speedup']:>8.1f}× {str(row['same']):>5}" if "speedup" in row else f"{'—':>9} {'—':>5}"
        print(
            f"{net:>22} {row['parameters']:>10,} {row['seconds'] * 1000:>11.1f} {row['ratio_to_smallest']:>10.1f}× "
            f"{row['starts']:>7} {row['cost_of_starts']:>10.1f}× {row['gain']:>7.2%} {row['sweeps']:>7} "
            f"{row['start']:>22} {row['w2_before']:>10.3f} {row['w2_after']:>8.3f} {extra}"
        )
    return report


if __name__ == "__main__":
    main()
