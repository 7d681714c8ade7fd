"""What each 3-D landscape costs the server, against the first chart of its page, in the same process.

    python benchmarks/bench_surfaces.py [--repeat 5] [--json]

``--repeat 1`` is its smallest setting, which a test runs.

For each page with a landscape (tractable BNN, mode interpolation, alignment) and its default settings, two costs
of the landscape and of the page's first chart (toy: the live posterior; modes: the densities along e₁;
align: the loss along the path), CPU-seconds on one thread, the best of ``--repeat``:

* compute: what the view needs computed once per setting (kept for every session), against what the page
  computes before it draws its first chart: the toy's landscape (the exact posterior's display grid, which the
  first chart computes) against the exact posterior and the trainer's starts; the reverse-KL landscape against
  the sweep, α* and the fit at α; the loss over the plane against training and aligning the pair;
* frame: what every redraw builds for the browser (a player's frame): for the toy's first chart the player's first
  frame encoded (its charts' specs are sent once per setting), for the others their Vega-Lite spec as JSON and their
  datasets as Arrow, for the landscape its figure (the grid encoded once per
  setting, the lines each frame) as the JSON the component carries; and the bytes sent.

The target: each landscape costs no more than its page's first chart, compute and frame alike (ratio ≤ 1).
Ratios are taken within this process; the machine's rates (bench_interactions.py's three) come first.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from symlab.labs.align import experiment as align_lab  # noqa: E402
from symlab.labs.modes import experiment as modes  # noqa: E402
from symlab.labs.modes import frames  # noqa: E402
from symlab.labs.modes.config import SweepConfig  # noqa: E402
from symlab.labs.toy import experiment as toy  # noqa: E402
from symlab.labs.toy import live  # noqa: E402
from symlab.runs.device import measured_rates, set_threads  # noqa: E402

warnings.filterwarnings("ignore")  # Streamlit's caches outside a running app say so once per call


def best_cpu(function, repeat: int):
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.process_time()
        result = function()
        best = min(best, time.process_time() - started)
    return best, result


def vega_frame(spec: dict, datasets: dict) -> int:
    """A Vega-Lite chart's redraw as views/common/charts.vega_chart sends it: the spec as JSON, the datasets as
    Arrow. Returns the bytes."""
    from views.common import charts

    encoded = [frame if isinstance(frame, bytes) else charts.arrow_bytes(frame) for frame in datasets.values()]
    return len(json.dumps(spec)) + sum(map(len, encoded))


def landscape_frame(surface, lines, styles, camera) -> int:
    """A landscape's redraw as views/common/surfaces.surface_chart sends it: the component's JSON. Returns the
    bytes."""
    from views.common import surfaces

    payload = {"figure": surfaces.figure(surface, lines, styles, camera, False), "chunk": "c", "height": 1, "alt": ""}
    return len(json.dumps(payload))


def toy_rows(repeat: int) -> dict:
    from views import toy as page

    config = toy.ToyConfig()

    def opened():  # what the page computes before it draws its first chart: the exact view and the first frame
        view = toy.exact_view(config, live.DISPLAY_GRID)
        return view, live.live_trajectory(config, frames=1)

    first_compute, (view, trajectory) = best_cpu(opened, repeat)
    exact, display = view[1], view[2]
    # The player's first frame, the browser's copy of what it draws (its charts' specs are made once per setting).
    first_frame, first_animation = best_cpu(lambda: live.live_animation(config, trajectory, view), repeat * 4)
    snapshot = trajectory.frame(0)
    fits = live.frame_fits(config, snapshot, exact)
    surface_compute, surface = best_cpu(lambda: toy.posterior_surface(display), repeat)
    fitted = page.fitted_now(snapshot, fits)
    frame, frame_bytes = best_cpu(
        lambda: landscape_frame(
            surface, toy.landscape_lines(surface, config, fitted), page.LANDSCAPE_STYLES, page.surfaces.CAMERA
        ),
        repeat * 4,
    )
    return row(
        "toy", "live posterior", first_compute, first_frame, first_animation.size, surface_compute, frame, frame_bytes
    )


def modes_rows(repeat: int) -> dict:
    from views import modes as page
    from views.common import charts

    alpha, sigma = 3.0, 1.0
    config = SweepConfig(sigma=sigma).validate()

    def opened():  # what the page computes before it draws its first chart
        alphas = modes.sweep_alphas(config)
        modes.fit_exact(alphas, sigma, config.dim), modes.forward_kl_optimum(alphas, sigma, config.dim)
        modes.exact_threshold(sigma, config.largest_alpha)
        return modes.optimum_from_start(alpha, sigma)

    first_compute, (mean, std, _) = best_cpu(opened, repeat)
    x = frames.density_grid(alpha, sigma)

    def density_data():  # as the page's density_lines makes them (kept there once per setting)
        target = (page.DENSITY_SERIES[0].label, x, np.exp(modes.log_mixture(x, alpha, sigma)))
        fitted = (page.DENSITY_SERIES[1].label, x, page.normal_pdf(x, mean, std))
        return {"lines": charts.lines_bytes([target, fitted])}

    spec = page.density_spec(False, False)
    first_frame, first_bytes = best_cpu(lambda: vega_frame(spec, density_data()), repeat * 4)
    surface_compute, surface = best_cpu(lambda: modes.kl_landscape(alpha, sigma), repeat)
    path = modes.optimisation_path(alpha, sigma)
    frame, frame_bytes = best_cpu(
        lambda: landscape_frame(
            surface,
            modes.path_lines(path, 500, (mean, std, 0.0), frames.FRAME_STRIDE),
            page.LANDSCAPE_STYLES,
            page.LANDSCAPE_CAMERA,
        ),
        repeat * 4,
    )
    return row(
        "modes", "densities along e₁", first_compute, first_frame, first_bytes, surface_compute, frame, frame_bytes
    )


def align_rows(repeat: int) -> dict:
    from views import align as page

    config = align_lab.AlignConfig().validate()
    repeats = max(1, repeat // 2)  # seconds each
    first_compute, (pair, report) = best_cpu(lambda: align_lab.trained_and_aligned(config), repeats)
    spec = page.path_spec("loss", False)
    first_frame, first_bytes = best_cpu(lambda: vega_frame(spec, page.path_data(report, "loss", 0.5)), repeat * 4)
    data = align_lab.load_task(config)
    surface_compute, surface = best_cpu(lambda: align_lab.loss_plane(pair, report, data), repeats)
    frame, frame_bytes = best_cpu(
        lambda: landscape_frame(surface, surface.lines, page.LANDSCAPE_STYLES, page.LANDSCAPE_CAMERA), repeat * 4
    )
    return row(
        "align", "loss along the path", first_compute, first_frame, first_bytes, surface_compute, frame, frame_bytes
    )


def row(lab, first, first_compute, first_frame, first_bytes, compute, frame, frame_bytes) -> dict:
    return {
        "lab": lab,
        "first_chart": first,
        "first_compute_s": first_compute,
        "first_frame_s": first_frame,
        "first_frame_bytes": first_bytes,
        "landscape_compute_s": compute,
        "landscape_frame_s": frame,
        "landscape_frame_bytes": frame_bytes,
        "compute_ratio": compute / first_compute,
        "frame_ratio": frame / first_frame,
    }


def table(rows: list[dict], rates) -> str:
    out = [
        f"Rates on one thread: matrix products {rates.matmul_flops / 1e9:.0f} GFLOP/s, array elements "
        f"{rates.elementwise / 1e9:.2f} G/s, normal draws {rates.normals / 1e6:.0f} M/s. CPU-ms, best of the repeats.",
        "",
        f"{'lab':6s} {'first chart':20s} {'compute: first':>15s} {'landscape':>10s} {'ratio':>6s}   "
        f"{'frame: first':>13s} {'landscape':>10s} {'ratio':>6s}   {'KB: first':>9s} {'landscape':>9s}",
        "─" * 118,
    ]
    for r in rows:
        out.append(
            f"{r['lab']:6s} {r['first_chart']:20s} {1000 * r['first_compute_s']:15.2f} "
            f"{1000 * r['landscape_compute_s']:10.2f} {r['compute_ratio']:5.2f}×   {1000 * r['first_frame_s']:13.2f} "
            f"{1000 * r['landscape_frame_s']:10.2f} {r['frame_ratio']:5.2f}×   {r['first_frame_bytes'] / 1e3:9.1f} "
            f"{r['landscape_frame_bytes'] / 1e3:9.1f}"
        )
    within = sum(r["compute_ratio"] <= 1 and r["frame_ratio"] <= 1 for r in rows)
    out.append(f"\n{within} of {len(rows)} landscapes cost no more than their page's first chart.")
    return "\n".join(out)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each measurement; the best counts (default 5)")
    parser.add_argument("--json", action="store_true", help="also one JSON line with every row")
    args = parser.parse_args(argv)
    set_threads(1)
    rates = measured_rates()
    rows = [toy_rows(args.repeat), modes_rows(args.repeat), align_rows(args.repeat)]
    print(table(rows, rates))
    report = {"rates": vars(rates), "rows": rows}
    if args.json:
        print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
