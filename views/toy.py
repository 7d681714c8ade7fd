"""Tractable BNN lab: exact posterior vs MFVI vs SGM, trained live (Gelberg et al. §5, Fig. 4)."""

import math

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from symlab.labs.toy import LAB, live, params
from symlab.labs.toy import experiment as toy
from symlab.labs.toy import tasks as toy_tasks
from symlab.lib import two_relu
from symlab.specs import surfaces as landscape
from symlab.specs.urlstate import SURFACE_VIEW, parse_query
from views.common import animation, binding, charts, computing, memo, surfaces, tables

PAGE = "toy"
# What to do about a fit stuck on one side: starts from the origin differ only in their Monte-Carlo noise.
REMEDIES = {
    "random": "press New seed or raise Restarts",
    "origin": "press New seed or choose random initial means (starts from the origin differ only in their noise)",
}
TICK_SECONDS = 0.15  # a frame's time at normal speed, in the browser
STEP_KEY = binding.widget_key(PAGE, params.ADAM_STEP.name)  # the Adam step in the link
GRID = live.DISPLAY_GRID  # display grid for the exact posterior (the evidence uses 201 points)
COLOURS = {"mfvi": charts.PALETTE["reverse"], "sgm": charts.PALETTE["forward"], "exact": charts.PALETTE["target"]}
DASHES = {"mfvi": "dash", "sgm": "dot", "exact": "solid"}
LABELS = live.METHOD_LABELS


def config_from(values) -> toy.ToyConfig:
    return toy_tasks.page_config(values)


@memo.cached(32)
def exact_for(config: toy.ToyConfig):
    """The data, the exact answer, the posterior on the display grid and its predictive band on ``x``."""
    return toy.exact_view(config, GRID)


def widget(name: str, **options):
    return binding.control_widget(PAGE, toy.ToyConfig, name, cap=params.CAPS.get(name), **options)


def controls_panel():
    with st.sidebar:
        st.subheader("Presets")
        binding.preset_picker(PAGE, binding.page_specs(LAB), params.PRESETS)
        st.subheader("Data and prior")
        for name in ("alpha", "noise", "n_train", "prior_scale"):
            widget(name)
        st.subheader("Training")
        widget("mi")
        widget("K", disabled=st.session_state[binding.widget_key(PAGE, "mi")] != "infonce")
        widget("lr")
        widget("batch_size")
        widget("init")
        widget("restarts")
        widget("seed")
        binding.new_seed_button(
            PAGE, help="A new draw of the data and the initialisation; Reset keeps the current one."
        )
    new_settings_start_over()


def new_settings_start_over() -> None:
    """New settings play from the start: the link's Adam step goes back to 0 before the link is written."""
    played = st.session_state.get("toy.played")
    if played is not None and played != config_from(binding.current_values(PAGE, binding.page_specs(LAB))):
        st.session_state[STEP_KEY] = 0


# Live charts (Vega-Lite), played in the browser (views/common/animation.py): the specs depend only on what is
# fixed while training plays; each frame's numbers come as datasets (symlab.labs.toy.live).
POSTERIOR_SERIES = (
    charts.Series(live.POSTERIOR_LABELS["mfvi"], COLOURS["mfvi"], DASHES["mfvi"]),
    charts.Series(live.POSTERIOR_LABELS["sgm"], COLOURS["sgm"], DASHES["sgm"]),
    charts.Series(live.POSTERIOR_LABELS["modes"], charts.PALETTE["current"], marker="x", line=False),
    charts.Series(live.POSTERIOR_LABELS["others"], charts.PALETTE["grey"], "longdashdot"),
)
PREDICTION_SERIES = (
    charts.Series(live.PREDICTION_LABELS["data"], charts.PALETTE["grey"], marker="circle", line=False),
    charts.Series(live.PREDICTION_LABELS["truth"], charts.PALETTE["current"], "longdash"),
    *(charts.Series(live.PREDICTION_LABELS[m], COLOURS[m], DASHES[m]) for m in ("exact", *two_relu.METHODS)),
)
CURVE_SERIES = (
    *(charts.Series(LABELS[m], COLOURS[m], DASHES[m]) for m in two_relu.METHODS),
    charts.Series("exact posterior", COLOURS["exact"], "dashdot"),
)
POSTERIOR_GREYS = ("#FFFFFF", "#484848")  # the exact posterior's density, from 0 to its peak
PREDICTIONS_PX, CURVES_PX = 480, 340  # the whole chart's height, title and legend included


@memo.cached(16)
def posterior_spec(present: bool) -> dict:
    """The exact posterior (grey: a picture, it does not change while training plays) with q's 1 and 2 sd
    ellipses (both components of q_G) and the modes, square; the axes' range comes with the data
    (:func:`charts.with_domains`)."""
    x, y = (
        charts.quantity("x", "w₁", charts.DOMAIN_OF_DATA),
        charts.quantity("y", "w₂", charts.DOMAIN_OF_DATA, channel=alt.Y),
    )
    chart = alt.layer(
        charts.altair_image("w₁", "w₂", charts.DOMAIN_OF_DATA, charts.DOMAIN_OF_DATA),
        charts.altair_lines(POSTERIOR_SERIES, x, y, data_order=True),
    )
    spec = charts.vega_spec(chart, title="Exact posterior (grey) and q over (w₁, w₂)", height=None)
    spec = charts.square_plot(charts.fitted_legend(spec, [series.label for series in POSTERIOR_SERIES]))
    return {**spec, "layer": [with_outlines(layer) for layer in spec["layer"]]}


def with_outlines(layer: dict) -> dict:
    """The lines layer of the posterior chart drawing each row's ellipse (centre cx, cy; half-axes rx, ry;
    a point where they are 0), its points made in the browser: a frame sends four numbers an ellipse."""
    if layer.get("data") != {"name": "lines"}:
        return layer
    step = 2 * math.pi / (two_relu.OUTLINE_POINTS - 1)  # as two_relu.gaussian_outlines draws them
    outline = [
        {"calculate": f"datum.rx > 0 ? sequence(0, {2 * math.pi + step / 2}, {step}) : [0]", "as": "t"},
        {"flatten": ["t"]},
        {"calculate": "datum.cx + datum.rx * cos(datum.t)", "as": "x"},
        {"calculate": "datum.cy + datum.ry * sin(datum.t)", "as": "y"},
        {"calculate": "datum.t", "as": "i"},
    ]
    return {**layer, "transform": [*layer.get("transform", []), *outline]}


@memo.cached(16)
def predictions_spec(present: bool) -> dict:
    """Data, the true function, and each method's predictive mean with a ±2 sd band."""
    x = charts.quantity("x", "input x", (-2.2, 2.2))
    y = charts.quantity("y", "output y (noise included in the bands)", channel=alt.Y)
    bands = [charts.altair_band(series, x) for series in PREDICTION_SERIES[2:]]
    chart = alt.layer(*bands, charts.altair_lines(PREDICTION_SERIES, x, y))
    spec = charts.vega_spec(chart, title="Predictions", height=PREDICTIONS_PX)
    return charts.fitted_legend(spec, [series.label for series in PREDICTION_SERIES])


@memo.cached(16)
def posterior_image(config: toy.ToyConfig) -> pd.DataFrame:
    """The exact posterior as the chart's image dataset, made once: it does not change while training plays."""
    display = exact_for(config)[2]
    return charts.image_frame(display.axis, display.axis, np.exp(display.log_density).T, POSTERIOR_GREYS)


@memo.cached(8)
def curves_spec(quantity: str, present: bool) -> dict:
    """Each method's bound under log p(D), or its test MSE, by Adam step, with the exact posterior's."""
    y_title, title = {
        "bounds": ("ELBO; SGM: ELBO + I (nats)", "Lower bounds under log p(D)"),
        "mse": ("test MSE", "Test MSE"),
    }[quantity]
    chart = alt.layer(
        charts.altair_lines(
            CURVE_SERIES, charts.quantity("x", "Adam step", integer=True), charts.quantity("y", y_title, channel=alt.Y)
        ),
        charts.altair_rules(CURVE_SERIES),
    )
    spec = charts.vega_spec(chart, title=title, height=CURVES_PX)
    return charts.fitted_legend(spec, [series.label for series in CURVE_SERIES])


def starts_caption(fits) -> str:
    """Each method's starts: which is kept, where it ended, how many ended stuck on one side."""
    return " · ".join(
        f"{LABELS[fit.method]}: start {fit.kept + 1} of {len(fit.rows)} kept ({fit.outcome}), "
        f"{fit.stuck_starts} stuck on one side"
        for fit in fits
    )


def starting_points_caption(config: toy.ToyConfig) -> str:
    """What step 0 shows: the starts, before any training (no fit yet to keep, place or call stuck)."""
    means = "drawn from N(0, 0.5²)" if config.init == "random" else "at the origin"
    starts = f"{config.restarts} starting points" if config.restarts > 1 else "one starting point"
    return (
        f"Adam step 0, before training: each method's {starts} (means {means}, std devs 0.5). In colour, "
        "the start with the best bound so far; Play or Step trains them all and keeps the best."
    )


def fit_notices(trainer, fits, config) -> None:
    """A diverged method is an error; a kept fit stuck on one side is named, with what to do about it."""
    for fit in fits:
        diverged = sum(trainer.diverged[row] for row in fit.rows)
        if diverged == len(fit.rows):
            st.error(f"{LABELS[fit.method]} diverged (NaN parameters): lower the learning rate and press Reset.")
        elif diverged:
            st.warning(
                f"{diverged} of {LABELS[fit.method]}'s {len(fit.rows)} starts diverged (NaN parameters); "
                "the kept start is one of the others."
            )
        if fit.stuck:
            st.warning(
                f"{LABELS[fit.method]}: {toy.stuck_notice(REMEDIES[config.init])}.", icon=":material/call_split:"
            )


def traces_frame(trainer, fits) -> pd.DataFrame:
    """Every start's recorded bounds and test MSE, one row per step and start (the CSV behind the curves)."""
    kept = {fit.row for fit in fits}
    return pd.concat(
        [
            pd.DataFrame(
                {
                    "step": h.step,
                    "method": run.method,
                    "start": run.start + 1,
                    "kept": row in kept,
                    "elbo": h.elbo,
                    "elbo_plus_i": h.elbo_g,
                    "test_mse": h.test_mse,
                }
            )
            for row, (run, h) in enumerate(zip(trainer.runs, trainer.history))
        ],
        ignore_index=True,
    )


def keep_step_in_link(step: int) -> None:
    """The link keeps the step the player stopped on, for a reload or a shared link to open there. Not while
    playing: each change of the link is an entry in the browser's history."""
    if st.session_state[STEP_KEY] != step:
        st.session_state[STEP_KEY] = step
        st.query_params[params.ADAM_STEP.name] = str(step)


@memo.cached(16)  # the same for every session with these settings
def first_frame(config: toy.ToyConfig) -> live.LiveRun:
    """The initialisation alone: the page's first charts while the whole run trains (from the exact view the page
    holds already)."""
    trajectory = live.live_trajectory(config, frames=1)
    return live.LiveRun(trajectory, live.live_animation(config, trajectory, exact_for(config)))


def curve_rules(value: float) -> pd.DataFrame:
    return pd.DataFrame({"value": [value], "series": [CURVE_SERIES[2].label]})


@memo.cached(16)  # one per setting and mode: their JSON is made once
def player_charts(config: toy.ToyConfig, present: bool) -> list[animation.Chart]:
    """The four live charts: the posterior with q's ellipses, the predictions, the bounds and the test MSE."""
    exact, display = exact_for(config)[1:3]
    bound = float(display.axis[-1])
    return [
        animation.Chart(
            "posterior",
            charts.with_domains(posterior_spec(present), x=(-bound, bound), y=(-bound, bound)),
            "The exact posterior over the two weights, with MFVI's and SGM's ellipses",
            {"image": posterior_image(config)},
        ),
        animation.Chart(
            "predictions", predictions_spec(present), "Each method's predictive mean and band, with the data"
        ),
        animation.Chart(
            "bounds",
            curves_spec("bounds", present),
            "Each method's lower bound under log p(D), by Adam step",
            {"rules": curve_rules(exact.log_evidence)},
        ),
        animation.Chart(
            "mse",
            curves_spec("mse", present),
            "Each method's test MSE, by Adam step",
            {"rules": curve_rules(exact.test_mse)},
        ),
    ]


def live_panel(config: toy.ToyConfig, asked_step: int, turned: bool) -> None:
    """The whole live run, trained once for every session with these settings (its first frame meanwhile),
    played in the browser."""
    st.session_state["toy.played"] = config
    try:
        run = computing.computed(
            live.live_task(config), meanwhile=lambda: live_view(config, first_frame(config), 0, turned, training=True)
        )
    except RuntimeError as error:  # a failed or dropped training: say so, keep the controls
        st.error(binding.for_visitors(str(error)), icon=":material/error:")
        return
    live_view(config, run, asked_step, turned)


def live_view(config: toy.ToyConfig, run: live.LiveRun, asked_step: int, turned: bool, training: bool = False):
    position = animation.player(
        "toy.player",
        player_charts(config, charts.presenting()),
        run.animation,
        asked_step // live.STEPS_PER_FRAME,
        TICK_SECONDS,
        play_help=f"Train both methods, {live.STEPS_PER_FRAME} Adam steps a frame, every start at once.",
    )
    snapshot = run.trajectory.frame(position.frame)
    exact = exact_for(config)[1]
    fits = live.frame_fits(config, snapshot, exact)
    if position.playing:
        st.caption("Playing in your browser. Pause for this frame's numbers, notices and downloads.")
    else:
        if not training:
            keep_step_in_link(snapshot.steps_done)
        frame_details(config, snapshot, fits, exact)
    if turned:  # kept while playing, at the frame play started from: the visitor's camera stays
        landscape_view(config, fitted_now(snapshot, fits))
    if position.playing:
        return
    if turned:
        charts.csv_download(
            lambda: landscape_frame(config, fitted_now(snapshot, fits)),
            f"toy_landscape_alpha{config.alpha:g}_seed{config.seed}_step{snapshot.steps_done}.csv",
            "Landscape (CSV)",
            "toy.csv_landscape",
        )
    charts.csv_download(
        lambda: traces_frame(snapshot, fits),
        f"toy_traces_alpha{config.alpha:g}_seed{config.seed}_step{snapshot.steps_done}.csv",
        "Traces (CSV)",
        "toy.csv_traces",
    )


GAIN_SLACK = 0.005  # nats: a gain this far past ln 2 is no rounding


def gain_note(gain: float) -> str | None:
    """Why SGM's bound can beat MFVI's by more than ln 2, where it does; None where it does not."""
    if not gain > math.log(2) + GAIN_SLACK:
        return None
    return (
        f"SGM's bound is {gain:.3f} nats above MFVI's, more than ln 2 = 0.693: at both fits' optima the gain is I ≤ "
        "log |G| = ln 2, so here MFVI's fit stopped short of its own optimum (a run of its own, from its own start)."
    )


def frame_details(config: toy.ToyConfig, snapshot: two_relu.Snapshot, fits: list[toy.Fit], exact) -> None:
    """The numbers, troubles and starts of the frame the player stopped on."""
    if snapshot.steps_done:  # a fit, its outcome and its troubles once there is training to judge
        fit_notices(snapshot, fits, config)
    latest = {
        fit.method: {k: getattr(snapshot.history[fit.row], k)[-1] for k in ("elbo", "elbo_g", "test_mse")}
        for fit in fits
    }
    # Each method's number beside the exact posterior's, three to a row: six in a row cut the numbers short.
    cols = st.columns(3)
    gain = latest["sgm"]["elbo_g"] - latest["mfvi"]["elbo"]
    cols[0].metric("MFVI: ELBO", f"{latest['mfvi']['elbo']:.3f}")
    cols[1].metric(
        "SGM: ELBO + I",
        f"{latest['sgm']['elbo_g']:.3f}",
        f"{gain:+.3f} on MFVI",
        help="At both fits' optima SGM's bound is MFVI's plus I ≤ ln 2 = log |G| = 0.693 nats.",
    )
    cols[2].metric("log p(D) (exact)", f"{exact.log_evidence:.3f}")
    note = gain_note(gain)
    if note:
        st.caption(note)
    cols = st.columns(3)
    cols[0].metric("MFVI: test MSE", f"{latest['mfvi']['test_mse']:.3f}")
    cols[1].metric("SGM: test MSE", f"{latest['sgm']['test_mse']:.3f}")
    cols[2].metric(
        "test MSE (exact)",
        f"{exact.test_mse:.3f}",
        help="Of the exact posterior's predictive mean: the best a method can expect to reach.",
    )
    st.caption(starts_caption(fits) if snapshot.steps_done else starting_points_caption(config))


# The 3-D view: the exact log posterior as a landscape (grey, darker higher), the fits' outlines on it.
LANDSCAPE_STYLES = {
    "modes": surfaces.Style(charts.PALETTE["current"], symbol="x", line=False, name="equivalent modes"),
    "mfvi": surfaces.Style(COLOURS["mfvi"], "dash", name=f"{LABELS['mfvi']}: 1 and 2 sd"),
    "sgm": surfaces.Style(COLOURS["sgm"], "dot", name="SGM: 1 and 2 sd"),  # both components: a phone's width
}


@memo.cached(16)  # one landscape per setting, for every session
def posterior_surface(config: toy.ToyConfig) -> landscape.Surface:
    return toy.posterior_surface(exact_for(config)[2])


def fitted_now(trainer, fits) -> dict[str, tuple]:
    """Each method's kept fit, as the landscape takes them: method -> (mean, std)."""
    means, stds = trainer.parameters()
    return {fit.method: (means[fit.row], stds[fit.row]) for fit in fits}


def landscape_toggle() -> None:
    with binding.controls_area("toy-landscape"):  # presentation mode hides it, as it hides the sidebar
        surfaces.switch(
            PAGE,
            "The exact log posterior as a surface you can turn (drag it; two fingers on a phone), with the fits on it.",
        )


def landscape_view(config: toy.ToyConfig, fitted: dict[str, tuple]) -> None:
    surface = posterior_surface(config)
    st.markdown(
        f"**The landscape.** log p(w | D) over the two weights, drawn down to {toy.SURFACE_DEPTH:g} nats below "
        "its peak (lower is drawn on the floor): two equal peaks, one per order of the units. MFVI's ellipses "
        "must choose a peak or sit on the saddle between; SGM's mixture sits on both."
    )
    surfaces.surface_chart(
        surface,
        toy.landscape_lines(surface, config, fitted),
        LANDSCAPE_STYLES,
        "toy.landscape",
        "The exact log posterior over the two weights as a surface, with MFVI's and SGM's outlines on it",
    )


def landscape_frame(config: toy.ToyConfig, fitted: dict[str, tuple]) -> pd.DataFrame:
    """The landscape's grid, one row per point: the exact log posterior and each method's log q there."""
    surface = posterior_surface(config)
    grids = toy.q_grids(surface, fitted)
    return surfaces.grid_frame(
        surface,
        ("w1", "w2", "log_posterior"),
        **{f"{method}_log_q": grid for method, grid in grids.items()},
    )


SEEDS_KEY, SEEDS_NOTICE = binding.widget_key(PAGE, params.SEEDS.name), "toy.seeds_notice"


def max_table_runs() -> int:
    return binding.server_settings().live.max_table_runs


def table_alphas(text: str) -> list[float]:
    """The table's α values as the link's parser reads them (clamped to α's range, the first ten)."""
    return [float(a) for a in parse_query({"alphas": text}, [params.ALPHAS])[0]["alphas"].split(",")]


def seeds_range(alphas: int) -> tuple[int, int]:
    """The seeds a table of ``alphas`` α values may run: the parameter's range, within this server's cap on
    α values × seeds (empty where the α values alone pass the cap)."""
    low, high = params.SEEDS.low, params.SEEDS.high
    assert low is not None and high is not None  # the parameter's range is declared
    return int(low), min(int(high), max_table_runs() // alphas)


def seeds_in_range() -> None:
    """A number of seeds typed in becomes the nearest the table may run, saying so. The change may arrive after the
    visitor left the page (a quick click, then another page), its widgets' state gone: nothing to keep then."""
    typed = st.session_state.get(SEEDS_KEY)
    alphas_text = st.session_state.get(binding.widget_key(PAGE, params.ALPHAS.name))
    if typed is None or alphas_text is None:
        return
    alphas = table_alphas(alphas_text)
    low, high = seeds_range(len(alphas))
    kept = min(max(int(typed), low), max(high, low))
    if kept != typed:
        st.session_state[SEEDS_KEY] = kept
        st.session_state[SEEDS_NOTICE] = (
            f"Seeds: {kept}, not {typed}: with {len(alphas)} α value{'s' if len(alphas) != 1 else ''} a table here "
            f"runs {low} to {high} seeds (at most {max_table_runs()} runs, α values × seeds)."
        )


def spreads(frame: pd.DataFrame, column: str, seeds: int, digits: int, sign: str = "") -> list[str]:
    """The table's ``column``_mean ± ``column``_std per row, as :func:`tables.with_spread` writes them."""
    return [
        tables.with_spread(mean, sd, seeds, digits, sign)
        for mean, sd in zip(frame[f"{column}_mean"], frame[f"{column}_std"])
    ]


def table_panel(values, config):
    st.markdown(
        "MFVI vs SGM for several α, mean ± std over seeds, all runs trained as one batch "
        f"({toy.DEFAULT_STEPS} Adam steps; other settings from the sidebar), as in Tables 2–3. Each seed's "
        "fit is the best of the sidebar's restarts. The exact posterior's log p(D) is the ceiling every bound "
        "sits under; its predictive's test MSE is the Bayes-optimal reference, not a floor: on one test set a "
        "fit can land below it."
    )
    alphas = table_alphas(values["alphas"])
    low, high = seeds_range(len(alphas))
    with binding.controls_area("toy-table"):
        cols = st.columns([3, 2])
        cols[0].text_input("α values (comma-separated)", key=binding.widget_key(PAGE, "alphas"))
        # No range in the box itself: the browser would keep a number out of range in it, in red, beside the value
        # in use; a number typed in becomes the nearest in range, and the box shows the seeds the table will run.
        cols[1].number_input(
            "Seeds",
            step=1,
            key=SEEDS_KEY,
            on_change=seeds_in_range,
            help=f"{low} to {high} seeds with {len(alphas)} α value"
            f"{'s' if len(alphas) != 1 else ''}: this server trains at most "
            f"{max_table_runs()} runs (α values × seeds) per table.",
        )
    for notice in parse_query({"alphas": values["alphas"]}, [params.ALPHAS])[1]:
        st.warning(notice)
    if SEEDS_NOTICE in st.session_state:
        st.info(st.session_state.pop(SEEDS_NOTICE), icon=":material/info:")
    too_many = len(alphas) * values["seeds"] > max_table_runs()
    if too_many:  # the α values changed after the seeds were set, or a link asked for more
        fewer = (
            f"with {len(alphas)} α values, use {low} to {high} seeds"
            if low <= high
            else f"use at most {max_table_runs()} α values"
        )
        st.warning(
            f"{len(alphas)} α values × {values['seeds']} seeds is more than this server's cap of "
            f"{max_table_runs()} runs per table: {fewer}."
        )
    with binding.controls_area("toy-run-table"):
        if st.button(
            "Run the table", icon=":material/table_chart:", key="toy.run_table", type="primary", disabled=too_many
        ):
            st.session_state["toy.table"] = (tuple(alphas), values["seeds"], config)
    if "toy.table" in st.session_state:
        t_alphas, t_seeds, t_config = st.session_state["toy.table"]
        try:  # trained once for every session, in a worker process
            rows = computing.computed(toy.table_task(t_alphas, t_seeds, t_config))
        except RuntimeError as error:
            st.error(binding.for_visitors(str(error)), icon=":material/error:")
            return
        frame = pd.DataFrame(rows)
        shown = pd.DataFrame(
            {
                "α": frame["alpha"],
                "method": frame["method"].map({"mfvi": "MFVI", "sgm": "SGM"}),
                "test MSE": spreads(frame, "test_mse", t_seeds, 4),
                "exact test MSE": frame["exact_test_mse_mean"].round(4),
                "ELBO (SGM: ELBO + I)": spreads(frame, "elbo", t_seeds, 3),
                "log p(D)": frame["log_evidence_mean"].round(3),
                "fits stuck on one side": [f"{k} / {n}" for k, n in zip(frame["stuck_fits"], frame["seeds"])],
                "starts stuck": [
                    f"{k} / {n * r}" for k, n, r in zip(frame["stuck_starts"], frame["seeds"], frame["restarts"])
                ],
            }
        )
        st.caption(
            f"α = {', '.join(f'{a:g}' for a in t_alphas)}, {t_seeds} seeds, noise {t_config.noise:g}, "
            f"N = {t_config.n_train}, mutual information: {t_config.mi}, best of {t_config.restarts} start{'s' if t_config.restarts != 1 else ''}"
        )
        if frame["stuck_fits"].sum():
            st.warning(
                f"{int(frame['stuck_fits'].sum())} fits ended with {toy.stuck_notice(REMEDIES[t_config.init])}: their rows "
                "mix that local optimum into the means."
            )
        tables.show(shown, hide_index=True)
        sgm = frame[frame["method"] == "sgm"]
        st.markdown(
            "**SGM − MFVI on the same seeds** (same data, same initialisation): most of the spread "
            "above is the data's and is shared by both methods, so compare the paired differences."
        )
        tables.show(
            pd.DataFrame(
                {
                    "α": sgm["alpha"],
                    "bound gain": spreads(sgm, "elbo_gain", t_seeds, 3, "+"),
                    "seeds with higher bound": [
                        f"{k:.0f} / {n}" for k, n in zip(sgm["seeds_higher_elbo"], sgm["seeds"])
                    ],
                    "test MSE change": spreads(sgm, "test_mse_change", t_seeds, 4, "+"),
                    "seeds with lower MSE": [
                        f"{k:.0f} / {n}" for k, n in zip(sgm["seeds_lower_test_mse"], sgm["seeds"])
                    ],
                }
            ),
            hide_index=True,
        )
        charts.csv_download(frame, "toy_table.csv", "Table (CSV)", "toy.csv_table")


def formulas():
    with st.expander("The model and the objectives", expanded=False):
        st.markdown(r"""
$f_w(x) = \mathrm{ReLU}(w_1 x) + \mathrm{ReLU}(w_2 x)$, data $y = \alpha|x| + \varepsilon$,
$\varepsilon \sim \mathcal N(0, \sigma_\varepsilon^2)$, prior $w \sim \mathcal N(0, \sigma_p^2 I)$.
Swapping the units leaves $f$ unchanged, so the posterior has two equivalent modes,
$(\alpha, -\alpha)$ and $(-\alpha, \alpha)$, $2\sqrt2\,\alpha$ apart. The exact posterior and
$\log p(\mathcal D)$ come from a 201 × 201 grid.

* **MFVI**: $q_\theta = \mathcal N(\mu, \mathrm{diag}\, s^2)$, maximise
  $\mathrm{ELBO}(\theta) = \mathbb E_{q_\theta}[\log p(\mathcal D\mid w)] - \mathrm{KL}(q_\theta\|p)$.
* **SGM**: $q_G(w) = \tfrac12 q_\theta(w) + \tfrac12 q_\theta(\text{swap}\,w)$, maximise
  $\mathrm{ELBO}_G = \mathrm{ELBO}(\theta) + I(\omega; g)$ with
  $I = \mathbb E_{q_\theta}[\log 2 - \mathrm{softplus}(\log q_\theta(\text{swap}\,w) - \log q_\theta(w))]$
  (exact, $G$ enumerated) or the InfoNCE bound $I_K \le \min(I, \log K)$.
* Both bounds sit below $\log p(\mathcal D)$; $\mathrm{ELBO}_G \ge \mathrm{ELBO}$ at equal $\theta$.
  Predictions average $f_w$ over $q_\theta$ (the same for $q_G$, since $f$ is invariant).
* **Evaluation without sampling noise.** Under mean-field $q$ the units are independent and, for
  $v \sim \mathcal N(m, s^2)$, $\mathbb E\,\mathrm{ReLU}(v) = m\Phi(m/s) + s\varphi(m/s)$ and
  $\mathbb E\,\mathrm{ReLU}(v)^2 = (m^2 + s^2)\Phi(m/s) + ms\varphi(m/s)$, so the ELBO and the predictive mean and
  variance are closed forms; $I$ is a fixed quasi-Monte-Carlo average ($2^{16}$ points, error ~$10^{-4}$ nats).
  Training itself uses the paper's reparameterised Monte-Carlo gradients.
* **Restarts and the stuck optimum.** Each method trains from $R$ initialisations, all fixed by the seed, and
  keeps the one with the highest own bound. A start that ends with both units on one side, $w_1, w_2 > 0$ (or
  both $< 0$), fits $y = \alpha x$ on one half of the inputs and nothing on the other: a local optimum of the
  training, not the symmetry. It is named when $q$ gives the units opposite signs less than 5% of the time while
  the exact posterior does more often than not. *Between the modes* (nearer the midpoint of the posterior's two
  maxima than either) is the symmetry effect. Starts from the origin share their means and differ only in
  their Monte-Carlo noise, so more of them help little there.
* **Exact test MSE**: of the exact posterior's predictive mean, which minimises the expected squared error
  under the model; on one finite test set a method's MSE can still fall below it.
""")


def main():
    values = binding.start_page(
        PAGE,
        binding.page_specs(LAB),
        "Tractable BNN",
        "The smallest network with a permutation symmetry, trained live: mean-field VI against "
        "its symmetrised version and the exact posterior (Gelberg et al. 2024, §5).",
        controls_panel,
    )
    config = config_from(values)
    live, table = st.tabs(["Live training", "Paper tables"])
    with live:
        landscape_toggle()
        live_panel(config, values[params.ADAM_STEP.name], values[SURFACE_VIEW.name])
    with table:
        table_panel(values, config)
    formulas()


if __name__ == "__main__":  # run as a script: AppTest.from_file, `streamlit run views/<lab>.py`
    main()
