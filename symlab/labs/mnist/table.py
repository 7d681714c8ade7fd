"""The paper's Table 1 from the registry: finished MNIST runs' final metrics, mean and std over seeds."""

from __future__ import annotations

import numpy as np

from symlab.specs.run_kind import FINISHED

from .experiment import MnistConfig

RESULT_KEYS = ("test_acc", "test_nll", "test_ece", "train_elbo", "train_elbo_sym", "mutual_info", "log_group_size",
               "mi_active", "nearest_unit_kl_min", "nearest_unit_kl_median", "units_at_prior")


def setting_label(config: MnistConfig) -> str:
    """The settings other than width, method and seed, in words (runs agree on it to be compared)."""
    subset = f"{config.train_subset} train" if config.train_subset else "all 60000 train"
    depth = "" if config.depth == 1 else f"{config.depth} hidden layers, "
    epochs = f"{config.epochs} epoch{'s' * (config.epochs != 1)}"
    estimator = "" if config.estimator == "reparam" else f", {config.estimator} gradients"
    return (f"{depth}{epochs}, {subset}, batch {config.batch_size}, lr {config.lr:g}, "
            f"prior {config.prior_scale:g}, init sd {config.init_sd:g}, M={config.samples}{estimator}")


def results_table(finished_runs) -> list[dict]:
    """Mean and std (over seeds) of the final metrics of finished runs, one row per setting,
    width and method (Table 1 of the paper is test accuracy by width and method)."""
    groups: dict[tuple, list] = {}
    for run in finished_runs:
        if run.status != FINISHED or not run.result:
            continue
        key = (setting_label(run.config), run.config.hidden, run.config.method_label)
        groups.setdefault(key, []).append(run)
    rows = []
    for (setting, hidden, label), members in sorted(groups.items(), key=lambda item: (item[0][0], item[0][1],
                                                                                       item[0][2] != "MFVI",
                                                                                       item[0][2])):
        config = members[0].config
        row = {"setting": setting, "hidden": hidden, "method": config.method,
               "K": config.K if config.method == "sgm" and config.mi == "infonce" else None,
               "mi": config.mi if config.method == "sgm" else None, "label": label, "seeds": len(members),
               "run_ids": [run.id for run in members]}
        for key in RESULT_KEYS:
            values = [run.result.get(key) for run in members if run.result.get(key) is not None]
            row[f"{key}_mean"] = float(np.mean(values)) if values else None
            row[f"{key}_std"] = float(np.std(values)) if values else None
        rows.append(row)
    return rows


def bound_gain_rows(rows) -> list[dict]:
    """SGM's bound (ELBO + Î) minus MFVI's ELBO, mean over seeds, for each SGM row of :func:`results_table`'s
    ``rows`` that has an MFVI row of the same setting and width: that row with ``gain_mean`` added (and
    ``gain_std`` None: the two means come from different seeds' runs, so no spread is given)."""
    mfvi = {(row["setting"], row["hidden"]): row for row in rows if row["method"] == "mfvi"}
    gains = []
    for row in rows:
        base = mfvi.get((row["setting"], row["hidden"]))
        if (row["method"] == "sgm" and base and row["train_elbo_sym_mean"] is not None
                and base["train_elbo_mean"] is not None):
            gains.append({**row, "gain_mean": row["train_elbo_sym_mean"] - base["train_elbo_mean"], "gain_std": None})
    return gains
