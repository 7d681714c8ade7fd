"""Posterior approximations: which method's weight samples lie closest to a reference posterior (Laurent et al.
2024, §4 and Table 1), with SGM's place among them."""

import contextlib
import json
import math
import time

import altair as alt
import pandas as pd
import streamlit as st

from symlab.labs.methods import LAB, params
from symlab.labs.methods import experiment as ex
from symlab.labs.methods import findings as methods_findings
from symlab.labs.methods.experiment import LABELS, METHODS, PAPER_COLUMNS, MethodsConfig, paper_rows, stage_count
from symlab.runs.registry import RegistryError
from symlab.specs.hmc import HmcConfig
from views.common import binding, charts, memo, runs, tables
from views.common.browser import browser_id

PAGE = LAB.name
COLUMN_NAMES = {
    "mmd": "MMD",
    "mmd_no_symmetry": "MMD, no symmetries",
    "accuracy": "Acc",
    "ece": "ECE",
    "brier": "Brier",
    "aupr": "AUPR",
    "fpr95": "FPR95",
    "id_mi": "IDMI",
    "ood_mi": "OODMI",
    "nll": "NLL",
}
STABILITY_PLOT_PX = 300
PROJECTION_PX = 380
ROW_PX = 34  # a method's row in the dot charts: room for its label at any font size
METRICS = {  # key: (chart title, axis title)
    "mmd": ("MMD² to the reference", "MMD² × 100"),
    "mmd_no_symmetry": ("MMD², symmetries removed", "MMD² × 100"),
    "accuracy": ("Test accuracy", "accuracy (%)"),
    "nll": ("Test NLL", "NLL (nats)"),
    "ece": ("Calibration error (ECE)", "ECE (%)"),
    "brier": ("Brier score", "Brier × 100"),
    "aupr": ("OOD detection: AUPR", "AUPR (%)"),
    "fpr95": ("OOD detection: FPR at 95 % recall", "FPR95 (%)"),
    "id_mi": ("Mutual information, in distribution", "MI (centinats)"),
    "ood_mi": ("Mutual information, out of distribution", "MI (centinats)"),
    "mmd_hmc_no_symmetry": ("MMD² to HMC, no symmetry", "MMD² × 100"),
    "mmd_hmc": ("MMD² to HMC", "MMD² × 100"),
    "agreement_hmc": ("Agreement with HMC's predictive", "agreement (%)"),
    "tv_hmc": ("Total variation to HMC's predictive", "TV × 100"),
}
INTERVAL = "MMD, no symmetries, 95 %"  # the bootstrap interval of the column before it
HMC_COLUMNS = {
    "mmd_no_symmetry": "MMD² to checkpoints, no sym",
    "mmd_hmc_no_symmetry": "MMD² to HMC, no sym",
    "mmd_hmc": "MMD² to HMC",
    "agreement_hmc": "agreement with HMC (%)",
    "tv_hmc": "TV to HMC",
}
SETS = (
    charts.Series("ours, one mode", "#0072B2", marker="circle", line=False),
    charts.Series("ours, several modes", "#D55E00", marker="square", line=False),
    charts.Series("paper, one mode", "#56B4E9", marker="triangle-up", line=False),
    charts.Series("paper, 10 modes", "#E69F00", marker="diamond", line=False),
)
# Okabe–Ito, one colour and one marker per method (a dash per number of modes on the lines).
METHOD_COLOURS = dict(
    zip(METHODS, ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"), strict=True)
)
METHOD_MARKERS = dict(zip(METHODS, ("circle", "square", "diamond", "triangle-up", "cross", "star", "x"), strict=True))


def controls_panel():
    binding.preset_picker(PAGE, binding.page_specs(LAB), params.PRESETS)
    with st.expander("Settings", expanded=False):
        cols = st.columns(2)
        for index, name in enumerate(params.PAGE_FIELDS):
            with cols[index % 2]:
                binding.control_widget(PAGE, MethodsConfig, name)
        st.caption("The HMC reference (with *Reference: HMC too*)")
        cols = st.columns(2)
        for index, name in enumerate(params.SAMPLER_FIELDS):
            with cols[index % 2]:
                binding.control_widget(PAGE, HmcConfig, name)


def explanation():
    with st.expander("What is measured", expanded=False):
        st.markdown(r"""
**The reference posterior** is $R$ networks trained independently by SGD (each its own initialisation and
minibatch order). Each method draws weight samples from one trained start (*one mode*) or from several
independent starts (*several modes*); a deep ensemble is the starts themselves.

**MMD.** For sample sets $X$ and $Y$ of one layer's weights and a kernel $k$,
$\mathrm{MMD}^2 = \mathbb E\,k(x, x') + \mathbb E\,k(y, y') - 2\,\mathbb E\,k(x, y)$ (unbiased estimates),
for 10 Gaussian kernels $e^{-\lVert x-y\rVert_2^2/h^2}$ and 10 Laplace kernels $e^{-\lVert x-y\rVert_1/h}$.
Reported: the median over the 20 kernels, averaged over layers weighted by their parameter counts.

**Laplace** is $\mathcal N(w^\star, (G + \delta I)^{-1})$ at a start $w^\star$: the Gauss–Newton curvature $G$ summed
over 1000 training images and scaled by $N/1000$ to the $N$ images $w^\star$ was trained on, and
$\delta = N\lambda$ from SGD's weight decay $\lambda$, so that data and prior weigh as they did in training.

**Did the networks learn?** Every sample is drawn around the starts; when their median test accuracy is below
50 % (chance: 10 %), a warning above the table says it ranks untrained networks.

**Symmetry removal** (both sets): each hidden unit's incoming weights scaled to norm 1 (its outgoing weights
by the inverse), then each layer's units sorted by their first incoming weight (or the largest); the
convnet's channels move only within their group of the grouped convolution, or a whole group at once.
The function each network computes is unchanged.

**Reference: HMC** (optional) runs chains on the posterior,
$\log p(w\mid D) = \sum_i \log p(y_i\mid x_i, w) - \lVert w\rVert^2/(2v)$ with $v = 1/(N\lambda)$, by full-batch
Hamiltonian Monte Carlo: chains from independently trained networks, the mass matrix first guessed from the diagonal
empirical Fisher, then tuned in warm-up: once its chains mix, their draws are the posterior's. Each method is
scored against its draws too: MMD², and agreement
$\frac1n\sum_i[\arg\max \bar p_i = \arg\max \bar q_i]$ and total variation
$\frac1n\sum_i\frac12\sum_c|\bar p_{ic} - \bar q_{ic}|$ with HMC's predictive $\bar q$ (Izmailov et al. 2021).

**Predictions** average the samples' probabilities $\bar p = \frac1S\sum_s p_s$: accuracy, NLL, ECE (15 bins),
Brier $\sum_c(\bar p_c - [c=y])^2$; OOD detection scores $1-\max_c \bar p_c$ on letters A–J (FashionMNIST,
the paper's, cannot be downloaded here); mutual information $H[\bar p] - \frac1S\sum_s H[p_s]$.
""")


# ---------------------------------------------------------------------------------------------
# Which results to show
# ---------------------------------------------------------------------------------------------


def chosen_report(values, config: MethodsConfig, done, shipped) -> tuple[dict | None, str]:
    """The report to show and where it comes from: the run named in the link, else the latest finished run with
    these settings, else the shipped comparison with these settings."""
    if values["run"]:
        named = [run for run in done if run.id == values["run"]]
        if named:
            return named[0].result, f"run #{named[0].id}: {named[0].config.label}"
        st.warning(f"Run #{values['run']} is not a finished comparison here; showing the settings' results instead.")
    same = [run for run in done if ex.answers(run.config, config)]
    if same:
        return same[-1].result, f"run #{same[-1].id}: {same[-1].config.label}"
    for report in shipped:
        if ex.answers(MethodsConfig.from_dict(report["config"]), config):
            return report, f"the comparison shipped with the app: {config.label}"
    return None, ""


def seed_reports(report: dict, name: tuple, done, shipped) -> tuple[tuple, list[dict]]:
    """``report`` (named ``name``: :func:`report_name`) and every other finished or shipped comparison that differs
    from it only by its seed, one per seed (a run of one's own before a shipped one), and what names them: a run's
    id, or "shipped" and its seed (a finished run's report does not change)."""
    config = MethodsConfig.from_dict(report["config"])
    found = {config.seed: (name, report)}
    named = [(("run", run.id), run.result) for run in reversed(done)] + [
        (("shipped", r["config"]["seed"]), r) for r in shipped
    ]
    for other_name, other in named:
        seed = other["config"]["seed"]
        if seed not in found and ex.same_but_seed(MethodsConfig.from_dict(other["config"]), config):
            found[seed] = (other_name, other)
    chosen = [found[seed] for seed in sorted(found)]
    return tuple(name for name, _ in chosen), [other for _, other in chosen]


def report_name(report: dict, done) -> tuple:
    """What names ``report``: the id of the finished run it is the result of, else "shipped" and its seed."""
    return next((("run", run.id) for run in done if run.result is report), ("shipped", report["config"]["seed"]))


@memo.cached(16)
def ranking_of(name: tuple, _report: dict) -> dict:
    """:func:`symlab.labs.methods.experiment.ranking_agreement` of the report ``name`` names (:func:`report_name`),
    computed once for every session."""
    return ex.ranking_agreement(_report)


@memo.cached(16)
def seed_summary_of(names: tuple, _reports: list[dict]) -> dict:
    """:func:`symlab.labs.methods.experiment.seed_summary` of the reports ``names`` names (:func:`seed_reports`),
    computed once for every session: a sixth of the page's run."""
    return ex.seed_summary(_reports)


def spread(values, scale: float = 100.0, digits: int = 1) -> str:
    return tables.with_spread(*methods_findings.mean_sd(values, scale), len(values), digits, "+")


def floors_text(summary: dict) -> str:
    """The references' noise floors over the seeds, and whether the closest set to each can be named."""
    parts = []
    for key, reference in (("closest", "checkpoints"), ("closest_hmc", "HMC draws")):
        claim = summary.get(key) or {}
        if claim.get("floor") is None:
            continue
        named = "can" if claim["distinguishable"] else "cannot"
        parts.append(
            f"The {reference}' own halves score up to {100 * claim['floor']:.1f} (their noise floor); "
            f"{set_name(claim['closest'])} leads {set_name(claim['runner_up'])} by {100 * claim['lead']:.1f}, "
            f"so the closest set to the {reference} {named} be named."
        )
    return " ".join(parts)


def across_seeds(report_names: tuple, reports: list[dict]) -> None:
    """The two questions answered over the seeds at hand (``report_names``: :func:`seed_reports`'): paired
    differences (mean ± standard deviation), the rows' means ± standard error and the references' noise floors."""
    summary = seed_summary_of(report_names, reports)
    seeds = ", ".join(str(r["config"]["seed"]) for r in reports)
    st.subheader(f"Across {len(reports)} seeds ({seeds})")
    if summary["untrained_seeds"]:
        st.warning(
            f"The starts of seed {', '.join(map(str, summary['untrained_seeds']))} did not learn: the "
            "differences below include untrained networks.",
            icon=":material/warning:",
        )
    lines = []
    for method, differences in summary["multi_minus_single"].items():
        lower = sum(d < 0 for d in differences)
        lines.append(f"{LABELS[method]} {spread(differences)} (lower in {lower} of {len(differences)})")
    st.markdown(
        "**Do several modes beat one?** The several-mode MMD² minus the one-mode MMD², symmetries removed, "
        "× 100: " + "; ".join(lines) + "."
    )
    for modes, differences in summary["sgm_minus_mfvi"].items():
        st.markdown(
            f"**SGM against MFVI, {'one mode' if modes == 1 else f'{modes} modes'}** (SGM − MFVI, × 100): "
            f"MMD² {spread(differences['mmd'])} on the weights as they are, "
            f"{spread(differences['mmd_no_symmetry'])} with the symmetries removed; accuracy "
            f"{spread(differences['accuracy'])} points, NLL {spread(differences['nll'], 1.0, 3)} nats, "
            f"ECE {spread(differences['ece'])} points."
        )
    if summary["rankings"]:
        # The lab's finding measured on these seeds: on the shipped ones, the README's words and numbers.
        for finding in methods_findings.hmc_findings(methods_findings.hmc_numbers(reports, summary)):
            st.markdown(finding.markdown())
    hmc_columns = [key for key in HMC_COLUMNS if key in ex.HMC_KEYS] if summary["rankings"] else []
    names = {**COLUMN_NAMES, **HMC_COLUMNS}
    frame = pd.DataFrame(
        [
            {
                "method": LABELS[row["method"]],
                "modes": row["modes"],
                "seeds": row["seeds"],
                **{
                    names[key]: (
                        f"{100 * row[key]:.1f} ± {100 * row[key + '_sd'] / math.sqrt(row['seeds']):.1f}"
                        if row[key + "_sd"] is not None
                        else f"{100 * row[key]:.1f}"
                    )
                    for key in (*PAPER_COLUMNS, *hmc_columns)
                },
            }
            for row in summary["rows"]
        ]
    )
    tables.show(frame, hide_index=True, width="stretch")
    st.caption("Mean ± standard error over the seeds (× 100). " + floors_text(summary))
    charts.csv_download(frame, "methods_across_seeds.csv", "Table as CSV", key="methods.seeds_csv")


# ---------------------------------------------------------------------------------------------
# Table and charts
# ---------------------------------------------------------------------------------------------


set_name = methods_findings.set_label


def row_label(row) -> str:
    return set_name(f"{row['method']}/{row['modes']}")


def table(report) -> pd.DataFrame:
    """Our rows (× 100 as Table 1 prints them, NLL in nats), each followed by the paper's row for the same
    method and number of modes."""
    paper = {(row["method"], row["modes"]): row for row in report["paper_rows"]}
    lines = []
    for row in report["rows"]:
        lines.append(
            {
                "method": LABELS[row["method"]],
                "modes": row["modes"],
                "source": "ours",
                **{key: 100 * row[key] for key in PAPER_COLUMNS},
                "nll": row["nll"],
                INTERVAL: interval_text(row.get("mmd_no_symmetry_interval")),
            }
        )
        theirs = paper.get((row["method"], 1 if row["modes"] == 1 else 10))
        if theirs:
            lines.append(
                {
                    "method": LABELS[row["method"]],
                    "modes": theirs["modes"],
                    "source": "paper",
                    **{key: theirs[key] for key in PAPER_COLUMNS},
                    "nll": None,
                    INTERVAL: tables.MISSING,
                }
            )
    return pd.DataFrame(lines).rename(columns=COLUMN_NAMES)


def reference_floor_text(report) -> str:
    """The checkpoints' noise floor: what their own two halves score against each other."""
    if "reference_split_half_mmd" not in report:
        return ""
    return (
        f"Noise floor: the checkpoints' own halves score {100 * report['reference_split_half_mmd']:.1f} "
        f"(MMD², no symmetries; 95 % {interval_text(report['reference_split_half_mmd_interval'])}); a set "
        "closer than that cannot be told from the reference."
    )


def interval_text(interval) -> str:
    """A 95 % bootstrap interval × 100, as "[low, high]"; a dash where the report has none."""
    return (
        tables.MISSING if interval is None else f"[{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]".replace("-", "−")
    )


def metric_frame(report, metric: str) -> pd.DataFrame:
    scale = 1.0 if metric == "nll" else 100.0
    points = [
        {
            "method": LABELS[row["method"]],
            "series": SETS[0 if row["modes"] == 1 else 1].label,
            "value": scale * row[metric],
        }
        for row in report["rows"]
    ]
    if metric in PAPER_COLUMNS:
        points += [
            {"method": LABELS[row["method"]], "series": SETS[2 if row["modes"] == 1 else 3].label, "value": row[metric]}
            for row in paper_rows()
        ]
    return pd.DataFrame(points)


@memo.cached(64)
def metric_spec(metric: str, present: bool) -> dict:
    title, axis = METRICS[metric]
    sets = SETS if metric in PAPER_COLUMNS else SETS[:2]  # the paper has no rows against HMC
    channels = charts.series_channels(sets)
    chart = (
        alt.Chart(alt.NamedData("points"))
        .mark_point(size=110, strokeWidth=2, filled=True, opacity=0.9)
        .encode(
            x=charts.quantity("value", axis),
            y=alt.Y("method:N", title=None, sort=[LABELS[m] for m in METHODS]),
            color=channels["color"],
            shape=channels["shape"],
            tooltip=["method:N", "series:N", "value:Q"],
        )
    )
    spec = charts.vega_spec(chart, title=title, height=ROW_PX * len(METHODS) + 150)
    return charts.fitted_legend(spec, [s.label for s in sets])


def metric_chart(container, report, metric: str, key: str) -> None:
    frame = metric_frame(report, metric)
    charts.vega_chart(
        container,
        metric_spec(metric, charts.presenting()),
        {"points": frame},
        key,
        alt_text=f"{METRICS[metric][0]} per method, ours and the paper's",
    )
    with container:
        charts.csv_download(frame, f"methods_{metric}.csv", "Data as CSV", key=f"{key}.csv")


def stability_frame(report) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"series": row_label(row), "x": int(count), "y": 100 * value}
            for row in report["rows"]
            for count, value in row["mmd_by_reference"].items()
        ]
    )


def stability_series(rows: tuple[tuple[str, int], ...]) -> list[charts.Series]:
    """A line per (method, modes): the method's colour and marker, solid for one mode, dashed for several."""
    return [
        charts.Series(
            row_label(dict(method=method, modes=modes)),
            METHOD_COLOURS[method],
            "solid" if modes == 1 else "dash",
            marker=METHOD_MARKERS[method],
        )
        for method, modes in rows
    ]


@memo.cached(16)
def stability_spec(rows: tuple[tuple[str, int], ...], present: bool) -> dict:
    series = stability_series(rows)
    chart = charts.altair_lines(
        series,
        charts.quantity("x", "reference checkpoints", integer=True),
        charts.quantity("y", "MMD² × 100, symmetries removed", channel=alt.Y),
    )
    # Room for the legend on a phone, one entry a row; a wider column gives the plot what the legend leaves.
    height = STABILITY_PLOT_PX + charts.LEGEND_ROW_HEIGHT * len(series)
    return charts.fitted_legend(
        charts.vega_spec(chart, title="Does the ranking hold as the reference grows?", height=height),
        [s.label for s in series],
    )


def projection_frame(report, view: str, sample_set: str) -> pd.DataFrame:
    points = report["projection"][view]
    frames = [pd.DataFrame({"x": points["reference"][0], "y": points["reference"][1], "series": "reference"})]
    if sample_set in points:
        frames.append(pd.DataFrame({"x": points[sample_set][0], "y": points[sample_set][1], "series": "samples"}))
    return pd.concat(frames, ignore_index=True)


PROJECTION_SERIES = (
    charts.Series("reference", "#999999", marker="circle", line=False),
    charts.Series("samples", "#D55E00", marker="cross", line=False),
)


@memo.cached(8)
def projection_spec(title: str, present: bool) -> dict:
    channels = charts.series_channels(PROJECTION_SERIES)
    chart = (
        alt.Chart(alt.NamedData("points"))
        .mark_point(size=50, strokeWidth=1.5, opacity=0.8)
        .encode(
            x=charts.quantity("x", "first principal axis", axis=dict(labelFlush=True)),
            y=charts.quantity("y", "second principal axis", channel=alt.Y),
            color=channels["color"],
            shape=channels["shape"],
        )
    )
    # Not square: the two axes' scales differ (the first principal axis has the larger spread).
    return charts.fitted_legend(
        charts.vega_spec(chart, title=title, height=PROJECTION_PX), [series.label for series in PROJECTION_SERIES]
    )


def projection_charts(report, key: str) -> None:
    if not report.get("projection"):
        return
    keys = [key for key in report["projection"]["raw"] if key != "reference"]
    names = {key: "HMC's draws" if key == "hmc" else set_name(key) for key in keys}
    with binding.controls_area("methods-projection"):
        chosen = st.selectbox(
            "Samples shown against the reference", keys, format_func=lambda shown: names[shown], key=f"{key}.set"
        )
    if chosen is None:  # no sets drawn beside the reference
        return
    cols = st.columns(2)
    for col, view, title in ((cols[0], "raw", "Weights as they are"), (cols[1], "canonical", "Symmetries removed")):
        frame = projection_frame(report, view, chosen)
        charts.vega_chart(
            col,
            projection_spec(title, charts.presenting()),
            {"points": frame},
            f"{key}.{view}",
            alt_text=f"{title}: reference checkpoints and {names[chosen]} on two principal axes",
        )
        with col:
            charts.csv_download(frame, f"methods_projection_{view}.csv", "Data as CSV", key=f"{key}.{view}.csv")
    st.caption(
        "Each network is a point on the reference's two principal axes (of its weights as they are, "
        "or with the symmetries removed). Removal gathers equivalent networks: compare the reference's "
        "spread in *Weights as they are* and in *Symmetries removed*."
    )


def hmc_table(report) -> pd.DataFrame:
    """Each sample set, and the reference checkpoints themselves, against HMC's draws (× 100)."""
    run = report["hmc"]
    lines = [{**row, "method": LABELS[row["method"]]} for row in report["rows"]]
    lines.append({**run["checkpoints"], "method": "Reference checkpoints", "modes": report["reference_checkpoints"]})
    if "split_half_mmd" in run:  # the noise floor: what HMC's own halves score against each other
        floor = {"mmd_hmc": run["split_half_mmd_raw"], "mmd_hmc_no_symmetry": run["split_half_mmd"]}
        halves = {**floor, "mmd_hmc_no_symmetry_interval": run["split_half_mmd_interval"]}
        lines.append({**halves, "method": "HMC's own halves (noise floor)", "modes": run["chains"] // 2})
    frame = pd.DataFrame(lines).reindex(columns=["method", "modes", *HMC_COLUMNS, "mmd_hmc_no_symmetry_interval"])
    numbers = list(HMC_COLUMNS)
    frame[numbers] = 100 * frame[numbers].astype(float)
    frame["mmd_hmc_no_symmetry_interval"] = [
        interval_text(value if isinstance(value, list) else None) for value in frame["mmd_hmc_no_symmetry_interval"]
    ]
    return frame.rename(columns={**HMC_COLUMNS, "mmd_hmc_no_symmetry_interval": "MMD² to HMC, no sym, 95 %"})


def diagnostics_table(run) -> pd.DataFrame:
    rows = [  # over the weights
        ("R̂, largest", "rhat_{}", 3),
        ("R̂, median", "rhat_{}_median", 3),
        ("ESS, smallest", "ess_{}", 0),
        ("ESS, median", "ess_{}_median", 0),
    ]
    return pd.DataFrame(
        [
            {
                "over the weights": name,
                "raw": round(run[key.format("raw")], digits),
                "symmetries removed": round(run[key.format("canonical")], digits),
            }
            for name, key, digits in rows
        ]
    )


def convergence_verdict(report) -> str:
    """One line a student can read: is this HMC run a gold standard, and the numbers that say so."""
    run = report["hmc"]
    claim = ex.closest_claim([report], "mmd_hmc_no_symmetry", ex.hmc_floor)
    low, high = run["split_half_mmd_interval"]
    numbers = (
        f"R̂ of the predictive (the test images' class probabilities, which no symmetry changes) is "
        f"{run['rhat_predictive']:.2f} (median; {100 * run['rhat_predictive_share_mixed']:.0f} % at or below "
        f"{ex.RHAT_MIXED}), and HMC's own halves sit {100 * run['split_half_mmd']:.1f} apart "
        f"(MMD² × 100, symmetries removed; 95 % {100 * low:.1f}–{100 * high:.1f}), against a lead of "
        f"{100 * claim['lead']:.1f} for the closest set, {set_name(claim['closest'])}, over "
        f"{set_name(claim['runner_up'])}."
    )
    if run["converged"]:
        return f"**Converged: this reference can rank the methods.** {numbers}"
    return (
        "**Not converged: this reference cannot yet rank the methods**, and no set is named closest to it. "
        f"{numbers} Converged means R̂ ≤ {ex.RHAT_MIXED} and halves closer than that lead."
    )


def hmc_section(name: tuple, report) -> None:
    """Both references side by side, HMC's scores, and how its chains fared (``name``: the report's,
    :func:`report_name`)."""
    run = report.get("hmc")
    st.subheader("Against HMC: the posterior itself" if run and run.get("converged") else "Against HMC")
    if not run:
        st.caption(
            "This comparison has no HMC reference. Switch on *Reference: HMC too* (or pick the preset *Against HMC*; "
            "`python -m symlab methods --hmc`) to score every method against full-batch HMC's draws as well."
        )
        return
    st.markdown(
        f"{run['chains']} chains, {run['draws_per_chain']} draws each after {run['warmup']} warm-up transitions "
        f"(≤ {run['max_leapfrog']} leapfrog steps each; acceptance {run['acceptance']:.2f} against a "
        f"target of {run['target_accept']:g}, {run['divergences']} divergent), each chain from its own SGD-trained "
        f"network. This run took {tables.duration(run['seconds'])} on {run.get('device', 'cpu')}; on a GPU, "
        "`benchmarks/gpu_check.py` times the same gradient, which no GPU has "
        "measured for this page yet. Agreement and total variation (TV) compare the sample set's predictive "
        "with HMC's on the test images (Izmailov et al. 2021)."
    )
    frame = hmc_table(report)
    # The checkpoints have no MMD to themselves: a dash, not "None".
    tables.show(tables.formatted(frame, dict.fromkeys(HMC_COLUMNS.values(), ".1f")), hide_index=True, width="stretch")
    charts.csv_download(frame, "methods_against_hmc.csv", "Table as CSV", key="methods.hmc_csv")
    if "split_half_mmd" in run:
        st.markdown(convergence_verdict(report))
    ranking = ranking_of(name, report)
    st.markdown(
        f"**Do the references agree?** Kendall's τ between the two rankings: {ranking['kendall_tau']:.2f} with the "
        f"symmetries removed, {ranking['kendall_tau_raw']:.2f} on the weights as they are. The chains start from "
        "networks trained by the checkpoints' own recipe, so a τ near 1 is expected, not a validation."
    )
    diagnostics = diagnostics_table(run)
    tables.show(diagnostics, hide_index=True, width="stretch")
    charts.csv_download(diagnostics, "methods_hmc_diagnostics.csv", "Diagnostics as CSV", key="methods.hmc_diag_csv")
    mixed = run["rhat_canonical_median"] <= ex.RHAT_MIXED
    st.caption(
        "Split-R̂ (rank-normalised) and bulk ESS of every weight. R̂ near 1 says the chains agree; here the median "
        f"is {run['rhat_canonical_median']:.2f} with the symmetries removed: "
        + ("they agree. " if mixed else "they do not. ")
        + "Raw weights sit "
        "in permuted copies of one network, so R̂ on them can be far above 1 where the chains agree on everything "
        f"the network computes. R̂ of the log density, which no "
        f"symmetry changes: {run['rhat_log_density']:.2f}. Moves between permuted copies per chain: "
        f"{', '.join(map(str, run['mode_hops']))} ({run['copies_visited']} copies visited)."
    )


def shipped_reports() -> list[dict]:
    """The shipped comparisons (:func:`symlab.labs.methods.experiment.shipped_reports`), read once per page process
    and again only when a file changes: three JSON files parsed on every run were a sixth of the page's results."""
    stamp = []
    for path in sorted(ex.SHIPPED_REPORTS.glob("seed*.json")):
        with contextlib.suppress(OSError):  # gone since the listing: the reading leaves it out
            found = path.stat()
            stamp.append((path.name, found.st_mtime_ns, found.st_size))
    return shipped_reports_as_of(tuple(stamp))


@memo.cached(2)
def shipped_reports_as_of(stamp: tuple) -> list[dict]:
    return ex.shipped_reports()


def finished_results():
    try:
        return [run for run in runs.registry().runs(lab=LAB.name) if run.status == "finished" and run.result]
    except RegistryError as error:
        st.warning(runs.explain(error))
        return []


def results(values, config: MethodsConfig) -> None:
    done, shipped = finished_results(), shipped_reports()
    report, source = chosen_report(values, config, done, shipped)
    if report is None:
        st.info(
            "No finished comparison with these settings yet: launch one in the next tab (or with "
            "`python -m symlab methods`), or pick a preset."
        )
        return
    st.caption(f"Showing {source}; {report['samples_per_method']} samples per method.")
    if report.get("trained") is False:
        st.warning(f"**These networks did not learn.** {report['trained_reason']}", icon=":material/warning:")
    frame = table(report)
    tables.show(
        tables.formatted(frame, {"NLL": ".3f"}),
        hide_index=True,
        width="stretch",
        column_config={COLUMN_NAMES[key]: st.column_config.NumberColumn(format="%.1f") for key in PAPER_COLUMNS},
    )
    st.caption(
        "Every column × 100 as the paper's Table 1 prints it (MNIST, OptuNet); NLL in nats (the paper "
        "reports none). The paper's OOD set is FashionMNIST, ours letters: compare their OOD columns "
        "loosely. " + reference_floor_text(report)
    )
    cols = st.columns(2)
    charts.csv_download(frame, "methods_table.csv", "Table as CSV", key="methods.table_csv")
    cols[1].download_button(
        "Report as JSON",
        json.dumps(report),
        file_name="methods_report.json",
        mime="application/json",
        key="methods.json",
        icon=":material/download:",
        on_click="ignore",
    )
    with binding.controls_area("methods-metric"):
        present = [key for key in METRICS if key in report["rows"][0]]
        metric = st.selectbox("Metric", present, format_func=lambda key: METRICS[key][0], key="methods.metric")
    cols = st.columns(2)
    metric_chart(cols[0], report, "mmd_no_symmetry", "methods.mmd")
    if report.get("hmc"):  # the two references side by side, the chosen metric below
        metric_chart(cols[1], report, "mmd_hmc_no_symmetry", "methods.mmd_hmc")
        metric_chart(st.container(), report, metric, "methods.chosen")
    else:
        metric_chart(cols[1], report, metric, "methods.chosen")
    frame = stability_frame(report)
    rows = tuple((row["method"], row["modes"]) for row in report["rows"])
    charts.vega_chart(
        st,
        stability_spec(rows, charts.presenting()),
        {"lines": frame},
        "methods.stability",
        alt_text="MMD without symmetries against the number of reference checkpoints, per method",
    )
    charts.csv_download(frame, "methods_reference_counts.csv", "Data as CSV", key="methods.stability_csv")
    projection_charts(report, "methods.projection")
    name = report_name(report, done)
    hmc_section(name, report)
    report_names, reports = seed_reports(report, name, done, shipped)
    if len(reports) > 1:
        across_seeds(report_names, reports)
    else:
        st.caption("Launch the same settings with other seeds to see the spread over seeds here.")


# ---------------------------------------------------------------------------------------------
# Launch and watch
# ---------------------------------------------------------------------------------------------


def launch(config: MethodsConfig) -> None:
    try:
        run_id = runs.launch(LAB.name, config, binding.server_settings().runs)
    except (ValueError, RegistryError) as error:
        st.error(f"Not launched: {runs.explain(error)}")
        return
    runs.launched(run_id, "Comparison", config.label)


def stage_text(run) -> str:
    return f"stage {run.epoch} of {stage_count(run.config)}"


def runs_frame(all_runs, owner: str) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "run": run.id,
                "yours": runs.is_yours(run, owner),
                "status": run.status,
                "settings": run.config.label,
                "progress": run.progress,
                "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created)),
                "note": binding.for_visitors(run.message),
            }
            for run in reversed(all_runs)
        ]
    )


def live_runs() -> list | None:
    """The comparisons' table; the lab's runs (None: not read)."""
    all_runs = runs.lab_runs(PAGE, LAB.name, binding.server_settings().runs)
    if all_runs is None:
        return None
    if not all_runs:
        st.info("No comparisons yet: launch one above.")
        return all_runs
    owner = browser_id()
    runs.run_controls(PAGE, all_runs, owner, binding.server_settings().runs, stage_text)
    frame = runs_frame(all_runs, owner)
    tables.show(
        frame,
        hide_index=True,
        width="stretch",
        column_config={"progress": st.column_config.ProgressColumn("progress", min_value=0, max_value=1)},
    )
    charts.csv_download(frame, "methods_runs.csv", "Runs as CSV", key="methods.runs_csv")
    return all_runs


def launch_panel(config: MethodsConfig) -> None:
    st.markdown(runs.where_runs_train())
    with binding.controls_area("methods-launch"):
        if st.button("Launch this comparison", type="primary", icon=":material/rocket_launch:", key="methods.launch"):
            launch(config)
    st.caption(
        "Each method is a stage: the progress bar moves as each finishes. "
        f"This server: {binding.server_settings().runs.describe(mnist_shapes=False)}."
    )
    runs.lecturer_panel(PAGE)
    runs.live_panel(PAGE, live_runs)


def main():
    values = binding.start_page(
        PAGE,
        binding.page_specs(LAB),
        "Posterior approximations",
        "Laurent et al. 2024, §4 and Table 1: which method's samples lie closest to a "
        "reference posterior of independently trained networks, with and without the "
        "weight-space symmetries?",
        controls_panel,
    )
    try:
        config = params.config_from(values)
    except ValueError as error:
        st.error(binding.for_visitors(str(error)))
        st.stop()
    explanation()
    results_tab, runs_tab = st.tabs(["Results", "Launch and watch"])
    with results_tab:
        results(values, config)
    with runs_tab:
        launch_panel(config)


if __name__ == "__main__":  # run as a script: AppTest.from_file, `streamlit run views/<lab>.py`
    main()
