"""The headless twin of the app: ``python -m symlab <lab> ... [--json]``."""

from __future__ import annotations

import argparse
import json
import math
import sys

from . import align_lab, modes, symmetry, symmetry_lab, toy
from .checks import public


# Larger whole numbers overflow the C integers of numpy, torch and SQLite (tracebacks, not messages),
# and no count or seed here needs them.
_MAX_INT = 2**31 - 1
# Work that a single command may ask for at once: α values × seeds of a toy table, runs of a sweep.
_MAX_RUNS = 10_000
# The modes fit squares α/σ: well before 1e154 it overflows into NaN results.
_MAX_ALPHA_OVER_SIGMA = 1e100


def _shown(text: str) -> str:
    """An argument as quoted in an error message: escaped, and cut short when long."""
    return repr(text if len(text) <= 40 else text[:40] + "…")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be a finite number > 0")
    return value


def _int_at_least(minimum: int, maximum: int = _MAX_INT):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{_shown(text)} must be >= {minimum}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{_shown(text)} must be <= {maximum}")
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


def _float_list(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a comma-separated list of numbers") from None
    if not values or not all(math.isfinite(v) and v >= 0 for v in values):
        raise argparse.ArgumentTypeError(f"{_shown(text)} needs one or more finite numbers >= 0")
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
        if len(args.alphas) * args.seeds > _MAX_RUNS:
            raise ValueError(f"a table of {len(args.alphas)} α values × {args.seeds} seeds is too large: "
                             f"at most {_MAX_RUNS} settings")
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


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a comma-separated list of whole numbers") from None
    if not values or min(values) < 1 or max(values) > _MAX_INT:
        raise argparse.ArgumentTypeError(f"{_shown(text)} needs one or more whole numbers in [1, {_MAX_INT}]")
    return values


def _add_mnist_options(p, *, sweep: bool) -> None:
    from .mnist import DEVICES, MAX_BLOCK_SIZE, METHODS, MI_ESTIMATORS, MnistConfig

    defaults = MnistConfig()
    if sweep:
        p.add_argument("--hidden", type=_int_list, default=[16, 64, 256, 1024],
                       help="comma-separated widths (default 16,64,256,1024)")
        p.add_argument("--methods", default="mfvi,sgm", help="comma-separated methods among mfvi,sgm")
        p.add_argument("--K", type=_int_list, default=[4, 16], help="SGM's K values, comma-separated")
        p.add_argument("--seeds", type=_int_at_least(1), default=3, help="seeds 0 .. N-1 for every setting")
    else:
        p.add_argument("--hidden", type=_int_at_least(1), default=defaults.hidden, help="units per hidden layer")
        p.add_argument("--method", choices=METHODS, default=defaults.method)
        p.add_argument("--K", type=_int_at_least(2), default=defaults.K,
                       help="SGM: InfoNCE terms (identity + K-1 random permutations)")
        p.add_argument("--seed", type=_int_at_least(0), default=defaults.seed)
        p.add_argument("--resume", type=_int_at_least(1), default=None, metavar="RUN_ID",
                       help="continue an interrupted, cancelled or failed run from its checkpoint")
    p.add_argument("--mi", choices=MI_ESTIMATORS, default=defaults.mi,
                   help="SGM's estimate of I: infonce (K random permutations, Thm 4.3) or blocks (exact I_H over "
                        "blocks of close units, a subgroup H of the permutations)")
    p.add_argument("--block-size", type=_int_at_least(2, MAX_BLOCK_SIZE), default=defaults.block_size,
                   help=f"SGM blocks: units per block, 2 to {MAX_BLOCK_SIZE} (H = product of S_B)")
    p.add_argument("--rebuild-every", type=_int_at_least(1), default=defaults.rebuild_every,
                   help="SGM blocks: steps between rebuilds of the blocks from the current posterior")
    p.add_argument("--depth", type=_int_at_least(1), default=defaults.depth, help="hidden layers")
    p.add_argument("--epochs", type=_int_at_least(1), default=defaults.epochs)
    p.add_argument("--batch-size", type=_int_at_least(1), default=defaults.batch_size)
    p.add_argument("--lr", type=_positive_float, default=defaults.lr, help="Adam learning rate")
    p.add_argument("--prior-scale", type=_positive_float, default=defaults.prior_scale,
                   help="std dev of the isotropic Gaussian prior")
    p.add_argument("--init-sd", type=_positive_float, default=defaults.init_sd,
                   help="initial posterior std dev of every weight")
    p.add_argument("--samples", type=_int_at_least(1), default=defaults.samples,
                   help="weight samples M averaged in test predictions")
    p.add_argument("--train-subset", type=_int_at_least(0), default=defaults.train_subset,
                   help="train on a seeded subset of N examples (0: all 60000)")
    p.add_argument("--device", choices=DEVICES, default=defaults.device,
                   help="auto: CUDA when torch finds a GPU, else CPU")
    p.add_argument("--data-dir", default=None,
                   help="directory with the four MNIST IDX .gz files "
                        "(default: $SYMLAB_MNIST_DIR, else the copy in assets/mnist)")
    p.add_argument("--runs-dir", default=None,
                   help="run registry and checkpoints (default: $SYMLAB_RUNS_DIR or ./runs), shared with the app")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_mnist(subparsers) -> None:
    p = subparsers.add_parser(
        "mnist", help="one MNIST run, MFVI or SGM, recorded in the run registry the app shows",
        description=("Train a Bayesian MLP on MNIST with mean-field VI (mfvi) or its symmetrised version "
                     "(sgm: ELBO + an estimate of I: InfoNCE Î_K over random permutations of the hidden units, "
                     "or the exact I_H of a subgroup H that permutes blocks of close units), in this process, and "
                     "report the final test accuracy, NLL, calibration error, ELBO, and per epoch how close q's "
                     "units are (nearest-unit Jeffreys divergence, units at the prior) with the block estimate of "
                     "I_H on q. "
                     "The run is registered like the app's runs; it does not wait in the app's queue."))
    _add_mnist_options(p, sweep=False)
    p.set_defaults(run=_run_mnist)
    s = subparsers.add_parser(
        "mnist-sweep", help="MFVI vs SGM across widths and seeds: the paper's Table 1",
        description=("Train every combination of width, method (and K for SGM) and seed one after the "
                     "other, each registered as a run, then print test accuracy (mean ± std over seeds) by "
                     "width and method."))
    _add_mnist_options(s, sweep=True)
    s.set_defaults(run=_run_mnist_sweep)
    d = subparsers.add_parser(
        "mnist-data", help="check the MNIST files, or download them into a directory",
        description=("Verify the four MNIST IDX files (content checksums) in --data-dir (default: "
                     "$SYMLAB_MNIST_DIR, else the copy shipped in assets/mnist); with --download, fetch missing "
                     "or damaged ones from the canonical mirrors, verified."))
    d.add_argument("--data-dir", default=None)
    d.add_argument("--download", action="store_true")
    d.add_argument("--json", action="store_true")
    d.set_defaults(run=_run_mnist_data)


def _mnist_config(args, **overrides):
    from .mnist import MnistConfig

    values = dict(mi=args.mi, block_size=args.block_size, rebuild_every=args.rebuild_every,
                  depth=args.depth, epochs=args.epochs, batch_size=args.batch_size, lr=args.lr,
                  prior_scale=args.prior_scale, init_sd=args.init_sd, samples=args.samples,
                  train_subset=args.train_subset, device=args.device)
    values.update(overrides)
    return MnistConfig(**values).validate()


def _train_registered(registry, config, quiet: bool, data_dir=None, resume_id=None) -> dict:
    """Train one run in this process (new, or resumed from its checkpoint); its summary."""
    import os

    from . import worker
    from .mnist import resolve_device
    from .runs import RESUMABLE, RUNNING

    if resume_id is None:
        run_id = registry.create(config, resolve_device(config.device).type, status=RUNNING, pid=os.getpid(),
                                 source="cli")
    else:
        try:
            run = registry.get(resume_id)
        except KeyError as error:
            raise ValueError(error.args[0]) from None
        if run.status not in RESUMABLE:
            raise ValueError(f"run #{resume_id} is {run.status}; only {', '.join(RESUMABLE)} runs can be resumed")
        run_id, config = resume_id, run.config
        registry.update(run_id, status=RUNNING, cancel_requested=0, finished=None, message="")
        registry.register_process(run_id, os.getpid())

    def echo(metrics):
        if not quiet:
            print(f"  run #{run_id} ({config.label}) epoch {metrics['epoch']}/{config.epochs}: "
                  f"test acc {metrics['test_acc']:.4f}, NLL {metrics['test_nll']:.4f}, "
                  f"ELBO {metrics['train_elbo']:.1f} ({metrics['seconds']:.1f} s)", file=sys.stderr, flush=True)

    final = worker.execute(registry, run_id, data_dir=data_dir, echo=echo)
    return _run_report(registry, final)


def _run_report(registry, run) -> dict:
    report = {"run_id": run.id, "status": run.status, "message": run.message, "device": run.device,
              "config": run.config.to_dict()}
    keys = ("epochs_done", "test_acc", "test_nll", "test_ece", "train_elbo", "train_elbo_sym", "mi_estimator",
            "mi_trained", "mutual_info", "log_group_size", "mi_active", "nearest_unit_kl_min",
            "nearest_unit_kl_median", "units_at_prior", "block_mi", "block_log_group_size", "block_mi_active",
            "sd_median", "train_seconds")
    report.update({key: (run.result or {}).get(key) for key in keys})
    report["history"] = registry.metrics([run.id])[run.id]
    return report


def _run_mnist(args) -> dict:
    config = _mnist_config(args, hidden=args.hidden, method=args.method, K=args.K, seed=args.seed)
    from .runs import Registry

    report = _train_registered(Registry(args.runs_dir), config, args.json, args.data_dir, resume_id=args.resume)
    if report["status"] != "finished":
        raise RuntimeError(f"run #{report['run_id']} {report['status']}: {report['message']}", report)
    return report


def _run_mnist_sweep(args) -> dict:
    from .runs import Registry, results_table

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - {"mfvi", "sgm"})
    if unknown or not methods:
        raise ValueError(f"--methods takes mfvi and/or sgm (got {_shown(args.methods)})")
    variants = [("mfvi", None)] * ("mfvi" in methods) + [("sgm", K) for K in args.K if "sgm" in methods]
    count = len(args.hidden) * len(variants) * args.seeds
    if count > _MAX_RUNS:
        raise ValueError(f"the sweep would train {count} runs; at most {_MAX_RUNS} at once")
    configs = [_mnist_config(args, hidden=hidden, method=method, seed=seed, **({"K": K} if K else {}))
               for hidden in args.hidden for method, K in variants for seed in range(args.seeds)]
    registry = Registry(args.runs_dir)
    reports = []
    for number, config in enumerate(configs, 1):
        if not args.json:
            print(f"[{number}/{len(configs)}] {config.label}", file=sys.stderr, flush=True)
        reports.append(_train_registered(registry, config, args.json, args.data_dir))
    runs = [registry.get(report["run_id"]) for report in reports]
    return {"runs": [{k: v for k, v in r.items() if k != "history"} for r in reports],
            "table": results_table(runs)}


def _run_mnist_data(args) -> dict:
    from . import mnist_data

    directory = args.data_dir
    if args.download and not directory:
        raise ValueError("--download needs --data-dir (the shipped copy is not overwritten)")
    downloaded = mnist_data.download_mnist(directory) if args.download else []
    problems = mnist_data.check_mnist(directory)
    return {"directory": str(mnist_data.SHIPPED_DIR if directory is None else directory),
            "ok": not problems, "problems": problems, "downloaded": downloaded}


def _format_mnist(report: dict) -> str:
    estimator = (f"I estimated by {report['mi_estimator']} ("
                 + ("trained on" if report["mi_trained"] else "measured on q, not trained on") + ")"
                 if report.get("mi_estimator") else "")
    lines = [f"run #{report['run_id']}: {report['status']} on {report['device']}"
             + (f" ({report['message']})" if report["message"] else ""),
             estimator,
             f"{'epoch':>5} {'test acc':>9} {'NLL':>7} {'ECE':>7} {'train ELBO':>13} {'ELBO + Î':>13} "
             f"{'J min':>9} {'J median':>9} {'prior':>5} {'I_H':>8} {'log|H|':>8} {'s':>6}"]
    for m in report["history"]:
        sym = "" if m["train_elbo_sym"] is None else f"{m['train_elbo_sym']:.1f}"
        lines.append(f"{m['epoch']:5d} {m['test_acc']:9.4f} {m['test_nll']:7.4f} {m['test_ece']:7.4f} "
                     f"{m['train_elbo']:13.1f} {sym:>13} {_number(m.get('nearest_unit_kl_min')):>9} "
                     f"{_number(m.get('nearest_unit_kl_median')):>9} {_number(m.get('units_at_prior')):>5} "
                     f"{_number(m.get('block_mi')):>8} {_number(m.get('block_log_group_size')):>8} "
                     f"{m['seconds']:6.1f}")
    lines.append("J: Jeffreys divergence (nats) from a unit's factor of q to its nearest other unit's; prior: units "
                 "at the prior; I_H: block estimate of the mutual information on q, at most log|H|.")
    return "\n".join(line for line in lines if line)


def _number(value) -> str:
    return "—" if value is None else f"{value:.4g}"


def _format_mnist_sweep(report: dict) -> str:
    lines = ["Test accuracy by width and method (mean ± std over seeds)"]
    for setting in dict.fromkeys(row["setting"] for row in report["table"]):
        lines.append(f"  {setting}")
        lines.append(f"  {'width':>6} {'method':>10} {'seeds':>5} {'test acc':>17} {'NLL':>8} {'ECE':>8} {'train ELBO':>12}")
        for row in (r for r in report["table"] if r["setting"] == setting):
            lines.append(f"  {row['hidden']:6d} {row['label']:>10} {row['seeds']:5d} "
                         f"{_pm(row['test_acc_mean'], row['test_acc_std'], 4):>17} {row['test_nll_mean']:8.4f} "
                         f"{row['test_ece_mean']:8.4f} {row['train_elbo_mean']:12.1f}")
    failed = [r for r in report["runs"] if r["status"] != "finished"]
    for r in failed:
        lines.append(f"run #{r['run_id']} {r['status']}: {r['message']}")
    return "\n".join(lines)


def _format_mnist_data(report: dict) -> str:
    lines = [f"MNIST in {report['directory']}: " + ("all four files verified" if report["ok"] else "problems:")]
    lines += [f"  downloaded {name}" for name in report["downloaded"]]
    lines += [f"  {problem}" for problem in report["problems"]]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Symmetry explorer
# ---------------------------------------------------------------------------------------------

def _width_list(text: str) -> list[int]:
    values = _int_list(text)
    if min(values) < 2 or max(values) > 16_384:
        raise argparse.ArgumentTypeError(f"{_shown(text)}: widths must be in [2, 16384]")
    return values


def _add_perceptron_options(p) -> None:
    defaults = symmetry_lab.PerceptronConfig()
    p.add_argument("--nets", type=_int_at_least(10, 100_000), default=defaults.nets, help="perceptrons trained at once")
    p.add_argument("--epochs", type=_int_at_least(1, 100), default=defaults.epochs)
    p.add_argument("--lr", type=_positive_float, default=defaults.lr, help="SGD learning rate")
    p.add_argument("--separation", type=_positive_float, default=defaults.separation,
                   help="class means at ±(s, s)")
    p.add_argument("--seed", type=_int_at_least(0), default=defaults.seed)


def _add_mlp_options(p, steps: int) -> None:
    defaults = symmetry_lab.MlpConfig()
    p.add_argument("--width", type=_int_at_least(2, 1024), default=defaults.width, help="hidden units per layer")
    p.add_argument("--depth", type=_int_at_least(1, 3), default=defaults.depth, help="hidden layers")
    p.add_argument("--instances", type=_int_at_least(1, 64), default=defaults.instances, help="MLPs trained at once")
    p.add_argument("--steps", type=_int_at_least(1, 20_000), default=steps, help="SGD steps")
    p.add_argument("--lr", type=_positive_float, default=defaults.lr)
    p.add_argument("--schedule", choices=symmetry_lab.SCHEDULES, default=defaults.schedule,
                   help="linear: the learning rate decays to 0 at the last step")
    p.add_argument("--batch-size", type=_int_at_least(1, 4096), default=defaults.batch)
    p.add_argument("--sort-key", choices=symmetry.SORT_KEYS, default=defaults.sort_key,
                   help="what hidden units are sorted by: first_in (weight from input 0), max_in, first_out")
    p.add_argument("--seed", type=_int_at_least(0), default=defaults.seed)
    p.add_argument("--data-dir", default=None, help="MNIST directory (default: the copy shipped in assets/mnist)")


def _add_symmetry(subparsers) -> None:
    p = subparsers.add_parser(
        "symmetry", help="symmetry explorer: removal, min-mass, mode proximity, MMD, permutations in training",
        description="The posterior modulo its symmetries (Laurent et al. 2024) and how close equivalent modes "
                    "are (Gelberg et al. 2024, Thm 3.1). Pick a part:")
    parts = p.add_subparsers(dest="part", metavar="<part>", title="parts")
    parts.required = True

    q = parts.add_parser("perceptrons", help="Laurent's Fig. 1: 2-2-1 perceptrons, last-layer weights raw, "
                         "after scaling and after permutation removal",
                         description="Train many 2-2-1 ReLU perceptrons on two separable Gaussian blobs (SGD, BCE, "
                                     "batch 10) and report the density peaks of their output weights raw, after "
                                     "scaling removal and after permutation removal, plus min-mass.")
    _add_perceptron_options(q)
    q.set_defaults(run=_run_perceptrons)

    q = parts.add_parser("mass", help="mass before and after the min-mass problem: perceptrons and MNIST MLPs",
                         description="Solve the min-mass problem (minimum L2 mass over ReLU rescalings, convex in "
                                     "log-scales) for trained 2-2-1 perceptrons and MLPs trained on MNIST.")
    _add_perceptron_options(q)
    q.add_argument("--mlp-width", type=_int_at_least(2, 1024), default=64)
    q.add_argument("--mlp-depth", type=_int_at_least(1, 3), default=2)
    q.add_argument("--mlp-steps", type=_int_at_least(1, 20_000), default=500)
    q.add_argument("--data-dir", default=None, help="MNIST directory (default: the copy shipped in assets/mnist)")
    q.set_defaults(run=_run_mass)

    q = parts.add_parser("proximity", help="distance to the nearest equivalent mode vs width, against Thm 3.1",
                         description="For one-hidden-layer MLPs of each width, the distance from w to its nearest "
                                     "permuted copy relative to ||w||, and Gelberg's bound 2D / log n!.")
    defaults = symmetry_lab.ProximityConfig()
    q.add_argument("--widths", type=_width_list, default=list(defaults.widths), help="comma-separated widths")
    q.add_argument("--d-in", type=_int_at_least(1, 64), default=defaults.d_in)
    q.add_argument("--d-out", type=_int_at_least(1, 16), default=defaults.d_out)
    q.add_argument("--weights", choices=symmetry_lab.PROXIMITY_WEIGHTS, default=defaults.weights,
                   help="random: PyTorch's initialisation; trained: Adam on a random teacher network")
    q.add_argument("--steps", type=_int_at_least(1, 10_000), default=defaults.steps, help="Adam steps (trained)")
    q.add_argument("--seed", type=_int_at_least(0), default=defaults.seed)
    q.set_defaults(run=_run_proximity)

    q = parts.add_parser("quality", help="MMD of MFVI, SGM and a deep ensemble to the exact posterior of the "
                         "tractable BNN, with and without symmetry removal",
                         description="Samples of MFVI, SGM (q_G) and a deep ensemble (MAP fits) against samples of "
                                     "the exact posterior of ReLU(w1 x) + ReLU(w2 x): median MMD² over 10 Gaussian "
                                     "and 10 Laplace kernels, raw and with the units sorted.")
    toy_defaults = toy.ToyConfig()
    quality_defaults = symmetry_lab.QualityConfig()
    q.add_argument("--alpha", type=float, default=toy_defaults.alpha, help="slope α of the true function")
    q.add_argument("--noise", type=_positive_float, default=toy_defaults.noise)
    q.add_argument("--n-train", type=_int_at_least(1, 100_000), default=toy_defaults.n_train)
    q.add_argument("--samples", type=_int_at_least(10, 5000), default=quality_defaults.samples,
                   help="samples per method")
    q.add_argument("--members", type=_int_at_least(2, 5000), default=quality_defaults.members,
                   help="deep-ensemble members")
    q.add_argument("--steps", type=_int_at_least(1, 20_000), default=quality_defaults.steps,
                   help="Adam steps for MFVI and SGM")
    q.add_argument("--seed", type=_int_at_least(0), default=toy_defaults.seed)
    q.set_defaults(run=_run_quality)

    q = parts.add_parser("training", help="do networks permute while they train? Kendall's τ between successive "
                         "sorting permutations (MNIST MLPs)",
                         description="Train MLPs on MNIST with SGD; after every step sort each hidden layer's units "
                                     "and measure Kendall's τ against the previous step's order (1: no change).")
    _add_mlp_options(q, symmetry_lab.MlpConfig().steps)
    q.set_defaults(run=_run_training)
    for sub in parts.choices.values():
        sub.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _stderr_progress(args, what: str = ""):
    def progress(done, total, stage=what):
        if not args.json:
            print(f"  {stage} {done}/{total}", file=sys.stderr, flush=True)

    return progress


def _perceptron_config(args) -> symmetry_lab.PerceptronConfig:
    return symmetry_lab.PerceptronConfig(nets=args.nets, epochs=args.epochs, lr=args.lr, separation=args.separation,
                                         seed=args.seed).validate()


def _run_perceptrons(args) -> dict:
    run = symmetry_lab.train_perceptrons(_perceptron_config(args), _stderr_progress(args, "epoch"))
    return public(symmetry_lab.perceptron_report(run))


def _load_mnist(directory):
    from .mnist_data import load_mnist

    return load_mnist(directory)


def _run_mass(args) -> dict:
    config = symmetry_lab.MlpConfig(width=args.mlp_width, depth=args.mlp_depth, steps=args.mlp_steps, seed=args.seed)
    mnist = _load_mnist(args.data_dir)  # a bad --data-dir fails before any training
    perceptrons = symmetry_lab.train_perceptrons(_perceptron_config(args), _stderr_progress(args, "epoch"))
    mlps = symmetry_lab.train_mlps(config, mnist, _stderr_progress(args, "MLP step"))
    return {"perceptrons": public(symmetry_lab.mass_report(perceptrons.epoch_layers(args.epochs))),
            "mlps": {"config": symmetry_lab.asdict(config), **public(symmetry_lab.mass_report(mlps.layers))}}


def _run_proximity(args) -> dict:
    config = symmetry_lab.ProximityConfig(widths=tuple(args.widths), d_in=args.d_in, d_out=args.d_out,
                                          weights=args.weights, steps=args.steps, seed=args.seed)
    return {"config": symmetry_lab.asdict(config),
            "rows": symmetry_lab.mode_proximity(config, _stderr_progress(args, "width"))}


def _run_quality(args) -> dict:
    config = symmetry_lab.QualityConfig(
        toy=toy.ToyConfig(alpha=args.alpha, noise=args.noise, n_train=args.n_train, seed=args.seed),
        samples=args.samples, members=args.members, steps=args.steps)
    return public(symmetry_lab.posterior_quality(config, _stderr_progress(args)))


def _run_training(args) -> dict:
    config = symmetry_lab.MlpConfig(width=args.width, depth=args.depth, instances=args.instances, steps=args.steps,
                                    lr=args.lr, schedule=args.schedule, batch=args.batch_size,
                                    sort_key=args.sort_key, seed=args.seed)
    run = symmetry_lab.train_mlps(config, _load_mnist(args.data_dir), _stderr_progress(args, "step"))
    return symmetry_lab.training_report(run)


def _format_mass_line(name: str, report: dict) -> str:
    return (f"{name:>12} {report['nets']:>6} {report['mass_before_median']:>12.4g} {report['mass_after_median']:>12.4g} "
            f"{report['ratio_median']:>8.4f} {report['ratio_min']:>8.4f} {report['converged']:>5}/{report['nets']:<5} "
            f"{report['max_output_change']:>10.2e}")


_MASS_HEADER = (f"{'':>12} {'nets':>6} {'mass before':>12} {'mass after':>12} {'ratio':>8} {'min':>8} "
                f"{'converged':>11} {'max |Δf|':>10}")


def _format_symmetry(report: dict) -> str:
    if "stages" in report:
        lines = [f"{report['nets']} perceptrons trained in {report['seconds']:.2f} s "
                 f"({report['nets_per_second']:.0f} nets/s); {report['kept']} kept (final loss ≤ "
                 f"{report['loss_cutoff']:.3g})",
                 f"{'stage':>8} {'highest density peaks of (v1, v2)':<52} {'v1 > v2':>8} {'swap MMD²':>10} "
                 f"{'max |Δf|':>10}"]
        for name, stage in report["stages"].items():
            peaks = "  ".join(f"({a:.2f}, {b:.2f})" for a, b in stage["peaks"][:3])
            lines.append(f"{name:>8} {peaks:<52} {stage['share_v1_above_v2']:>8.3f} "
                         f"{stage['swap_asymmetry_mmd2']:>10.2e} {stage['max_output_change']:>10.2e}")
        lines += ["min-mass:", _MASS_HEADER, _format_mass_line("perceptrons", report["mass"])]
        return "\n".join(lines)
    if "perceptrons" in report:
        return "\n".join(["min-mass (median masses; ratio = after / before)", _MASS_HEADER,
                          _format_mass_line("perceptrons", report["perceptrons"]),
                          _format_mass_line("MNIST MLPs", report["mlps"])])
    if "rows" in report and "widths" in report["config"]:
        lines = [f"nearest equivalent mode, {report['config']['weights']} weights, d_in = {report['config']['d_in']}, "
                 f"d_out = {report['config']['d_out']}",
                 f"{'width':>6} {'D':>8} {'|gw - w|':>12} {'/ |w|':>12} {'Thm 3.1 bound':>14}"]
        for row in report["rows"]:
            lines.append(f"{row['width']:>6} {row['n_parameters']:>8} {row['distance']:>12.4g} "
                         f"{row['relative_distance']:>12.4g} {row['bound']:>14.4g}")
        return "\n".join(lines)
    if "rows" in report:
        lines = ["median MMD² to the exact posterior (20 kernels); lower is better",
                 f"{'method':>12} {'raw':>12} {'units sorted':>13}"]
        for row in report["rows"]:
            lines.append(f"{row['method']:>12} {row['mmd2_raw']:>12.4g} {row['mmd2_removed']:>13.4g}")
        return "\n".join(lines)
    return (f"{report['config']['instances']} MLPs, width {report['config']['width']} × {report['config']['depth']}, "
            f"{report['config']['steps']} SGD steps ({report['config']['schedule']} lr) in {report['seconds']:.1f} s\n"
            f"  test accuracy {_or_na(report['test_accuracy_mean'], '.3f')}, final loss "
            f"{_or_na(report['final_loss_mean'], '.3f')}, "
            f"diverged {report['diverged']}\n"
            f"  Kendall τ between successive sorting permutations: mean {report['tau_mean']:.3f}, min {report['tau_min']:.3f}\n"
            f"  steps where some unit changed place: {_or_na(report['share_steps_with_permutation_first_half'], '.0%')} "
            f"of the first half, {_or_na(report['share_steps_with_permutation_second_half'], '.0%')} of the second")


def _or_na(value, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)



def _add_align(subparsers) -> None:
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
    p.add_argument("--width", type=_int_at_least(2, 512), default=defaults.width, help="hidden units per layer")
    p.add_argument("--depth", type=_int_at_least(1, 4), default=defaults.depth, help="hidden layers")
    p.add_argument("--train-size", type=_int_at_least(10, 60_000), default=defaults.train_size,
                   help="training points (moons: drawn; mnist: the first images)")
    p.add_argument("--noise", type=_fraction, default=defaults.noise, help="moons: noise on the points")
    p.add_argument("--steps", type=_int_at_least(1, 100_000), default=defaults.steps, help="Adam steps")
    p.add_argument("--batch-size", type=_int_at_least(1, 60_000), default=defaults.batch)
    p.add_argument("--lr", type=_positive_float, default=defaults.lr, help="Adam learning rate")
    p.add_argument("--prior-scale", type=_positive_float, default=defaults.prior_scale,
                   help="prior N(0, p²) on every weight")
    p.add_argument("--init-sd", type=_positive_float, default=defaults.init_sd,
                   help="initial posterior standard deviation")
    p.add_argument("--samples", type=_int_at_least(1, 1000), default=defaults.samples,
                   help="posterior samples per point of the path")
    p.add_argument("--path-points", type=_int_at_least(3, 201), default=defaults.path_points,
                   help="values of t from 0 to 1")
    p.add_argument("--seed", type=_int_at_least(0), default=defaults.seed,
                   help="data and both initialisations (q_A and q_B get different seeds derived from it)")
    p.add_argument("--data-dir", default=None, help="MNIST directory (default: the copy shipped in assets/mnist)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_run_align)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"{_shown(text)} must be between 0 and 1")
    return value


def _run_align(args) -> dict:
    config = align_lab.AlignConfig(
        task=args.task, width=args.width, depth=args.depth, train_size=args.train_size, noise=args.noise,
        steps=args.steps, batch=args.batch_size, lr=args.lr, prior_scale=args.prior_scale, init_sd=args.init_sd,
        samples=args.samples, path_points=args.path_points, seed=args.seed).validate()
    mnist = _load_mnist(args.data_dir) if config.task == "mnist" else None
    progress = _stderr_progress(args, "Adam step")

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


_FORMATTERS = {"modes": _format_modes, "toy": _format_toy, "mnist": _format_mnist,
               "mnist-sweep": _format_mnist_sweep, "mnist-data": _format_mnist_data, "symmetry": _format_symmetry,
               "align": _format_align}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m symlab",
        description="SymLab labs without the browser. Each lab prints a table, or JSON with --json.",
    )
    subparsers = parser.add_subparsers(dest="lab", metavar="<lab>", title="labs")
    subparsers.required = True
    _add_modes(subparsers)
    _add_toy(subparsers)
    _add_mnist(subparsers)
    _add_symmetry(subparsers)
    _add_align(subparsers)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    def fail(status: int, message) -> None:
        # One line: torch appends C++ stack frames to some of its messages.
        lines = str(message).strip().splitlines()
        line = lines[0] if lines else "failed"
        # Escaped: a message may quote user input (a directory name) holding terminal control codes.
        line = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in line)
        parser.exit(status, f"{parser.prog} {args.lab}: error: {line}\n")

    try:
        result = args.run(args)
    except ValueError as error:
        fail(2, error)
    except RuntimeError as error:  # a run that did not finish, or an unusable data/runs directory
        if len(error.args) > 1 and args.json:
            print(json.dumps(error.args[1], allow_nan=False))
        fail(1, error.args[0] if error.args else error)
    except OSError as error:  # e.g. a --data-dir that cannot be read
        fail(1, error)
    except MemoryError as error:
        fail(1, f"out of memory ({error})" if str(error) else "out of memory")
    if args.json:
        print(json.dumps(result, allow_nan=False))
    else:
        print(_FORMATTERS[args.lab](result))
    if args.lab == "mnist-data" and not result["ok"]:
        fail(1, "the MNIST files are missing or damaged (see above)")
    return 0
