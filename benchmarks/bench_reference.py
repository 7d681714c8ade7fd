"""Posterior-approximation lab: reference checkpoints per CPU-second, many networks trained as one computation
(symlab.lib.ensembles.train_networks) against one at a time, in one process with one thread.

    python benchmarks/bench_reference.py [--quick | --smoke] [--json]

Two baselines for one network at a time: the same code with a stack of one network, and the loop a
researcher would write (an nn.Module, torch.optim.SGD with the same momentum and weight decay, the same
minibatches). Each trains on 4 000 MNIST-shaped images (random: the arithmetic does not depend on the
pixels) for one epoch of batch 64. Reported: the ratio of checkpoints per CPU-second, batched over each
baseline (the target is 10x); CPU time, not wall time, as the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from symlab.lib import ensembles, networks  # noqa: E402
from symlab.runs.device import measured_rates  # noqa: E402

IMAGES = 4000
SMOKE_IMAGES = 256


def cpu_seconds(work) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def module_loop(arch, x, y, recipe, seed: int, index: int) -> None:
    """One network trained the usual way: a module, torch's SGD, the network's own minibatch order."""
    module = arch.module()
    torch.nn.utils.vector_to_parameters(
        ensembles.initial_networks(arch, range(index, index + 1), seed)[0], module.parameters()
    )
    optimiser = torch.optim.SGD(
        module.parameters(), lr=recipe.lr, momentum=recipe.momentum, weight_decay=recipe.weight_decay
    )
    [order] = ensembles.minibatch_orders(len(y), range(index, index + 1), seed, 1)
    for start in range(0, len(y), recipe.batch_size):
        batch = order[0, start : start + recipe.batch_size]
        optimiser.zero_grad()
        F.cross_entropy(module(x[batch]), y[batch]).backward()
        optimiser.step()


def measure(name: str, nets: int, alone: int, images: int = IMAGES) -> dict:
    arch = networks.architecture(name, 16)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(images, 1, 28, 28, generator=g), torch.randint(0, 10, (images,), generator=g)
    recipe = ensembles.Recipe(epochs=1, momentum=0.9)
    batched = cpu_seconds(lambda: ensembles.train_networks(arch, x, y, recipe, 0, range(nets))) / nets
    stack_of_one = (
        cpu_seconds(lambda: [ensembles.train_networks(arch, x, y, recipe, 0, range(i, i + 1)) for i in range(alone)])
        / alone
    )
    loop = cpu_seconds(lambda: [module_loop(arch, x, y, recipe, 0, i) for i in range(alone)]) / alone
    return {
        "architecture": arch.label,
        "networks": nets,
        "per_network_batched_s": batched,
        "speedup_vs_stack_of_one": stack_of_one / batched,
        "speedup_vs_module_loop": loop / batched,
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="16 networks batched, 2 alone")
    size.add_argument(
        "--smoke", action="store_true", help=f"2 batched, 1 alone, {SMOKE_IMAGES} images (what a test runs)"
    )
    parser.add_argument("--json", action="store_true", help="one JSON line: the machine's rates and every row")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    measured = measured_rates()
    rates = measured.in_units()
    nets, alone, images = (2, 1, SMOKE_IMAGES) if args.smoke else (16, 2, IMAGES) if args.quick else (64, 4, IMAGES)
    report = {
        "rates": rates,
        "images": images,
        "rows": [measure(name, nets, alone, images) for name in ("convnet", "mlp")],
    }
    if args.json:
        print(json.dumps(report))
        return report
    print(measured.described())
    print(f"{'network':<26}{'batched':>9}{'vs stack of 1':>15}{'vs module loop':>16}")
    for row in report["rows"]:
        print(
            f"{row['architecture']:<26}{row['networks']:>9}{row['speedup_vs_stack_of_one']:>14.1f}x"
            f"{row['speedup_vs_module_loop']:>15.1f}x"
        )
    return report


if __name__ == "__main__":
    main()
