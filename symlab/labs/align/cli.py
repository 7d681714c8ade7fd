"""The align lab on the command line: ``python -m symlab align ...``."""

from __future__ import annotations

import argparse
import sys

from symlab import cli
from symlab.labs.align import experiment as align_lab
from symlab.checks import public


def register(subparsers) -> None:
    defaults = align_lab.AlignConfig()
    p = subparsers.add_parser(
        "align", help="align two MFVI posteriors across permutations (W2) and compare the loss barrier",
        description="Train two mean-field posteriors of the same ReLU MLP from different seeds, align the second "
                    "to the first by per-layer permutations minimising the 2-Wasserstein distance (coordinate "
                    "descent, one linear assignment per layer; weight matching on the means for comparison), and "
                    "report the marginal predictive's test loss along the interpolation of means and standard "
                    "deviations, before and after (Rossi et al. 2023).")
    p.add_argument("--task", choices=align_lab.TASKS, default=defaults.task,
                   help="moons: two interleaved half moons (2-D); mnist: a subset of MNIST")
    p.add_argument("--width", type=cli.int_at_least(2, 512), default=defaults.width, help="hidden units per layer")
    p.add_argument("--depth", type=cli.int_at_least(1, 4), default=defaults.depth, help="hidden layers")
    p.add_argument("--train-size", type=cli.int_at_least(10, 60_000), default=defaults.train_size,
                   help="training points (moons: drawn; mnist: the first images)")
    p.add_argument("--noise", type=_fraction, default=defaults.noise, help="moons: noise on the points")
    p.add_argument("--steps", type=cli.int_at_least(1, 100_000), default=defaults.steps, help="Adam steps")
    p.add_argument("--batch-size", type=cli.int_at_least(1, 60_000), default=defaults.batch)
    p.add_argument("--lr", type=cli.positive_float, default=defaults.lr, help="Adam learning rate")
    p.add_argument("--prior-scale", type=cli.positive_float, default=defaults.prior_scale,
                   help="prior N(0, p²) on every weight")
    p.add_argument("--init-sd", type=cli.positive_float, default=defaults.init_sd,
                   help="initial posterior standard deviation")
    p.add_argument("--samples", type=cli.int_at_least(1, 1000), default=defaults.samples,
                   help="posterior samples per point of the path")
    p.add_argument("--path-points", type=cli.int_at_least(3, 201), default=defaults.path_points,
                   help="values of t from 0 to 1")
    p.add_argument("--seed", type=cli.int_at_least(0), default=defaults.seed,
                   help="data and both initialisations (q_A and q_B get different seeds derived from it)")
    p.add_argument("--data-dir", default=None, help="MNIST directory (default: the copy shipped in assets/mnist)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_run_align, format=_format_align)

def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{cli.shown(text)} is not a number") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{cli.shown(text)} must be between 0 and 1")
    return value

def _run_align(args) -> dict:
    config = align_lab.AlignConfig(
        task=args.task, width=args.width, depth=args.depth, train_size=args.train_size, noise=args.noise,
        steps=args.steps, batch=args.batch_size, lr=args.lr, prior_scale=args.prior_scale, init_sd=args.init_sd,
        samples=args.samples, path_points=args.path_points, seed=args.seed).validate()
    mnist = cli.load_mnist(args.data_dir) if config.task == "mnist" else None
    progress = cli.stderr_progress(args, "Adam step")

    tenths_shown = set()

    def by_tenths(done, total, *_elbo):
        if done * 10 // total not in tenths_shown:
            tenths_shown.add(done * 10 // total)
            progress(done, total)

    return public(align_lab.run(config, mnist, by_tenths))

def _format_align(report: dict) -> str:
    c = report["config"]
    sizes = "-".join(map(str, report["sizes"]))
    lines = [f"{c['task']}: two MFVI posteriors of a {sizes} MLP, {c['steps']} Adam steps "
             f"({report['train_seconds']:.1f} s); test loss {report['loss_a']:.3f} / {report['loss_b']:.3f}, "
             f"accuracy {report['accuracy_a']:.3f} / {report['accuracy_b']:.3f}",
             f"alignment: {report['sweeps']} sweep(s), {'converged' if report['converged'] else 'not converged'}, "
             f"{report['align_seconds'] * 1000:.0f} ms for both objectives",
             f"{'path':>26} {'W2 distance':>12} {'|mu_A - mu_B|':>14} {'loss barrier':>13} {'acc. drop':>10}"]
    for name, title in align_lab.PATH_TITLES.items():
        row = report["summary"][name]
        lines.append(f"{title:>26} {row['w2']:>12.4g} {row['mean_distance']:>14.4g} {row['barrier']:>13.4f} "
                     f"{row['accuracy_barrier']:>10.4f}")
    return "\n".join(lines)
