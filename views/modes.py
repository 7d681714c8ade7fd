"""Mode interpolation lab: a single Gaussian fitted by reverse KL to two modes (Gelberg et al. §3)."""

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from symlab.labs.modes import LAB, frames, params
from symlab.labs.modes import experiment as modes
from symlab.labs.modes.config import SweepConfig, sweep_alpha_max
from symlab.specs import surfaces as landscape
from symlab.specs.urlstate import SURFACE_VIEW
from views.common import animation, binding, charts, computing, memo, surfaces

PAGE = "modes"
FIG5_SIGMAS = (0.25, 0.5, 1.0, 2.0)
PAPER_THRESHOLDS = (1.25, 2.5, 5.0, 10.0)  # Gelberg et al. Fig. 5, read off their sweeps
TICK_SECONDS = 0.1  # a frame's time at normal speed


@memo.cached(32)
def sweep_for(config: SweepConfig):
    alphas = modes.sweep_alphas(config)
    return modes.fit_exact(alphas, config.sigma, config.dim), modes.forward_kl_optimum(alphas, config.sigma, config.dim)


@memo.cached(64)
def threshold_for(sigma: float) -> float | None:
    return modes.exact_threshold(sigma, SweepConfig(sigma=sigma).largest_alpha)


@memo.cached(256)
def optimum_at(alpha: float, sigma: float):
    return modes.optimum_from_start(alpha, sigma)


@memo.cached(256)
def forward_fit_at(alpha: float, sigma: float) -> tuple[float, float, float]:
    """The forward-KL optimum (moment matching) at α: its mean and standard deviation along e₁, and KL(p_α‖q)."""
    fit = modes.forward_kl_optimum([alpha], sigma)
    return float(fit.mean[0]), float(fit.std_e1[0]), float(fit.kl[0])


def forward_at(alpha: float, sigma: float) -> tuple[float, float]:
    """The forward-KL optimum at α: its mean and its standard deviation along e₁."""
    return forward_fit_at(alpha, sigma)[:2]


def path_for(alpha: float, sigma: float) -> frames.PathRun:
    """Adam's path at (α, σ) and its frames, computed once for every session in this page's run: 0.1 s, less than
    a wait in the workers' queue behind the class's training."""
    return computing.shared_result(("modes_path", alpha, sigma), lambda: frames.path_run(alpha, sigma), capacity=64)


@memo.cached(32)  # one landscape per (α, σ), for every session
def landscape_for(alpha: float, sigma: float) -> landscape.Surface:
    return modes.kl_landscape(alpha, sigma)


# The 3-D view: the objective as a landscape (grey, darker higher), Adam's path and q's place on it.
LANDSCAPE_STYLES = {
    "path": surfaces.Style(charts.PALETTE["reverse"], "solid", name="Adam's path so far"),
    "now": surfaces.Style(charts.PALETTE["forward"], symbol="diamond", line=False, name="q at this step"),
    "optimum": surfaces.Style(charts.PALETTE["current"], symbol="x", line=False, name="optimum from q's start"),
}
LANDSCAPE_CAMERA = {"eye": {"x": 0.5, "y": -1.6, "z": 1.3}}  # from narrow q, above: μ across, the valleys in view


def landscape_view(alpha: float, sigma: float, path, step: int) -> None:
    surfaces.surface_chart(
        landscape_for(alpha, sigma),
        modes.path_lines(path, step, optimum_at(alpha, sigma), frames.FRAME_STRIDE),
        LANDSCAPE_STYLES,
        "modes.landscape",
        "KL(q‖p_α) over q's mean and log standard deviation, with Adam's path on it",
        camera=LANDSCAPE_CAMERA,
    )


def controls():
    with st.sidebar:
        st.subheader("Presets")
        binding.preset_picker(PAGE, binding.page_specs(LAB), params.PRESETS)
        st.subheader("Target")
        st.slider(
            "Mode distance α",
            params.ALPHA.low,
            params.ALPHA.high,
            step=params.ALPHA.step,
            key=binding.widget_key(PAGE, "alpha"),
        )
        binding.control_widget(PAGE, SweepConfig, "sigma", cap=params.CAPS["sigma"])
        binding.control_widget(PAGE, SweepConfig, "dim")
        st.toggle("Show the forward-KL fit", key=binding.widget_key(PAGE, "forward"))
        surfaces.switch(
            PAGE,
            "The objective over q's mean and width as a surface you can turn, with Adam's path on it (in Watch it "
            "optimise).",
        )


def normal_pdf(x, mean, std):
    return np.exp(modes.log_normal(x, mean, std))


# The static charts (Vega-Lite, as the player's; views/common): each spec depends on what fixes its axes and
# legend, not on α, so moving a slider swaps the data of a chart already drawn.
DENSITY_SERIES = (
    charts.Series(frames.DENSITY_LABELS["target"], charts.PALETTE["target"]),
    charts.Series(frames.DENSITY_LABELS["q"], charts.PALETTE["reverse"], "dash"),
    charts.Series("q (forward KL)", charts.PALETTE["forward"], "dot"),
)
ELLIPSE_SERIES = (
    charts.Series("q, 1 sd (reverse)", charts.PALETTE["reverse"]),
    charts.Series("q, 2 sd (reverse)", charts.PALETTE["reverse"], "dash"),
    charts.Series("q, 1 sd (forward)", charts.PALETTE["forward"], "dot"),
)
SWEEP_SERIES = (
    charts.Series("reverse KL", charts.PALETTE["reverse"], marker="circle"),
    charts.Series("forward KL", charts.PALETTE["forward"], "dot", marker="square"),
)
SWEEP_MARKS = (
    charts.Series("current α", charts.PALETTE["current"]),
    charts.Series("threshold α*", charts.PALETTE["threshold"], "dash"),
    charts.Series("ln 2", charts.PALETTE["grey"], "dashdot"),
)
SCALING_SERIES = (
    charts.Series("α = 5σ", charts.PALETTE["grey"], "dash"),
    charts.Series("paper (Fig. 5)", charts.PALETTE["paper"], marker="square", line=False),
    charts.Series("exact α*", charts.PALETTE["reverse"], marker="circle", line=False),
    charts.Series("current σ", charts.PALETTE["current"], marker="diamond", line=False),
)
CONTOUR_TITLE = "In 2-D: the target and q"  # short: a title wider than its chart is cut
CONTOUR_SHADES = ("#FFFFFF", "#525252")  # the target's density, from 0 to its largest
# The 2-D view's plot height (px) for a nominal plot width: its data's aspect, within these bounds.
CONTOUR_NOMINAL_WIDTH_PX, CONTOUR_HEIGHT_PX = 400, (120, 320)
CONTOUR_DECORATION_PX = 120  # the 2-D chart's title, x-axis and legend below the plot, about
# A legend entry's width (px), estimated: its symbol and padding, and its label's characters at about 0.6 of
# the font size each (the browser's fonts are not known here).
LEGEND_SYMBOL_PX, LEGEND_CHAR_EM = 34, 0.6
RIGHT_PADDING_PX = 6  # room for the x-axis' last label (see fitted)


def fitted(spec: dict, labels) -> dict:
    """``spec`` fitted to its column at any width: its legend (entries ``labels``) in as many columns as the
    plot's width holds (a Vega expression: the width is the column's, known only in the browser), so that it
    never runs past the chart nor is cut, and room on the right for the x-axis' last label (Vega's estimate of
    its width falls short of the drawn text by a pixel or two)."""
    font = spec["config"]["legend"]["labelFontSize"]
    entry = round(LEGEND_SYMBOL_PX + LEGEND_CHAR_EM * font * max(len(label) for label in labels))
    # The column less the y axis, not Vega's plot width: that one follows the legend's rows (autosize "fit"), and a
    # player that lays the chart out again at every frame would settle on a legend taller than its room.
    plot = f"({charts.COLUMN_PX} - {charts.Y_AXIS_EM * font:g})"
    spec["config"]["legend"]["columns"] = {"expr": f"max(1, floor({plot} / {entry}))"}
    spec["padding"] = dict(right=RIGHT_PADDING_PX)
    return spec


# The 2-D view keeps one scale on both axes at any width: its domains, Vega expressions of the plot's size, hold
# the data's box (the parameter BOX_PARAM: x from, x to, y from, y to) at the smallest scale that fits it.
BOX_PARAM = "box"
UNITS_PER_PX = f"max(({BOX_PARAM}[1] - {BOX_PARAM}[0]) / width, ({BOX_PARAM}[3] - {BOX_PARAM}[2]) / height)"
EQUAL_SCALE_DOMAINS = {
    axis: {
        "expr": f"[({BOX_PARAM}[{low}] + {BOX_PARAM}[{high}] - {UNITS_PER_PX} * {size}) / 2, "
        f"({BOX_PARAM}[{low}] + {BOX_PARAM}[{high}] + {UNITS_PER_PX} * {size}) / 2]"
    }
    for axis, low, high, size in (("x", 0, 1, "width"), ("y", 2, 3, "height"))
}


def with_domain_expressions(view: dict, domains: dict) -> dict:
    """``view`` with the scale domain of each position channel named in ``domains`` set to its expression in
    every (layered) view that fixes one."""
    view = dict(view)
    if "encoding" in view:
        view["encoding"] = {
            name: (
                {**channel, "scale": {**channel["scale"], "domain": domains[name]}}
                if name in domains and "domain" in (channel.get("scale") or {})
                else channel
            )
            for name, channel in view["encoding"].items()
        }
    if "layer" in view:
        view["layer"] = [with_domain_expressions(child, domains) for child in view["layer"]]
    return view


def contour_height(x_domain, y_domain) -> int:
    """The 2-D chart's height (px, before presentation mode's enlargement): its plot as high as the data's box
    would be at a nominal width, within bounds (the domains then widen the shorter side to one scale)."""
    (x_low, x_high), (y_low, y_high) = x_domain, y_domain
    plot = CONTOUR_NOMINAL_WIDTH_PX * (y_high - y_low) / (x_high - x_low)
    return round(min(max(plot, CONTOUR_HEIGHT_PX[0]), CONTOUR_HEIGHT_PX[1]) + CONTOUR_DECORATION_PX)


@memo.cached(16)
def density_spec(forward: bool, present: bool) -> dict:
    series = DENSITY_SERIES if forward else DENSITY_SERIES[:2]
    chart = charts.altair_lines(
        series,
        charts.quantity("x", "x₁ (along e₁)"),
        charts.quantity("y", "density", channel=alt.Y, scale=dict(zero=True)),
    )
    return fitted(charts.vega_spec(chart, title="Along e₁"), [s.label for s in series])


# The charts' data, made once for every session (the Arrow bytes a chart sends): a student's rerun, and a slider
# moved back to a value seen before, send them as they are.
@memo.cached(64)
def density_lines(alpha: float, sigma: float, forward: bool) -> bytes:
    x = frames.density_grid(alpha, sigma)
    mean, std = optimum_at(alpha, sigma)[:2]
    lines = [
        (DENSITY_SERIES[0].label, x, np.exp(modes.log_mixture(x, alpha, sigma))),
        (DENSITY_SERIES[1].label, x, normal_pdf(x, mean, std)),
    ]
    if forward:
        lines.append((DENSITY_SERIES[2].label, x, normal_pdf(x, *forward_at(alpha, sigma))))
    return charts.lines_bytes(lines)


def density_chart(column, alpha, sigma, forward):
    charts.vega_chart(
        column,
        density_spec(forward, charts.presenting()),
        {"lines": density_lines(alpha, sigma, forward)},
        "modes.density",
        alt_text="The target's density along e₁ and the fitted q's",
    )


def ellipse(mean1, std1, std2, radius):
    t = np.linspace(0, 2 * np.pi, 100)
    return mean1 + radius * std1 * np.cos(t), radius * std2 * np.sin(t)


@memo.cached(16)
def contour_spec(forward: bool, present: bool) -> dict:
    """The target's density in the plane with q's ellipses, one scale on both axes (EQUAL_SCALE_DOMAINS); the
    data's box and the height come with the data."""
    series = ELLIPSE_SERIES if forward else ELLIPSE_SERIES[:2]
    x = charts.quantity("x", "x₁ (along e₁)", charts.DOMAIN_OF_DATA)
    y = charts.quantity("y", "x₂", charts.DOMAIN_OF_DATA, channel=alt.Y)
    chart = alt.layer(
        charts.altair_image("x₁ (along e₁)", "x₂", charts.DOMAIN_OF_DATA, charts.DOMAIN_OF_DATA, opacity=0.8),
        charts.altair_lines(series, x, y, data_order=True),
    )
    spec = charts.vega_spec(chart, title=CONTOUR_TITLE)
    return fitted(with_domain_expressions(spec, EQUAL_SCALE_DOMAINS), [s.label for s in series])


@memo.cached(64)
def contour_data(alpha: float, sigma: float, forward: bool) -> tuple[dict[str, bytes], list[float]]:
    """The 2-D view's datasets (the target's image, q's ellipses) and the data's box."""
    x1 = np.linspace(-3.5 * sigma, alpha + 3.5 * sigma, 90)
    x2 = np.linspace(-3.5 * sigma, 3.5 * sigma, 60)
    density = np.exp(modes.log_mixture_2d(x1[None, :], x2[:, None], alpha, sigma))
    mean, std = optimum_at(alpha, sigma)[:2]
    lines = [(ELLIPSE_SERIES[index].label, *ellipse(mean, std, sigma, radius)) for index, radius in ((0, 1), (1, 2))]
    if forward:
        lines.append((ELLIPSE_SERIES[2].label, *ellipse(*forward_at(alpha, sigma), sigma, 1)))
    datasets = {
        "image": charts.arrow_bytes(charts.image_frame(x1, x2, density, CONTOUR_SHADES)),
        "lines": charts.lines_bytes(lines),
    }
    return datasets, [float(v) for v in (x1[0], x1[-1], x2[0], x2[-1])]


def contour_chart(column, alpha, sigma, forward):
    datasets, box = contour_data(alpha, sigma, forward)
    spec = {
        **contour_spec(forward, charts.presenting()),
        "params": [{"name": BOX_PARAM, "value": box}],
        "height": round(contour_height(box[:2], box[2:]) * charts.font_scale()),
    }
    charts.vega_chart(
        column,
        spec,
        datasets,
        "modes.contour",
        alt_text="The target's density in the plane of e₁ and x₂, shaded, with q's 1 and 2 sd ellipses",
    )
    column.caption("Grey: the target's density. Both axes share one scale.")


@memo.cached(32)
def sweep_spec(y_title: str, title: str, forward: bool, log_y: bool, asymptote: bool, present: bool) -> dict:
    series = (SWEEP_SERIES if forward else SWEEP_SERIES[:1]) + (SWEEP_MARKS if asymptote else SWEEP_MARKS[:2])
    # No layer for a level the chart does not draw: an empty one has no extent, which Vega warns of.
    levels = [charts.altair_rules(series, data="horizontal")] if asymptote else []
    chart = alt.layer(
        charts.altair_lines(
            series, charts.quantity("x", "mode distance α"), charts.quantity("y", y_title, channel=alt.Y, log=log_y)
        ),
        charts.altair_rules(series, data="vertical", axis="x"),
        *levels,
    )
    return fitted(charts.vega_spec(chart, title=title), [s.label for s in series])


# The sweeps' curves, by the field of the fits (reverse and forward) each chart draws.
SWEEP_FIELDS = {"modes.interp": "interpolation", "modes.det": "det_cov", "modes.kl": "kl"}


@memo.cached(128)  # three charts, with and without the forward fits, per sweep that sweep_for keeps
def sweep_lines(config: SweepConfig, field: str, forward: bool) -> bytes:
    """A sweep chart's curves: the reverse-KL fits' ``field`` against α, and the forward-KL fits' with ``forward``."""
    sweep, forward_sweep = sweep_for(config)
    curves = [(SWEEP_SERIES[0].label, getattr(sweep, field))]
    if forward:
        curves.append((SWEEP_SERIES[1].label, getattr(forward_sweep, field)))
    return charts.lines_bytes([(label, sweep.alphas, values) for label, values in curves])


@memo.cached(256)
def sweep_rules(alpha: float, threshold: float | None, asymptote: float | None) -> dict[str, bytes]:
    """The sweep charts' marks: the current α and the threshold across α (``vertical``), a level (``horizontal``)."""
    vertical = [(SWEEP_MARKS[0].label, alpha)] + ([] if threshold is None else [(SWEEP_MARKS[1].label, threshold)])
    horizontal = [] if asymptote is None else [(SWEEP_MARKS[2].label, asymptote)]
    return {
        name: charts.arrow_bytes({"series": [label for label, _ in marks], "value": [value for _, value in marks]})
        for name, marks in (("vertical", vertical), ("horizontal", horizontal))
        if marks
    }


def sweep_chart(column, key, config, forward, alpha, threshold, y_title, title, log_y=False, asymptote=None):
    """The sweep's ``SWEEP_FIELDS[key]`` against α, with the forward-KL fits' with ``forward``; ``asymptote``: a
    level drawn across, as "ln 2"."""
    spec = sweep_spec(y_title, title, forward, log_y, asymptote is not None, charts.presenting())
    datasets = {"lines": sweep_lines(config, SWEEP_FIELDS[key], forward), **sweep_rules(alpha, threshold, asymptote)}
    charts.vega_chart(column, spec, datasets, key, alt_text=f"{title}: {y_title} against α")


@memo.cached(8)
def scaling_spec(present: bool) -> dict:
    chart = charts.altair_lines(
        SCALING_SERIES,
        charts.quantity("x", "component std dev σ", (0.0, 2.1)),
        charts.quantity("y", "threshold α*", channel=alt.Y, scale=dict(zero=True)),
    )
    return fitted(charts.vega_spec(chart, title="α* scales with σ"), [s.label for s in SCALING_SERIES])


def fig5_thresholds() -> list[float | None]:
    """The exact threshold α* at each of Fig. 5's σ (None: no transition in the sweep's range)."""
    return [threshold_for(s) for s in FIG5_SIGMAS]


@memo.cached(16)
def scaling_lines(sigma: float) -> bytes:
    return charts.lines_bytes(
        [
            (SCALING_SERIES[0].label, [0.0, 2.1], [0.0, 10.5]),
            (SCALING_SERIES[1].label, FIG5_SIGMAS, PAPER_THRESHOLDS),
            (SCALING_SERIES[2].label, FIG5_SIGMAS, fig5_thresholds()),
            (SCALING_SERIES[3].label, [sigma], [threshold_for(sigma)]),
        ]
    )


def thresholds_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {"sigma": FIG5_SIGMAS, "threshold_exact": fig5_thresholds(), "threshold_paper": PAPER_THRESHOLDS}
    )


def sweep_frame(config: SweepConfig) -> pd.DataFrame:
    sweep, forward_sweep = sweep_for(config)
    return pd.DataFrame(
        {
            "alpha": sweep.alphas,
            "interpolation": sweep.interpolation,
            "det_cov": sweep.det_cov,
            "kl": sweep.kl,
            "std_e1": sweep.std_e1,
            "forward_det_cov": forward_sweep.det_cov,
            "forward_kl": forward_sweep.kl,
        }
    )


def scaling_chart(column, sigma) -> None:
    charts.vega_chart(
        column,
        scaling_spec(charts.presenting()),
        {"lines": scaling_lines(sigma)},
        "modes.scaling",
        alt_text="The threshold α* against σ: exact, the paper's, and α = 5σ",
    )


def result_metrics(alpha, sigma, mean, std, kl, threshold, forward: bool):
    """The reverse-KL fit's cards and verdict; with the forward-KL fit shown, its own cards and verdict first (what
    the toggle asks about), the reverse fit's after them for contrast."""
    if forward:
        forward_metrics(alpha, sigma)
    cols = binding.metric_cells(4)
    interp = mean / alpha if alpha > 0 else float("nan")
    reverse = " (reverse KL)" if forward else ""
    cols[0].metric(
        "α⁻¹‖μ*‖" + reverse,
        "undefined" if alpha == 0 else f"{interp:.3f}",
        help="0.5: q sits midway between the modes; 0: q sits on the first mode.",
    )
    cols[1].metric("q's std dev along e₁ / σ" + reverse, f"{std / sigma:.3f}")
    cols[2].metric("KL(q‖p_α)", f"{kl:.4f}", help=f"ln 2 = {modes.LN2:.4f}")
    cols[3].metric(
        "threshold α*",
        "—" if threshold is None else f"{threshold:.3f}",
        help="Computed from a sweep, refined by bisection on the exact path.",
    )
    by = "By reverse KL, " if forward else ""
    if alpha == 0:
        verdict = f"{by}α = 0: the two components coincide and q is exactly N(0, σ²I)."
    elif interp > modes.INTERPOLATION_CUTOFF:
        verdict = f"{by}α = {alpha:g} < α* ≈ {threshold:.2f}: q **interpolates**, sitting between the modes."
    else:
        verdict = f"{by}α = {alpha:g} > α* ≈ {threshold:.2f}: q is **mode-seeking**, sitting on the first mode."
    st.markdown(verdict)


def forward_metrics(alpha: float, sigma: float) -> None:
    """The forward-KL fit's cards and verdict: moment matching, so midway and as wide as the mixture."""
    mean, std, kl = forward_fit_at(alpha, sigma)
    cols = binding.metric_cells(3)
    cols[0].metric(
        "α⁻¹‖μ‖ (forward KL)",
        "undefined" if alpha == 0 else f"{mean / alpha:.3f}",
        help="Always 0.5: the mixture's mean is α e₁ / 2.",
    )
    cols[1].metric("std dev along e₁ / σ (forward)", f"{std / sigma:.3f}", help="√(1 + α²/4σ²): the mixture's.")
    cols[2].metric("KL(p_α‖q) (forward)", f"{kl:.4f}")
    st.markdown(
        f"By **forward KL**, q matches the target's mean and variance: it sits at the midpoint, "
        f"{std / sigma:.2f}σ wide along e₁, **covering both modes** however far apart they are."
    )


# The animation's charts (Vega-Lite, updated in place: views/common): fixed while it plays, the frame in the data.
PATH_SERIES = DENSITY_SERIES[:2]
KL_SERIES = (
    charts.Series(frames.KL_LABELS["kl"], charts.PALETTE["reverse"]),
    charts.Series(frames.KL_LABELS["now"], charts.PALETTE["current"], marker="diamond", line=False),
    charts.Series(frames.KL_LABELS["ln2"], charts.PALETTE["grey"], "dashdot"),
)


HEADROOM = 1.05  # above the highest value a fixed axis must hold


@memo.cached(32)
def path_density_spec(present: bool) -> dict:
    """The target and q along e₁; both axes' ranges come with the data, fixed over a play."""
    chart = charts.altair_lines(
        PATH_SERIES,
        charts.quantity("x", "x₁ (along e₁)", charts.DOMAIN_OF_DATA),
        charts.quantity("y", "density", charts.DOMAIN_OF_DATA, channel=alt.Y),
    )
    return fitted(charts.vega_spec(chart, title="Along e₁, at the current step"), [s.label for s in PATH_SERIES])


@memo.cached(32)
def path_kl_spec(present: bool) -> dict:
    """The objective along Adam's path, the current step marked; both axes' ranges come with the data."""
    chart = alt.layer(
        charts.altair_lines(
            KL_SERIES,
            charts.quantity("x", "Adam step", charts.DOMAIN_OF_DATA),
            charts.quantity("y", "KL (nats)", charts.DOMAIN_OF_DATA, channel=alt.Y),
        ),
        charts.altair_rules(KL_SERIES),
    )
    return fitted(charts.vega_spec(chart, title="Objective along the way"), [s.label for s in KL_SERIES])


def path_density_range(target_density, path_std) -> tuple[float, float]:
    """The density axis of a whole play, fixed: up to the target's peak or q's at its narrowest, whichever is
    higher, so that no frame rescales it (a rescaled axis makes the target's peaks seem to grow)."""
    q_peak = 1.0 / (np.sqrt(2.0 * np.pi) * np.min(path_std))
    return 0.0, HEADROOM * max(float(np.max(target_density)), float(q_peak))


def objective_range(kl) -> tuple[float, float]:
    """The objective's axis, fixed over a play: from 0 (KL's floor) to ln 2 (one mode ignored) or above, so that
    a path that hardly moves (far modes: ln 2 ± 10⁻³) is drawn flat, not as a spike across a tiny range."""
    return 0.0, HEADROOM * max(modes.LN2, float(np.max(kl)))


@memo.cached(32)  # one per setting and mode: their JSON is made once
def player_charts(alpha: float, sigma: float, present: bool) -> list[animation.Chart]:
    """The player's two charts, their axes fixed over the whole path."""
    path = path_for(alpha, sigma).path
    x = frames.density_grid(alpha, sigma)
    target_density = np.exp(modes.log_mixture(x, alpha, sigma))
    ln2 = pd.DataFrame({"value": [modes.LN2], "series": [KL_SERIES[2].label]})
    return [
        animation.Chart(
            "density",
            charts.with_domains(
                path_density_spec(present), x=(x[0], x[-1]), y=path_density_range(target_density, path.std)
            ),
            "The target and q along e₁ at the current Adam step",
        ),
        animation.Chart(
            "kl",
            charts.with_domains(path_kl_spec(present), x=(0, len(path) - 1), y=objective_range(path.kl)),
            "KL(q‖p_α) along Adam's path, the current step marked",
            {"rules": ln2},
        ),
    ]


def optimisation_panel(alpha, sigma, turned: bool):
    st.subheader("Watch it optimise")
    st.caption(
        "Adam (learning rate 10⁻², as in the paper) on the exact, noise-free objective, "
        f"starting at the first component. One frame = {frames.FRAME_STRIDE} steps; the axes hold the whole path."
    )
    run = path_for(alpha, sigma)
    path = run.path
    position = animation.player(
        "modes.player",
        player_charts(alpha, sigma, charts.presenting()),
        run.animation,
        0,
        TICK_SECONDS,
        play_help=f"Run Adam, {frames.FRAME_STRIDE} steps a frame, in your browser.",
    )
    step = run.step_of(position.frame)
    if turned:  # kept while playing, at the step play started from: the visitor's camera stays
        landscape_view(alpha, sigma, path, step)
        st.markdown(
            "**The landscape.** KL(q‖p_α) over q's mean μ and log standard deviation log s, on a log axis, with "
            "Adam's path on it. Below α* its lowest point is the midpoint, with q wide enough to cover both "
            "modes; above α*, a valley at each mode, whose floor tends to ln 2, and the path from the first "
            "component stays in its own."
        )
    charts.csv_download(
        lambda: pd.DataFrame({"step": np.arange(len(path)), "mean": path.mean, "std": path.std, "kl": path.kl}),
        f"modes_path_alpha{alpha:g}_sigma{sigma:g}.csv",
        "Path (CSV)",
        "modes.csv_path",
    )
    if turned:
        charts.csv_download(
            lambda: surfaces.grid_frame(landscape_for(alpha, sigma), ("mean", "log_std", "kl")),
            f"modes_landscape_alpha{alpha:g}_sigma{sigma:g}.csv",
            "Landscape (CSV)",
            "modes.csv_landscape",
        )


def formulas():
    with st.expander("The formulas", expanded=False):
        st.markdown(r"""
Target: $p_\alpha(x) = \tfrac12\,\mathcal N(x; 0, \sigma^2 I) + \tfrac12\,\mathcal N(x; \alpha e_1, \sigma^2 I)$.
Fit $q = \mathcal N(\mu, \Sigma)$ by **reverse KL**,
$\mathrm{KL}(q\,\|\,p_\alpha) = \mathbb E_q[\log q(x) - \log p_\alpha(x)]$, starting from $\mu = 0$, $\Sigma = \sigma^2 I$.

* Orthogonal to $e_1$ the target is $\mathcal N(0, \sigma^2)$, fitted exactly, so only the 1-D problem
  along $e_1$ matters. With $x = \sigma z$ it depends on $\alpha/\sigma$ alone: $\alpha^* \propto \sigma$.
* Here the 1-D objective is computed by quadrature on a fine grid (no sampling noise) and
  minimised by a damped Newton method; the paper's protocol (5000 Monte-Carlo samples, Adam) gives
  the same curve with noise: `python -m symlab modes --sigma 1 --protocol mc`.
* $\alpha^{-1}\lVert\mu^*\rVert = 0.5$: midpoint (**interpolation**); $\approx 0$: on one mode. Once $q$
  covers one component, $\mathrm{KL} \to \ln 2$, the mass of the ignored half.
* **Forward KL** $\mathrm{KL}(p_\alpha\|q)$ is minimised by moment matching:
  $\mu = \tfrac{\alpha}{2}e_1$, $\Sigma = \sigma^2 I + \tfrac{\alpha^2}{4} e_1 e_1^\top$, always covering both modes.
* Why it matters: a network's posterior has many equivalent modes (permutations of hidden units);
  when they are close relative to their width, mean-field VI sits between them, where the network
  predicts badly.
""")


def main():
    values = binding.start_page(
        PAGE,
        binding.page_specs(LAB),
        "Mode interpolation",
        "Fit one Gaussian to two equal modes by reverse KL. Below a threshold α* ≈ 5σ it "
        "sits between them; above, on one of them (Gelberg et al. 2024, §3).",
        controls,
    )
    alpha, sigma, dim, forward = values["alpha"], values["sigma"], values["dim"], values["forward"]

    # The sweep's range, as the command line's: 10σ, or further to hold the α shown.
    sweep_config = SweepConfig(sigma=sigma, dim=dim, alpha_max=sweep_alpha_max(sigma, alpha)).validate()
    threshold = threshold_for(sigma)
    mean, std, kl = optimum_at(alpha, sigma)
    result_metrics(alpha, sigma, mean, std, kl, threshold, forward)

    left, right = st.columns(2)
    density_chart(left, alpha, sigma, forward)
    contour_chart(right, alpha, sigma, forward)

    st.subheader("Across mode distances")
    c1, c2 = st.columns(2)
    sweep_chart(c1, "modes.interp", sweep_config, forward, alpha, threshold, "α⁻¹‖μ*‖", "Interpolation")
    sweep_chart(
        c2, "modes.det", sweep_config, forward, alpha, threshold, f"det Σ* (d = {dim})", "Spread of q", log_y=True
    )
    c3, c4 = st.columns(2)
    kl_title = "Final KL (forward: KL(p‖q))" if forward else "Final KL(q‖p_α)"
    sweep_chart(c3, "modes.kl", sweep_config, forward, alpha, threshold, "KL (nats)", kl_title, asymptote=modes.LN2)
    scaling_chart(c4, sigma)

    d1, d2, _ = st.columns([1, 1, 2])
    with d1:
        charts.csv_download(
            lambda: sweep_frame(sweep_config),
            f"modes_sweep_sigma{sigma:g}_d{dim}.csv",
            "Sweep (CSV)",
            "modes.csv_sweep",
        )
    with d2:
        charts.csv_download(thresholds_frame, "modes_thresholds.csv", "Thresholds (CSV)", "modes.csv_thresholds")

    optimisation_panel(alpha, sigma, values[SURFACE_VIEW.name])
    formulas()


if __name__ == "__main__":  # run as a script: AppTest.from_file, `streamlit run views/<lab>.py`
    main()
