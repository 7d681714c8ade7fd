"""AppTest checks of the Symmetry explorer page (its epoch player, played in the browser: test_browser.py).

The page's computations are kept in ``computing.shared_result``, a ``st.cache_resource`` that lives as long as the
process: every AppTest in this module after the first that needs a result reuses it (the default Fig. 1
run takes seconds, a repeat milliseconds). The tests do not depend on that for their outcome, only for
their speed; parts whose defaults are slow are opened with smaller settings.
"""

import json

import hostile_files
import numpy as np
import pytest
from pagetest import Upload, frame_rows, metrics, open_page, player, uploading
from vegatest import channel, image_values, layers, player_charts, vega_chart, vega_charts

from symlab.labs.symmetry import LAB, params
from symlab.labs.symmetry import experiment as symmetry_lab
from symlab.specs import controls
from views.common.charts import VIRIDIS

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tests/conftest.py


def symmetry_page(**query):
    return open_page("symmetry", **query)


def charts(at) -> int:
    """The page's charts, all Vega-Lite (no Plotly left): Streamlit's and its player's."""
    assert not at.get("plotly_chart")
    return len(at.get("vega_lite_chart")) + len(player_charts(at))


def data_names(spec: dict) -> set:
    """The datasets a spec's views read (a view without data reads its parent's)."""
    names = {spec["data"]["name"]} if "data" in spec else set()
    for part in ("layer", "hconcat", "vconcat", "concat"):
        for child in spec.get(part, []):
            names |= data_names(child)
    return names


def scale_types(chart) -> tuple:
    """The x and y scales' types set in a chart's views (a layer that sets none, as a rule's, shares the others')."""
    return tuple(
        {c["scale"].get("type", "linear") for c in channel(chart["spec"], name) if "scale" in c} for name in ("x", "y")
    )


# Each part's link (the slow defaults of mass/training made small: 100 perceptrons, 200 SGD steps, and
# both parts share the MNIST nets), its number of charts (all Vega-Lite) and its metrics.
PARTS = {
    "fig1": ({}, 4, {"nets kept", "trained per second", "share with v₁ > v₂, raw", "largest output change"}),
    "mass": ({"part": "mass", "nets": "100", "steps": "200"}, 2, set()),
    "proximity": (
        {"part": "proximity"},
        1,
        {"‖gw − w‖ / ‖w‖ at width 4096", "Thm 3.1 bound there", "widths with a bound < 2"},
    ),
    "quality": ({"part": "quality"}, 3, set()),
    "training": (
        {"part": "training", "steps": "200"},
        2,
        {"mean Kendall τ", "… in the last tenth", "steps with a swap, first half", "… last tenth", "test accuracy"},
    ),
}


@pytest.mark.parametrize("part", PARTS)
def test_every_part_renders_its_charts_and_metrics(part):
    query, chart_count, metric_labels = PARTS[part]
    at = symmetry_page(**query)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error and not at.warning
    assert at.radio(key="symmetry.part").value == part and at.query_params["part"] == part
    assert (
        at.header[0].value
        == {
            "fig1": "The doubled mode (Fig. 1)",
            "mass": "Min-mass",
            "proximity": "Mode proximity",
            "quality": "Posterior quality (MMD)",
            "training": "Permutations in training",
        }[part]
    )
    assert charts(at) == chart_count
    for chart in vega_charts(at):  # each view draws data the chart sends (not Altair's placeholder "empty")
        assert data_names(chart["spec"]) and data_names(chart["spec"]) <= set(chart["datasets"]), chart["title"]
        check_fits_its_column(chart)
    assert set(metrics(at)) == metric_labels
    if part == "mass":
        table = at.dataframe[0].value
        assert len(table) == 2 and (table["median ratio"] <= 1 + 1e-9).all()
        assert list(table["converged"]) == [f"{n} / {n}" for n in table["count"]]
        check_mass_charts(at, int(table["count"][0]))
    if part == "proximity":
        check_proximity_chart(at)
    if part == "quality":
        assert list(at.dataframe[0].value["method"]) == ["MFVI", "SGM", "ensemble", "exact vs exact"]
        check_quality_charts(at)
    if part == "training":
        assert -1 <= float(metrics(at)["mean Kendall τ"]) <= 1
        assert float(metrics(at)["test accuracy"]) > 0.5
        check_training_charts(at, steps=200)


def check_fits_its_column(chart):
    """No fixed size: the chart stretches to its column (Streamlit's width="stretch"), whatever the screen."""
    spec = chart["spec"]
    assert "width" not in spec and spec.get("autosize", {}).get("type") == "fit", chart["title"]
    assert all("width" not in view for view in layers(spec)), chart["title"]


def check_square(spec: dict):
    """Both scales map onto the largest square in the plot area, at its bottom left, whatever its width."""
    side = "min(width, height)"
    ranges = {name: [c["scale"]["range"] for c in channel(spec, name) if "scale" in c] for name in ("x", "y")}
    assert ranges["x"] and all(r == [0, {"expr": side}] for r in ranges["x"])
    assert ranges["y"] and all(r == [{"expr": "height"}, {"expr": f"height - {side}"}] for r in ranges["y"])


def check_bars_read_across(chart):
    """Grouped bars across: the categories level down the left, no axis title beside them to collide with
    (a title under slanted or crowded labels was drawn over them), the legend in one column."""
    spec = chart["spec"]
    [category] = {json.dumps(c, sort_keys=True) for c in channel(spec, "y")}
    category = json.loads(category)
    assert category["type"] == "nominal" and category["title"] is None
    assert category["axis"].get("labelAngle", 0) == 0
    assert all(c["type"] == "quantitative" for c in channel(spec, "x"))
    assert channel(spec, "yOffset") and not channel(spec, "xOffset")
    assert spec["config"]["legend"]["columns"] == 1


def check_mass_charts(at, perceptrons: int):
    scatter = vega_chart(at, "Every perceptron gets lighter")
    assert scale_types(scatter) == ({"log"}, {"log"})
    lines = scatter["datasets"]["lines"]
    nets = lines[lines["series"] == "perceptrons"]
    assert len(nets) == perceptrons and (nets["y"] <= nets["x"] * (1 + 1e-9)).all()  # every net gets lighter
    diagonal = lines[lines["series"] == "after = before"]
    assert list(diagonal["x"]) == list(diagonal["y"]) == [nets["x"].min(), nets["x"].max()]
    bar_chart = vega_chart(at, "MNIST MLPs: mass per layer")
    check_bars_read_across(bar_chart)
    bars = bar_chart["datasets"]["bars"]
    # 784-16×1-10 (the default width and depth): two weight layers, before and after min-mass.
    assert list(bars["category"]) == ["layer 1", "layer 2"] * 2
    assert list(bars["series"]) == ["before"] * 2 + ["after min-mass"] * 2
    before, after = bars["value"][:2].to_numpy(), bars["value"][2:].to_numpy()
    assert (before > 0).all() and (after > 0).all() and after.sum() <= before.sum() * (1 + 1e-9)
    assert not (abs(after - before) < 1e-9 * before).all()  # min-mass moved mass between the layers


def check_proximity_chart(at):
    chart = vega_chart(at, "Equivalent modes crowd together")
    assert scale_types(chart) == ({"log"}, {"log"})
    lines = chart["datasets"]["lines"]
    distance = lines[lines["series"] == "nearest copy: ‖gw − w‖ / ‖w‖"]
    bound = lines[lines["series"] == "Thm 3.1 bound 2D / log n!"]
    assert list(distance["x"]) == list(bound["x"]) == [2**k for k in range(1, 13)]
    assert (distance["y"].to_numpy() < bound["y"].to_numpy()).all()
    rules = chart["datasets"]["rules"]
    assert list(rules["value"]) == [2.0] and list(rules["series"]) == ["trivial bound 2"]


def check_quality_charts(at):
    table = at.dataframe[0].value
    bar_chart = vega_chart(at, "MMD² to the posterior")
    check_bars_read_across(bar_chart)
    bars = bar_chart["datasets"]["bars"]
    assert list(bars["category"]) == list(table["method"]) * 2
    assert list(bars["series"]) == ["raw"] * 4 + ["units sorted"] * 4
    assert list(bars["value"]) == list(table["MMD² raw"]) + list(table["MMD² units sorted"])
    raw, ordered = vega_chart(at, "Raw samples"), vega_chart(at, "Units sorted (w₁ ≤ w₂)")
    for chart in (raw, ordered):
        spec = chart["spec"]
        # Equal axes: one range on w₁ and w₂, drawn on a square.
        [x_domain] = [c["scale"]["domain"] for c in channel(spec, "x")]
        [y_domain] = [c["scale"]["domain"] for c in channel(spec, "y")]
        assert x_domain == y_domain
        check_square(spec)
        points = chart["datasets"]["lines"]
        assert sorted(points["series"].unique()) == ["MFVI", "SGM", "ensemble", "exact posterior"]
        assert points["x"].between(*x_domain).all() and points["y"].between(*y_domain).all()
    points = ordered["datasets"]["lines"]
    assert (points["x"] <= points["y"]).all()
    shown = raw["datasets"]["lines"]
    assert (shown["x"] > shown["y"]).any()  # raw: both orders
    for method in ("exact posterior", "MFVI"):  # the same samples, each with its units sorted
        a, b = shown[shown["series"] == method], points[points["series"] == method]
        assert list(b["x"]) == list(a[["x", "y"]].min(axis=1)) and list(b["y"]) == list(a[["x", "y"]].max(axis=1))


def check_training_charts(at, steps: int):
    chart = vega_chart(at, "Do the units change places?")
    tau = chart["datasets"]["lines"]
    # The axis from the 2nd percentile of the steps' τ to 1 (with a margin): the gap near 1 between the schedules
    # shows, where the first steps' far lower τ would squash it into a line.
    low = float(np.quantile(tau[tau["series"] == "τ per step"]["y"], 0.02))
    [domain] = [c["scale"]["domain"] for c in channel(chart["spec"], "y") if "domain" in c.get("scale", {})]
    assert domain == pytest.approx([low - 0.05 * (1 - low), 1 + 0.05 * (1 - low)]) and low > 0.5
    assert sorted(tau["series"].unique()) == ["mean of 4 steps", "τ per step"]  # window: steps // 50
    per_step = tau[tau["series"] == "τ per step"]
    assert list(per_step["x"]) == list(range(1, steps + 1)) and per_step["y"].between(-1, 1).all()
    assert per_step["y"].mean() == pytest.approx(float(metrics(at)["mean Kendall τ"]), abs=5e-4)
    loss = vega_chart(at, "Training loss")["datasets"]["lines"]
    assert list(loss["series"].unique()) == ["training loss (mean of 4 steps)"] and len(loss) == steps
    assert loss["y"].iloc[-1] < loss["y"].iloc[0]  # it trains


def test_the_epoch_player_draws_three_densities_and_changes_only_their_data():
    """Training's epochs go to the browser's player once, from the last epoch: each frame a picture per removal stage
    (the mirror line and the specs sent once)."""
    at = symmetry_page(nets="100")
    sent = player(at, "symmetry.player")
    titles = ["Raw", "After scaling removal", "After scaling and permutation removal"]
    assert [chart["spec"]["title"]["text"] for chart in sent["charts"]] == titles
    assert sent["frames"] == 11 and sent["frame"] == 10 and sent["columns"] == 3
    marginals = vega_chart(at, "The two units' marginals, raw")["datasets"]["lines"]
    assert sorted(marginals["series"].unique()) == ["v₁", "v₂"] and len(marginals) == 2 * 80
    stages, _ = symmetry_lab.perceptron_views(symmetry_lab.PerceptronConfig(nets=100).validate())
    for chart, stage in zip(sent["charts"], symmetry_lab.REMOVAL_STAGES):
        check_square(chart["spec"])
        assert set(chart["static"]["lines"]["series"]) == {"v₁ = v₂"}  # the mirror line
        last, first = (frame_rows(sent, chart["name"], "image", frame)["url"][0] for frame in (10, 0))
        density = image_values(last, VIRIDIS)  # a 60 × 60 grid, from empty cells (0) to the peak (1)
        assert density.shape == (60, 60) and density.min() == 0 and density.max() == 1
        extent = symmetry_lab.density_extent(stages[-1][stage])
        expected = symmetry_lab.density_grid(stages[-1][stage], extent)[1]
        assert np.abs(density - expected / expected.max()).max() < 0.02  # the colour table's levels
        assert image_values(first, VIRIDIS).tolist() != density.tolist()  # the initialisation differs


def test_fig1_default_shows_the_mirror_image_modes():
    at = symmetry_page()
    values = metrics(at)
    assert 0.4 <= float(values["share with v₁ > v₂, raw"]) <= 0.6
    assert float(values["largest output change"]) < 1e-6
    kept, nets = values["nets kept"].split(" / ")
    assert nets == "2000" and int(kept) >= 1980  # the paper drops < 1 %
    sentences = [m.value for m in at.markdown if "mirror images" in m.value]
    assert len(sentences) == 1 and sentences[0].startswith("Raw, the two highest density peaks sit at")
    assert at.query_params["part"] == "fig1" and at.query_params["nets"] == "2000"
    assert at.query_params["seed"] == "0"


def test_proximity_default_bound_says_something_from_width_64():
    at = symmetry_page(part="proximity")
    values = metrics(at)
    assert values["widths with a bound < 2"] == "7 / 12"
    assert float(values["‖gw − w‖ / ‖w‖ at width 4096"]) < float(values["Thm 3.1 bound there"])


def test_preset_switches_the_part_and_writes_the_url():
    at = symmetry_page(part="fig1", nets="100", d_in="3")
    assert charts(at) == 4 and at.query_params["d_in"] == "3"
    at.selectbox(key="symmetry.preset").set_value("Wide nets: modes crowd together").run()
    assert not at.exception
    assert at.radio(key="symmetry.part").value == "proximity"
    assert at.number_input(key="symmetry.d_in").value == 1
    # The URL follows: the preset's part and values, the other controls back at their defaults.
    assert at.query_params["part"] == "proximity" and at.query_params["d_in"] == "1"
    assert at.query_params["max_width"] == "4096" and at.query_params["nets"] == "2000"
    assert at.header[0].value == "Mode proximity" and charts(at) == 1
    assert metrics(at)["widths with a bound < 2"] == "7 / 12"
    assert any("closer, relative to ‖w‖" in i.value for i in at.info)


def test_malformed_link_gives_one_notice_and_the_defaults():
    at = symmetry_page(part="bogus", nets="abc")
    assert not at.exception
    assert len(at.warning) == 1
    notice = at.warning[0].value
    assert "adjusted" in notice and "part=bogus" in notice and "nets=abc" in notice
    assert at.radio(key="symmetry.part").value == "fig1" and at.number_input(key="symmetry.nets").value == 2000
    assert at.query_params["part"] == "fig1" and at.query_params["nets"] == "2000"
    assert at.header[0].value == "The doubled mode (Fig. 1)" and charts(at) == 4


def test_new_seed_changes_the_seed_in_the_url():
    at = symmetry_page(part="proximity", seed="5")
    assert at.number_input(key="symmetry.seed").value == 5 and at.query_params["seed"] == "5"
    before = metrics(at)["‖gw − w‖ / ‖w‖ at width 4096"]
    at.button(key="symmetry.new_seed").click().run()
    assert not at.exception
    assert at.number_input(key="symmetry.seed").value == 6 and at.query_params["seed"] == "6"
    assert at.query_params["part"] == "proximity"
    assert metrics(at)["‖gw − w‖ / ‖w‖ at width 4096"] != before  # another initialisation


def test_the_one_seed_fits_every_part_and_no_other_url_name_is_shared():
    """Each part's config reads the page's values by URL name: a name two configs share must be one parameter
    whose whole range each of them accepts. Only the seed is shared; the MLPs' learning rate is ``sgd_lr``."""
    page = {spec.name: spec for spec in LAB.page_params()}
    assert len(page) == len(LAB.page_params())
    readers = {}
    for config_type, names in params.FIELDS.items():
        for name in (*names, "seed"):
            readers.setdefault(controls.url_name(config_type, name), []).append(controls.declaration(config_type, name))
    assert [url for url, declared in readers.items() if len(declared) > 1] == ["seed"]
    for url, declared in readers.items():
        spec = page[url]
        extremes = [spec.low, spec.high] if spec.kind in ("int", "float") else list(spec.choices)
        for control in declared:
            assert control.kind == spec.kind and all(map(control.accepts, [spec.default, *extremes])), url


@pytest.mark.parametrize(
    "query, widgets",
    [
        ({}, {"nets": 10_000, "epochs": 30}),
        ({"part": "training", "steps": "200"}, {"width": 256, "steps": 3000, "sgd_lr": 1.0}),
    ],
)
def test_the_server_caps_are_stated_on_their_widgets(query, widgets):
    at = symmetry_page(**query)
    shown = {widget.key: widget for kind in ("slider", "number_input") for widget in at.get(kind)}
    for name, cap in widgets.items():
        widget = shown[f"symmetry.{name}"]
        assert widget.max == cap and f"This page allows at most {cap:g}; the command line" in widget.help, name
    assert not shown["symmetry.seed"].help  # not capped: the declared range


def test_the_network_part_asks_for_a_file_and_keeps_the_sort_key_in_the_link():
    at = open_page("symmetry", part="network", key="first_in")
    assert not at.exception and not at.error
    assert any("cannot live in a link" in info.value for info in at.info)
    assert [uploader.label for uploader in at.get("file_uploader")] == ["Your network"]
    assert dict(at.query_params)["part"] == "network" and dict(at.query_params)["key"] == "first_in"


def test_a_784_input_layer_is_pictured_by_its_most_varied_inputs_and_sorting_reorders_its_rows(monkeypatch):
    """784 columns in a half-page column blur into one another, and the sorted picture looks like the raw one: the
    pictures show the 64 inputs whose weights vary most across the units (the same for both), drawn exactly,
    the sorted one the raw one's rows reordered."""
    import torch

    from symlab.lib import weights
    from views.common.charts import BLUE_RED

    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(784, 24), torch.nn.ReLU(), torch.nn.Linear(24, 10))
    with torch.no_grad():  # inputs of very different spread, as a trained net's pixels have
        net[0].weight.mul_(torch.linspace(0.2, 3.0, 784)[torch.randperm(784)])
    state = {k: v.double() for k, v in net.state_dict().items()}
    network = weights.network_from_tensors(state, "net.pt")
    uploading(monkeypatch, {"Your network": Upload("net.pt", hostile_files.torch_bytes(state))})
    at = open_page("symmetry", part="network", key="max_in")
    assert not at.exception and not at.error, [e.value for e in at.exception]
    W = network.means[0][0]
    inputs = np.sort(np.argsort(-W.var(axis=0), kind="stable")[:64])
    shown = []
    for title in ("Hidden layer 1, as uploaded", "Hidden layer 1, units sorted"):
        chart = vega_chart(at, title)
        [x] = channel(chart["spec"], "x")
        assert x["title"] == ["64 of 784 inputs:", "those that vary most"] and x["axis"]["labels"] is False
        shown.append(image_values(chart["datasets"]["image"]["url"][0], BLUE_RED)[::-1])
    limit = np.quantile(np.abs(W[:, inputs]), 0.99)
    assert shown[0].shape == (24, 64)
    assert abs(shown[0] - np.clip((W[:, inputs] + limit) / (2 * limit), 0, 1)).max() <= 3 / 1024  # colour rounding
    order = np.argsort(W.max(axis=1), kind="stable")  # max_in: by each unit's largest incoming weight
    assert (order != np.arange(24)).any() and (shown[1] == shown[0][order]).all()
    assert any("the 64 of its 784 inputs whose weights vary most" in c.value for c in at.caption)


@pytest.mark.parametrize(
    "file, reason",
    [
        (hostile_files.stride_zero_view, "0.weight is a view that repeats or overlaps its stored numbers"),
        (
            hostile_files.no_hidden_units,
            "0.weight has shape (0, 784): every layer needs at least one input and one unit",
        ),
        (hostile_files.deep_chain, "200 nn.Linear layers, over the 64 this reader takes"),
    ],
)
def test_a_hostile_upload_gets_its_reason_as_text_and_no_traceback(monkeypatch, file, reason):
    """Read in a process of its own: the page shows the reader's one line, the file's name as typed (no markup)."""
    from views.common import files

    uploading(monkeypatch, {"Your network": Upload(hostile_files.MARKUP_NAME, file())})
    at = open_page("symmetry", part="network")
    assert not at.exception
    [error] = at.error
    assert error.value.startswith(files.plain(f"{hostile_files.MARKUP_NAME}: {reason}"))
    assert not at.table and not at.get("vega_lite_chart")


def test_an_uploads_name_is_shown_as_it_is(monkeypatch):
    from views.common import files

    uploading(monkeypatch, {"Your network": Upload(hostile_files.MARKUP_NAME, hostile_files.small_network())})
    at = open_page("symmetry", part="network")
    assert not at.exception and not at.error
    [success] = at.success
    assert success.value.startswith(files.plain(hostile_files.MARKUP_NAME) + ": 6 → 5 → 3")
    assert "**" not in success.value.replace(r"\*\*", "")


HOSTILE_NAMES = {
    "traversal": ("../../../../tmp/evil.pt", "evil.pt"),
    "windows traversal": ("..\\..\\Windows\\evil.pt", "evil.pt"),
    "bidi override": ("report\u202etp.exe", "report\\u202etp.exe"),
    "zero width and newline": ("a\u200bb\nc.pt", "a\\u200bb\\nc.pt"),
    "10 000 characters": ("x" * 10_000 + ".pt", "x" * 59 + "…" + "x" * 56 + ".pt"),
}


@pytest.mark.parametrize("name, shown", HOSTILE_NAMES.values(), ids=HOSTILE_NAMES)
def test_a_hostile_upload_name_is_shown_short_and_as_text(monkeypatch, name, shown):
    """An upload's name is anyone's text: a path names no place here (its last part is the name), characters that
    reorder, hide or break lines are shown as escapes, and 10 000 characters are cut to a line or two with the
    extension kept, on the page and in what its analysis says."""
    from views.common import files

    uploading(monkeypatch, {"Your network": Upload(name, hostile_files.small_network())})
    at = open_page("symmetry", part="network")
    assert not at.exception and not at.error
    [success] = at.success
    assert success.value.startswith(files.plain(shown) + ": 6 → 5 → 3")
