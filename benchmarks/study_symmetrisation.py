"""Does symmetrisation act in wide networks? MFVI vs SGM-InfoNCE vs SGM-blocks on MNIST.

For every width × initial σ × seed, the three methods train on the same minibatches and weight
noise (SGM's extra randomness has its own stream; the block estimator has none), so their
differences are paired. Each run records, per epoch, the nearest-unit Jeffreys divergence, the
block estimate of I_H, units at the prior, the median posterior σ, and how often the trained
estimator had a gradient. Results go to a JSON-lines file as runs finish (an interrupted study
resumes where it stopped); ``--summary`` prints the table from that file.

    python benchmarks/study_symmetrisation.py [--widths 16,64,256,1024] [--init-sds 0.001,0.05,0.2]
        [--seeds 3] [--epochs 10] [--subset 20000] [--lr 0.001] [--jobs 2] [--out FILE] [--summary] [--json]

σ counts as settled when the median σ moved by less than 5 % over the last three epochs.
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

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "study_symmetrisation.jsonl"
SETTLED_CHANGE = 0.05  # relative change of the median σ over the last three epochs
EPOCH_KEYS = ("epoch", "test_acc", "test_nll", "test_ece", "train_elbo", "train_elbo_sym", "mutual_info",
              "log_group_size", "mi_active", "nearest_unit_kl_min", "nearest_unit_kl_median", "units_at_prior",
              "block_mi", "block_log_group_size", "block_mi_active", "sd_median", "seconds")
VARIANTS = {"mfvi": dict(method="mfvi"), "infonce": dict(method="sgm", mi="infonce"),
            "blocks": dict(method="sgm", mi="blocks")}


def job_key(job: dict) -> str:
    return f"{job['variant']}|{job['hidden']}|{job['init_sd']:g}|{job['seed']}"


def make_jobs(args) -> list[dict]:
    jobs = [dict(variant=variant, hidden=hidden, init_sd=init_sd, seed=seed)
            for hidden in args.widths for init_sd in args.init_sds for seed in range(args.seeds)
            for variant in args.variants]
    cost = {"mfvi": 1.0, "blocks": 1.5, "infonce": 3.0}  # the widest, slowest first: the pool ends together
    return sorted(jobs, key=lambda job: -job["hidden"] * cost[job["variant"]])


_DATA = None


def _init_worker(threads: int) -> None:
    import torch

    from symlab.lib import mnist_data

    global _DATA
    torch.set_num_threads(threads)
    _DATA = mnist_data.load_mnist()


def run_job(job_and_settings) -> dict:
    import torch

    from symlab.labs.mnist import experiment as mnist
    from symlab.specs.results import TrainingDiverged

    job, settings = job_and_settings
    config = mnist.MnistConfig(hidden=job["hidden"], init_sd=job["init_sd"], seed=job["seed"], device="cpu",
                               K=settings["K"], block_size=settings["block_size"], epochs=settings["epochs"],
                               train_subset=settings["subset"], samples=settings["samples"], lr=settings["lr"],
                               **VARIANTS[job["variant"]]).validate()
    device = torch.device("cpu")
    trainer = mnist.MnistTrainer(config, mnist.prepare_tensors(_DATA, config, device), device)
    started = time.perf_counter()
    status = "finished"
    try:
        for _ in range(config.epochs):
            trainer.train_epoch()
    except TrainingDiverged as error:
        status = f"diverged: {error}"
    history = [{key: m.get(key) for key in EPOCH_KEYS} for m in trainer.history]
    return {**job, "key": job_key(job), "status": status, "config": config.to_dict(),
            "summary": mnist.final_summary(trainer), "history": history,
            "wall_seconds": time.perf_counter() - started}


def load(path: Path) -> dict[str, dict]:
    found = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                found[record["key"]] = record
    return found


def run_study(args) -> None:
    done = load(args.out)
    jobs = [job for job in make_jobs(args) if job_key(job) not in done]
    settings = dict(K=args.K, block_size=args.block_size, epochs=args.epochs, subset=args.subset,
                    samples=args.samples, lr=args.lr)
    print(f"{len(done)} runs done, {len(jobs)} to go", file=sys.stderr, flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.jobs, initializer=_init_worker, initargs=(args.threads,)) as pool, \
            args.out.open("a") as out:
        for number, record in enumerate(pool.imap_unordered(run_job, [(job, settings) for job in jobs]), 1):
            out.write(json.dumps(record) + "\n")
            out.flush()
            last = record["history"][-1] if record["history"] else {}
            print(f"[{number}/{len(jobs)}] {record['key']}: {record['status']}, acc {last.get('test_acc')}, "
                  f"{record['wall_seconds']:.0f} s", file=sys.stderr, flush=True)


# --- the summary ------------------------------------------------------------------------------

def _mean_sd(values) -> tuple[float | None, float | None]:
    values = [v for v in values if v is not None and math.isfinite(v)]
    if not values:
        return None, None
    return float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def settled(history) -> tuple[bool | None, float | None]:
    """(whether the median σ moved < 5 % over the last three epochs, that relative change)."""
    if len(history) < 4:
        return None, None
    now, before = history[-1]["sd_median"], history[-4]["sd_median"]
    change = abs(now / before - 1.0)
    return change < SETTLED_CHANGE, change


def summarise(records: dict[str, dict]) -> list[dict]:
    """One row per width × initial σ × SGM variant, paired against MFVI on the same seeds."""
    by_setting: dict[tuple, dict[str, dict[int, dict]]] = {}
    for record in records.values():
        if record["status"] != "finished":
            continue
        setting = (record["hidden"], record["init_sd"])
        by_setting.setdefault(setting, {}).setdefault(record["variant"], {})[record["seed"]] = record
    rows = []
    for (hidden, init_sd), variants in sorted(by_setting.items()):
        base = variants.get("mfvi", {})
        last = {seed: r["history"][-1] for seed, r in base.items()}
        changes = [settled(r["history"]) for r in base.values()]
        common = dict(hidden=hidden, init_sd=init_sd,
                      mfvi_seeds=len(base),
                      nearest_kl_min=_mean_sd(m["nearest_unit_kl_min"] for m in last.values())[0],
                      nearest_kl_median=_mean_sd(m["nearest_unit_kl_median"] for m in last.values())[0],
                      units_at_prior=_mean_sd(m["units_at_prior"] for m in last.values())[0],
                      sd_median=_mean_sd(m["sd_median"] for m in last.values())[0],
                      sd_settled=all(ok for ok, _ in changes) if changes else None,
                      sd_change_last3=max((c for _, c in changes if c is not None), default=None),
                      mfvi_acc=_mean_sd(m["test_acc"] for m in last.values())[0],
                      mfvi_elbo=_mean_sd(m["train_elbo"] for m in last.values())[0],
                      mfvi_block_mi_fraction=_mean_sd(m["block_mi"] / m["block_log_group_size"]
                                                      for m in last.values() if m["block_log_group_size"])[0])
        for variant in ("infonce", "blocks"):
            runs = variants.get(variant, {})
            seeds = sorted(set(runs) & set(base))
            if not seeds:
                continue
            ends = {seed: runs[seed]["history"][-1] for seed in seeds}
            # Fraction of all training steps (every epoch) in which the estimate had a gradient.
            active = _mean_sd(np.mean([m["mi_active"] for m in runs[seed]["history"]]) for seed in seeds)[0]
            row = dict(common, variant=variant, seeds=len(seeds), mi_active=active,
                       mutual_info=_mean_sd(ends[s]["mutual_info"] for s in seeds)[0],
                       log_group_size=_mean_sd(ends[s]["log_group_size"] for s in seeds)[0],
                       elbo=_mean_sd(ends[s]["train_elbo"] for s in seeds)[0],
                       elbo_sym=_mean_sd(ends[s]["train_elbo_sym"] for s in seeds)[0],
                       acc=_mean_sd(ends[s]["test_acc"] for s in seeds)[0])
            for metric in ("test_acc", "test_nll", "test_ece", "nearest_unit_kl_min", "units_at_prior"):
                mean, sd = _mean_sd(ends[s][metric] - last[s][metric] for s in seeds)
                row[f"d_{metric}_mean"], row[f"d_{metric}_sd"] = mean, sd
            rows.append(row)
    return rows


def _fmt(value, spec=".3g") -> str:
    return "—" if value is None else format(value, spec)


def format_table(rows: list[dict]) -> str:
    lines = ["width  init σ   σ end  settled  J_min   J_med  prior  MFVI acc  variant  active   "
             "Î/log|H|  Δacc (pp)        ΔNLL             ΔECE             ELBO+Î − ELBO_MFVI"]
    for row in rows:
        ratio = (row["mutual_info"] / row["log_group_size"]) if row["mutual_info"] is not None and \
            row["log_group_size"] else None
        gain = (row["elbo_sym"] - row["mfvi_elbo"]) if row["elbo_sym"] is not None else None
        lines.append(
            f"{row['hidden']:5d}  {row['init_sd']:6g}  {_fmt(row['sd_median'], '.3f'):>6}  "
            f"{str(row['sd_settled']):>7}  {_fmt(row['nearest_kl_min'], '.3g'):>6}  "
            f"{_fmt(row['nearest_kl_median'], '.3g'):>6}  {_fmt(row['units_at_prior'], '.0f'):>5}  "
            f"{_fmt(100 * row['mfvi_acc'] if row['mfvi_acc'] is not None else None, '.2f'):>8}  "
            f"{row['variant']:>7}  {_fmt(row['mi_active'], '.2f'):>6}  {_fmt(ratio, '.3f'):>8}  "
            f"{_fmt(100 * row['d_test_acc_mean'], '+.2f')} ± {_fmt(100 * row['d_test_acc_sd'], '.2f'):<6}  "
            f"{_fmt(row['d_test_nll_mean'], '+.4f')} ± {_fmt(row['d_test_nll_sd'], '.4f')}  "
            f"{_fmt(row['d_test_ece_mean'], '+.4f')} ± {_fmt(row['d_test_ece_sd'], '.4f')}  {_fmt(gain, '.1f')}")
    return "\n".join(lines)


def _floats(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part.strip()]


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--widths", type=_ints, default=[16, 64, 256, 1024])
    parser.add_argument("--init-sds", type=_floats, default=[1e-3, 0.05, 0.2])
    parser.add_argument("--variants", type=lambda t: [v for v in t.split(",") if v], default=list(VARIANTS))
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--subset", type=int, default=20_000, help="training images (0: all 60 000)")
    parser.add_argument("--samples", type=int, default=5, help="weight samples in test predictions")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate")
    parser.add_argument("--K", type=int, default=16)
    parser.add_argument("--block-size", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=2, help="runs trained at once, each in its own process")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--summary", action="store_true", help="only print the table from --out")
    parser.add_argument("--json", action="store_true", help="print the summary rows as one JSON line")
    args = parser.parse_args(argv)
    if not args.summary:
        run_study(args)
    rows = summarise(load(args.out))
    print(json.dumps({"rows": rows}) if args.json else format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
