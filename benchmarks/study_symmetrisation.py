"""Does symmetrisation matter once VI has converged? MFVI vs SGM on MNIST over training-set sizes and widths.

Every run fits σ by curvature (each step puts σ at the ELBO's stationary point for a running mean of the Hessian
diagonal) and μ by Adam with a cosine schedule, for a fixed number of steps per training-set size, and is judged
by the lab's convergence test (``symlab.labs.mnist.convergence``). For each size × width × seed the methods train
on the same minibatches, weight noise and curvature labels (SGM's permutations have their own stream; the block
estimator has none), so their differences are paired. Two checks of convergence ride along: MFVI from initial
σ 10⁻³ and 0.2 besides 0.05 (the same optimum should give the same ELBO), and MFVI by the earlier recipe (σ by
Adam on log σ at a constant 10⁻³), which the test should call unconverged.

Results go to a JSON-lines file as runs finish (an interrupted study resumes where it stopped); ``--summary``
prints the tables from that file. ``--executor ray`` submits the runs still to do as one sweep to the Ray
cluster at $RAY_ADDRESS (else a local Ray instance) through the run registry, as ``python -m symlab mnist-sweep
--executor ray`` does.

    python benchmarks/study_symmetrisation.py [--sizes 500,2000,10000,60000] [--seeds 3] [--jobs 2]
        [--executor local|ray] [--runs-dir DIR] [--out FILE] [--summary] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from symlab.labs.mnist import convergence  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "study_converged.jsonl"
# Widths at each training-set size (the full set at the widths whose runs take minutes here, not hours) and the
# steps each run takes there.
WIDTHS = {500: (16, 64, 256, 1024), 2000: (16, 64, 256), 10_000: (16, 64, 256), 60_000: (16, 64)}
STEPS = {500: 4000, 2000: 4000, 10_000: 8000, 60_000: 8000}
BATCH = 128
LR = 3e-3
EVALUATIONS = 4  # test metrics and unit diagnostics this many times per run (and at its end)
VARIANTS = {
    "mfvi": dict(method="mfvi"),
    "blocks2": dict(method="sgm", mi="blocks", block_size=2),
    "blocks4": dict(method="sgm", mi="blocks", block_size=4),
    "infonce16": dict(method="sgm", mi="infonce", K=16),
    "infonce64": dict(method="sgm", mi="infonce", K=64),
    # The recipe before convergence was tested: σ by Adam on log σ, a constant learning rate of 10⁻³.
    "mfvi_adam": dict(method="mfvi", sd_fit="adam", lr_schedule="constant", lr=1e-3),
}
SGM_VARIANTS = ("blocks2", "blocks4", "infonce16", "infonce64")
# K = 64 is the largest K that fits up to width 256. Once units are within a few nats the certificate fails and
# the terms are computed exactly: K = 16 took 156–171 ms a step at width 1024 (620–680 s a run of 4 000 steps,
# against ~150 s for MFVI), so K = 64 there would have taken hours more.
LARGEST_K_CELLS = {(subset, hidden) for subset, widths in WIDTHS.items() for hidden in widths if hidden <= 256}
INIT_SDS = (1e-3, 0.2)  # MFVI's extra starts, besides 0.05, at CHECK_SIZE and CHECK_WIDTHS
CHECK_SIZE = 2000  # where the starts and the earlier recipe are checked (the whole study's CPU allowed no more)
CHECK_WIDTHS = (16, 64)
DEFAULT_INIT_SD = 0.05
EPOCH_KEYS = (
    "epoch",
    "steps",
    "test_acc",
    "test_nll",
    "test_ece",
    "train_elbo",
    "train_elbo_sd",
    "train_elbo_sym",
    "mutual_info",
    "log_group_size",
    "mi_active",
    "log_sd_mean",
    "nearest_unit_kl_min",
    "nearest_unit_kl_median",
    "units_at_prior",
    "block_mi",
    "block_log_group_size",
    "sd_median",
    "seconds",
)


def job_key(job: dict) -> str:
    return f"{job['variant']}|{job['subset']}|{job['hidden']}|{job['init_sd']:g}|{job['seed']}"


def make_jobs(sizes, seeds: int) -> list[dict]:
    jobs = []
    for subset in sizes:
        for hidden in WIDTHS[subset]:
            variants = ["mfvi", *(v for v in SGM_VARIANTS if v != "infonce64" or (subset, hidden) in LARGEST_K_CELLS)]
            if subset == CHECK_SIZE:
                variants.append("mfvi_adam")
            starts = [(variant, DEFAULT_INIT_SD) for variant in variants]
            if subset == CHECK_SIZE and hidden in CHECK_WIDTHS:
                starts += [("mfvi", init_sd) for init_sd in INIT_SDS]
            jobs += [
                dict(variant=variant, subset=subset, hidden=hidden, init_sd=init_sd, seed=seed, steps=STEPS[subset])
                for variant, init_sd in starts
                for seed in range(seeds)
            ]
    cost = {"mfvi": 2.0, "mfvi_adam": 1.0, "blocks2": 3.0, "blocks4": 3.3, "infonce16": 3.0, "infonce64": 5.0}
    # The slowest first, so that the pool's processes end together.
    return sorted(jobs, key=lambda job: -job["hidden"] * cost[job["variant"]] * STEPS[job["subset"]])


def job_config(job: dict):
    from symlab.labs.mnist.experiment import MnistConfig

    steps_per_epoch = math.ceil(job["subset"] / BATCH)
    epochs = math.ceil(job["steps"] / steps_per_epoch)
    settings = dict(
        hidden=job["hidden"],
        init_sd=job["init_sd"],
        seed=job["seed"],
        device="cpu",
        batch_size=BATCH,
        epochs=epochs,
        eval_every=max(1, epochs // EVALUATIONS),
        samples=10,
        lr=LR,
        train_subset=0 if job["subset"] == 60_000 else job["subset"],
    )
    return MnistConfig(**{**settings, **VARIANTS[job["variant"]]}).validate()


_DATA = None


def _init_worker(threads: int) -> None:
    import torch

    from symlab.lib import mnist_data

    global _DATA
    torch.set_num_threads(threads)
    _DATA = mnist_data.load_mnist()


CHUNK_STEPS = 100  # the unevaluated epochs of a small training set are kept merged into chunks of this many steps
AVERAGED_KEYS = ("train_elbo_sym", "mutual_info", "log_group_size", "mi_active")


def compact_history(history: list[dict]) -> list[dict]:
    """The history with runs of consecutive unevaluated epochs merged into chunks of at least CHUNK_STEPS steps
    (step-weighted means, the pooled standard deviation, the last epoch's number and log σ): 4 000 steps of
    4-step epochs keep about 40 entries, not 1 000, and the convergence test reads them the same way."""
    compact, pending = [], []

    def flush():
        if not pending:
            return
        steps, mean, sd = convergence.pooled(pending)
        merged = {
            **pending[-1],
            "steps": steps,
            "train_elbo": mean,
            "train_elbo_sd": sd,
            "seconds": sum(m["seconds"] for m in pending),
        }
        for key in AVERAGED_KEYS:
            if pending[-1].get(key) is not None:
                merged[key] = sum(m["steps"] * m[key] for m in pending) / steps
        compact.append(merged)
        pending.clear()

    for entry in history:
        if entry.get("test_acc") is not None or entry["steps"] >= CHUNK_STEPS:
            flush()
            compact.append(entry)
            continue
        pending.append(entry)
        if sum(m["steps"] for m in pending) >= CHUNK_STEPS:
            flush()
    flush()
    return compact


def record(job: dict, status: str, history: list[dict], summary: dict, wall_seconds: float) -> dict:
    kept = [{key: m[key] for key in EPOCH_KEYS if m.get(key) is not None} for m in history]
    return {
        **job,
        "key": job_key(job),
        "status": status,
        "summary": summary,
        "wall_seconds": wall_seconds,
        "history": compact_history(kept),
    }


def run_job(job: dict) -> dict:
    import torch

    from symlab.labs.mnist import experiment as mnist
    from symlab.specs.results import TrainingDiverged

    config = job_config(job)
    device = torch.device("cpu")
    trainer = mnist.MnistTrainer(config, mnist.prepare_tensors(_DATA, config, device), device)
    started = time.perf_counter()
    status = "finished"
    try:
        for _ in range(config.epochs):
            trainer.train_epoch()
    except TrainingDiverged as error:
        status = f"diverged: {error}"
    return record(job, status, trainer.history, mnist.final_summary(trainer), time.perf_counter() - started)


def load(path: Path) -> dict[str, dict]:
    found = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                found[entry["key"]] = entry
    return found


def run_local(jobs, args, out) -> None:
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.jobs, initializer=_init_worker, initargs=(args.threads,)) as pool:
        for number, entry in enumerate(pool.imap_unordered(run_job, jobs), 1):
            out.write(json.dumps(entry) + "\n")
            out.flush()
            print(
                f"[{number}/{len(jobs)}] {entry['key']}: {entry['status']}, "
                f"{convergence.describe(verdict(entry))}, {entry['wall_seconds']:.0f} s",
                file=sys.stderr,
                flush=True,
            )


def run_on_ray(jobs, args, out) -> None:
    """Every job as a registered MNIST run, all submitted to Ray at once (the sweep command's path)."""
    from symlab.cli.mnist import _train_on_ray
    from symlab.labs import run_kinds
    from symlab.runs.registry import Registry

    registry = Registry(run_kinds(), args.runs_dir)
    reports = _train_on_ray(registry, [job_config(job) for job in jobs], quiet=False)
    for job, report in zip(jobs, reports):
        summary = {key: value for key, value in report.items() if key not in ("history", "config")}
        seconds = sum(m["seconds"] for m in report["history"])
        out.write(json.dumps(record(job, report["status"], report["history"], summary, seconds)) + "\n")
    out.flush()


def run_study(args) -> None:
    done = load(args.out)
    jobs = [job for job in make_jobs(args.sizes, args.seeds) if job_key(job) not in done]
    print(f"{len(done)} runs done, {len(jobs)} to go", file=sys.stderr, flush=True)
    if not jobs:
        return
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as out:
        (run_on_ray if args.executor == "ray" else run_local)(jobs, args, out)


# --- the summary ------------------------------------------------------------------------------


def _mean_sd(values) -> tuple[float | None, float | None]:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return None, None
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def final_window(history: list[dict], key: str = "train_elbo") -> float | None:
    """``key``'s mean over the run's last window of at least convergence.WINDOW_STEPS steps (whole epochs)."""
    steps, total = 0, 0.0
    for entry in reversed(history):
        if entry.get(key) is None:
            return None
        steps += entry["steps"]
        total += entry["steps"] * entry[key]
        if steps >= convergence.WINDOW_STEPS:
            break
    return total / steps if steps else None


def _active_fraction(history: list[dict]) -> float | None:
    """The fraction of all training steps in which the trained estimate of I had a gradient."""
    pairs = [(m["steps"], m["mi_active"]) for m in history if m.get("mi_active") is not None]
    return sum(n * a for n, a in pairs) / sum(n for n, _ in pairs) if pairs else None


def verdict(entry: dict) -> dict:
    """The convergence test on the run's recorded history (so a change of the test applies to runs done)."""
    return convergence.convergence(entry["history"])


def _end(entry: dict) -> dict:
    return entry["history"][-1]


def summarise(entries: dict[str, dict]) -> dict:
    """``rows``: one per size × width × SGM variant, paired against MFVI on the same seeds; ``starts``: MFVI's
    final ELBO from each initial σ; ``recipes``: the earlier recipe's convergence beside the new one's."""
    cells: dict[tuple, dict[tuple, dict[int, dict]]] = {}
    for entry in entries.values():
        cell = (entry["subset"], entry["hidden"])
        cells.setdefault(cell, {}).setdefault((entry["variant"], entry["init_sd"]), {})[entry["seed"]] = entry
    rows, starts, recipes = [], [], []
    for (subset, hidden), groups in sorted(cells.items()):
        base = {seed: e for seed, e in groups.get(("mfvi", DEFAULT_INIT_SD), {}).items() if e["status"] == "finished"}
        common = dict(
            subset=subset,
            hidden=hidden,
            mfvi_seeds=len(base),
            mfvi_converged=sum(verdict(e)["converged"] for e in base.values()),
            mfvi_elbo=_mean_sd(final_window(e["history"]) for e in base.values())[0],
            mfvi_acc=_mean_sd(_end(e)["test_acc"] for e in base.values())[0],
            mfvi_j_min=_mean_sd(_end(e)["nearest_unit_kl_min"] for e in base.values())[0],
            mfvi_j_median=_mean_sd(_end(e)["nearest_unit_kl_median"] for e in base.values())[0],
            mfvi_block_fraction=_mean_sd(
                _end(e)["block_mi"] / _end(e)["block_log_group_size"]
                for e in base.values()
                if _end(e)["block_log_group_size"]
            )[0],
            mfvi_units_at_prior=_mean_sd(_end(e)["units_at_prior"] for e in base.values())[0],
            # I_H over greedy pairs measured on MFVI's own q at the end: what symmetrising it afterwards
            # adds to its bound, ELBO + I_H ≤ ELBO_G.
            mfvi_block_mi=_mean_sd(_end(e)["block_mi"] for e in base.values())[0],
            sd_median=_mean_sd(_end(e)["sd_median"] for e in base.values())[0],
        )
        for variant in SGM_VARIANTS:
            runs = {
                seed: e for seed, e in groups.get((variant, DEFAULT_INIT_SD), {}).items() if e["status"] == "finished"
            }
            seeds = sorted(set(runs) & set(base))
            if not seeds:
                continue
            ends = {seed: _end(runs[seed]) for seed in seeds}
            row = dict(
                common,
                variant=variant,
                seeds=len(seeds),
                converged=sum(verdict(runs[s])["converged"] for s in seeds),
                not_converged=[
                    convergence.describe(verdict(runs[s])) for s in seeds if not verdict(runs[s])["converged"]
                ],
                mi_active=_mean_sd(_active_fraction(runs[s]["history"]) for s in seeds)[0],
                mi_fraction=_mean_sd(
                    ends[s]["mutual_info"] / ends[s]["log_group_size"] for s in seeds if ends[s]["log_group_size"]
                )[0],
                elbo=_mean_sd(final_window(runs[s]["history"]) for s in seeds)[0],
                elbo_sym=_mean_sd(final_window(runs[s]["history"], "train_elbo_sym") for s in seeds)[0],
                j_min=_mean_sd(ends[s]["nearest_unit_kl_min"] for s in seeds)[0],
                j_median=_mean_sd(ends[s]["nearest_unit_kl_median"] for s in seeds)[0],
            )
            for metric in ("test_acc", "test_nll", "test_ece"):
                mean, sd = _mean_sd(ends[s][metric] - _end(base[s])[metric] for s in seeds)
                row[f"d_{metric}_mean"], row[f"d_{metric}_sd"] = mean, sd
            d_elbo = _mean_sd(final_window(runs[s]["history"]) - final_window(base[s]["history"]) for s in seeds)
            row["d_elbo_mean"], row["d_elbo_sd"] = d_elbo
            rows.append(row)
        starts_here = {init_sd: runs for (variant, init_sd), runs in groups.items() if variant == "mfvi"}
        if len(starts_here) > 1:
            for init_sd, runs in sorted(starts_here.items()):
                finished = [e for e in runs.values() if e["status"] == "finished"]
                paired = [
                    final_window(e["history"]) - final_window(base[e["seed"]]["history"])
                    for e in finished
                    if e["seed"] in base
                ]
                noise = [verdict(e)["elbo_change_se"] for e in finished if verdict(e)["elbo_change_se"]]
                starts.append(
                    dict(
                        subset=subset,
                        hidden=hidden,
                        init_sd=init_sd,
                        seeds=len(finished),
                        converged=sum(verdict(e)["converged"] for e in finished),
                        elbo=_mean_sd(final_window(e["history"]) for e in finished)[0],
                        d_elbo=_mean_sd(paired),
                        window_se=_mean_sd(noise)[0],
                    )
                )
        old = [e for e in groups.get(("mfvi_adam", DEFAULT_INIT_SD), {}).values() if e["status"] == "finished"]
        if old:
            recipes.append(
                dict(
                    subset=subset,
                    hidden=hidden,
                    seeds=len(old),
                    converged=sum(verdict(e)["converged"] for e in old),
                    verdicts=[convergence.describe(verdict(e)) for e in old],
                    elbo=_mean_sd(final_window(e["history"]) for e in old)[0],
                    mfvi_elbo=common["mfvi_elbo"],
                    mfvi_converged=common["mfvi_converged"],
                    mfvi_seeds=common["mfvi_seeds"],
                    j_min=_mean_sd(_end(e)["nearest_unit_kl_min"] for e in old)[0],
                    mfvi_j_min=common["mfvi_j_min"],
                )
            )
    return {"rows": rows, "starts": starts, "recipes": recipes}


def _fmt(value, spec=".3g") -> str:
    return "—" if value is None else format(value, spec)


def _pm(pair, spec, scale=1.0) -> str:
    mean, sd = pair
    return "—" if mean is None else f"{format(scale * mean, spec)} ± {format(scale * sd, spec.lstrip('+'))}"


def format_tables(summary: dict) -> str:
    lines = [
        "SGM minus MFVI, paired on seeds (mean ± sd); J: nearest-unit Jeffreys divergence (nats) at the end",
        f"{'N':>6} {'width':>5} {'variant':>9} {'conv':>5} {'J_min':>6} {'J_med':>6} {'act':>5} {'Î/log|H|':>8} "
        f"{'Δacc (pp)':>14} {'ΔNLL':>17} {'ΔECE':>17} {'ΔELBO':>14} {'ELBO+Î−ELBO_MFVI':>16}",
    ]
    for r in summary["rows"]:
        gain = None if r["elbo_sym"] is None or r["mfvi_elbo"] is None else r["elbo_sym"] - r["mfvi_elbo"]
        lines.append(
            f"{r['subset']:6d} {r['hidden']:5d} {r['variant']:>9} {r['converged']}/{r['seeds']:<3} "
            f"{_fmt(r['j_min'], '.3g'):>6} {_fmt(r['j_median'], '.3g'):>6} {_fmt(r['mi_active'], '.2f'):>5} "
            f"{_fmt(r['mi_fraction'], '.4f'):>8} {_pm((r['d_test_acc_mean'], r['d_test_acc_sd']), '+.2f', 100):>14} "
            f"{_pm((r['d_test_nll_mean'], r['d_test_nll_sd']), '+.4f'):>17} "
            f"{_pm((r['d_test_ece_mean'], r['d_test_ece_sd']), '+.4f'):>17} "
            f"{_pm((r['d_elbo_mean'], r['d_elbo_sd']), '+.0f'):>14} {_fmt(gain, '+.0f'):>16}"
        )
    lines += [
        "",
        "MFVI per cell: converged runs, final-window ELBO, test accuracy, nearest-unit J, I_H/log|H| on q",
        f"{'N':>6} {'width':>5} {'conv':>5} {'ELBO':>10} {'acc %':>6} {'J_min':>6} {'J_med':>6} {'I_H/log|H|':>10} "
        f"{'σ median':>8} {'at prior':>8} {'I_H nats':>8}",
    ]
    seen = set()
    for r in summary["rows"]:
        if (r["subset"], r["hidden"]) in seen:
            continue
        seen.add((r["subset"], r["hidden"]))
        lines.append(
            f"{r['subset']:6d} {r['hidden']:5d} {r['mfvi_converged']}/{r['mfvi_seeds']:<3} "
            f"{_fmt(r['mfvi_elbo'], '.0f'):>10} {_fmt(100 * r['mfvi_acc'] if r['mfvi_acc'] else None, '.2f'):>6} "
            f"{_fmt(r['mfvi_j_min'], '.3g'):>6} {_fmt(r['mfvi_j_median'], '.3g'):>6} "
            f"{_fmt(r['mfvi_block_fraction'], '.4f'):>10} {_fmt(r['sd_median'], '.3f'):>8} "
            f"{_fmt(r['mfvi_units_at_prior'], '.0f'):>8} {_fmt(r['mfvi_block_mi'], '.0f'):>8}"
        )
    if summary["starts"]:
        lines += [
            "",
            "MFVI from three initial σ: final-window ELBO, and its difference from σ₀ 0.05's on the same seed",
            f"{'N':>6} {'width':>5} {'σ₀':>6} {'conv':>5} {'ELBO':>10} {'Δ vs 0.05':>14} {'window SE':>9}",
        ]
        for s in summary["starts"]:
            lines.append(
                f"{s['subset']:6d} {s['hidden']:5d} {s['init_sd']:6g} {s['converged']}/{s['seeds']:<3} "
                f"{_fmt(s['elbo'], '.0f'):>10} {_pm(s['d_elbo'], '+.0f'):>14} {_fmt(s['window_se'], '.0f'):>9}"
            )
    if summary["recipes"]:
        lines += [
            "",
            "The earlier recipe (σ by Adam, constant lr 10⁻³) against this one (σ by curvature, cosine)",
            f"{'N':>6} {'width':>5} {'old conv':>8} {'new conv':>8} {'old ELBO':>10} {'new ELBO':>10} "
            f"{'old J_min':>9} {'new J_min':>9}  old verdicts",
        ]
        for r in summary["recipes"]:
            lines.append(
                f"{r['subset']:6d} {r['hidden']:5d} {r['converged']}/{r['seeds']:<6} "
                f"{r['mfvi_converged']}/{r['mfvi_seeds']:<6} {_fmt(r['elbo'], '.0f'):>10} "
                f"{_fmt(r['mfvi_elbo'], '.0f'):>10} {_fmt(r['j_min'], '.3g'):>9} "
                f"{_fmt(r['mfvi_j_min'], '.3g'):>9}  {'; '.join(r['verdicts'])}"
            )
    return "\n".join(lines)


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=_ints, default=list(WIDTHS), help=f"training-set sizes among {list(WIDTHS)}")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once, each in its own process")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument(
        "--executor",
        choices=("local", "ray"),
        default="local",
        help="local: a pool of --jobs processes here; ray: one sweep of registered runs on Ray",
    )
    parser.add_argument("--runs-dir", default=None, help="the run registry for --executor ray (default: ./runs)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--summary", action="store_true", help="only print the tables from --out")
    parser.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.sizes) - set(WIDTHS))
    if unknown:
        parser.error(f"--sizes takes sizes among {list(WIDTHS)} (got {unknown})")
    if not args.summary:
        run_study(args)
    summary = summarise(load(args.out))
    print(json.dumps(summary) if args.json else format_tables(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
