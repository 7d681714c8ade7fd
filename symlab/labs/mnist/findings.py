"""The MNIST lab's finding, from its converged study (``assets/study/symmetrisation.json``)."""

from symlab.specs.findings import Finding

from . import study

COMMAND = "python benchmarks/study_symmetrisation.py --summary --json"


def numbers(shipped) -> dict:
    """From the converged study: the largest bound gain of the block estimator and where, and the largest paired
    change of a prediction metric in standard deviations over seeds."""
    rows = study.load_study()["rows"]
    gained = [row for row in rows if row["elbo_sym"] is not None and row["mfvi_elbo"] is not None]
    best = max(gained, key=lambda row: row["elbo_sym"] - row["mfvi_elbo"])
    z = max(
        abs(row[f"d_test_{metric}_mean"]) / row[f"d_test_{metric}_sd"]
        for row in rows
        for metric in ("acc", "nll", "ece")
        if row[f"d_test_{metric}_mean"] is not None and row[f"d_test_{metric}_sd"]
    )
    return {
        "mnist_gain": best["elbo_sym"] - best["mfvi_elbo"],
        "mnist_gain_width": best["hidden"],
        "mnist_gain_images": best["subset"],
        "mnist_largest_z": z,
        "mnist_seeds": max(row["seeds"] for row in rows),
    }


def findings(v: dict) -> list[Finding]:
    return [
        Finding(
            "mnist",
            "Once VI has converged, symmetrisation acts on pruned units.",
            f"With few images, converged MFVI puts most hidden units at the prior, where they are "
            f"interchangeable; the block term then raises the bound by up to {v['mnist_gain']:.0f} nats (width "
            f"{v['mnist_gain_width']:,}, {v['mnist_gain_images']:,} images), and no paired change in accuracy, "
            f"NLL or calibration exceeds {v['mnist_largest_z']:.1f} standard deviations over "
            f"{v['mnist_seeds']} seeds.",
            COMMAND,
        )
    ]
