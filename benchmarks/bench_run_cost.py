"""A background run's CPU time against the estimate the server's cap judges it by.

    python benchmarks/bench_run_cost.py [--rows NAME,...] [--json]

Each row trains one small run of a lab that runs in the registry (MNIST; the posterior-approximation comparison)
in this process on one torch thread (and one BLAS thread), as a hosted server's workers do (worker_threads=1), for
a few seconds: its training, evaluations and diagnoses, not the data's loading. The rows pair settings that differ in
one thing the estimate must follow: batch 1 against 128 (each step's fixed cost), 1 against 100 prediction samples,
evaluating after every epoch against every tenth, one hidden layer against two; then the estimators, SGM's two
estimates of I, σ by Adam, a wide net on few images, and the comparison on both architectures. The "upload" rows
analyse an uploaded network of 2 to 65 layers (the symmetry explorer's), and the "upload pair" rows align two (the
alignment lab's): a hosted server refuses an upload at once where its estimate is over the upload's CPU cap. Their
MNIST data's loading is included.

The estimate is the run's ``config.work()`` (:class:`symlab.specs.settings.Work`: its parts' arithmetic, each
step's fixed cost as elementwise work) at the rates this process measures first
(:func:`symlab.runs.device.measured_rates`); the ratio is measured CPU-seconds over it. Target: every ratio within
0.5–2, so that a cap of N estimated CPU-minutes lets through no run of more than about 2N. A machine busy with
other work slows the measured runs more than the rates measured once (CPU time still counts only this process's).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from symlab.labs.align import experiment as align  # noqa: E402
from symlab.labs.methods import experiment as methods  # noqa: E402
from symlab.labs.mnist import experiment as mnist  # noqa: E402
from symlab.labs.symmetry import experiment as symmetry  # noqa: E402
from symlab.lib import mnist_data  # noqa: E402
from symlab.runs.device import measured_rates, set_threads  # noqa: E402
from symlab.specs.settings import Part, Work  # noqa: E402

LOW, HIGH = 0.5, 2.0  # measured / estimated
SMALL = dict(device="cpu", init_sd=0.05)


@dataclass(frozen=True)
class UploadedNetwork:
    """The symmetry explorer's analysis of an uploaded network of these layer sizes (random weights), which a hosted
    server refuses at once where its estimate is over the upload's CPU cap."""

    sizes: tuple[int, ...]
    seed: int = 0

    def work(self) -> Work:
        hidden = self.sizes[1:-1]
        cost = symmetry.network_analysis_cost(self.sizes)
        return Work(width=max(hidden), depth=len(hidden), epochs=0, parts=(Part("analysing it", cost),))

    def file(self) -> bytes:
        generator, state = torch.Generator().manual_seed(self.seed), {}
        for index, (d_in, d_out) in enumerate(zip(self.sizes, self.sizes[1:])):
            state[f"{2 * index}.weight"] = torch.randn(d_out, d_in, generator=generator) * d_in**-0.5
            state[f"{2 * index}.bias"] = torch.randn(d_out, generator=generator) * 0.1
        buffer = io.BytesIO()
        torch.save(state, buffer)
        return buffer.getvalue()


@dataclass(frozen=True)
class UploadedPair(UploadedNetwork):
    """The alignment lab's analysis of two uploaded networks of these layer sizes (the page's default path)."""

    path_points: int = 11
    samples: int = 16
    starts: int = 1

    def work(self) -> Work:
        hidden = self.sizes[1:-1]
        cost = align.pair_alignment_cost(self.sizes, self.path_points, 1, self.starts)  # point networks: one sample
        return Work(width=max(hidden), depth=len(hidden), epochs=0, parts=(Part("aligning them", cost),))


@dataclass(frozen=True)
class Row:
    name: str
    config: object  # an MnistConfig, a MethodsConfig, an UploadedNetwork or an UploadedPair


ROWS = (
    Row("batch 128", mnist.MnistConfig(hidden=256, train_subset=4000, epochs=2, samples=10, **SMALL)),
    Row("batch 128 on 20 000 images", mnist.MnistConfig(hidden=400, train_subset=20_000, epochs=1, samples=1, **SMALL)),
    Row("batch 1", mnist.MnistConfig(hidden=256, train_subset=300, epochs=2, batch_size=1, samples=10, **SMALL)),
    Row("samples 1", mnist.MnistConfig(hidden=512, train_subset=1000, epochs=2, samples=1, **SMALL)),
    Row("samples 100", mnist.MnistConfig(hidden=512, train_subset=1000, epochs=1, samples=100, **SMALL)),
    Row("every 1 of 20 epochs", mnist.MnistConfig(hidden=128, train_subset=500, epochs=20, samples=10, **SMALL)),
    Row(
        "every 10 of 20 epochs",
        mnist.MnistConfig(hidden=128, train_subset=500, epochs=20, eval_every=10, samples=10, **SMALL),
    ),
    Row("depth 1", mnist.MnistConfig(hidden=512, train_subset=2000, epochs=1, samples=4, **SMALL)),
    Row("depth 2", mnist.MnistConfig(hidden=512, depth=2, train_subset=2000, epochs=1, samples=4, **SMALL)),
    Row("local estimator", mnist.MnistConfig(hidden=256, train_subset=4000, epochs=2, estimator="local", **SMALL)),
    Row("flipout estimator", mnist.MnistConfig(hidden=256, train_subset=4000, epochs=2, estimator="flipout", **SMALL)),
    Row("σ by Adam", mnist.MnistConfig(hidden=256, train_subset=4000, epochs=2, sd_fit="adam", **SMALL)),
    Row("SGM InfoNCE K=16", mnist.MnistConfig(hidden=256, train_subset=4000, epochs=2, method="sgm", K=16, **SMALL)),
    Row(
        "SGM blocks B=4",
        mnist.MnistConfig(hidden=256, train_subset=4000, epochs=2, method="sgm", mi="blocks", block_size=4, **SMALL),
    ),
    Row(
        "width 1024 on 500 images",
        mnist.MnistConfig(hidden=1024, train_subset=500, epochs=20, eval_every=10, samples=10, **SMALL),
    ),
    Row(
        "comparison convnet",
        methods.MethodsConfig(reference=20, samples=10, modes=2, epochs=1, train_size=1000, test_size=500),
    ),
    Row(
        "comparison MLP",
        methods.MethodsConfig(
            architecture="mlp", reference=20, samples=10, modes=2, epochs=1, train_size=1000, test_size=500
        ),
    ),
    Row("upload 784-2048-10", UploadedNetwork((784, 2048, 10))),
    Row("upload 4 x 1024", UploadedNetwork((784, 1024, 1024, 1024, 1024, 10))),
    Row("upload 16 x 480", UploadedNetwork((784, *[480] * 16, 10))),
    Row("upload 2 x 3072", UploadedNetwork((784, 3072, 3072, 10))),
    Row("upload 63 x 480", UploadedNetwork((784, *[480] * 63, 10))),
    Row("upload pair 784-1024-10", UploadedPair((784, 1024, 10))),
    Row("upload pair 784-4096-10", UploadedPair((784, 4096, 10))),
    Row("upload pair 4 x 512", UploadedPair((784, 512, 512, 512, 512, 10))),
    Row("upload pair 2 x 1024 3 starts", UploadedPair((784, 1024, 1024, 10), starts=3)),
)


def train(config, data) -> float:
    """CPU-seconds of the whole run of ``config``, its data prepared beforehand (an upload's: its file)."""
    if isinstance(config, UploadedPair):
        pair = [("a.pt", config.file()), ("b.pt", UploadedNetwork(config.sizes, seed=1).file())]
        started = time.process_time()
        align.uploaded_pair(pair, config.path_points, config.samples, 0, config.starts)
        return time.process_time() - started
    if isinstance(config, UploadedNetwork):
        upload = [("network.pt", config.file())]
        started = time.process_time()
        symmetry.uploaded_network(upload, "max_in")
        return time.process_time() - started
    if isinstance(config, mnist.MnistConfig):
        device = torch.device("cpu")
        trainer = mnist.MnistTrainer(config, mnist.prepare_tensors(data, config, device), device)
        started = time.process_time()
        while trainer.epoch < config.epochs:
            trainer.train_epoch()
        return time.process_time() - started
    comparison = methods.Comparison(config, methods.prepare_data(data, config))
    started = time.process_time()
    while not comparison.finished:
        comparison.run_stage()
    return time.process_time() - started


def measure(rows, rates) -> list[dict]:
    data = mnist_data.load_mnist(None)
    found = []
    for row in rows:
        work = row.config.work()
        estimated = work.seconds(rates)
        measured = train(row.config, data)
        parts = {what: round(seconds, 3) for what, seconds in work.part_seconds(rates).items()}
        found.append(
            {
                "row": row.name,
                "cpu_s": measured,
                "estimated_s": estimated,
                "ratio": measured / estimated,
                "parts": parts,
                "within": LOW <= measured / estimated <= HIGH,
            }
        )
        print(
            f"{row.name:28s} {measured:7.2f} {estimated:9.2f} {measured / estimated:6.2f}  "
            f"{'ok' if found[-1]['within'] else 'OUTSIDE'}",
            flush=True,
        )
    return found


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="", help="comma-separated row names (default: all)")
    parser.add_argument("--json", action="store_true", help="also one JSON line with every row")
    args = parser.parse_args(argv)
    wanted = [name.strip() for name in args.rows.split(",") if name.strip()]
    unknown = sorted(set(wanted) - {row.name for row in ROWS})
    if unknown:
        parser.error(f"--rows: no row {', '.join(unknown)} (choose from {', '.join(row.name for row in ROWS)})")
    set_threads(1)  # torch's and numpy's BLAS, as a hosted server's workers
    rates = measured_rates()
    print(
        f"rates: {rates.matmul_flops / 1e9:.1f} GFLOP/s, {rates.elementwise / 1e9:.2f} G elements/s, "
        f"{rates.normals / 1e6:.0f} M normals/s (one thread)\n"
        f"{'row':28s} {'CPU-s':>7s} {'estimate':>9s} {'ratio':>6s}"
    )
    rows = measure([row for row in ROWS if not wanted or row.name in wanted], rates)
    inside = sum(row["within"] for row in rows)
    print(f"\n{inside} of {len(rows)} rows within {LOW:g}–{HIGH:g}× their estimate.")
    report = {"rates": vars(rates), "rows": rows}
    if args.json:
        print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
