"""The CPU cost of every interaction of every lab page that computes, against its arithmetic floor.

    python benchmarks/bench_interactions.py [--repeat 3] [--labs align,symmetry,toy,modes] [--json]

For each lab page: its default link ("open"), each preset, and each control moved one step up from the
defaults (the first step a student takes; a step down costs the same; what the default link computed is stored
by then, so a switch that adds a computation, the alignment's 3-D landscape, costs that one alone), and what plays (the toy's
whole live run, played in the browser; a frame of a server's player). Each interaction's computations are the page's own: the shared tasks its
lab declares for those control values (``Lab.tasks``: what a server trains for the page, in a worker) and
what the page computes in its own run (the toy BNN's exact posterior and live steps, the mode-interpolation
fits). Each runs here in this process on one torch thread (and one BLAS thread), from nothing stored:
CPU-seconds, the best of ``--repeat`` runs. A computation shared by several interactions (a control that
changes nothing it computes) is measured once.

The floor is the computation's arithmetic (:class:`symlab.specs.tasks.Cost`: its matrix products' flops, the
elements its other array operations must touch, its random draws; each lab counts its own, next to the
code) at the rates this process measures first (:func:`symlab.serving.shared_results.measured_rates`): the ratio is CPU-s
over floor. The MNIST page computes nothing itself: a launch starts a run in its own process
(``bench_mnist.py`` measures its epochs).

Targets (the class of 30 on one small server): an alignment retrain at the defaults (the default link, a
control one step from it) ≤ 0.8 CPU-s, a symmetry-explorer retrain there ≤ 0.4 CPU-s, every other interaction
≤ 0.3 CPU-s, nothing above 3× its floor. A preset of more work than the defaults (10 000 nets, a
10 000-image MNIST subset) and the toy's table of 20 runs have their floor as their only target. The table
marks each: ok, or over.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from symlab.labs import LABS  # noqa: E402
from symlab.labs.align import experiment as align_lab  # noqa: E402
from symlab.labs.modes import experiment as modes  # noqa: E402
from symlab.labs.modes import frames as modes_frames  # noqa: E402
from symlab.labs.modes.config import SweepConfig  # noqa: E402
from symlab.labs.toy import experiment as toy  # noqa: E402
from symlab.labs.toy import live  # noqa: E402
from symlab.labs.toy import params as toy_params  # noqa: E402
from symlab.lib import two_relu  # noqa: E402
from symlab.runs.device import set_threads  # noqa: E402
from symlab.serving import shared_results  # noqa: E402
from symlab.serving.store import describe  # noqa: E402
from symlab.specs.tasks import Cost, Task, kind_of  # noqa: E402
from symlab.specs.urlstate import neighbours  # noqa: E402

RETRAIN_TARGETS = {"align": 0.8, "symmetry": 0.4}  # CPU-s of a retrain at the defaults
OTHER_TARGET, FLOOR_TARGET = 0.3, 3.0


@dataclass(frozen=True)
class Computation:
    """One thing a page computes: ``run()`` and, given its result, its arithmetic (a :class:`Cost`)."""

    name: str
    run: object
    cost: object
    prepare: object = None  # what the page has before it computes this (not counted): a map's trained pair


@dataclass
class Interaction:
    lab: str
    name: str
    computations: list[Computation] = field(default_factory=list)
    target: float | None = OTHER_TARGET  # CPU-s; None: a preset of more work than the defaults, its floor the target


# ------------------------------------------------------------------------------------------ the labs


def task_computation(task: Task) -> Computation:
    def cost(result):
        if kind_of(task.key) == "align":  # the paths actually walked: weight matching may equal W₂
            config, (_, report) = task.key[1], result
            same = all(
                np.array_equal(a, b) for a, b in zip(report.alignments["weights"].perms, report.alignments["w2"].perms)
            )
            return align_lab.training_cost(config) + align_lab.report_cost(config, 2 if same else 3)
        if kind_of(task.key) == "align_plane":  # the points the plane's grid actually has
            return align_lab.plane_cost(task.key[1], result.z.size)
        return task.cost

    # The predictive maps or a landscape are asked for once its pair is trained and stored: only its own grid is its
    # cost.
    prepare = (
        (lambda: align_lab._trained_pair(task.key[1])) if kind_of(task.key) in ("align_maps", "align_plane") else None
    )
    return Computation(
        f"{kind_of(task.key)} {describe_key(task.key)}",
        lambda: task.function(*task.args, progress=lambda *a, **k: None),
        cost,
        prepare,
    )


def describe_key(key) -> str:
    """A short name for a computation's inputs (equal inputs, equal names)."""
    return hashlib.sha1(describe(key).encode()).hexdigest()[:8]


def lab_interactions(lab) -> list[Interaction]:
    """A lab with shared tasks: its default link, presets and one-step moves of each control."""
    specs = lab.page_params(None)
    default = lab.default_values(None)
    retrain = RETRAIN_TARGETS[lab.name]
    found = [
        Interaction(lab.name, "open (default link)", [task_computation(t) for t in lab.page_tasks(default)], retrain)
    ]
    presets = lab.page_presets()
    for name in presets:
        found.append(
            Interaction(
                lab.name,
                f"preset: {name}",
                [task_computation(t) for t in lab.page_tasks({**default, **presets.state(name, specs)})],
                None,
            )
        )
    for state in neighbours(default, specs):
        moved = next(spec for spec in specs if state[spec.name] != default[spec.name])
        if isinstance(state[moved.name], (int, float)) and state[moved.name] < default[moved.name]:
            continue  # one direction: a step down costs what a step up does
        opened = {t.key for t in lab.page_tasks(default)}
        tasks = [t for t in lab.page_tasks(state) if t.key not in opened]  # the link's own are stored already
        if not tasks:
            continue  # a view of the same results (an order, a switch the computation ignores)
        found.append(
            Interaction(lab.name, f"{moved.name} → {state[moved.name]}", [task_computation(t) for t in tasks], retrain)
        )
    return found


def toy_interactions() -> list[Interaction]:
    """The tractable BNN's page: a new setting draws the exact posterior and starts both methods' starts; a
    live run trains them all the way, once for every session with the setting (the browser plays it); the table
    trains every α × seed run."""
    specs = toy_params.page_params(None)
    default = {spec.name: spec.default for spec in specs}

    def config_of(values):
        from symlab.specs import controls

        return toy.ToyConfig(**controls.config_values(toy.ToyConfig, values, toy_params.FIELDS)).validate()

    def opened(config):
        def run():
            view = toy.exact_view(config)
            trainer = two_relu.ToyTrainer(toy.starts_of("mfvi", config) + toy.starts_of("sgm", config))
            return view, trainer

        runs = 2 * config.restarts
        grid = 201**2 * config.n_train * 6 + 81**2 * config.n_train * 6  # exact posterior: evidence and display grids
        return Computation(
            f"exact posterior and new trainer {describe_key(config)}",
            run,
            lambda _: Cost(elementwise=grid) + toy.training_cost(config, runs, 0, 1),
        )

    def played(config):
        task = live.live_task(config)
        return Computation(f"live run {describe_key(config)}", lambda: live.live_run(config), lambda _: task.cost)

    config = config_of(default)
    found = [
        Interaction("toy", "open (default link)", [opened(config)]),
        # Played in the browser: the whole run, trained once for every session with the setting, then no tick.
        Interaction("toy", f"play: the whole run ({live.FRAMES} frames, all starts), once", [played(config)]),
    ]
    for name in toy_params.PRESETS:
        found.append(
            Interaction(
                "toy", f"preset: {name}", [opened(config_of({**default, **toy_params.PRESETS.state(name, specs)}))]
            )
        )
    for state in neighbours(default, [spec for spec in specs if spec.name in toy_params.FIELDS]):
        moved = next(spec for spec in specs if state[spec.name] != default[spec.name])
        if (
            isinstance(state[moved.name], (int, float))
            and not isinstance(state[moved.name], bool)
            and state[moved.name] < default[moved.name]
        ):
            continue
        found.append(Interaction("toy", f"{moved.name} → {state[moved.name]}", [opened(config_of(state))]))
    alphas = tuple(float(a) for a in default["alphas"].split(","))
    seeds = max(1, 20 // len(alphas))  # the hosted cap: 20 α × seed runs
    task = toy.table_task(alphas, seeds, config)
    found.append(Interaction("toy", f"Run the table ({len(alphas)} α × {seeds} seeds)", [task_computation(task)], None))
    return found


def modes_interactions() -> list[Interaction]:
    """The mode-interpolation page: a σ or d move fits the exact path for every α (and α*), an α move one α,
    and the animation replays Adam from q's start for the current α. These are iterative solves: their
    floor counts the quadrature nodes each iteration evaluates, as the solves take them
    (:func:`counted_nodes`)."""
    from symlab.labs.modes import params as modes_params

    sigma, dim, alpha = 1.0, 2, 3.0

    def sweep(sigma, dim):
        config = SweepConfig(sigma=sigma, dim=dim)
        alphas = modes.sweep_alphas(config)
        return counted(
            f"exact sweep σ={sigma} d={dim}",
            lambda: (
                modes.fit_exact(alphas, sigma, dim),
                modes.forward_kl_optimum(alphas, sigma, dim),
                modes.exact_threshold(sigma, config.largest_alpha),
            ),
        )

    def at(alpha, sigma):
        return counted(f"optimum at α={alpha} σ={sigma}", lambda: modes.fit_exact([alpha], sigma))

    def path(alpha, sigma):  # Adam's path and its frames, as the page computes them for its player
        return counted(f"Adam path α={alpha} σ={sigma}", lambda: modes_frames.path_run(alpha, sigma))

    step = modes_params.ALPHA.step
    return [
        Interaction("modes", "open (default link)", [sweep(sigma, dim), at(alpha, sigma), path(alpha, sigma)]),
        Interaction("modes", f"alpha → {alpha + step:g}", [at(alpha + step, sigma), path(alpha + step, sigma)]),
        Interaction("modes", "sigma → 1.05", [sweep(1.05, dim), at(alpha, 1.05), path(alpha, 1.05)]),
    ]


# Element operations per quadrature node of one evaluation of the mode-interpolation objective: the mixture's
# log-density (two squares, an exponential, a log-sum), its responsibilities, the KL, gradient and Hessian terms.
MODES_NODE_OPERATIONS = 30


def counted(name: str, run) -> Computation:
    """A mode-interpolation solve whose floor is the nodes its objective evaluations touched."""
    nodes = [0]

    def counting(function):
        def wrapped(*args, **kwargs):
            nodes[0] += int(
                np.size(np.broadcast_to(np.asarray(args[0], float)[..., None], (*np.shape(args[0]), modes._EPS.size)))
            )
            return function(*args, **kwargs)

        return wrapped

    def measured():
        nodes[0] = 0
        originals = {name: getattr(modes, name) for name in ("_kl_grad_hess", "_standard_kl_and_grad")}
        for attribute, function in originals.items():
            setattr(modes, attribute, counting(function))
        try:
            return run(), nodes[0]
        finally:
            for attribute, function in originals.items():
                setattr(modes, attribute, function)

    return Computation(name, measured, lambda result: Cost(elementwise=result[1] * MODES_NODE_OPERATIONS))


# ------------------------------------------------------------------------------------------ measuring


def cpu_seconds(function, repeat: int, prepare=None) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        if prepare is not None:
            prepare()
        started = time.process_time()
        result = function()
        best = min(best, time.process_time() - started)
    return best, result


def measure(interactions: list[Interaction], repeat: int, rates: shared_results.Rates) -> list[dict]:
    measured: dict[str, tuple[float, float]] = {}
    rows = []
    for interaction in interactions:
        seconds = floor = 0.0
        for computation in interaction.computations:
            if computation.name not in measured:
                spent, result = cpu_seconds(computation.run, repeat, computation.prepare)
                measured[computation.name] = (spent, computation.cost(result).floor_seconds(rates))
            seconds += measured[computation.name][0]
            floor += measured[computation.name][1]
        target = interaction.target
        ratio = seconds / floor if floor > 0 else None
        rows.append(
            {
                "lab": interaction.lab,
                "interaction": interaction.name,
                "cpu_s": seconds,
                "floor_s": floor,
                "ratio": ratio,
                "target_s": target,
                "within_target": target is None or seconds <= target,
                "within_floor": ratio is None or ratio <= FLOOR_TARGET,
            }
        )
        print(f"  {interaction.lab:9s} {interaction.name[:48]:48s} {seconds:7.3f} CPU-s", file=sys.stderr, flush=True)
    return rows


def report(rows: list[dict], rates: shared_results.Rates) -> str:
    out = [
        f"Rates on one thread: matrix products {rates.matmul_flops / 1e9:.0f} GFLOP/s, array elements "
        f"{rates.elementwise / 1e9:.2f} G/s, normal draws {rates.normals / 1e6:.0f} M/s. CPU-s: best of the repeats.",
        "",
        f"{'lab':9s} {'interaction':50s} {'CPU-s':>7s} {'floor s':>8s} {'ratio':>6s} {'target':>7s}  marks",
        "─" * 100,
    ]
    for row in rows:
        ratio = "—" if row["ratio"] is None else f"{row['ratio']:.1f}×"
        marks = ("ok" if row["within_target"] else "OVER TARGET") + ("" if row["within_floor"] else ", OVER 3× FLOOR")
        target = "—" if row["target_s"] is None else f"{row['target_s']:.1f}s"
        out.append(
            f"{row['lab']:9s} {row['interaction'][:50]:50s} {row['cpu_s']:7.3f} {row['floor_s']:8.4f} "
            f"{ratio:>6s} {target:>7s}  {marks}"
        )
    over = [row for row in rows if not (row["within_target"] and row["within_floor"])]
    out.append(f"\n{len(rows) - len(over)} of {len(rows)} interactions within their targets.")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each computation; the best counts (default 3)")
    parser.add_argument("--labs", default="align,symmetry,toy,modes", help="which labs (default: all that compute)")
    parser.add_argument("--json", action="store_true", help="also one JSON line with every row")
    args = parser.parse_args(argv)
    set_threads(1)  # torch's and numpy's BLAS
    wanted = [name.strip() for name in args.labs.split(",") if name.strip()]
    rates = shared_results.measured_rates()
    interactions: list[Interaction] = []
    by_name = {lab.name: lab for lab in LABS}
    for name in wanted:
        if name == "toy":
            interactions += toy_interactions()
        elif name == "modes":
            interactions += modes_interactions()
        elif name in by_name and by_name[name].tasks:
            interactions += lab_interactions(by_name[name])
        else:
            parser.error(f"--labs: {name!r} computes nothing to measure (choose from align, symmetry, toy, modes)")
    rows = measure(interactions, args.repeat, rates)
    print(report(rows, rates))
    if args.json:
        print(json.dumps({"rates": vars(rates), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
