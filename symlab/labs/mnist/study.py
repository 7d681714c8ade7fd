"""The converged symmetrisation study's summary, as shipped (``assets/study/symmetrisation.json``, written by
``python benchmarks/study_symmetrisation.py --summary --json``): its tables for the MNIST page and command."""

from __future__ import annotations

import json
from pathlib import Path

from symlab.lib.shipped import shipped

SHIPPED = shipped("study", "symmetrisation.json")
TABLES = ("rows", "starts", "recipes")
ROW_KEYS = (
    "subset",
    "hidden",
    "variant",
    "seeds",
    "converged",
    "mi_active",
    "mi_fraction",
    "j_min",
    "mfvi_acc",
    "mfvi_j_min",
    "mfvi_units_at_prior",
    "mfvi_block_fraction",
    "mfvi_block_mi",
    "elbo_sym",
    "mfvi_elbo",
    "d_test_acc_mean",
    "d_test_acc_sd",
    "d_test_nll_mean",
    "d_test_nll_sd",
    "d_test_ece_mean",
    "d_test_ece_sd",
    "d_elbo_mean",
    "d_elbo_sd",
)
VARIANT_LABELS = {
    "blocks2": "SGM blocks B=2",
    "blocks4": "SGM blocks B=4",
    "infonce16": "SGM InfoNCE K=16",
    "infonce64": "SGM InfoNCE K=64",
}


class StudyError(ValueError):
    """The shipped summary is missing or damaged."""


def load_study(path: Path = SHIPPED) -> dict:
    """The summary's tables; a missing or damaged file is a :class:`StudyError` that says how to rebuild it."""
    rebuild = "rebuild it with `python benchmarks/study_symmetrisation.py --summary --json > " + str(path) + "`"
    try:
        summary = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise StudyError(f"the study's summary {path} is missing: {rebuild}") from None
    except (OSError, ValueError) as error:
        raise StudyError(f"the study's summary {path} cannot be read ({error}): {rebuild}") from None
    if not isinstance(summary, dict) or any(not isinstance(summary.get(name), list) for name in TABLES):
        raise StudyError(f"the study's summary {path} lacks its tables {', '.join(TABLES)}: {rebuild}")
    missing = sorted({key for row in summary["rows"] for key in ROW_KEYS if key not in row})
    if missing:
        raise StudyError(f"the study's summary {path} has rows without {', '.join(missing)}: {rebuild}")
    return summary


def effect_rows(summary: dict) -> list[dict]:
    """One row per cell and SGM variant, in words and numbers for a table: paired differences SGM − MFVI."""
    table = []
    for row in summary["rows"]:
        table.append(
            {
                "images": row["subset"],
                "width": row["hidden"],
                "method": VARIANT_LABELS.get(row["variant"], row["variant"]),
                "seeds": row["seeds"],
                "converged": f"{row['converged']}/{row['seeds']}",
                "steps with a gradient": row["mi_active"],
                "Î / log|H|": row["mi_fraction"],
                "closest units (nats)": row["j_min"],
                "bound gain (nats)": None
                if row["elbo_sym"] is None or row["mfvi_elbo"] is None
                else row["elbo_sym"] - row["mfvi_elbo"],
                "Δ accuracy (pp)": _scaled(row["d_test_acc_mean"], 100.0),
                "± (pp)": _scaled(row["d_test_acc_sd"], 100.0),
                "Δ NLL": row["d_test_nll_mean"],
                "± NLL": row["d_test_nll_sd"],
                "Δ ECE": row["d_test_ece_mean"],
                "± ECE": row["d_test_ece_sd"],
                "Δ ELBO (nats)": row["d_elbo_mean"],
                "± ELBO": row["d_elbo_sd"],
                "MFVI accuracy (%)": _scaled(row["mfvi_acc"], 100.0),
                "MFVI units at the prior": row["mfvi_units_at_prior"],
                "MFVI closest units (nats)": row["mfvi_j_min"],
                "MFVI I_H / log|H|": row["mfvi_block_fraction"],
                "I_H on MFVI's q (nats)": row["mfvi_block_mi"],
            }
        )
    return table


def _scaled(value, scale: float):
    return None if value is None else value * scale


def largest_effect(summary: dict) -> dict | None:
    """The row whose paired accuracy difference is largest against its spread over seeds (|mean| / sd, an sd of
    0 counting as no evidence unless the mean is nonzero), None when there are no rows."""

    def strength(row):
        mean, sd = row["d_test_acc_mean"] or 0.0, row["d_test_acc_sd"] or 0.0
        if mean == 0.0:
            return 0.0
        return abs(mean) / sd if sd > 0 else float("inf")

    return max(summary["rows"], key=strength, default=None)
