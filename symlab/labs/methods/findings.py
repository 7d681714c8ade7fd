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
    """Against the HMC reference, over the seeds of ``reports`` (``summary``: their ``seed_summary``): which sample
    set sits closest (by MMD², symmetries removed), where the deep ensemble ranks, SGM − MFVI before and after the
    symmetries are removed, Kendall's τ between the two references' rankings, and the chains' R̂ (median over the
    weights) raw and canonicalised. The methods page states them for the seeds it shows, the README for the
    shipped ones."""
    rankings = summary["rankings"]
    if not rankings:
        return {"methods_hmc_seeds": 0}
    closest = rankings["closest_to_hmc"]
    top = max(set(closest), key=closest.count)

    def rank(report, key):
        order = sorted(report["rows"], key=lambda row: row["mmd_hmc_no_symmetry"])
        return 1 + [f"{row['method']}/{row['modes']}" for row in order].index(key)

    sgm = {key: mean_sd(values) for key, values in summary["sgm_minus_mfvi"][1].items() if "hmc" in key}
    tau, tau_raw = mean_sd(rankings["kendall_tau"], 1), mean_sd(rankings["kendall_tau_raw"], 1)
    ensemble = f"ensemble/{max(row['modes'] for row in summary['rows'])}"
    return {
        "methods_hmc_seeds": len(closest),
        "methods_hmc_closest": top,
        "methods_hmc_closest_seeds": closest.count(top),
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
        "methods_hmc_rhat_raw": [report["hmc"]["rhat_raw_median"] for report in reports],
        "methods_hmc_rhat_canonical": [report["hmc"]["rhat_canonical_median"] for report in reports],
        "methods_hmc_hops": sum(sum(report["hmc"]["mode_hops"]) for report in reports),
    }


def findings(v: dict) -> list[Finding]:
    every_seed = ", on every seed" if v["methods_gain_every_seed"] else ""
    return [
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
            COMMAND,
        ),
        *hmc_findings(v),
    ]


def _agreement(tau: float) -> str:
    if tau >= 0.7:
        return "rank the methods alike"
    if tau >= 0.3:
        return "rank the methods only partly alike"
    return "rank the methods differently"


def hmc_findings(v: dict) -> list[Finding]:
    """Against the HMC reference, where the shipped comparisons have one."""
    if not v["methods_hmc_seeds"]:
        return []
    seeds, sets = v["methods_hmc_seeds"], v["methods_hmc_sets"]
    closest = v["methods_hmc_closest"].split("/")
    closest = f"{LABELS[closest[0]]} ({'one mode' if closest[1] == '1' else closest[1] + ' modes'})"
    ranks = ", ".join(str(rank) for rank in v["methods_hmc_ensemble_ranks"])
    rhat_raw = "–".join(f"{x:.2f}" for x in (min(v["methods_hmc_rhat_raw"]), max(v["methods_hmc_rhat_raw"])))
    rhat_canonical = "–".join(
        f"{x:.2f}" for x in (min(v["methods_hmc_rhat_canonical"]), max(v["methods_hmc_rhat_canonical"]))
    )
    mixed = max(v["methods_hmc_rhat_canonical"]) < 1.1
    return [
        Finding(
            "methods",
            f"Against HMC, the two references {_agreement(v['methods_hmc_tau'])}"
            + ("." if mixed else ", but HMC's chains have not mixed."),
            f"Scored against full-batch HMC's draws ({seeds} seeds; MMD², symmetries removed), {closest} sits closest on "
            f"{v['methods_hmc_closest_seeds']} of {seeds} seeds and the deep ensemble ranks {ranks} of {sets}. "
            f"Kendall's τ between the checkpoints' ranking and HMC's is {v['methods_hmc_tau']:.2f} ± "
            f"{v['methods_hmc_tau_sd']:.2f} ({v['methods_hmc_tau_raw']:.2f} ± {v['methods_hmc_tau_raw_sd']:.2f} on raw "
            f"weights). SGM − MFVI against HMC is {signed(v['methods_hmc_sgm_raw'], 1)} ± "
            f"{v['methods_hmc_sgm_raw_sd']:.1f} on raw weights and {signed(v['methods_hmc_sgm_removed'], 2)} ± "
            f"{v['methods_hmc_sgm_removed_sd']:.2f} with the symmetries removed. The chains' median R̂ is "
            f"{rhat_raw} raw and {rhat_canonical} canonicalised"
            + (
                ": they agree once the symmetries are removed."
                if mixed
                else ": each chain stays in a mode of its own, so this short CPU reference is provisional."
            ),
            "symlab methods --hmc --seed 0 --json (and --seed 1, --seed 2)",
        )
    ]
