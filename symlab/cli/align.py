"""The align lab on the command line: ``python -m symlab align ...``."""

from __future__ import annotations

import math

from symlab.cli import common
from symlab.labs.align.config import MNIST_TEST, NOISE_MULTIPLE, PATH_TITLES, AlignConfig
from symlab.lib.options import WEIGHTS_MAX_FILE_MB, library_names
from symlab.specs import controls, results


def _computations():
    """The lab's computation and the network reader, which load torch: imported when one runs, so that --help and
    parsing load none."""
    from symlab.labs.align import experiment
    from symlab.lib import weights

    return experiment, weights


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "align",
        help="align two MFVI posteriors across permutations (W2) and compare the loss barrier",
        description="Train two mean-field posteriors of the same ReLU MLP from different seeds, align the second "
        "to the first by per-layer permutations minimising the 2-Wasserstein distance (coordinate "
        "descent, one linear assignment per layer; weight matching on the means for comparison), and "
        "report the marginal predictive's test loss along the interpolation of means and standard "
        "deviations, before and after (Rossi et al. 2023).",
    )
    controls.add_flags(p, AlignConfig)
    p.add_argument(
        "--weights",
        nargs=2,
        metavar=("A", "B"),
        default=None,
        help="align two networks of your own instead of training a pair: two files of the same MLP "
        "(torch state_dicts or safetensors; two point estimates or two mean-field posteriors, "
        f"SymLab's or saved by {library_names()}; at most {WEIGHTS_MAX_FILE_MB} MB "
        "each, read as data, never run). The loss "
        "barrier needs data: MNIST for 784 → … → 10 nets; --samples, --path-points and --seed apply",
    )
    p.add_argument(
        "--export",
        dest="export_dir",
        metavar="DIR",
        default=None,
        help="write the trained pair to DIR: q_a.safetensors, q_b.safetensors and q_b_aligned.safetensors "
        "(W₂-aligned), each loadable into nn.Sequential(nn.Linear, nn.ReLU, …); with --weights A B, "
        "B aligned to A (b_aligned.safetensors) and the permutations (permutations.csv: layer, "
        "unit_of_a, unit_of_b), as the page downloads them",
    )
    p.add_argument(
        "--surface",
        action="store_true",
        help="also write the page's 3-D landscape: the test loss on a grid of the plane through q_A, q_B and "
        "q_B aligned by W2 (coordinates in W2 distance), with the straight paths and the three posteriors on it "
        "(JSON key surface; not with --weights)",
    )
    common.add_data_dir(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_run_align, format=_format_align)


def _run_align(args) -> dict:
    align_lab, weights = _computations()
    config = controls.from_args(AlignConfig, args)
    if args.export_dir:  # a directory that cannot be made fails now, not after the work
        align_lab.export_directory(args.export_dir)
    if args.weights:
        if args.surface:
            raise ValueError("--surface draws the plane of a trained pair: leave out --weights")
        return _run_networks(args, config)
    mnist = common.load_mnist(args.data_dir) if config.task == "mnist" else None
    progress = common.stderr_progress(args, "Adam step")

    tenths_shown = set()

    def by_tenths(done, total, *_elbo):
        if done * 10 // total not in tenths_shown:
            tenths_shown.add(done * 10 // total)
            progress(done, total)

    data = align_lab.load_task(config, mnist)
    pair = align_lab.train_pair(config, data, by_tenths)
    report = align_lab.alignment_report(pair, data)
    result = results.to_json(report)
    if args.surface:
        from symlab.specs import surfaces  # numpy, as the computation

        result["surface"] = surfaces.to_json(align_lab.loss_plane(pair, report, data))
    if args.export_dir:
        result["exported"] = [str(path) for path in align_lab.export_pair(pair, report, args.export_dir)]
    return result


def _run_networks(args, config) -> dict:
    align_lab, weights = _computations()
    a, b = (weights.read_network(path) for path in args.weights)
    mnist = common.load_mnist(args.data_dir) if weights.is_mnist_classifier(a.sizes) else None
    report = align_lab.align_networks(
        a, b, mnist, config.path_points, config.samples, config.seed, starts=config.starts
    )
    result = results.to_json(report)
    if args.export_dir:
        result["exported"] = [str(path) for path in align_lab.export_networks(a, b, report, args.export_dir)]
    return result


def _format_align(report: dict) -> str:
    if "names" in report:
        return _format_networks(report)
    c = report["config"]
    sizes = "-".join(map(str, report["sizes"]))
    lines = [
        f"{c['task']}: two MFVI posteriors of a {sizes} MLP, {c['steps']} Adam steps "
        f"({report['train_seconds']:.1f} s); test loss {report['loss_a']:.3f} / {report['loss_b']:.3f}, "
        f"accuracy {report['accuracy_a']:.3f} / {report['accuracy_b']:.3f}",
        f"alignment: {_starts(report)}, {report['sweeps']} sweep(s), "
        f"{'converged' if report['converged'] else 'not converged'}, "
        f"{report['align_seconds'] * 1000:.0f} ms for both objectives",
        f"{'path':>26} {'W2 distance':>12} {'|mu_A - mu_B|':>14} {'loss barrier':>18} {'acc. drop':>10}",
    ]
    for name, title in PATH_TITLES.items():
        row = report["summary"][name]
        lines.append(
            f"{title:>26} {row['w2']:>12.4g} {row['mean_distance']:>14.4g} {_barrier(row):>18} "
            f"{row['accuracy_barrier']:>10.4f}"
        )
    lines.append(
        f"loss barrier: nats ± Monte-Carlo standard error over the {c['samples']} draws; below "
        f"{NOISE_MULTIPLE} errors it is gone"
    )
    if "surface" in report:
        lines.append(common.landscape_summary(report["surface"]))
    if "exported" in report:
        lines.append("exported: " + ", ".join(report["exported"]))
    return "\n".join(lines)


def _barrier(row: dict) -> str:
    """A path's loss barrier ± its Monte-Carlo error (one draw: no error), or n/a without data."""
    if row["barrier"] is None:
        return "n/a"
    error = row.get("barrier_se")
    return f"{row['barrier']:.4f}" if error is None or math.isnan(error) else common.pm(row["barrier"], error, 4)


def _format_networks(report: dict) -> str:
    a, b = report["names"]
    lines = [f"{a} and {b}: {report['structure']}"]
    if report["accuracy_a"] is not None:
        lines.append(
            f"MNIST test accuracy {report['accuracy_a']:.4f} / {report['accuracy_b']:.4f} (first "
            f"{MNIST_TEST} test images, inputs scaled {report['mnist_scaling']})"
        )
    else:
        lines.append("no loss barrier: it needs data (MNIST, for 784 → … → 10 nets)")
    lines.append(
        f"alignment: {_starts(report)}, {report['sweeps']} sweep(s), "
        f"{'converged' if report['converged'] else 'not converged'}, "
        f"{report['align_seconds'] * 1000:.0f} ms for both objectives"
    )
    lines.append(f"{'path':>26} {'W2 distance':>12} {'|mu_A - mu_B|':>14} {'loss barrier':>18} {'units moved':>14}")
    for name, title in PATH_TITLES.items():
        row = report["summary"][name]
        lines.append(
            f"{title:>26} {row['w2']:>12.4g} {row['mean_distance']:>14.4g} {_barrier(row):>18} "
            f"{'+'.join(map(str, row['units_moved'])):>14}"
        )
    if "exported" in report:
        lines.append("exported: " + ", ".join(report["exported"]))
    return "\n".join(lines)


def _starts(report: dict) -> str:
    """How many descents ran, and which one W₂'s result came from."""
    return f"best of {report['starts_tried']} start(s) ({report['best_start']})"
