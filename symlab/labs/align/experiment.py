"""The alignment lab's experiment (Rossi et al. 2023, SCIENCE.md §6): train two mean-field
posteriors of the same MLP from different seeds, align the second to the first, and compare the
loss along the interpolation path before and after.

Both posteriors train at once, as one batched tensor program: the data are shared, the
initialisations and the weight noise are not. Tasks: two interleaved half moons (2-D, two
classes) or a subset of MNIST.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch
import torch.nn.functional as F

from symlab.lib import align
from symlab.lib.align import DiagonalGaussian
from symlab.checks import check, is_float, is_int

TASKS = ("moons", "mnist")
MNIST_TEST = 1000
MOONS_TEST = 1000
PATHS = ("before", "weights", "w2")  # unaligned; aligned by weight matching; aligned by W₂
PATH_TITLES = {"before": "unaligned", "weights": "weight matching", "w2": "W₂ alignment"}


@dataclass(frozen=True)
class AlignConfig:
    """Two MFVI posteriors of a ReLU MLP with ``depth`` hidden layers of ``width`` units, trained by
    Adam on the ELBO (one weight sample per step, minibatches of ``batch``) from seeds derived from
    ``seed``; the path is evaluated at ``path_points`` values of t with ``samples`` posterior draws."""

    task: str = "moons"
    width: int = 64
    depth: int = 2
    train_size: int = 1000     # moons: points drawn; MNIST: the first images of the training set
    noise: float = 0.15        # moons only: Gaussian noise on the points
    steps: int = 2000
    batch: int = 128
    lr: float = 0.01
    prior_scale: float = 1.0
    init_sd: float = 0.001
    samples: int = 32
    path_points: int = 21
    seed: int = 0

    def validate(self) -> "AlignConfig":
        check([
            (self.task in TASKS, f"task must be one of {', '.join(TASKS)} (got {self.task!r})"),
            (is_int(self.width, 2, 512), f"width must be a whole number in [2, 512] (got {self.width!r})"),
            (is_int(self.depth, 1, 4), f"depth must be a whole number in [1, 4] (got {self.depth!r})"),
            (is_int(self.train_size, 10, 60_000),
             f"train_size must be a whole number in [10, 60000] (got {self.train_size!r})"),
            (is_float(self.noise, 0.0, 1.0), f"noise must be a number in [0, 1] (got {self.noise!r})"),
            (is_int(self.steps, 1, 100_000), f"steps must be a whole number in [1, 100000] (got {self.steps!r})"),
            (is_int(self.batch, 1, 60_000), f"batch must be a whole number in [1, 60000] (got {self.batch!r})"),
            (is_float(self.lr, 1e-6, 1.0), f"lr must be a number in [1e-6, 1] (got {self.lr!r})"),
            (is_float(self.prior_scale, 1e-3, 100.0),
             f"prior_scale must be a number in [0.001, 100] (got {self.prior_scale!r})"),
            (is_float(self.init_sd, 1e-6, 1.0), f"init_sd must be a number in [1e-6, 1] (got {self.init_sd!r})"),
            (is_int(self.samples, 1, 1000), f"samples must be a whole number in [1, 1000] (got {self.samples!r})"),
            (is_int(self.path_points, 3, 201),
             f"path_points must be a whole number in [3, 201] (got {self.path_points!r})"),
            (is_int(self.seed, 0, 2**31 - 1), f"seed must be a whole number in [0, 2^31) (got {self.seed!r})"),
        ])
        return self

    @property
    def sizes(self) -> tuple[int, ...]:
        d_in, d_out = (2, 2) if self.task == "moons" else (784, 10)
        return (d_in, *([self.width] * self.depth), d_out)


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
    :class:`symlab.mnist_data.Mnist`) pixels scaled to [0, 1], its first ``MNIST_TEST`` test images."""
    if config.task == "moons":
        rng = np.random.default_rng([config.seed, 0])
        train, test = make_moons(config.train_size, config.noise, rng), make_moons(MOONS_TEST, config.noise, rng)
    else:
        if mnist is None:
            raise ValueError("the mnist task needs the MNIST data")
        train = (mnist.train_images[:config.train_size] / 255.0, mnist.train_labels[:config.train_size])
        test = (mnist.test_images[:MNIST_TEST] / 255.0, mnist.test_labels[:MNIST_TEST])
    tensors = [torch.tensor(np.asarray(a), dtype=torch.float32 if i % 2 == 0 else torch.int64)
               for i, a in enumerate((*train, *test))]
    return Dataset(*tensors)


# ---------------------------------------------------------------------------------------------
# Two MFVI posteriors, trained together
# ---------------------------------------------------------------------------------------------

class TrainingDiverged(RuntimeError):
    """A posterior's ELBO became NaN or infinite."""


@dataclass
class PosteriorPair:
    config: AlignConfig
    qa: DiagonalGaussian
    qb: DiagonalGaussian
    elbo: np.ndarray            # [recorded steps, 2]: ELBO per training point, both posteriors
    elbo_steps: np.ndarray      # the steps at which it was recorded
    seconds: float


def _init_pair(sizes, init_sd: float, seeds) -> list:
    """Means like torch.nn.Linear (U(±1/√fan_in)), one initialisation per seed, stacked: per layer
    [mean W[2, out, in], mean b[2, out], log-sd W, log-sd b]."""
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / math.sqrt(fan_in)
        mean_W = torch.stack([(torch.rand(fan_out, fan_in, generator=g) * 2 - 1) * bound for g in gens])
        mean_b = torch.stack([(torch.rand(fan_out, generator=g) * 2 - 1) * bound for g in gens])
        layers.append([mean_W, mean_b, torch.full_like(mean_W, math.log(init_sd)),
                       torch.full_like(mean_b, math.log(init_sd))])
    return layers


def _sampled_forward(layers, x, g) -> torch.Tensor:
    """Logits ``[2, n, classes]`` of one reparameterised weight sample per posterior."""
    h = x
    for index, (mW, mb, lW, lb) in enumerate(layers):
        W = mW + lW.exp() * torch.randn(mW.shape, generator=g)
        b = mb + lb.exp() * torch.randn(mb.shape, generator=g)
        h = torch.matmul(h, W.transpose(-1, -2)) + b[:, None, :]
        if index < len(layers) - 1:
            h = torch.relu(h)
    return h


def _kl_to_prior(layers, prior_scale: float) -> torch.Tensor:
    """KL(q ‖ N(0, p²I)) per posterior, in closed form."""
    total = 0.0
    for params in layers:
        for mean, log_sd in ((params[0], params[2]), (params[1], params[3])):
            dims = tuple(range(1, mean.dim()))
            total = total + (0.5 * ((log_sd.exp() ** 2 + mean**2) / prior_scale**2 - 1)
                             - log_sd + math.log(prior_scale)).sum(dims)
    return total


def _to_gaussian(layers, index: int) -> DiagonalGaussian:
    def arr(t):
        return t[index].detach().double().numpy()

    return DiagonalGaussian([(arr(mW), arr(mb)) for mW, mb, _, _ in layers],
                            [(np.exp(arr(lW)), np.exp(arr(lb))) for _, _, lW, lb in layers])


def train_pair(config: AlignConfig, data: Dataset, progress=None) -> PosteriorPair:
    """Train q_A and q_B by maximising the ELBO E_q[log p(D|w)] − KL(q ‖ p) with Adam (one weight
    sample per step, log-sd parameterisation). ``progress(step, steps, elbo_steps, elbo)`` about
    50 times, with the steps and the [k, 2] per-point ELBO (mean since the last record) so far.
    Raises :class:`TrainingDiverged` on a non-finite ELBO."""
    config.validate()
    start = time.perf_counter()
    layers = _init_pair(config.sizes, config.init_sd, [(config.seed * 2 + 1) * 7919, (config.seed * 2 + 2) * 7919])
    params = [p.requires_grad_() for layer in layers for p in layer]
    optimiser = torch.optim.Adam(params, lr=config.lr)
    g = torch.Generator().manual_seed(config.seed * 2 + 3)
    n = data.x_train.shape[0]
    batch = min(config.batch, n)
    every = max(1, config.steps // 50)
    recorded, steps_seen, running = [], [], torch.zeros(2)
    for step in range(1, config.steps + 1):
        idx = torch.randint(0, n, (batch,), generator=g)
        logits = _sampled_forward(layers, data.x_train[idx], g)
        nll = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), data.y_train[idx].repeat(2),
                              reduction="none").view(2, batch).mean(1)
        loss = nll + _kl_to_prior(layers, config.prior_scale) / n  # −ELBO per training point
        if not bool(torch.isfinite(loss).all()):
            which = " and ".join(name for name, ok in zip("AB", torch.isfinite(loss)) if not ok)
            raise TrainingDiverged(f"training diverged at step {step} (posterior {which}: the ELBO is not finite); "
                                   "lower the learning rate")
        optimiser.zero_grad()
        loss.sum().backward()
        optimiser.step()
        running += loss.detach()
        if step % every == 0 or step == config.steps:
            recorded.append((-running / (step - (steps_seen[-1] if steps_seen else 0))).numpy())
            steps_seen.append(step)
            running = torch.zeros(2)
            if progress is not None:
                progress(step, config.steps, np.array(steps_seen), np.array(recorded))
    return PosteriorPair(config, _to_gaussian(layers, 0), _to_gaussian(layers, 1), np.array(recorded),
                         np.array(steps_seen), time.perf_counter() - start)


# ---------------------------------------------------------------------------------------------
# Alignment and the barrier
# ---------------------------------------------------------------------------------------------

def alignment_report(pair: PosteriorPair, data: Dataset, progress=None) -> dict:
    """Align q_B to q_A by weight matching and by W₂, and evaluate the loss and accuracy of the
    marginal predictive (test set) along the three paths. JSON-ready except the ``_``-keys."""
    config = pair.config
    qa, qb = pair.qa, pair.qb
    started = time.perf_counter()
    alignments = {"weights": align.align(qa, qb, "means"), "w2": align.align(qa, qb, "w2")}
    align_seconds = time.perf_counter() - started
    ends = {"before": qb, **{name: align.permute(qb, a.perms) for name, a in alignments.items()}}
    ts = np.linspace(0.0, 1.0, config.path_points)
    noise = align.standard_noise(config.sizes, config.samples, config.seed * 2 + 4)
    paths = {}
    for done, (name, end) in enumerate(ends.items()):
        paths[name] = align.path(qa, end, ts, noise, data.x_test, data.y_test)
        if progress is not None:
            progress(done + 1, len(ends))
    summary = {}
    for name, end in ends.items():
        summary[name] = {
            "w2": align.w2_distance(qa, end),
            "mean_distance": align.mean_distance(qa, end),
            "layer_w2": np.sqrt(align.layer_distances(qa, end, "w2")).tolist(),
            "barrier": align.barrier(ts, paths[name]["loss"]),
            "accuracy_barrier": align.barrier(ts, paths[name]["accuracy"], higher_is_worse=False),
            "units_moved": [int(np.sum(p != np.arange(len(p)))) for p in alignments[name].perms]
            if name in alignments else [0] * config.depth,
        }
    w2 = alignments["w2"]
    return {
        "config": asdict(config),
        "sizes": list(config.sizes),
        "barrier_before": summary["before"]["barrier"],
        "barrier_after": summary["w2"]["barrier"],
        "barrier_weight_matching": summary["weights"]["barrier"],
        "w2_before": summary["before"]["w2"],
        "w2_after": summary["w2"]["w2"],
        "w2_weight_matching": summary["weights"]["w2"],
        "loss_a": paths["before"]["loss"][0],
        "loss_b": paths["before"]["loss"][-1],
        "accuracy_a": paths["before"]["accuracy"][0],
        "accuracy_b": paths["before"]["accuracy"][-1],
        "sweeps": w2.sweeps,
        "converged": w2.converged,
        "w2_history": [math.sqrt(max(v, 0.0)) for v in w2.history],
        "permutations": [p.tolist() for p in w2.perms],
        "summary": summary,
        "paths": paths,
        "train_seconds": pair.seconds,
        "align_seconds": align_seconds,
        "elbo_final": pair.elbo[-1].tolist(),
        "_alignments": alignments,
        "_ends": ends,
        "_noise": noise,
    }


def run(config: AlignConfig, mnist=None, progress=None) -> dict:
    """Data, training and alignment in one call (the command line's path)."""
    data = load_task(config.validate(), mnist)
    pair = train_pair(config, data, progress)
    return alignment_report(pair, data)


def moons_extent(data: Dataset, margin: float = 0.5) -> tuple[tuple[float, float], tuple[float, float]]:
    """The (x, y) ranges of the moons' training points, widened by ``margin``."""
    low, high = data.x_train.min(0).values.numpy(), data.x_train.max(0).values.numpy()
    return (float(low[0] - margin), float(high[0] + margin)), (float(low[1] - margin), float(high[1] + margin))


def predictive_grid(q: DiagonalGaussian, noise, extent, resolution: int = 60) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """P(class 1) of the marginal predictive on a ``resolution`` × ``resolution`` grid over
    ``extent`` (moons only): (x centres, y centres, probabilities[y, x])."""
    if q.sizes[0] != 2:
        raise ValueError("a predictive map needs 2-D inputs")
    xs, ys = np.linspace(*extent[0], resolution), np.linspace(*extent[1], resolution)
    grid = torch.tensor(np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2), dtype=torch.float32)
    with torch.no_grad():
        probability = align.predictive_log_probs(q, noise, grid)[:, 1].exp().numpy()
    return xs, ys, probability.reshape(resolution, resolution).astype(np.float64)
