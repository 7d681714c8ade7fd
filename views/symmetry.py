"""Symmetry explorer: the posterior modulo its symmetries, and how close equivalent modes are
(Laurent et al. 2024; Gelberg et al. 2024, Thm 3.1)."""

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from symlab.labs.symmetry import LAB, params
from symlab.labs.symmetry import experiment as symmetry_lab
from symlab.labs.symmetry.params import (
    CAPS,
    FIELDS,
    MAX_WIDTHS,
    PARTS,
    PRESETS,
    SEED_FROM,
)
from symlab.labs.toy import experiment as toy
from symlab.lib import symmetry
from symlab.lib.weights import LIBRARIES
from symlab.serving import precomputed
from symlab.specs.animation import Animation, encode
from views.common import animation, binding, charts, computing, files, memo, tables

PAGE = "symmetry"
STAGE_STYLE = {"raw": ("#0072B2", "solid"), "scaled": ("#D55E00", "dash"), "sorted": ("#009E73", "dot")}
METHOD_STYLE = {
    "exact": ("#999999", "circle", "exact posterior"),
    "mfvi": ("#0072B2", "x", "MFVI"),
    "sgm": ("#D55E00", "triangle-up", "SGM"),
    "ensemble": ("#CC79A7", "square", "ensemble"),
    "noise_floor": ("#000000", "diamond", "exact vs exact"),
}
EPOCH_TICK_SECONDS = 0.7
SORT_KEY_NAMES = {
    "first_in": "weight from the first pixel",
    "max_in": "largest incoming weight",
    "first_out": "weight to the first next unit",
}
WIDGET_OPTIONS: dict[tuple[type, str], dict] = {
    (symmetry_lab.ProximityConfig, "weights"): dict(horizontal=True),
    (symmetry_lab.MlpConfig, "schedule"): dict(horizontal=True),
    (symmetry_lab.MlpConfig, "sort_key"): dict(format_func=SORT_KEY_NAMES.get),
}


# ---------------------------------------------------------------------------------------------
# Computation, shared by every session (results are read-only)
# ---------------------------------------------------------------------------------------------


def perceptron_views(config: symmetry_lab.PerceptronConfig):
    return computing.computed(symmetry_lab.perceptron_task(config))


def trained_mlps(config: symmetry_lab.MlpConfig):
    return computing.computed(symmetry_lab.mlps_task(config))


def proximity(config: symmetry_lab.ProximityConfig):
    return computing.computed(symmetry_lab.proximity_task(config))


def quality(config: symmetry_lab.QualityConfig):
    return computing.computed(symmetry_lab.quality_task(config))


# ---------------------------------------------------------------------------------------------
# Controls
# ---------------------------------------------------------------------------------------------


def key(name: str) -> str:
    return binding.widget_key(PAGE, name)


def widget(config_type, name: str, **options):
    return binding.control_widget(PAGE, config_type, name, cap=CAPS.get(config_type, {}).get(name), **options)


def widgets(config_type) -> None:
    for name in FIELDS[config_type]:
        widget(config_type, name, **WIDGET_OPTIONS.get((config_type, name), {}))


def controls():
    part = st.session_state[key("part")]
    with st.sidebar:
        st.subheader("Presets")
        binding.preset_picker(PAGE, binding.page_specs(LAB), PRESETS)
        st.subheader("Part")
        st.radio("Part", list(PARTS), format_func=PARTS.get, key=key("part"), label_visibility="collapsed")
        st.subheader("Settings")
        if part in ("fig1", "mass"):
            widgets(symmetry_lab.PerceptronConfig)
        if part == "proximity":
            st.select_slider("Largest width", MAX_WIDTHS, key=key("max_width"))
            widgets(symmetry_lab.ProximityConfig)
        if part == "quality":
            widgets(toy.ToyConfig)
        if part in ("mass", "training"):
            st.caption(
                "MLPs on MNIST" + (" (the same nets as in *Permutations in training*)" if part == "mass" else "")
            )
            widgets(symmetry_lab.MlpConfig)
        if part == "network":
            widget(symmetry_lab.MlpConfig, "sort_key", **WIDGET_OPTIONS[(symmetry_lab.MlpConfig, "sort_key")])
            return  # a file: no seed
        widget(SEED_FROM, "seed")
        binding.new_seed_button(PAGE, help="Another initialisation and data draw; Reset replays the current one.")


# ---------------------------------------------------------------------------------------------
# Charts
# ---------------------------------------------------------------------------------------------

# The epoch player's densities (Vega-Lite, updated in place: views/common): fixed while it plays (each stage's
# window is the last epoch's), the epoch's density in the data. Square: equal scales on v₁ and v₂.
DIAGONAL = (charts.Series("v₁ = v₂", "#FFFFFF", "dash"),)
SQUARE_HEIGHT = 340  # the whole chart's: a plot about 250 px high, as wide as a column of three at 1400 px is

# Log axes' ticks: the widths at powers of two; masses and distances at powers of ten only (a line at each of 2 … 9
# times each, Vega's default, crowds the grid), the distances written 10⁻⁵ … 10² as Plotly's "power" format did.
WIDTH_TICKS = [2**k for k in range(1, 17)]
POWERS_OF_TEN = [10.0**k for k in range(-15, 16)]
_EXPONENT = "format(round(log(datum.value) / LN10), 'd')"
for _plain, _raised in zip("-−0123456789", "⁻⁻⁰¹²³⁴⁵⁶⁷⁸⁹"):
    _EXPONENT = f"replace({_EXPONENT}, regexp('{_plain}', 'g'), '{_raised}')"
POWER_LABELS = f"'10' + {_EXPONENT}"


# A square plot whatever its column's width: the chart stretches to its column, and both scales map onto the
# largest square that fits the plot area, at its bottom left (where the axes meet), so mirror images across
# the diagonal look like mirror images at every width.
SQUARE_SIDE = "min(width, height)"
SQUARE_RANGES = {"x": [0, {"expr": SQUARE_SIDE}], "y": [{"expr": "height"}, {"expr": f"height - {SQUARE_SIDE}"}]}


def square_scales(spec: dict) -> dict:
    """``spec`` (a cached one: changed in place before it is cached) with its x and y scales on the square."""
    for view in single_views(spec):
        for name, scale_range in SQUARE_RANGES.items():
            channel = view.get("encoding", {}).get(name, {})
            if "scale" in channel:
                channel["scale"]["range"] = scale_range
                # No grid: its lines would cross the whole plot area, past the square.
                axis = channel["axis"] = {**(channel.get("axis") or {}), "grid": False}
                if name == "x":  # its title centred under the square, not under the whole plot area
                    axis["titleX"] = {"expr": f"{SQUARE_SIDE} / 2"}
    return spec


def single_views(spec: dict):
    """Every single view of a (layered) spec."""
    yield spec
    for child in spec.get("layer", []):
        yield from single_views(child)


@memo.cached(16)
def density_spec(title: str, present: bool) -> dict:
    """The two output weights' density, with the mirror line, square; the axes' range comes with the data."""
    x_title, y_title = "output weight v₁", "output weight v₂"
    heat = charts.altair_image(x_title, y_title, charts.DOMAIN_OF_DATA, charts.DOMAIN_OF_DATA, smooth=False)
    diagonal = charts.altair_lines(
        DIAGONAL,
        charts.quantity("x", x_title, charts.DOMAIN_OF_DATA),
        charts.quantity("y", y_title, charts.DOMAIN_OF_DATA, channel=alt.Y),
        legend=False,
    )
    return square_scales(charts.vega_spec(alt.layer(heat, diagonal), title=title, height=SQUARE_HEIGHT))


MARGINAL_SERIES = (charts.Series("v₁", "#0072B2"), charts.Series("v₂", "#D55E00", "dash"))


@memo.cached(16)
def marginal_spec(present: bool) -> dict:
    """Histogram densities of the two output weights; the x range comes with the data."""
    chart = charts.altair_lines(
        MARGINAL_SERIES,
        charts.quantity("x", "output weight", charts.DOMAIN_OF_DATA),
        charts.quantity("y", "density", channel=alt.Y, scale=dict(zero=True)),
    )
    return charts.vega_spec(chart, title="The two units' marginals, raw")


def marginal_chart(column, weights: np.ndarray, extent) -> None:
    edges = np.linspace(extent[0], extent[1], 81)
    centres = 0.5 * (edges[1:] + edges[:-1])
    lines = pd.concat(
        [
            charts.lines_frame(series.label, centres, np.histogram(weights[:, index], edges, density=True)[0])
            for index, series in enumerate(MARGINAL_SERIES)
        ]
    )
    charts.vega_chart(
        column,
        charts.with_domains(marginal_spec(charts.presenting()), x=extent),
        {"lines": lines},
        "symmetry.marginals",
        alt_text="Histogram densities of v₁ and v₂, raw",
    )


def fig1_panel(config: symmetry_lab.PerceptronConfig):
    stages, report = perceptron_views(config)
    final = stages[-1]
    extents = symmetry_lab.stage_extents(final)
    cols = binding.metric_cells(4)
    cols[0].metric(
        "nets kept",
        f"{report.kept} / {report.nets}",
        help=f"Final training loss ≤ {report.loss_cutoff:.3g}; the rest did not train (the paper drops < 1 %).",
    )
    shipped = precomputed.is_shipped(symmetry_lab.perceptron_task(config).key)
    cols[1].metric(
        "trained per second",
        f"{report.nets_per_second:,.0f}",
        help="All nets in one batched tensor program on the CPU"
        + (" (on the machine that computed this default, which ships with the app)." if shipped else "."),
    )
    raw = report.stages["raw"]
    cols[2].metric(
        "share with v₁ > v₂, raw",
        f"{raw['share_v1_above_v2']:.3f}",
        help="½ when the density is symmetric under swapping the units.",
    )
    changed = max(stage["max_output_change"] for stage in report.stages.values())
    cols[3].metric(
        "largest output change",
        f"{changed:.1e}",
        help="Over all nets and 256 random inputs: the removals keep every function, up to rounding.",
    )
    peaks = raw["peaks"][:2]
    if len(peaks) == 2:
        st.markdown(
            f"Raw, the two highest density peaks sit at ({peaks[0][0]:.2f}, {peaks[0][1]:.2f}) and "
            f"({peaks[1][0]:.2f}, {peaks[1][1]:.2f}): mirror images across v₁ = v₂. After both removals "
            f"{len(report.stages['sorted']['peaks'])} peak(s) remain, all with v₁ ≤ v₂."
        )
    epoch_player(config)
    left, right = st.columns([1, 1])
    marginal_chart(left, final["raw"], extents["raw"])
    with right:
        st.markdown(r"""
**Why the mode doubles.** Swapping the two hidden units (rows of $W_1$, $b_1$ and the entries of
$v = W_2$) gives the same function, the same likelihood and, under an isotropic prior, the same
posterior density. SGD is equivariant too: a swapped initialisation trains into the swapped net. So every
mode $(a, b)$ has a twin $(b, a)$ of exactly the same weight, and the density is symmetric about $v_1 = v_2$.

**Why the marginals look alike.** The posterior is a uniform mixture over the permuted copies, so each
unit is equally likely to be any of them: $v_1$ and $v_2$ have the same marginal (*The two units' marginals, raw*), and so do all units of a layer.

**Scaling.** ReLU is positively homogeneous: multiplying a unit's incoming weights and bias by λ > 0 and
its outgoing weight by 1/λ keeps the function. Giving each unit unit-norm incoming weights removes that freedom
and regroups the points; sorting the units by $v$ then removes the swap, keeping $v_1 \le v_2$.
""")
    frame = pd.DataFrame(
        {f"{stage}_v{i + 1}": final[stage][:, i] for stage in symmetry_lab.REMOVAL_STAGES for i in range(2)}
    )
    charts.csv_download(frame, f"perceptrons_seed{config.seed}.csv", "Output weights (CSV)", "symmetry.csv_fig1")


def density_image(weights: np.ndarray, extent) -> pd.DataFrame:
    """The density chart's picture of ``weights`` (nets × 2) over ``extent`` on both axes."""
    centres, density = symmetry_lab.density_grid(weights, extent)
    return charts.image_frame(centres, centres, density, charts.VIRIDIS)


def epoch_animation(config: symmetry_lab.PerceptronConfig) -> Animation:
    """Training epoch by epoch, each removal stage's density a picture per frame: made once for every session with
    these settings (a few pictures a stage and epoch, well under a second), kept in the result store."""

    def encoded() -> Animation:
        stages, _ = perceptron_views(config)
        extents = symmetry_lab.stage_extents(stages[-1])
        frames = [
            {
                f"density_{name}": {"image": {"image": animation.columns_of(density_image(epoch[name], extents[name]))}}
                for name in symmetry_lab.REMOVAL_STAGES
            }
            for epoch in stages
        ]
        last = len(stages) - 1
        labels = [f"Epoch {k} / {last}" for k in range(len(stages))]
        return encode(frames, labels, [""] * len(stages))

    return computing.shared_result(("symmetry_epochs", config), encoded, capacity=16)


@memo.cached(16)  # one per setting and mode: their JSON is made once
def epoch_charts(config: symmetry_lab.PerceptronConfig, present: bool) -> list[animation.Chart]:
    """The three densities, each on the last epoch's extent (fixed while training plays), with the mirror line."""
    stages, _ = perceptron_views(config)
    extents = symmetry_lab.stage_extents(stages[-1])
    result = []
    for name in symmetry_lab.REMOVAL_STAGES:
        extent = extents[name]
        title = symmetry_lab.STAGE_TITLES[name].capitalize()
        result.append(
            animation.Chart(
                f"density_{name}",
                charts.with_domains(density_spec(title, present), x=extent, y=extent),
                f"Density of the two output weights, {title.lower()}",
                {"lines": charts.lines_frame(DIAGONAL[0].label, extent, extent)},
            )
        )
    return result


def epoch_player(config: symmetry_lab.PerceptronConfig) -> None:
    frames = epoch_animation(config)
    animation.player(
        "symmetry.player",
        epoch_charts(config, charts.presenting()),
        frames,
        frames.frames - 1,
        EPOCH_TICK_SECONDS,
        play_help="Replay training epoch by epoch; Reset goes back to the initialisation (same seed).",
        columns=3,
    )
    st.caption(
        "v₁, v₂: the output weights of hidden units 1 and 2. Brighter: more nets. Dashed: v₁ = v₂, the "
        "mirror line of swapping the two units."
    )


def mass_panel(cfg):
    _, report = perceptron_views(cfg["perceptron"])
    result = report.mass.result
    st.markdown(r"""The **mass** is the squared L2 norm of the weights (biases excluded). Rescaling hidden unit $i$ of
layer $l$ by $e^{\lambda_i^{l}}$ keeps the function; the **min-mass problem** minimises
$\sum_l \sum_{ij} (W^{l}_{ij})^2\, e^{2(\lambda^{l}_i - \lambda^{l-1}_j)}$ over the log-scales λ
(inputs and outputs fixed at 0). It is strictly convex in λ: Newton's method reaches the unique optimum in a
few steps, checked by the gradient. With one hidden layer it has a closed form:
each unit contributes $2\,\lVert w^{\text{in}}_i\rVert\,\lVert w^{\text{out}}_i\rVert$. A *degenerate* unit, with no
incoming weight (dead, or a constant) or no outgoing weight, has no optimum: scaling it runs its other terms to 0, so
the mass reported is then the infimum, approached and not reached (the table counts such units).""")
    mlps = trained_mlps(cfg["mlp"])
    mlp_report = computing.shared_result(("mlp_mass", cfg["mlp"]), lambda: symmetry_lab.mass_report(mlps.layers))
    rows = []
    for name, rep in (
        ("2-2-1 perceptrons", report.mass),
        (f"MNIST MLPs (784-{cfg['mlp'].width}×{cfg['mlp'].depth}-10)", mlp_report),
    ):
        rows.append(
            {
                "nets": name,
                "count": rep.nets,
                "median mass before": rep.mass_before_median,
                "median mass after": rep.mass_after_median,
                "median ratio": rep.ratio_median,
                "smallest ratio": rep.ratio_min,
                "converged": f"{rep.converged} / {rep.nets}",
                "Newton steps": rep.iterations,
                "degenerate units": rep.degenerate_units,
                "largest output change": f"{rep.max_output_change:.1e}",
            }
        )
    tables.show(pd.DataFrame(rows), hide_index=True)
    left, right = st.columns(2)
    before, after = result.mass_before, result.mass_after
    mass_scatter(left, before, after)
    layers = layer_mass_frame(mlps.layers, mlp_report.result.layers)
    layer_mass_chart(right, layers)
    st.caption(
        "Min-mass moves mass between layers: the layers with fewer weights tend to get larger ones "
        "(Laurent et al. §3.6). Trained nets are not at their minimum mass, even though rescaling is free."
    )
    frame = pd.DataFrame({"mass_before": before, "mass_after": after})
    d1, d2, _ = st.columns([1, 1, 2])
    with d1:
        charts.csv_download(frame, "perceptron_mass.csv", "Perceptron masses (CSV)", "symmetry.csv_mass")
    with d2:
        charts.csv_download(layers, "mlp_layer_mass.csv", "Mass per layer (CSV)", "symmetry.csv_mass_layers")


MASS_SERIES = (
    charts.Series("perceptrons", "#0072B2", marker="circle", line=False),
    charts.Series("after = before", "#999999", "dash"),
)


@memo.cached(4)
def mass_scatter_spec(present: bool) -> dict:
    """Each perceptron's mass before and after min-mass, log-log, with the line of no change."""
    powers = dict(values=POWERS_OF_TEN, format=",~g")
    chart = charts.altair_lines(
        MASS_SERIES,
        charts.quantity("x", "mass before", log=True, axis=powers),
        charts.quantity("y", "mass after min-mass", log=True, channel=alt.Y, axis=powers),
    )
    line, marks = chart.layer  # (alt.layer moved their dataset up to the layer: hence data= below)
    # One point per net (thousands): small and see-through, the line of no change on top.
    dots = marks.mark_point(size=18, strokeWidth=1, opacity=0.6)
    return charts.vega_spec(
        alt.layer(dots, line, data=chart.data), title="Every perceptron gets lighter", legend_columns=1
    )


def mass_scatter(column, before: np.ndarray, after: np.ndarray) -> None:
    ends = [float(before.min()), float(before.max())]
    lines = pd.concat(
        [charts.lines_frame(MASS_SERIES[0].label, before, after), charts.lines_frame(MASS_SERIES[1].label, ends, ends)]
    )
    charts.vega_chart(
        column,
        mass_scatter_spec(charts.presenting()),
        {"lines": lines},
        "symmetry.mass_scatter",
        alt_text="Each 2-2-1 perceptron's mass after min-mass against its mass before, log-log, "
        "all below the line of no change",
    )


LAYER_SERIES = (
    charts.Series("before", "#0072B2", marker="circle", line=False),
    charts.Series("after min-mass", "#D55E00", marker="triangle-up", line=False),
)


def layer_mass_frame(before_layers, after_layers) -> pd.DataFrame:
    """Each weight layer's mass (:func:`symmetry.layer_masses`), the mean over the nets, before and after
    min-mass. Nets with non-finite weights (diverged training) are left out before too, as min-mass leaves
    them out (symmetry_lab.mass_report)."""
    with np.errstate(over="ignore", invalid="ignore"):
        before = symmetry.layer_masses(before_layers)
    before = before[np.isfinite(before).all(axis=-1)]
    after = symmetry.layer_masses(after_layers)
    return pd.DataFrame(
        {
            "layer": [f"layer {i + 1}" for i in range(before.shape[-1])],
            "mass_before_mean": before.mean(axis=0),
            "mass_after_mean": after.mean(axis=0),
        }
    )


def layer_mass_chart(column, frame: pd.DataFrame) -> None:
    bars = pd.concat(
        [
            pd.DataFrame({"category": frame["layer"], "series": series.label, "value": frame[name]})
            for series, name in zip(LAYER_SERIES, ("mass_before_mean", "mass_after_mean"))
        ]
    )
    spec = bars_spec(
        LAYER_SERIES,
        tuple(frame["layer"]),
        ("mass", "(mean over the nets)"),
        "MNIST MLPs: mass per layer",
        charts.presenting(),
    )
    charts.vega_chart(
        column,
        spec,
        {"bars": bars},
        "symmetry.mass_layers",
        alt_text="Mean mass of each weight layer of the MNIST MLPs, before and after min-mass",
    )


@memo.cached(16)
def bars_spec(series: tuple, categories: tuple, value_title: str | tuple, title: str, present: bool) -> dict:
    """Grouped bars across (rows of ``category``, ``series``, ``value`` in dataset ``bars``), one group per
    category, each bar ended by its series' marker (the second cue besides colour). Across, so that every
    category's name reads level at its group's left in any column, with no axis title to collide with
    (the names say what they are). ``value_title``: a tuple for lines of its own."""
    channels = charts.series_channels(series)
    # Every category named: Vega would hide labels that overlap (level and one per group, they do not).
    y = alt.Y("category:N", title=None, sort=list(categories), axis=alt.Axis(labelOverlap=False, grid=False))
    offset = alt.YOffset("series:N", sort=[s.label for s in series])
    x = charts.quantity(
        "value", list(value_title) if isinstance(value_title, tuple) else value_title, scale=dict(zero=True)
    )
    base = alt.Chart(alt.NamedData("bars")).encode(y=y, yOffset=offset, x=x, color=channels["color"])
    chart = alt.layer(
        base.mark_bar(opacity=0.85),
        base.mark_point(size=charts.POINT_SIZE, strokeWidth=2, opacity=1, filled=False).encode(shape=channels["shape"]),
    )
    return charts.vega_spec(chart, title=title, legend_columns=1)


PROXIMITY_SERIES = (
    charts.Series("nearest copy: ‖gw − w‖ / ‖w‖", "#0072B2", marker="circle"),
    charts.Series("Thm 3.1 bound 2D / log n!", "#D55E00", "dash", marker="square"),
    charts.Series("trivial bound 2", "#999999", "dashdot"),
)


@memo.cached(4)
def proximity_spec(present: bool) -> dict:
    """The nearest copy's distance and Thm 3.1's bound against the width, log-log, with the trivial bound 2."""
    x = charts.quantity("x", "hidden width n", log=True, axis=dict(values=WIDTH_TICKS, format="d"))
    y = charts.quantity(
        "y",
        "distance relative to ‖w‖",
        log=True,
        channel=alt.Y,
        axis=dict(values=POWERS_OF_TEN, labelExpr=POWER_LABELS),
    )
    chart = alt.layer(charts.altair_lines(PROXIMITY_SERIES, x, y), charts.altair_rules(PROXIMITY_SERIES))
    spec = charts.vega_spec(chart, title="Equivalent modes crowd together", height=420, legend_columns=1)
    if present:  # presentation mode's larger text: the long labels on two lines each, to fit a phone's column
        for view in single_views(spec):
            for definition in view.get("encoding", {}).values():
                if isinstance(definition, dict) and definition.get("legend"):
                    definition["legend"]["labelExpr"] = two_line_labels(PROXIMITY_LABEL_LINES)
    return spec


PROXIMITY_LABEL_LINES = {
    PROXIMITY_SERIES[0].label: ("nearest copy:", "‖gw − w‖ / ‖w‖"),
    PROXIMITY_SERIES[1].label: ("Thm 3.1 bound", "2D / log n!"),
}


def two_line_labels(lines: dict[str, tuple[str, str]]) -> str:
    """A legend's ``labelExpr`` that draws each label of ``lines`` as its two lines (the datum keeps its label)."""
    expression = "datum.label"
    for label, (first, second) in lines.items():
        expression = f"datum.label === '{label}' ? ['{first}', '{second}'] : {expression}"
    return expression


def proximity_chart(frame: pd.DataFrame) -> None:
    lines = pd.concat(
        [
            charts.lines_frame(PROXIMITY_SERIES[0].label, frame["width"], frame["relative_distance"]),
            charts.lines_frame(PROXIMITY_SERIES[1].label, frame["width"], frame["bound"]),
        ]
    )
    rules = pd.DataFrame({"value": [2.0], "series": [PROXIMITY_SERIES[2].label]})
    charts.vega_chart(
        st,
        proximity_spec(charts.presenting()),
        {"lines": lines, "rules": rules},
        "symmetry.proximity",
        alt_text="Distance to the nearest permuted copy, relative to ‖w‖, and Thm 3.1's bound against "
        "the hidden width, log-log, with the trivial bound 2",
    )


def nearest_modes_table(modes: list[dict]) -> pd.DataFrame:
    """Each hidden layer's nearest permuted copy against Thm 3.1's bound, in words where a number would mislead."""

    def verdict(row) -> str:
        if row["bound_vacuous"]:
            return "nothing (bound ≥ 2)"
        return "within it" if row["below_bound"] else "beyond it"

    return pd.DataFrame(
        [
            {
                "hidden layer": row["layer"],
                "units": row["width"],
                "‖gw − w‖": finite_or_dash(row["distance"], ".3g"),
                "‖gw − w‖ / ‖w‖": finite_or_dash(row["relative_distance"], ".3g"),
                "Thm 3.1 bound": finite_or_dash(row["bound"], ".3g"),
                "the bound says": verdict(row),
                "units swapped": " and ".join(str(unit) for unit in row["pair"]) or "—",
            }
            for row in modes
        ]
    )


def vacuous_note(modes: list[dict]) -> str:
    vacuous = [str(row["layer"]) for row in modes if row["bound_vacuous"]]
    if not vacuous:
        return (
            "Here it is below 2, and the nearest copies are within it."
            if all(row["below_bound"] for row in modes)
            else "Here it is below 2, and some nearest copy lies beyond it."
        )
    where = "every hidden layer" if len(vacuous) == len(modes) else "hidden layer " + ", ".join(vacuous)
    return f"Here it is vacuous for {where}: being below it is no finding."


def degenerate_note(count: int) -> str:
    """Min-mass where some units have no incoming or no outgoing weight: the mass shown is an infimum."""
    if not count:
        return ""
    return (
        f" {count} unit{'s' * (count != 1)} {'are' if count != 1 else 'is'} degenerate (no incoming or no "
        "outgoing weight, or cut off behind such a unit): scaling them further lowers the mass toward the value "
        "shown, the infimum, which no finite rescaling reaches; the rescaled net keeps them at scale 1."
    )


def proximity_panel(config: symmetry_lab.ProximityConfig):
    rows = proximity(config)
    frame = pd.DataFrame(rows)
    widest = rows[-1]
    cols = st.columns(3)
    cols[0].metric(f"‖gw − w‖ / ‖w‖ at width {widest['width']}", f"{widest['relative_distance']:.2e}")
    cols[1].metric("Thm 3.1 bound there", f"{widest['bound']:.3f}")
    informative = frame[~frame["bound_vacuous"]]
    cols[2].metric(
        "widths with a bound < 2",
        f"{len(informative)} / {len(rows)}",
        help="Below 2: no permutation moves w by more than 2‖w‖, so a bound ≥ 2 is vacuous. "
        f"Of the widths where it is below 2, {int(informative['below_bound'].sum())} have their "
        "nearest copy within it.",
    )
    proximity_chart(frame)
    st.markdown(rf"""For a one-hidden-layer net of width $n$ with $D$ parameters, **Thm 3.1** (Gelberg et al.) guarantees a
non-trivial permutation $g$ with $\lVert g w - w\rVert \le \frac{{2D}}{{\log n!}}\lVert w\rVert$: the $n!$ copies of $w$ must
fit in a ball of radius about $\lVert w\rVert$, so some two are close. With $d_\text{{in}}$, $d_\text{{out}}$ fixed,
$D/\log n! = O(1/\log n) \to 0$. Here the exact nearest copy: $\lVert gw - w\rVert^2$ sums over the cycles of $g$ and every
step of a cycle joins two different units, so the best $g$ swaps the two closest units
(checked against all $n!$ permutations in the tests). Measured distances fall much faster than the bound, which
only drops below the trivial 2 (no permutation moves $w$ farther than $2\lVert w\rVert$) once $\log n! > D$: before
that it is vacuous, and being below it is no finding (here {config.d_in} input(s), {config.d_out} output(s)).
Close copies are what a single Gaussian straddles, as in the *Mode interpolation* lab.""")
    charts.csv_download(
        frame.drop(columns=["pair"]), f"proximity_{config.weights}.csv", "Distances (CSV)", "symmetry.csv_proximity"
    )


SAMPLE_METHODS = ("exact", *symmetry_lab.QUALITY_METHODS)
SAMPLE_SERIES = tuple(
    charts.Series(METHOD_STYLE[m][2], METHOD_STYLE[m][0], marker=METHOD_STYLE[m][1], line=False) for m in SAMPLE_METHODS
)
# The exact posterior's many samples small and faint; the ensemble's few points large.
SAMPLE_SIZES = {"exact": 20, "mfvi": 45, "sgm": 45, "ensemble": 110}
SAMPLE_OPACITY = {"exact": 0.35, "mfvi": 0.7, "sgm": 0.7, "ensemble": 1.0}
SAMPLES_SHOWN = 400  # points per method


@memo.cached(4)
def samples_spec(title: str, present: bool) -> dict:
    """Each method's samples over (w₁, w₂) on equal scales, square; the range comes with the data."""
    labels = [series.label for series in SAMPLE_SERIES]
    x = charts.quantity("x", "w₁", charts.DOMAIN_OF_DATA)
    y = charts.quantity("y", "w₂", charts.DOMAIN_OF_DATA, channel=alt.Y)
    chart = charts.altair_lines(SAMPLE_SERIES, x, y)
    [marks] = chart.layer  # (alt.layer moved its dataset up to the layer: hence data= below)
    # Size and opacity read a copy of the series' name, ordered as the series are: on the name itself, their
    # hidden legends would merge with the colour's (a Vega-Lite warning), and an unordered one warns too.
    marks = (
        marks.mark_point(strokeWidth=1.5, clip=True)
        .transform_calculate(method="datum.series")
        .encode(
            size=alt.Size(
                "method:O",
                sort=labels,
                legend=None,
                scale=alt.Scale(domain=labels, range=[SAMPLE_SIZES[m] for m in SAMPLE_METHODS]),
            ),
            opacity=alt.Opacity(
                "method:O",
                sort=labels,
                legend=None,
                scale=alt.Scale(domain=labels, range=[SAMPLE_OPACITY[m] for m in SAMPLE_METHODS]),
            ),
        )
    )
    # The legend's four entries in two rows, or in four where presentation mode's text needs the room.
    rows = 4 if present else 2
    return square_scales(
        charts.vega_spec(
            alt.layer(marks, data=chart.data),
            title=title,
            legend_columns=4 // rows,
            height=SQUARE_HEIGHT + charts.LEGEND_ROW_HEIGHT * rows,
        )
    )


def sample_points(samples: dict) -> dict[str, np.ndarray]:
    """The first :data:`SAMPLES_SHOWN` samples of each method drawn."""
    return {method: samples[method][:SAMPLES_SHOWN] for method in SAMPLE_METHODS}


def samples_chart(column, shown: dict[str, np.ndarray], removed: bool, extent: tuple[float, float]) -> None:
    lines = pd.concat(
        [
            charts.lines_frame(series.label, shown[method][:, 0], shown[method][:, 1])
            for method, series in zip(SAMPLE_METHODS, SAMPLE_SERIES)
        ]
    )
    title = "Units sorted (w₁ ≤ w₂)" if removed else "Raw samples"
    spec = charts.with_domains(samples_spec(title, charts.presenting()), x=extent, y=extent)
    charts.vega_chart(
        column,
        spec,
        {"lines": lines},
        "symmetry.samples_sorted" if removed else "symmetry.samples_raw",
        alt_text=f"{title}: each method's samples and the exact posterior's over (w₁, w₂)",
    )


def samples_extent(shown: dict[str, np.ndarray]) -> tuple[float, float]:
    """One range for w₁ and w₂ holding every shown sample (sorting permutes a sample's coordinates, so the raw
    and sorted samples have the same), with a margin."""
    values = np.concatenate([points.ravel() for points in shown.values()])
    values = values[np.isfinite(values)]
    low, high = (float(values.min()), float(values.max())) if values.size else (-1.0, 1.0)
    margin = 0.05 * (high - low) or 1.0
    return low - margin, high + margin


MMD_SERIES = (
    charts.Series("raw", "#0072B2", marker="circle", line=False),
    charts.Series("units sorted", "#D55E00", marker="triangle-up", line=False),
)


def quality_panel(config: symmetry_lab.QualityConfig):
    report = quality(config)
    frame = pd.DataFrame(report.rows)
    st.markdown(r"""The tractable BNN $f_w(x) = \mathrm{ReLU}(w_1x) + \mathrm{ReLU}(w_2x)$ has two equivalent modes. Each
method's samples are compared with samples of the exact (grid) posterior by the **MMD** (maximum mean discrepancy):
$\mathrm{MMD}^2 = \mathbb E[k(x,x')] + \mathbb E[k(y,y')] - 2\,\mathbb E[k(x,y)]$, unbiased, for 10 Gaussian
($e^{-\lVert x-y\rVert_2^2/h^2}$) and 10 Laplace ($e^{-\lVert x-y\rVert_1/h}$) kernels with bandwidths spanning the
samples' distances; the median over the 20 (Laurent et al. §4.1). *Units sorted*: both sets with permutation symmetry
removed first, which folds the two modes into one. A method that found one mode well is penalised raw and not
once sorted; a method that sits between the modes is penalised both ways.""")
    methods = tuple(METHOD_STYLE[m][2] for m in frame["method"])
    bars = pd.concat(
        [
            pd.DataFrame({"category": methods, "series": series.label, "value": frame[name]})
            for series, name in zip(MMD_SERIES, ("mmd2_raw", "mmd2_removed"))
        ]
    )
    spec = bars_spec(
        MMD_SERIES, methods, ("median MMD²", "lower is closer"), "MMD² to the posterior", charts.presenting()
    )
    left, right = st.columns(2)
    charts.vega_chart(
        left,
        spec,
        {"bars": bars},
        "symmetry.mmd",
        alt_text="Median MMD² of each method's samples to the exact posterior's, raw and with the units sorted",
    )
    with right:
        shown = frame.assign(method=[METHOD_STYLE[m][2] for m in frame["method"]])
        tables.show(
            shown.rename(columns={"mmd2_raw": "MMD² raw", "mmd2_removed": "MMD² units sorted"}), hide_index=True
        )
        st.caption(
            "MFVI: 200 samples of the fitted mean-field Gaussian. SGM: samples of q_θ, each swapped with "
            "probability ½. Deep ensemble: 200 MAP fits from random starts (points, no spread). "
            "“exact vs exact”: a second exact sample set, the value a perfect method would get."
        )
    samples = report.samples
    sorted_samples = {method: symmetry_lab.remove_toy_symmetry(points) for method, points in samples.items()}
    raw, ordered = sample_points(samples), sample_points(sorted_samples)
    extent = samples_extent(raw)
    c1, c2 = st.columns(2)
    samples_chart(c1, raw, False, extent)
    samples_chart(c2, ordered, True, extent)
    long = pd.concat([pd.DataFrame({"method": m, "w1": s[:, 0], "w2": s[:, 1]}) for m, s in samples.items()])
    ordered_all = np.concatenate([sorted_samples[m] for m in samples])
    long = long.assign(w1_sorted=ordered_all[:, 0], w2_sorted=ordered_all[:, 1])  # the second chart's
    d1, d2, _ = st.columns([1, 1, 2])
    with d1:
        charts.csv_download(frame, "mmd.csv", "MMD (CSV)", "symmetry.csv_mmd")
    with d2:
        charts.csv_download(long, "samples.csv", "Samples (CSV)", "symmetry.csv_samples")


def training_series(window: int) -> tuple[tuple[charts.Series, charts.Series], charts.Series]:
    """The τ chart's series (per step, and its running mean) and the loss chart's."""
    return (
        (charts.Series("τ per step", "#999999"), charts.Series(f"mean of {window} steps", "#0072B2", "dash")),
        charts.Series(f"training loss (mean of {window} steps)", "#D55E00"),
    )


@memo.cached(8)
def tau_spec(window: int, present: bool) -> dict:
    series = training_series(window)[0]
    chart = charts.altair_lines(
        series,
        charts.quantity("x", "SGD step", integer=True),
        charts.quantity("y", "Kendall τ (successive sorts)", charts.DOMAIN_OF_DATA, channel=alt.Y),
    )
    line, *legend = chart.layer  # (alt.layer moved their dataset up to the layer: hence data= below)
    # Every step's τ thin (it jumps from step to step), its running mean thick.
    labels = [s.label for s in series]  # widths read a copy of the name, as samples_spec's sizes do
    line = line.transform_calculate(curve="datum.series").encode(
        strokeWidth=alt.StrokeWidth("curve:O", sort=labels, legend=None, scale=alt.Scale(domain=labels, range=[1, 3]))
    )
    return charts.vega_spec(
        alt.layer(line, *legend, data=chart.data), title="Do the units change places?", legend_columns=1
    )


@memo.cached(8)
def loss_spec(window: int, present: bool) -> dict:
    # One line: no legend; the axis title says what it is.
    chart = charts.altair_lines(
        (training_series(window)[1],),
        charts.quantity("x", "SGD step", integer=True),
        charts.quantity("y", ["cross-entropy (nats),", f"mean of {window} steps"], channel=alt.Y),
        legend=False,
    )
    return charts.vega_spec(chart, title="Training loss")


TAU_FLOOR_QUANTILE = 0.02


def tau_domain(tau: np.ndarray) -> tuple[float, float]:
    """The τ axis: from the 2nd percentile of the steps' τ to 1, so that the differences near 1 the schedules
    make show (the first steps' τ, far lower, would squash them into a line); a margin either end."""
    low = float(np.quantile(tau, TAU_FLOOR_QUANTILE)) if tau.size else 0.0
    margin = 0.05 * (1.0 - low) or 0.01
    return low - margin, 1.0 + margin


def training_panel(config: symmetry_lab.MlpConfig):
    run = trained_mlps(config)
    report = symmetry_lab.training_report(run)
    cols = binding.metric_cells(5)  # each "…" label beside the one it continues
    cols[0].metric("mean Kendall τ", f"{report.tau_mean:.3f}", help="1: the units kept their order.")
    cols[1].metric(
        "… in the last tenth",
        f"{report.tau_mean_last_tenth:.3f}",
        help="Over the last tenth of the steps, where a decaying learning rate is near 0.",
    )
    first_half = report.share_steps_with_permutation_first_half  # None for a single step
    cols[2].metric("steps with a swap, first half", "—" if first_half is None else f"{first_half:.0%}")
    cols[3].metric("… last tenth", f"{report.share_steps_with_permutation_last_tenth:.0%}")
    accuracy = report.test_accuracy_mean
    cols[4].metric(
        "test accuracy",
        "—" if accuracy is None else f"{accuracy:.3f}",
        help="Mean over the nets that did not diverge, 2000 test images.",
    )
    if report.diverged:
        st.warning(
            f"{report.diverged} of {config.instances} nets diverged (NaN loss) and stopped: lower the learning rate."
        )
    steps = np.arange(1, config.steps + 1)
    tau = np.asarray(report.tau_per_step)
    window = max(1, config.steps // 50)
    smooth = pd.Series(tau).rolling(window, min_periods=1).mean()
    loss = pd.Series(run.loss.mean(1)).rolling(window, min_periods=1).mean()
    left, right = st.columns(2)
    tau_series, loss_series = training_series(window)
    charts.vega_chart(
        left,
        charts.with_domains(tau_spec(window, charts.presenting()), y=tau_domain(tau)),
        {
            "lines": pd.concat(
                [
                    charts.lines_frame(tau_series[0].label, steps, tau),
                    charts.lines_frame(tau_series[1].label, steps, smooth),
                ]
            )
        },
        "symmetry.tau",
        alt_text="Kendall τ between successive sorts of the units per SGD step, and its running mean",
    )
    charts.vega_chart(
        right,
        loss_spec(window, charts.presenting()),
        {"lines": charts.lines_frame(loss_series.label, steps, loss)},
        "symmetry.loss",
        alt_text="Training loss (cross-entropy) per SGD step, running mean",
    )
    st.markdown(rf"""Laurent et al.'s protocol (§5.2): after every SGD step, sort each hidden layer's units
({"by their largest incoming weight" if config.sort_key == "max_in" else config.sort_key.replace("_", " ")}) and compare
the sorting permutation with the previous step's by **Kendall's τ** (1: same order; −1: reversed). Units change
places while the steps are large and noisy; with a decaying learning rate the order freezes at the end, so a trained
net sits in one permutation copy. Sorting by the weight from the first pixel never changes anything: that pixel
is black in every MNIST image, so its weights never move. The τ axis starts at the 2nd percentile of the steps' τ:
the few steps lower still run off its foot.""")
    frame = pd.DataFrame({"step": steps, "tau_mean": tau, "loss_mean": run.loss.mean(1)})
    charts.csv_download(frame, f"permutations_seed{config.seed}.csv", "τ and loss per step (CSV)", "symmetry.csv_tau")


def uploaded(upload, sort_key: str) -> symmetry_lab.UploadedNetwork:
    """This session's upload read and measured in a process of its own, kept while the file and the sort key
    stay; :class:`files.uploads.UploadRefused` with the reason where it cannot be."""
    return files.analysed(key("network_report"), symmetry_lab.uploaded_network, [upload], (sort_key,))


def inputs_title(shown: int, inputs: int) -> str | tuple:
    return "input" if shown == inputs else (f"{shown} of {inputs} inputs:", "those that vary most")


@memo.cached(8)
def weights_spec(title: str, x_title: str | tuple, numbered: bool, present: bool) -> dict:
    """A weight matrix as a picture, unit 0 on top (unit u at y = −u), in a diverging scale centred on 0 with its
    legend; the axes' range comes with the data. ``numbered``: the x axis numbers the inputs (not for a choice
    of them, drawn side by side)."""
    rows = dict(labelExpr="-datum.value", tickMinStep=1)
    heat = charts.altair_image(
        "input", "hidden unit (row)", charts.DOMAIN_OF_DATA, charts.DOMAIN_OF_DATA, smooth=False, y_axis=rows
    )
    columns = {} if numbered else dict(labels=False, ticks=False)
    heat = heat.encode(
        x=charts.quantity(
            "x",
            list(x_title) if isinstance(x_title, tuple) else x_title,
            charts.DOMAIN_OF_DATA,
            integer=True,
            axis=columns,
        )
    )
    scale = charts.altair_colour_legend("weight", charts.BLUE_RED)
    return charts.vega_spec(alt.layer(heat, scale).resolve_legend(fill="independent"), title=title, height=420)


def weights_image(W: np.ndarray, units_per_row: int = 1) -> tuple[pd.DataFrame, float]:
    """:func:`weights_heatmap`'s picture of ``W[row, input]`` (a row per ``units_per_row`` units: the row of unit u
    at y = −u) and the colour scale's limit: ± the 99th percentile of |W|, so a few large weights do not wash out
    the rest."""
    limit = float(np.quantile(np.abs(W), 0.99)) or 1.0
    units, inputs = W.shape
    z, xs = W[::-1], np.arange(inputs, dtype=float)
    ys = -(np.arange(units, dtype=float) * units_per_row)[::-1]
    # A picture needs two cells a side to know their size: a single unit or input is drawn as two half cells.
    if units == 1:
        z, ys = np.repeat(z, 2, axis=0), np.array([-0.25, 0.25])
    if inputs == 1:
        z, xs = np.repeat(z, 2, axis=1), np.array([-0.25, 0.25])
    return charts.image_frame(xs, ys, z, charts.BLUE_RED, domain=(-limit, limit)), limit


def weights_heatmap(
    column, picture: tuple[pd.DataFrame, float], title: str, chart_key: str, shown: int, inputs: int
) -> None:
    """A weight matrix's pictured columns (:func:`pictured_inputs`: ``shown`` of its ``inputs``) as a picture,
    ``picture`` (:func:`weights_image`)."""
    image, limit = picture
    x_title = inputs_title(shown, inputs)
    spec = charts.with_domains(
        weights_spec(title, x_title, shown == inputs, charts.presenting()),
        x=(image["x"][0], image["x2"][0]),
        y=(image["y"][0], image["y2"][0]),
    )
    charts.vega_chart(
        column,
        spec,
        {"image": image, "scale": pd.DataFrame({"z": [-limit, limit]})},
        chart_key,
        alt_text=f"{title}: the weight from each input (across) to each hidden unit (down)",
    )


def finite_or_dash(value: float, spec: str) -> str:
    return format(value, spec) if np.isfinite(value) else "—"


def network_panel(sort_key: str):
    st.info(files.UPLOAD_NOTICE, icon=":material/link_off:")
    upload = files.upload_field("Your network", key("upload"))
    if upload is None:
        st.markdown(
            "Upload a trained MLP of `nn.Linear` layers with ReLU between them "
            "(`torch.save(model.state_dict(), 'net.pt')`, or safetensors; an MNIST run's posterior from the "
            f"*MNIST* page reads too, and so does a mean-field posterior saved by {LIBRARIES}). The "
            "page then measures how close its equivalent copies are, takes its permutation and scaling "
            "symmetries out, and checks that each removal keeps its function."
        )
        return
    try:
        found = uploaded(upload, sort_key)
    except files.uploads.UploadRefused as error:
        files.show_refusal(error)
        return
    files.show_read(st, upload, found.description)
    network_analysis(found, upload, sort_key)


def network_analysis(found: symmetry_lab.UploadedNetwork, upload, sort_key: str) -> None:
    """The measurements of an uploaded network: its layers, nearest copies, removals, first layer's weights."""
    rep = found.report
    st.table(files.layer_table(found.layers))
    first = rep.nearest_modes[0]
    cols = binding.metric_cells(4)
    cols[0].metric(
        "nearest copy ‖gw − w‖ / ‖w‖",
        finite_or_dash(first["relative_distance"], ".3g"),
        help="Hidden layer 1: the transposition of its two closest units (— with one unit, or all weights 0).",
    )
    cols[1].metric(
        "Thm 3.1 bound 2D / log n!",
        finite_or_dash(first["bound"], ".3g"),
        delta="vacuous (≥ 2)" if first["bound_vacuous"] else None,
        delta_color="off",
        delta_arrow="off",
        help="Any permutation moves w by at most 2‖w‖, so a bound ≥ 2 says nothing about this net.",
    )
    cols[2].metric("min-mass: mass after / before", finite_or_dash(rep.mass_ratio, ".3f"))
    cols[3].metric(
        "MNIST test accuracy",
        "—" if rep.mnist_accuracy is None else f"{rep.mnist_accuracy:.4f}",
        help=None
        if rep.mnist_scaling is None
        else f"Inputs scaled {rep.mnist_scaling}: the scaling this net classifies best.",
    )
    if rep.posterior:
        st.caption("A mean-field posterior: the analyses are of its means.")
    tables.show(nearest_modes_table(rep.nearest_modes), hide_index=True)
    st.caption(
        f"Per hidden layer, the nearest of its n! permuted copies swaps its two closest units (their rows: "
        f"incoming weights, bias, outgoing weights). Thm 3.1's bound holds for any group acting by isometries "
        f"on the D = {rep.n_parameters:,} parameters, so for each layer's permutations too; it is informative "
        f"only once log n! > D (below the trivial 2). {vacuous_note(rep.nearest_modes)}"
    )
    shown_inputs = len(found.pictured_inputs)
    left, right = st.columns(2)
    for column, picture, (title, chart) in zip(
        (left, right), first_layer_pictures(found), (("as uploaded", "raw"), ("units sorted", "sorted"))
    ):
        weights_heatmap(
            column, picture, f"Hidden layer 1, {title}", f"symmetry.net_{chart}", shown_inputs, rep.sizes[0]
        )
    shown = (
        ""
        if shown_inputs == rep.sizes[0]
        else (
            f" The pictures show the {shown_inputs} of its {rep.sizes[0]} inputs whose weights vary most across the "
            f"units, side by side in input order; the CSVs below hold them all."
        )
    )
    if found.units_per_row > 1:
        shown += (
            f" Each row of a picture is the mean of {found.units_per_row} consecutive units (of "
            f"{rep.sizes[1]:,}: more rows than a chart has pixels)."
        )
    st.caption(
        f"Hidden layer 1's incoming weights (a row per unit, unit 0 on top), as uploaded and with its units "
        f"sorted by {SORT_KEY_NAMES[sort_key]}: the same rows, reordered.{shown} Colours saturate at ± the 99th "
        f"percentile of the shown weights' size."
    )
    checks = pd.DataFrame(
        [
            ("units sorted (permutation removal)", rep.permutation_removal_change),
            ("units normalised (scaling removal)", rep.scaling_removal_change),
            ("min-mass rescaling", rep.min_mass_change),
        ],
        columns=["removal", "largest output change"],
    )
    st.table(
        checks.assign(**{"largest output change": checks["largest output change"].map("{:.2e}".format)}).set_index(
            "removal"
        )
    )
    st.caption(
        f"Each removal is checked on {rep.check_inputs}: a change at rounding level means it kept the "
        f"function. Min-mass: mass {rep.mass_before:.5g} → {rep.mass_after:.5g} "
        f"({'converged' if rep.min_mass_converged else 'not converged'}).{degenerate_note(rep.degenerate_units)}"
    )
    d1, d2, d3, _ = st.columns([1, 1, 1, 1])
    with d1:
        charts.csv_download(
            lambda: pd.DataFrame(rep.nearest_modes).drop(columns=["pair"]),
            "nearest_modes.csv",
            "Nearest copies (CSV)",
            "symmetry.csv_net",
        )
    # Read again from the file when clicked, in a process of its own: a 5 000-unit layer's table is larger than the
    # file, and the page keeps only what its pictures show.
    for column, (stem, title, sort) in zip(
        (d2, d3), (("first_layer", "Weights as uploaded", False), ("sorted_first_layer", "Sorted weights", True))
    ):
        with column:
            files.file_download(
                first_layer_csv(upload, sort_key, sort),
                f"{stem}.csv",
                f"{title} (CSV)",
                f"symmetry.csv_net_{'sorted' if sort else 'raw'}",
                mime="text/csv",
            )


def first_layer_csv(upload, sort_key: str, sort: bool):
    """The download's bytes, made when clicked, in a process of its own: hidden layer 1's weights, a row per unit."""
    limits, read = files.analysis_limits(), [(files.upload_name(upload), upload.getvalue())]
    return lambda: files.uploads.analyse(symmetry_lab.first_layer_csv, read, (sort_key, sort), limits=limits)


def first_layer_pictures(found: symmetry_lab.UploadedNetwork) -> tuple:
    """The pictures of hidden layer 1 as uploaded and sorted, made once per analysis (a 5 000-unit layer's take
    tens of milliseconds), kept with it in this session."""
    kept = st.session_state.get(key("network_pictures"))
    if kept is None or kept[0] is not found:
        kept = (found, *(weights_image(W, found.units_per_row) for W in (found.pictured, found.pictured_sorted)))
        st.session_state[key("network_pictures")] = kept
    return kept[1:]


def main():
    values = binding.start_page(
        PAGE,
        binding.page_specs(LAB),
        "Symmetry explorer",
        "Take the permutation and scaling symmetries out of trained networks, and measure how close "
        "a network's equivalent copies are (Laurent et al. 2024; Gelberg et al. 2024, Thm 3.1).",
        controls,
    )
    cfg = params.page_configs(values)
    part = values["part"]
    st.header(PARTS[part])
    panels = {
        "fig1": lambda: fig1_panel(cfg["perceptron"]),
        "mass": lambda: mass_panel(cfg),
        "proximity": lambda: proximity_panel(cfg["proximity"]),
        "quality": lambda: quality_panel(cfg["quality"]),
        "training": lambda: training_panel(cfg["mlp"]),
        "network": lambda: network_panel(cfg["mlp"].sort_key),
    }
    try:
        panels[part]()
    except RuntimeError as error:  # diverged training, unreadable MNIST: say so, keep the controls
        st.error(binding.for_visitors(str(error)), icon=":material/error:")


if __name__ == "__main__":  # run as a script: AppTest.from_file, `streamlit run views/<lab>.py`
    main()
