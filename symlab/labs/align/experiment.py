"""The alignment lab's experiment (Rossi et al. 2023; docs/science.md, § Alignment lab): train two mean-field
posteriors of the same MLP from different seeds, align the second to the first, and compare the
loss along the interpolation path before and after.

Both posteriors train at once, as one batched tensor program: the data are shared, the
initialisations and the weight noise are not. Tasks: two interleaved half moons (2-D, two
classes) or a subset of MNIST.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from symlab.lib import align, bnn, gaussian, mlp, mnist_data, weights
from symlab.lib.adam import Adam
from symlab.lib.gaussian import DiagonalGaussian
from symlab.lib.layout import multiply_adds
from symlab.lib.mnist_data import data_directory, load_mnist_once
from symlab.specs import settings
from symlab.specs.results import TrainingDiverged, in_memory
from symlab.specs.surfaces import Surface, on_surface
from symlab.specs.tasks import Cost, Task, stored_result

from .config import MNIST_TEST, MOONS_TEST, AlignConfig

# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------

MOONS_CENTRE = np.array([0.5, 0.25])
MOONS_SCALE = np.array([0.87, 0.5])  # the noise-free moons' standard deviation per axis, rounded


def make_moons(points: int, noise: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved half circles (scikit-learn's recipe), centred and scaled to unit spread per axis."""
    upper = points // 2
    angles = rng.uniform(0.0, math.pi, points)
    labels = (np.arange(points) >= upper).astype(np.int64)
    x = np.where(labels == 0, np.cos(angles), 1.0 - np.cos(angles))
    y = np.where(labels == 0, np.sin(angles), 0.5 - np.sin(angles))
    xy = np.stack([x, y], axis=1) + noise * rng.standard_normal((points, 2))
    order = rng.permutation(points)
    return ((xy - MOONS_CENTRE) / MOONS_SCALE)[order], labels[order]


@dataclass(frozen=True)
class Dataset:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def load_task(config: AlignConfig, mnist=None) -> Dataset:
    """The training and test sets: fresh moons from the seed, or MNIST (``mnist``: a loaded
    :class:`symlab.lib.mnist_data.Mnist`) pixels scaled to [0, 1], its first ``MNIST_TEST`` test images."""
    if config.task == "moons":
        rng = np.random.default_rng([config.seed, 0])
        train, test = make_moons(config.train_size, config.noise, rng), make_moons(MOONS_TEST, config.noise, rng)
    else:
        if mnist is None:
            raise ValueError("the mnist task needs the MNIST data")
        train = (mnist.train_images[: config.train_size] / 255.0, mnist.train_labels[: config.train_size])
        test = (mnist.test_images[:MNIST_TEST] / 255.0, mnist.test_labels[:MNIST_TEST])
    tensors = [
        torch.tensor(np.asarray(a), dtype=torch.float32 if i % 2 == 0 else torch.int64)
        for i, a in enumerate((*train, *test))
    ]
    return Dataset(*tensors)


# ---------------------------------------------------------------------------------------------
# Two MFVI posteriors, trained together
# ---------------------------------------------------------------------------------------------


@dataclass
class PosteriorPair:
    config: AlignConfig
    qa: DiagonalGaussian
    qb: DiagonalGaussian
    elbo: np.ndarray  # [recorded steps, 2]: ELBO per training point, both posteriors
    elbo_steps: np.ndarray  # the steps at which it was recorded
    seconds: float


def _init_pair(sizes, init_sd: float, seeds) -> DiagonalGaussian:
    """Means like torch.nn.Linear (U(±1/√fan_in)), one initialisation per seed, stacked: a batch of
    two posteriors, means and log-sds ``[2, n_params]``."""
    layout = mlp.Layout(sizes)
    pair = [gaussian.init_posterior(layout, init_sd, torch.Generator().manual_seed(s)) for s in seeds]
    return DiagonalGaussian(layout, torch.stack([q.mean for q in pair]), torch.stack([q.log_sd for q in pair]))


def _to_gaussian(q: DiagonalGaussian, index: int) -> DiagonalGaussian:
    """Posterior ``index`` of the pair, detached, in float64 numpy."""

    def arr(t):
        return t[index].detach().double().numpy()

    return DiagonalGaussian(q.layout, arr(q.mean), arr(q.log_sd))


class PairStep:
    """One Adam step on both posteriors' −ELBO per training point, NLL(ω) + KL(q ‖ p)/N at one weight
    draw ω = μ + σ ⊙ ε per posterior: the gradient written out (:func:`symlab.lib.mlp.cross_entropy_gradient`
    batched over the pair, :func:`symlab.lib.bnn.negative_elbo_gradients`) and Adam on one flat tensor
    (:class:`symlab.lib.adam.Adam`), every array and view kept from step to step."""

    def __init__(self, q: DiagonalGaussian, lr: float, prior_scale: float, n_train: int):
        layout, count = q.layout, q.layout.n_params
        self.layout, self.prior_scale, self.n_train = layout, prior_scale, n_train
        self.theta = torch.cat([q.mean, q.log_sd], -1)  # [2, 2 · n_params]: means, then log σ, per posterior
        self.mean, self.log_sd = self.theta[:, :count], self.theta[:, count:]
        self.grad = torch.empty_like(self.theta)
        self.grad_mean, self.grad_log_sd = self.grad[:, :count], self.grad[:, count:]
        self.sd, self.perturbation, self.w = (torch.empty_like(self.mean) for _ in range(3))
        self.w_layers, self.grad_layers = layout.layers(self.w), layout.layers(self.grad_mean)
        self.adam = Adam(self.theta, lr)

    def __call__(self, x: torch.Tensor, y: torch.Tensor, noise: torch.Tensor) -> list[float]:
        """One step on the minibatch ``(x, y)`` with the standard normal draws ``noise`` (``[2, n_params]``;
        no step if the loss is not finite); the −ELBO per training point of each posterior."""
        torch.exp(self.log_sd, out=self.sd)
        torch.add(self.mean, torch.mul(self.sd, noise, out=self.perturbation), out=self.w)
        nll = mlp.cross_entropy_gradient(self.w_layers, x, y, self.grad_layers)
        kl = gaussian.kl_to_prior(self.mean, self.log_sd, self.prior_scale, self.sd)
        loss = nll.add_(kl, alpha=1 / self.n_train).tolist()
        if all(map(math.isfinite, loss)):
            bnn.negative_elbo_gradients(
                self.grad_mean,
                self.perturbation,
                self.mean,
                self.sd,
                self.prior_scale,
                self.n_train,
                out=self.grad_log_sd,
            )
            self.adam.step(self.grad)
        return loss

    def posterior(self) -> DiagonalGaussian:
        return DiagonalGaussian(self.layout, self.mean, self.log_sd)


DRAWS_AT_ONCE = 64  # training steps whose minibatches and weight noise are drawn in one call each


@torch.inference_mode()  # no autograd bookkeeping: a fifth of a step's time
def train_pair(config: AlignConfig, data: Dataset, progress=None) -> PosteriorPair:
    """Train q_A and q_B by maximising the ELBO E_q[log p(D|w)] − KL(q ‖ p) with Adam (one weight
    sample per step, log-sd parameterisation). ``progress(step, steps, elbo_steps, elbo)`` about
    50 times, with the steps and the [k, 2] per-point ELBO (mean since the last record) so far.
    Raises :class:`TrainingDiverged` on a non-finite ELBO."""
    config.validate()
    start = time.perf_counter()
    q = _init_pair(config.sizes, config.init_sd, [(config.seed * 2 + 1) * 7919, (config.seed * 2 + 2) * 7919])
    n = data.x_train.shape[0]
    step_pair = PairStep(q, config.lr, config.prior_scale, n)
    g = torch.Generator().manual_seed(config.seed * 2 + 3)
    batch = min(config.batch, n)
    every = max(1, config.steps // 50)
    recorded: list[np.ndarray] = []
    steps_seen: list[int] = []
    running = np.zeros(2)
    for step in range(1, config.steps + 1):
        drawn = (step - 1) % DRAWS_AT_ONCE
        if drawn == 0:
            block = min(DRAWS_AT_ONCE, config.steps - step + 1)
            batches = torch.randint(0, n, (block, batch), generator=g)
            noise = torch.randn(block, *q.mean.shape, generator=g)
        idx = batches[drawn]
        loss = step_pair(data.x_train[idx], data.y_train[idx], noise[drawn])
        if not all(map(math.isfinite, loss)):
            which = " and ".join(name for name, value in zip("AB", loss) if not math.isfinite(value))
            raise TrainingDiverged(
                f"training diverged at step {step} (posterior {which}: the ELBO is not finite); lower the learning rate"
            )
        running += loss
        if step % every == 0 or step == config.steps:
            recorded.append(-running / (step - (steps_seen[-1] if steps_seen else 0)))
            steps_seen.append(step)
            running = np.zeros(2)
            if progress is not None:
                progress(step, config.steps, np.array(steps_seen), np.array(recorded))
    q = step_pair.posterior()
    return PosteriorPair(
        config,
        _to_gaussian(q, 0),
        _to_gaussian(q, 1),
        np.array(recorded),
        np.array(steps_seen),
        time.perf_counter() - start,
    )


# ---------------------------------------------------------------------------------------------
# Alignment and the barrier
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlignmentReport:
    """The barrier and distances along the three paths. JSON (:func:`symlab.specs.results.to_json`) leaves out
    the alignments, the aligned ends and the path's weight noise, which the page draws from."""

    config: AlignConfig
    sizes: list[int]
    barrier_before: float
    barrier_after: float
    barrier_weight_matching: float
    barrier_before_se: float  # Monte-Carlo standard errors of the barriers (align.barrier_error)
    barrier_after_se: float
    w2_before: float
    w2_after: float
    w2_weight_matching: float
    loss_a: float
    loss_b: float
    accuracy_a: float
    accuracy_b: float
    sweeps: int
    converged: bool
    starts_tried: int  # descents run per objective (one with one hidden layer)
    best_start: str  # the descent W₂'s result came from
    w2_history: list[float]
    permutations: list[list[int]]
    summary: dict  # path -> its distances, barriers and units moved
    paths: dict  # path -> t, loss and accuracy along it
    train_seconds: float
    align_seconds: float
    elbo_final: list[float]
    alignments: dict = in_memory()  # "weights", "w2" -> align.Alignment
    ends: dict = in_memory()  # path -> q_B as that path's end
    noise: torch.Tensor = in_memory()  # the standard normal draws shared by every point of every path


@dataclass(frozen=True)
class Comparison:
    """q_B aligned to q_A both ways, and the three paths from q_A: the core of every alignment report."""

    alignments: dict  # "weights", "w2" -> align.Alignment
    ends: dict  # path -> q_B as that path's end
    paths: dict  # path -> t, loss and accuracy along it (empty without data)
    summary: dict  # path -> its distances, barriers (None without data) and units moved
    seconds: float  # aligning both ways


def compare(
    qa: DiagonalGaussian,
    qb: DiagonalGaussian,
    ts,
    noise,
    data: Dataset | None,
    progress=None,
    starts: int = align.DEFAULT_STARTS,
) -> Comparison:
    """Align q_B to q_A by weight matching and by W₂ (``starts`` descents each), and, given ``data``, evaluate the
    loss and accuracy of the marginal predictive (test set) along the three paths."""
    started = time.perf_counter()
    alignments = {
        name: align.align(qa, qb, objective, starts=starts) for name, objective in (("weights", "means"), ("w2", "w2"))
    }
    seconds = time.perf_counter() - started
    ends = {"before": qb, **{name: align.permute(qb, a.perms) for name, a in alignments.items()}}
    paths = align.paths(qa, ends, ts, noise, data.x_test, data.y_test, progress) if data is not None else {}
    influences = {name: path.pop("influence") for name, path in paths.items()}  # the draws': for errors only
    summary = {}
    for name, end in ends.items():
        summary[name] = {
            "w2": align.w2_distance(qa, end),
            "mean_distance": align.mean_distance(qa, end),
            "layer_w2": np.sqrt(align.layer_distances(qa, end, "w2")).tolist(),
            "barrier": align.barrier(ts, paths[name]["loss"]) if paths else None,
            "barrier_se": align.barrier_error(ts, paths[name]["loss"], influences[name]) if paths else None,
            "accuracy_barrier": align.barrier(ts, paths[name]["accuracy"], higher_is_worse=False) if paths else None,
            "units_moved": [int(np.sum(p != np.arange(len(p)))) for p in alignments[name].perms]
            if name in alignments
            else [0] * len(qa.hidden),
        }
    return Comparison(alignments, ends, paths, summary, seconds)


def alignment_report(pair: PosteriorPair, data: Dataset, progress=None) -> AlignmentReport:
    """:func:`compare` for the trained pair, on the task's test set."""
    config = pair.config
    ts = np.linspace(0.0, 1.0, config.path_points)
    noise = align.standard_noise(config.sizes, config.samples, config.seed * 2 + 4)
    found = compare(pair.qa, pair.qb, ts, noise, data, progress, config.starts)
    summary, paths, w2 = found.summary, found.paths, found.alignments["w2"]
    return AlignmentReport(
        config=config,
        sizes=list(config.sizes),
        barrier_before=summary["before"]["barrier"],
        barrier_after=summary["w2"]["barrier"],
        barrier_weight_matching=summary["weights"]["barrier"],
        barrier_before_se=summary["before"]["barrier_se"],
        barrier_after_se=summary["w2"]["barrier_se"],
        w2_before=summary["before"]["w2"],
        w2_after=summary["w2"]["w2"],
        w2_weight_matching=summary["weights"]["w2"],
        loss_a=paths["before"]["loss"][0],
        loss_b=paths["before"]["loss"][-1],
        accuracy_a=paths["before"]["accuracy"][0],
        accuracy_b=paths["before"]["accuracy"][-1],
        sweeps=w2.sweeps,
        converged=w2.converged,
        starts_tried=w2.starts,
        best_start=w2.start,
        w2_history=[math.sqrt(max(v, 0.0)) for v in w2.history],
        permutations=[p.tolist() for p in w2.perms],
        summary=summary,
        paths=paths,
        train_seconds=pair.seconds,
        align_seconds=found.seconds,
        elbo_final=pair.elbo[-1].tolist(),
        alignments=found.alignments,
        ends=found.ends,
        noise=noise,
    )


PAIR_FILES = {"q_a": "q_A", "q_b": "q_B", "q_b_aligned": "q_B aligned to q_A (W₂)"}


def pair_files(pair: PosteriorPair, report: AlignmentReport, stems=tuple(PAIR_FILES)) -> dict[str, bytes]:
    """The trained pair as safetensors files (:func:`symlab.lib.weights.posterior_bytes`), by file stem
    (those in ``stems``): q_A, q_B and q_B permuted by its W₂ alignment, each with the run's config as metadata."""
    posteriors = {"q_a": pair.qa, "q_b": pair.qb, "q_b_aligned": report.ends["w2"]}
    config = dataclasses.asdict(pair.config)
    return {
        stem: weights.posterior_bytes(
            posteriors[stem].means,
            posteriors[stem].sds,
            {
                "config": config,
                "posterior": PAIR_FILES[stem],
                "w2_to_q_a": align.w2_distance(pair.qa, posteriors[stem]),
            },
        )
        for stem in stems
    }


def export_directory(directory) -> Path:
    """``directory``, made if need be; :class:`~symlab.lib.weights.WeightsError` if it cannot be."""
    directory = Path(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as error:  # ValueError: a NUL in the name
        raise weights.WeightsError(
            f"cannot create the directory {str(directory)[:200]!r} ({getattr(error, 'strerror', None) or error})"
        ) from None
    return directory


def export_pair(pair: PosteriorPair, report: AlignmentReport, directory) -> list[Path]:
    """Write :func:`pair_files` into ``directory`` as <stem>.safetensors."""
    directory = export_directory(directory)
    return [
        weights.write_atomically(directory / f"{stem}.safetensors", data)
        for stem, data in pair_files(pair, report).items()
    ]


# ---------------------------------------------------------------------------------------------
# Two networks of one's own (files: the page's uploads, the command line's --weights A B)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NetworkAlignment:
    """:func:`compare` for two networks read from files (point estimates: σ = 0, so W₂ is the Euclidean
    distance). The path is evaluated only where there is data: MNIST test images for 784 → … → 10 nets, scaled
    the way q_A classifies best (``mnist_scaling``)."""

    names: list[str]
    structure: str
    sizes: list[int]
    posterior: bool
    w2_before: float
    w2_after: float
    w2_weight_matching: float
    barrier_before: float | None
    barrier_after: float | None
    barrier_weight_matching: float | None
    barrier_before_se: float | None
    barrier_after_se: float | None
    loss_a: float | None
    loss_b: float | None
    accuracy_a: float | None
    accuracy_b: float | None
    mnist_scaling: str | None
    sweeps: int
    converged: bool
    starts_tried: int
    best_start: str
    permutations: list[list[int]]
    summary: dict
    paths: dict
    align_seconds: float
    # The networks, which stay in the process that read them (None in the report a page is sent).
    qa: DiagonalGaussian | None = in_memory()
    alignments: dict | None = in_memory()
    ends: dict | None = in_memory()


def network_data(network: weights.Network, mnist) -> tuple[Dataset | None, str | None]:
    """MNIST's first test images, scaled as ``network`` classifies best, for a 784 → … → 10 net; else none."""
    if mnist is None or not weights.is_mnist_classifier(network.sizes):
        return None, None
    _, scaling = weights.mnist_accuracy(network.means, mnist, MNIST_TEST)
    x = torch.from_numpy(weights.INPUT_SCALINGS[scaling](np.asarray(mnist.test_images[:MNIST_TEST], dtype=np.float32)))
    y = torch.from_numpy(np.asarray(mnist.test_labels[:MNIST_TEST], dtype=np.int64))
    return Dataset(x[:0], y[:0], x, y), scaling


def align_networks(
    a: weights.Network,
    b: weights.Network,
    mnist=None,
    path_points: int = 21,
    samples: int = 32,
    seed: int = 0,
    progress=None,
    starts: int = align.DEFAULT_STARTS,
) -> NetworkAlignment:
    weights.check_pair(a, b)
    qa, qb = a.gaussian(), b.gaussian()
    data, scaling = network_data(a, mnist)
    ts = np.linspace(0.0, 1.0, path_points)
    noise = align.standard_noise(a.sizes, samples if a.is_posterior else 1, seed)
    found = compare(qa, qb, ts, noise, data, progress, starts)
    summary, paths, w2 = found.summary, found.paths, found.alignments["w2"]

    def end_value(path: str, key: str, index: int):
        return paths[path][key][index] if paths else None

    return NetworkAlignment(
        names=[a.name, b.name],
        structure=a.describe(),
        sizes=list(a.sizes),
        posterior=a.is_posterior,
        w2_before=summary["before"]["w2"],
        w2_after=summary["w2"]["w2"],
        w2_weight_matching=summary["weights"]["w2"],
        barrier_before=summary["before"]["barrier"],
        barrier_after=summary["w2"]["barrier"],
        barrier_weight_matching=summary["weights"]["barrier"],
        barrier_before_se=summary["before"]["barrier_se"],
        barrier_after_se=summary["w2"]["barrier_se"],
        loss_a=end_value("before", "loss", 0),
        loss_b=end_value("before", "loss", -1),
        accuracy_a=end_value("before", "accuracy", 0),
        accuracy_b=end_value("before", "accuracy", -1),
        mnist_scaling=scaling,
        sweeps=w2.sweeps,
        converged=w2.converged,
        starts_tried=w2.starts,
        best_start=w2.start,
        permutations=[p.tolist() for p in w2.perms],
        summary=summary,
        paths=paths,
        align_seconds=found.seconds,
        qa=qa,
        alignments=found.alignments,
        ends=found.ends,
    )


def network_files(a: weights.Network, b: weights.Network, report: NetworkAlignment) -> dict[str, bytes]:
    """What the page downloads and ``align --weights A B --export DIR`` writes: B permuted by its W₂ alignment
    (safetensors, bias-free layers kept bias-free) and the permutations, one row per unit of each hidden layer."""
    return {
        "b_aligned.safetensors": aligned_file(a.name, b, report.permutations, report.w2_after),
        "permutations.csv": permutations_csv(report.permutations),
    }


def aligned_file(a_name: str, b: weights.Network, permutations, w2_to_a: float) -> bytes:
    """B with its hidden units permuted by ``permutations`` (its W₂ alignment to A), as safetensors."""
    aligned = align.permute(b.gaussian(), [np.asarray(perm) for perm in permutations])
    metadata = {"aligned_to": a_name, "source": b.name, "w2_to_a": w2_to_a}
    return weights.posterior_bytes(aligned.means, aligned.sds if b.is_posterior else None, metadata, b.has_bias)


# ---------------------------------------------------------------------------------------------
# Uploads (symlab.serving.uploads runs these in a process of their own)
# ---------------------------------------------------------------------------------------------

UPLOAD_MAX_WIDTH = 8192  # units in a hidden layer: each assignment costs width³, its distances width²
ASSIGNMENT_UNITS = 64  # of each hidden layer's assignment, the page draws this many units of q_A


@dataclass
class UploadedPair:
    """What the page shows of two uploaded networks aligned: the alignment (without the networks themselves),
    each file's layers, and each hidden layer's assignment (its first :data:`ASSIGNMENT_UNITS` units of q_A) in
    q_B's own order and in the aligned one."""

    alignment: NetworkAlignment
    descriptions: list[str]
    layers: list[dict]  # A's nn.Linear layers (B's are the same), weights.Network.layer_rows
    assignments: dict  # "own" | "aligned" -> one AssignmentView per hidden layer


# What :func:`pair_alignment_cost` counts, calibrated on networks of 3 to 6 layers (benchmarks/bench_run_cost.py,
# the "upload pair" rows: measured over estimated CPU time within 0.5–2).
ASSIGNMENT_PRICE = 3.6  # the Hungarian method's work on n units, per n³, as flops of the rate
DISTANCE_PRICE = 11  # a layer's unit-to-unit distances (means' and deviations' float64 products), per flop
SWEEPS_EXPECTED = 10  # sweeps until no assignment changes, from each start (4 to 24 measured; one hidden layer: 1)
PATH_PRICE = 3  # a path point's forward passes (batched float32 products on MNIST's test images), per flop
PAIR_WEIGHT_PASSES = 200  # elementwise work per weight: reading, checking, interpolating, sampling


def pair_alignment_cost(sizes, path_points: int, samples: int, starts: int) -> Cost:
    """The CPU time :func:`uploaded_pair` takes on two networks of layer sizes ``sizes`` as work at a machine's
    rates, known from the shapes before it starts: each hidden layer's assignments (W₂'s from each start, sweep
    by sweep, and weight matching's) with their distances, and the three paths' points on MNIST."""
    hidden = sizes[1:-1]
    n_weights, _ = multiply_adds(sizes)
    sweeps = 1 if len(hidden) == 1 else SWEEPS_EXPECTED
    assignments = starts * sweeps + 1
    per_assignment = sum(
        ASSIGNMENT_PRICE * width**3 + DISTANCE_PRICE * 2 * width**2 * (sizes[i] + 1 + sizes[i + 2])
        for i, width in enumerate(hidden)
    )
    mnist = weights.is_mnist_classifier(sizes)
    paths = 3 * path_points * samples * MNIST_TEST * 2 * n_weights if mnist else 0
    return Cost(
        matmul_flops=assignments * per_assignment + PATH_PRICE * paths,
        elementwise=PAIR_WEIGHT_PASSES * n_weights + mnist * mnist_data.LOAD_ELEMENTS,
    )


def uploaded_pair(files, path_points: int, samples: int, seed: int, starts: int) -> UploadedPair:
    """Two uploaded networks (``files``: two (name, bytes)) read, checked and aligned; the path walked on MNIST for
    784 → … → 10 nets."""
    a, b = (weights.read_network(data, name) for name, data in files)
    weights.check_pair(a, b)
    weights.check_widths(a, UPLOAD_MAX_WIDTH, "aligning")
    drawn = samples if a.is_posterior else 1
    settings.check_affordable(pair_alignment_cost(a.sizes, path_points, drawn, starts), "Aligning these networks")
    mnist = load_mnist_once(settings.mnist_directory()) if weights.is_mnist_classifier(a.sizes) else None
    report = align_networks(a, b, mnist, path_points, samples, seed, starts=starts)
    qa, ends, alignments = report.qa, report.ends, report.alignments
    assert qa is not None and ends is not None and alignments is not None  # align_networks keeps the networks
    qb, perms = ends["before"], alignments["w2"].perms
    views = {
        order: [
            assignment_view(qa, qb, perms, index, order == "aligned", ASSIGNMENT_UNITS) for index in range(len(perms))
        ]
        for order in ("own", "aligned")
    }
    report = dataclasses.replace(report, qa=None, alignments=None, ends=None)  # the networks stay in this process
    return UploadedPair(report, [a.describe(), b.describe()], a.layer_rows(), views)


def uploaded_description(files) -> str:
    """What one uploaded network (``files``: one (name, bytes)) is, read and checked as :func:`uploaded_pair` reads
    it: the page says so while the other file is still to come."""
    ((name, data),) = files
    network = weights.read_network(data, name)
    weights.check_widths(network, UPLOAD_MAX_WIDTH, "aligning")
    return network.describe()


def uploaded_pair_file(files, permutations, w2_to_a: float) -> bytes:
    """:func:`aligned_file` of the second of two uploads (``files``), for the page's download."""
    (a_name, _), (b_name, b_data) = files
    return aligned_file(a_name, weights.read_network(b_data, b_name), permutations, w2_to_a)


def permutations_csv(perms) -> bytes:
    """``layer,unit_of_a,unit_of_b`` rows: unit ``unit_of_a`` of aligned B is B's unit ``unit_of_b`` (layers from 1)."""
    rows = ["layer,unit_of_a,unit_of_b"] + [
        f"{layer},{unit},{source}" for layer, perm in enumerate(perms, 1) for unit, source in enumerate(perm)
    ]
    return ("\n".join(rows) + "\n").encode()


def export_networks(a: weights.Network, b: weights.Network, report: NetworkAlignment, directory) -> list[Path]:
    """Write :func:`network_files` into ``directory``."""
    directory = export_directory(directory)
    return [weights.write_atomically(directory / name, data) for name, data in network_files(a, b, report).items()]


def run(config: AlignConfig, mnist=None, progress=None) -> AlignmentReport:
    """Data, training and alignment in one call."""
    data = load_task(config.validate(), mnist)
    pair = train_pair(config, data, progress)
    return alignment_report(pair, data)


def trained_and_aligned(
    config: AlignConfig, mnist_directory: str | None = None, progress=None
) -> tuple[PosteriorPair, AlignmentReport]:
    """Both posteriors and their alignment report, as a :class:`symlab.specs.tasks.Task` computes them in
    a worker process (MNIST read there from ``mnist_directory``); ``progress(done, total, text,
    payload)`` carries the ELBO curves so far as ``(steps, elbo)``."""
    data = load_task(config.validate(), load_mnist_once(mnist_directory) if config.task == "mnist" else None)

    def training(step, steps, elbo_steps, elbo):
        if progress is not None:
            progress(step, steps, f"Training q_A and q_B: Adam step {step} / {steps}", (elbo_steps, elbo))

    pair = train_pair(config, data, training)
    return pair, alignment_report(pair, data)


def alignment_task(config: AlignConfig) -> Task:
    """:func:`trained_and_aligned` for ``config`` as a shared task (the page's, and the server's warm-up)."""
    directory = str(data_directory(settings.mnist_directory())) if config.task == "mnist" else None
    return Task(
        ("align", config),
        trained_and_aligned,
        (config, directory),
        "Training q_A and q_B",
        training_cost(config) + report_cost(config),
    )


def training_cost(config: AlignConfig) -> Cost:
    """:func:`train_pair`'s arithmetic: per step and posterior, the minibatch's forward pass, its weight
    gradients and the gradient sent back (2 flops a multiply-add), one normal per weight, and the passes over
    the parameter-sized arrays the step needs (the draw and its gradient: 4 per weight; Adam: 7 per
    parameter of μ and of log σ)."""
    every, past_first = multiply_adds(config.sizes)
    batch, parameters = min(config.batch, config.train_size), mlp.Layout(config.sizes).n_params
    per_step = Cost(
        matmul_flops=2 * batch * 2 * (2 * every + past_first),
        elementwise=2 * (4 + 2 * 7) * parameters,
        normals=2 * parameters,
    )
    return per_step * config.steps


def report_cost(config: AlignConfig, distinct_ends: int = 3) -> Cost:
    """:func:`alignment_report`'s arithmetic: the marginal predictive's forward passes (samples × test
    points) at q_A once and at every other point of each distinct path (three, or two where weight matching
    and W₂ alignment choose the same permutations)."""
    every, _ = multiply_adds(config.sizes)
    points = MOONS_TEST if config.task == "moons" else MNIST_TEST
    evaluations = 1 + distinct_ends * (config.path_points - 1)
    return Cost(
        matmul_flops=evaluations * config.samples * points * 2 * every,
        elementwise=evaluations * config.samples * points * sum(config.sizes[1:]),
    )


def player_start(config: AlignConfig) -> int:
    """The path point the page's player shows first: the middle, where the barrier is."""
    return config.path_points // 2


MAP_PATHS = ("before", "w2")  # the player's maps: unaligned, and after W₂ alignment


@dataclass(frozen=True)
class PathMaps:
    """The predictive maps of q_t at every point of the player's paths (moons only): P(class 1) on one grid."""

    xs: np.ndarray  # the grid's x centres
    ys: np.ndarray  # its y centres
    probability: dict  # path -> [point, y, x], float32: a map is a picture, 4 digits are plenty


def path_map(pair: PosteriorPair, rep: AlignmentReport, data: Dataset, path: str, point: int):
    """The predictive map (:func:`predictive_grid`) of q_t at point ``point`` of path ``path`` (moons only)."""
    q = align.interpolate(pair.qa, rep.ends[path], rep.paths[path]["t"][point])
    return predictive_grid(q, rep.noise, moons_extent(data))


def path_maps(pair: PosteriorPair, rep: AlignmentReport, data: Dataset, progress=None) -> PathMaps:
    """:func:`path_map` at every point of each of :data:`MAP_PATHS`; ``progress(done, total)`` map by map."""
    points = len(rep.paths[MAP_PATHS[0]]["t"])
    maps, xs, ys = {}, None, None
    for index, path in enumerate(MAP_PATHS):
        grids = []
        for point in range(points):
            xs, ys, probability = path_map(pair, rep, data, path, point)
            grids.append(probability.astype(np.float32))
            if progress is not None:
                progress(index * points + point + 1, len(MAP_PATHS) * points)
        maps[path] = np.stack(grids)
    if xs is None or ys is None:
        raise ValueError("the paths have no points to map")
    return PathMaps(xs, ys, maps)


def path_maps_computed(config: AlignConfig, progress=None) -> PathMaps:
    """:func:`path_maps` from ``config`` alone, as a worker computes it (its pair from the result store where it
    is there)."""
    pair, rep = _trained_pair(config)
    return path_maps(pair, rep, load_task(config), progress)


@functools.lru_cache(maxsize=1)  # one pair serves both of the default link's maps and its landscape
def _trained_pair(config: AlignConfig) -> tuple[PosteriorPair, AlignmentReport]:
    """The pair and its report from the result store where they are there, else trained here."""
    task = alignment_task(config)
    stored = stored_result(task.key)
    return stored if stored is not None else trained_and_aligned(*task.args)


# ---------------------------------------------------------------------------------------------
# The landscape: the loss over the plane through q_A, q_B and π(q_B) (the 3-D view, --surface)
# ---------------------------------------------------------------------------------------------

PLANE_STEPS = 9  # grid cells across the triangle and its margins: 11 × 11 points; lines through q_A and q_B
PLANE_MARGIN = 0.25  # the grid reaches this share of each side beyond the triangle


@dataclass(frozen=True)
class Plane:
    """The plane through three posteriors in (μ, σ), with orthonormal coordinates: the Euclidean distance in
    (μ, σ) between diagonal Gaussians is their W₂ distance, so the plane's distances are W₂'s. q_A is the
    origin, q_B lies on the x axis at ``b``, the third at ``(c_x, c_y)``."""

    qa: DiagonalGaussian
    qb: DiagonalGaussian
    qc: DiagonalGaussian
    b: float
    c_x: float
    c_y: float

    def at(self, x: float, y: float) -> DiagonalGaussian:
        """The posterior at ``(x, y)``: means and standard deviations combined alike (where the plane's
        standard deviations fall below 0, beyond the triangle, 0: a point mass)."""
        beta = y / self.c_y
        alpha = (x - beta * self.c_x) / self.b
        mean = self.qa.mean + alpha * (self.qb.mean - self.qa.mean) + beta * (self.qc.mean - self.qa.mean)
        sd = self.qa.sd + alpha * (self.qb.sd - self.qa.sd) + beta * (self.qc.sd - self.qa.sd)
        return DiagonalGaussian.from_sd(self.qa.layout, mean, np.maximum(sd, 0.0))


def plane_through(qa: DiagonalGaussian, qb: DiagonalGaussian, qc: DiagonalGaussian) -> Plane:
    """The plane through q_A, q_B and q_C; a clear error where the three lie on one line (an alignment that moved
    no unit leaves q_C = q_B)."""

    def flat(q):
        return np.concatenate([np.asarray(q.mean, dtype=np.float64), np.asarray(q.sd, dtype=np.float64)])

    d1, d2 = flat(qb) - flat(qa), flat(qc) - flat(qa)
    b = float(np.linalg.norm(d1))
    if b == 0.0:
        raise ValueError("q_A and q_B are the same posterior: there is no plane through them")
    c_x = float(d2 @ d1 / b)
    c_y = float(np.linalg.norm(d2 - c_x * d1 / b))
    if c_y <= 1e-9 * b:
        raise ValueError(
            "the aligned q_B lies on the line through q_A and q_B (its alignment moved no unit): the three "
            "posteriors span no plane"
        )
    return Plane(qa, qb, qc, b, c_x, c_y)


def plane_grid(b: float, c_x: float, c_y: float, steps: int = PLANE_STEPS) -> tuple[np.ndarray, np.ndarray]:
    """The grid's x and y for a plane with q_B at (b, 0) and the third point at (c_x, c_y): ``steps`` cells
    across the triangle and its margins each way, with grid lines through q_A (0, 0), q_B and the third point's
    y; wide enough in x to hold the third point too."""
    inner = steps / (1 + 2 * PLANE_MARGIN)  # cells between 0 and b, and between 0 and c_y: a whole number
    hx, hy = b / inner, c_y / inner
    reach = PLANE_MARGIN * inner
    low, high = min(0.0, c_x / hx) - reach, max(inner, c_x / hx) + reach
    xs = hx * np.arange(math.floor(low + 1e-9), math.ceil(high - 1e-9) + 1)
    ys = hy * np.arange(-math.ceil(reach - 1e-9), math.ceil(inner + reach - 1e-9) + 1)
    return xs, ys


def loss_plane(
    pair: PosteriorPair, rep: AlignmentReport, data: Dataset, steps: int = PLANE_STEPS, progress=None
) -> Surface:
    """The test loss of the marginal predictive (the paths' measure: the same weight draws, the same test set)
    on a grid of the plane through q_A, q_B and q_B aligned by W₂, with the two straight paths and the three
    posteriors on it (:func:`~symlab.specs.surfaces.on_surface`). ``progress(done, total)`` after each row of the
    grid."""
    plane = plane_through(pair.qa, rep.ends["before"], rep.ends["w2"])
    xs, ys = plane_grid(plane.b, plane.c_x, plane.c_y, steps)
    loss = np.empty((ys.size, xs.size))
    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            loss[i, j] = align.evaluate(plane.at(x, y), rep.noise, data.x_test, data.y_test)[0]
        if progress is not None:
            progress(i + 1, ys.size)
    surface = Surface(xs, ys, loss, "q_A → q_B (W₂)", "→ π(q_B) (W₂)", "test loss (nats)")
    t_before, t_after = np.asarray(rep.paths["before"]["t"]), np.asarray(rep.paths["w2"]["t"])
    lines = (  # on the grid as drawn, a little above it (the paths' own values are the report's)
        on_surface(surface, "before", plane.b * t_before, 0 * t_before),
        on_surface(surface, "w2", plane.c_x * t_after, plane.c_y * t_after),
        on_surface(surface, "ends", [0.0, plane.b, plane.c_x], [0.0, 0.0, plane.c_y]),
    )
    return dataclasses.replace(surface, lines=lines)


def plane_key(config: AlignConfig) -> tuple:
    return ("align_plane", config)


def loss_plane_computed(config: AlignConfig, progress=None) -> Surface:
    """:func:`loss_plane` from ``config`` alone, as a worker computes it (its pair from the result store)."""
    pair, rep = _trained_pair(config)
    mnist_directory = alignment_task(config).args[1]
    data = load_task(config, load_mnist_once(mnist_directory) if config.task == "mnist" else None)

    def rows(done, total):
        if progress is not None:
            progress(done, total, f"The loss landscape: row {done} of {total}")

    return loss_plane(pair, rep, data, progress=rows)


def plane_cost(config: AlignConfig, points: int | None = None) -> Cost:
    """:func:`loss_plane`'s arithmetic: the marginal predictive's forward passes (samples × test points) at each
    of ``points`` points of the plane (by default as many as where the aligned end projects between q_A and q_B,
    as it does)."""
    if points is None:
        xs, ys = plane_grid(1.0, 0.5, 1.0)
        points = xs.size * ys.size
    every, _ = multiply_adds(config.sizes)
    tests = MOONS_TEST if config.task == "moons" else MNIST_TEST
    return Cost(
        matmul_flops=points * config.samples * tests * 2 * every,
        elementwise=points * config.samples * tests * sum(config.sizes[1:]),
    )


def plane_task(config: AlignConfig) -> Task:
    return Task(plane_key(config), loss_plane_computed, (config,), "The loss landscape", plane_cost(config))


MAP_RESOLUTION = 60  # a predictive map's cells per side


def path_maps_task(config: AlignConfig) -> Task:
    """:func:`path_maps_computed` as a shared task: the player's maps, made once for every session."""
    every, _ = multiply_adds(config.sizes)
    maps = len(MAP_PATHS) * config.path_points
    cost = Cost(matmul_flops=maps * config.samples * MAP_RESOLUTION**2 * 2 * every)
    return Task(("align_maps", config), path_maps_computed, (config,), "Predictive maps along the paths", cost)


@dataclass(frozen=True)
class AssignmentView:
    """One hidden layer's assignment as the page draws it: rows are units of q_A, columns units of q_B (in
    their own order, or the aligned one)."""

    distance: np.ndarray  # W₂ distance between the units (incoming weights, bias, outgoing weights)
    above_nearest: np.ndarray  # the same less the row's smallest: 0 at each unit of q_A's nearest unit of q_B
    columns: np.ndarray  # the unit of q_B shown in each column
    matched: np.ndarray  # per unit of q_A, the column of the unit of q_B the W₂ alignment matched it with


def assignment_view(
    qa: DiagonalGaussian, qb: DiagonalGaussian, perms, index: int, aligned: bool, units: int | None = None
) -> AssignmentView:
    """Hidden layer ``index`` of q_B aligned to q_A by ``perms`` (a W₂ alignment's); with ``units``, its first
    ``units`` units of q_A against the first ``units`` columns (a match outside them is marked −1)."""
    # Distances to q_B as the other layers' alignment leaves it, so that only this layer's order is in question.
    others = [p if i != index else np.arange(len(p)) for i, p in enumerate(perms)]
    perm = np.asarray(perms[index])
    shown = len(perm) if units is None else min(units, len(perm))
    cost = align.unit_distances(qa, align.permute(qb, others), index, "w2", rows=np.arange(shown))
    columns = perm if aligned else np.arange(len(perm))
    distance = np.sqrt(np.maximum(cost[:, columns], 0.0))
    # Relative to each row's nearest unit of q_B: some units are far from everything (large weights),
    # and raw distances would paint whole rows and columns.
    above = distance - distance.min(axis=1, keepdims=True)
    matched = (np.arange(len(perm)) if aligned else perm)[:shown]
    matched = np.where(matched < shown, matched, -1)
    return AssignmentView(distance[:, :shown], above[:, :shown], columns[:shown], matched)


def moons_extent(data: Dataset, margin: float = 0.5) -> tuple[tuple[float, float], tuple[float, float]]:
    """The (x, y) ranges of the moons' training points, widened by ``margin``."""
    low, high = data.x_train.min(0).values.numpy(), data.x_train.max(0).values.numpy()
    return (float(low[0] - margin), float(high[0] + margin)), (float(low[1] - margin), float(high[1] + margin))


def predictive_grid(
    q: DiagonalGaussian, noise, extent, resolution: int = MAP_RESOLUTION
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(class 1) of the marginal predictive on a ``resolution`` × ``resolution`` grid over
    ``extent`` (moons only): (x centres, y centres, probabilities[y, x])."""
    if q.sizes[0] != 2:
        raise ValueError("a predictive map needs 2-D inputs")
    (x_low, x_high), (y_low, y_high) = extent
    xs, ys = np.linspace(x_low, x_high, resolution), np.linspace(y_low, y_high, resolution)
    grid = torch.tensor(np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2), dtype=torch.float32)
    with torch.inference_mode():
        probability = align.predictive_log_probs(q, noise, grid)[:, 1].exp().numpy()
    return xs, ys, probability.reshape(resolution, resolution).astype(np.float64)
