"""The toy lab on the command line: ``python -m symlab toy ...``."""

from __future__ import annotations

import argparse
import sys

from symlab import cli
from symlab.labs.toy import experiment as toy


def register(subparsers) -> None:
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
    p.add_argument("--K", type=cli.int_at_least(2), default=defaults.K, help="InfoNCE K")
    p.add_argument("--seed", type=cli.int_at_least(0), default=defaults.seed)
    p.add_argument("--noise", type=cli.positive_float, default=defaults.noise, help="noise std dev")
    p.add_argument("--n-train", type=cli.int_at_least(1), default=defaults.n_train)
    p.add_argument("--n-test", type=cli.int_at_least(1), default=defaults.n_test)
    p.add_argument("--prior-scale", type=cli.positive_float, default=defaults.prior_scale)
    p.add_argument("--lr", type=cli.positive_float, default=defaults.lr)
    p.add_argument("--batch-size", type=cli.int_at_least(1), default=defaults.batch_size)
    p.add_argument("--samples", type=cli.int_at_least(1), default=defaults.samples, help="MC samples per step")
    p.add_argument("--init", choices=toy.INITS, default=defaults.init)
    p.add_argument("--steps", type=cli.int_at_least(0), default=toy.DEFAULT_STEPS)
    p.add_argument("--table", action="store_true", help="MFVI vs SGM over --alphas and --seeds")
    p.add_argument("--alphas", type=cli.float_list, default=list(toy.DEFAULT_TABLE_ALPHAS),
                   help="comma-separated α values for --table")
    p.add_argument("--seeds", type=cli.int_at_least(1), default=5, help="seeds per α for --table")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_run_toy, format=_format_toy)

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
        if len(args.alphas) * args.seeds > cli.MAX_RUNS:
            raise ValueError(f"a table of {len(args.alphas)} α values × {args.seeds} seeds is too large: "
                             f"at most {cli.MAX_RUNS} settings")
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
                         f"{cli.pm(row['test_mse_mean'], row['test_mse_std'], 4):>18} "
                         f"{cli.pm(row['elbo_mean'], row['elbo_std'], 3):>20} {row['log_evidence_mean']:9.3f}")
        lines.append("SGM − MFVI on the same seeds (mean ± std):")
        for row in report["table"]:
            if row["method"] == "sgm":
                lines.append(f"{row['alpha']:6.3g}  ELBO {cli.pm(row['elbo_gain_mean'], row['elbo_gain_std'], 3)}"
                             f" (higher on {row['seeds_higher_elbo']}/{row['seeds']} seeds)   test MSE "
                             f"{cli.pm(row['test_mse_change_mean'], row['test_mse_change_std'], 4)}"
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

def _num(value):
    return "nan" if value is None else f"{value:.4f}"
