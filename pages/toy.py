"""Tractable BNN lab: exact posterior vs MFVI vs SGM, trained live (Gelberg et al. §5, Fig. 4)."""

import math

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from pages import ui
from symlab import controls
from symlab.labs.toy import LAB, params
from symlab.labs.toy import experiment as toy
from symlab.urlstate import parse_query

PAGE = "toy"
DEFAULTS = toy.ToyConfig()
SPECS = LAB.page_params(ui.server_settings())
PRESETS = {
    "Close modes (paper default)": (
        dict(alpha=DEFAULTS.alpha, noise=DEFAULTS.noise, n=DEFAULTS.n_train, mi="exact", init="random"),
        "The two equivalent modes are close: MFVI settles between them, SGM's mixture sits on both."),
    "Far-apart modes": (
        dict(alpha=2.0, noise=0.25, n=30, mi="exact", init="random"),
        "With the modes far apart MFVI picks one; SGM's bound gains exactly ln 2 and the predictions agree."),
    "Start at the origin": (
        dict(alpha=DEFAULTS.alpha, noise=DEFAULTS.noise, n=DEFAULTS.n_train, mi="exact", init="origin"),
        "Started exactly between the modes, MFVI has no reason to leave; SGM breaks the tie."),
    "InfoNCE with K = 2": (
        dict(alpha=DEFAULTS.alpha, noise=DEFAULTS.noise, n=DEFAULTS.n_train, mi="infonce", K=2),
        "The cheapest estimator, I₂ ≤ min(I, ln 2): still a lower bound, noisier, same picture."),
    "More data": (
        dict(alpha=DEFAULTS.alpha, noise=DEFAULTS.noise, n=200, batch=50, mi="exact"),
        "A sharper posterior separates the modes: watch MFVI commit to one of them."),
}
STEPS_PER_TICK = 20
TICK_SECONDS = 0.15  # the browser, not the server, limits the redraw rate (benchmarks/bench_toy_live.py)
MAX_STEPS = 4000
GRID = 81  # display grid for the exact posterior (the evidence uses 201 points)
COLOURS = {"mfvi": ui.PALETTE["reverse"], "sgm": ui.PALETTE["forward"], "exact": ui.PALETTE["target"]}
DASHES = {"mfvi": "dash", "sgm": "dot", "exact": "solid"}
LABELS = {"mfvi": "MFVI", "sgm": "SGM (q_G)", "exact": "exact posterior"}


def config_from(values) -> toy.ToyConfig:
    return toy.ToyConfig(**controls.config_values(toy.ToyConfig, values, params.FIELDS)).validate()


@st.cache_data(max_entries=32, show_spinner=False)
def exact_for(config: toy.ToyConfig):
    data = toy.make_data(config)
    post = toy.exact_posterior(data, config.noise, config.prior_scale)
    x = np.linspace(-2.2, 2.2, 89)
    mean, std = toy.posterior_predictive(post, x, config.noise)
    exact_mse = float(np.mean((toy.posterior_predictive(post, data.x_test, config.noise)[0] - data.y_test) ** 2))
    display = toy.exact_posterior(data, config.noise, config.prior_scale, GRID, toy.mass_bound(post))
    return data, post.log_evidence, display, x, mean, std, exact_mse


def trainer_for(config: toy.ToyConfig) -> toy.ToyTrainer:
    """This session's trainer for ``config`` (a new one when any setting changes)."""
    # The config and its trainer in one entry: a run stopped between two assignments cannot part them.
    trained_config, trainer = st.session_state.get("toy.live", (None, None))
    if trained_config != config:
        trainer = toy.ToyTrainer([toy.RunSpec("mfvi", config), toy.RunSpec("sgm", config)], eval_samples=512)
        st.session_state["toy.live"] = (config, trainer)
    return trainer


def widget(name: str, **options):
    return ui.control_widget(PAGE, toy.ToyConfig, name, cap=params.CAPS.get(name), **options)


def controls_panel():
    with st.sidebar:
        st.subheader("Presets")
        ui.preset_picker(PAGE, PRESETS, {s.name: s.default for s in SPECS if s.name in ("batch", "K", "lr", "prior")})
        st.subheader("Data and prior")
        for name in ("alpha", "noise", "n_train", "prior_scale"):
            widget(name)
        st.subheader("Training")
        widget("mi", required=True)
        widget("K", disabled=st.session_state[ui.widget_key(PAGE, "mi")] != "infonce")
        widget("lr")
        widget("batch_size")
        widget("init", required=True)
        widget("seed")
        ui.new_seed_button(PAGE, help="A new draw of the data and the initialisation; Reset keeps the current one.")


# Live charts (Vega-Lite, updated in place: pages/ui.py). The specs depend only on what is fixed while training
# plays; the frame's numbers come as datasets.
POSTERIOR_SERIES = (ui.Series(f"{LABELS['mfvi']}: 1 and 2 sd", COLOURS["mfvi"], DASHES["mfvi"]),
                    ui.Series(f"{LABELS['sgm']}: 1 and 2 sd, both components", COLOURS["sgm"], DASHES["sgm"]),
                    ui.Series("equivalent modes (α, −α), (−α, α)", ui.PALETTE["current"], marker="x", line=False))
PREDICTION_SERIES = (ui.Series("training data", ui.PALETTE["grey"], marker="circle", line=False),
                     ui.Series("true α|x|", ui.PALETTE["current"], "longdash"),
                     *(ui.Series(f"{LABELS[m]}: mean ± 2 sd", COLOURS[m], DASHES[m]) for m in ("exact", *toy.METHODS)))
CURVE_SERIES = (*(ui.Series(LABELS[m], COLOURS[m], DASHES[m]) for m in toy.METHODS),
                ui.Series("exact posterior", COLOURS["exact"], "dashdot"))
POSTERIOR_PX = 330  # the posterior's plot area, square: equal scales on w₁ and w₂
POSTERIOR_GREYS = ("#FFFFFF", "#484848")  # the exact posterior's density, from 0 to its peak


@st.cache_resource(max_entries=16, show_spinner=False)  # outlives the run, unlike a functools cache of a page
def posterior_spec(bound: float, present: bool) -> dict:
    """The exact posterior (grey: a picture, it does not change while training plays) with q's 1 and 2 sd
    ellipses (both components of q_G) and the modes."""
    x, y = ui.quantity("x", "w₁", (-bound, bound)), ui.quantity("y", "w₂", (-bound, bound), channel=alt.Y)
    chart = alt.layer(ui.altair_image("w₁", "w₂", (-bound, bound), (-bound, bound)),
                      ui.altair_lines(POSTERIOR_SERIES, x, y, data_order=True))
    return ui.vega_spec(chart, title="Exact posterior (grey) and q over (w₁, w₂)", height=POSTERIOR_PX,
                        width=POSTERIOR_PX, legend_columns=1)


@st.cache_resource(max_entries=16, show_spinner=False)  # outlives the run, unlike a functools cache of a page
def predictions_spec(present: bool) -> dict:
    """Data, the true function, and each method's predictive mean with a ±2 sd band."""
    x = ui.quantity("x", "input x", (-2.2, 2.2))
    y = ui.quantity("y", "output y (noise included in the bands)", channel=alt.Y)
    bands = [ui.altair_band(series, x) for series in PREDICTION_SERIES[2:]]
    chart = alt.layer(*bands, ui.altair_lines(PREDICTION_SERIES, x, y))
    return ui.vega_spec(chart, title="Predictions", height=POSTERIOR_PX + 150, legend_columns=2)


@st.cache_resource(max_entries=16, show_spinner=False)  # outlives the run, unlike a functools cache of a page
def posterior_image(config: toy.ToyConfig) -> pd.DataFrame:
    display = exact_for(config)[2]
    return ui.image_frame(display.axis, display.axis, np.exp(display.log_density).T, POSTERIOR_GREYS)


def posterior_data(config, means, stds) -> dict:
    outlines = []
    for i, method in enumerate(toy.METHODS):
        x, y = toy.gaussian_outlines(means[i], stds[i], symmetrised=method == "sgm")
        part = np.cumsum(np.isnan(x))  # NaN separates the ellipses
        keep = ~np.isnan(x)
        outlines.append(ui.lines_frame(POSTERIOR_SERIES[i].label, x[keep], y[keep], part[keep]))
    a = config.alpha
    outlines.append(ui.lines_frame(POSTERIOR_SERIES[2].label, [a, -a], [-a, a]))
    return {"image": posterior_image(config), "lines": pd.concat(outlines)}


def predictions_data(data, x, exact_mean, exact_std, config, trainer) -> dict:
    means, stds = trainer.predictive(x)
    bands = [("exact", exact_mean, exact_std)] + [(m, means[i], stds[i]) for i, m in enumerate(toy.METHODS)]
    lines = [ui.lines_frame(PREDICTION_SERIES[0].label, data.x_train, data.y_train),
             ui.lines_frame(PREDICTION_SERIES[1].label, x, config.alpha * np.abs(x))]
    band_rows = []
    for series, (_, mean, std) in zip(PREDICTION_SERIES[2:], bands):
        lines.append(ui.lines_frame(series.label, x, mean))
        band_rows.append(pd.DataFrame({"x": x, "low": mean - 2 * std, "high": mean + 2 * std, "series": series.label}))
    return {"lines": pd.concat(lines), "bands": pd.concat(band_rows)}


# Each method's own lower bound on log p(D): MFVI's ELBO, SGM's ELBO + I.
BOUNDS = {"mfvi": ("elbo", "MFVI: ELBO"), "sgm": ("elbo_g", "SGM: ELBO + I")}


@st.cache_resource(max_entries=8, show_spinner=False)  # outlives the run, unlike a functools cache of a page
def curves_spec(quantity: str, present: bool) -> dict:
    """Each method's bound under log p(D), or its test MSE, by Adam step, with the exact posterior's."""
    y_title, title = {"bounds": ("bound (nats)", "Lower bounds under log p(D) (MFVI: ELBO; SGM: ELBO + I)"),
                      "mse": ("test MSE", "Test MSE")}[quantity]
    chart = alt.layer(ui.altair_lines(CURVE_SERIES, ui.quantity("x", "Adam step"), ui.quantity("y", y_title, channel=alt.Y)),
                      ui.altair_rules(CURVE_SERIES))
    return ui.vega_spec(chart, title=title, height=340)


def curves_data(trainer, log_evidence, exact_mse) -> dict:
    """The datasets of the bounds chart and of the test MSE chart."""
    charts = {"bounds": ([], log_evidence), "mse": ([], exact_mse)}
    for i, method in enumerate(toy.METHODS):
        history, (bound_field, _) = trainer.history[i], BOUNDS[method]
        charts["bounds"][0].append(ui.lines_frame(CURVE_SERIES[i].label, history.step, getattr(history, bound_field)))
        charts["mse"][0].append(ui.lines_frame(CURVE_SERIES[i].label, history.step, history.test_mse))
    return {name: {"lines": pd.concat(lines), "rules": pd.DataFrame({"value": [exact], "series": [CURVE_SERIES[2].label]})}
            for name, (lines, exact) in charts.items()}


def live_panel(config):
    data, log_evidence, display, x, exact_mean, exact_std, exact_mse = exact_for(config)
    trainer = trainer_for(config)
    live = ui.server_settings().live
    steps_per_tick = min(STEPS_PER_TICK, live.max_steps_per_tick)
    tick_seconds = max(TICK_SECONDS, live.min_tick_seconds)

    def follow(frame: int) -> bool:
        """Train up to the frame's step (a reset trains from the start again); go on while a run is alive."""
        trainer.train_to(frame * steps_per_tick, steps_per_tick)
        return not all(trainer.diverged)

    def draw(frame: int, chart_config: dict):
        for i, method in enumerate(toy.METHODS):
            if trainer.diverged[i]:
                st.error(f"{LABELS[method]} diverged (NaN parameters): lower the learning rate and press Reset.")
        means, stds = trainer.parameters()
        latest = {m: {k: getattr(trainer.history[i], k)[-1] for k in ("elbo", "elbo_g", "test_mse")}
                  for i, m in enumerate(toy.METHODS)}
        metric_cols = st.columns(4)
        metric_cols[0].metric("MFVI: ELBO", f"{latest['mfvi']['elbo']:.3f}")
        metric_cols[1].metric("SGM: ELBO + I", f"{latest['sgm']['elbo_g']:.3f}")
        metric_cols[2].metric("log p(D) (exact)", f"{log_evidence:.3f}")
        metric_cols[3].metric("test MSE: MFVI / SGM", f"{latest['mfvi']['test_mse']:.3f} / {latest['sgm']['test_mse']:.3f}")
        st.caption(f"MFVI: μ = ({means[0][0]:.2f}, {means[0][1]:.2f}), s = ({stds[0][0]:.2f}, {stds[0][1]:.2f}) · "
                   f"SGM: μ = ({means[1][0]:.2f}, {means[1][1]:.2f}), s = ({stds[1][0]:.2f}, {stds[1][1]:.2f}) · "
                   f"exact posterior predictive test MSE {exact_mse:.3f}")
        present = bool(st.session_state.get("ui.present"))
        left, right = st.columns([2, 3])
        bound = float(display.axis[-1])
        ui.vega_chart(left, posterior_spec(bound, present), posterior_data(config, means, stds), "toy.live_posterior",
                      width="content",
                      alt_text="The exact posterior over the two weights, with MFVI's and SGM's ellipses")
        ui.vega_chart(right, predictions_spec(present), predictions_data(data, x, exact_mean, exact_std, config, trainer),
                      "toy.live_predictions", alt_text="Each method's predictive mean and band, with the data")
        curves = curves_data(trainer, log_evidence, exact_mse)
        left, right = st.columns(2)
        ui.vega_chart(left, curves_spec("bounds", present), curves["bounds"], "toy.bounds",
                      alt_text="Each method's lower bound under log p(D), by Adam step")
        ui.vega_chart(right, curves_spec("mse", present), curves["mse"], "toy.mse",
                      alt_text="Each method's test MSE, by Adam step")

    if (steps_per_tick, tick_seconds) != (STEPS_PER_TICK, TICK_SECONDS):
        st.caption(f"On this shared server live training advances {steps_per_tick} Adam steps every "
                   f"{tick_seconds:g} s.")
    ticks = math.ceil(MAX_STEPS / steps_per_tick)
    ui.frame_player("toy", ("toy.live", config), ticks + 1, 0, tick_seconds,
                    lambda frame: f"Adam step {frame * steps_per_tick} / {MAX_STEPS}", draw,
                    play_help=f"Train both methods live, {steps_per_tick} Adam steps a tick.",
                    reset_help="Back to the same initialisation (same seed).", follow=follow)
    history_frame = pd.DataFrame({
        "step": trainer.history[0].step,
        **{f"{m}_{k}": getattr(trainer.history[i], k) for i, m in enumerate(toy.METHODS) for k in ("elbo", "elbo_g", "test_mse")},
    })
    ui.csv_download(history_frame, f"toy_traces_alpha{config.alpha:g}_seed{config.seed}.csv", "Traces (CSV)", "toy.csv_traces")


def table_panel(values, config):
    st.markdown("MFVI vs SGM for several α, mean ± std over seeds, all runs trained as one batch "
                f"({toy.DEFAULT_STEPS} Adam steps; other settings from the sidebar), as in Tables 2–3.")
    cols = st.columns([3, 1])
    cols[0].text_input("α values (comma-separated)", key=ui.widget_key(PAGE, "alphas"))
    cols[1].number_input("Seeds", params.SEEDS.low, params.SEEDS.high, step=1, key=ui.widget_key(PAGE, "seeds"))
    parsed, notices = parse_query({"alphas": values["alphas"]}, [params.ALPHAS])
    for notice in notices:
        st.warning(notice)
    alphas = [float(a) for a in parsed["alphas"].split(",")]
    max_runs = ui.server_settings().live.max_table_runs
    too_many = len(alphas) * values["seeds"] > max_runs
    if too_many:
        st.warning(f"{len(alphas)} α values × {values['seeds']} seeds is more than this server's cap of "
                   f"{max_runs} runs per table: use fewer α values or seeds.")
    if st.button("Run the table", icon=":material/table_chart:", key="toy.run_table", type="primary",
                 disabled=too_many):
        bar = st.progress(0.0, text="Training…")
        rows = toy.paper_table(alphas, values["seeds"], toy.DEFAULT_STEPS, config,
                               progress=lambda done, total: bar.progress(done / total, text=f"Adam step {done} / {total}"))
        bar.empty()
        st.session_state["toy.table"] = (tuple(alphas), values["seeds"], config, rows)
    if "toy.table" in st.session_state:
        t_alphas, t_seeds, t_config, rows = st.session_state["toy.table"]
        frame = pd.DataFrame(rows)
        shown = pd.DataFrame({
            "α": frame["alpha"], "method": frame["method"].map({"mfvi": "MFVI", "sgm": "SGM"}),
            "test MSE": [f"{m:.4f} ± {s:.4f}" for m, s in zip(frame["test_mse_mean"], frame["test_mse_std"])],
            "ELBO (SGM: ELBO + I)": [f"{m:.3f} ± {s:.3f}" for m, s in zip(frame["elbo_mean"], frame["elbo_std"])],
            "log p(D)": frame["log_evidence_mean"].round(3),
        })
        st.caption(f"α = {', '.join(f'{a:g}' for a in t_alphas)}, {t_seeds} seeds, noise {t_config.noise:g}, "
                   f"N = {t_config.n_train}, mutual information: {t_config.mi}")
        st.dataframe(shown, hide_index=True)
        sgm = frame[frame["method"] == "sgm"]
        st.markdown("**SGM − MFVI on the same seeds** (same data, same initialisation): most of the spread "
                    "above is the data's and is shared by both methods, so compare the paired differences.")
        st.dataframe(pd.DataFrame({
            "α": sgm["alpha"],
            "bound gain": [f"{m:+.3f} ± {s:.3f}" for m, s in zip(sgm["elbo_gain_mean"], sgm["elbo_gain_std"])],
            "seeds with higher bound": [f"{k:.0f} / {n}" for k, n in zip(sgm["seeds_higher_elbo"], sgm["seeds"])],
            "test MSE change": [f"{m:+.4f} ± {s:.4f}" for m, s in zip(sgm["test_mse_change_mean"], sgm["test_mse_change_std"])],
            "seeds with lower MSE": [f"{k:.0f} / {n}" for k, n in zip(sgm["seeds_lower_test_mse"], sgm["seeds"])],
        }), hide_index=True)
        ui.csv_download(frame, "toy_table.csv", "Table (CSV)", "toy.csv_table")


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
  Predictions average $f_w$ over samples of $q_\theta$ (the same for $q_G$, since $f$ is invariant).
""")


def main():
    values = ui.start_page(PAGE, SPECS, "Tractable BNN",
                           "The smallest network with a permutation symmetry, trained live: mean-field VI against "
                           "its symmetrised version and the exact posterior (Gelberg et al. 2024, §5).", controls_panel)
    config = config_from(values)
    live, table = st.tabs(["Live training", "Paper tables"])
    with live:
        live_panel(config)
    with table:
        table_panel(values, config)
    formulas()


main()
