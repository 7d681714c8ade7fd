"""The 3-D landscapes: the shared grid type, each lab's grid checked against an independent computation, the
command lines that write them, and the figure the pages hand the browser."""

import base64
import json
import math
import subprocess
import sys

import numpy as np
import pytest
from scipy import integrate, stats

from symlab.labs.align import experiment as align_lab
from symlab.labs.align import params as align_params
from symlab.labs.align.tasks import page_tasks
from symlab.labs.modes import experiment as modes
from symlab.labs.toy import experiment as toy
from symlab.lib import align
from symlab.serving import codec
from symlab.specs import surfaces
from symlab.specs.surfaces import Line, Surface
from views.common import surfaces as views

# ------------------------------------------------------------------------------------------ the grid type


def test_a_surface_needs_one_row_per_y():
    with pytest.raises(ValueError, match="one row per y"):
        Surface(np.arange(3.0), np.arange(2.0), np.zeros((3, 2)), "x", "y", "z")


def test_heights_are_exact_on_a_plane_and_keep_breaks():
    """Bilinear interpolation reproduces a plane exactly; NaN (a break between outlines) stays NaN; a point
    beyond the grid takes its edge's value."""
    x, y = np.linspace(-1, 2, 7), np.linspace(0, 3, 5)
    surface = Surface(x, y, 2 * x[None, :] - 3 * y[:, None] + 1, "x", "y", "z")
    px, py = np.array([-0.9, 0.37, 1.99, np.nan, 5.0]), np.array([0.1, 2.2, 2.9, 1.0, 1.0])
    found = surfaces.heights(surface, px, py)
    assert found[:3] == pytest.approx(2 * px[:3] - 3 * py[:3] + 1)
    assert math.isnan(found[3])
    assert found[4] == pytest.approx(2 * 2 - 3 * 1 + 1)


def test_a_view_draws_down_to_the_floor_and_keeps_the_values():
    z = np.array([[-50.0, 0.0], [3.0, 10.0]])
    surface = Surface(np.arange(2.0), np.arange(2.0), z, "x", "y", "z", z_floor=-5.0)
    assert surface.drawn().tolist() == [[-5.0, 0.0], [3.0, 10.0]]
    written = surfaces.to_json(surface)
    assert written["z"] == z.tolist() and written["z_floor"] == -5.0 and written["z_scale"] == "linear"


def test_a_log_axis_needs_a_positive_floor_and_lifts_lines_by_a_ratio():
    with pytest.raises(ValueError, match="positive z_floor"):
        Surface(np.arange(2.0), np.arange(2.0), np.ones((2, 2)), "x", "y", "z", z_scale="log")
    z = np.array([[0.01, 0.1], [1.0, 10.0]])
    surface = Surface(np.arange(2.0), np.arange(2.0), z, "x", "y", "z", z_floor=1e-3, z_scale="log")
    (height,) = surfaces.on_surface(surface, "point", [1.0], [1.0]).z
    assert height == pytest.approx(10.0 * 1000**surfaces.LIFT)


def test_json_has_the_documented_keys_and_no_nan():
    line = Line("outline", np.array([0.0, np.nan, 1.0]), np.array([0.0, np.nan, 1.0]), np.array([1.0, np.nan, 2.0]))
    surface = Surface(np.arange(2.0), np.arange(2.0), np.array([[np.nan, 1], [2, 3]]), "x", "y", "z", lines=(line,))
    written = surfaces.to_json(surface)
    text = json.dumps(written, allow_nan=False)  # raises on NaN
    assert set(written) == {"x", "y", "z", "x_title", "y_title", "z_title", "z_floor", "z_scale", "lines"}
    assert json.loads(text)["lines"][0] == {"label": "outline", "x": [0.0, None, 1.0], "y": [0.0, None, 1.0],
                                            "z": [1.0, None, 2.0]}  # fmt: skip
    assert "lowest 1 at (1, 0), highest 3 at (1, 1)" in surfaces.summary(written)


def test_a_surface_goes_through_the_result_store():
    """The alignment lab's landscape is a stored result: the codec writes it and builds it back."""
    line = Line("ends", np.array([0.0, 1.0]), np.array([0.0, 0.5]), np.array([0.1, 0.2]))
    surface = Surface(np.arange(3.0), np.arange(2.0), np.arange(6.0).reshape(2, 3), "x", "y", "z", lines=(line,))
    back = codec.decode(codec.encode(surface))
    assert isinstance(back, Surface) and np.array_equal(back.z, surface.z) and back.lines[0].label == "ends"


# ------------------------------------------------------------------------------------------ the tractable BNN


def test_the_toy_landscape_is_the_exact_log_posterior():
    """Each grid value is log p(D | w) + log p(w) − log p(D), computed here from the network itself (p(D) the
    display grid's own sum, within 10⁻³ of the 201-point grid's)."""
    config = toy.ToyConfig()
    data, exact, display, *_ = toy.exact_view(config)
    surface = toy.posterior_surface(display)
    assert surface.x.size == surface.y.size == 81
    for i, j in ((3, 5), (40, 40), (60, 21)):
        w = np.array([surface.x[j], surface.y[i]])
        prediction = np.maximum(w[0] * data.x_train, 0) + np.maximum(w[1] * data.x_train, 0)
        log_joint = (
            stats.norm.logpdf(data.y_train, prediction, config.noise).sum()
            + stats.norm.logpdf(w, 0, config.prior_scale).sum()
        )
        assert surface.z[i, j] == pytest.approx(log_joint - display.log_evidence, abs=1e-6)
    assert display.log_evidence == pytest.approx(exact.log_evidence, abs=1e-3)
    assert surface.z_floor == pytest.approx(surface.z.max() - toy.SURFACE_DEPTH)


def test_q_log_densities_match_scipy_and_sgm_is_the_swapped_mixture():
    x, y = np.linspace(-2, 2, 9), np.linspace(-1.5, 2.5, 7)
    mean, std = np.array([0.7, -0.4]), np.array([0.3, 0.5])
    mfvi = toy.q_log_density(mean, std, False, x, y)
    sgm = toy.q_log_density(mean, std, True, x, y)
    w1, w2 = np.meshgrid(x, y)
    points = np.stack([w1, w2], -1)
    own = stats.multivariate_normal(mean, np.diag(std**2)).logpdf(points)
    swapped = stats.multivariate_normal(mean[::-1], np.diag(std[::-1] ** 2)).logpdf(points)
    assert mfvi == pytest.approx(own)
    assert sgm == pytest.approx(np.log(0.5 * np.exp(own) + 0.5 * np.exp(swapped)))


def test_the_fits_outlines_lie_on_the_landscape():
    config = toy.ToyConfig(alpha=1.0)
    display = toy.exact_view(config)[2]
    surface, grids = toy.posterior_landscape(config, display, {"mfvi": ([0.5, -0.5], [0.2, 0.3])})
    modes_line, outline = surface.lines
    assert modes_line.label == "modes" and modes_line.x.tolist() == [1.0, -1.0]
    assert outline.label == "mfvi" and np.isnan(outline.x).sum() == 1  # two ellipses, one break
    lift = surfaces.LIFT * float(np.ptp(surface.drawn()))
    finite = np.isfinite(outline.x)
    assert outline.z[finite] == pytest.approx(surfaces.heights(surface, outline.x, outline.y)[finite] + lift)
    assert grids["mfvi"].shape == surface.z.shape


# ------------------------------------------------------------------------------------------ mode interpolation


def reverse_kl_by_quad(mu: float, log_s: float, alpha: float, sigma: float) -> float:
    """KL(N(μ, s²) ‖ ½N(0, σ²) + ½N(α, σ²)) by adaptive quadrature: an independent implementation."""
    s = math.exp(log_s)

    def integrand(x):
        log_q = stats.norm.logpdf(x, mu, s)
        log_p = np.logaddexp(stats.norm.logpdf(x, 0, sigma), stats.norm.logpdf(x, alpha, sigma)) - math.log(2)
        return math.exp(log_q) * (log_q - log_p)

    return integrate.quad(integrand, mu - 12 * s, mu + 12 * s, limit=200)[0]


@pytest.mark.parametrize("alpha,sigma", [(3.0, 1.0), (6.0, 1.0), (1.0, 0.25)])
def test_the_kl_landscape_matches_quadrature(alpha, sigma):
    surface = modes.kl_landscape(alpha, sigma)
    for i, j in ((0, 0), (10, 30), (24, 24), (40, 7)):
        expected = reverse_kl_by_quad(surface.x[j], surface.y[i], alpha, sigma)
        assert surface.z[i, j] == pytest.approx(expected, rel=1e-7, abs=1e-7)


@pytest.mark.parametrize("alpha,at_midpoint", [(3.0, True), (7.0, False)])
def test_the_landscapes_lowest_point_moves_from_the_midpoint_to_a_mode(alpha, at_midpoint):
    """α* ≈ 4.8σ: below it the lowest point is the midpoint α/2, above it a mode (0 or α)."""
    surface = modes.kl_landscape(alpha, 1.0)
    i, j = np.unravel_index(np.argmin(surface.z), surface.z.shape)
    spacing = surface.x[1] - surface.x[0]
    nearest_mode = min(abs(surface.x[j]), abs(surface.x[j] - alpha))
    if at_midpoint:
        assert abs(surface.x[j] - alpha / 2) <= spacing
    else:
        assert nearest_mode <= spacing


def test_the_path_on_the_landscape_is_adams_and_ends_at_the_optimum():
    path = modes.optimisation_path(3.0, 1.0)
    trail, now, optimum = modes.path_lines(path, 95, modes.optimum_from_start(3.0, 1.0), stride=10)
    assert trail.x.tolist() == path.mean[[*range(0, 95, 10), 95]].tolist()
    assert now.z[0] == path.kl[95] and now.y[0] == pytest.approx(math.log(path.std[95]))
    assert optimum.x[0] == pytest.approx(1.5, abs=1e-3)  # the midpoint below α*
    whole = modes.landscape_report(3.0, 1.0)
    assert whole["lines"][0]["x"][-1] == pytest.approx(optimum.x[0], abs=0.02)  # 1000 Adam steps reach it


# ------------------------------------------------------------------------------------------ alignment


@pytest.fixture(scope="module")
def aligned_pair():
    config = align_lab.AlignConfig(width=8, depth=2, steps=200, samples=4, path_points=5, seed=2).validate()
    data = align_lab.load_task(config)
    pair = align_lab.train_pair(config, data)
    return pair, align_lab.alignment_report(pair, data), data


def test_the_plane_keeps_w2_distances(aligned_pair):
    """In (μ, σ) the Euclidean distance between diagonal Gaussians is W₂: the plane's coordinates are W₂'s."""
    pair, rep, _ = aligned_pair
    plane = align_lab.plane_through(pair.qa, rep.ends["before"], rep.ends["w2"])
    assert plane.b == pytest.approx(align.w2_distance(pair.qa, rep.ends["before"]))
    assert math.hypot(plane.c_x, plane.c_y) == pytest.approx(align.w2_distance(pair.qa, rep.ends["w2"]))
    for (x, y), q in (((0, 0), pair.qa), ((plane.b, 0), rep.ends["before"]), ((plane.c_x, plane.c_y), rep.ends["w2"])):
        found = plane.at(x, y)
        assert found.mean == pytest.approx(q.mean, abs=1e-9) and found.sd == pytest.approx(q.sd, abs=1e-9)
    middle = plane.at(plane.b / 2, 0)
    assert middle.sd == pytest.approx(align.interpolate(pair.qa, rep.ends["before"], 0.5).sd)


def test_three_posteriors_on_a_line_span_no_plane(aligned_pair):
    pair, rep, _ = aligned_pair
    with pytest.raises(ValueError, match="span no plane"):
        align_lab.plane_through(pair.qa, rep.ends["before"], rep.ends["before"])


def test_the_loss_plane_agrees_with_the_paths_at_its_corners(aligned_pair):
    pair, rep, data = aligned_pair
    surface = align_lab.loss_plane(pair, rep, data, steps=6)
    i0, j0 = int(np.argmin(np.abs(surface.y))), int(np.argmin(np.abs(surface.x)))
    assert surface.y[i0] == 0 and surface.x[j0] == 0
    jb = int(np.argmin(np.abs(surface.x - surface.lines[2].x[1])))
    assert surface.z[i0, j0] == pytest.approx(rep.loss_a, abs=1e-6)
    assert surface.z[i0, jb] == pytest.approx(rep.paths["before"]["loss"][-1], abs=1e-6)
    plane = align_lab.plane_through(pair.qa, rep.ends["before"], rep.ends["w2"])
    middle = align.evaluate(plane.at(surface.x[2], surface.y[3]), rep.noise, data.x_test, data.y_test)[0]
    assert surface.z[3, 2] == pytest.approx(middle, abs=1e-6)
    assert [line.label for line in surface.lines] == ["before", "w2", "ends"]


def test_the_page_asks_for_the_plane_only_with_the_3d_view_on():
    values = align_params.PRESETS.state("Half moons, two hidden layers", align_params.page_params())
    base = {spec.name: spec.default for spec in align_params.page_params()} | values
    off = page_tasks({**base, "surface": False})
    on = page_tasks({**base, "surface": True})
    assert [t.key[0] for t in on] == [t.key[0] for t in off] + ["align_plane"]
    assert on[-1].cost.matmul_flops > 0


# ------------------------------------------------------------------------------------------ the command lines


def run(*args):
    return subprocess.run([sys.executable, "-m", "symlab", *args], capture_output=True, text=True, timeout=600)


SURFACE_KEYS = {"x", "y", "z", "x_title", "y_title", "z_title", "z_floor", "z_scale", "lines"}


@pytest.mark.slow
def test_each_lab_writes_its_landscape_headless():
    toy_run = run("toy", "--steps", "200", "--surface", "--json")
    assert toy_run.returncode == 0, toy_run.stderr
    written = json.loads(toy_run.stdout)["surface"]
    assert set(written) == SURFACE_KEYS | {"log_q"} and len(written["log_q"]) == len(written["y"]) == 81
    config = toy.ToyConfig()
    expected = toy.posterior_surface(toy.exact_view(config)[2])
    assert np.array_equal(np.array(written["z"]), expected.z)  # the page's function, the page's grid

    modes_run = run("modes", "--sigma", "1", "--points", "5", "--surface", "6", "--json")
    assert modes_run.returncode == 0, modes_run.stderr
    written = json.loads(modes_run.stdout)["surface"]
    assert set(written) == SURFACE_KEYS and np.array_equal(np.array(written["z"]), modes.kl_landscape(6.0, 1.0).z)
    assert [line["label"] for line in written["lines"]] == ["path", "now", "optimum"]

    align_run = run("align", "--width", "8", "--steps", "100", "--samples", "4", "--path-points", "5", "--surface")
    assert align_run.returncode == 0, align_run.stderr
    assert "landscape: " in align_run.stdout and "test loss (nats): lowest" in align_run.stdout


@pytest.mark.parametrize(
    "args,message",
    [
        (("toy", "--table", "--surface"), "leave out --table"),
        (("align", "--surface", "--weights", "a.pt", "b.pt"), "leave out --weights"),
        (("modes", "--surface", "25"), "--surface"),
    ],
)
def test_a_landscape_asked_for_wrongly_says_why(args, message):
    result = run(*args)
    assert result.returncode != 0 and message in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------------------------------ the drawn figure


def decoded(typed: dict) -> np.ndarray:
    values = np.frombuffer(base64.b64decode(typed["bdata"]), dtype=np.float32)
    return values.reshape([int(n) for n in typed["shape"].split(",")]) if "shape" in typed else values


def test_the_figure_carries_the_drawn_grid_and_styled_lines():
    z = np.array([[-50.0, 0.0, 1.0], [3.0, 10.0, 2.0]])
    surface = Surface(np.arange(3.0), np.arange(2.0), z, "x (m)", "y (m)", "z (nats)", z_floor=-5.0)
    line = Line("path", np.array([0.0, np.nan, 1.0]), np.array([0.0, np.nan, 1.0]), np.array([1.0, np.nan, 2.0]))
    styles = {"path": views.Style("#0072B2", "dash", "diamond", name="the path")}
    figure = views.figure(surface, [line], styles, views.CAMERA, present=False)
    grid, path = figure["data"]
    assert decoded(grid["z"]) == pytest.approx(surface.drawn()) and decoded(grid["x"]).tolist() == [0, 1, 2]
    assert path["name"] == "the path" and path["line"]["dash"] == "dash" and path["marker"]["symbol"] == "diamond"
    assert path["x"] == [0.0, None, 1.0]
    scene = figure["layout"]["scene"]
    assert [scene[a]["title"]["text"] for a in ("xaxis", "yaxis", "zaxis")] == ["x (m)", "y (m)", "z (nats)"]
    bigger = views.figure(surface, [line], styles, views.CAMERA, present=True)
    assert bigger["layout"]["font"]["size"] > figure["layout"]["font"]["size"]
    json.dumps(figure, allow_nan=False)


def test_a_line_style_needs_a_second_cue_plotly_draws():
    with pytest.raises(ValueError, match="not a 3-D line style"):
        views.Style("#000000", "wiggly")
    with pytest.raises(ValueError, match="not a 3-D line style"):
        views.Style("#000000", symbol="triangle-up")


def test_streamlits_own_plotly_is_there_to_load():
    name = views.plotly_chunk()
    assert name.startswith("PlotlyChart.") and name.endswith(".js")
