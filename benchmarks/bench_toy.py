"""Tractable BNN lab: exact posterior, VI step rates (single vs batched), the default table, and
the cost of the live run a setting trains once for every session (benchmarks/bench_toy_live.py measures the
browser that plays it). One process; ratios against the single run.

    python benchmarks/bench_toy.py [--smoke] [--json]

Targets (issue 3): 201 × 201 posterior with N = 100 ≤ 20 ms; default table (4 α × 2 methods ×
5 seeds) ≤ 15 s. The table and the live run are timed with the default restarts and against one start, in the
same process. ``--smoke`` (what a test runs): few repeats and steps, one α and two seeds, a live run of 4 frames.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import types
from dataclasses import replace
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from symlab.labs.toy import experiment as toy  # noqa: E402
from symlab.labs.toy import live  # noqa: E402
from symlab.lib import two_relu  # noqa: E402
from symlab.runs.device import measured_rates  # noqa: E402


def median_time(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def steps_per_second(runs, steps=500):
    trainer = two_relu.ToyTrainer(runs)
    trainer.step(20)
    start = time.perf_counter()
    trainer.step(steps)
    return steps / (time.perf_counter() - start)


def page_module():
    """The toy page's chart builders, without running the page."""
    source = (ROOT / "views" / "toy.py").read_text().rsplit("\nmain()", 1)[0]
    module = types.ModuleType("toy_page")
    exec(compile(source, "toy_page", "exec"), module.__dict__)
    return module


def arrow_bytes(frame) -> int:
    """What Streamlit sends for one of a Vega-Lite chart's datasets: the frame as Arrow IPC."""
    sink = pa.BufferOutputStream()
    table = pa.Table.from_pandas(frame)
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().size


def live_run_cost(restarts: int, repeats=3, frames: int = live.FRAMES):
    """The live run of the default link with ``restarts`` starts a method, as its shared task computes it once for
    every session: the whole trajectory, then its frames encoded. Seconds for each part, and the encoded size."""
    config = replace(toy.ToyConfig(), restarts=restarts).validate()
    trajectory = live.live_trajectory(config, frames=frames)
    train_s = median_time(lambda: live.live_trajectory(config, frames=frames), repeats)
    encode_s = median_time(lambda: live.live_animation(config, trajectory), repeats)
    return train_s, encode_s, live.live_animation(config, trajectory)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the smallest setting, which a test runs")
    parser.add_argument("--json", action="store_true", help="one JSON line: the machine's rates and every figure")
    args = parser.parse_args(argv)
    say = (lambda *a, **k: None) if args.json else print
    repeats, steps = (2, 20) if args.smoke else (30, 500)
    alphas, seeds, table_steps = (
        (toy.DEFAULT_TABLE_ALPHAS[:1], 2, 20) if args.smoke else (toy.DEFAULT_TABLE_ALPHAS, 5, toy.DEFAULT_STEPS)
    )
    table = dict(alphas=alphas, seeds=seeds, steps=table_steps)
    live_frames, live_repeats = (4, 1) if args.smoke else (live.FRAMES, 3)
    measured = measured_rates()
    rates = measured.in_units()
    say(measured.described())

    big = toy.ToyConfig(n_train=100, batch_size=100)
    data = toy.make_data(big)
    posterior_s = median_time(lambda: two_relu.exact_posterior(data, big.noise, big.prior_scale, 201), repeats)
    say(f"exact posterior 201x201, N = 100       {posterior_s * 1e3:8.2f} ms   (target <= 20 ms)")

    config = toy.ToyConfig()
    single_mfvi = steps_per_second([toy.run_spec("mfvi", config)], steps)
    single_sgm = steps_per_second([toy.run_spec("sgm", config)], steps)
    single_infonce = steps_per_second([toy.run_spec("sgm", replace(config, mi="infonce", K=16))], steps)
    table_runs = [
        toy.run_spec(m, replace(config, alpha=a, seed=s))
        for a in alphas
        for s in range(seeds)
        for m in two_relu.METHODS
    ]
    batched = steps_per_second(table_runs, steps)
    say(f"MFVI, one run                          {single_mfvi:8.0f} steps/s")
    say(f"SGM (exact I), one run                 {single_sgm:8.0f} steps/s   ({single_sgm / single_mfvi:.2f}x MFVI)")
    say(
        f"SGM (InfoNCE, K = 16), one run         {single_infonce:8.0f} steps/s   ({single_infonce / single_mfvi:.2f}x MFVI)"
    )
    say(
        f"batched, {len(table_runs)} runs (MFVI + SGM)        {batched:8.0f} steps/s = {batched * len(table_runs):.0f} run-steps/s"
        f"   ({batched * len(table_runs) / single_mfvi:.1f}x one run)"
    )

    start = time.perf_counter()
    toy.paper_table(base=replace(config, restarts=1), **table)
    one_start_s = time.perf_counter() - start
    start = time.perf_counter()
    rows = toy.paper_table(**table)
    table_s = time.perf_counter() - start
    say(
        f"default table end to end               {table_s:8.2f} s    (target <= 15 s; "
        f"{len(alphas)} alpha x 2 methods x {seeds} seeds, {table_steps} steps, best of {config.restarts} starts: "
        f"{table_s / one_start_s:.2f}x one start)"
    )
    for row in rows:
        say(
            f"    alpha {row['alpha']:<5g} {row['method']:4s}  test MSE {row['test_mse_mean']:.4f} ± {row['test_mse_std']:.4f}"
            f"   ELBO {row['elbo_mean']:8.3f} ± {row['elbo_std']:.3f}   log p(D) {row['log_evidence_mean']:.3f}"
        )

    one_train_s, one_encode_s, _ = live_run_cost(1, live_repeats, live_frames)
    train_s, encode_s, animation = live_run_cost(config.restarts, live_repeats, live_frames)
    say(
        f"live run, once per setting            {train_s + encode_s:8.2f} s    (train {train_s:.2f} s + encode "
        f"{encode_s:.2f} s for {animation.frames} frames, {animation.size / 1024:.0f} KiB gzipped; "
        f"{config.restarts} starts a method: {(train_s + encode_s) / (one_train_s + one_encode_s):.2f}x one start)"
    )
    report = {
        "rates": rates,
        "exact_posterior_ms": posterior_s * 1e3,
        "mfvi_steps_per_s": single_mfvi,
        "sgm_over_mfvi_step_rate": single_sgm / single_mfvi,
        "infonce_over_mfvi_step_rate": single_infonce / single_mfvi,
        "batched_runs": len(table_runs),
        "batched_over_one_run": batched * len(table_runs) / single_mfvi,
        "table_s": table_s,
        "table_over_one_start": table_s / one_start_s,
        "live_frames": animation.frames,
        "live_run_s": train_s + encode_s,
        "live_over_one_start": (train_s + encode_s) / (one_train_s + one_encode_s),
        "live_bytes": animation.size,
    }
    if args.json:
        print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
