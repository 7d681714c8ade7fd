"""The toy lab on the command line: ``python -m symlab toy ...``."""

from __future__ import annotations

import sys

from symlab.cli import common
from symlab.labs.toy import params
from symlab.labs.toy.config import DEFAULT_STEPS, DEFAULT_TABLE_ALPHAS, ToyConfig
from symlab.lib.options import TWO_RELU_METHODS
from symlab.specs import controls
from symlab.specs.hmc import HmcConfig
from symlab.specs.results import to_json

# Every declared field but the input distribution, which stays uniform on [−2, 2] as in the paper.
FLAGS = (
    "alpha",
    "noise",
    "n_train",
    "n_test",
    "prior_scale",
    "lr",
    "batch_size",
    "samples",
    "K",
    "mi",
    "init",
    "restarts",
    "seed",
)
# What to do about a fit stuck on one side: starts from the origin differ only in their Monte-Carlo noise.
REMEDIES = {
    "random": "use another --seed or raise --restarts",
    "origin": "use another --seed or --init random (starts from the origin differ only in their noise)",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "toy",
        help="tractable BNN ReLU(w1 x) + ReLU(w2 x): exact posterior vs MFVI vs SGM",
        description=(
            "Train mean-field VI (mfvi) or its symmetrised version (sgm: ELBO + I over G = {id, swap}) "
            "on y = α|x| + ε and compare with the exact grid posterior. Each method trains from --restarts "
            "seeded initialisations at once and keeps the one with the highest own bound; a fit that ends "
            "with both units on one side (a local optimum, not the symmetry) is named. With --table, train "
            "MFVI and SGM for every α and seed together and print Tables 2-3 (test MSE, ELBO; mean ± std)."
        ),
    )
    p.add_argument(
        "--method",
        choices=TWO_RELU_METHODS,
        default="mfvi",
        help="mfvi, or sgm: its symmetrised version (one fit; --table trains both)",
    )
    controls.add_flags(p, ToyConfig, FLAGS)
    p.add_argument("--steps", type=common.int_at_least(0), default=DEFAULT_STEPS, help="Adam steps of each run")
    p.add_argument("--table", action="store_true", help="MFVI vs SGM over --alphas and --seeds")
    p.add_argument(
        "--alphas",
        type=controls.list_parser(params.ALPHA, params.ALPHAS.max_items),
        default=list(DEFAULT_TABLE_ALPHAS),
        help=f"comma-separated α values for --table (at most {params.ALPHAS.max_items}, each "
        f"{controls.parsed_range(params.ALPHA).describe_range()})",
    )
    seeds = controls.Control("int", low=params.SEEDS.low, high=params.SEEDS.high)
    p.add_argument(
        "--seeds",
        type=controls.number_parser(seeds),
        default=params.SEEDS.default,
        help=f"seeds per α for --table ({seeds.describe_range()})",
    )
    p.add_argument(
        "--hmc",
        action="store_true",
        help="also sample the posterior by full-batch HMC and report its estimates beside the exact ones, with "
        "their Monte-Carlo errors and the chains' diagnostics (R-hat raw and with the units sorted)",
    )
    controls.add_flags(p, HmcConfig)
    p.add_argument(
        "--surface",
        action="store_true",
        help="also write the page's 3-D landscape: the exact log posterior on its grid over (w1, w2), the fit's "
        "1 and 2 sd outlines and the modes on it, and the fit's log q on the same grid (JSON key surface)",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_run_toy, format=_format_toy)


def _run_toy(args) -> dict:
    from symlab.labs.toy import experiment as toy  # torch: loaded when a computation runs, not to parse
    from symlab.lib import two_relu

    config = controls.from_args(ToyConfig, args, FLAGS)

    def progress(done, steps):
        if not args.json:
            print(f"  step {done}/{steps}", file=sys.stderr, flush=True)

    if args.table and (args.hmc or args.surface):
        raise ValueError(f"{'--hmc' if args.hmc else '--surface'} is of one data set's posterior: leave out --table")
    if args.table:
        rows = toy.paper_table(args.alphas, args.seeds, args.steps, config, progress=progress)
        return {"table": rows, "steps": args.steps, "config": to_json(config)}
    trainer = two_relu.train_runs(toy.starts_of(args.method, config), args.steps, progress=progress)
    metrics = trainer.evaluate()
    exact = toy.exact_answer(trainer.data[0], config)
    fit = toy.fits(trainer, metrics["objective"], {config: exact})[0]
    report = toy.fit_summary(trainer, metrics, fit, exact, REMEDIES[config.init])
    if args.hmc:
        report.update(toy.hmc_estimates(trainer.data[0], config, controls.from_args(HmcConfig, args)))
    if args.surface:
        report["surface"] = _surface(config, trainer, fit)
    return report


def _surface(config, trainer, fit) -> dict:
    """The page's landscape for this fit: :func:`symlab.specs.surfaces.to_json`, and ``log_q`` on its grid."""
    from symlab.labs.toy import experiment as toy  # torch: loaded when a computation runs, not to parse
    from symlab.specs import surfaces

    means, stds = trainer.parameters()
    display = toy.exact_view(config)[2]
    surface, grids = toy.posterior_landscape(config, display, {fit.method: (means[fit.row], stds[fit.row])})
    return {**surfaces.to_json(surface), "log_q": to_json(grids[fit.method])}


def _format_toy(report: dict) -> str:
    if "table" in report:
        return _format_table(report)
    lines = [
        f"{report['method']} on α = {report['config']['alpha']:g}, {report['steps']} steps, "
        f"best of {_starts(report['restarts'])} (start {report['start']}: {report['outcome']})"
        + ("  (DIVERGED: NaN parameters)" if report["diverged"] else ""),
        f"  mu = ({_nums(report['mu'], 3)}), sigma = ({_nums(report['sigma'], 3)})",
        f"  ELBO (method's bound) {_num(report['elbo'])}   ELBO(θ) {_num(report['elbo_mf'])}   "
        f"I {_num(report['mutual_information'])}   log p(D) {report['log_evidence']:.4f}",
        f"  test MSE {_num(report['test_mse'])}   exact posterior's {report['exact_test_mse']:.4f}",
    ]
    if report["notice"]:
        lines.append(f"  NOTE: {report['notice']}")
    lines.append(f"  starts ({report['stuck_starts']} of {report['restarts']} stuck on one side):")
    lines += [
        f"    {s['start']:>2}  bound {_num(s['elbo'])}  test MSE {_num(s['test_mse'])}  mu ({_nums(s['mu'], 2)})  "
        f"{s['outcome']}"
        for s in report["starts"]
    ]
    if "hmc" in report:
        lines += _format_hmc(report)
    if "surface" in report:
        lines.append(f"  {common.landscape_summary(report['surface'])}")
    return "\n".join(lines)


def _format_hmc(report: dict) -> list[str]:
    run = report["hmc"]

    def beside(name: str, label: str, digits: int) -> str:
        return (
            f"    {label:<22} {common.pm(report['hmc_' + name], report['hmc_' + name + '_se'], digits):>18}"
            f"   exact {report['exact_' + name]:.{digits}f}"
        )

    return [
        f"  HMC: {run['chains']} chains x {run['samples']} draws after {run['warmup']} warm-up, "
        f"tau {run['trajectory_length']:g}, {run['seconds']:.1f} s (estimate ± Monte-Carlo error):",
        beside("abs_w1", "E|w1|", 4),
        beside("opposite_sides", "P(w1 w2 < 0)", 4),
        beside("test_mse", "test MSE", 4),
        f"    R-hat raw {run['rhat_raw']:.3f}, units sorted {run['rhat_canonical']:.3f};  "
        f"ESS raw {run['ess_raw']:.0f}, sorted {run['ess_canonical']:.0f};  "
        f"acceptance {min(run['acceptance']):.2f}-{max(run['acceptance']):.2f} (target {run['target_accept']:g});  "
        f"divergences {run['divergences']};  "
        f"mode hops per chain {min(run['mode_hops'])}-{max(run['mode_hops'])}",
    ]


def _format_table(report: dict) -> str:
    restarts = report["config"]["restarts"]
    lines = [
        f"MFVI vs SGM after {report['steps']} steps, each seed's fit the best of {_starts(restarts)} "
        "(mean ± std over seeds); ELBO: MFVI's ELBO, SGM's ELBO + I; exact: the posterior's",
        f"{'alpha':>6} {'method':>6} {'test MSE':>18} {'exact MSE':>9} {'ELBO':>20} {'log p(D)':>9} "
        f"{'stuck fits':>10} {'stuck starts':>12}",
    ]
    for row in report["table"]:
        lines.append(
            f"{row['alpha']:6.3g} {row['method']:>6} "
            f"{common.pm(row['test_mse_mean'], row['test_mse_std'], 4):>18} {row['exact_test_mse_mean']:9.4f} "
            f"{common.pm(row['elbo_mean'], row['elbo_std'], 3):>20} {row['log_evidence_mean']:9.3f} "
            f"{row['stuck_fits']:>4} / {row['seeds']:<3} {row['stuck_starts']:>5} / {row['seeds'] * restarts:<4}"
        )
    lines.append("SGM − MFVI on the same seeds (mean ± std):")
    for row in report["table"]:
        if row["method"] == "sgm":
            lines.append(
                f"{row['alpha']:6.3g}  ELBO {common.pm(row['elbo_gain_mean'], row['elbo_gain_std'], 3)}"
                f" (higher on {row['seeds_higher_elbo']}/{row['seeds']} seeds)   test MSE "
                f"{common.pm(row['test_mse_change_mean'], row['test_mse_change_std'], 4)}"
                f" (lower on {row['seeds_lower_test_mse']}/{row['seeds']} seeds)"
            )
    return "\n".join(lines)


def _starts(count: int) -> str:
    return f"{count} start" + ("s" if count != 1 else "")


def _nums(values, digits: int) -> str:
    return ", ".join("nan" if v is None else f"{v:.{digits}f}" for v in values)


def _num(value):
    return "nan" if value is None else f"{value:.4f}"
