"""Alignment lab: time to align two mean-field posteriors (symlab.lib.align.align, W₂ objective) against
width and depth, for MNIST-shaped MLPs 784-w×depth-10. One process; ratios against (a) the smallest
network, and (b) the same coordinate descent with its cost matrices built from pairwise unit
differences (a broadcast over h × h × features) instead of one matrix product of unit features.

    python benchmarks/bench_align.py [--quick] [--json]

q_A has PyTorch-like means (U(±1/√fan_in)) and standard deviations U(0.01, 0.1); q_B is q_A with
every hidden layer randomly permuted and every mean and standard deviation perturbed by noise of
the means' own scale × 0.5, so there is a permutation to find and it is not exact. "same" checks
that both implementations end at the same distance (1e-9 relative). Times are the best of three
runs, with one BLAS thread.
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

from symlab.lib import align, mlp  # noqa: E402
from symlab.lib.gaussian import DiagonalGaussian  # noqa: E402


def posterior_pair(width: int, depth: int, seed: int = 0) -> tuple[DiagonalGaussian, DiagonalGaussian]:
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
        return [(W + 0.5 * scale_of(W) * rng.standard_normal(W.shape), b + 0.5 * scale_of(b) * rng.standard_normal(b.shape))
                for W, b in layers]

    qb = DiagonalGaussian.from_layers(jitter(moved.means, lambda a: 1 / math.sqrt(a.shape[-1]) if a.ndim == 2 else 0.0),
                          [(np.abs(W), np.abs(b)) for W, b in jitter(moved.sds, lambda a: 0.05)])
    return qa, qb


def pairwise_similarity(qa, qb, index, objective="w2", incoming=True, outgoing=True):
    """The baseline's cost: −‖unit_i − unit_j‖² from the broadcast difference of every pair."""
    sets = [(qa.means, qb.means)] + ([(qa.sds, qb.sds)] if objective == "w2" else [])
    total = 0.0
    for a, b in sets:
        fa = mlp.unit_rows(a, index, incoming, outgoing)
        fb = mlp.unit_rows(b, index, incoming, outgoing)
        total = total - np.sum((fa[:, None, :] - fb[None, :, :]) ** 2, axis=-1)
    return total


def timed(function, repeats: int) -> tuple[float, object]:
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = function()
        best = min(best, time.perf_counter() - start)
    return best, result


def measure(width: int, depth: int, baseline: bool, repeats: int) -> dict:
    qa, qb = posterior_pair(width, depth)
    seconds, result = timed(lambda: align.align(qa, qb, "w2"), repeats)
    row = {"width": width, "depth": depth, "parameters": sum(W.size + b.size for W, b in qa.means),
           "seconds": seconds, "sweeps": result.sweeps, "start": result.start,
           "w2_before": align.w2_distance(qa, qb), "w2_after": math.sqrt(result.history[-1])}
    if baseline:
        fast = align.unit_similarity
        align.unit_similarity = pairwise_similarity
        try:
            base_seconds, base = timed(lambda: align.align(qa, qb, "w2"), repeats)
        finally:
            align.unit_similarity = fast
        row.update(pairwise_seconds=base_seconds, speedup=base_seconds / seconds,
                   same=abs(base.history[-1] - result.history[-1]) <= 1e-9 * result.history[-1])
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="widths up to 256, one repeat")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    widths = [16, 64, 256] if args.quick else [16, 64, 256, 1024]
    repeats = 1 if args.quick else 3
    rows = [measure(w, d, baseline=w <= 256, repeats=repeats) for d in (1, 2, 3) for w in widths]
    base = rows[0]["seconds"]
    for row in rows:
        row["ratio_to_smallest"] = row["seconds"] / base
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'net':>22} {'params':>10} {'align (ms)':>11} {'× smallest':>11} {'sweeps':>7} {'start':>9} "
          f"{'W2 before':>10} {'after':>8} {'pairwise (ms)':>14} {'speed-up':>9} {'same':>5}")
    for row in rows:
        net = "784-" + "-".join([str(row["width"])] * row["depth"]) + "-10"
        extra = (f"{row['pairwise_seconds'] * 1000:>14.1f} {row['speedup']:>8.1f}× {str(row['same']):>5}"
                 if "speedup" in row else f"{'—':>14} {'—':>9} {'—':>5}")
        print(f"{net:>22} {row['parameters']:>10,} {row['seconds'] * 1000:>11.1f} {row['ratio_to_smallest']:>10.1f}× "
              f"{row['sweeps']:>7} {row['start']:>9} {row['w2_before']:>10.3f} {row['w2_after']:>8.3f} {extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
