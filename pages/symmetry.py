"""Symmetry explorer: the posterior modulo its symmetries, and how close equivalent modes are
(Laurent et al. 2024; Gelberg et al. 2024, Thm 3.1)."""


import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from pages import ui
from symlab import precomputed
from symlab.labs.symmetry import LAB, params
from symlab.labs.symmetry import experiment as symmetry_lab
from symlab.labs.symmetry.params import CAPS, FIELDS, MAX_WIDTHS, PARTS, PRESETS, SEED_FROM
from symlab.labs.toy import experiment as toy
from symlab.lib.mnist_data import load_mnist_once

PAGE = "symmetry"
SPECS = LAB.page_params(ui.server_settings())
PRESET_DEFAULTS = {spec.name: spec.default for spec in SPECS if spec.name not in ("seed",)}
STAGE_STYLE = {"raw": ("#0072B2", "solid"), "scaled": ("#D55E00", "dash"), "sorted": ("#009E73", "dot")}
METHOD_STYLE = {"exact": ("#999999", "circle", "exact posterior"), "mfvi": ("#0072B2", "x", "MFVI"),
                "sgm": ("#D55E00", "triangle-up", "SGM"), "ensemble": ("#CC79A7", "square", "ensemble"),
                "noise_floor": ("#000000", "diamond", "exact vs exact")}
EPOCH_TICK_SECONDS = 0.7
SORT_KEY_NAMES = {"first_in": "weight from the first pixel", "max_in": "largest incoming weight",
                  "first_out": "weight to the first next unit"}
WIDGET_OPTIONS = {
    (symmetry_lab.ProximityConfig, "weights"): dict(horizontal=True),
    (symmetry_lab.MlpConfig, "schedule"): dict(horizontal=True),
    (symmetry_lab.MlpConfig, "sort_key"): dict(format_func=SORT_KEY_NAMES.get),
}


# ---------------------------------------------------------------------------------------------
# Computation, shared by every session (results are read-only)
# ---------------------------------------------------------------------------------------------

def perceptron_views(config: symmetry_lab.PerceptronConfig):
    return ui.computed(symmetry_lab.perceptron_task(config))


def trained_mlps(config: symmetry_lab.MlpConfig):
    return ui.computed(symmetry_lab.mlps_task(config))


def proximity(config: symmetry_lab.ProximityConfig):
    return ui.computed(symmetry_lab.proximity_task(config))


def quality(config: symmetry_lab.QualityConfig):
    return ui.computed(symmetry_lab.quality_task(config))


# ---------------------------------------------------------------------------------------------
# Controls
# ---------------------------------------------------------------------------------------------

def key(name: str) -> str:
    return ui.widget_key(PAGE, name)


def widget(config_type, name: str, **options):
    return ui.control_widget(PAGE, config_type, name, cap=CAPS.get(config_type, {}).get(name), **options)


def widgets(config_type) -> None:
    for name in FIELDS[config_type]:
        widget(config_type, name, **WIDGET_OPTIONS.get((config_type, name), {}))


def controls():
    part = st.session_state[key("part")]
    with st.sidebar:
        st.subheader("Presets")
        ui.preset_picker(PAGE, PRESETS, PRESET_DEFAULTS)
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
            st.caption("MLPs on MNIST" + (" (the same nets as in *Permutations in training*)" if part == "mass" else ""))
            widgets(symmetry_lab.MlpConfig)
        if part == "network":
            widget(symmetry_lab.MlpConfig, "sort_key", **WIDGET_OPTIONS[(symmetry_lab.MlpConfig, "sort_key")])
            return  # a file: no seed
        widget(SEED_FROM, "seed")
        ui.new_seed_button(PAGE, help="Another initialisation and data draw; Reset replays the current one.")


# ---------------------------------------------------------------------------------------------
# Charts
# ---------------------------------------------------------------------------------------------

# The epoch player's densities (Vega-Lite, updated in place: pages/ui.py): fixed while it plays (each stage's
# window is the last epoch's), the epoch's density in the data. Square: equal scales on v₁ and v₂.
DIAGONAL = (ui.Series("v₁ = v₂", "#FFFFFF", "dash"),)
DENSITY_PX = 250


@st.cache_resource(max_entries=16, show_spinner=False)  # outlives the run, unlike a functools cache of a page
def density_spec(title: str, present: bool) -> dict:
    """The two output weights' density, with the mirror line; the axes' range comes with the data."""
    x_title, y_title = "v₁ (output weight of hidden unit 1)", "v₂ (of hidden unit 2)"
    heat = ui.altair_image(x_title, y_title, ui.DOMAIN_OF_DATA, ui.DOMAIN_OF_DATA, smooth=False)
    diagonal = ui.altair_lines(DIAGONAL, ui.quantity("x", x_title, ui.DOMAIN_OF_DATA),
                               ui.quantity("y", y_title, ui.DOMAIN_OF_DATA, channel=alt.Y), legend=False)
    return ui.vega_spec(alt.layer(heat, diagonal), title=title, height=DENSITY_PX, width=DENSITY_PX)


def density_chart(column, weights: np.ndarray, extent, title: str, key: str) -> None:
    centres, density = symmetry_lab.density_grid(weights, extent)
    spec = ui.with_domains(density_spec(title, bool(st.session_state.get("ui.present"))), x=extent, y=extent)
    ui.vega_chart(column, spec, {"image": ui.image_frame(centres, centres, density, ui.VIRIDIS),
                                 "lines": ui.lines_frame(DIAGONAL[0].label, extent, extent)},
                  key, width="content", alt_text=f"Density of the two output weights, {title.lower()}")


MARGINAL_SERIES = (ui.Series("v₁", "#0072B2"), ui.Series("v₂", "#D55E00", "dash"))


@st.cache_resource(max_entries=16, show_spinner=False)  # outlives the run, unlike a functools cache of a page
def marginal_spec(present: bool) -> dict:
    """Histogram densities of the two output weights; the x range comes with the data."""
    chart = ui.altair_lines(MARGINAL_SERIES, ui.quantity("x", "output weight", ui.DOMAIN_OF_DATA),
                            ui.quantity("y", "density", channel=alt.Y, scale=dict(zero=True)))
    return ui.vega_spec(chart, title="The two units' marginals, raw")


def marginal_chart(column, weights: np.ndarray, extent) -> None:
    edges = np.linspace(extent[0], extent[1], 81)
    centres = 0.5 * (edges[1:] + edges[:-1])
    lines = pd.concat([ui.lines_frame(series.label, centres, np.histogram(weights[:, index], edges, density=True)[0])
                       for index, series in enumerate(MARGINAL_SERIES)])
    ui.vega_chart(column, ui.with_domains(marginal_spec(bool(st.session_state.get("ui.present"))), x=extent),
                  {"lines": lines}, "symmetry.marginals", alt_text="Histogram densities of v₁ and v₂, raw")


def fig1_panel(config: symmetry_lab.PerceptronConfig):
    stages, report = perceptron_views(config)
    final = stages[-1]
    extents = {name: symmetry_lab.density_extent(weights) for name, weights in final.items()}
    cols = st.columns(4)
    cols[0].metric("nets kept", f"{report.kept} / {report.nets}",
                   help=f"Final training loss ≤ {report.loss_cutoff:.3g}; the rest did not train (the paper drops "
                        "< 1 %).")
    shipped = precomputed.is_shipped(symmetry_lab.perceptron_task(config).key)
    cols[1].metric("trained per second", f"{report.nets_per_second:,.0f}",
                   help="All nets in one batched tensor program on the CPU" + (
                       " (on the machine that computed this default, which ships with the app)." if shipped else "."))
    raw = report.stages["raw"]
    cols[2].metric("share with v₁ > v₂, raw", f"{raw['share_v1_above_v2']:.3f}",
                   help="½ when the density is symmetric under swapping the units.")
    changed = max(stage["max_output_change"] for stage in report.stages.values())
    cols[3].metric("largest output change", f"{changed:.1e}", help="Over all nets and 256 random inputs: the "
                   "removals keep every function, up to rounding.")
    peaks = raw["peaks"][:2]
    if len(peaks) == 2:
        st.markdown(f"Raw, the two highest density peaks sit at ({peaks[0][0]:.2f}, {peaks[0][1]:.2f}) and "
                    f"({peaks[1][0]:.2f}, {peaks[1][1]:.2f}): mirror images across v₁ = v₂. After both removals "
                    f"{len(report.stages['sorted']['peaks'])} peak(s) remain, all with v₁ ≤ v₂.")
    epoch_player(stages, extents, config)
    left, right = st.columns([1, 1])
    marginal_chart(left, final["raw"], extents["raw"])
    with right:
        st.markdown(r"""
**Why the mode doubles.** Swapping the two hidden units (rows of $W_1$, $b_1$ and the entries of
$v = W_2$) gives the same function, the same likelihood and, under an isotropic prior, the same
posterior density. SGD is equivariant too: a swapped initialisation trains into the swapped net. So every
mode $(a, b)$ has a twin $(b, a)$ of exactly the same weight, and the density is symmetric about $v_1 = v_2$.

**Why the marginals look alike.** The posterior is a uniform mixture over the permuted copies, so each
unit is equally likely to be any of them: $v_1$ and $v_2$ have the same marginal (left), and so do all units of a layer.

**Scaling.** ReLU is positively homogeneous: multiplying a unit's incoming weights and bias by λ > 0 and
its outgoing weight by 1/λ keeps the function. Giving each unit unit-norm incoming weights removes that freedom
and regroups the points; sorting the units by $v$ then removes the swap, keeping $v_1 \le v_2$.
""")
    frame = pd.DataFrame({f"{stage}_v{i + 1}": final[stage][:, i] for stage in symmetry_lab.REMOVAL_STAGES
                          for i in range(2)})
    ui.csv_download(frame, f"perceptrons_seed{config.seed}.csv", "Output weights (CSV)", "symmetry.csv_fig1")


def epoch_player(stages, extents, config):
    def draw(epoch, chart_config):
        for column, name in zip(st.columns(3), symmetry_lab.REMOVAL_STAGES):
            weights = stages[epoch][name]
            density_chart(column, weights, extents[name], symmetry_lab.STAGE_TITLES[name].capitalize(),
                          f"symmetry.density_{name}")
        st.caption("Brighter: more nets. Dashed: v₁ = v₂, the mirror line of swapping the two hidden units.")

    frames = len(stages)
    ui.frame_player("symmetry", ("symmetry.epochs", config), frames, frames - 1, EPOCH_TICK_SECONDS,
                    lambda epoch: f"Epoch {epoch} / {frames - 1}", draw, play_help="Replay training epoch by epoch.",
                    reset_help="Back to the initialisation (same seed).")


def mass_panel(cfg):
    _, report = perceptron_views(cfg["perceptron"])
    result = report.mass.result
    st.markdown(r"""The **mass** is the squared L2 norm of the weights (biases excluded). Rescaling hidden unit $i$ of
layer $l$ by $e^{\lambda_i^{l}}$ keeps the function; the **min-mass problem** minimises
$\sum_l \sum_{ij} (W^{l}_{ij})^2\, e^{2(\lambda^{l}_i - \lambda^{l-1}_j)}$ over the log-scales λ
(inputs and outputs fixed at 0). It is strictly convex in λ: Newton's method reaches the unique optimum in a
few steps, checked by the gradient. With one hidden layer it has a closed form:
each unit contributes $2\,\lVert w^{\text{in}}_i\rVert\,\lVert w^{\text{out}}_i\rVert$.""")
    mlps = trained_mlps(cfg["mlp"])
    mlp_report = ui.shared_result(("mlp_mass", cfg["mlp"]), lambda: symmetry_lab.mass_report(mlps.layers))
    rows = []
    for name, rep in (("2-2-1 perceptrons", report.mass), (f"MNIST MLPs (784-{cfg['mlp'].width}×"
                                                              f"{cfg['mlp'].depth}-10)", mlp_report)):
        rows.append({"nets": name, "count": rep.nets, "median mass before": rep.mass_before_median,
                     "median mass after": rep.mass_after_median, "median ratio": rep.ratio_median,
                     "smallest ratio": rep.ratio_min, "converged": f"{rep.converged} / {rep.nets}",
                     "Newton steps": rep.iterations, "largest output change": f"{rep.max_output_change:.1e}"})
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    left, right = st.columns(2)
    before, after = result.mass_before, result.mass_after
    scatter = ui.figure(
        [ui.points(before, after, "perceptrons", "#0072B2", "circle", 5),
         ui.line([before.min(), before.max()], [before.min(), before.max()], "no change (after = before)",
                 "#999999", "dash", width=2)],
        "mass before", "mass after min-mass", "2-2-1 perceptrons: every net gets lighter")
    scatter["layout"]["xaxis"]["type"] = "log"
    scatter["layout"]["yaxis"]["type"] = "log"
    left.plotly_chart(scatter, key="symmetry.mass_scatter")
    right.plotly_chart(layer_mass_chart(mlps.layers, mlp_report.result.layers), key="symmetry.mass_layers")
    st.caption("Min-mass moves mass between layers: the layers with fewer weights tend to get larger ones "
               "(Laurent et al. §3.6). Trained nets are not at their minimum mass, even though rescaling is free.")
    frame = pd.DataFrame({"mass_before": before, "mass_after": after})
    ui.csv_download(frame, "perceptron_mass.csv", "Perceptron masses (CSV)", "symmetry.csv_mass")


def layer_mass_chart(before_layers, after_layers) -> dict:
    names = [f"layer {i + 1}" for i in range(len(before_layers))]
    bars = []
    for label, layers, colour, pattern in (("before", before_layers, "#0072B2", ""),
                                           ("after min-mass", after_layers, "#D55E00", "/")):
        masses = [float(np.mean(np.sum(W**2, axis=(-2, -1)))) for W, _ in layers]
        bars.append(dict(type="bar", x=names, y=masses, name=label, marker=dict(color=colour, pattern=dict(shape=pattern))))
    figure = ui.figure(bars, "layer", "mass (mean over the nets)", "MNIST MLPs: mass per layer")
    figure["layout"]["barmode"] = "group"
    return figure


def proximity_panel(config: symmetry_lab.ProximityConfig):
    rows = proximity(config)
    frame = pd.DataFrame(rows)
    widest = rows[-1]
    cols = st.columns(3)
    cols[0].metric(f"‖gw − w‖ / ‖w‖ at width {widest['width']}", f"{widest['relative_distance']:.2e}")
    cols[1].metric("Thm 3.1 bound there", f"{widest['bound']:.3f}")
    cols[2].metric("widths below the bound", f"{int(frame['below_bound'].sum())} / {len(rows)}")
    traces = [ui.line(frame["width"], frame["relative_distance"], "nearest copy: ‖gw − w‖ / ‖w‖", "#0072B2",
                      width=2, markers=True),
              ui.line(frame["width"], frame["bound"], "Thm 3.1 bound 2D / log n!", "#D55E00", "dash", width=2,
                      markers=True, symbol="square")]
    figure = ui.figure(traces, "hidden width n", "distance relative to ‖w‖", "Equivalent modes crowd together",
                       marks=[ui.hline(2.0, "#999999", "trivial bound 2")], log_y=True, height=420)
    figure["layout"]["xaxis"]["type"] = "log"
    figure["layout"]["yaxis"]["exponentformat"] = "power"
    st.plotly_chart(figure, key="symmetry.proximity")
    st.markdown(rf"""For a one-hidden-layer net of width $n$ with $D$ parameters, **Thm 3.1** (Gelberg et al.) guarantees a
non-trivial permutation $g$ with $\lVert g w - w\rVert \le \frac{{2D}}{{\log n!}}\lVert w\rVert$: the $n!$ copies of $w$ must
fit in a ball of radius about $\lVert w\rVert$, so some two are close. With $d_\text{{in}}$, $d_\text{{out}}$ fixed,
$D/\log n! = O(1/\log n) \to 0$. Here the exact nearest copy: $\lVert gw - w\rVert^2$ sums over the cycles of $g$ and every
step of a cycle joins two different units, so the best $g$ swaps the two closest units
(checked against all $n!$ permutations in the tests). Measured distances fall much faster than the bound, which
only drops below the trivial 2 once $\log n! > D$ (here {config.d_in} input(s), {config.d_out} output(s)).
Close copies are what a single Gaussian straddles, as in the *Mode interpolation* lab.""")
    ui.csv_download(frame.drop(columns=["pair"]), f"proximity_{config.weights}.csv", "Distances (CSV)",
                    "symmetry.csv_proximity")


def samples_chart(samples: dict, removed: bool) -> dict:
    traces = []
    for method in ("exact", *symmetry_lab.QUALITY_METHODS):
        points = samples[method]
        if removed:
            points = symmetry_lab.remove_toy_symmetry(points)
        colour, symbol, label = METHOD_STYLE[method]
        shown = points[:400]
        exact, ensemble = method == "exact", method == "ensemble"
        traces.append(dict(type="scatter", mode="markers", x=shown[:, 0], y=shown[:, 1], name=label,
                           marker=dict(color=colour, symbol=symbol, size=5 if exact else 11 if ensemble else 7,
                                       opacity=0.35 if exact else 1.0 if ensemble else 0.7,
                                       line=dict(color="#000000", width=1) if ensemble else None)))
    title = "Units sorted (w₁ ≤ w₂)" if removed else "Raw samples"
    return ui.figure(traces, "w₁", "w₂", title, equal_axes=True, height=420)


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
    bars = []
    for column, label, colour, pattern in (("mmd2_raw", "raw", "#0072B2", ""),
                                           ("mmd2_removed", "units sorted", "#D55E00", "/")):
        bars.append(dict(type="bar", x=[METHOD_STYLE[m][2] for m in frame["method"]], y=frame[column], name=label,
                         marker=dict(color=colour, pattern=dict(shape=pattern))))
    figure = ui.figure(bars, "method", "median MMD² to the exact posterior", "Lower is closer to the posterior")
    figure["layout"]["barmode"] = "group"
    left, right = st.columns(2)
    left.plotly_chart(figure, key="symmetry.mmd")
    with right:
        shown = frame.assign(method=[METHOD_STYLE[m][2] for m in frame["method"]])
        st.dataframe(shown.rename(columns={"mmd2_raw": "MMD² raw", "mmd2_removed": "MMD² units sorted"}),
                     hide_index=True)
        st.caption("MFVI: 200 samples of the fitted mean-field Gaussian. SGM: samples of q_θ, each swapped with "
                   "probability ½. Deep ensemble: 200 MAP fits from random starts (points, no spread). "
                   "“exact vs exact”: a second exact sample set, the value a perfect method would get.")
    samples = report.samples
    c1, c2 = st.columns(2)
    c1.plotly_chart(samples_chart(samples, False), key="symmetry.samples_raw")
    c2.plotly_chart(samples_chart(samples, True), key="symmetry.samples_sorted")
    long = pd.concat([pd.DataFrame({"method": m, "w1": s[:, 0], "w2": s[:, 1]}) for m, s in samples.items()])
    d1, d2, _ = st.columns([1, 1, 2])
    with d1:
        ui.csv_download(frame, "mmd.csv", "MMD (CSV)", "symmetry.csv_mmd")
    with d2:
        ui.csv_download(long, "samples.csv", "Samples (CSV)", "symmetry.csv_samples")


def training_panel(config: symmetry_lab.MlpConfig):
    run = trained_mlps(config)
    report = symmetry_lab.training_report(run)
    cols = st.columns(4)
    cols[0].metric("mean Kendall τ", f"{report.tau_mean:.3f}", help="1: the units kept their order.")
    cols[1].metric("steps with a swap, first half", f"{report.share_steps_with_permutation_first_half:.0%}")
    cols[2].metric("… second half", f"{report.share_steps_with_permutation_second_half:.0%}")
    accuracy = report.test_accuracy_mean
    cols[3].metric("test accuracy", "—" if accuracy is None else f"{accuracy:.3f}",
                   help="Mean over the nets that did not diverge, 2000 test images.")
    if report.diverged:
        st.warning(f"{report.diverged} of {config.instances} nets diverged (NaN loss) and stopped: lower the "
                   "learning rate.")
    steps = np.arange(1, config.steps + 1)
    tau = np.asarray(report.tau_per_step)
    window = max(1, config.steps // 50)
    smooth = pd.Series(tau).rolling(window, min_periods=1).mean()
    loss = pd.Series(run.loss.mean(1)).rolling(window, min_periods=1).mean()
    left, right = st.columns(2)
    left.plotly_chart(ui.figure(
        [ui.line(steps, tau, "τ per step", "#999999", width=1),
         ui.line(steps, smooth, f"mean of {window} steps", "#0072B2", width=3, dash="dash")],
        "SGD step", "Kendall τ (successive sorts)", "Do the units change places?"), key="symmetry.tau")
    right.plotly_chart(ui.figure([ui.line(steps, loss, f"training loss (mean of {window} steps)", "#D55E00")],
                                 "SGD step", "cross-entropy (nats)", "Training loss"), key="symmetry.loss")
    st.markdown(rf"""Laurent et al.'s protocol (§5.2): after every SGD step, sort each hidden layer's units
({'by their largest incoming weight' if config.sort_key == 'max_in' else config.sort_key.replace('_', ' ')}) and compare
the sorting permutation with the previous step's by **Kendall's τ** (1: same order; −1: reversed). Units change
places while the steps are large and noisy; with a decaying learning rate the order freezes at the end, so a trained
net sits in one permutation copy. Sorting by the weight from the first pixel never changes anything: that pixel
is black in every MNIST image, so its weights never move.""")
    frame = pd.DataFrame({"step": steps, "tau_mean": tau, "loss_mean": run.loss.mean(1)})
    ui.csv_download(frame, f"permutations_seed{config.seed}.csv", "τ and loss per step (CSV)", "symmetry.csv_tau")


def network_report(network, sort_key: str) -> symmetry_lab.NetworkReport:
    """The analyses of this session's uploaded network, kept while the file and the sort key stay."""
    def measure():
        mnist = load_mnist_once(None) if network.sizes[0] == 784 else None
        with st.spinner("Measuring the network: nearest copies, removals, min-mass"):
            return symmetry_lab.network_report(network, mnist, sort_key)

    return ui.kept_in_session(key("network_report"), (ui.upload_id(key("upload")), sort_key), measure)


def weights_heatmap(column, W: np.ndarray, title: str, chart_key: str) -> None:
    limit = float(np.quantile(np.abs(W), 0.99)) or 1.0
    trace = dict(type="heatmap", z=W, zmin=-limit, zmax=limit, colorscale=[[i / 10, c] for i, c in enumerate(ui.BLUE_RED)],
                 colorbar=dict(title=dict(text="weight")), hovertemplate="unit %{y}, input %{x}: %{z:.3g}<extra></extra>")
    figure = ui.figure([trace], "input", "hidden unit (row)", title, height=420)
    figure["layout"]["yaxis"]["autorange"] = "reversed"
    column.plotly_chart(figure, key=chart_key)


def finite_or_dash(value: float, spec: str) -> str:
    return format(value, spec) if np.isfinite(value) else "—"


def network_panel(sort_key: str):
    st.info(ui.UPLOAD_NOTICE, icon=":material/link_off:")
    network = ui.uploaded_network("Your network", key("upload"))
    if network is None:
        st.markdown("Upload a trained MLP of `nn.Linear` layers with ReLU between them "
                    "(`torch.save(model.state_dict(), 'net.pt')`, or safetensors; an MNIST run's posterior from the "
                    "*MNIST* page reads too). The page then measures how close its equivalent copies are, takes its "
                    "permutation and scaling symmetries out, and checks that each removal keeps its function.")
        return
    st.table(ui.layer_table(network))
    rep = network_report(network, sort_key)
    first = rep.nearest_modes[0]
    cols = st.columns(4)
    cols[0].metric("nearest copy ‖gw − w‖ / ‖w‖", finite_or_dash(first["relative_distance"], ".3g"),
                   help="Hidden layer 1: the transposition of its two closest units (— with one unit, or all "
                        "weights 0).")
    cols[1].metric("Thm 3.1 bound 2D / log n!", finite_or_dash(first["bound"], ".3g"))
    cols[2].metric("min-mass: mass after / before", finite_or_dash(rep.mass_ratio, ".3f"))
    cols[3].metric("MNIST test accuracy", "—" if rep.mnist_accuracy is None else f"{rep.mnist_accuracy:.4f}",
                   help=None if rep.mnist_scaling is None else f"Inputs scaled {rep.mnist_scaling}: the scaling "
                                                                 "this net classifies best.")
    if rep.posterior:
        st.caption("A mean-field posterior: the analyses are of its means.")
    modes = pd.DataFrame(rep.nearest_modes)
    st.dataframe(modes.assign(pair=modes["pair"].map(tuple)), hide_index=True)
    st.caption(f"Per hidden layer, the nearest of its n! permuted copies swaps its two closest units (their rows: "
               f"incoming weights, bias, outgoing weights). Thm 3.1's bound holds for any group acting by isometries "
               f"on the D = {rep.n_parameters:,} parameters, so for each layer's permutations too; it is informative "
               f"only once log n! > 2D.")
    layers = {"raw": rep.raw_layers[0][0], "sorted": rep.sorted_layers[0][0]}
    left, right = st.columns(2)
    weights_heatmap(left, layers["raw"], "Hidden layer 1's incoming weights, as uploaded", "symmetry.net_raw")
    weights_heatmap(right, layers["sorted"], f"… with its units sorted by {SORT_KEY_NAMES[sort_key]}",
                    "symmetry.net_sorted")
    checks = pd.DataFrame([("units sorted (permutation removal)", rep.permutation_removal_change),
                           ("units normalised (scaling removal)", rep.scaling_removal_change),
                           ("min-mass rescaling", rep.min_mass_change)], columns=["removal", "largest output change"])
    st.table(checks.assign(**{"largest output change": checks["largest output change"].map("{:.2e}".format)})
             .set_index("removal"))
    st.caption(f"Each removal is checked on {rep.check_inputs}: a change at rounding level means it kept the "
               f"function. Min-mass: mass {rep.mass_before:.5g} → {rep.mass_after:.5g} "
               f"({'converged' if rep.min_mass_converged else 'not converged'}).")
    d1, d2, _ = st.columns([1, 1, 2])
    with d1:
        ui.csv_download(modes.drop(columns=["pair"]), "nearest_modes.csv", "Nearest copies (CSV)", "symmetry.csv_net")
    with d2:
        sorted_frame = pd.DataFrame(layers["sorted"]).rename_axis("unit").reset_index()
        ui.csv_download(sorted_frame, "sorted_first_layer.csv", "Sorted weights (CSV)", "symmetry.csv_net_sorted")


def main():
    values = ui.start_page(PAGE, SPECS, "Symmetry explorer",
                           "Take the permutation and scaling symmetries out of trained networks, and measure how close "
                           "a network's equivalent copies are (Laurent et al. 2024; Gelberg et al. 2024, Thm 3.1).",
                           controls)
    cfg = params.page_configs(values)
    part = values["part"]
    st.header(PARTS[part])
    panels = {"fig1": lambda: fig1_panel(cfg["perceptron"]), "mass": lambda: mass_panel(cfg),
              "proximity": lambda: proximity_panel(cfg["proximity"]), "quality": lambda: quality_panel(cfg["quality"]),
              "training": lambda: training_panel(cfg["mlp"]), "network": lambda: network_panel(cfg["mlp"].sort_key)}
    try:
        panels[part]()
    except RuntimeError as error:  # diverged training, unreadable MNIST: say so, keep the controls
        st.error(str(error), icon=":material/error:")


main()
