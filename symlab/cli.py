"""The headless twin of the app: ``python -m symlab <lab> ... [--json]``."""

from __future__ import annotations

import argparse
import json
import math
import sys

from . import modes, toy


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return value


def _int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r} must be >= {minimum}")
        return value

    return parse


def _add_modes(subparsers) -> None:
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
    p.add_argument("--sigma", type=_positive_float, required=True, help="std dev σ of each component")
    p.add_argument("--alpha-max", type=_positive_float, default=None,
                   help="largest mode distance α of the sweep (default: max(10, 10σ))")
    p.add_argument("--points", type=_int_at_least(2), default=paper["points"], help="α values in the sweep")
    p.add_argument("--protocol", choices=("exact", "mc"), default="exact",
                   help="exact: noise-free quadrature (fast); mc: the paper's Monte-Carlo protocol with Adam")
    p.add_argument("--dim", type=_int_at_least(1), default=2, help="dimension d of the target")
    mc = p.add_argument_group("Monte-Carlo protocol (--protocol mc)")
    mc.add_argument("--covariance", choices=("diag", "full"), default="diag")
    mc.add_argument("--samples", type=_int_at_least(1), default=paper["samples"])
    mc.add_argument("--steps", type=_int_at_least(1), default=paper["steps"])
    mc.add_argument("--lr", type=_positive_float, default=paper["lr"])
    mc.add_argument("--seed", type=_int_at_least(0), default=0)
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(run=_run_modes)


def _run_modes(args) -> dict:
    alpha_max = args.alpha_max if args.alpha_max is not None else max(10.0, 10.0 * args.sigma)
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


def _float_list(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers") from None
    if not values or not all(math.isfinite(v) and v >= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r} needs one or more finite numbers >= 0")
    return values


def _add_toy(subparsers) -> None:
    defaults = toy.ToyConfig()
    p = subparsers.add_parser(
        "toy",
        help="tractable BNN ReLU(w1 x) + ReLU(w2 x): exact posterior vs MFVI vs SGM",
        description=(
            "Train mean-field VI (mfvi) or its symmetrised version (sgm: ELBO + I over G = {id, swap}) "
            "on y = α|x| + ε and compare with the exact grid posterior. With --table, train MFVI and "
            "SGM for every α and seed together and print Tables 2-3 (test MSE, ELBO; mean ± std)."
        ),
    )
    p.add_argument("--alpha", type=float, default=defaults.alpha, help="slope α of the true function")
    p.add_argument("--method", choices=toy.METHODS, default="mfvi")
    p.add_argument("--mi", choices=toy.MI_ESTIMATORS, default=defaults.mi,
                   help="SGM's mutual information: exact (G enumerated) or infonce (I_K)")
    p.add_argument("--K", type=_int_at_least(2), default=defaults.K, help="InfoNCE K")
    p.add_argument("--seed", type=_int_at_least(0), default=defaults.seed)
    p.add_argument("--noise", type=_positive_float, default=defaults.noise, help="noise std dev")
    p.add_argument("--n-train", type=_int_at_least(1), default=defaults.n_train)
    p.add_argument("--n-test", type=_int_at_least(1), default=defaults.n_test)
    p.add_argument("--prior-scale", type=_positive_float, default=defaults.prior_scale)
    p.add_argument("--lr", type=_positive_float, default=defaults.lr)
    p.add_argument("--batch-size", type=_int_at_least(1), default=defaults.batch_size)
    p.add_argument("--samples", type=_int_at_least(1), default=defaults.samples, help="MC samples per step")
    p.add_argument("--init", choices=toy.INITS, default=defaults.init)
    p.add_argument("--steps", type=_int_at_least(0), default=toy.DEFAULT_STEPS)
    p.add_argument("--table", action="store_true", help="MFVI vs SGM over --alphas and --seeds")
    p.add_argument("--alphas", type=_float_list, default=list(toy.DEFAULT_TABLE_ALPHAS),
                   help="comma-separated α values for --table")
    p.add_argument("--seeds", type=_int_at_least(1), default=5, help="seeds per α for --table")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_run_toy)


def _toy_config(args) -> toy.ToyConfig:
    return toy.ToyConfig(alpha=args.alpha, noise=args.noise, n_train=args.n_train, n_test=args.n_test,
                         prior_scale=args.prior_scale, lr=args.lr, batch_size=args.batch_size,
                         samples=args.samples, K=args.K, mi=args.mi, init=args.init, seed=args.seed).validate()


def _run_toy(args) -> dict:
    config = _toy_config(args)

    def progress(done, steps):
        if not args.json:
            print(f"  step {done}/{steps}", file=sys.stderr, flush=True)

    if args.table:
        rows = toy.paper_table(args.alphas, args.seeds, args.steps, config, progress=progress)
        return {"table": rows, "steps": args.steps, "config": toy.asdict(config)}
    trainer = toy.train_runs([toy.RunSpec(args.method, config)], args.steps, progress=progress)
    posterior = toy.exact_posterior(trainer.data[0], config.noise, config.prior_scale)
    return toy.run_summary(trainer, 0, posterior)


def _format_toy(report: dict) -> str:
    if "table" in report:
        lines = [f"MFVI vs SGM after {report['steps']} steps (mean ± std over seeds); "
                 "ELBO: MFVI's ELBO, SGM's ELBO + I",
                 f"{'alpha':>6} {'method':>6} {'test MSE':>18} {'ELBO':>20} {'log p(D)':>9}"]
        for row in report["table"]:
            lines.append(f"{row['alpha']:6.3g} {row['method']:>6} "
                         f"{_pm(row['test_mse_mean'], row['test_mse_std'], 4):>18} "
                         f"{_pm(row['elbo_mean'], row['elbo_std'], 3):>20} {row['log_evidence_mean']:9.3f}")
        lines.append("SGM − MFVI on the same seeds (mean ± std):")
        for row in report["table"]:
            if row["method"] == "sgm":
                lines.append(f"{row['alpha']:6.3g}  ELBO {_pm(row['elbo_gain_mean'], row['elbo_gain_std'], 3)}"
                             f" (higher on {row['seeds_higher_elbo']}/{row['seeds']} seeds)   test MSE "
                             f"{_pm(row['test_mse_change_mean'], row['test_mse_change_std'], 4)}"
                             f" (lower on {row['seeds_lower_test_mse']}/{row['seeds']} seeds)")
        return "\n".join(lines)
    mu = ", ".join("nan" if v is None else f"{v:.3f}" for v in report["mu"])
    sd = ", ".join("nan" if v is None else f"{v:.3f}" for v in report["sigma"])
    lines = [f"{report['method']} on α = {report['config']['alpha']:g}, {report['steps']} steps"
             + ("  (DIVERGED: NaN parameters)" if report["diverged"] else ""),
             f"  mu = ({mu}), sigma = ({sd})",
             f"  ELBO (method's bound) {_num(report['elbo'])}   ELBO(θ) {_num(report['elbo_mf'])}   "
             f"I {_num(report['mutual_information'])}",
             f"  log evidence {report['log_evidence']:.4f}   test MSE {_num(report['test_mse'])}"]
    return "\n".join(lines)


def _pm(mean, std, digits):
    return "nan" if mean is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _num(value):
    return "nan" if value is None else f"{value:.4f}"


_FORMATTERS = {"modes": _format_modes, "toy": _format_toy}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m symlab",
        description="SymLab labs without the browser. Each lab prints a table, or JSON with --json.",
    )
    subparsers = parser.add_subparsers(dest="lab", metavar="<lab>", title="labs")
    subparsers.required = True
    _add_modes(subparsers)
    _add_toy(subparsers)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result = args.run(args)
    except ValueError as error:
        parser.exit(2, f"{parser.prog} {args.lab}: error: {error}\n")
    if args.json:
        print(json.dumps(result, allow_nan=False))
    else:
        print(_FORMATTERS[args.lab](result))
    return 0
