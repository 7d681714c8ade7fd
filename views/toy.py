"""Tractable BNN lab: exact posterior vs MFVI vs SGM, trained live (Gelberg et al. §5, Fig. 4)."""

import math
import time
from dataclasses import dataclass

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from symlab.labs.toy import LAB, params
from symlab.labs.toy import experiment as toy
from symlab.lib import two_relu
from symlab.specs import controls
from symlab.specs import surfaces as landscape
from symlab.specs.urlstate import parse_query
from views.common import binding, charts, computing, player, surfaces, tables

PAGE = "toy"
# What to do about a fit stuck on one side: starts from the origin differ only in their Monte-Carlo noise.
REMEDIES = {
    "random": "press New seed or raise Restarts",
    "origin": "press New seed or choose random initial means (starts from the origin differ only in their noise)",
}
STEPS_PER_TICK = 20
TICK_SECONDS = 0.15  # the browser, not the server, limits the redraw rate (benchmarks/bench_toy_live.py)
MAX_STEPS = params.LIVE_STEPS
# A reloaded page replays its training from the seed for at most this long, within the page's 3 s to its first
# chart. Measured on one core: the default settings' whole run (4000 Adam steps) takes 1.0 s; at the page's caps
# (N = 500, 8 restarts) 1.5 s replays about 300 steps.
REPLAY_SECONDS = 1.5
STEP_KEY = binding.widget_key(PAGE, params.ADAM_STEP.name)  # the Adam step in the link
GRID = 81  # display grid for the exact posterior (the evidence uses 201 points)
COLOURS = {"mfvi": charts.PALETTE["reverse"], "sgm": charts.PALETTE["forward"], "exact": charts.PALETTE["target"]}
DASHES = {"mfvi": "dash", "sgm": "dot", "exact": "solid"}
LABELS = {"mfvi": "MFVI", "sgm": "SGM (q_G)", "exact": "exact posterior"}


def config_from(values) -> toy.ToyConfig:
    return toy.ToyConfig(**controls.config_values(toy.ToyConfig, values, params.FIELDS)).validate()


@st.cache_data(max_entries=32, show_spinner=False)
def exact_for(config: toy.ToyConfig):
    """The data, the exact answer, the posterior on the display grid and its predictive band on ``x``."""
    return toy.exact_view(config, GRID)


def trainer_for(config: toy.ToyConfig) -> two_relu.ToyTrainer:
    """This session's trainer for ``config`` (a new one when any setting changes): every start of MFVI, then
    every start of SGM."""
    # The config and its trainer in one entry: a run stopped between two assignments cannot part them.
    trained_config, trainer = st.session_state.get("toy.live", (None, None))
    if trained_config != config:
        trainer = two_relu.ToyTrainer(toy.starts_of("mfvi", config) + toy.starts_of("sgm", config))
        st.session_state["toy.live"] = (config, trainer)
    return trainer


def live_fits(trainer: two_relu.ToyTrainer, config: toy.ToyConfig, exact: toy.ExactAnswer) -> list[toy.Fit]:
    """MFVI's fit and SGM's, each kept by the latest recorded bounds."""
    return toy.fits(trainer, trainer.latest_bounds(), {config: exact}, tie=toy.LIVE_BOUND_TIE)


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
        widget("mi", required=True)
        widget("K", disabled=st.session_state[binding.widget_key(PAGE, "mi")] != "infonce")
        widget("lr")
        widget("batch_size")
        widget("init", required=True)
        widget("restarts")
        widget("seed")
        binding.new_seed_button(
            PAGE, help="A new draw of the data and the initialisation; Reset keeps the current one."
        )
    new_settings_start_over()


def new_settings_start_over() -> None:
    """New settings train from the start: the link's Adam step goes back to 0 before the link is written."""
    trained = st.session_state.get("toy.live", (None, None))[0]
    if trained is not None and trained != config_from(binding.current_values(PAGE, binding.page_specs(LAB))):
        st.session_state[STEP_KEY] = 0


# Live charts (Vega-Lite, updated in place: views/common). The specs depend only on what is fixed while training
# plays; the frame's numbers come as datasets.
POSTERIOR_SERIES = (
    charts.Series(f"{LABELS['mfvi']}: 1 and 2 sd", COLOURS["mfvi"], DASHES["mfvi"]),
    charts.Series(f"{LABELS['sgm']}: 1 and 2 sd, both components", COLOURS["sgm"], DASHES["sgm"]),
    charts.Series("equivalent modes (α, −α), (−α, α)", charts.PALETTE["current"], marker="x", line=False),
    charts.Series("other starts (both methods): 1 sd", charts.PALETTE["grey"], "longdashdot"),
)
PREDICTION_SERIES = (
    charts.Series("training data", charts.PALETTE["grey"], marker="circle", line=False),
    charts.Series("true α|x|", charts.PALETTE["current"], "longdash"),
    *(charts.Series(f"{LABELS[m]}: mean ± 2 sd", COLOURS[m], DASHES[m]) for m in ("exact", *two_relu.METHODS)),
)
CURVE_SERIES = (
    *(charts.Series(LABELS[m], COLOURS[m], DASHES[m]) for m in two_relu.METHODS),
    charts.Series("exact posterior", COLOURS["exact"], "dashdot"),
)
POSTERIOR_GREYS = ("#FFFFFF", "#484848")  # the exact posterior's density, from 0 to its peak
PREDICTIONS_PX, CURVES_PX = 480, 340  # the whole chart's height, title and legend included


@st.cache_resource(max_entries=16, show_spinner=False)  # outlives the run, unlike a functools cache of a page
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
    return charts.square_plot(charts.fitted_legend(spec, [series.label for series in POSTERIOR_SERIES]))


@st.cache_resource(max_entries=16, show_spinner=False)  # outlives the run, unlike a functools cache of a page
def predictions_spec(present: bool) -> dict:
    """Data, the true function, and each method's predictive mean with a ±2 sd band."""
    x = charts.quantity("x", "input x", (-2.2, 2.2))
    y = charts.quantity("y", "output y (noise included in the bands)", channel=alt.Y)
    bands = [charts.altair_band(series, x) for series in PREDICTION_SERIES[2:]]
    chart = alt.layer(*bands, charts.altair_lines(PREDICTION_SERIES, x, y))
    spec = charts.vega_spec(chart, title="Predictions", height=PREDICTIONS_PX)
    return charts.fitted_legend(spec, [series.label for series in PREDICTION_SERIES])


@st.cache_resource(max_entries=16, show_spinner=False)  # outlives the run, unlike a functools cache of a page
def posterior_image(config: toy.ToyConfig) -> bytes:
    """The exact posterior as the chart's image dataset, encoded once: it does not change while training plays."""
    display = exact_for(config)[2]
    return charts.arrow_bytes(
        charts.image_frame(display.axis, display.axis, np.exp(display.log_density).T, POSTERIOR_GREYS)
    )


def outline_frame(label: str, mean, std, symmetrised: bool, radii=(1.0, 2.0), first_part: int = 0) -> pd.DataFrame:
    x, y = two_relu.gaussian_outlines(mean, std, symmetrised, radii)
    part = first_part + np.cumsum(np.isnan(x))  # NaN separates the ellipses
    keep = ~np.isnan(x)
    return charts.lines_frame(label, x[keep], y[keep], part[keep])


def posterior_data(config, fits, means, stds) -> dict:
    """The kept fits' ellipses (both components of SGM's q_G), the other starts' 1 sd ellipses, the modes."""
    outlines = [
        outline_frame(POSTERIOR_SERIES[i].label, means[fit.row], stds[fit.row], fit.method == "sgm")
        for i, fit in enumerate(fits)
    ]
    others = [row for fit in fits for row in fit.rows if row != fit.row]
    outlines += [
        outline_frame(POSTERIOR_SERIES[3].label, means[row], stds[row], False, (1.0,), first_part=k)
        for k, row in enumerate(others)
    ]
    a = config.alpha
    outlines.append(charts.lines_frame(POSTERIOR_SERIES[2].label, [a, -a], [-a, a]))
    return {"image": posterior_image(config), "lines": pd.concat(outlines)}


def predictions_data(data, x, exact_mean, exact_std, config, trainer, fits) -> dict:
    means, stds = trainer.predictive(x)
    bands = [("exact", exact_mean, exact_std)] + [(fit.method, means[fit.row], stds[fit.row]) for fit in fits]
    lines = [
        charts.lines_frame(PREDICTION_SERIES[0].label, data.x_train, data.y_train),
        charts.lines_frame(PREDICTION_SERIES[1].label, x, config.alpha * np.abs(x)),
    ]
    band_rows = []
    for series, (_, mean, std) in zip(PREDICTION_SERIES[2:], bands):
        lines.append(charts.lines_frame(series.label, x, mean))
        band_rows.append(pd.DataFrame({"x": x, "low": mean - 2 * std, "high": mean + 2 * std, "series": series.label}))
    return {"lines": pd.concat(lines), "bands": pd.concat(band_rows)}


# Each method's own lower bound on log p(D): MFVI's ELBO, SGM's ELBO + I.
BOUNDS = {"mfvi": ("elbo", "MFVI: ELBO"), "sgm": ("elbo_g", "SGM: ELBO + I")}


@st.cache_resource(max_entries=8, show_spinner=False)  # outlives the run, unlike a functools cache of a page
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


def curves_data(trainer, fits, exact: toy.ExactAnswer) -> dict:
    """The datasets of the bounds chart and of the test MSE chart: the kept starts' histories."""
    per_chart = {"bounds": ([], exact.log_evidence), "mse": ([], exact.test_mse)}
    for i, fit in enumerate(fits):
        history, (bound_field, _) = trainer.history[fit.row], BOUNDS[fit.method]
        per_chart["bounds"][0].append(
            charts.lines_frame(CURVE_SERIES[i].label, history.step, getattr(history, bound_field))
        )
        per_chart["mse"][0].append(charts.lines_frame(CURVE_SERIES[i].label, history.step, history.test_mse))
    return {
        name: {"lines": pd.concat(lines), "rules": pd.DataFrame({"value": [exact], "series": [CURVE_SERIES[2].label]})}
        for name, (lines, exact) in per_chart.items()
    }


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


@dataclass(frozen=True)
class Resumed:
    """Live training replayed to the link's Adam step in a new session."""

    config: toy.ToyConfig
    asked: int  # the link's step
    step: int  # the step replayed to: a whole tick, at most ``asked``
    diverged: bool  # every run diverged on the way


def resume(trainer: two_relu.ToyTrainer, config: toy.ToyConfig, asked: int, steps_per_tick: int) -> Resumed:
    """Replay ``trainer`` from its seed to the link's step ``asked`` (down to a whole tick), tick by tick as
    playing would, for at most :data:`REPLAY_SECONDS`: the same path the link's session trained."""
    target = asked // steps_per_tick * steps_per_tick
    deadline = time.monotonic() + REPLAY_SECONDS
    with st.spinner(f"Replaying training from its seed to Adam step {target}…"):
        while trainer.steps_done < target and time.monotonic() < deadline and not all(trainer.diverged):
            trainer.train_to(trainer.steps_done + steps_per_tick, steps_per_tick)
    return Resumed(config, asked, trainer.steps_done, all(trainer.diverged))


def resumed_notice(resumed: Resumed, steps_per_tick: int) -> None:
    if resumed.step == resumed.asked:
        st.info(f"Resumed at Adam step {resumed.step}: training replayed from its seed.", icon=":material/replay:")
    elif resumed.diverged:
        st.info(
            f"Resumed at Adam step {resumed.step}, where training diverged, before the link's "
            f"{resumed.asked}: replayed from its seed.",
            icon=":material/replay:",
        )
    elif resumed.asked - resumed.step < steps_per_tick:
        st.info(
            f"Resumed at Adam step {resumed.step}, the last whole tick of {steps_per_tick} steps before the "
            f"link's {resumed.asked}: training replayed from its seed.",
            icon=":material/replay:",
        )
    else:
        st.warning(
            f"Resumed at Adam step {resumed.step}, not the link's {resumed.asked}: replaying {resumed.asked} "
            f"steps from the seed takes longer than this page waits ({REPLAY_SECONDS:g} s). Play goes on "
            "from here along the same path.",
            icon=":material/replay:",
        )


def keep_step_in_link(step: int) -> None:
    """The link keeps the step training shows while paused, for a reload to replay to. Not while playing: each
    change of the link is an entry in the browser's history (a rerun it is not)."""
    if st.session_state[STEP_KEY] != step:
        st.session_state[STEP_KEY] = step
        st.query_params[params.ADAM_STEP.name] = str(step)


def live_pace() -> tuple[int, float]:
    """Adam steps per tick and seconds per tick: the page's, or this server's where it allows less."""
    live = binding.server_settings().live
    return min(STEPS_PER_TICK, live.max_steps_per_tick), max(TICK_SECONDS, live.min_tick_seconds)


def live_panel(config, asked_step: int, turned: bool):
    data, exact, display, x, exact_mean, exact_std = exact_for(config)
    steps_per_tick, tick_seconds = live_pace()
    new_session = "toy.live" not in st.session_state
    trainer = trainer_for(config)
    if new_session and asked_step > 0:  # a reload, or a link shared while paused
        st.session_state["toy.resumed"] = resume(trainer, config, asked_step, steps_per_tick)
    resumed = st.session_state.get("toy.resumed")
    if resumed is not None and resumed.config != config:  # new settings: training starts over
        del st.session_state["toy.resumed"]
        resumed = None

    def follow(frame: int) -> bool:
        """Train up to the frame's step (a reset trains from the start again); go on while a run is alive."""
        trainer.train_to(frame * steps_per_tick, steps_per_tick)
        return not all(trainer.diverged)

    def draw(frame: int, chart_config: dict):
        playing = st.session_state["toy.playback"].playing
        if not playing:
            keep_step_in_link(frame * steps_per_tick)
        if "toy.resumed" in st.session_state:  # where training resumed, said until it moves on
            if not playing and frame * steps_per_tick == st.session_state["toy.resumed"].step:
                resumed_notice(st.session_state["toy.resumed"], steps_per_tick)
            else:
                del st.session_state["toy.resumed"]
        fits = live_fits(trainer, config, exact)
        if trainer.steps_done:  # a fit, its outcome and its troubles once there is training to judge
            fit_notices(trainer, fits, config)
        means, stds = trainer.parameters()
        latest = {
            fit.method: {k: getattr(trainer.history[fit.row], k)[-1] for k in ("elbo", "elbo_g", "test_mse")}
            for fit in fits
        }
        # Each method's number beside the exact posterior's, three to a row: six in a row cut the numbers short.
        cols = st.columns(3)
        cols[0].metric("MFVI: ELBO", f"{latest['mfvi']['elbo']:.3f}")
        cols[1].metric("SGM: ELBO + I", f"{latest['sgm']['elbo_g']:.3f}")
        cols[2].metric("log p(D) (exact)", f"{exact.log_evidence:.3f}")
        cols = st.columns(3)
        cols[0].metric("MFVI: test MSE", f"{latest['mfvi']['test_mse']:.3f}")
        cols[1].metric("SGM: test MSE", f"{latest['sgm']['test_mse']:.3f}")
        cols[2].metric(
            "test MSE (exact)",
            f"{exact.test_mse:.3f}",
            help="Of the exact posterior's predictive mean: the best a method can expect to reach.",
        )
        kept_means = {fit.method: (means[fit.row], stds[fit.row]) for fit in fits}
        st.caption(
            " · ".join(
                f"{LABELS[m]}: μ = ({mu[0]:.2f}, {mu[1]:.2f}), s = ({sd[0]:.2f}, {sd[1]:.2f})"
                for m, (mu, sd) in kept_means.items()
            )
        )
        st.caption(starts_caption(fits) if trainer.steps_done else starting_points_caption(config))
        present = charts.presenting()
        left, right = st.columns(2)  # the square posterior needs the room: a narrower share was 215 px at 1024 px
        bound = float(display.axis[-1])
        charts.vega_chart(
            left,
            charts.with_domains(posterior_spec(present), x=(-bound, bound), y=(-bound, bound)),
            posterior_data(config, fits, means, stds),
            "toy.live_posterior",
            alt_text="The exact posterior over the two weights, with MFVI's and SGM's ellipses",
        )
        charts.vega_chart(
            right,
            predictions_spec(present),
            predictions_data(data, x, exact_mean, exact_std, config, trainer, fits),
            "toy.live_predictions",
            alt_text="Each method's predictive mean and band, with the data",
        )
        curves = curves_data(trainer, fits, exact)
        left, right = st.columns(2)
        charts.vega_chart(
            left,
            curves_spec("bounds", present),
            curves["bounds"],
            "toy.bounds",
            alt_text="Each method's lower bound under log p(D), by Adam step",
        )
        charts.vega_chart(
            right,
            curves_spec("mse", present),
            curves["mse"],
            "toy.mse",
            alt_text="Each method's test MSE, by Adam step",
        )
        if turned:
            landscape_view(config, kept_means)

    if (steps_per_tick, tick_seconds) != (STEPS_PER_TICK, TICK_SECONDS):
        st.caption(
            f"On this shared server live training advances {steps_per_tick} Adam steps every {tick_seconds:g} s."
        )
    ticks = math.ceil(MAX_STEPS / steps_per_tick)
    start = 0 if resumed is None else resumed.step // steps_per_tick
    player.frame_player(
        "toy",
        ("toy.live", config),
        ticks + 1,
        start,
        tick_seconds,
        lambda frame: f"Adam step {frame * steps_per_tick} / {MAX_STEPS}",
        draw,
        play_help=f"Train both methods live, {steps_per_tick} Adam steps a tick, every start at once.",
        reset_help="Back to the same initialisations (same seed).",
        follow=follow,
    )
    if turned:
        charts.csv_download(
            lambda: landscape_frame(config, fitted_now(trainer, live_fits(trainer, config, exact))),
            f"toy_landscape_alpha{config.alpha:g}_seed{config.seed}_step{trainer.steps_done}.csv",
            "Landscape (CSV)",
            "toy.csv_landscape",
        )
    charts.csv_download(
        traces_frame(trainer, live_fits(trainer, config, exact)),
        f"toy_traces_alpha{config.alpha:g}_seed{config.seed}.csv",
        "Traces (CSV)",
        "toy.csv_traces",
    )


# The 3-D view: the exact log posterior as a landscape (grey, darker higher), the fits' outlines on it.
LANDSCAPE_STYLES = {
    "modes": surfaces.Style(charts.PALETTE["current"], symbol="x", line=False, name="equivalent modes"),
    "mfvi": surfaces.Style(COLOURS["mfvi"], "dash", name=f"{LABELS['mfvi']}: 1 and 2 sd"),
    "sgm": surfaces.Style(COLOURS["sgm"], "dot", name="SGM: 1 and 2 sd"),  # both components: a phone's width
}


@st.cache_resource(max_entries=16, show_spinner=False)  # one landscape per setting, for every session
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
    return params.SEEDS.low, min(params.SEEDS.high, max_table_runs() // alphas)


def seeds_in_range() -> None:
    """A number of seeds typed in becomes the nearest the table may run, saying so."""
    typed = st.session_state[SEEDS_KEY]
    alphas = table_alphas(st.session_state[binding.widget_key(PAGE, params.ALPHAS.name)])
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
        st.dataframe(shown, hide_index=True)
        sgm = frame[frame["method"] == "sgm"]
        st.markdown(
            "**SGM − MFVI on the same seeds** (same data, same initialisation): most of the spread "
            "above is the data's and is shared by both methods, so compare the paired differences."
        )
        st.dataframe(
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
        live_panel(config, values[params.ADAM_STEP.name], values[landscape.VIEW.name])
    with table:
        table_panel(values, config)
    formulas()


if __name__ == "__main__":  # run as a script: AppTest.from_file, `streamlit run views/<lab>.py`
    main()
