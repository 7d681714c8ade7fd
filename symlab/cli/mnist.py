"""The mnist lab on the command line: ``python -m symlab mnist ...``."""

from __future__ import annotations

import os
import sys
import time

from symlab.cli import common
from symlab.labs import run_kinds
from symlab.labs.mnist import LAB, convergence
from symlab.labs.mnist.config import MnistConfig
from symlab.labs.mnist.table import REPORT_KEYS, results_table, table_verdict
from symlab.runs import execution, supervisor
from symlab.runs.registry import Registry
from symlab.specs import controls, results, settings
from symlab.specs.run_kind import ACTIVE, RUNNING
from symlab.specs.settings import executor_name

# The settings of one run that a sweep varies: it takes lists of widths and Ks, methods and a seed count.
VARIED = ("hidden", "method", "K", "seed")
# The settings every run of a command shares.
SHARED = (
    "mi",
    "block_size",
    "rebuild_every",
    "depth",
    "epochs",
    "batch_size",
    "lr",
    "lr_schedule",
    "prior_scale",
    "init_sd",
    "sd_fit",
    "eval_every",
    "samples",
    "train_subset",
    "device",
    "estimator",
)


def _add_list(p, name: str, what: str, default: list) -> None:
    """A sweep's option taking a list of values of the config field ``name``."""
    p.add_argument(
        controls.flag_name(MnistConfig, name),
        dest=name,
        type=controls.list_parser(controls.declaration(MnistConfig, name)),
        default=default,
        help=f"{what}, comma-separated, each {controls.declaration(MnistConfig, name).describe_range()} "
        f"(default {','.join(map(str, default))})",
    )


def _add_mnist_options(p, *, sweep: bool) -> None:
    if sweep:
        _add_list(p, "hidden", "widths", [16, 64, 256, 1024])
        p.add_argument(
            "--methods", default=",".join(_methods()), help=f"comma-separated methods among {','.join(_methods())}"
        )
        _add_list(p, "K", "SGM's K values", [4, 16])
        seed_high = controls.declaration(MnistConfig, "seed").high
        assert seed_high is not None  # the seed's range is declared
        p.add_argument(
            "--seeds",
            type=common.int_at_least(1, int(seed_high) + 1),
            default=3,
            help="seeds 0 .. N-1 for every setting",
        )
    else:
        controls.add_flags(p, MnistConfig, VARIED)
        common.add_resume_options(p, "its last checkpoint")
        p.add_argument(
            "--export",
            nargs=2,
            metavar=("RUN_ID", "FILE"),
            default=None,
            help="write run RUN_ID's posterior (its last completed epoch) to FILE as safetensors, and "
            "train nothing: the means under nn.Sequential(nn.Linear, nn.ReLU, …)'s keys, the "
            "standard deviations under sd.<key>, the config as metadata",
        )
    controls.add_flags(p, MnistConfig, SHARED)
    common.add_data_dir(p)
    common.add_registry_options(
        p,
        "local: train in this process (the default, or $SYMLAB_EXECUTOR); ray: submit every run to the Ray cluster "
        "at $RAY_ADDRESS (else a local Ray instance) at once, and wait for them",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _methods() -> tuple[str, ...]:
    return controls.declaration(MnistConfig, "method").choices


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "mnist",
        help="one MNIST run, MFVI or SGM, recorded in the run registry the app shows",
        description=(
            "Train a Bayesian MLP on MNIST with mean-field VI (mfvi) or its symmetrised version "
            "(sgm: ELBO + an estimate of I: InfoNCE Î_K over random permutations of the hidden units, "
            "or the exact I_H of a subgroup H that permutes blocks of close units), in this process, and "
            "report the final test accuracy, NLL, calibration error, ELBO, and per epoch how close q's "
            "units are (nearest-unit Jeffreys divergence, units at the prior) with the block estimate of "
            "I_H on q. "
            "The run is registered like the app's runs; it does not wait in the app's queue. With "
            "--executor ray it trains on a Ray cluster instead of in this process."
        ),
    )
    _add_mnist_options(p, sweep=False)
    p.set_defaults(run=_run_mnist, format=_format_mnist)
    s = subparsers.add_parser(
        "mnist-sweep",
        help="MFVI vs SGM across widths and seeds: the paper's Table 1",
        description=(
            "Train every combination of width, method (and K for SGM) and seed, each registered as a "
            "run: one after the other in this process, or with --executor ray all submitted at once to a "
            "Ray cluster. Then print test accuracy (mean ± std over seeds) by width and method, and where "
            "each run trained."
        ),
    )
    _add_mnist_options(s, sweep=True)
    s.set_defaults(run=_run_mnist_sweep, format=_format_mnist_sweep)
    d = subparsers.add_parser(
        "mnist-data",
        help="check the MNIST files, or download them into a directory",
        description=(
            "Verify the four MNIST IDX files (content checksums) in --data-dir (default: "
            "$SYMLAB_MNIST_DIR, else the copy shipped in assets/mnist); with --download, fetch missing "
            "or damaged ones from the canonical mirrors, verified."
        ),
    )
    common.add_data_dir(d)
    d.add_argument("--download", action="store_true")
    d.add_argument("--json", action="store_true")
    d.set_defaults(run=_run_mnist_data, format=_format_mnist_data, failure=_data_failure)


def _device_type(config: MnistConfig) -> str:
    """Where the run will train ("cpu" or "cuda"): the first use of torch, when a run is created."""
    from symlab.labs.mnist.experiment import resolve_device

    return resolve_device(config.device).type


def _mnist_config(args, **varied):
    """One run's validated config: the shared settings from ``args``, the varied ones given."""
    return controls.from_args(MnistConfig, args, SHARED, **varied)


def _train_registered(registry, config, quiet: bool, data_dir=None, resume_id=None, restart=False) -> dict:
    """Train one run in this process (new, resumed from its checkpoint, or with ``restart`` the stopped run
    ``resume_id`` from its start); its summary."""
    if resume_id is None:
        run_id = registry.create(LAB.name, config, _device_type(config), status=RUNNING, pid=os.getpid(), source="cli")
    else:
        run = common.lab_run(registry, resume_id, LAB.name, "an MNIST run")
        (common.restart_here if restart else common.resume_here)(registry, run)
        run_id, config = resume_id, run.config

    def echo(metrics):
        if not quiet and metrics["test_acc"] is not None:  # an evaluated epoch
            print(
                f"  run #{run_id} ({config.label}) epoch {metrics['epoch']}/{config.epochs}: "
                f"test acc {metrics['test_acc']:.4f}, NLL {metrics['test_nll']:.4f}, "
                f"ELBO {metrics['train_elbo']:.1f} ({metrics['seconds']:.1f} s)",
                file=sys.stderr,
                flush=True,
            )

    final = execution.execute(registry, run_id, data_dir=data_dir, echo=echo)
    return _run_report(registry, final)


def _run_report(registry, run) -> dict:
    """The run's record, final metrics and per-epoch history as JSON data (a non-finite metric: null)."""
    report = {
        "run_id": run.id,
        "status": run.status,
        "message": run.message,
        "device": run.device,
        "device_name": (run.result or {}).get("device_name"),
        "executor": run.executor,
        "node": run.node,
        "config": run.config.to_dict(),
    }
    report.update({key: (run.result or {}).get(key) for key in REPORT_KEYS})
    report["history"] = registry.metrics([run.id])[run.id]
    return results.to_json(report)


def _run_mnist(args) -> dict:
    if args.export:
        return _export(Registry(run_kinds(), args.runs_dir), *args.export)
    config = controls.from_args(MnistConfig, args)
    registry = Registry(run_kinds(), args.runs_dir)
    again = args.resume if args.restart is None else args.restart
    if executor_name(args.executor) == "ray":
        if again is not None:
            raise ValueError(
                f"--{'resume' if args.restart is None else 'restart'} trains in this process: leave out "
                "--executor ray (or resume it from the app)"
            )
        [report] = _train_on_ray(registry, [config], args.json)
    else:
        report = _train_registered(
            registry, config, args.json, args.data_dir, resume_id=again, restart=args.restart is not None
        )
    if report["status"] != "finished":
        raise RuntimeError(f"run #{report['run_id']} {report['status']}: {report['message']}", report)
    return report


def _export(registry, run_text: str, path: str) -> dict:
    run_id = common.export_run_id(run_text)
    run = common.lab_run(registry, run_id, LAB.name, "an MNIST run")
    from symlab.labs.mnist.experiment import exported_run  # torch: the file's tensors
    from symlab.lib import weights

    written = weights.write_atomically(path, exported_run(registry.checkpoint_path(run_id), run_id))
    network = weights.read_network(written)
    return {
        "exported": str(written),
        "run_id": run_id,
        "status": run.status,
        "epochs_done": run.epoch,
        "structure": network.describe(),
        "bytes": written.stat().st_size,
    }


def _train_on_ray(registry, configs, quiet: bool) -> list[dict]:
    """Submit every run to the Ray cluster at once and wait for all of them; their reports."""
    run_ids = [
        registry.create(LAB.name, config, _device_type(config), source="cli", executor="ray") for config in configs
    ]
    supervisor.start(registry, run_ids)
    shown: dict[int, tuple] = {}
    try:
        while True:
            supervisor.reap(registry)
            current = [registry.get(run_id) for run_id in run_ids]
            for run in current:
                if not quiet and shown.get(run.id) != (run.status, run.epoch, run.node):
                    shown[run.id] = (run.status, run.epoch, run.node)
                    print(
                        f"  run #{run.id} ({run.config.label}): {run.status}, epoch {run.epoch}/{run.config.epochs}"
                        + (f" on {run.node}" if run.node else ""),
                        file=sys.stderr,
                        flush=True,
                    )
            if all(run.status not in ACTIVE for run in current):
                return [_run_report(registry, run) for run in current]
            time.sleep(0.5)
    except KeyboardInterrupt:
        for run_id in run_ids:
            supervisor.cancel(registry, run_id)
        raise


def _run_mnist_sweep(args) -> dict:
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(_methods()))
    if unknown or not methods:
        raise ValueError(f"--methods takes {' and/or '.join(_methods())} (got {controls.shown(args.methods)})")
    variants = [("mfvi", None)] * ("mfvi" in methods) + [("sgm", K) for K in args.K if "sgm" in methods]
    count = len(args.hidden) * len(variants) * args.seeds
    if count > common.MAX_RUNS:
        raise ValueError(f"the sweep would train {count} runs; at most {common.MAX_RUNS} at once")
    configs = [
        _mnist_config(args, hidden=hidden, method=method, seed=seed, **({"K": K} if K else {}))
        for hidden in args.hidden
        for method, K in variants
        for seed in range(args.seeds)
    ]
    registry = Registry(run_kinds(), args.runs_dir)
    if executor_name(args.executor) == "ray":
        reports = _train_on_ray(registry, configs, args.json)
    else:
        reports = []
        for number, config in enumerate(configs, 1):
            if not args.json:
                print(f"[{number}/{len(configs)}] {config.label}", file=sys.stderr, flush=True)
            reports.append(_train_registered(registry, config, args.json, args.data_dir))
    runs = [registry.get(report["run_id"]) for report in reports]
    table = results_table(runs)
    return {
        "runs": [{k: v for k, v in r.items() if k != "history"} for r in reports],
        **table_verdict(table),
        "table": table,
    }


def _run_mnist_data(args) -> dict:
    from symlab.lib import mnist_data  # numpy: loaded to check the files, not to parse

    if args.download and not args.data_dir:
        raise ValueError("--download needs --data-dir (the shipped copy is not overwritten)")
    directory = settings.mnist_directory(args.data_dir)
    downloaded = mnist_data.download_mnist(directory) if args.download else []
    problems = mnist_data.check_mnist(directory)
    return {
        "directory": str(mnist_data.SHIPPED_DIR if directory is None else directory),
        "ok": not problems,
        "problems": problems,
        "downloaded": downloaded,
    }


def _format_mnist(report: dict) -> str:
    if "exported" in report:
        return (
            f"run #{report['run_id']} ({report['status']}, {report['epochs_done']} epochs done): its posterior, "
            f"{report['structure']}, written to {report['exported']} ({report['bytes']:,} bytes)"
        )
    estimator = (
        f"I estimated by {report['mi_estimator']} ("
        + ("trained on" if report["mi_trained"] else "measured on q, not trained on")
        + ")"
        if report.get("mi_estimator")
        else ""
    )
    lines = [
        f"run #{report['run_id']}: {report['status']} on {report['device']}"
        + (f" ({report['message']})" if report["message"] else ""),
        estimator,
        "convergence: " + convergence.describe(report) if report.get("converged") is not None else "",
        f"{'epoch':>5} {'test acc':>9} {'NLL':>7} {'ECE':>7} {'train ELBO':>13} {'ELBO + Î':>13} "
        f"{'J min':>9} {'J median':>9} {'prior':>5} {'I_H':>8} {'log|H|':>8} {'s':>6}",
    ]
    for m in (m for m in report["history"] if m.get("test_acc") is not None):  # the evaluated epochs
        sym = "" if m["train_elbo_sym"] is None else f"{m['train_elbo_sym']:.1f}"
        lines.append(
            f"{m['epoch']:5d} {m['test_acc']:9.4f} {m['test_nll']:7.4f} {m['test_ece']:7.4f} "
            f"{m['train_elbo']:13.1f} {sym:>13} {_number(m.get('nearest_unit_kl_min')):>9} "
            f"{_number(m.get('nearest_unit_kl_median')):>9} {_number(m.get('units_at_prior')):>5} "
            f"{_number(m.get('block_mi')):>8} {_number(m.get('block_log_group_size')):>8} "
            f"{m['seconds']:6.1f}"
        )
    lines.append(
        "J: Jeffreys divergence (nats) from a unit's factor of q to its nearest other unit's; prior: units "
        "at the prior; I_H: block estimate of the mutual information on q, at most log|H|."
    )
    return "\n".join(line for line in lines if line)


def _number(value) -> str:
    return "—" if value is None else f"{value:.4g}"


def _format_mnist_sweep(report: dict) -> str:
    lines = ["Test accuracy by width and method (mean ± std over seeds)"]
    if report.get("trained") is False:
        lines.insert(0, f"NOT TRAINED: {report['trained_reason']}")
    for setting in dict.fromkeys(row["setting"] for row in report["table"]):
        lines.append(f"  {setting}")
        lines.append(
            f"  {'width':>6} {'method':>10} {'seeds':>5} {'test acc':>17} {'NLL':>8} {'ECE':>8} {'train ELBO':>12}"
        )
        for row in (r for r in report["table"] if r["setting"] == setting):
            lines.append(
                f"  {row['hidden']:6d} {row['label']:>10} {row['seeds']:5d} "
                f"{common.pm(row['test_acc_mean'], row['test_acc_std'], 4):>17} {row['test_nll_mean']:8.4f} "
                f"{row['test_ece_mean']:8.4f} {row['train_elbo_mean']:12.1f}"
            )
    failed = [r for r in report["runs"] if r["status"] != "finished"]
    for r in failed:
        lines.append(f"run #{r['run_id']} {r['status']}: {r['message']}")
    return "\n".join(lines)


def _data_failure(report: dict) -> str | None:
    return None if report["ok"] else "the MNIST files are missing or damaged (see above)"


def _format_mnist_data(report: dict) -> str:
    lines = [f"MNIST in {report['directory']}: " + ("all four files verified" if report["ok"] else "problems:")]
    lines += [f"  downloaded {name}" for name in report["downloaded"]]
    lines += [f"  {problem}" for problem in report["problems"]]
    return "\n".join(lines)
