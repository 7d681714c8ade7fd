"""The paper's Table 1 from the registry: finished MNIST runs' final metrics, mean and std over distinct seeds."""

from __future__ import annotations

import statistics

from symlab.specs.results import training_verdict
from symlab.specs.run_kind import FINISHED

from .config import MnistConfig

RESULT_KEYS = (
    "test_acc",
    "test_nll",
    "test_ece",
    "train_elbo",
    "train_elbo_sym",
    "mutual_info",
    "log_group_size",
    "mi_active",
    "nearest_unit_kl_min",
    "nearest_unit_kl_median",
    "units_at_prior",
)
# A run's report (python -m symlab mnist --json): the table's metrics, with how far it got and what it measured.
REPORT_KEYS = (
    "epochs_done",
    "mi_estimator",
    "mi_trained",
    *RESULT_KEYS,
    "block_mi",
    "block_log_group_size",
    "block_mi_active",
    "sd_median",
    "train_seconds",
    "converged",
    "converged_epoch",
    "elbo_change",
    "elbo_change_se",
    "log_sd_change",
)


def setting_label(config: MnistConfig) -> str:
    """The settings other than width, method and seed, in words (runs agree on it to be compared)."""
    subset = f"{config.train_subset} train" if config.train_subset else "all 60000 train"
    depth = "" if config.depth == 1 else f"{config.depth} hidden layers, "
    epochs = f"{config.epochs} epoch{'s' * (config.epochs != 1)}"
    estimator = "" if config.estimator == "reparam" else f", {config.estimator} gradients"
    schedule = "" if config.lr_schedule == "cosine" else f" {config.lr_schedule}"
    fit = "" if config.sd_fit == "curvature" else f", σ by {config.sd_fit}"
    return (
        f"{depth}{epochs}, {subset}, batch {config.batch_size}, lr {config.lr:g}{schedule}{fit}, "
        f"prior {config.prior_scale:g}, init sd {config.init_sd:g}, M={config.samples}{estimator}"
    )


def by_seed(runs) -> dict[int, list]:
    """The runs of each seed, latest (highest id) first, by seed in order."""
    seeds: dict[int, list] = {}
    for run in sorted(runs, key=lambda run: -run.id):
        seeds.setdefault(run.config.seed, []).append(run)
    return dict(sorted(seeds.items()))


def latest_values(runs, key: str) -> list:
    """``key`` of the final results, one value per seed: a seed run more than once (the same settings again)
    counts once, by its latest run that has the value (runs recorded before a metric existed lack it), so that
    repeats do not pass for independent seeds."""
    values = []
    for seed_runs in by_seed(runs).values():
        found = [run.result[key] for run in seed_runs if run.result.get(key) is not None]
        if found:
            values.append(found[0])
    return values


def results_table(finished_runs) -> list[dict]:
    """Mean and std over distinct seeds of the final metrics of finished runs, one row per setting, width and
    method (Table 1 of the paper is test accuracy by width and method). ``seeds`` counts distinct seeds (each
    counted once, by its latest run: :func:`latest_values`), ``seed_list`` which, ``runs`` every finished run,
    ``run_ids`` each seed's latest, ``trained`` and ``trained_reason`` whether those runs learned."""
    groups: dict[tuple, list] = {}
    for run in finished_runs:
        if run.status != FINISHED or not run.result:
            continue
        key = (setting_label(run.config), run.config.hidden, run.config.method_label)
        groups.setdefault(key, []).append(run)
    rows = []
    for (setting, hidden, label), runs in sorted(
        groups.items(), key=lambda item: (item[0][0], item[0][1], item[0][2] != "MFVI", item[0][2])
    ):
        seeds = by_seed(runs)
        config = runs[0].config
        row = {
            "setting": setting,
            "hidden": hidden,
            "method": config.method,
            "K": config.K if config.method == "sgm" and config.mi == "infonce" else None,
            "mi": config.mi if config.method == "sgm" else None,
            "label": label,
            "seeds": len(seeds),
            "seed_list": list(seeds),
            "runs": len(runs),
            "run_ids": [found[0].id for found in seeds.values()],
        }
        for metric in RESULT_KEYS:
            values = latest_values(runs, metric)
            row[f"{metric}_mean"] = statistics.fmean(values) if values else None
            row[f"{metric}_std"] = statistics.pstdev(values) if values else None  # numpy's std: over seeds, ddof 0
        row.update(training_verdict(latest_values(runs, "test_acc"), f"the {label} runs of width {hidden}"))
        rows.append(row)
    return rows


def table_verdict(rows) -> dict:
    """Whether every row's networks learned (:func:`symlab.specs.results.training_verdict`): ``trained`` and, in
    ``trained_reason``, each row that did not."""
    untrained = [row["trained_reason"] for row in rows if row["trained"] is False]
    if untrained:
        return {"trained": False, "trained_reason": " ".join(untrained)}
    return {"trained": True, "trained_reason": "Every row's runs learned."}


def bound_gain_rows(rows) -> list[dict]:
    """SGM's bound (ELBO + Î) minus MFVI's ELBO, mean over seeds, for each SGM row of :func:`results_table`'s
    ``rows`` that has an MFVI row of the same setting and width: that row with ``gain_mean`` added (and
    ``gain_std`` None: the two means come from different seeds' runs, so no spread is given)."""
    mfvi = {(row["setting"], row["hidden"]): row for row in rows if row["method"] == "mfvi"}
    gains = []
    for row in rows:
        base = mfvi.get((row["setting"], row["hidden"]))
        if (
            row["method"] == "sgm"
            and base
            and row["train_elbo_sym_mean"] is not None
            and base["train_elbo_mean"] is not None
        ):
            gains.append({**row, "gain_mean": row["train_elbo_sym_mean"] - base["train_elbo_mean"], "gain_std": None})
    return gains


# Config fields that only SGM reads: two runs that differ in these alone see the same minibatches and weight noise.
SGM_FIELDS = ("method", "mi", "K", "block_size", "rebuild_every")


def same_as_mfvi(rows, key: str) -> dict[str, list[int]]:
    """The widths at which an SGM row of :func:`results_table`'s ``rows`` has exactly MFVI's ``key`` (same setting,
    width and seeds) because its term never had a gradient (``mi_active`` 0: Î at its maximum at every step), so
    it trained exactly as MFVI, by design; by SGM's method label."""
    mfvi = {(row["setting"], row["hidden"]): row for row in rows if row["method"] == "mfvi"}
    found: dict[str, list[int]] = {}
    for row in rows:
        base = mfvi.get((row["setting"], row["hidden"]))
        if (
            row["method"] == "sgm"
            and base
            and row["mi_active_mean"] == 0
            and row["seed_list"] == base["seed_list"]
            and row[key] is not None
            and row[key] == base[key]
        ):
            found.setdefault(row["label"], []).append(row["hidden"])
    return found


def trained_as_mfvi(sgm_config, sgm_history, mfvi_config, mfvi_history) -> bool:
    """Whether an SGM run trained exactly as an MFVI run, by design: the same settings but SGM's, its term without
    a gradient in every epoch (``mi_active`` 0), and the same train ELBO at every epoch both reached."""
    if sgm_config.method != "sgm" or mfvi_config.method != "mfvi":
        return False
    shared = {name: value for name, value in sgm_config.to_dict().items() if name not in SGM_FIELDS}
    if shared != {name: value for name, value in mfvi_config.to_dict().items() if name not in SGM_FIELDS}:
        return False
    epochs = min(len(sgm_history), len(mfvi_history))
    return epochs > 0 and all(
        sgm.get("mi_active") == 0 and sgm.get("train_elbo") == mfvi.get("train_elbo")
        for sgm, mfvi in zip(sgm_history[:epochs], mfvi_history[:epochs])
    )
