"""Mode interpolation lab: exact path vs the paper's Monte-Carlo protocol, in one process.

    python benchmarks/bench_modes.py [--sigma 1] [--mc-steps 1000] [--mc-samples 5000] [--smoke] [--json]

Prints the time of a 100-point α sweep with each path, their ratio, the threshold each finds
against an independent reference (the gradient flow from the first component, bisected), and the
server-side time of one slider change on the page (script run, via Streamlit's AppTest).
Targets (issue 2): exact curve ≤ 50 ms, ≥ 100× faster than MC, threshold at least as accurate,
slider change ≤ 100 ms. ``--smoke`` (what a test runs): a short MC protocol, a coarse reference, one slider move.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from symlab.labs.modes import experiment as modes  # noqa: E402
from symlab.labs.modes.config import SweepConfig  # noqa: E402
from symlab.runs.device import measured_rates  # noqa: E402

SLIDER_VALUES = (3.05, 3.4, 4.1, 5.5, 6.25, 7.0, 8.8, 2.2)


def reference_threshold(sigma: float, lo: float = 4.5, hi: float = 5.2, tol: float = 1e-5) -> float:
    """α* by bisection on the gradient flow dx/dt = −∇KL from the first component.

    An independent definition of "the optimum reached from the first component": scipy's
    adaptive Runge–Kutta integrates the flow until it settles, with no step size or damping
    that could jump between basins.
    """
    from scipy.integrate import solve_ivp

    def mean_seeking(a: float) -> bool:
        def flow(_, x):
            return -modes._kl_grad_hess(x[:1], x[1:], np.array([a]))[1][0]

        end = solve_ivp(flow, (0.0, 5000.0), [0.0, 0.0], rtol=1e-10, atol=1e-12).y[:, -1]
        return end[0] / a > modes.INTERPOLATION_CUTOFF

    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if mean_seeking(mid) else (lo, mid)
    return sigma * 0.5 * (lo + hi)


def time_exact(alphas, sigma, repeats=30):
    modes.fit_exact(alphas, sigma)  # warm-up
    sweep_times, threshold_times = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        modes.fit_exact(alphas, sigma)
        sweep_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        threshold = modes.exact_threshold(sigma, alphas[-1], alphas.size)
        threshold_times.append(time.perf_counter() - start)
    return statistics.median(sweep_times), statistics.median(threshold_times), threshold


def time_slider_change(values=SLIDER_VALUES):
    """Median script-run time after a slider move (a new α: path and optimum not cached)."""
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.testing.v1 import AppTest

    durations = []
    original = script_runner.ScriptRunner._run_script

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            durations.append(time.perf_counter() - start)

    script_runner.ScriptRunner._run_script = timed
    try:
        at = AppTest.from_file(str(ROOT / "views" / "modes.py"), default_timeout=60).run()
        durations.clear()
        for value in values:
            at.slider(key="modes.alpha").set_value(value).run()
            assert not at.exception
    finally:
        script_runner.ScriptRunner._run_script = original
    return statistics.median(durations), max(durations)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sigma", type=float, default=1.0)
    paper = SweepConfig()  # the paper's protocol
    parser.add_argument("--mc-steps", type=int, default=paper.steps)
    parser.add_argument("--mc-samples", type=int, default=paper.samples)
    parser.add_argument("--smoke", action="store_true", help="the smallest setting, which a test runs")
    parser.add_argument("--json", action="store_true", help="one JSON line: the machine's rates and every figure")
    args = parser.parse_args(argv)
    if args.smoke:
        args.mc_steps, args.mc_samples = 20, 100
    sigma = args.sigma
    alphas = modes.sweep_alphas(SweepConfig(sigma=sigma))
    measured = measured_rates()
    rates = measured.in_units()

    exact_sweep_s, exact_threshold_s, exact_threshold = time_exact(alphas, sigma, repeats=2 if args.smoke else 30)
    start = time.perf_counter()
    mc = modes.fit_monte_carlo(alphas, sigma, samples=args.mc_samples, steps=args.mc_steps, seed=0)
    mc_s = time.perf_counter() - start
    mc_threshold = mc.threshold()
    reference = reference_threshold(sigma, tol=0.2 if args.smoke else 1e-5)
    slider_median_s, slider_max_s = time_slider_change(SLIDER_VALUES[:1] if args.smoke else SLIDER_VALUES)
    mc_error = float("nan") if mc_threshold is None else abs(mc_threshold - reference)
    exact_error = abs(exact_threshold - reference)
    exact_total = exact_sweep_s + exact_threshold_s
    report = {
        "rates": rates,
        "sigma": sigma,
        "mc_steps": args.mc_steps,
        "mc_samples": args.mc_samples,
        "exact_sweep_ms": exact_sweep_s * 1e3,
        "exact_threshold_ms": exact_threshold_s * 1e3,
        "mc_over_exact_curve": mc_s / exact_sweep_s,
        "mc_over_exact_curve_and_threshold": mc_s / exact_total,
        "reference_threshold": reference,
        "exact_threshold": exact_threshold,
        "exact_threshold_error": exact_error,
        "mc_threshold": mc_threshold,
        "mc_threshold_error": None if mc_threshold is None else mc_error,
        "slider_median_ms": slider_median_s * 1e3,
        "slider_max_ms": slider_max_s * 1e3,
    }
    if args.json:
        print(json.dumps(report))
        return report

    print(measured.described())
    print(f"sigma = {sigma}, 100-point sweep on [0, {alphas[-1]:g}], d = 2")
    print(f"exact sweep (curve)               {exact_sweep_s * 1e3:9.1f} ms   (target <= 50 ms)")
    print(f"exact threshold refinement        {exact_threshold_s * 1e3:9.1f} ms")
    print(f"MC protocol ({args.mc_samples} samples, {args.mc_steps} steps)   {mc_s * 1e3:9.1f} ms")
    print(f"ratio MC / exact curve            {mc_s / exact_sweep_s:9.0f} x   (target >= 100 x)")
    print(f"ratio MC / exact curve+threshold  {mc_s / exact_total:9.0f} x")
    print(f"reference threshold (flow)        {reference:9.4f}   (paper: {5 * sigma:g})")
    print(f"exact threshold                   {exact_threshold:9.4f}   error {exact_error:.1e}")
    print(
        f"MC threshold (sweep crossing)     {mc_threshold if mc_threshold is not None else float('nan'):9.4f}   "
        f"error {mc_error:.1e}"
    )
    print(f"threshold error ratio MC / exact  {mc_error / max(exact_error, 1e-12):9.0f} x")
    print(
        f"slider change, server-side run    {slider_median_s * 1e3:9.1f} ms median, "
        f"{slider_max_s * 1e3:.1f} ms max   (target <= 100 ms)"
    )
    return report


if __name__ == "__main__":
    main()
