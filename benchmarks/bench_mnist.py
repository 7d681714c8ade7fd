"""MNIST epoch cost: deterministic MLP vs our MFVI vs our SGM (K = 8, 64) vs bayesian-torch.

One training epoch each (60 000 images, hidden 400, batch 128, Adam, the same minibatch order),
on this machine's CPU unless --device says otherwise, with --threads torch threads; evaluation is not
timed. Each variant runs --rounds times, interleaved; the fastest epoch counts; printed as ratios.
Then MFVI's test accuracy after 10 epochs over seeds, with ε read from the normal table (as training
does) and drawn afresh every step (the reference): the table must not cost accuracy.

    python benchmarks/bench_mnist.py [--rounds 3] [--threads 2] [--device cpu|cuda] [--widths 64,256,1024,4096]
                                     [--accuracy-seeds 3] [--estimator-draws 200] [--images 60000] [--json]

Its smallest setting (``--images 1024 --rounds 1 --accuracy-seeds 0 --estimator-draws 0``) runs in the tests.
The machine's rates (bench_interactions.py's three) come first, measured in the same process.

Then the gradient estimators (reparam, local, flipout) at one θ (MFVI after one epoch) on one minibatch:
the total variance of the gradient w.r.t. μ and log σ over many draws, the time of one gradient, and
variance × time, the fair comparison (halving the variance is worth twice the time: two draws averaged).

bayesian-torch is optional: `pip install --no-deps bayesian-torch` (it imports without torchvision).
Targets: MFVI ≤ 1.6× deterministic and ≤ 0.5× bayesian-torch; SGM K=8 ≤ 1.25× MFVI, K=64 ≤ 1.6× MFVI;
MFVI ≥ 97 % test accuracy within 10 epochs. Both of SymLab's ways to train σ are timed: the lab's default, from the
curvature (a Fisher-diagonal pass each step), and by Adam as μ (textbook MFVI, as bayesian-torch trains).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from symlab.labs.mnist import experiment as mnist  # noqa: E402
from symlab.lib import bnn, mnist_data  # noqa: E402
from symlab.runs.device import measured_rates  # noqa: E402

HIDDEN, BATCH, LR = 400, 128, 1e-3


def minibatches(n: int, device, seed: int = 0):
    order = torch.randperm(n, generator=torch.Generator(device=device).manual_seed(seed), device=device)
    return [order[i : i + BATCH] for i in range(0, n, BATCH)]


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def deterministic_epoch(tensors, device, hidden) -> float:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10)).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=LR, fused=True)
    batches = minibatches(len(tensors.train_y), device)
    sync(device)
    started = time.perf_counter()
    for batch in batches:
        loss = F.cross_entropy(net(tensors.train_x[batch]), tensors.train_y[batch])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    sync(device)
    return time.perf_counter() - started


def bayesian_torch_epoch(tensors, device, hidden) -> float | None:
    try:
        from bayesian_torch.layers import LinearReparameterization
    except ImportError:
        return None

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.hidden = LinearReparameterization(784, hidden)
            self.out = LinearReparameterization(hidden, 10)

        def forward(self, x):
            h, kl_hidden = self.hidden(x)
            logits, kl_out = self.out(F.relu(h))
            return logits, kl_hidden + kl_out

    torch.manual_seed(0)
    net = Net().to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=LR, fused=True)
    n = len(tensors.train_y)
    batches = minibatches(n, device)
    sync(device)
    started = time.perf_counter()
    for batch in batches:
        logits, kl = net(tensors.train_x[batch])
        loss = F.cross_entropy(logits, tensors.train_y[batch]) + kl / n
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    sync(device)
    return time.perf_counter() - started


def our_epoch(tensors, device, hidden, method, K=16, sd_fit=None) -> float:
    """One epoch of SymLab's trainer; ``sd_fit`` "adam" trains σ by Adam as μ (textbook MFVI, as bayesian-torch
    does), where the lab's default fits σ from the curvature (a Fisher-diagonal pass a step)."""
    fit = {} if sd_fit is None else {"sd_fit": sd_fit}
    config = mnist.MnistConfig(hidden=hidden, method=method, K=K, epochs=1, batch_size=BATCH, lr=LR, samples=1, **fit)
    trainer = mnist.MnistTrainer(config, tensors, device)
    trainer.evaluate = lambda *args, **kwargs: {}  # time training only
    sync(device)
    return trainer.train_epoch()["seconds"]


def epoch_times(tensors, device, hidden, rounds) -> dict[str, float | None]:
    variants = {
        "deterministic MLP": lambda: deterministic_epoch(tensors, device, hidden),
        "our MFVI": lambda: our_epoch(tensors, device, hidden, "mfvi"),
        "our SGM K=8": lambda: our_epoch(tensors, device, hidden, "sgm", 8),
        "our SGM K=64": lambda: our_epoch(tensors, device, hidden, "sgm", 64),
        "our MFVI, σ by Adam": lambda: our_epoch(tensors, device, hidden, "mfvi", sd_fit="adam"),
        "our SGM K=8, σ by Adam": lambda: our_epoch(tensors, device, hidden, "sgm", 8, sd_fit="adam"),
        "bayesian-torch": lambda: bayesian_torch_epoch(tensors, device, hidden),
    }
    best: dict[str, float | None] = {name: math.inf for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            seconds = run()
            best[name] = None if seconds is None else min(best[name], seconds)
    return best


def estimator_comparison(tensors, device, hidden, draws: int) -> list[dict]:
    """Each estimator's gradient of NLL + KL/N at the same θ and minibatch, ``draws`` times."""
    base = mnist.MnistConfig(hidden=hidden, epochs=1, batch_size=BATCH, lr=LR, samples=1)
    trained = mnist.MnistTrainer(base, tensors, device)
    trained.evaluate = lambda *args, **kwargs: {}
    trained.train_epoch()
    x, y = tensors.train_x[:BATCH], tensors.train_y[:BATCH]
    rows = []
    for estimator in bnn.ESTIMATORS:
        trainer = mnist.MnistTrainer(replace(base, estimator=estimator), tensors, device)
        with torch.no_grad():
            trainer.mu.copy_(trained.mu)
            trainer.log_sd.copy_(trained.log_sd)
        generator = torch.Generator(device=device).manual_seed(0)
        grads, seconds = [], []
        for _ in range(draws + 1):
            sync(device)
            started = time.perf_counter()
            noise = (
                torch.randn(trainer.layout.n_params, generator=generator, device=device)
                if trainer.draws_weights
                else None
            )
            with torch.no_grad():
                sd = trainer.log_sd.exp()
            _, grad_mu, grad_log_sd, _ = trainer.negative_elbo_gradients(x, y, noise, sd, generator)
            sync(device)
            seconds.append(time.perf_counter() - started)
            grads.append(torch.cat([grad_mu, grad_log_sd]))
        grads, n = torch.stack(grads[1:]), trainer.layout.n_params  # the first call warms up
        variance_mu, variance_log_sd = float(grads[:, :n].var(0).sum()), float(grads[:, n:].var(0).sum())
        step_ms = 1e3 * sorted(seconds[1:])[len(seconds) // 2]
        rows.append(
            {
                "estimator": estimator,
                "variance_mu": variance_mu,
                "variance_log_sd": variance_log_sd,
                "gradient_ms": step_ms,
                "variance_time_mu": variance_mu * step_ms,
                "variance_time_log_sd": variance_log_sd * step_ms,
            }
        )
    return rows


def ratio(a, b):
    return "n/a" if a is None or b is None else f"{a / b:.2f}×"


def quotient(a, b):
    return None if a is None or b is None else round(a / b, 3)


def test_accuracies(tensors, device, epochs: int, seeds: int, normals) -> list[float]:
    """MFVI's test accuracy after ``epochs`` epochs for seeds 0 … seeds − 1, with ε from ``normals``."""
    accuracies = []
    for seed in range(seeds):
        trainer = mnist.MnistTrainer(mnist.MnistConfig(hidden=HIDDEN, epochs=epochs, seed=seed), tensors, device)
        trainer.normals = normals
        for _ in range(epochs):
            metrics = trainer.train_epoch()
        accuracies.append(metrics["test_acc"])
    return accuracies


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (pinned; default 2)")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--accuracy-epochs", type=int, default=10)
    parser.add_argument(
        "--accuracy-seeds",
        type=int,
        default=3,
        help="seeds of the accuracy run, each with the normal table and with fresh draws (0: skip)",
    )
    parser.add_argument("--widths", default="", help="also time MFVI/SGM epochs at these widths (e.g. on a GPU)")
    parser.add_argument(
        "--estimator-draws",
        type=int,
        default=200,
        help="gradient draws per estimator for the variance comparison (0: skip it)",
    )
    parser.add_argument(
        "--images", type=int, default=0, help="train on a seeded subset of this many images (0: all 60 000)"
    )
    parser.add_argument("--json", action="store_true", help="end with one JSON line of the ratios and accuracies")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    measured = measured_rates()
    rates = measured.in_units()
    device = mnist.resolve_device(args.device)
    data = mnist_data.load_mnist()
    tensors = mnist.prepare_tensors(data, mnist.MnistConfig(train_subset=args.images), device)
    print(measured.described())
    print(
        f"device {device}, torch {torch.__version__}, {torch.get_num_threads()} threads; "
        f"hidden {HIDDEN}, batch {BATCH}, {len(tensors.train_y)} images per epoch; best of {args.rounds}"
    )
    summary: dict = {
        "device": str(device),
        "threads": torch.get_num_threads(),
        "hidden": HIDDEN,
        "batch": BATCH,
        "images": len(tensors.train_y),
        "rates": rates,
    }

    times = epoch_times(tensors, device, HIDDEN, args.rounds)
    det, ours, bt = times["deterministic MLP"], times["our MFVI"], times["bayesian-torch"]
    for name, seconds in times.items():
        shown = "not installed (pip install --no-deps bayesian-torch)" if seconds is None else ratio(seconds, det)
        print(f"  {name:<24} {shown:>7} the deterministic MLP's epoch")
    adam, sgm8_adam = times["our MFVI, σ by Adam"], times["our SGM K=8, σ by Adam"]
    print("the lab's default (σ from the curvature, a Fisher-diagonal pass a step):")
    print(f"  MFVI / deterministic   {ratio(ours, det):>7}  (target ≤ 1.6×)")
    print(f"  MFVI / bayesian-torch  {ratio(ours, bt):>7}  (target ≤ 0.5×)")
    print(f"  SGM K=8 / MFVI         {ratio(times['our SGM K=8'], ours):>7}  (target ≤ 1.25×)")
    print(f"  SGM K=64 / MFVI        {ratio(times['our SGM K=64'], ours):>7}  (target ≤ 1.6×)")
    print("σ by Adam, as μ (textbook MFVI, as bayesian-torch trains):")
    print(f"  MFVI / deterministic   {ratio(adam, det):>7}  (target ≤ 1.6×)")
    print(f"  MFVI / bayesian-torch  {ratio(adam, bt):>7}  (target ≤ 0.5×)")
    print(f"  SGM K=8 / MFVI         {ratio(sgm8_adam, adam):>7}  (target ≤ 1.25×)")
    summary.update(
        mfvi_over_deterministic=quotient(ours, det),
        mfvi_over_bayesian_torch=quotient(ours, bt),
        sgm8_over_mfvi=quotient(times["our SGM K=8"], ours),
        sgm64_over_mfvi=quotient(times["our SGM K=64"], ours),
        mfvi_adam_over_deterministic=quotient(adam, det),
        mfvi_adam_over_bayesian_torch=quotient(adam, bt),
        sgm8_adam_over_mfvi_adam=quotient(sgm8_adam, adam),
    )

    if args.accuracy_epochs and args.accuracy_seeds:
        table = test_accuracies(tensors, device, args.accuracy_epochs, args.accuracy_seeds, bnn.NormalTable)
        fresh = test_accuracies(tensors, device, args.accuracy_epochs, args.accuracy_seeds, bnn.FreshNormals)
        print(
            f"MFVI test accuracy after {args.accuracy_epochs} epochs, seeds 0–{args.accuracy_seeds - 1} "
            "(target ≥ 97 %):"
        )
        for name, values in (("normal table", table), ("fresh draws", fresh)):
            print(
                f"  {name:<13} "
                + "  ".join(f"{100 * a:.2f} %" for a in values)
                + f"   mean {100 * sum(values) / len(values):.2f} %"
            )
        summary.update(
            {
                f"mfvi_test_acc_{args.accuracy_epochs}_epochs": table[0],
                "mfvi_test_acc_by_seed": table,
                "mfvi_test_acc_by_seed_fresh_draws": fresh,
            }
        )

    if args.estimator_draws:
        rows = estimator_comparison(tensors, device, HIDDEN, args.estimator_draws)
        reference = rows[0]
        print(
            f"gradient estimators at one θ (MFVI after 1 epoch), one minibatch, {args.estimator_draws} draws "
            "(variance: summed over coordinates; ratios against reparam)"
        )
        print(
            f"  {'estimator':<9} {'Var ∇μ':>10} {'Var ∇log σ':>11} {'time':>7} {'Var ∇μ × time':>14} "
            f"{'Var ∇log σ × time':>18}"
        )
        estimators = {}
        for row in rows:
            relative = {
                "variance_mu": row["variance_mu"] / reference["variance_mu"],
                "variance_log_sd": row["variance_log_sd"] / reference["variance_log_sd"],
                "time": row["gradient_ms"] / reference["gradient_ms"],
                "variance_time_mu": row["variance_time_mu"] / reference["variance_time_mu"],
                "variance_time_log_sd": row["variance_time_log_sd"] / reference["variance_time_log_sd"],
            }
            estimators[row["estimator"]] = {key: round(value, 4) for key, value in relative.items()}
            print(
                f"  {row['estimator']:<9} {row['variance_mu']:10.4g} {row['variance_log_sd']:11.4g} "
                f"{relative['time']:6.2f}× {relative['variance_time_mu']:13.3f}× "
                f"{relative['variance_time_log_sd']:17.3f}×"
            )
        summary["estimators_against_reparam"] = estimators

    widths = {}
    for width in [int(w) for w in args.widths.split(",") if w.strip()]:
        det = deterministic_epoch(tensors, device, width)
        mf = our_epoch(tensors, device, width, "mfvi")
        sg = our_epoch(tensors, device, width, "sgm", 8)
        widths[width] = {"mfvi_over_deterministic": quotient(mf, det), "sgm8_over_mfvi": quotient(sg, mf)}
        print(f"  width {width:5d}: MFVI {mf / det:.2f}× deterministic, SGM K=8 {sg / mf:.2f}× MFVI")
    if widths:
        summary["widths"] = widths

    if args.json:
        print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
