"""Alignment lab: two mean-field posteriors of one MLP, matched across permutations, and the loss
barrier between them before and after (Rossi et al. 2023)."""

import functools

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from symlab.labs.align import LAB, params
from symlab.labs.align import config as align_config
from symlab.labs.align import experiment as align_lab
from symlab.labs.align.params import CAPS, ORDERS, PRESETS
from symlab.lib.mnist_data import data_directory, load_mnist
from symlab.serving import precomputed
from symlab.specs import settings
from symlab.specs.animation import Animation, encode
from symlab.specs.urlstate import SURFACE_VIEW
from views.common import animation, binding, charts, computing, files, memo, surfaces, tables

# What the path, summary and distance charts read: a trained pair's report or two uploaded networks'.
Report = align_lab.AlignmentReport | align_lab.NetworkAlignment

PAGE = "align"
PATH_STYLE = {
    "before": ("#D55E00", "solid", "circle"),
    "weights": ("#009E73", "dot", "square"),
    "w2": ("#0072B2", "dash", "diamond"),
}
PERSON_COLOURS = {"A": "#0072B2", "B": "#E69F00"}
T_TICK_SECONDS = 0.6


# ---------------------------------------------------------------------------------------------
# Charts that fit their column
# ---------------------------------------------------------------------------------------------
# Every chart is as wide as its column (Streamlit's width="stretch") at any screen width: a fixed size wider than
# a phone's column (358 px) scrolled the page sideways and hid the colour scale. These adjust a built spec.

COLOUR_SCALE_PX = 150  # a colour scale's length under a plot: fits the narrowest column with room to spare


def colour_scale_below(spec: dict) -> dict:
    """``spec`` with its colour scale (``charts.altair_colour_legend``'s, on the right) under the plot, across, and
    any other legend below it too: on the right it took a square plot's width, and two maps side by side would
    differ in size."""

    def moved(view: dict) -> dict:
        view = dict(view)
        fill = (view.get("encoding") or {}).get("fill")
        if fill and fill.get("legend"):
            legend = dict(fill["legend"], orient="bottom", direction="horizontal", gradientLength=COLOUR_SCALE_PX)
            view["encoding"] = {**view["encoding"], "fill": {**fill, "legend": legend}}
        for part in ("layer", "hconcat", "vconcat", "concat"):
            if part in view:
                view[part] = [moved(child) for child in view[part]]
        return view

    # Legends below a plot go one under the other (Vega puts them side by side, past a narrow column's edge).
    config = {
        **spec["config"],
        "legend": {**spec["config"]["legend"], "layout": dict(bottom=dict(direction="vertical"))},
    }
    return {**moved(spec), "config": config}


# ---------------------------------------------------------------------------------------------
# Computation, shared by every session (results are read-only)
# ---------------------------------------------------------------------------------------------


@st.cache_resource(show_spinner="Reading MNIST…")
def mnist(directory: str):
    return load_mnist(directory)


def dataset(config: align_lab.AlignConfig) -> align_lab.Dataset:
    directory = str(data_directory(settings.mnist_directory())) if config.task == "mnist" else None
    # Not persisted: made again from the seed (or the MNIST file) faster than read back.
    return computing.shared_result(
        ("align_data", config.task, config.train_size, config.noise, config.seed, directory),
        lambda: align_lab.load_task(config, directory and mnist(directory)),
        persist=False,
    )


ELBO_SERIES = (charts.Series("q_A", PERSON_COLOURS["A"]), charts.Series("q_B", PERSON_COLOURS["B"], "dash"))


@memo.cached(16)
def elbo_spec(present: bool) -> dict:
    """Both runs' ELBO by Adam step; the x range (the run's steps) comes with the data."""
    chart = charts.altair_lines(
        ELBO_SERIES,
        charts.quantity("x", "Adam step", charts.DOMAIN_OF_DATA, integer=True),
        charts.quantity("y", "ELBO per training point (nats)", channel=alt.Y),
    )
    return charts.fitted_legend(
        charts.vega_spec(chart, title="Training both posteriors", height=300), [series.label for series in ELBO_SERIES]
    )


def elbo_lines(steps, elbo) -> bytes:
    """Both runs' ELBO by Adam step: the chart's lines dataset."""
    return charts.lines_bytes([(series.label, steps, elbo[:, index]) for index, series in enumerate(ELBO_SERIES)])


# The pages' views of a finished pair, made once for every session that opens its setting (a class opens the
# same few): ``config`` is the key, the result goes along.
@memo.cached(64)
def trained_elbo_lines(config: align_lab.AlignConfig, _pair: align_lab.PosteriorPair) -> bytes:
    return elbo_lines(_pair.elbo_steps, _pair.elbo)


def elbo_chart(container, lines: bytes, total_steps: int, key: str | None) -> None:
    """Both runs' ELBO so far (drawn again at each progress report while they train: the same spec, new data)."""
    charts.vega_chart(
        container,
        charts.with_domains(elbo_spec(charts.presenting()), x=(0, total_steps)),
        {"lines": lines},
        key,
        alt_text="The ELBO of q_A and q_B against the Adam step",
    )


def trained(config: align_lab.AlignConfig) -> tuple[align_lab.PosteriorPair, align_lab.AlignmentReport]:
    """Both posteriors and their alignment, trained once for every session in a worker process;
    a visitor who asks first watches the ELBO curves grow."""

    def draw_training(progress):
        steps, elbo = progress.payload
        elbo_chart(st, elbo_lines(steps, elbo), int(progress.total), None)

    return computing.computed(align_lab.alignment_task(config), draw_training)


def trained_pair(config: align_lab.AlignConfig) -> align_lab.PosteriorPair:
    return trained(config)[0]


def report(config: align_lab.AlignConfig) -> align_lab.AlignmentReport:
    return trained(config)[1]


# ---------------------------------------------------------------------------------------------
# Controls
# ---------------------------------------------------------------------------------------------


def key(name: str) -> str:
    return binding.widget_key(PAGE, name)


def widget(name: str, **options):
    return binding.control_widget(PAGE, align_lab.AlignConfig, name, cap=CAPS.get(name), **options)


def controls():
    with st.sidebar:
        st.subheader("Posteriors")
        st.radio(
            "Posteriors",
            list(params.SOURCES),
            format_func=params.SOURCES.get,
            key=key("source"),
            horizontal=True,
            label_visibility="collapsed",
        )
        if st.session_state[key("source")] == "files":
            st.subheader("The path")
            for name in ("samples", "seed", "starts"):
                widget(name)
            return
        st.subheader("Presets")
        binding.preset_picker(PAGE, binding.page_specs(LAB), PRESETS)
        st.subheader("Task and network")
        widget("task", horizontal=True, format_func={"moons": "half moons (2-D)", "mnist": "MNIST subset"}.get)
        for name in ("width", "depth", "train_size"):
            widget(name)
        if st.session_state[key("task")] == "moons":
            widget("noise")
        st.subheader("Variational inference")
        for name in ("steps", "lr", "prior_scale", "samples", "seed"):
            widget(name)
        binding.new_seed_button(PAGE, help="Other data and initialisations; Reset replays the path from t = 0.")
        st.subheader("Alignment")
        widget("starts")


# ---------------------------------------------------------------------------------------------
# Panels
# ---------------------------------------------------------------------------------------------

# The path player's charts (Vega-Lite, updated in place: views/common): fixed while it plays, the frame in the data.
PATH_SERIES = (
    *(
        charts.Series(align_config.PATH_TITLES[name], colour, dash, marker=symbol)
        for name, (colour, dash, symbol) in PATH_STYLE.items()
    ),
    charts.Series("current t", "#999999", "dot"),
)
CLASS_SERIES = (
    charts.Series("class 0", "#000000", marker="circle", line=False),
    charts.Series("class 1", "#000000", marker="x", line=False),
)
MAP_COLOURS = charts.BLUE_RED  # P(class 1) from 0 (blue) to 1 (red)


@memo.cached(8)
def path_spec(metric: str, present: bool, title: str | None = None, current: bool = True) -> dict:
    """``metric`` along the three paths; ``current``: t marked (the player's frame, in the data)."""
    y_title = "test NLL of the predictive (nats)" if metric == "loss" else "test accuracy of the predictive"
    title = title or ("Loss along the path" if metric == "loss" else "Accuracy along the path")
    series = PATH_SERIES if current else PATH_SERIES[:-1]
    lines = charts.altair_lines(
        series, charts.quantity("x", "t (0: q_A, 1: q_B)", (0, 1)), charts.quantity("y", y_title, channel=alt.Y)
    )
    chart = alt.layer(lines, charts.altair_rules(series, axis="x")) if current else lines
    # 420 px: room for a plot of ≥ 150 px under a legend of four rows (a narrow column) and two-line axis titles.
    return charts.fitted_legend(charts.vega_spec(chart, title=title, height=420), [s.label for s in series])


def path_data(rep: Report, metric: str, t: float | None = None) -> dict:
    """``path_spec``'s datasets: the paths, and t (where the chart marks it)."""
    lines = [
        charts.lines_frame(series.label, rep.paths[name]["t"], rep.paths[name][metric])
        for series, name in zip(PATH_SERIES, PATH_STYLE)
    ]
    if t is None:
        return {"lines": pd.concat(lines)}
    return {"lines": pd.concat(lines), "rules": pd.DataFrame({"value": [t], "series": [PATH_SERIES[-1].label]})}


def path_rows(rep: Report) -> pd.DataFrame:
    """The paths' CSV: loss and accuracy of each path by t."""
    return pd.DataFrame(
        {
            "t": rep.paths["before"]["t"],
            **{
                f"{metric}_{name}": rep.paths[name][metric]
                for name in align_config.PATHS
                for metric in ("loss", "accuracy")
            },
        }
    )


@memo.cached(16)
def map_spec(path: str, present: bool) -> dict:
    """The predictive's P(class 1) along ``path``, with the test points; the axes' range comes with the data.
    Square, as wide as its column; each map's one legend below it (the classes', or the colour scale), so the
    two maps side by side are the same size."""
    heat = charts.altair_image("x₁", "x₂", charts.DOMAIN_OF_DATA, charts.DOMAIN_OF_DATA, smooth=False)
    points = charts.altair_lines(
        CLASS_SERIES,
        charts.quantity("x", "x₁", charts.DOMAIN_OF_DATA),
        charts.quantity("y", "x₂", charts.DOMAIN_OF_DATA, channel=alt.Y),
        legend=path == "before",
    )
    layers: list = [heat, points] + ([charts.altair_colour_legend("P(class 1)", MAP_COLOURS)] if path == "w2" else [])
    spec = charts.vega_spec(
        alt.layer(*layers).resolve_legend(fill="independent"),
        title=align_config.PATH_TITLES[path].capitalize(),
        height=None,
    )
    return charts.square_plot(colour_scale_below(charts.fitted_legend(spec, [series.label for series in CLASS_SERIES])))


def path_maps(config: align_lab.AlignConfig, rep: align_lab.AlignmentReport, data) -> align_lab.PathMaps:
    """The predictive maps along the player's paths (moons), made once for every session in a worker; meanwhile
    the player plays the paths alone."""
    return computing.computed(align_lab.path_maps_task(config), meanwhile=lambda: path_player(config, rep, None, data))


def shown_test_points(data: align_lab.Dataset) -> pd.DataFrame:
    """The first 300 test points, by class (the maps' dots)."""
    shown = slice(0, 300)
    x, y = data.x_test[shown].numpy(), data.y_test[shown].numpy()
    return pd.concat([charts.lines_frame(CLASS_SERIES[c].label, x[y == c, 0], x[y == c, 1]) for c in (0, 1)])


def path_animation(config: align_lab.AlignConfig, rep, maps: align_lab.PathMaps | None) -> Animation:
    """The walk from q_A to q_B, a frame per point of the path: t marked on the loss and accuracy charts, and
    (moons) the predictive maps of both paths at t. Encoded once for every session with these settings."""

    def encoded() -> Animation:
        ts = rep.paths["before"]["t"]
        frames, labels, captions = [], [], []
        for point, t in enumerate(ts):
            now = {"rules": {PATH_SERIES[-1].label: {"value": [float(t)]}}}
            frame = {"loss": now, "accuracy": now}
            if maps is not None:
                for path in align_lab.MAP_PATHS:
                    probability = maps.probability[path][point]
                    image = charts.image_frame(maps.xs, maps.ys, probability, MAP_COLOURS, (0.0, 1.0))
                    frame[f"map_{path}"] = {"image": {"image": animation.columns_of(image)}}
            frames.append(frame)
            labels.append(f"t = {t:.2f}  (point {point} of {len(ts) - 1})")
            losses = (f"{align_config.PATH_TITLES[p]} {rep.paths[p]['loss'][point]:.3f}" for p in align_config.PATHS)
            captions.append("Test loss at t: " + ", ".join(losses) + " (nats)")
        return encode(frames, labels, captions)

    key = ("align_path_frames", config, maps is not None)
    return computing.shared_result(key, encoded, capacity=16)


@memo.cached(16)  # one per setting and mode: their JSON is made once
def path_charts(
    config: align_lab.AlignConfig, map_extent: tuple | None, present: bool, _rep, _data
) -> list[animation.Chart]:
    """The paths' loss and accuracy (the paths sent once, t in the frames) and, with the maps' ``map_extent``
    ((x from, x to), (y from, y to)), both maps with the test points. ``_rep`` and ``_data`` are ``config``'s."""
    result = [
        animation.Chart(
            metric,
            path_spec(metric, present),
            f"The test {metric} along the three paths, t marked",
            {"lines": path_data(_rep, metric)["lines"]},
        )
        for metric in ("loss", "accuracy")
    ]
    if map_extent is None:
        return result
    points = shown_test_points(_data)
    for path in align_lab.MAP_PATHS:
        result.append(
            animation.Chart(
                f"map_{path}",
                charts.with_domains(map_spec(path, present), x=map_extent[0], y=map_extent[1]),
                f"P(class 1) of the interpolated posterior at t, {align_config.PATH_TITLES[path]}, test points",
                {"lines": points, "scale": pd.DataFrame({"z": [0.0, 1.0]})},
            )
        )
    return result


def path_player(config, rep: align_lab.AlignmentReport, maps: align_lab.PathMaps | None, data) -> None:
    with_maps = maps is not None
    extent = ((maps.xs[0], maps.xs[-1]), (maps.ys[0], maps.ys[-1])) if maps is not None else None
    animation.player(
        "align.player",
        path_charts(config, extent, charts.presenting(), rep, data),
        path_animation(config, rep, maps),
        align_lab.player_start(config),
        T_TICK_SECONDS,
        play_help="Walk from q_A (t = 0) to q_B (t = 1); Reset goes back to t = 0.",
    )
    if config.task == "moons" and with_maps:
        st.caption(
            f"The predictive P(class 1) of the interpolated posterior at t (the average over "
            f"{config.samples} samples), with test points. Unaligned, the middle of the path averages "
            "units that do different jobs."
        )


def barrier_text(value, error) -> str:
    """A barrier in nats ± its Monte-Carlo standard error (none for one draw), or a dash without data."""
    if value is None:
        return "—"
    return f"{value:.3f}" + (f" ± {error:.3f}" if error is not None and np.isfinite(error) else "")


BARRIER_HELP = (
    "max over t of the loss above the straight line between the endpoints' losses (nats), ± its Monte-Carlo "
    f"standard error over the draws; below {align_config.NOISE_MULTIPLE} errors the draws cannot tell it from 0."
)


def barrier_verdict(rep) -> str:
    if rep.barrier_after is None:
        return ""
    if align_config.within_noise(rep.barrier_after, rep.barrier_after_se):
        return (
            f"After W₂ alignment the barrier is below {align_config.NOISE_MULTIPLE} Monte-Carlo standard errors: "
            "gone, as far as these draws can tell."
        )
    return (
        f"After W₂ alignment a barrier remains, above {align_config.NOISE_MULTIPLE} Monte-Carlo standard errors: "
        "alignment lowered it, and did not remove it."
    )


def headline(rep: align_lab.AlignmentReport) -> None:
    cols = binding.metric_cells(4)
    cols[0].metric("loss barrier before", barrier_text(rep.barrier_before, rep.barrier_before_se), help=BARRIER_HELP)
    cols[1].metric(
        "loss barrier after (W₂)",
        barrier_text(rep.barrier_after, rep.barrier_after_se),
        delta=f"{rep.barrier_after - rep.barrier_before:.3f}",
        delta_color="inverse",
        help=BARRIER_HELP,
    )
    cols[2].metric("W₂(q_A, q_B) before", f"{rep.w2_before:.2f}")
    cols[3].metric(
        "W₂ after alignment", f"{rep.w2_after:.2f}", delta=f"{rep.w2_after - rep.w2_before:.2f}", delta_color="inverse"
    )
    st.caption(barrier_verdict(rep))


def summary_frame(rep: Report) -> pd.DataFrame:
    rows = []
    for name, title in align_config.PATH_TITLES.items():
        row = rep.summary[name]
        rows.append(
            {
                "path": title,
                "W₂": row["w2"],
                "‖μ_A − μ_B‖": row["mean_distance"],
                "barrier (nats)": row["barrier"],
                "barrier MC error": row.get("barrier_se"),
                "acc. drop": row["accuracy_barrier"],
                "moved": " / ".join(map(str, row["units_moved"])),
            }
        )
    return pd.DataFrame(rows)


SUMMARY_NUMBERS = ("W₂", "‖μ_A − μ_B‖", "barrier (nats)", "barrier MC error", "acc. drop")


@memo.cached(64)
def trained_summary(config: align_lab.AlignConfig, _rep: align_lab.AlignmentReport) -> pd.DataFrame:
    return summary_frame(_rep)


@memo.cached(64)
def trained_summary_table(config: align_lab.AlignConfig, _rep: align_lab.AlignmentReport) -> pd.DataFrame:
    return summary_table(trained_summary(config, _rep))


def summary_table(summary: pd.DataFrame) -> pd.DataFrame:
    """The three paths as a plain table's columns, a quantity a row (the numbers to 3 decimals; the CSV keeps them
    whole): five columns of quantities did not fit a phone's or a half-width column, and hid two."""

    def shown(value) -> str:
        return "—" if value is None or pd.isna(value) else f"{value:.3f}"

    table = summary.assign(**{name: summary[name].map(shown) for name in SUMMARY_NUMBERS}).set_index("path").T
    table.columns.name = None
    return table


DISTANCE_SERIES = tuple(
    charts.Series(align_config.PATH_TITLES[name], colour, marker=symbol, line=False)
    for name, (colour, _, symbol) in PATH_STYLE.items()
)
MATCH_SERIES = (charts.Series("assigned pair", "#D55E00", marker="x", line=False),)


@memo.cached(8)
def distance_spec(layers: tuple, present: bool) -> dict:
    """Grouped bars, one group per weight layer, each ended by its path's marker (the second cue besides colour).
    Across, the layers' names on the left: under the bars, five groups of names overlapped in a phone's column."""
    channels = charts.series_channels(DISTANCE_SERIES)
    y = alt.Y("layer:N", title=None, sort=list(layers))
    offset = alt.YOffset("series:N", sort=[series.label for series in DISTANCE_SERIES])
    x = charts.quantity("value", "W₂ distance", scale=dict(zero=True))
    base = alt.Chart(alt.NamedData("bars")).encode(x=x, y=y, yOffset=offset, color=channels["color"])
    chart = alt.layer(
        base.mark_bar(opacity=0.85),
        base.mark_point(size=charts.POINT_SIZE, strokeWidth=2, opacity=1, filled=False).encode(shape=channels["shape"]),
    )
    spec = charts.fitted_legend(
        charts.vega_spec(chart, title="Distance per layer", height=340), [series.label for series in DISTANCE_SERIES]
    )
    # What the distance covers, under the title: as the axis's title it ran past a phone's column. Spaced for the
    # title's size (the page's theme spaces for a smaller one, which put the two lines over each other).
    title, size = spec["title"], spec["config"]["axis"]["titleFontSize"] + 1  # the title's largest font size
    spec["title"] = {
        **title,
        "lineHeight": round(size * 1.25),
        "subtitlePadding": round(size * 0.5),
        "subtitle": "weights and biases",
        "subtitleFontSize": spec["config"]["axis"]["labelFontSize"],
    }
    return spec


def distance_layers(rep: Report) -> tuple[str, ...]:
    return tuple(f"into hidden {i + 1}" for i in range(len(rep.sizes) - 2)) + ("into the output",)


def distance_bars(rep: Report) -> bytes:
    """Each path's W₂ per weight layer: the chart's bars dataset."""
    rows = [
        (layer, series.label, float(value))
        for series, name in zip(DISTANCE_SERIES, PATH_STYLE)
        for layer, value in zip(distance_layers(rep), rep.summary[name]["layer_w2"])
    ]
    layers, labels, values = zip(*rows)
    return charts.arrow_bytes({"layer": list(layers), "series": list(labels), "value": list(values)})


@memo.cached(64)
def trained_distance_bars(config: align_lab.AlignConfig, _rep: align_lab.AlignmentReport) -> bytes:
    return distance_bars(_rep)


def distance_chart(column, bars: bytes, layers: tuple[str, ...]) -> None:
    charts.vega_chart(
        column,
        distance_spec(layers, charts.presenting()),
        {"bars": bars},
        "align.distances",
        alt_text="W₂ distance per weight layer for each path's q_B",
    )


ASSIGNMENT_COLOURS = charts.VIRIDIS[::-1]  # 0 (the row's nearest unit) yellow, far purple
ASSIGNMENTS_PER_ROW = 2


@memo.cached(512)  # every width, layer and order a class may choose: a spec is a few kB, building one 20–50 ms
def assignment_spec(width: int, index: int, aligned: bool, present: bool) -> dict:
    """Layer ``index``'s unit-to-unit distances as a square matrix as wide as its column, the matches marked,
    the colour scale and the marker's legend below."""
    x_title = "unit of q_B" + (" (aligned order)" if aligned else "")
    domain = (-0.5, width - 0.5)
    # Row 0 on top: a unit u of q_A sits at y = width − 1 − u, its axis labelled with u.
    step = max(1, round(width / 6 / 5) * 5) if width > 10 else 1
    rows = dict(values=[width - 1 - unit for unit in range(0, width, step)], labelExpr=f"{width - 1} - datum.value")
    image = charts.altair_image(x_title, "unit of q_A", domain, domain, smooth=False, y_axis=rows)
    scale = charts.altair_colour_legend("− row min", ASSIGNMENT_COLOURS)
    matches = charts.altair_lines(
        MATCH_SERIES,
        charts.quantity("x", x_title, domain),
        charts.quantity("y", "unit of q_A", domain, channel=alt.Y, axis=rows),
    )
    spec = charts.vega_spec(
        alt.layer(image, scale, matches).resolve_legend(fill="independent"),
        title=f"Hidden layer {index + 1}: assignment",
        height=None,
    )
    return charts.square_plot(colour_scale_below(spec))


def assignment_data(view: align_lab.AssignmentView) -> dict[str, bytes]:
    width = len(view.columns)
    flipped = width - 1 - np.arange(width)  # y of each unit of q_A
    shown = view.above_nearest
    matched = view.matched >= 0  # a match outside the units drawn is not marked
    return {
        "image": charts.arrow_bytes(
            charts.image_frame(np.arange(width), np.arange(width), shown[::-1], ASSIGNMENT_COLOURS)
        ),
        "scale": charts.arrow_bytes({"z": [float(shown.min()), float(shown.max())]}),
        "lines": charts.lines_bytes([(MATCH_SERIES[0].label, view.matched[matched], flipped[matched])]),
    }


@memo.cached(64)
def trained_assignment(config: align_lab.AlignConfig, index: int, aligned: bool) -> tuple[int, dict[str, bytes]]:
    """Hidden layer ``index``'s picture of the trained pair's W₂ alignment (its width and datasets), made once for
    every session: its distances, and their picture, were a fifth of the page's run."""
    pair, perms = trained_pair(config), report(config).alignments["w2"].perms
    view = align_lab.assignment_view(pair.qa, pair.qb, perms, index, aligned)
    return len(view.columns), assignment_data(view)


def assignment_chart(column, width: int, datasets: dict[str, bytes], index: int, order: str) -> None:
    spec = assignment_spec(width, index, order == "aligned", charts.presenting())
    charts.vega_chart(
        column,
        spec,
        datasets,
        f"align.assignment_{index}",
        alt_text=f"Unit-to-unit distances of hidden layer {index + 1}, the matches marked",
    )


def assignments(pictures, order: str, note: str = "") -> None:
    """Each hidden layer's unit-to-unit distances with the W₂ alignment's matches, side by side; ``pictures(aligned)``
    gives each hidden layer's width and :func:`assignment_data`, in q_B's own order or the aligned one."""
    st.subheader("Assignments")
    with binding.controls_area("align-order"):
        st.radio(
            "Units of q_B", list(ORDERS), format_func=lambda order: ORDERS[order], key=key("order"), horizontal=True
        )
    st.caption(
        "Distance between each unit of q_A and each unit of q_B (W₂ terms of the unit's incoming weights, "
        "bias and outgoing weights), minus the row's smallest: 0 marks each unit of q_A's nearest unit of "
        "q_B. × marks the pair the alignment matched (one per row and column, so not always the nearest). "
        f"In the aligned order the matches run down the diagonal: the permutation matrix P_l.{note}"
    )
    layers = pictures(order == "aligned")
    # Two to a row, whatever the depth: on a laptop beside the sidebar a third or fourth column left each
    # square matrix too small to read (a phone stacks the columns).
    for first in range(0, len(layers), ASSIGNMENTS_PER_ROW):
        for column, index in zip(st.columns(ASSIGNMENTS_PER_ROW), range(first, len(layers))):
            width, datasets = layers[index]
            assignment_chart(column, width, datasets, index, order)


def explanation() -> None:
    # Folded, as the modes page's formulas: typeset as the page first loads, they delayed its first chart by 0.5 s.
    with st.expander("The formulas: W₂ alignment, the path and its barrier"):
        st.markdown(r"""Two runs of mean-field VI from different seeds give
$q_A = \mathcal N(\mu_A, \mathrm{diag}\, s_A^2)$ and $q_B$. Permuting a hidden layer's units (rows of $W_l$, $b_l$
and the columns of $W_{l+1}$) gives the same function, so $q_B$ may simply sit in another permutation copy.
**Alignment** picks per-layer permutation matrices $P_l$ minimising the squared 2-Wasserstein distance
between the diagonal Gaussians,
$$W_2^2 = \textstyle\sum_l \lVert \mu_A^l - P_l\, \mu_B^l P_{l-1}^\top\rVert^2 + \lVert s_A^l - P_l\, s_B^l P_{l-1}^\top\rVert^2,$$
by coordinate descent: with the other layers fixed, the best $P_l$ is a **linear assignment** between the
units of layer $l$ (Hungarian method on unit-to-unit distances; incoming weights, bias and outgoing
weights, means and standard deviations). *Weight matching* is the same on the means alone.
The **path** interpolates means and standard deviations, $q_t = \mathcal N((1-t)\mu_A + t\mu_B,\ ((1-t)s_A + ts_B)^2)$;
its loss is the test NLL of the marginal predictive $\frac1S\sum_s p(y \mid x, w_s)$, $w_s \sim q_t$, and the
**barrier** is $\max_t\, [L(t) - ((1-t)L(0) + tL(1))]$ (Rossi et al. 2023).""")


def files_alignment(uploads: list, config: align_lab.AlignConfig) -> align_lab.UploadedPair:
    """This session's two uploads read and aligned in a process of its own, kept while the files and the path's
    settings stay; :class:`files.uploads.UploadRefused` with the reason where they cannot be."""
    return files.analysed(
        key("files_report"),
        align_lab.uploaded_pair,
        uploads,
        (config.path_points, config.samples, config.seed, config.starts),
    )


def one_file(upload, name: str) -> None:
    """What one file is, while the other is still to come: read in a process of its own, once."""
    try:
        description = files.analysed(key(name), align_lab.uploaded_description, [upload])
    except files.uploads.UploadRefused as error:
        files.show_refusal(error)
        return
    files.show_read(st, upload, description)


def aligned_download(uploads: list, rep: align_lab.NetworkAlignment):
    """The download's bytes, made when clicked, in a process of its own: B read again and permuted."""
    limits = files.analysis_limits()
    files_read = [(files.upload_name(upload), upload.getvalue()) for upload in uploads]
    return lambda: files.uploads.analyse(
        align_lab.uploaded_pair_file, files_read, (rep.permutations, rep.w2_after), limits=limits
    )


def starts_text(rep) -> str:
    """How many descents the alignment ran (at most the page's cap), and which one won."""
    if rep.starts_tried == 1:
        return "one descent (one hidden layer: each assignment is exact)"
    return (
        f"the closest of {rep.starts_tried} descents (this page runs at most {CAPS['starts']}) came from "
        f"{rep.best_start}"
    )


def files_panel(config: align_lab.AlignConfig, order: str) -> None:
    st.info(files.UPLOAD_NOTICE, icon=":material/link_off:")
    left, right = st.columns(2)
    with left:
        a = files.upload_field("Network A", key("upload_a"))
    with right:
        b = files.upload_field("Network B", key("upload_b"))
    if a is None or b is None:
        for column, upload, name in ((left, a, "file_a"), (right, b, "file_b")):
            if upload is not None:
                with column:
                    one_file(upload, name)
        st.markdown(
            "Upload two networks of the same MLP (`nn.Linear` layers with ReLU between them): two point "
            "estimates, or two mean-field posteriors (the *MNIST* page and this page's pair download as "
            "such). B is aligned to A by permuting its hidden units; with MNIST data (784 → … → 10 nets) "
            "the page also walks the path between them and measures the loss barrier."
        )
        return
    try:
        found = files_alignment([a, b], config)
    except files.uploads.UploadRefused as error:  # unreadable, mismatched or too large: its message
        files.show_refusal(error)
        return
    for column, upload, description in zip((left, right), (a, b), found.descriptions):
        files.show_read(column, upload, description)
    files_report(found, [a, b], order)


def files_report(found: align_lab.UploadedPair, uploads: list, order: str) -> None:
    """Two uploaded networks aligned: barriers, distances, assignments and the downloads."""
    rep = found.alignment
    st.table(files.layer_table(found.layers))
    cols = binding.metric_cells(4)
    cols[0].metric("loss barrier before", barrier_text(rep.barrier_before, rep.barrier_before_se), help=BARRIER_HELP)
    cols[1].metric("loss barrier after (W₂)", barrier_text(rep.barrier_after, rep.barrier_after_se), help=BARRIER_HELP)
    cols[2].metric("W₂(A, B) before", f"{rep.w2_before:.3f}")
    cols[3].metric(
        "W₂ after alignment", f"{rep.w2_after:.3f}", delta=f"{rep.w2_after - rep.w2_before:.3f}", delta_color="inverse"
    )
    kind = "mean-field posteriors" if rep.posterior else "point estimates (σ = 0: W₂ is the Euclidean distance)"
    if rep.paths:
        st.caption(
            f"{kind}; MNIST test accuracy A {rep.accuracy_a:.4f}, B {rep.accuracy_b:.4f} on the first "
            f"{align_config.MNIST_TEST} test images, inputs scaled {rep.mnist_scaling} (the scaling A classifies "
            f"best). Alignment: {starts_text(rep)}, {rep.sweeps} sweep(s), {rep.align_seconds * 1000:.0f} ms "
            "for both objectives."
        )
        charts.vega_chart(
            st,
            path_spec("loss", charts.presenting(), "The path from A to B", current=False),
            path_data(rep, "loss"),
            "align.files_path",
            alt_text="The test loss along the three paths",
        )
        charts.csv_download(path_rows(rep), "alignment_path.csv", "Paths (CSV)", "align.csv_files_path")
    else:
        st.caption(
            f"{kind}. No loss barrier: it needs data, which the page has for 784 → … → 10 nets (MNIST). "
            f"Alignment: {starts_text(rep)}, {rep.sweeps} sweep(s), {rep.align_seconds * 1000:.0f} ms for both "
            "objectives."
        )
    summary = summary_frame(rep)
    left, right = st.columns([1, 1])
    distance_chart(left, distance_bars(rep), distance_layers(rep))
    with right:
        tables.show(summary_table(summary))  # scrolls, with a bar to say so, where a column is too narrow
    widest = max(rep.sizes[1:-1])
    assignments(
        lambda aligned: [
            (len(view.columns), assignment_data(view)) for view in found.assignments["aligned" if aligned else "own"]
        ],
        order,
        ""
        if widest <= align_lab.ASSIGNMENT_UNITS
        else f" Each picture shows a hidden layer's first {align_lab.ASSIGNMENT_UNITS} units of q_A and as many "
        f"columns of q_B (of up to {widest:,}); a match outside them is not marked.",
    )
    d1, d2, d3 = st.columns(3)
    with d1:
        files.file_download(
            align_lab.permutations_csv(rep.permutations),
            "permutations.csv",
            "Permutations (CSV)",
            "align.csv_files_perms",
            mime="text/csv",
        )
    with d2:
        charts.csv_download(summary, "alignment_summary.csv", "Distances (CSV)", "align.csv_files_summary")
    with d3:
        files.file_download(
            aligned_download(uploads, rep),
            "b_aligned.safetensors",
            "B aligned to A (safetensors)",
            "align.download_files_aligned",
        )


def pair_file(pair, rep: align_lab.AlignmentReport, stem: str) -> bytes:
    """One of the pair's files (:data:`~symlab.labs.align.experiment.PAIR_FILES`), made when it is asked for."""
    return align_lab.pair_files(pair, rep, [stem])[stem]


def pair_downloads(config: align_lab.AlignConfig, rep: align_lab.AlignmentReport) -> None:
    pair = trained_pair(config)
    columns = st.columns(len(align_lab.PAIR_FILES) + 1)
    for column, (stem, title) in zip(columns, align_lab.PAIR_FILES.items()):
        with column:
            files.file_download(
                functools.partial(pair_file, pair, rep, stem),
                f"{stem}_seed{config.seed}.safetensors",
                f"{title} (safetensors)",
                f"align.download_{stem}",
                help="Means under nn.Sequential(nn.Linear, nn.ReLU, …)'s keys, standard deviations "
                "under sd.<key>, the config as metadata.",
            )


# The 3-D view: the loss over the plane through q_A, q_B and π(q_B), with the straight paths on it, styled as on
# the path charts.
LANDSCAPE_STYLES = {
    "before": surfaces.Style(PATH_STYLE["before"][0], "solid", name="q_A → q_B, unaligned"),
    "w2": surfaces.Style(PATH_STYLE["w2"][0], "dash", name="q_A → π(q_B), W₂-aligned"),
    "ends": surfaces.Style("#000000", symbol="square", line=False, name="q_A, q_B, π(q_B)"),
}
LANDSCAPE_CAMERA = {"eye": {"x": -0.9, "y": -1.6, "z": 1.0}}  # from q_A's side: both paths run away from the eye
# On a phone the y title ran into the z title and was cut at the left edge: shorter there (both lengths in W₂).
NARROW_TITLES = ("q_B (W₂)", "π(q_B)", "loss (nats)")


def landscape_section(config: align_lab.AlignConfig, turned: bool) -> None:
    if not turned and charts.presenting():
        return  # nothing to show, and presentation mode hides its switch
    st.subheader("The loss landscape")
    with binding.controls_area("align-landscape"):  # presentation mode hides it, as it hides the sidebar
        surfaces.switch(
            PAGE,
            "The test loss over the plane through q_A, q_B and q_B aligned, as a surface you can turn. Computed "
            "once for every visitor (a few seconds).",
        )
    if not turned:
        st.caption(
            "Switch it on to see the loss over the whole plane through q_A, q_B and π(q_B): the ridge the "
            "unaligned path climbs, and the valley the aligned one follows."
        )
        return
    try:
        surface = computing.computed(align_lab.plane_task(config))
    except (RuntimeError, ValueError) as error:
        st.error(binding.for_visitors(str(error)), icon=":material/error:")
        return
    st.markdown(
        "The test loss of the marginal predictive (the path charts' measure) over the plane through the three "
        "posteriors, in (μ, σ) with W₂ distances as its lengths: q_A at the origin, q_B along the first axis. "
        "The unaligned path crosses a ridge; the aligned end lies in q_A's own valley, and the path to it stays "
        "low. Beyond the triangle the standard deviations are extrapolated (a negative one counts as 0)."
    )
    surfaces.surface_chart(
        surface,
        surface.lines,
        LANDSCAPE_STYLES,
        "align.landscape",
        "The test loss over the plane through q_A, q_B and the aligned q_B, with the straight paths on it",
        camera=LANDSCAPE_CAMERA,
        narrow_titles=NARROW_TITLES,
    )
    charts.csv_download(
        lambda: surfaces.grid_frame(surface, ("x_w2", "y_w2", "test_loss")),
        f"align_landscape_seed{config.seed}.csv",
        "Landscape (CSV)",
        "align.csv_landscape",
    )


def permutations_frame(rep: align_lab.AlignmentReport) -> pd.DataFrame:
    """Each hidden layer's permutation, a column per layer (none where the layers differ in width)."""
    perms = (
        pd.DataFrame({f"layer_{i + 1}": p for i, p in enumerate(rep.permutations)})
        if len(set(map(len, rep.permutations))) == 1
        else pd.DataFrame()
    )
    return perms.rename_axis("unit_of_a").reset_index()


def main():
    values = binding.start_page(
        PAGE,
        binding.page_specs(LAB),
        "Alignment",
        "Match two mean-field posteriors across permutations of their hidden units and watch the "
        "loss barrier between them disappear (Rossi, Singh, Hannagan 2023).",
        controls,
    )
    config = params.page_config(values)
    if values["source"] == "files":
        files_panel(config, values["order"])
        return
    try:
        data = dataset(config)
        rep = report(config)
    except RuntimeError as error:  # diverged training, unreadable MNIST: say so, keep the controls
        st.error(binding.for_visitors(str(error)), icon=":material/error:")
        return
    headline(rep)
    sizes = "-".join(map(str, rep.sizes))
    timing = f"{rep.train_seconds:.1f} s for both" + (
        " on the machine that computed this default, which ships with the app"
        if precomputed.is_shipped(align_lab.alignment_task(config).key)
        else ""
    )
    st.caption(
        f"{sizes} MLP, {config.steps} Adam steps ({timing}); test loss "
        f"q_A {rep.loss_a:.3f}, q_B {rep.loss_b:.3f}; accuracy {rep.accuracy_a:.3f} / "
        f"{rep.accuracy_b:.3f}. Alignment: {starts_text(rep)}; {rep.sweeps} "
        f"sweep{'s' if rep.sweeps != 1 else ''} of coordinate descent, "
        f"{'converged' if rep.converged else 'stopped before converging'}, "
        f"{rep.align_seconds * 1000:.0f} ms for both objectives."
    )
    try:
        maps = path_maps(config, rep, data) if config.task == "moons" else None
    except RuntimeError as error:  # the maps gave way or failed: the paths play without them, the page says why
        st.warning(binding.for_visitors(str(error)), icon=":material/warning:")
        maps = None
    path_player(config, rep, maps, data)
    explanation()
    st.subheader("Distances")
    left, right = st.columns([1, 1])
    distance_chart(left, trained_distance_bars(config, rep), distance_layers(rep))
    summary = trained_summary(config, rep)
    with right:
        tables.show(trained_summary_table(config, rep))  # scrolls, with a bar to say so, where a column is too narrow
        st.caption(
            "W₂ alignment minimises the W₂ row, weight matching the ‖μ_A − μ_B‖ row; where both pick "
            "the same permutations their lines on the path charts coincide. “acc. drop”: the accuracy's largest "
            "fall below the straight line. “moved”: units per hidden layer that the permutation sends "
            "elsewhere. The endpoints' losses differ a little between "
            "paths: the same sampled ε lands on other units once q_B is permuted."
        )
    with st.expander("Training curves"):
        pair = trained_pair(config)
        elbo_chart(st, trained_elbo_lines(config, pair), config.steps, "align.elbo")
        charts.csv_download(
            lambda: pd.DataFrame({"step": pair.elbo_steps, "elbo_a": pair.elbo[:, 0], "elbo_b": pair.elbo[:, 1]}),
            f"align_elbo_seed{config.seed}.csv",
            "ELBO (CSV)",
            "align.csv_elbo",
        )
    assignments(
        lambda aligned: [
            trained_assignment(config, index, aligned) for index in range(len(rep.alignments["w2"].perms))
        ],
        values["order"],
    )
    d1, d2, d3, _ = st.columns([1, 1, 1, 1])
    with d1:
        charts.csv_download(
            lambda: path_rows(rep), f"align_path_seed{config.seed}.csv", "Paths (CSV)", "align.csv_path"
        )
    with d2:
        charts.csv_download(summary, f"align_summary_seed{config.seed}.csv", "Distances (CSV)", "align.csv_summary")
    with d3:
        charts.csv_download(
            lambda: permutations_frame(rep),
            f"align_permutations_seed{config.seed}.csv",
            "Permutations (CSV)",
            "align.csv_perms",
        )
    st.caption("The posteriors themselves:")
    pair_downloads(config, rep)
    landscape_section(config, values[SURFACE_VIEW.name])


if __name__ == "__main__":  # run as a script: AppTest.from_file, `streamlit run views/<lab>.py`
    main()
