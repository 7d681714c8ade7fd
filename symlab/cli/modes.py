"""The modes lab on the command line: ``python -m symlab modes ...``."""

from __future__ import annotations

import math
import sys

from symlab.cli import common
from symlab.labs.modes import params
from symlab.labs.modes.config import SweepConfig
from symlab.specs import controls

MC_FLAGS = ("covariance", "samples", "steps", "lr", "seed")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "modes",
        help="reverse-KL fit of one Gaussian to a two-mode mixture: interpolation threshold α*",
        description=(
            "Fit q = N(μ, Σ) to p_α = ½N(0, σ²I) + ½N(α e₁, σ²I) by reverse KL from the first "
            "component, for α on linspace(0, alpha-max, points). Reports α⁻¹‖μ*‖, det Σ*, the final "
            "KL and the threshold α* where q stops sitting between the modes."
        ),
    )
    controls.add_flags(p, SweepConfig, ("sigma", "alpha_max", "points", "protocol", "dim"))
    controls.add_flags(p.add_argument_group("Monte-Carlo protocol (--protocol mc)"), SweepConfig, MC_FLAGS)
    p.add_argument(
        "--surface",
        metavar="ALPHA",
        type=controls.number_parser(controls.Control("float", low=params.ALPHA.low, high=params.ALPHA.high)),
        default=None,
        help="also write the page's 3-D landscape at mode distance ALPHA: KL(q||p_α) on a grid over q's mean and "
        "log standard deviation, with Adam's path (the page's, lr 1e-2 from the first component) and the optimum "
        f"on it (JSON key surface; ALPHA from {params.ALPHA.low:g} to {params.ALPHA.high:g})",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(run=_run_modes, format=_format_modes)


def _run_modes(args) -> dict:
    from symlab.labs.modes import experiment as modes  # numpy: loaded when a computation runs, not to parse

    config = controls.from_args(SweepConfig, args)

    def progress(step, steps):
        print(f"  Adam step {step}/{steps}", file=sys.stderr, flush=True)

    report = modes.sweep_report(config, progress=progress if config.protocol == "mc" else None)
    if args.surface is not None:
        report["surface"] = modes.landscape_report(args.surface, config.sigma)
    return report


def _format_modes(report: dict) -> str:
    lines = [
        f"Reverse-KL fit, σ = {report['sigma']:g}, d = {report['dim']}, protocol {report['protocol']}",
        f"{'alpha':>8} {'alpha^-1|mu*|':>14} {'det Sigma*':>12} {'KL(q||p)':>10}",
    ]
    for alpha, interp, det, kl in zip(report["alphas"], report["interpolation"], report["det_cov"], report["kl"]):
        interp_text = "undefined" if interp is None else f"{interp:.4f}"
        lines.append(f"{alpha:8.3f} {interp_text:>14} {det:12.5g} {kl:10.5f}")
    threshold = report["threshold"]
    if threshold is None:
        lines.append("threshold α*: not reached in this sweep (q interpolates throughout); raise --alpha-max")
    else:
        lines.append(
            f"threshold α* = {threshold:.4f}  (α*/σ = {report['threshold_over_sigma']:.3f}; ln 2 = {math.log(2):.4f})"
        )
    if "surface" in report:
        lines.append(common.landscape_summary(report["surface"]))
    return "\n".join(lines)
