"""MNIST lab: launch MFVI and SGM runs, watch them train, compare widths (Gelberg et al. §5, Table 1)."""

import textwrap
import time
from dataclasses import dataclass
from typing import Any

import altair as alt
import pandas as pd
import pyarrow as pa
import streamlit as st

from symlab.labs.mnist import LAB, params, study
from symlab.labs.mnist import experiment as mnist_experiment
from symlab.labs.mnist.experiment import MnistConfig, resolve_device
from symlab.labs.mnist.table import bound_gain_rows, results_table, same_as_mfvi, table_verdict, trained_as_mfvi
from symlab.lib import mnist_data
from symlab.lib.blocks import PRIOR_KL_PER_PARAMETER
from symlab.runs.registry import RegistryError
from symlab.specs import controls, settings, urlstate
from symlab.specs.run_kind import ACTIVE
from views.common import binding, charts, files, memo, runs, tables
from views.common.browser import browser_id

PAGE = LAB.name
METHOD_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000")
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "star")  # a third cue besides colour and dash


def data_problems() -> list[str]:
    return mnist_data.check_mnist_once(settings.mnist_directory())  # read once by the server's warm-up


def config_from(values, method=None) -> MnistConfig:
    fields = controls.config_values(MnistConfig, values, params.PAGE_FIELDS)
    return MnistConfig(**{**fields, "method": method or fields["method"]}).validate()


def compare_tokens(values) -> list[str]:
    """The runs the link compares, by their public tokens."""
    return urlstate.list_items(values["compare"])


RANGE_NOTICES = "mnist.range_notices"  # widget key -> (the value it was set to, what was typed and why)


def keep_in_range(key: str, spec: controls.Control, capped: bool) -> None:
    """A number box's callback: a value outside the range (the server's cap included) becomes the nearest end
    of it, noted under the box."""
    notices = st.session_state.setdefault(RANGE_NOTICES, {})
    notices.pop(key, None)
    value = st.session_state[key]
    if value is None:
        return
    kept = min(max(value, spec.low), spec.high)
    if kept != value:
        st.session_state[key] = kept
        cap = f"; {spec.shown(spec.high)} is this server's cap" if capped and value > spec.high else ""
        notices[key] = (
            kept,
            f"{spec.label}: {spec.shown(value)} is outside {spec.shown(spec.low)} to "
            f"{spec.shown(spec.high)}{cap}. Set to {spec.shown(kept)}.",
        )


def number_control(name: str, cap: float | None = None, **options):
    """A declared number field's box, its range checked here rather than in the browser: Streamlit's own check
    leaves a typed value outside the range in the box while the previous value stays in use. So the box takes
    any number and :func:`keep_in_range` brings it back into the range: the box shows what will run."""
    declared = controls.declaration(MnistConfig, name)
    spec = controls.capped(declared, cap)
    key = binding.widget_key(PAGE, spec.url)
    text = f"{declared.help} From {spec.shown(spec.low)} to {spec.shown(spec.high)}."
    if spec.high != declared.high:
        beyond = "has no such cap" if declared.high is None else f"goes up to {declared.shown(declared.high)}"
        text += f" This page allows at most {spec.shown(cap)}; the command line (`python -m symlab`) {beyond}."
    number = int if spec.kind == "int" else float
    shown: dict[str, Any] = {"format": spec.format} if spec.format else {}
    st.number_input(
        spec.label,
        step=number(spec.nudge or spec.step or 1),
        key=key,
        help=text,
        on_change=keep_in_range,
        args=(key, spec, spec.high != declared.high),
        **shown,
        **options,
    )
    kept, notice = st.session_state.get(RANGE_NOTICES, {}).get(key, (None, None))
    if notice and st.session_state[key] == kept:  # until the box changes again
        st.warning(notice, icon=":material/straighten:")
    return st.session_state[key]


def control(name: str, **options):
    """A declared field's widget: a number box with its range kept here (:func:`number_control`), any other
    widget as every page draws it."""
    if controls.declaration(MnistConfig, name).widget_kind == "number":
        return number_control(name, **options)
    return binding.control_widget(PAGE, MnistConfig, name, **options)


def controls_panel():
    caps = params.caps(binding.server_settings().runs)
    with st.sidebar:
        st.subheader("Presets")
        binding.preset_picker(PAGE, binding.page_specs(LAB), params.PRESETS)
        st.subheader("Network")
        control("hidden", cap=caps["hidden"])
        control("depth", cap=caps["depth"])
        sgm = control("method", format_func=lambda m: {"mfvi": "MFVI", "sgm": "SGM"}[m]) == "sgm"
        infonce = (
            control(
                "mi",
                disabled=not sgm,
                format_func=lambda m: {"infonce": "InfoNCE Î_K", "blocks": "Blocks I_H"}[m],
            )
            == "infonce"
        )
        control("K", disabled=not (sgm and infonce))
        control("block_size", disabled=not (sgm and not infonce))
        control("rebuild_every", disabled=not (sgm and not infonce))
        st.subheader("Training")
        control("epochs", cap=caps["epochs"])
        control("estimator")
        for name in ("train_subset", "batch_size", "lr"):
            control(name)
        control("lr_schedule")
        control("sd_fit")
        for name in ("prior_scale", "init_sd", "samples", "eval_every", "seed"):
            control(name)
        binding.new_seed_button(PAGE)
        control("device")


def explanation():
    with st.expander("What is being trained", expanded=False):
        st.markdown(
            "A Bayesian MLP 784 → h → 10 (ReLU) with an isotropic Gaussian prior N(0, p²I) and a mean-field "
            "Gaussian posterior q = N(μ, diag σ²). **MFVI** maximises the ELBO; **SGM** maximises the bound of "
            "the symmetrised posterior q_G = (1/|G|) Σ_g q(g⁻¹ω), G the permutations of the hidden units:"
        )
        st.latex(
            r"\mathrm{ELBO}_G = \mathrm{ELBO} + I(\omega; g) \;\ge\; \mathrm{ELBO} + \hat I_K,\qquad "
            r"\hat I_K = \log \frac{K\, q(\omega)}{q(\omega) + \sum_{k=1}^{K-1} q(g_k^{-1}\omega)}"
        )
        st.markdown(
            "with K − 1 random permutations g_k per step (Thm 4.3; Î_K ≤ min(I, log K)). The K log-densities "
            "come from a pairwise cost matrix between the sampled units and the mean units, "
            "C[j, k] = Σ (ω_j − μ_k)² / σ_k², so K costs O(h²d + Kh), not K passes over the weights. "
            "A uniform permutation moves almost every unit, so once any units are apart its term is e^(−thousands): "
            "Î_K = log K exactly, with no gradient, and SGM trains exactly like MFVI with the same seed."
        )
        st.markdown(
            "**Blocks** symmetrise over a subgroup H instead: permutations within blocks of B mutually close "
            "units (greedy on the Jeffreys divergence between units' factors of q, rebuilt every N steps). "
            "Symmetrising q_H over G gives q_G again, so the bound stays valid at every θ, and under mean-field q "
            "it factorises over blocks, each an exact log-sum over its B! permutations (no permutations are "
            "sampled):"
        )
        st.latex(
            r"\mathrm{ELBO} + I_H \;\le\; \mathrm{ELBO}_G \;\le\; \log p(\mathcal D),\qquad "
            r"\hat I_H(\omega) = \sum_{b}\Big[\log B_b! - \log\!\sum_{\pi \in S(B_b)} "
            r"e^{\ell_\pi - \ell_{\mathrm{id}}}\Big],\quad \ell_\pi = -\tfrac12 \sum_{j \in B_b} C[j, \pi(j)]"
        )
        st.markdown(
            "**Gradient estimators** of the expected minibatch NLL, all unbiased: *reparam* draws ω = μ + σ ⊙ ε once "
            "per step for the whole minibatch; *local* draws each example's pre-activations from their Gaussian, "
            "a = hμ_Wᵀ + μ_b + √(h² σ_W²ᵀ + σ_b²) ⊙ ξ (no weight draw: SGM's Î keeps one of its own); *flipout* "
            "draws one perturbation σ ⊙ ε and flips its signs per example on its inputs and outputs. Per-example "
            "noise averages out over the minibatch, so local and flipout lower the gradient's variance, at the cost "
            "of a second matrix product per layer."
        )
        st.markdown(WHAT_TO_EXPECT)
        st.markdown(
            "A block's term is log B! (no gradient) when its units are far apart, and 0 when q is invariant on it "
            "(identical units): its gradient pushes close units apart, exactly where q would sit between "
            "equivalent modes. With several hidden layers the blocks alternate between the odd and the even "
            "layers (adjacent layers share a weight matrix). "
            "Per epoch: the train ELBO (running estimate over the epoch's minibatches), test accuracy, NLL and "
            "expected calibration error (15 bins) of the predictive averaged over M weight samples, and for every "
            "run how close q's units are: the Jeffreys divergence KL(q_j‖q_k) + KL(q_k‖q_j) from each unit to its "
            "nearest other unit (min and median), the units at the prior (mean KL to the prior below "
            f"{PRIOR_KL_PER_PARAMETER:g} nats per parameter), and I_H of greedy blocks measured on q."
        )


STUDY_READING = """
Every run fits σ by curvature and μ by Adam on a cosine schedule, for 4 000 steps (500 and 2 000 images) or
8 000 (10 000 and all 60 000), 3 seeds, SGM paired with MFVI on the same minibatches and noise; the
convergence test is applied to every run (the *converged* column). What it says:

- **Converged MFVI prunes.** Its σ reaches the prior for most weights (median σ 0.96–1.0 up to 2 000 images) and most hidden
  units sit at the prior: 965 of 1 024 with 500 images, about 190 of 256 with 10 000. Those units are
  copies of one another, so MFVI's closest units are 1–3 nats apart, and symmetrising its q over pairs of
  close units would add 209 nats to its bound at width 1 024 with 500 images (I_H = 0.59 log|H|).
- **The block term acts there, on the pruned units**, at 97–98 % of steps, and SGM's bound ELBO + Î beats
  MFVI's ELBO by up to +148 nats (width 1 024, 500 images, B = 4) — less than symmetrising MFVI's own q
  afterwards would add (209 nats of I_H over pairs there).
- **Uniform InfoNCE never has a gradient**, not even with units 0.8 nats apart: each of its permutations
  moves every unit, the units in use too, and those are far apart. SGM-InfoNCE is MFVI to the last digit.
- **Predictions do not change**: no paired difference in accuracy, NLL or calibration exceeds 2.3 standard
  deviations over seeds (with 3 seeds, p ≈ 0.15); see the table's ± columns.
- **Converged, but not unique**: 156 of 198 runs pass the test (the rest are flagged, most on 10 000 and
  60 000 images); σ by Adam (the earlier recipe) passes in none of 9. From σ₀ 10⁻³ MFVI settles up to 620 nats
  below σ₀ 0.05, from 0.2 up to 161 above, each flat within its noise: MFVI has several optima, differing in
  how many units they prune, and the start picks one.

So symmetrisation matters for the bound where VI prunes units to the prior, and there it symmetrises units
that do nothing; it does not change what the network predicts.
"""

WHAT_TO_EXPECT = """
**What to expect** (the study on the Results tab: 198 runs over 500 to 60 000 images and widths 16 to 1 024):
with few images, a converged MFVI puts most hidden units at the prior, where they are interchangeable, so the
closest units are a few nats apart and the block term has a gradient at almost every step. It raises the bound
by up to 148 nats and changes no prediction beyond the spread over seeds; uniform InfoNCE never has a gradient.
σ fitted by Adam (the earlier recipe) had not converged after 4 000 steps in any run.
"""


def launch(values, methods) -> None:
    for method in methods:
        try:
            config = config_from(values, method)
            run_id = runs.launch(LAB.name, config, binding.server_settings().runs)
        except (ValueError, RegistryError) as error:
            st.error(f"Not launched: {runs.explain(error)}")
            return
        runs.launched(run_id, "Run", config.label)


def launch_panel(values):
    st.markdown(runs.where_runs_train())
    with binding.controls_area("mnist-launch"):
        launch_buttons(values)
    st.caption(f"This server: {binding.server_settings().runs.describe()}.")
    runs.lecturer_panel(PAGE)


def launch_buttons(values):
    cols = st.columns(2)
    method_name = ("SGM blocks" if values["mi"] == "blocks" else "SGM InfoNCE") if values["method"] == "sgm" else "MFVI"
    if cols[0].button(
        f"Launch {method_name}", type="primary", icon=":material/rocket_launch:", key="mnist.launch", width="stretch"
    ):
        launch(values, [values["method"]])
    if cols[1].button(
        "Launch MFVI and SGM (same seed)", icon=":material/compare_arrows:", key="mnist.launch_pair", width="stretch"
    ):
        launch(values, ["mfvi", "sgm"])


# The runs table's numbers as shown (a run still training has none yet: a dash, not "None").
RUN_FORMATS = {
    "test acc": ".4f",
    "NLL": ".4f",
    "ECE": ".4f",
    "I active": ".2f",
    "J min": ".4g",
    "at prior": ".0f",
    "converged": "s",
    "node": "s",
    "note": "s",
}


def runs_frame(all_runs, owner: str) -> pd.DataFrame:
    """The runs, newest first, each marked ``yours`` (:func:`is_yours`)."""
    rows = []
    for run in reversed(all_runs):
        result = run.result or {}
        rows.append(
            {
                "run": run.id,
                "yours": runs.is_yours(run, owner),
                "status": run.status,
                "method": run.config.method_label,
                "width": run.config.hidden,
                "layers": run.config.depth,
                "seed": run.config.seed,
                "epochs": f"{run.epoch}/{run.config.epochs}",
                "progress": run.progress,
                "test acc": result.get("test_acc"),
                "NLL": result.get("test_nll"),
                "ECE": result.get("test_ece"),
                "I active": result.get("mi_active", result.get("infonce_active")),
                "J min": result.get("nearest_unit_kl_min"),
                "at prior": result.get("units_at_prior"),
                "converged": converged_cell(result),
                "device": run.device,
                "executor": run.executor,
                "node": run.node,
                "from": run.source,
                "created": time.strftime("%Y-%m-%d %H:%M", time.localtime(run.created)),
                "note": binding.for_visitors(run.message),
            }
        )
    return pd.DataFrame(rows)


def converged_cell(result: dict) -> str | None:
    """The convergence test's verdict on a finished run, short: "epoch N", "no" or "too short" (None while it runs
    or for runs recorded before the test existed)."""
    if result.get("converged") is None:
        return None
    if result["converged"]:
        return f"epoch {result['converged_epoch']}"
    return "no" if result.get("elbo_change") is not None else "too short"


def runs_filter(frame: pd.DataFrame, owner: str) -> bool:
    """The table's filter, with what "yours" means here; returns whether to show only yours."""
    cols = st.columns([2, 3])
    mine = cols[0].toggle(f"Only yours ({int(frame['yours'].sum())} of {len(frame)})", key="mnist.only_yours")
    cols[1].caption(
        "Yours: launched from this browser, also after a reload."
        if owner
        else "Yours: launched in this session. This browser sends no cookie the page can tell it by, so "
        "after a reload your earlier runs show as others'."
    )
    return mine


COUNT_SCALE = dict(zero=True, domain=alt.DomainUnionWith(unionWith=[0, 1]))  # a count: from 0, at least [0, 1]


def tick_format(metric: str, whole_or_log: bool) -> str | None:
    """Short tick labels, also for a single value (Vega would write it with six decimals); ELBOs in SI units."""
    return None if whole_or_log else ",.3~s" if metric.startswith("train_elbo") else ",.4~g"


# Per-epoch curves (Vega-Lite, updated in place as epochs arrive: views/common). Each metric's axis: its title,
# and the range it lives in where it has one; epochs are whole numbers.
CURVE_AXES: dict[
    str, tuple[str, dict]
] = {  # y title, scale: accuracy and I_H / log|H| live in [0, 1], counts start at 0
    "test_acc": ("test accuracy (fraction)", dict(domainMax=1)),
    "train_elbo": ("train ELBO (nats)", {}),
    "test_nll": ("test NLL (nats per image)", {}),
    "nearest_unit_kl_min": ("Jeffreys div. (nats, log scale)", dict(type="log")),
    "block_mi": ("I_H / log|H|", dict(domainMax=1)),
    "units_at_prior": ("hidden units", COUNT_SCALE),
}
CURVE_PLOT_PX = 380  # a chart's height: room for the plot, then a legend row per run
# Marker areas (px²) by series, largest first: where two series coincide, each later marker sits inside the
# earlier ones (the markers are hollow), so every one stays visible.
MARKER_SIZES = (170, 70, 28)
NOTE_CHARACTERS = 44  # a note's line on a chart: fits a 358 px column (a 390 px phone's) in the page's font
NOTE_LINE_PX = 18  # the room a line of a note takes, which the chart's height gains: the plot keeps its own


def marker_sizes(lines) -> alt.Size:
    """Each of ``lines`` (labels of field ``series``, in order) its marker's size, :data:`MARKER_SIZES`."""
    sizes = [MARKER_SIZES[min(i, len(MARKER_SIZES) - 1)] for i in range(len(lines))]
    # An ordinal scale: Vega-Lite's default for a nominal size is a point scale, which spreads over the range's
    # ends and draws NaN-sized markers when there is one run. On a copy of the series' name (with_marker_sizes),
    # ordered as the lines are: on the name itself, the hidden legend would merge with the colour's (a Vega-Lite
    # warning), and an unordered one warns too.
    return alt.Size(
        "run:O", sort=list(lines), scale=alt.Scale(type="ordinal", domain=list(lines), range=sizes), legend=None
    )


def with_marker_sizes(chart: alt.LayerChart, labels) -> alt.LayerChart:
    """``chart`` (:func:`charts.altair_lines`) with its markers sized by series (:func:`marker_sizes`)."""
    sized = chart.copy()  # keeps the data Altair lifted from the layers to the layer chart
    sized.layer = [
        layer.transform_calculate(run="datum.series").encode(size=marker_sizes(labels))
        if layer.mark.type == "point"
        else layer
        for layer in chart.layer
    ]
    return sized


def fitted(spec: dict, y_title: str, labels, notes: tuple[str, ...] = ()) -> dict:
    """``spec`` made to fit a narrow column: the y axis's title (``y_title``) above the plot, level, rather than
    turned up beside the tick labels (where it took their width again, and Vega could draw it over them), set
    smaller where the plot is narrower than it; its legend (entries ``labels``) wrapped to the column; ``notes``
    (sentences on what the chart shows) under its title, each wrapped to the column."""
    scale = charts.font_scale()
    size = spec["config"]["axis"]["titleFontSize"]
    spec["config"]["axisY"] = dict(
        titleAngle=0,
        titleAlign="left",
        titleBaseline="bottom",
        titleX=0,
        titleY=round(-10 * scale),
        titleFontSize=dict(expr=f"min({size}, floor(width / {charts.CHAR_EM * len(y_title):.2f}))"),
    )
    spec = charts.fitted_legend(spec, list(labels))
    if notes:
        lines = [line for note in notes for line in textwrap.wrap(note, round(NOTE_CHARACTERS / scale))]
        spec["height"] += round(len(lines) * NOTE_LINE_PX * scale)
        spec["title"]["subtitle"] = lines
        spec["title"]["subtitleFontSize"] = round((charts.FONT_PX - 1) * scale)
        spec["title"]["subtitleColor"] = "#31333F"
        spec["title"]["subtitlePadding"] = round(4 * scale)
    return spec


@memo.cached(64)
def curves_spec(
    metric: str, title: str, labels: tuple[str, ...], epochs: int, notes: tuple[str, ...], present: bool
) -> dict:
    """A metric's curve per run (legend: ``labels``, each run's colour, dash and marker, the markers smaller from
    one run to the next), by epoch 1 … ``epochs``; ``notes`` under the title."""
    y_title, scale = CURVE_AXES[metric]
    series = [charts.Series(label, *run_style(i), marker=SYMBOLS[i % len(SYMBOLS)]) for i, label in enumerate(labels)]
    x = charts.quantity("x", "epoch", (0.5, max(epochs, 1) + 0.5), integer=True)
    integer, log = metric == "units_at_prior", scale.get("type") == "log"
    number_format = tick_format(metric, integer or log)
    y = charts.quantity(
        "y",
        y_title,
        channel=alt.Y,
        scale=scale,
        integer=integer,
        axis=dict(format=number_format) if number_format else None,
    )
    lines = with_marker_sizes(charts.altair_lines(series, x, y), labels)
    return fitted(
        charts.vega_spec(lines, title=title, height=CURVE_PLOT_PX + charts.LEGEND_ROW_HEIGHT * len(labels)),
        y_title,
        labels,
        notes,
    )


def twin_notes(runs, history_by_run) -> tuple[str, ...]:
    """A sentence for each SGM run of ``runs`` (in the charts' order) that trained exactly as an MFVI run among
    them, by design (:func:`trained_as_mfvi`): their curves coincide, and the later run's markers are smaller."""
    notes = []
    for sgm in runs:
        for mfvi in runs:
            if trained_as_mfvi(
                sgm.config, history_by_run.get(sgm.id, []), mfvi.config, history_by_run.get(mfvi.id, [])
            ):
                later = max((sgm, mfvi), key=runs.index)
                notes.append(
                    f"#{sgm.id} = #{mfvi.id} by design: SGM's term never had a gradient, so it trained "
                    f"exactly as MFVI (#{later.id}: the smaller markers)."
                )
                break
    return tuple(notes)


def curves_chart(
    container,
    history_by_run,
    labels,
    epochs: int,
    metric: str,
    title: str,
    key: str,
    transform=None,
    notes: tuple[str, ...] = (),
):
    """The curves of ``metric`` (or of ``transform(epoch's metrics)``) for each run of ``history_by_run``."""
    frames = []
    for run_id, history in history_by_run.items():
        points = [(m["epoch"], transform(m) if transform else m.get(metric)) for m in history]
        points = [(epoch, value) for epoch, value in points if value is not None]
        if points:
            frames.append(charts.lines_frame(labels[run_id], *zip(*points)))
    if not frames:  # an empty chart has no extent to draw (a Vega warning): say why instead
        container.caption(f"**{title}**: no epoch of these runs has finished yet.")
        return
    data = pd.concat(frames, ignore_index=True)
    spec = curves_spec(
        metric, title, tuple(labels[run_id] for run_id in history_by_run), epochs, notes, charts.presenting()
    )
    charts.vega_chart(container, spec, {"lines": data}, key, alt_text=f"{title}, by epoch, for each run")


def metrics_frame(history_by_run, labels) -> pd.DataFrame:
    rows = [
        {"run": run_id, "label": labels[run_id], **m} for run_id, history in history_by_run.items() for m in history
    ]
    return pd.DataFrame(rows)


def live_runs() -> list | None:
    """The runs table and the curves of the runs in progress; the lab's runs (None: not read)."""
    all_runs = runs.lab_runs(PAGE, LAB.name, binding.server_settings().runs)
    if all_runs is None:
        return None
    reg = runs.registry()
    if not all_runs:
        command = "" if runs.hosted() else " (or with `python -m symlab mnist`)"
        st.info(f"No runs yet: launch one above{command}.")
        return all_runs
    owner = browser_id()
    runs.run_controls(
        PAGE, all_runs, owner, binding.server_settings().runs, lambda run: f"epoch {run.epoch}/{run.config.epochs}"
    )
    frame = runs_frame(all_runs, owner)
    shown_runs = frame[frame["yours"]] if runs_filter(frame, owner) else frame
    tables.show(
        tables.formatted(shown_runs, RUN_FORMATS),
        hide_index=True,
        width="stretch",
        column_config={
            "yours": st.column_config.CheckboxColumn(
                "yours",
                help="launched from this browser" if owner else "launched in this session (this browser sends no id)",
            ),
            "progress": st.column_config.ProgressColumn("progress", min_value=0, max_value=1),
            "I active": st.column_config.TextColumn(
                help="fraction of SGM's steps in which Î had a gradient; for MFVI the fraction of "
                "end-of-epoch draws in which I_H would have"
            ),
            "J min": st.column_config.TextColumn(
                help="Jeffreys divergence (nats) between the two closest units' factors of q"
            ),
            "at prior": st.column_config.TextColumn(
                help=f"hidden units within {PRIOR_KL_PER_PARAMETER:g} nats per parameter of the prior"
            ),
        },
    )
    shown = [run for run in all_runs if run.status in ACTIVE][-4:] or all_runs[-2:]
    history = reg.metrics(run.id for run in shown)
    labels = {run.id: run.label for run in shown}
    epochs = max(run.config.epochs for run in shown)
    st.caption("Per-epoch curves of the runs in progress (or the latest two).")
    cols = st.columns(2)
    notes = twin_notes(shown, history)
    curves_chart(cols[0], history, labels, epochs, "test_acc", "Test accuracy", "mnist.live_acc", notes=notes)
    curves_chart(cols[1], history, labels, epochs, "train_elbo", "Train ELBO", "mnist.live_elbo", notes=notes)
    diagnostic_curves(history, labels, epochs, "mnist.live", notes)
    charts.csv_download(frame, "mnist_runs.csv", "Runs table as CSV", key="mnist.runs_csv")
    charts.csv_download(
        metrics_frame(history, labels),
        "mnist_live_epochs.csv",
        "Per-epoch metrics of these runs as CSV",
        key="mnist.live_csv",
    )
    return all_runs


def block_mi_fraction(m) -> float | None:
    """I_H / log|H| measured on q: 1 when every block's copies are apart, 0 when q is H-invariant."""
    if m.get("block_mi") is None or not m.get("block_log_group_size"):
        return None
    return m["block_mi"] / m["block_log_group_size"]


def diagnostic_curves(history, labels, epochs: int, key: str, notes: tuple[str, ...]) -> None:
    """How close q's units are, epoch by epoch: nearest-unit divergence, I_H / log|H|, units at the prior."""
    cols = binding.metric_cells(3)  # two to a row: three charts' legends do not fit a third of 844 px
    curves_chart(
        cols[0], history, labels, epochs, "nearest_unit_kl_min", "Closest two units", f"{key}_nearest", notes=notes
    )
    curves_chart(
        cols[1],
        history,
        labels,
        epochs,
        "block_mi",
        "Block MI on q: I_H / log|H|",
        f"{key}_block_mi",
        transform=block_mi_fraction,
        notes=notes,
    )
    curves_chart(cols[2], history, labels, epochs, "units_at_prior", "Units at the prior", f"{key}_prior", notes=notes)
    st.caption(
        "Closest two units: the Jeffreys divergence KL(q_j‖q_k) + KL(q_k‖q_j) between the two closest "
        "hidden units' factors of q; a swap of units this far apart changes log q by about that much, so "
        "below ~30 nats symmetrisation has a gradient. Block MI: I_H over greedy pairs (or blocks of B) of "
        "close units, measured on q at the end of each epoch (8 draws), whether or not the run trains on it."
    )


def table_one(rows) -> pd.DataFrame:
    """Test accuracy (%) by width (rows) and method (columns), mean ± std over distinct seeds (their number, and
    the runs' where a seed ran more than once: its latest run counts)."""
    labels = list(method_styles(rows))
    table: dict[int, dict[str, str]] = {}
    for row in rows:
        repeats = f", {row['runs']} runs" if row["runs"] > row["seeds"] else ""
        seeds = f"{row['seeds']} seed{'s' if row['seeds'] > 1 else ''}"
        accuracy = tables.with_spread(100 * row["test_acc_mean"], 100 * row["test_acc_std"], row["seeds"], 2)
        cell = f"{accuracy} ({seeds}{repeats})"
        table.setdefault(row["hidden"], {})[row["label"]] = cell
    return pd.DataFrame(
        [{"width": width, **{label: table[width].get(label, "—") for label in labels}} for width in sorted(table)]
    )


def run_style(i: int) -> tuple[str, str]:
    return METHOD_COLOURS[i % len(METHOD_COLOURS)], DASHES[i % len(DASHES)]


def method_styles(rows) -> dict[str, tuple[str, str, str]]:
    """(colour, dash, marker) per method label, the same in every chart: MFVI first, then SGM by K."""
    labels = sorted({row["label"] for row in rows}, key=lambda label: (label != "MFVI", len(label), label))
    return {label: (*run_style(i), SYMBOLS[i % len(SYMBOLS)]) for i, label in enumerate(labels)}


# Final metrics against width (Vega-Lite: views/common): one line per method, with markers; mean ± std over seeds
# as a rule at each width, in the method's colour and dash. The x axis is log-scaled, ticked at the widths run.
WIDTH_X_TITLE = "hidden units (log scale)"
WIDTH_PLOT_PX = 320  # a chart's height: room for the plot, then a legend row per two methods
WIDTH_MARGIN = 1.4  # the x range: this factor beyond the smallest and largest widths (log scale)
WIDTH_BOUNDS = {"test_acc_mean": (0.0, 100.0), "units_at_prior_mean": (0.0, None)}  # error bars stop there
WIDTH_COUNTS = ("units_at_prior_mean",)  # whole numbers from 0


@memo.cached(64)
def width_spec(
    key_mean: str,
    y_title: str,
    title: str,
    styles: tuple[tuple[str, str, str, str], ...],
    widths: tuple[int, ...],
    bars: bool,
    bars_to_bottom: bool,
    log_y: bool,
    notes: tuple[str, ...],
    present: bool,
) -> dict:
    """``key_mean`` by width, a line per method (``styles``: label, colour, dash, marker; the markers smaller from
    one method to the next), ``notes`` under the title, from the dataset
    ``lines`` (rows of x, y, series and low and high, the ends of mean ± std; ``to_bottom`` where the lower end is
    off a log axis: that bar runs down to the axis). ``bars``, ``bars_to_bottom``: whether the data hold bars of
    either kind (a layer with none has no extent, a Vega warning)."""
    series = [charts.Series(label, colour, dash, marker=marker) for label, colour, dash, marker in styles]
    x = charts.quantity(
        "x",
        WIDTH_X_TITLE,
        (min(widths) / WIDTH_MARGIN, max(widths) * WIDTH_MARGIN),
        log=True,
        axis=dict(values=list(widths), format="d"),
    )
    count = key_mean in WIDTH_COUNTS
    # A count's range is set on the means' layer (Vega-Lite unites the layers' domains).
    number_format = tick_format(key_mean, count or log_y)

    def y(field: str):
        scale = COUNT_SCALE if count and field == "y" else dict(zero=True) if count else None
        return charts.quantity(
            field,
            y_title,
            channel=alt.Y,
            log=log_y,
            integer=count,
            scale=scale,
            axis=dict(format=number_format) if number_format else None,
        )

    labels = [label for label, *_ in styles]
    layers = [with_marker_sizes(charts.altair_lines(series, x, y("y")), labels)]
    channels = charts.series_channels(series)
    rules = (
        alt.Chart(alt.NamedData("lines"))
        .mark_rule(strokeWidth=1.5)
        .encode(x=x, color=channels["color"], strokeDash=channels["strokeDash"])
    )
    if bars:
        layers.insert(
            0,
            rules.encode(y=y("high"), y2="low:Q").transform_filter(
                "isValid(datum.low) && isValid(datum.high) && !datum.to_bottom"
            ),
        )
    if log_y and bars_to_bottom:
        layers.insert(
            0,
            rules.encode(y=y("high"), y2=alt.value("height")).transform_filter(
                "isValid(datum.high) && datum.to_bottom"
            ),
        )
    columns = 2 if len(series) > 2 else None  # two methods fit in a row at 390 px; more take rows of two
    rows = 1 if columns is None else -(-len(series) // columns)
    return fitted(
        charts.vega_spec(alt.layer(*layers), title=title, height=WIDTH_PLOT_PX + charts.LEGEND_ROW_HEIGHT * rows),
        y_title,
        labels,
        notes,
    )


def width_frame(rows, styles, key_mean, key_std, scale=1.0, log_y=False) -> pd.DataFrame:
    """The rows drawn against width: x (width), y (mean), low and high (mean ∓ std, within the quantity's bounds;
    NaN without a std), ``to_bottom`` (a lower end off the log axis), series (the method), seeds, std."""
    low_bound, high_bound = WIDTH_BOUNDS.get(key_mean, (None, None))
    records = []
    for label in styles:
        mine = sorted(
            (
                row
                for row in rows
                if row["label"] == label and row[key_mean] is not None and not (log_y and row[key_mean] <= 0)
            ),  # a log axis has no place for it
            key=lambda row: row["hidden"],
        )
        for i, row in enumerate(mine):
            mean = scale * row[key_mean]
            std = scale * row[key_std] if key_std and row[key_std] is not None else float("nan")
            low, high = mean - std, mean + std
            if low_bound is not None:
                low = max(low, low_bound)
            if high_bound is not None:
                high = min(high, high_bound)
            to_bottom = bool(log_y and low <= 0)
            records.append(
                {
                    "x": float(row["hidden"]),
                    "y": mean,
                    "low": float("nan") if to_bottom else low,
                    "high": high,
                    "to_bottom": to_bottom,
                    "series": label,
                    "i": i,
                    "seeds": row["seeds"],
                    "std": std,
                }
            )
    columns = ["x", "y", "low", "high", "to_bottom", "series", "i", "seeds", "std"]
    return pd.DataFrame(records, columns=columns).astype(
        {"x": float, "y": float, "low": float, "high": float, "to_bottom": bool, "i": int, "std": float}
    )


def same_as_mfvi_notes(rows, key: str) -> tuple[str, ...]:
    """A sentence for each SGM method whose ``key`` equals MFVI's by design at some widths (:func:`same_as_mfvi`):
    there their markers coincide, SGM's the smaller."""
    return tuple(
        f"{label} = MFVI at width {', '.join(map(str, widths))} by design: SGM's term never had a "
        "gradient, so it trained exactly as MFVI (SGM: the smaller markers)."
        for label, widths in same_as_mfvi(rows, key).items()
    )


def width_chart(
    container, rows, styles, key_mean, key_std, y_title, title, key, csv_name, scale=1.0, log_y=False
) -> None:
    """``key_mean`` (times ``scale``) against width, ± ``key_std`` where given, a line per method of ``styles``
    that has a value (its colour, dash and marker), and its CSV below it."""
    data = width_frame(rows, styles, key_mean, key_std, scale, log_y)
    # The methods with a value in the legend; all of them over empty axes where none has one.
    drawn = [label for label in styles if (data["series"] == label).any()] or list(styles)
    widths = tuple(sorted({int(row["hidden"]) for row in rows})) or (1,)
    ends = data["low"].notna() & data["high"].notna()
    spec = width_spec(
        key_mean,
        y_title,
        title,
        tuple((label, *styles[label]) for label in drawn),
        widths,
        bool((ends & ~data["to_bottom"]).any()),
        bool((data["high"].notna() & data["to_bottom"]).any()),
        log_y,
        same_as_mfvi_notes(rows, key_mean),
        charts.presenting(),
    )
    charts.vega_chart(
        container,
        spec,
        {"lines": data},
        key,
        alt_text=f"{title}: {y_title} against the hidden width, a line per method",
    )
    table = pd.DataFrame(
        {"width": data["x"].astype(int), "method": data["series"], "seeds": data["seeds"], f"{y_title} mean": data["y"]}
    )
    if key_std is not None:
        table[f"{y_title} std"] = data["std"]
    with container:
        charts.csv_download(table, csv_name, "Chart data as CSV", key=f"{key}_csv")


def whole_nats(columns) -> dict:
    """Nats to the nat: these ELBOs, differences and spreads are thousands of nats, known to a few."""
    return {name: st.column_config.NumberColumn(format="%.0f") for name in columns}


@dataclass(frozen=True)
class StudyTables:
    """The shipped study's tables, built once per page process: ``frames`` (for the CSVs) and the same as Arrow
    tables (``shown``, what the page's tables send: converting a DataFrame on every run was most of the section's
    cost), each by name: effects, and starts and recipes where the study has them."""

    summary: dict
    frames: dict[str, pd.DataFrame]
    shown: dict[str, pa.Table]


def study_frames(summary: dict) -> dict[str, pd.DataFrame]:
    frames = {"effects": pd.DataFrame(study.effect_rows(summary))}
    if summary["starts"]:
        frames["starts"] = pd.DataFrame(
            [
                {
                    "images": s["subset"],
                    "width": s["hidden"],
                    "initial σ": s["init_sd"],
                    "converged": f"{s['converged']}/{s['seeds']}",
                    "ELBO (nats)": s["elbo"],
                    "Δ ELBO vs σ₀ 0.05": s["d_elbo"][0],
                    "± (seeds)": s["d_elbo"][1],
                    "window SE": s["window_se"],
                }
                for s in summary["starts"]
            ]
        )
    if summary["recipes"]:
        frames["recipes"] = pd.DataFrame(
            [
                {
                    "images": r["subset"],
                    "width": r["hidden"],
                    "converged (σ by Adam)": f"{r['converged']}/{r['seeds']}",
                    "converged (σ by curvature)": f"{r['mfvi_converged']}/{r['mfvi_seeds']}",
                    "ELBO, σ by Adam": r["elbo"],
                    "ELBO, σ by curvature": r["mfvi_elbo"],
                    "closest units, Adam (nats)": r["j_min"],
                    "closest units, curvature (nats)": r["mfvi_j_min"],
                }
                for r in summary["recipes"]
            ]
        )
    return frames


@memo.cached(2)
def study_tables(stamp: tuple | None) -> StudyTables:
    """The shipped study's tables as of its file's ``stamp`` (modification time and size: a rebuilt file is read
    again); a missing or damaged file raises :class:`study.StudyError`, every time."""
    summary = study.load_study()
    frames = study_frames(summary)
    shown = {name: pa.Table.from_pandas(frame, preserve_index=False) for name, frame in frames.items()}
    return StudyTables(summary, frames, shown)


def study_stamp() -> tuple | None:
    try:
        found = study.SHIPPED.stat()
    except OSError:
        return None  # load_study says what is wrong
    return (found.st_mtime_ns, found.st_size)


def study_section() -> None:
    """The converged study's tables (shipped), with what they say."""
    st.subheader("The study: MFVI against SGM once VI has converged")
    try:
        shipped = study_tables(study_stamp())
    except study.StudyError as error:
        st.warning(binding.for_visitors(str(error)))
        return
    summary, frames, shown = shipped.summary, shipped.frames, shipped.shown
    st.markdown(STUDY_READING)
    st.markdown(
        "**SGM minus MFVI**, paired on seeds (same minibatches, weight noise and curvature labels): mean "
        "and standard deviation over seeds of the difference at the end of training."
    )
    tables.show(
        shown["effects"],
        hide_index=True,
        column_config={
            "steps with a gradient": st.column_config.NumberColumn(format="%.2f"),
            "Î / log|H|": st.column_config.NumberColumn(format="%.4f"),
            "closest units (nats)": st.column_config.NumberColumn(format="%.3g"),
            "MFVI closest units (nats)": st.column_config.NumberColumn(format="%.3g"),
            "MFVI I_H / log|H|": st.column_config.NumberColumn(format="%.4f"),
            "MFVI accuracy (%)": st.column_config.NumberColumn(format="%.2f"),
            "MFVI units at the prior": st.column_config.NumberColumn(format="%.0f"),
            "bound gain (nats)": st.column_config.NumberColumn(format="%+.0f"),
            "I_H on MFVI's q (nats)": st.column_config.NumberColumn(format="%+.0f"),
            **{name: st.column_config.NumberColumn(format="%+.2f") for name in ("Δ accuracy (pp)", "± (pp)")},
            **{name: st.column_config.NumberColumn(format="%+.4f") for name in ("Δ NLL", "± NLL", "Δ ECE", "± ECE")},
            **{name: st.column_config.NumberColumn(format="%+.0f") for name in ("Δ ELBO (nats)", "± ELBO")},
        },
    )
    charts.csv_download(frames["effects"], "mnist_study_effects.csv", "Table as CSV", key="mnist.study_csv")
    if "starts" in frames:
        st.markdown(
            "**Not one optimum from every start**: MFVI's final ELBO (mean over its last 500 steps) from "
            "three initial σ, and its difference from σ₀ 0.05's on the same seed. "
            f"{starts_verdict(summary['starts'])}"
        )
        columns = frames["starts"].columns
        tables.show(shown["starts"], hide_index=True, column_config=whole_nats(columns[4:]))
        charts.csv_download(frames["starts"], "mnist_study_starts.csv", "Table as CSV", key="mnist.study_starts_csv")
    if "recipes" in frames:
        st.markdown("**The earlier recipe** (σ by Adam on log σ at a constant 10⁻³) against this one.")
        columns = frames["recipes"].columns
        tables.show(shown["recipes"], hide_index=True, column_config=whole_nats(columns[4:6]))
        charts.csv_download(frames["recipes"], "mnist_study_recipes.csv", "Table as CSV", key="mnist.study_recipes_csv")
    st.caption(
        "Rerun or extend it: `python benchmarks/study_symmetrisation.py` (resumes from its file; "
        "`--executor ray` submits it to a Ray cluster as one sweep)."
    )


def starts_verdict(starts) -> str:
    """Whether the other starts' ELBOs differ from σ₀ 0.05's by more than their noise, in words, from the study."""
    others = [s for s in starts if s["init_sd"] != REFERENCE_INIT_SD]
    apart = [s for s in others if abs(s["d_elbo"][0]) > 2 * max(s["d_elbo"][1], s["window_se"])]
    if not apart:
        return "Every start ends within twice its noise of σ₀ 0.05's: one optimum, as far as the study can tell."
    largest = max(apart, key=lambda s: abs(s["d_elbo"][0]))
    gap = f"{largest['d_elbo'][0]:+,.0f}".replace("-", "−")
    return (
        f"{len(apart)} of the {len(others)} other starts end more than twice their noise from it, by up to {gap} "
        f"nats (initial σ {largest['init_sd']:g}, width {largest['hidden']}, {largest['subset']:,} images): each "
        "converges, to an optimum of its own."
    )


REFERENCE_INIT_SD = 0.05  # the study's default initial σ, which the other starts are compared with


def results(values):
    study_section()
    st.subheader("Your runs")
    try:
        all_runs = runs.registry().runs(lab=LAB.name)
    except RegistryError as error:
        st.error(runs.explain(error))
        return
    rows = results_table(all_runs)
    if not rows:
        sweeps = "" if runs.hosted() else ", including those from `python -m symlab mnist-sweep`"
        st.info(f"No finished runs yet. Results appear here as runs finish{sweeps}.")
    else:
        settings = list(dict.fromkeys(row["setting"] for row in reversed(rows)))
        setting = st.selectbox(
            "Setting (runs are compared only when everything but width, method and seed agree)",
            settings,
            key="mnist.setting",
        )
        chosen = [row for row in rows if row["setting"] == setting]
        st.markdown(
            "**Test accuracy (%) by width and method**, mean ± std over distinct seeds (number of "
            "seeds), laid out like the paper's Table 1. A seed run more than once counts once, by its "
            "latest run (“2, 3 runs”: two seeds from three runs)."
        )
        verdict = table_verdict(chosen)
        if verdict["trained"] is False:
            st.warning(
                f"**Some of these networks did not learn.** {verdict['trained_reason']}", icon=":material/warning:"
            )
        tables.show(table_one(chosen), hide_index=True)
        cols = st.columns(2)
        styles = method_styles(chosen)
        width_chart(
            cols[0],
            chosen,
            styles,
            "test_acc_mean",
            "test_acc_std",
            "test accuracy (%)",
            "Accuracy against width (± std)",
            "mnist.width_acc",
            "mnist_width_accuracy.csv",
            scale=100.0,
        )
        gains = bound_gain_rows(chosen)
        if gains:
            width_chart(
                cols[1],
                gains,
                styles,
                "gain_mean",
                None,
                "SGM bound − MFVI ELBO (nats)",
                "SGM's bound above MFVI's ELBO",
                "mnist.width_gain",
                "mnist_width_bound_gain.csv",
            )
            cols[1].caption(
                "The gain is at most log K; it equals log K when no sampled permutation comes near "
                "the sample (Î_K = log K)."
            )
        else:
            width_chart(
                cols[1],
                chosen,
                styles,
                "train_elbo_mean",
                "train_elbo_std",
                "train ELBO (nats)",
                "Train ELBO against width",
                "mnist.width_elbo",
                "mnist_width_elbo.csv",
            )
        cols = st.columns(2)
        width_chart(
            cols[0],
            chosen,
            styles,
            "nearest_unit_kl_min_mean",
            "nearest_unit_kl_min_std",
            "Jeffreys divergence (nats, log)",
            "Closest two units against width",
            "mnist.width_nearest",
            "mnist_width_closest_units.csv",
            log_y=True,
        )
        width_chart(
            cols[1],
            chosen,
            styles,
            "units_at_prior_mean",
            "units_at_prior_std",
            "hidden units",
            "Units at the prior against width",
            "mnist.width_prior",
            "mnist_width_units_at_prior.csv",
        )
        st.caption(
            "The measured counterpart of Thm 3.1: the closest pair of units in posterior units (nats), not "
            "relative to ‖w‖. Symmetrisation can only act where this is small (below ~30 nats)."
        )
        table = pd.DataFrame([{k: v for k, v in row.items() if k != "run_ids"} for row in chosen])
        charts.csv_download(table, "mnist_table1.csv", "Table as CSV", key="mnist.table_csv")
    compare(values, all_runs)
    posterior_download(all_runs)


def posterior_download(all_runs):
    """Any run's posterior at its last completed epoch, as safetensors (the command line: --export)."""
    st.subheader("Download a posterior")
    saved = [run for run in all_runs if run.epoch >= 1]
    if not saved:
        st.caption("A run's posterior can be downloaded once it has completed an epoch.")
        return
    cols = st.columns([3, 2])
    run = cols[0].selectbox(
        "Run",
        list(reversed(saved)),
        key="mnist.export_pick",
        format_func=lambda r: f"#{r.id} {r.config.label}: {r.status}, epoch {r.epoch}/{r.config.epochs}",
    )
    checkpoint = runs.registry().checkpoint_path(run.id)
    problem = (
        "it has no checkpoint yet: one is written after each completed epoch"
        if not checkpoint.exists()
        else runs.checkpoint_problem(run)
    )
    if problem:  # said here: a download whose file cannot be written would do nothing when clicked
        cols[1].warning(
            f"Run #{run.id}'s posterior cannot be downloaded: {problem}. Resuming the run goes on from "
            "the checkpoint before; restarting it trains it again.",
            icon=":material/broken_image:",
        )
        return

    def posterior() -> bytes:
        return mnist_experiment.exported_run(checkpoint, run.id)

    with cols[1]:
        st.write("")  # aligns the button with the select box
        files.file_download(
            posterior,
            f"mnist_run{run.id}_posterior.safetensors",
            "Posterior (safetensors)",
            "mnist.export",
            help="Means under nn.Sequential(nn.Linear, nn.ReLU, …)'s keys, standard "
            "deviations under sd.<key>, the config as metadata. Inputs: "
            f"{mnist_experiment.INPUT_NOTE}.",
        )
    command = "" if runs.hosted() else f"; `python -m symlab mnist --export {run.id} FILE` writes the same file"
    st.caption(
        f"Load the mean network with `net.load_state_dict(safetensors.torch.load_file(path), strict=False)`{command}. "
        "The Symmetry explorer and Alignment pages read it back."
    )


def compare(values, all_runs):
    """The chosen runs' per-epoch curves side by side; the link names them by their tokens, not their ids."""
    st.subheader("Compare runs")
    by_id = {run.id: run for run in all_runs}
    by_token = {run.token: run for run in all_runs}
    key = binding.widget_key(PAGE, "compare")
    picked = [by_token[token].id for token in compare_tokens(values) if token in by_token]
    with binding.controls_area("mnist-compare"):
        chosen = st.multiselect(
            "Runs",
            list(reversed(list(by_id))),
            default=picked,
            format_func=lambda i: f"{by_id[i].label} ({by_id[i].status})",
            max_selections=8,
            key="mnist.compare_pick",
        )
    text = ",".join(by_id[i].token for i in chosen)
    if st.session_state[key] != text:
        missing = [token for token in compare_tokens(values) if token not in by_token]
        if missing:
            binding.correct_link_value(PAGE, "compare", text, f"`compare`: no run {', '.join(missing)} here: left out.")
        else:
            st.session_state[key] = text
        st.rerun()
    if not chosen:
        st.caption("Pick runs to see their per-epoch curves side by side.")
        return
    history = runs.registry().metrics(chosen)
    labels = {i: by_id[i].label for i in chosen}
    epochs = max(by_id[i].config.epochs for i in chosen)
    notes = twin_notes([by_id[i] for i in chosen], history)
    cols = binding.metric_cells(3)
    curves_chart(cols[0], history, labels, epochs, "test_acc", "Test accuracy", "mnist.cmp_acc", notes=notes)
    curves_chart(cols[1], history, labels, epochs, "test_nll", "Test NLL", "mnist.cmp_nll", notes=notes)
    curves_chart(cols[2], history, labels, epochs, "train_elbo", "Train ELBO", "mnist.cmp_elbo", notes=notes)
    diagnostic_curves(history, labels, epochs, "mnist.cmp", notes)
    charts.csv_download(
        metrics_frame(history, labels), "mnist_epochs.csv", "Per-epoch metrics as CSV", key="mnist.cmp_csv"
    )


def main():
    values = binding.start_page(
        PAGE,
        binding.page_specs(LAB),
        "MNIST: MFVI vs SGM across widths",
        "Gelberg et al. 2024, §5 and Table 1: does symmetrising the variational posterior "
        "help more as the network gets wider?",
        controls_panel,
    )
    problems = data_problems()
    if problems:
        st.error(
            "MNIST is not available, so runs would fail:\n\n"
            + "\n".join(f"- {binding.for_visitors(p)}" for p in problems)
        )
    try:
        root = runs.registry().root
    except RegistryError as error:  # said here; the tabs draw what needs no registry
        st.error(runs.explain(error))
        root = None
    # A hosted server's paths are not the visitors'.
    kept = "" if binding.server_settings().hosted or root is None else f" Runs are kept in `{root}`."
    try:
        device_text = resolve_device(values["device"]).type
    except ValueError as error:
        st.warning(binding.for_visitors(str(error)))
        device_text = "unavailable"
    st.caption(
        f"Data: MNIST, 60 000 train / 10 000 test images, verified by checksum.{kept} Device for new runs: "
        f"{device_text}."
    )
    explanation()
    runs_tab, results_tab = st.tabs(["Launch and watch", "Results"])
    with runs_tab:
        launch_panel(values)
        runs.live_panel(PAGE, live_runs)
    with results_tab:
        results(values)


if __name__ == "__main__":  # run as a script: AppTest.from_file, `streamlit run views/<lab>.py`
    main()
