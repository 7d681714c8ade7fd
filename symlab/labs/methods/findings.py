"""The posterior-approximation lab's finding, from its shipped comparisons (``assets/methods``, 3 seeds)."""

import math

from symlab.specs.findings import Finding, signed

from .config import LABELS

COMMAND = "symlab methods --seed 0 --json (and --seed 1, --seed 2)"


def numbers(shipped) -> dict:
    """From the shipped comparisons (3 seeds): what ten starts gain over one by MMD² with the symmetries removed
    (× 100, as the paper prints it), and SGM's MMD² minus MFVI's before and after the symmetries are removed."""
    from . import experiment as methods  # torch: only when the numbers are measured, not to read the words

    reports = methods.shipped_reports()
    summary = methods.seed_summary(reports)
    gains = {method: [-100 * d for d in diffs] for method, diffs in summary["multi_minus_single"].items()}
    others = [method for method in gains if method != "laplace"]
    sgm = summary["sgm_minus_mfvi"][1]
    raw, removed = mean_sd(sgm["mmd"]), mean_sd(sgm["mmd_no_symmetry"])
    return {
        **hmc_numbers(reports, summary),
        "methods_seeds": summary["seeds"],
        "methods_starts": max(row["modes"] for row in summary["rows"]),
        "methods_gain_low": min(sum(gains[m]) / len(gains[m]) for m in others),
        "methods_gain_high": max(sum(gains[m]) / len(gains[m]) for m in others),
        "methods_gain_laplace": sum(gains["laplace"]) / len(gains["laplace"]),
        "methods_gain_every_seed": all(g > 0 for values in gains.values() for g in values),
        "methods_reference_floor": 100 * summary["closest"]["floor"]
        if summary["closest"].get("floor") is not None
        else None,
        "methods_sgm_raw": raw[0],
        "methods_sgm_raw_sd": raw[1],
        "methods_sgm_removed": removed[0],
        "methods_sgm_removed_sd": removed[1],
    }


def mean_sd(values, scale: float = 100) -> tuple[float, float]:
    """The mean and standard deviation over seeds of ``scale`` × ``values`` (0 for one seed)."""
    values = [scale * v for v in values]
    mean = sum(values) / len(values)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0


def hmc_numbers(reports: list[dict], summary: dict) -> dict:
    """Against the HMC reference, over the seeds of ``reports`` (``summary``: their ``seed_summary``): its noise
    floor (the split-half MMD² of its draws, symmetries removed, per seed, and the floor the claims are held to),
    how many sample sets sit closer to HMC than its halves sit to each other, whether a closest set can be named
    (:func:`~symlab.labs.methods.experiment.closest_claim`), where the deep ensemble ranks, SGM − MFVI before and
    after the symmetries are removed, Kendall's τ between the two references' rankings, and the chains' R̂ of the
    predictive and of the weights (medians) raw and canonicalised. The methods page states them for the seeds it
    shows, the README for the shipped ones."""
    rankings, claim = summary["rankings"], summary.get("closest_hmc") or {}
    if not rankings or claim.get("floor") is None:
        return {"methods_hmc_seeds": 0}

    def rank(report, key):
        order = sorted(report["rows"], key=lambda row: row["mmd_hmc_no_symmetry"])
        return 1 + [f"{row['method']}/{row['modes']}" for row in order].index(key)

    sgm = {key: mean_sd(values) for key, values in summary["sgm_minus_mfvi"][1].items() if "hmc" in key}
    tau, tau_raw = mean_sd(rankings["kendall_tau"], 1), mean_sd(rankings["kendall_tau_raw"], 1)
    ensemble = f"ensemble/{max(row['modes'] for row in summary['rows'])}"
    split_half = [100 * report["hmc"]["split_half_mmd"] for report in reports]
    return {
        "methods_hmc_seeds": len(reports),
        "methods_hmc_split_half": split_half,
        "methods_hmc_floor": 100 * claim["floor"],
        "methods_hmc_within_floor": sum(100 * row["mmd_hmc_no_symmetry"] < min(split_half) for row in summary["rows"]),
        "methods_hmc_closest": claim["closest"],
        "methods_hmc_runner_up": claim["runner_up"],
        "methods_hmc_lead": 100 * claim["lead"],
        "methods_hmc_lead_se": 100 * claim["lead_se"] if claim["lead_se"] is not None else None,
        "methods_hmc_distinguishable": claim["distinguishable"],
        "methods_hmc_converged": all(report["hmc"]["converged"] for report in reports),
        "methods_hmc_ensemble_ranks": [rank(report, ensemble) for report in reports],
        "methods_hmc_sets": len(reports[0]["rows"]),
        "methods_hmc_sgm_raw": sgm["mmd_hmc"][0],
        "methods_hmc_sgm_raw_sd": sgm["mmd_hmc"][1],
        "methods_hmc_sgm_removed": sgm["mmd_hmc_no_symmetry"][0],
        "methods_hmc_sgm_removed_sd": sgm["mmd_hmc_no_symmetry"][1],
        "methods_hmc_tau": tau[0],
        "methods_hmc_tau_sd": tau[1],
        "methods_hmc_tau_raw": tau_raw[0],
        "methods_hmc_tau_raw_sd": tau_raw[1],
        "methods_hmc_rhat_predictive": [report["hmc"]["rhat_predictive"] for report in reports],
        "methods_hmc_rhat_raw": [report["hmc"]["rhat_raw_median"] for report in reports],
        "methods_hmc_rhat_canonical": [report["hmc"]["rhat_canonical_median"] for report in reports],
        "methods_hmc_hops": sum(sum(report["hmc"]["mode_hops"]) for report in reports),
    }


def findings(v: dict) -> list[Finding]:
    every_seed = ", on every seed" if v["methods_gain_every_seed"] else ""
    floor = (
        f", where the checkpoints' own halves score at most {v['methods_reference_floor']:.1f}"
        if v.get("methods_reference_floor") is not None
        else ""
    )
    return [
        Finding(
            "methods",
            f"{v['methods_starts']} starts beat one, for every method; SGM moves no mode.",
            f"Against 100 reference checkpoints (symmetries removed, MMD² × 100, {v['methods_seeds']} seeds), "
            f"{v['methods_starts']} starts lower the MMD² by {v['methods_gain_low']:.0f}–"
            f"{v['methods_gain_high']:.0f} for dropout, MFVI, SGM and SWAG and by {v['methods_gain_laplace']:.0f} "
            f"for Laplace{every_seed}{floor}, as in Laurent et al.'s Table 1. SGM's samples lie far closer than MFVI's "
            f"in raw weights ({signed(v['methods_sgm_raw'], 0)} ± {v['methods_sgm_raw_sd']:.0f}) and no closer "
            f"once the symmetries are removed ({signed(v['methods_sgm_removed'], 2)} ± "
            f"{v['methods_sgm_removed_sd']:.2f}).",
            COMMAND,
        ),
        *hmc_findings(v),
    ]


def _span(values, digits: int = 2) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else f"{low:.{digits}f}–{high:.{digits}f}"


def set_label(name: str) -> str:
    """A sample set's ``method/modes`` name in words: "Laplace, 10 modes"."""
    method, modes = name.split("/")
    return f"{LABELS[method]}, {'one mode' if modes == '1' else modes + ' modes'}"


def hmc_findings(v: dict) -> list[Finding]:
    """Against the HMC reference, where the shipped comparisons have one and measure its noise floor."""
    if not v["methods_hmc_seeds"]:
        return []
    seeds, sets = v["methods_hmc_seeds"], v["methods_hmc_sets"]
    lead = f"{v['methods_hmc_lead']:.1f}" + (
        f" ± {v['methods_hmc_lead_se']:.1f}" if v["methods_hmc_lead_se"] is not None else ""
    )
    closest, runner_up = set_label(v["methods_hmc_closest"]), set_label(v["methods_hmc_runner_up"])
    ranks = ", ".join(str(rank) for rank in v["methods_hmc_ensemble_ranks"])
    if v["methods_hmc_converged"] and v["methods_hmc_distinguishable"]:
        headline = f"Against HMC's posterior, {closest} sits closest."
        verdict = f"{closest} leads {runner_up} by {lead}, above the floor."
    else:
        headline = "This short HMC run is not yet a gold standard: its own halves differ more than the methods do."
        verdict = (
            f"The closest set by the mean, {closest}, leads {runner_up} by {lead}: within the floor, so no set can "
            "be named closest, and no ranking against HMC is claimed."
        )
    return [
        Finding(
            "methods",
            headline,
            f"Split in two, HMC's chains sit {_span(v['methods_hmc_split_half'], 1)} apart (MMD² × 100, symmetries "
            f"removed, {seeds} seeds; the floor, the largest 95 % upper end, is {v['methods_hmc_floor']:.1f}); "
            f"{v['methods_hmc_within_floor']} of {sets} sample sets sit closer to HMC than that. {verdict} "
            f"R̂ of the predictive (the test images' class probabilities, which no symmetry changes) is "
            f"{_span(v['methods_hmc_rhat_predictive'])}, of the weights {_span(v['methods_hmc_rhat_raw'])} raw and "
            f"{_span(v['methods_hmc_rhat_canonical'])} canonicalised (medians; mixed chains give 1.1 or less): each "
            f"chain stays near the network it started from. Kendall's τ between the checkpoints' ranking and "
            f"HMC's, {v['methods_hmc_tau']:.2f} ± {v['methods_hmc_tau_sd']:.2f}, is what chains started from the "
            f"checkpoints' own recipe give, not a validation; the deep ensemble ranks {ranks} of {sets}. "
            f"SGM − MFVI against HMC is {signed(v['methods_hmc_sgm_raw'], 1)} ± {v['methods_hmc_sgm_raw_sd']:.1f} "
            f"on raw weights and {signed(v['methods_hmc_sgm_removed'], 2)} ± {v['methods_hmc_sgm_removed_sd']:.2f} "
            "with the symmetries removed.",
            "symlab methods --hmc --seed 0 --json (and --seed 1, --seed 2)",
        )
    ]
