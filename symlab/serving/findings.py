"""What the labs measured, in one place: the home page's cards, the README's opening list and the class path
(``symlab/specs/lessons.toml``) state these findings, and their numbers come from the labs' shipped results.

:func:`measure` reads every number from its source: the mode-interpolation threshold from the lab's own solver,
the two-weight network's table (``assets/study/toy_table.json``), the alignment and Fig. 1 results the server
ships (``assets/precomputed``), the posterior-approximation comparisons (``assets/methods``) and the MNIST
study (``assets/study/symmetrisation.json``). Those sources load torch and take seconds, so the numbers are
kept in ``assets/findings.json`` (``python -m symlab.serving.findings`` writes it again), which a page reads in
a millisecond; tests/test_findings.py checks that file against :func:`measure`, and the README and the class path
against :func:`findings`."""

from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from symlab.labs.mnist import study
from symlab.lib.shipped import shipped
from symlab.serving import precomputed
from symlab.specs.settings import IMPORT_ROOT

SHIPPED = shipped("findings.json")
TOY_TABLE = shipped("study", "toy_table.json")
TOY_TABLE_COMMAND = "python -m symlab toy --table --alphas 0.25,0.5,0.75,1,2,3 --seeds 5 --json"
APART = 0.01  # nats: a bound gain this close to ln 2 counts as the modes' being apart


@dataclass(frozen=True)
class Finding:
    lab: str
    title: str
    text: str  # markdown, its numbers filled in

    def markdown(self) -> str:
        return f"**{self.title}** {self.text}"


class FindingsError(ValueError):
    """The shipped numbers are missing or damaged; the message says how to write them again."""


# ------------------------------------------------------------------------------------------ the numbers


def measure() -> dict:
    """Every number a finding states, read from its lab's shipped result or computed by its lab (seconds)."""
    return {
        **modes_numbers(),
        **symmetry_numbers(),
        **toy_numbers(),
        **align_numbers(),
        **methods_numbers(),
        **mnist_numbers(),
    }


def modes_numbers() -> dict:
    from symlab.labs.modes import experiment as modes

    return {"alpha_star": modes.exact_threshold(1.0)}


def _shipped_result(task):
    result = precomputed.read(task)
    if result is None:
        raise FindingsError(
            f"{precomputed.path_of(task)} has no result for the default link: "
            "write it again with `python -m symlab.serving.precomputed`"
        )
    return result


def symmetry_numbers() -> dict:
    from symlab.labs.symmetry import experiment as symmetry

    _, report = _shipped_result(symmetry.perceptron_task(symmetry.PerceptronConfig()))
    return {
        "fig1_raw_peaks": len(report.stages["raw"]["peaks"]),
        "fig1_sorted_peaks": len(report.stages["sorted"]["peaks"]),
    }


def toy_numbers(path: Path = TOY_TABLE) -> dict:
    """From the two-weight network's table (MFVI and SGM, several α, 5 seeds): SGM's bound gain where the modes
    are closest and where they are apart, and the paired test-MSE change against its spread over seeds."""
    try:
        rows = [row for row in json.loads(path.read_text())["table"] if row["method"] == "sgm"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise FindingsError(f"{path} cannot be read ({error}): write it with `{TOY_TABLE_COMMAND} > {path}`") from None
    closest = min(rows, key=lambda row: row["alpha"])
    apart = [row for row in rows if abs(row["elbo_gain_mean"] - math.log(2)) < APART]
    changes = [abs(row["test_mse_change_mean"]) for row in rows]
    spreads = [row["test_mse_change_std"] for row in rows]
    return {
        "toy_seeds": closest["seeds"],
        "toy_alpha_close": closest["alpha"],
        "toy_gain_close": closest["elbo_gain_mean"],
        "toy_alpha_apart": min(row["alpha"] for row in apart) if apart else None,
        "toy_gain_apart_low": min(row["elbo_gain_mean"] for row in apart) if apart else None,
        "toy_gain_apart_high": max(row["elbo_gain_mean"] for row in apart) if apart else None,
        "toy_higher_every_seed": all(row["seeds_higher_elbo"] == row["seeds"] for row in rows),
        "toy_mse_change_low": min(changes),
        "toy_mse_change_high": max(changes),
        "toy_mse_spread_low": min(spreads),
        "toy_mse_spread_high": max(spreads),
        "toy_mse_change_inside_spread": all(c <= s for c, s in zip(changes, spreads)),
    }


def align_numbers() -> dict:
    from symlab.labs.align import experiment as align

    _, report = _shipped_result(align.alignment_task(align.AlignConfig()))
    return {"align_barrier_before": report.barrier_before, "align_barrier_after": report.barrier_after}


def methods_numbers() -> dict:
    """From the shipped comparisons (3 seeds): what ten starts gain over one by MMD² with the symmetries removed
    (× 100, as the paper prints it), and SGM's MMD² minus MFVI's before and after the symmetries are removed."""
    from symlab.labs.methods import experiment as methods

    summary = methods.seed_summary(methods.shipped_reports())
    gains = {method: [-100 * d for d in diffs] for method, diffs in summary["multi_minus_single"].items()}
    others = [method for method in gains if method != "laplace"]
    sgm = summary["sgm_minus_mfvi"][1]

    def mean_sd(values):
        values = [100 * v for v in values]
        mean = sum(values) / len(values)
        return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0

    raw, removed = mean_sd(sgm["mmd"]), mean_sd(sgm["mmd_no_symmetry"])
    return {
        "methods_seeds": summary["seeds"],
        "methods_starts": max(row["modes"] for row in summary["rows"]),
        "methods_gain_low": min(sum(gains[m]) / len(gains[m]) for m in others),
        "methods_gain_high": max(sum(gains[m]) / len(gains[m]) for m in others),
        "methods_gain_laplace": sum(gains["laplace"]) / len(gains["laplace"]),
        "methods_gain_every_seed": all(g > 0 for values in gains.values() for g in values),
        "methods_sgm_raw": raw[0],
        "methods_sgm_raw_sd": raw[1],
        "methods_sgm_removed": removed[0],
        "methods_sgm_removed_sd": removed[1],
    }


def mnist_numbers() -> dict:
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


# ------------------------------------------------------------------------------------------ in words


@functools.cache
def numbers() -> dict:
    """The shipped numbers (``assets/findings.json``)."""
    try:
        return json.loads(SHIPPED.read_text())
    except (OSError, ValueError) as error:
        raise FindingsError(
            f"{SHIPPED} cannot be read ({error}): write it with `python -m symlab.serving.findings`"
        ) from None


def findings(values: dict | None = None) -> list[Finding]:
    """The findings in words, from ``values`` (default: the shipped numbers)."""
    v = numbers() if values is None else values
    toy_apart = (
        f"by {v['toy_gain_apart_low']:.3f}–{v['toy_gain_apart_high']:.3f} nats, ln 2 = log |G| to within "
        f"{APART:g}, once they are apart (α ≥ {v['toy_alpha_apart']:g})"
        if v["toy_alpha_apart"] is not None
        else "but never by ln 2 = log |G| in the table's range of α"
    )
    inside = "inside" if v["toy_mse_change_inside_spread"] else "not always inside"
    every_seed = ", on every seed" if v["methods_gain_every_seed"] else ""
    return [
        Finding(
            "modes",
            "Reverse KL interpolates, then jumps.",
            f"A single Gaussian fitted to two equal modes sits *between* them while they are less than "
            f"α* ≈ {v['alpha_star']:.2f}σ apart, and on one of them beyond; the KL then tends to ln 2.",
        ),
        Finding(
            "symmetry",
            "Equivalent modes crowd together in wide networks.",
            "A layer's nearest permuted copy gets closer, relative to ‖w‖, as the layer widens, far faster "
            "than the bound 2D / log n! (Thm 3.1), which says nothing until it drops below 2.",
        ),
        Finding(
            "toy",
            "Symmetrising gains up to log |G| in the bound.",
            f"On the two-weight network, SGM's bound on log p(D) beats MFVI's by {v['toy_gain_close']:.2f} nats "
            f"when the modes are closest (α = {v['toy_alpha_close']:g}) and {toy_apart}"
            f"{', on every seed' if v['toy_higher_every_seed'] else ''}.",
        ),
        Finding(
            "toy",
            "The predictions did not change.",
            f"MFVI between the modes predicts as well as the exact posterior: the paired test-MSE difference to "
            f"SGM, {v['toy_mse_change_low']:.4f}–{v['toy_mse_change_high']:.4f}, is {inside} its spread over "
            f"{v['toy_seeds']} seeds ({v['toy_mse_spread_low']:.4f}–{v['toy_mse_spread_high']:.4f}).",
        ),
        Finding(
            "align",
            "Two posteriors from different seeds are one mode, permuted.",
            f"Aligning their hidden units removes the loss barrier between them ({v['align_barrier_before']:.3f} "
            f"nats before, {v['align_barrier_after']:.3f} after, on half moons).",
        ),
        Finding(
            "methods",
            f"{v['methods_starts']} starts beat one, for every method; SGM moves no mode.",
            f"Against 100 reference checkpoints (symmetries removed, MMD² × 100, {v['methods_seeds']} seeds), "
            f"{v['methods_starts']} starts lower the MMD² by {v['methods_gain_low']:.0f}–"
            f"{v['methods_gain_high']:.0f} for dropout, MFVI, SGM and SWAG and by {v['methods_gain_laplace']:.0f} "
            f"for Laplace{every_seed}, as in Laurent et al.'s Table 1. SGM's samples lie far closer than MFVI's "
            f"in raw weights ({signed(v['methods_sgm_raw'], 0)} ± {v['methods_sgm_raw_sd']:.0f}) and no closer "
            f"once the symmetries are removed ({signed(v['methods_sgm_removed'], 2)} ± "
            f"{v['methods_sgm_removed_sd']:.2f}).",
        ),
        Finding(
            "mnist",
            "Once VI has converged, symmetrisation acts on pruned units.",
            f"With few images, converged MFVI puts most hidden units at the prior, where they are "
            f"interchangeable; the block term then raises the bound by up to {v['mnist_gain']:.0f} nats (width "
            f"{v['mnist_gain_width']:,}, {v['mnist_gain_images']:,} images), and no paired change in accuracy, "
            f"NLL or calibration exceeds {v['mnist_largest_z']:.1f} standard deviations over "
            f"{v['mnist_seeds']} seeds.",
        ),
    ]


def signed(value: float, digits: int) -> str:
    """``value`` with its sign, a true minus for a negative one."""
    return f"{value:+.{digits}f}".replace("-", "−")


def of_lab(lab: str) -> list[str]:
    """``lab``'s findings as markdown, for its card."""
    return [finding.markdown() for finding in findings() if finding.lab == lab]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m symlab.serving.findings",
        description="Measure the findings' numbers from the shipped results and write "
        f"them to {SHIPPED.relative_to(IMPORT_ROOT)}.",
    )
    parser.add_argument("--print", action="store_true", help="print the findings in words instead of writing")
    args = parser.parse_args(argv)
    values = measure()
    if args.print:
        print("\n".join(f"- {finding.markdown()}" for finding in findings(values)))
        return 0
    SHIPPED.write_text(json.dumps(values, indent=1) + "\n")
    print(f"wrote {SHIPPED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
