"""The symmetry lab on the command line: ``python -m symlab symmetry ...``."""

from __future__ import annotations

from symlab.cli import common
from symlab.labs.symmetry.config import (
    DEFAULT_WIDTHS,
    MAX_WIDTH,
    MIN_WIDTH,
    MlpConfig,
    PerceptronConfig,
    ProximityConfig,
    QualityConfig,
)
from symlab.labs.toy.config import ToyConfig
from symlab.lib.options import SORT_KEYS, WEIGHTS_MAX_FILE_MB, library_names
from symlab.specs import controls, results

PERCEPTRON_FLAGS = ("nets", "epochs", "lr", "separation", "seed")
MLP_FLAGS = ("width", "depth", "instances", "steps", "lr", "schedule", "batch", "sort_key", "seed")
PROXIMITY_FLAGS = ("d_in", "d_out", "weights", "steps", "seed")
TOY_FLAGS = ("alpha", "noise", "n_train", "restarts", "seed")  # the tractable BNN's data, its fits' starts and seed
QUALITY_FLAGS = ("samples", "members", "steps")
# The mass part's MLPs, smaller and shorter than the training part's, under flags of their own.
MASS_MLP = {"width": 64, "depth": 2, "steps": 500}


def _computations():
    """The lab's computations, which load torch: imported when one runs, so that --help and parsing load none."""
    from symlab.labs.symmetry import experiment

    return experiment


WIDTH = controls.Control("int", low=MIN_WIDTH, high=MAX_WIDTH)  # one of --widths


def _add_mass_mlp_flags(parser) -> None:
    """``--mlp-<field>`` (dest ``mlp_<field>``) for the MLP fields of :data:`MASS_MLP`, ranges as declared."""
    for name, default in MASS_MLP.items():
        spec = controls.declaration(MlpConfig, name)
        parser.add_argument(
            f"--mlp-{name}",
            dest=f"mlp_{name}",
            type=controls.number_parser(spec),
            default=default,
            help=f"MLPs: {spec.label} ({spec.describe_range()}; default {default})",
        )


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "symmetry",
        help="symmetry explorer: removal, min-mass, mode proximity, MMD, permutations in training",
        description="The posterior modulo its symmetries (Laurent et al. 2024) and how close equivalent modes "
        "are (Gelberg et al. 2024, Thm 3.1). Pick a part:",
    )
    parts = p.add_subparsers(dest="part", metavar="<part>", title="parts")
    parts.required = True

    q = parts.add_parser(
        "perceptrons",
        help="Laurent's Fig. 1: 2-2-1 perceptrons, last-layer weights raw, after scaling and after permutation removal",
        description="Train many 2-2-1 ReLU perceptrons on two separable Gaussian blobs (SGD, BCE, "
        "batch 10) and report the density peaks of their output weights raw, after "
        "scaling removal and after permutation removal, plus min-mass.",
    )
    controls.add_flags(q, PerceptronConfig, PERCEPTRON_FLAGS)
    q.set_defaults(run=_run_perceptrons, format=_format_symmetry)

    q = parts.add_parser(
        "mass",
        help="mass before and after the min-mass problem: perceptrons and MNIST MLPs",
        description="Solve the min-mass problem (minimum L2 mass over ReLU rescalings, convex in "
        "log-scales) for trained 2-2-1 perceptrons and MLPs trained on MNIST.",
    )
    controls.add_flags(q, PerceptronConfig, PERCEPTRON_FLAGS)
    _add_mass_mlp_flags(q)
    common.add_data_dir(q)
    q.set_defaults(run=_run_mass, format=_format_symmetry)

    q = parts.add_parser(
        "proximity",
        help="distance to the nearest equivalent mode vs width, against Thm 3.1",
        description="For one-hidden-layer MLPs of each width, the distance from w to its nearest "
        "permuted copy relative to ||w||, and Gelberg's bound 2D / log n!.",
    )
    q.add_argument(
        "--widths", type=controls.list_parser(WIDTH), default=list(DEFAULT_WIDTHS), help="comma-separated widths"
    )
    controls.add_flags(q, ProximityConfig, PROXIMITY_FLAGS)
    q.set_defaults(run=_run_proximity, format=_format_symmetry)

    q = parts.add_parser(
        "quality",
        help="MMD of MFVI, SGM and a deep ensemble to the exact posterior of the "
        "tractable BNN, with and without symmetry removal",
        description="Samples of MFVI, SGM (q_G) and a deep ensemble (MAP fits) against samples of "
        "the exact posterior of ReLU(w1 x) + ReLU(w2 x): median MMD² over 10 Gaussian "
        "and 10 Laplace kernels, raw and with the units sorted.",
    )
    controls.add_flags(q, ToyConfig, TOY_FLAGS[:-1])
    controls.add_flags(q, QualityConfig, QUALITY_FLAGS)
    controls.add_flags(q, ToyConfig, TOY_FLAGS[-1:])
    q.set_defaults(run=_run_quality, format=_format_symmetry)

    q = parts.add_parser(
        "training",
        help="do networks permute while they train? Kendall's τ between successive sorting permutations (MNIST MLPs)",
        description="Train MLPs on MNIST with SGD; after every step sort each hidden layer's units "
        "and measure Kendall's τ against the previous step's order (1: no change).",
    )
    controls.add_flags(q, MlpConfig, MLP_FLAGS)
    common.add_data_dir(q)
    q.set_defaults(run=_run_training, format=_format_symmetry)

    q = parts.add_parser(
        "network",
        help="your own MLP from a file: mode proximity, removal checks, min-mass",
        description="Read an MLP of nn.Linear layers (a torch.save'd state_dict, or safetensors: a "
        "point estimate or a mean-field posterior, whose means are analysed) and report "
        "its structure, each hidden layer's nearest equivalent mode against the Thm 3.1 "
        "bound, that sorting its units and normalising them keep its function, and the "
        "min-mass problem. A 784-input net is checked on MNIST test images, and a "
        "784 → … → 10 net's test accuracy is reported.",
    )
    q.add_argument(
        "--weights",
        required=True,
        metavar="FILE",
        help=f"the network: a torch state_dict or a safetensors file, a mean-field posterior saved by "
        f"{library_names()} included (at most {WEIGHTS_MAX_FILE_MB} MB; read as "
        "data, never run)",
    )
    q.add_argument(
        "--sort-key",
        choices=SORT_KEYS,
        default="max_in",
        help="what permutation removal sorts each hidden layer's units by (default max_in)",
    )
    common.add_data_dir(q)
    q.set_defaults(run=_run_network, format=_format_network)
    for sub in parts.choices.values():
        sub.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _perceptron_config(args) -> PerceptronConfig:
    return controls.from_args(PerceptronConfig, args, PERCEPTRON_FLAGS)


def _run_perceptrons(args) -> dict:
    symmetry_lab = _computations()
    run = symmetry_lab.train_perceptrons(_perceptron_config(args), common.stderr_progress(args, "epoch"))
    return results.to_json(symmetry_lab.perceptron_report(run))


def _run_mass(args) -> dict:
    symmetry_lab = _computations()
    config = MlpConfig(**{name: getattr(args, f"mlp_{name}") for name in MASS_MLP}, seed=args.seed).validate()
    mnist = common.load_mnist(args.data_dir)  # a bad --data-dir fails before any training
    perceptrons = symmetry_lab.train_perceptrons(_perceptron_config(args), common.stderr_progress(args, "epoch"))
    mlps = symmetry_lab.train_mlps(config, mnist, common.stderr_progress(args, "MLP step"))
    return {
        "perceptrons": results.to_json(symmetry_lab.mass_report(perceptrons.epoch_layers(args.epochs))),
        "mlps": {"config": results.to_json(config), **results.to_json(symmetry_lab.mass_report(mlps.layers))},
    }


def _run_proximity(args) -> dict:
    symmetry_lab = _computations()
    config = controls.from_args(ProximityConfig, args, PROXIMITY_FLAGS, widths=tuple(args.widths))
    return results.to_json(
        {"config": config, "rows": symmetry_lab.mode_proximity(config, common.stderr_progress(args, "width"))}
    )


def _run_quality(args) -> dict:
    symmetry_lab = _computations()
    config = controls.from_args(QualityConfig, args, QUALITY_FLAGS, toy=controls.from_args(ToyConfig, args, TOY_FLAGS))
    return results.to_json(symmetry_lab.posterior_quality(config, common.stderr_progress(args)))


def _run_training(args) -> dict:
    symmetry_lab = _computations()
    config = controls.from_args(MlpConfig, args, MLP_FLAGS)
    run = symmetry_lab.train_mlps(config, common.load_mnist(args.data_dir), common.stderr_progress(args, "step"))
    return results.to_json(symmetry_lab.training_report(run))


def _run_network(args) -> dict:
    symmetry_lab = _computations()
    from symlab.lib import weights  # torch, as the computations

    network = weights.read_network(args.weights)
    mnist = common.load_mnist(args.data_dir) if network.sizes[0] == 784 else None
    return results.to_json(symmetry_lab.network_report(network, mnist, args.sort_key))


def _format_network(report: dict) -> str:
    lines = [f"{report['name']}: {report['structure']}"]
    if report["posterior"]:
        lines.append("  (a posterior: the analyses below are of its means)")
    if report["mnist_accuracy"] is not None:
        lines.append(f"  MNIST test accuracy {report['mnist_accuracy']:.4f} (inputs scaled {report['mnist_scaling']})")
    lines += [
        f"{'hidden layer':>12} {'width':>6} {'|gw - w|':>12} {'/ |w|':>12} {'Thm 3.1 bound':>14} {'closest units':>14}"
    ]
    for row in report["nearest_modes"]:
        pair = str(tuple(row["pair"])) if row["width"] > 1 else "(one unit)"
        lines.append(
            f"{row['layer']:>12} {row['width']:>6} {_or_na(row['distance'], '>12.4g'):>12} "
            f"{_or_na(row['relative_distance'], '>12.4g'):>12} {_bound(row):>14} {pair:>14}"
        )
    if any(row["bound_vacuous"] for row in report["nearest_modes"]):
        lines.append(
            f"  * vacuous: 2D / log n! ≥ 2 (D = {report['n_parameters']:,}), and no permutation moves w by more "
            "than 2|w|: the bound says nothing about this net"
        )
    lines += [
        f"largest output change on {report['check_inputs']}:",
        f"  units sorted by {report['sort_key']}: {report['permutation_removal_change']:.2e}; "
        f"units normalised: {report['scaling_removal_change']:.2e}; min-mass: {report['min_mass_change']:.2e}",
        f"min-mass: mass {report['mass_before']:.6g} → {report['mass_after']:.6g} (ratio "
        f"{_or_na(report['mass_ratio'], '.4f')}, "
        f"{'converged' if report['min_mass_converged'] else 'not converged'})",
    ]
    if report["degenerate_units"]:
        lines.append(
            f"  {report['degenerate_units']} degenerate unit(s) (no incoming or no outgoing weight, or cut off "
            "behind one): their terms vanish as their scales run off, so the mass after is the infimum, "
            "approached, not reached"
        )
    return "\n".join(lines)


def _bound(row: dict) -> str:
    """The Thm 3.1 bound, starred where it is vacuous (≥ 2)."""
    return _or_na(row["bound"], ".4g") + (" *" if row["bound_vacuous"] else "")


def _format_mass_line(name: str, report: dict) -> str:
    return (
        f"{name:>12} {report['nets']:>6} {report['mass_before_median']:>12.4g} {report['mass_after_median']:>12.4g} "
        f"{report['ratio_median']:>8.4f} {report['ratio_min']:>8.4f} {report['converged']:>5}/{report['nets']:<5} "
        f"{report['max_output_change']:>10.2e}"
    )


_MASS_HEADER = (
    f"{'':>12} {'nets':>6} {'mass before':>12} {'mass after':>12} {'ratio':>8} {'min':>8} "
    f"{'converged':>11} {'max |Δf|':>10}"
)


def _format_symmetry(report: dict) -> str:
    if "stages" in report:
        lines = [
            f"{report['nets']} perceptrons trained in {report['seconds']:.2f} s "
            f"({report['nets_per_second']:.0f} nets/s); {report['kept']} kept (final loss ≤ "
            f"{report['loss_cutoff']:.3g})",
            f"{'stage':>8} {'highest density peaks of (v1, v2)':<52} {'v1 > v2':>8} {'swap MMD²':>10} {'max |Δf|':>10}",
        ]
        for name, stage in report["stages"].items():
            peaks = "  ".join(f"({a:.2f}, {b:.2f})" for a, b in stage["peaks"][:3])
            lines.append(
                f"{name:>8} {peaks:<52} {stage['share_v1_above_v2']:>8.3f} "
                f"{stage['swap_asymmetry_mmd2']:>10.2e} {stage['max_output_change']:>10.2e}"
            )
        lines += ["min-mass:", _MASS_HEADER, _format_mass_line("perceptrons", report["mass"])]
        return "\n".join(lines)
    if "perceptrons" in report:
        return "\n".join(
            [
                "min-mass (median masses; ratio = after / before)",
                _MASS_HEADER,
                _format_mass_line("perceptrons", report["perceptrons"]),
                _format_mass_line("MNIST MLPs", report["mlps"]),
            ]
        )
    if "rows" in report and "widths" in report["config"]:
        lines = [
            f"nearest equivalent mode, {report['config']['weights']} weights, d_in = {report['config']['d_in']}, "
            f"d_out = {report['config']['d_out']}",
            f"{'width':>6} {'D':>8} {'|gw - w|':>12} {'/ |w|':>12} {'Thm 3.1 bound':>14}",
        ]
        for row in report["rows"]:
            lines.append(
                f"{row['width']:>6} {row['n_parameters']:>8} {row['distance']:>12.4g} "
                f"{row['relative_distance']:>12.4g} {_bound(row):>14}"
            )
        if any(row["bound_vacuous"] for row in report["rows"]):
            lines.append("  * vacuous: 2D / log n! ≥ 2, and no permutation moves w by more than 2|w|")
        return "\n".join(lines)
    if "rows" in report:
        lines = [
            "median MMD² to the exact posterior (20 kernels); lower is better",
            f"{'method':>12} {'raw':>12} {'units sorted':>13}",
        ]
        for row in report["rows"]:
            lines.append(f"{row['method']:>12} {row['mmd2_raw']:>12.4g} {row['mmd2_removed']:>13.4g}")
        return "\n".join(lines)
    return (
        f"{report['config']['instances']} MLPs, width {report['config']['width']} × {report['config']['depth']}, "
        f"{report['config']['steps']} SGD steps ({report['config']['schedule']} lr) in {report['seconds']:.1f} s\n"
        f"  test accuracy {_or_na(report['test_accuracy_mean'], '.3f')}, final loss "
        f"{_or_na(report['final_loss_mean'], '.3f')}, "
        f"diverged {report['diverged']}\n"
        f"  Kendall τ between successive sorting permutations: mean {report['tau_mean']:.3f}, min {report['tau_min']:.3f}\n"
        f"  steps where some unit changed place: {_or_na(report['share_steps_with_permutation_first_half'], '.0%')} "
        f"of the first half, {_or_na(report['share_steps_with_permutation_second_half'], '.0%')} of the second"
    )


def _or_na(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)
