"""The modes lab on the command line: ``python -m symlab modes ...``."""

from __future__ import annotations

import argparse
import sys

from symlab import cli
from symlab.labs.modes import experiment as modes


_MAX_ALPHA_OVER_SIGMA = 1e100

def register(subparsers) -> None:
    paper = modes.PAPER_PROTOCOL
    p = subparsers.add_parser(
        "modes",
        help="reverse-KL fit of one Gaussian to a two-mode mixture: interpolation threshold α*",
        description=(
            "Fit q = N(μ, Σ) to p_α = ½N(0, σ²I) + ½N(α e₁, σ²I) by reverse KL from the first "
            "component, for α on linspace(0, alpha-max, points). Reports α⁻¹‖μ*‖, det Σ*, the final "
            "KL and the threshold α* where q stops sitting between the modes."
        ),
    )
    p.add_argument("--sigma", type=cli.positive_float, required=True, help="std dev σ of each component")
    p.add_argument("--alpha-max", type=cli.positive_float, default=None,
                   help="largest mode distance α of the sweep (default: max(10, 10σ))")
    p.add_argument("--points", type=cli.int_at_least(2), default=paper["points"], help="α values in the sweep")
    p.add_argument("--protocol", choices=("exact", "mc"), default="exact",
                   help="exact: noise-free quadrature (fast); mc: the paper's Monte-Carlo protocol with Adam")
    p.add_argument("--dim", type=cli.int_at_least(1), default=2, help="dimension d of the target")
    mc = p.add_argument_group("Monte-Carlo protocol (--protocol mc)")
    mc.add_argument("--covariance", choices=("diag", "full"), default="diag")
    mc.add_argument("--samples", type=cli.int_at_least(1), default=paper["samples"])
    mc.add_argument("--steps", type=cli.int_at_least(1), default=paper["steps"])
    mc.add_argument("--lr", type=cli.positive_float, default=paper["lr"])
    mc.add_argument("--seed", type=cli.int_at_least(0), default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(run=_run_modes, format=_format_modes)

def _run_modes(args) -> dict:
    alpha_max = args.alpha_max if args.alpha_max is not None else max(10.0, 10.0 * args.sigma)
    if not alpha_max / args.sigma <= _MAX_ALPHA_OVER_SIGMA:
        raise ValueError(f"the sweep's largest α/σ is {alpha_max / args.sigma:g}; it must be <= "
                         f"{_MAX_ALPHA_OVER_SIGMA:g} (choose a larger --sigma or a smaller --alpha-max)")
    if args.protocol != "mc":
        return modes.sweep_report(args.sigma, alpha_max, args.points, "exact", args.dim)

    def progress(step, steps):
        print(f"  Adam step {step}/{steps}", file=sys.stderr, flush=True)

    return modes.sweep_report(args.sigma, alpha_max, args.points, "mc", args.dim, progress=progress,
                              covariance=args.covariance, samples=args.samples, steps=args.steps,
                              lr=args.lr, seed=args.seed)

def _format_modes(report: dict) -> str:
    lines = [f"Reverse-KL fit, σ = {report['sigma']:g}, d = {report['dim']}, protocol {report['protocol']}",
             f"{'alpha':>8} {'alpha^-1|mu*|':>14} {'det Sigma*':>12} {'KL(q||p)':>10}"]
    for alpha, interp, det, kl in zip(report["alphas"], report["interpolation"], report["det_cov"], report["kl"]):
        interp_text = "undefined" if interp is None else f"{interp:.4f}"
        lines.append(f"{alpha:8.3f} {interp_text:>14} {det:12.5g} {kl:10.5f}")
    threshold = report["threshold"]
    if threshold is None:
        lines.append("threshold α*: not reached in this sweep (q interpolates throughout); raise --alpha-max")
    else:
        lines.append(f"threshold α* = {threshold:.4f}  (α*/σ = {report['threshold_over_sigma']:.3f}; ln 2 = {modes.LN2:.4f})")
    return "\n".join(lines)
