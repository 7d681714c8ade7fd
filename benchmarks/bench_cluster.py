"""A sweep of 16 tiny MNIST runs on the local executor (worker processes, SymLab's own queue) against a
local Ray instance (one Ray actor per run, Ray's queue): the total time and the overhead per run, as
ratios to the local executor. Both run two at a time with one torch thread each, on the same configs,
registry kind (SQLite) and data.

The overhead of a run is its wall time from submission to its recorded end, less the training time its
worker reports (``train_seconds``): process or actor start, imports, loading MNIST, registry writes.

    python benchmarks/bench_cluster.py [--runs 16] [--json]

A test runs it at its smallest setting, ``--runs 2``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from symlab.labs import run_kinds
from symlab.labs.mnist.experiment import MnistConfig  # noqa: E402
from symlab.runs import supervisor  # noqa: E402
from symlab.runs.device import measured_rates  # noqa: E402
from symlab.runs.registry import Registry  # noqa: E402
from symlab.specs.run_kind import ACTIVE, FINISHED  # noqa: E402
from symlab.specs.settings import RunLimits  # noqa: E402

CONCURRENT = 2


def configs(count: int) -> list[MnistConfig]:
    return [
        MnistConfig(hidden=8, epochs=1, train_subset=500, samples=2, device="cpu", seed=seed) for seed in range(count)
    ]


def sweep(executor: str, count: int) -> dict:
    registry = Registry(run_kinds(), tempfile.mkdtemp(prefix=f"bench-{executor}-"))
    limits = RunLimits(max_concurrent_per_device=CONCURRENT, max_runs_per_hour=10_000, worker_threads=1)
    start = time.monotonic()
    submitted = {}
    for config in configs(count):
        run_id = supervisor.submit(registry, "mnist", config, limits, source="cli", executor=executor)
        submitted[run_id] = time.time()
    while any(run.status in ACTIVE for run in registry.runs()):
        supervisor.reap(registry)
        time.sleep(0.2)
    total = time.monotonic() - start
    done = registry.runs()
    assert all(run.status == FINISHED for run in done), [(r.id, r.status, r.message) for r in done]
    overheads = [run.finished - run.started - run.result["train_seconds"] for run in done]
    return {"total_s": total, "overhead_per_run_s": statistics.median(overheads)}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=16)
    parser.add_argument("--json", action="store_true", help="one JSON line: the machine's rates and the ratios")
    args = parser.parse_args(argv)
    measured = measured_rates()
    rates = measured.in_units()
    os.environ["SYMLAB_WORKER_THREADS"] = "1"  # the local workers read it; Ray actors get one CPU each
    import ray

    ray.init(num_cpus=CONCURRENT, namespace="symlab", include_dashboard=False, log_to_driver=False)
    try:
        local = sweep("local", args.runs)
        on_ray = sweep("ray", args.runs)
    finally:
        ray.shutdown()
    report = {
        "rates": rates,
        "runs": args.runs,
        "total_ratio": on_ray["total_s"] / local["total_s"],
        "overhead_ratio": on_ray["overhead_per_run_s"] / local["overhead_per_run_s"],
    }
    if args.json:
        print(json.dumps(report))
        return report
    print(measured.described())
    print(f"{args.runs} tiny runs, {CONCURRENT} at a time; ratios to the local executor:")
    print(f"  total time      ray / local = {report['total_ratio']:.2f}")
    print(f"  overhead a run  ray / local = {report['overhead_ratio']:.2f}")
    return report


if __name__ == "__main__":
    main()
