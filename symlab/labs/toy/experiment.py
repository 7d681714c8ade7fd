"""The tractable BNN (Gelberg et al. §5, Fig. 4, Tables 2–3; docs/science.md, § Tractable BNN).

``f_w(x) = ReLU(w₁x) + ReLU(w₂x)`` with data ``y = α|x| + ε``: two hidden units, no biases,
output weights fixed to 1. Swapping the units, G = {identity, swap}, leaves f unchanged, so the
posterior has two equivalent modes, (α, −α) and (−α, α). Here: the exact posterior on a grid,
and mean-field VI (MFVI) against its symmetrised version (SGM, ELBO + I), many runs trained as
one batched tensor program.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F

from symlab import controls
from symlab.controls import MAX_INT, control
from symlab.lib.gaussian import kl_to_prior
from symlab.results import to_json

_LOG_2PI = math.log(2.0 * math.pi)
METHODS = ("mfvi", "sgm")
MI_ESTIMATORS = ("exact", "infonce")
INPUTS = ("uniform", "normal")
INITS = ("random", "origin")


@dataclass(frozen=True)
class ToyConfig:
    """Data, prior and training settings. Defaults show MFVI squeezing between the modes.

    Each field's range is its one declaration (:mod:`symlab.controls`) for the page, the command line and
    :meth:`validate`. The lower ends: the exact posterior's 201-point grid has cells at least 0.02 wide, so
    noise below 0.05 or a prior std dev below 0.1 would leave the posterior a few cells wide or less; Adam
    moves a parameter about ``lr`` per step, so below 0.001 the default 2000 steps do not reach the modes.
    """

    alpha: float = control(0.25, low=0.0, high=10.0, step=0.05, label="True slope α (y = α|x| + ε)",
                           help="Slope α of the true function; the posterior's modes are (α, −α) and (−α, α).")
    noise: float = control(0.5, low=0.05, high=10.0, step=0.05, label="Noise std dev",
                           help="Std dev of ε, known to the model.")
    n_train: int = control(10, low=1, high=100_000, url="n", label="Training points N",
                           help="Training points (x, α|x| + ε).")
    n_test: int = control(500, low=1, high=100_000, label="Test points",
                          help="Test points, drawn as the training points are.")
    input_dist: str = control("uniform", choices=INPUTS, label="Inputs x",
                              help="Uniform on [−2, 2], or standard normal.")
    prior_scale: float = control(1.0, low=0.1, high=100.0, step=0.1, url="prior", label="Prior std dev",
                                 help="Std dev of the isotropic Gaussian prior on (w₁, w₂).")
    lr: float = control(0.02, low=0.001, high=1.0, step=0.001, format="%.3f", label="Learning rate (Adam)",
                        help="Adam's learning rate: each parameter moves about this much per step.")
    batch_size: int = control(10, low=1, high=100_000, url="batch", label="Batch size",
                              help="Training points per step; at least N means full batch.")
    samples: int = control(16, low=1, high=4096, label="Monte-Carlo samples",
                           help="Monte-Carlo samples M per step (and for prediction).")
    K: int = control(2, low=2, high=4096, label="K (InfoNCE)",
                     help="InfoNCE's K: K − 1 sampled group elements and the sample itself.")
    mi: str = control("exact", choices=MI_ESTIMATORS, widget="segmented", label="SGM's mutual information",
                      help="exact: G = {id, swap} enumerated; infonce: the I_K estimate.")
    init: str = control("random", choices=INITS, widget="segmented", label="Initial means",
                        help="random: means drawn from N(0, 0.5²); origin: both at 0. Std devs start at 0.5.")
    seed: int = control(0, low=0, high=MAX_INT, label="Seed", help="Seed of the data and the initialisation.")

    def validate(self) -> "ToyConfig":
        """This config, or one ValueError naming every field out of its declared range."""
        return controls.validate(self)


@dataclass(frozen=True)
class ToyData:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def make_data(config: ToyConfig) -> ToyData:
    """Seeded draws of x and y = α|x| + ε (train and test from the same distribution)."""
    config.validate()
    rng = np.random.default_rng([config.seed, 7919])

    def draw(n):
        x = rng.uniform(-2.0, 2.0, n) if config.input_dist == "uniform" else rng.standard_normal(n)
        return x, config.alpha * np.abs(x) + config.noise * rng.standard_normal(n)

    x_train, y_train = draw(config.n_train)
    x_test, y_test = draw(config.n_test)
    return ToyData(x_train, y_train, x_test, y_test)


def network(w, x):
    """f_w(x) for weights ``w[..., 2]`` and inputs ``x[n]``: shape ``w.shape[:-1] + (n,)``."""
    relu = torch.relu if isinstance(w, torch.Tensor) else (lambda v: np.maximum(v, 0.0))
    return relu(w[..., 0:1] * x) + relu(w[..., 1:2] * x)


# ---------------------------------------------------------------------------------------------
# Exact posterior on a grid
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GridPosterior:
    """Normalised log p(w | D) on ``axis × axis`` (index [i, j] ↔ w₁ = axis[i], w₂ = axis[j])."""

    axis: np.ndarray
    log_density: np.ndarray
    log_evidence: float

    @property
    def cell_area(self) -> float:
        return float((self.axis[1] - self.axis[0]) ** 2)

    def probabilities(self) -> np.ndarray:
        return np.exp(self.log_density) * self.cell_area


def default_bound(data: ToyData, prior_scale: float) -> float:
    """Half-width of the grid: covers both modes (±slope) and the prior's bulk."""
    slope = abs(float(np.dot(data.y_train, np.abs(data.x_train)) / max(np.dot(data.x_train, data.x_train), 1e-12)))
    return max(1.5 * slope + 1.0, min(4.0 * prior_scale, 2.0 * slope + 3.0), 2.0)


def exact_posterior(data: ToyData, noise: float, prior_scale: float, grid_size: int = 201,
                    bound: float | None = None) -> GridPosterior:
    """Grid posterior and log evidence by a Riemann sum, in float64.

    The sum of squared errors for every grid pair comes from one matrix product: with
    a_i = ReLU(axis_i x), SSE[i, j] = Σy² + ‖a_i‖² + ‖a_j‖² − 2y·a_i − 2y·a_j + 2 a_i·a_j.
    """
    if bound is None:
        bound = default_bound(data, prior_scale)
    axis = np.linspace(-bound, bound, grid_size)
    x, y = data.x_train, data.y_train
    a = np.maximum(axis[:, None] * x[None, :], 0.0)
    norms, proj = (a * a).sum(1), a @ y
    sse = (y @ y) + norms[:, None] + norms[None, :] - 2 * proj[:, None] - 2 * proj[None, :] + 2 * (a @ a.T)
    n = x.size
    log_lik = -0.5 * sse / noise**2 - n * (math.log(noise) + 0.5 * _LOG_2PI)
    log_prior_1d = -0.5 * (axis / prior_scale) ** 2 - math.log(prior_scale) - 0.5 * _LOG_2PI
    log_joint = log_lik + log_prior_1d[:, None] + log_prior_1d[None, :]
    cell = (axis[1] - axis[0]) ** 2
    peak = log_joint.max()
    log_evidence = float(peak + math.log(np.exp(log_joint - peak).sum() * cell))
    return GridPosterior(axis, log_joint - log_evidence, log_evidence)


def mass_bound(post: GridPosterior, tail: float = 1e-4) -> float:
    """Smallest symmetric half-width holding all grid cells above ``tail`` × the peak (for drawing)."""
    keep = post.log_density >= post.log_density.max() + math.log(tail)
    i, j = np.nonzero(keep)
    extent = max(np.abs(post.axis[i]).max(), np.abs(post.axis[j]).max())
    return float(min(extent * 1.15 + 2 * (post.axis[1] - post.axis[0]), post.axis[-1]))


def posterior_predictive(post: GridPosterior, x, noise: float):
    """Mean and std dev (noise included) of y at ``x`` under the grid posterior."""
    x = np.asarray(x, dtype=np.float64)
    prob = post.probabilities()
    pos = np.maximum(post.axis[:, None] * x[None, :], 0.0)  # ReLU(w x) for each grid value
    marginal_1, marginal_2 = prob.sum(1), prob.sum(0)
    mean = marginal_1 @ pos + marginal_2 @ pos
    second = marginal_1 @ pos**2 + marginal_2 @ pos**2 + 2 * np.einsum("in,ij,jn->n", pos, prob, pos)
    return mean, np.sqrt(np.maximum(second - mean**2, 0.0) + noise**2)


# ---------------------------------------------------------------------------------------------
# Variational families
# ---------------------------------------------------------------------------------------------

def gaussian_log_density(w, mean, log_std):
    """log N(w; mean, diag exp(2 log_std)) summed over the last axis."""
    z = (w - mean) * torch.exp(-log_std)
    return (-0.5 * z**2 - log_std - 0.5 * _LOG_2PI).sum(-1)


def swap_log_ratio(w, mean, log_std):
    """log q(swap w) − log q(w) for mean-field q; the normalisers cancel."""
    return gaussian_log_density(w.flip(-1), mean, log_std) - gaussian_log_density(w, mean, log_std)


def exact_mutual_information(w, mean, log_std):
    """Per-sample I = log q(w) − log(½q(w) + ½q(swap w)) = log 2 − softplus(d), d the swap ratio."""
    return math.log(2.0) - F.softplus(swap_log_ratio(w, mean, log_std))


def infonce_mutual_information(w, mean, log_std, K: int, generator=None):
    """Per-sample I_K = log K − log(1 + Σ_{k<K} q(g_k⁻¹ w)/q(w)), g_k uniform on {id, swap}.

    For G = {id, swap} the ratio is 1 for the identity and e^d for the swap, so only the
    number of sampled swaps matters; it is drawn per sample as K − 1 fair coins.
    """
    d = swap_log_ratio(w, mean, log_std)
    swaps = torch.bernoulli(torch.full((*d.shape, K - 1), 0.5, dtype=d.dtype, device=d.device),
                            generator=generator).sum(-1)
    identities = (K - 1) - swaps
    # log(1 + identities + swaps·e^d), stably.
    log_terms = torch.logaddexp(torch.log1p(identities), torch.log(swaps) + d)
    return math.log(K) - log_terms


# ---------------------------------------------------------------------------------------------
# Batched trainer: runs = methods × seeds × α, all in one tensor program
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSpec:
    method: str
    config: ToyConfig


@dataclass
class History:
    step: list = field(default_factory=list)
    elbo: list = field(default_factory=list)        # ELBO(θ)
    elbo_g: list = field(default_factory=list)      # ELBO(θ) + I(θ) (exact I)
    test_mse: list = field(default_factory=list)


class ToyTrainer:
    """Trains several runs of the tractable BNN at once (Adam is elementwise, so this equals
    separate runs). Each run has its own data (α, noise, seed), method and hyperparameters.
    Batch size, sample count, K and estimator must agree across the runs of one trainer.
    """

    def __init__(self, runs: list[RunSpec], eval_samples: int = 2048):
        if not runs:
            raise ValueError("a trainer needs at least one run")
        for run in runs:
            if run.method not in METHODS:
                raise ValueError(f"method must be one of {METHODS}, got {run.method!r}")
            run.config.validate()
        shared = {(r.config.samples, r.config.K, r.config.mi, r.config.n_train, r.config.n_test,
                   min(r.config.batch_size, r.config.n_train)) for r in runs}
        if len(shared) != 1:
            raise ValueError("runs trained together must share samples, K, mi, n_train, n_test and batch_size")
        self.runs = list(runs)
        first = runs[0].config
        self.samples, self.K, self.mi = first.samples, first.K, first.mi
        self.batch_size = min(first.batch_size, first.n_train)
        self.eval_samples = eval_samples
        self.data = [make_data(r.config) for r in runs]
        as_tensor = lambda key: torch.tensor(np.stack([getattr(d, key) for d in self.data]), dtype=torch.float64)
        self.x_train, self.y_train = as_tensor("x_train"), as_tensor("y_train")
        self.x_test, self.y_test = as_tensor("x_test"), as_tensor("y_test")
        column = lambda values: torch.tensor(values, dtype=torch.float64)[:, None]
        self.noise = column([r.config.noise for r in runs])
        self.prior_scale = column([r.config.prior_scale for r in runs])
        self.lr = column([r.config.lr for r in runs])
        self.symmetrised = torch.tensor([r.method == "sgm" for r in runs])
        # Sampling noise (ε, mini-batches, InfoNCE draws); reseeded by reset() so a reset replays.
        self.noise_seed = int(first.seed) * 1_000_003 + len(runs)
        self.generator = torch.Generator()
        self.initial = self._initial_parameters()
        self.reset()

    def _initial_parameters(self):
        means, log_stds = [], []
        for run in self.runs:
            g = torch.Generator().manual_seed(run.config.seed)
            if run.config.init == "random":
                means.append(0.5 * torch.randn(2, generator=g, dtype=torch.float64))
            else:
                means.append(torch.zeros(2, dtype=torch.float64))
            log_stds.append(torch.full((2,), math.log(0.5), dtype=torch.float64))
        return torch.stack(means), torch.stack(log_stds)

    def reset(self) -> None:
        """Back to the same initialisation; the history is cleared."""
        self.mean = self.initial[0].clone().requires_grad_(True)
        self.log_std = self.initial[1].clone().requires_grad_(True)
        # Adam runs with lr = 1 and each run's update is scaled by its own lr afterwards: the
        # update is lr·m̂/(√v̂ + ε) with state independent of lr, so this is exactly per-run Adam.
        self.optimiser = torch.optim.Adam([self.mean, self.log_std], lr=1.0)
        self.steps_done = 0
        self.history = [History() for _ in self.runs]
        self.diverged = [False] * len(self.runs)
        self.generator.manual_seed(self.noise_seed)
        self.record()

    # -- objectives ------------------------------------------------------------------------

    def _expected_log_lik(self, w, x, y):
        """E_q[log p(y|x,w)] per run from samples ``w[R, M, 2]``, scaled to the full data set."""
        pred = network(w, x[:, None, :])
        noise = self.noise[:, :, None]
        log_lik = -0.5 * ((y[:, None, :] - pred) / noise) ** 2 - torch.log(noise) - 0.5 * _LOG_2PI
        return log_lik.sum(-1).mean(-1) * (self.x_train.shape[1] / x.shape[1])

    def _sample(self, count, generator=None):
        generator = self.generator if generator is None else generator
        eps = torch.randn(len(self.runs), count, 2, dtype=torch.float64, generator=generator)
        return self.mean[:, None, :] + torch.exp(self.log_std)[:, None, :] * eps

    def _mutual_information(self, w):
        mean, log_std = self.mean[:, None, :], self.log_std[:, None, :]
        if self.mi == "exact":
            return exact_mutual_information(w, mean, log_std).mean(-1)
        return infonce_mutual_information(w, mean, log_std, self.K, self.generator).mean(-1)

    def step(self, count: int = 1) -> None:
        """``count`` Adam steps on every run (mini-batches drawn without replacement per step)."""
        n = self.x_train.shape[1]
        for _ in range(int(count)):
            if self.batch_size < n:
                idx = torch.argsort(torch.rand(len(self.runs), n, generator=self.generator), dim=1)[:, : self.batch_size]
                x, y = self.x_train.gather(1, idx), self.y_train.gather(1, idx)
            else:
                x, y = self.x_train, self.y_train
            w = self._sample(self.samples)
            elbo = self._expected_log_lik(w, x, y) - kl_to_prior(self.mean, self.log_std, self.prior_scale)
            objective = elbo + torch.where(self.symmetrised, self._mutual_information(w), torch.zeros_like(elbo))
            self.optimiser.zero_grad(set_to_none=True)
            (-objective.sum()).backward()
            before = (self.mean.detach().clone(), self.log_std.detach().clone())
            self.optimiser.step()
            with torch.no_grad():
                self.mean.copy_(before[0] + self.lr * (self.mean - before[0]))
                self.log_std.copy_(before[1] + self.lr * (self.log_std - before[1]))
                self._freeze_diverged()
            self.steps_done += 1

    def train_to(self, steps: int, chunk: int, progress=None) -> None:
        """Train until ``steps`` Adam steps are done, recording after every ``chunk`` steps, and call
        ``progress(done, steps)`` after each chunk; past ``steps`` already, start again from the
        initialisation (a replay: the same path)."""
        if self.steps_done > steps:
            self.reset()
        while self.steps_done < steps:
            self.step(min(chunk, steps - self.steps_done))
            self.record()
            if progress is not None:
                progress(self.steps_done, steps)

    def _freeze_diverged(self):
        bad = ~(torch.isfinite(self.mean).all(-1) & torch.isfinite(self.log_std).all(-1))
        for i in torch.nonzero(bad).flatten().tolist():
            self.diverged[i] = True
        if bad.any():
            self.mean[bad] = torch.nan
            self.log_std[bad] = torch.nan

    # -- evaluation --------------------------------------------------------------------------

    @torch.no_grad()
    def evaluate(self, samples: int | None = None) -> dict:
        """Full-data ELBO, ELBO + I (exact I), the training objective and test MSE per run."""
        samples = samples or self.eval_samples
        w = self._sample(samples)
        elbo = self._expected_log_lik(w, self.x_train, self.y_train) - kl_to_prior(self.mean, self.log_std, self.prior_scale)
        mi = exact_mutual_information(w, self.mean[:, None, :], self.log_std[:, None, :]).mean(-1)
        objective = torch.where(self.symmetrised, elbo + mi, elbo)
        pred_w = w[:, :256]
        pred = network(pred_w, self.x_test[:, None, :]).mean(1)
        test_mse = ((pred - self.y_test) ** 2).mean(-1)
        return {"elbo": elbo.numpy(), "elbo_g": (elbo + mi).numpy(), "objective": objective.numpy(),
                "test_mse": test_mse.numpy()}

    def record(self) -> None:
        # 4096 samples keep the ELBO traces' Monte-Carlo error ~0.02 nats, below what the eye sees
        # against the log-evidence ceiling.
        metrics = self.evaluate(samples=4096)
        for i, history in enumerate(self.history):
            history.step.append(self.steps_done)
            for key in ("elbo", "elbo_g", "test_mse"):
                getattr(history, key).append(float(metrics[key][i]))

    def parameters(self) -> tuple[np.ndarray, np.ndarray]:
        """Means and std devs, each ``[runs, 2]``."""
        return self.mean.detach().numpy().copy(), np.exp(self.log_std.detach().numpy())

    @torch.no_grad()
    def predictive(self, x, samples: int = 256):
        """Mean and std dev (noise included) of y at ``x`` under each run's q (q_G predicts the same).

        Drawn from a stream of their own: however often a page draws them, training takes the same path."""
        x = torch.as_tensor(np.asarray(x, dtype=np.float64))
        w = self._sample(samples, torch.Generator().manual_seed(self.noise_seed))
        f = network(w, x)
        mean = f.mean(1)
        std = torch.sqrt(f.var(1) + self.noise**2)
        return mean.numpy(), std.numpy()


def gaussian_outlines(mean, std, symmetrised: bool, radii=(1.0, 2.0), points: int = 65):
    """Level sets of q (or of both components of q_G) at ``radii`` standard deviations.

    For a diagonal Gaussian these are axis-aligned ellipses, so they are drawn exactly and
    cheaply (no density grid). Returns x and y with NaN between outlines, for one line trace.
    """
    angle = np.linspace(0.0, 2.0 * math.pi, points)
    centres = [(np.asarray(mean, float), np.asarray(std, float))]
    if symmetrised:
        centres.append((centres[0][0][::-1], centres[0][1][::-1]))
    xs, ys = [], []
    for centre, scale in centres:
        for radius in radii:
            xs += [centre[0] + radius * scale[0] * np.cos(angle), [np.nan]]
            ys += [centre[1] + radius * scale[1] * np.sin(angle), [np.nan]]
    return np.concatenate(xs[:-1]), np.concatenate(ys[:-1])


# ---------------------------------------------------------------------------------------------
# Tables 2 and 3: test MSE and ELBO, MFVI vs SGM, over α and seeds
# ---------------------------------------------------------------------------------------------

DEFAULT_TABLE_ALPHAS = (0.25, 0.5, 0.75, 1.0)
DEFAULT_STEPS = 2000


def train_runs(runs: list[RunSpec], steps: int = DEFAULT_STEPS, chunk: int = 100, progress=None,
               eval_samples: int = 16_384) -> ToyTrainer:
    """Train ``runs`` together for ``steps`` Adam steps; ``progress(done, steps)`` after each chunk.

    Final metrics use ``eval_samples`` Monte-Carlo samples (ELBO standard error ~0.003 nats here).
    """
    if int(steps) != steps or steps < 0:
        raise ValueError(f"steps must be an integer >= 0, got {steps!r}")
    trainer = ToyTrainer(runs, eval_samples=eval_samples)
    trainer.train_to(steps, chunk, progress)
    return trainer


def run_summary(trainer: ToyTrainer, index: int, posterior: GridPosterior) -> dict:
    """What the headless twin reports for one run (JSON-ready)."""
    metrics = trainer.evaluate()
    mean, std = trainer.parameters()
    run = trainer.runs[index]
    own_bound = metrics["elbo_g"][index] if run.method == "sgm" else metrics["elbo"][index]
    return to_json({
        "method": run.method,
        "config": run.config,
        "steps": trainer.steps_done,
        "diverged": trainer.diverged[index],
        "elbo": own_bound,
        "elbo_mf": metrics["elbo"][index],
        "elbo_g": metrics["elbo_g"][index],
        "mutual_information": metrics["elbo_g"][index] - metrics["elbo"][index],
        "log_evidence": posterior.log_evidence,
        "test_mse": metrics["test_mse"][index],
        "mu": mean[index],
        "sigma": std[index],
    })


def paper_table(alphas=DEFAULT_TABLE_ALPHAS, seeds: int = 5, steps: int = DEFAULT_STEPS,
                base: ToyConfig = ToyConfig(), progress=None) -> list[dict]:
    """Tables 2–3: per α and method, test MSE and the method's ELBO (MFVI: ELBO, SGM: ELBO_G),
    mean ± std over seeds 0..seeds−1, all runs trained as one batch. The exact log evidence
    (mean over the seeds' data sets) is the ceiling of both bounds.
    """
    alphas = [float(a) for a in alphas]
    if not alphas or int(seeds) != seeds or seeds < 1:
        raise ValueError("a table needs at least one alpha and seeds >= 1")
    configs = [replace(base, alpha=a, seed=s).validate() for a in alphas for s in range(int(seeds))]
    runs = [RunSpec(method, cfg) for cfg in configs for method in METHODS]
    trainer = train_runs(runs, steps, progress=progress)
    metrics = trainer.evaluate()
    evidence = {(c.alpha, c.seed): exact_posterior(make_data(c), c.noise, c.prior_scale).log_evidence for c in configs}
    rows = []
    for alpha in alphas:
        per_method = {}
        for method in METHODS:
            idx = [i for i, r in enumerate(runs) if r.config.alpha == alpha and r.method == method]
            bound = metrics["elbo_g" if method == "sgm" else "elbo"][idx]
            mse = metrics["test_mse"][idx]
            per_method[method] = (bound, mse)
            log_z = [evidence[(alpha, runs[i].config.seed)] for i in idx]
            rows.append({"alpha": alpha, "method": method, "seeds": len(idx),
                         "elbo_mean": np.mean(bound), "elbo_std": np.std(bound),
                         "test_mse_mean": np.mean(mse), "test_mse_std": np.std(mse),
                         "log_evidence_mean": np.mean(log_z),
                         "diverged": sum(trainer.diverged[i] for i in idx)})
        paired = _paired_with_mfvi(per_method)
        for row in rows[-len(METHODS):]:
            row.update(paired if row["method"] == "sgm" else dict.fromkeys(PAIRED_KEYS))
    return to_json(rows)


PAIRED_KEYS = ("elbo_gain_mean", "elbo_gain_std", "seeds_higher_elbo",
               "test_mse_change_mean", "test_mse_change_std", "seeds_lower_test_mse")


def _paired_with_mfvi(per_method) -> dict:
    """SGM minus MFVI on the same seeds (same data and initialisation): the differences a table
    of two means ± std hides, since most of the spread across seeds is the data's, shared by both."""
    elbo_gain = per_method["sgm"][0] - per_method["mfvi"][0]
    mse_change = per_method["sgm"][1] - per_method["mfvi"][1]
    return dict(zip(PAIRED_KEYS, (np.mean(elbo_gain), np.std(elbo_gain), np.sum(elbo_gain > 0),
                                  np.mean(mse_change), np.std(mse_change), np.sum(mse_change < 0))))
