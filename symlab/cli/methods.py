"""The posterior-approximation lab on the command line: ``python -m symlab methods ...``."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict

from safetensors import safe_open

from symlab.cli import common
from symlab.labs import run_kinds
from symlab.labs.methods import LAB
from symlab.labs.methods.config import LABELS, METHODS, PAPER_ROWS, SAMPLER, MethodsConfig
from symlab.runs import execution, supervisor
from symlab.runs.registry import Registry
from symlab.specs import controls, results
from symlab.specs.hmc import HmcConfig
from symlab.specs.run_kind import ACTIVE, RUNNING
from symlab.specs.settings import executor_name


def method_names() -> str:
    """The lab's methods in words, in its order: every method it runs, named once, here as on the page."""
    names = [LABELS[method] for method in METHODS]
    return ", ".join(names[:-1]) + " and " + names[-1]


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "methods",
        help="which approximation gets closest to the posterior: Laurent et al.'s Table 1 on MNIST",
        description=(
            "Train a reference posterior of independently trained networks, then draw weight samples from "
            f"{method_names()}, each from one start and from several (as Table 1 has them), and score each sample set by its MMD to the reference "
            "(with and without the symmetries removed), accuracy, NLL, ECE, Brier score, OOD detection "
            "(AUPR, FPR95) against a set of letters, and mutual information. The comparison is recorded in "
            "the run registry the app shows, one stage per method, and resumes from its last finished "
            "stage."
        ),
    )
    controls.add_flags(p, MethodsConfig)
    controls.add_flags(
        p,
        HmcConfig,
        defaults=asdict(SAMPLER),
        help_suffix={"hmc_chains": "(with --hmc; each from an independently trained network)"},
    )
    common.add_resume_options(p, "its last finished stage")
    p.add_argument(
        "--export",
        nargs=2,
        metavar=("RUN_ID", "FILE"),
        default=None,
        help="write run RUN_ID's reference checkpoints to FILE as safetensors (each parameter stacked over "
        "the checkpoints, the settings as metadata), and train nothing",
    )
    p.add_argument(
        "--export-hmc",
        nargs=2,
        metavar=("RUN_ID", "FILE"),
        default=None,
        help="write run RUN_ID's HMC draws to FILE as safetensors (samples [chains, draws, parameters], their log "
        "densities, each chain's step size and mass; the settings and diagnostics as metadata), and train nothing",
    )
    common.add_data_dir(p)
    common.add_registry_options(
        p,
        "local: in this process (the default, or $SYMLAB_EXECUTOR); ray: on the Ray cluster at $RAY_ADDRESS (else a "
        "local Ray instance), waiting for it",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.set_defaults(run=_run, format=_format)


def _run(args) -> dict:
    registry = Registry(run_kinds(), args.runs_dir)
    if args.export or args.export_hmc:
        run_text, path = args.export or args.export_hmc
        return _export(registry, run_text, path, hmc=bool(args.export_hmc))
    if args.resume is not None or args.restart is not None:
        run_id = _resumed(registry, args.resume, restart=args.restart)
    else:
        config = controls.from_args(MethodsConfig, args, sampler=controls.from_args(HmcConfig, args))
        on_ray = executor_name(args.executor) == "ray"
        run_id = registry.create(
            LAB.name,
            config,
            "cpu",
            status="queued" if on_ray else RUNNING,
            pid=None if on_ray else os.getpid(),
            source="cli",
            executor="ray" if on_ray else "local",
        )
        if on_ray:
            return _report(_wait_on_ray(registry, run_id, args.json))
    echo = (
        None if args.json else (lambda m: print(f"  {m['stage']}: {m['seconds']:.1f} s", file=sys.stderr, flush=True))
    )
    final = execution.execute(registry, run_id, data_dir=args.data_dir, echo=echo)
    return _report(final)


def _comparison(registry, run_id: int):
    return common.lab_run(registry, run_id, LAB.name, "a comparison of posterior approximations")


def _export(registry, run_text: str, path: str, hmc: bool = False) -> dict:
    """Run RUN_ID's reference checkpoints (or, with ``hmc``, its HMC draws) written to ``path``."""
    run_id = common.export_run_id(run_text)
    run = _comparison(registry, run_id)
    from symlab.labs.methods.experiment import checkpoint_set, hmc_draw_set  # torch: the checkpoints' tensors
    from symlab.lib import weights

    contents = (hmc_draw_set if hmc else checkpoint_set)(registry.checkpoint_path(run_id), run_id)
    written = weights.write_atomically(path, contents)
    with safe_open(str(written), "pt") as handle:
        shapes = {name: list(handle.get_slice(name).get_shape()) for name in handle.keys()}
    return {
        "exported": str(written),
        "contents": "HMC draws" if hmc else "reference checkpoints",
        "run_id": run_id,
        "status": run.status,
        "parameters": shapes,
        "bytes": written.stat().st_size,
    }


def _resumed(registry, run_id: int | None, restart: int | None = None) -> int:
    """The stopped comparison ``run_id`` resumed here, or ``restart`` started again from its first stage."""
    if restart is not None:
        common.restart_here(registry, _comparison(registry, restart))
        return restart
    if run_id is None:
        raise ValueError("neither a comparison to resume nor one to restart was given")
    common.resume_here(registry, _comparison(registry, run_id))
    return run_id


def _wait_on_ray(registry, run_id: int, quiet: bool):
    supervisor.start(registry, [run_id])
    shown = None
    try:
        while True:
            supervisor.reap(registry)
            run = registry.get(run_id)
            if not quiet and shown != (run.status, run.epoch):
                shown = (run.status, run.epoch)
                print(f"  run #{run_id}: {run.status}, stage {run.epoch}", file=sys.stderr, flush=True)
            if run.status not in ACTIVE:
                return run
            time.sleep(0.5)
    except KeyboardInterrupt:
        supervisor.cancel(registry, run_id)
        raise


def _report(run) -> dict:
    if run.status != "finished":
        raise RuntimeError(f"run #{run.id} {run.status}: {run.message}")
    return results.to_json({"run_id": run.id, **run.result})


def _number(value, scale: float = 100.0, digits: int = 1) -> str:
    return "—" if value is None else f"{value * scale:.{digits}f}"


def _format(report: dict) -> str:
    if "exported" in report:
        return (
            f"run #{report['run_id']} ({report['status']}): {report['contents']} written to {report['exported']} "
            f"({report['bytes']} bytes): " + ", ".join(f"{k} {v}" for k, v in report["parameters"].items())
        )
    return _table(report)


def _table(report: dict) -> str:
    """Our rows with the paper's MNIST-OptuNet rows beside them, every column × 100 as Table 1 prints it."""
    columns = ("mmd", "mmd_no_symmetry", "accuracy", "ece", "brier", "aupr", "fpr95", "id_mi", "ood_mi")
    heads = ("MMD", "MMD no sym", "Acc", "ECE", "Brier", "AUPR", "FPR95", "IDMI", "OODMI")
    verdict = report.get("trained_reason", "")
    lines = [
        f"NOT TRAINED: {verdict}" if report.get("trained") is False else verdict,
        f"{report['architecture']}: {report['reference_checkpoints']} reference checkpoints, "
        f"{report['samples_per_method']} samples per method (run #{report['run_id']}); all × 100, NLL in nats; "
        f"the paper's row (MNIST, OptuNet) under ours",
        f"{'method':<16}{'modes':>6}" + "".join(f"{h:>11}" for h in heads) + f"{'NLL':>8}",
    ]
    for row in report["rows"]:
        name = LABELS[row["method"]]
        lines.append(
            f"{name:<16}{row['modes']:>6}" + "".join(f"{_number(row[c]):>11}" for c in columns) + f"{row['nll']:>8.3f}"
        )
        paper = PAPER_ROWS.get((row["method"], 1 if row["modes"] == 1 else 10))
        if paper:
            lines.append(f"{'  paper':<16}{'':>6}" + "".join(f"{v:>11.1f}" for v in paper))
    if "reference_split_half_mmd" in report:
        low, high = report["reference_split_half_mmd_interval"]
        lines.append(
            f"{'  noise floor':<16}{'':>6}{'':>11}{_number(report['reference_split_half_mmd']):>11}  the checkpoints' "
            f"own halves, 95 % {_number(low)} to {_number(high)}"
        )
    if report.get("hmc"):
        lines += _hmc_table(report)
    return "\n".join(line for line in lines if line)


def _hmc_table(report: dict) -> list[str]:
    """Each row, and the reference checkpoints, against HMC's draws; then how the chains fared."""
    run = report["hmc"]
    heads = ("MMD", "MMD no sym", "agree", "TV")
    lines = [
        "",
        f"against HMC ({run['chains']} chains × {run['draws_per_chain']} draws after {run['warmup']} warm-up, "
        f"{run['seconds']:.0f} s): MMD² × 100, agreement and total variation of the predictives × 100",
        f"{'method':<16}{'modes':>6}" + "".join(f"{h:>11}" for h in heads),
    ]
    entries = [(LABELS[row["method"]], row["modes"], row) for row in report["rows"]]
    for name, modes, row in [*entries, ("checkpoints", report["reference_checkpoints"], run["checkpoints"])]:
        values = (row["mmd_hmc"], row["mmd_hmc_no_symmetry"], row["agreement_hmc"], row["tv_hmc"])
        lines.append(f"{name:<16}{modes:>6}" + "".join(f"{_number(v):>11}" for v in values))
    if "split_half_mmd" in run:
        low, high = run["split_half_mmd_interval"]
        lines += [
            f"{'HMC own halves':<16}{run['chains'] // 2:>6}{_number(run['split_half_mmd_raw']):>11}"
            f"{_number(run['split_half_mmd']):>11}  the noise floor, 95 % {_number(low)} to {_number(high)}",
            f"HMC {'converged' if run['converged'] else 'NOT converged'}: R̂ of the predictive "
            f"{run['rhat_predictive']:.2f} (median; largest {run['rhat_predictive_max']:.2f}), halves "
            f"{_number(run['split_half_mmd'])} apart (needs R̂ ≤ 1.1 and halves closer than the closest set's lead)",
        ]
    lines.append(
        f"HMC: acceptance {run['acceptance']:.2f}, {run['divergences']} divergent; split-R̂ over the weights "
        f"(largest / median) raw {run['rhat_raw']:.2f} / {run['rhat_raw_median']:.2f}, canonical "
        f"{run['rhat_canonical']:.2f} / {run['rhat_canonical_median']:.2f}, of the log density "
        f"{run['rhat_log_density']:.2f}; bulk ESS (smallest / median) raw {run['ess_raw']:.0f} / "
        f"{run['ess_raw_median']:.0f}, canonical {run['ess_canonical']:.0f} / {run['ess_canonical_median']:.0f}; "
        f"moves between permuted copies per chain {run['mode_hops']}"
    )
    return lines
