"""The tractable BNN lab (Gelberg et al. §5, Fig. 4, Tables 2–3; docs/science.md, § Tractable BNN).

``f_w(x) = ReLU(w₁x) + ReLU(w₂x)`` with data ``y = α|x| + ε``; the posterior has two equivalent modes,
(α, −α) and (−α, α). The maths (the network, the exact grid posterior, MFVI and SGM and their batched
trainer) is :mod:`symlab.lib.two_relu`. Here: the lab's config and the data it draws, the runs it names,
what the exact posterior says about a data set, fits (each the best of several seeded starts, a start
stuck with both units on one side, a local optimum of the training, named), the paper's tables and
their cost as shared tasks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from symlab.lib import chains, hmc, two_relu
from symlab.specs.hmc import HmcConfig
from symlab.specs.results import to_json
from symlab.specs.surfaces import Line, Surface, on_surface
from symlab.specs.tasks import Cost, Task

from .config import DEFAULT_STEPS, DEFAULT_TABLE_ALPHAS, ToyConfig


def make_data(config: ToyConfig) -> two_relu.ToyData:
    """Seeded draws of x and y = α|x| + ε (train and test from the same distribution)."""
    config.validate()
    rng = np.random.default_rng([config.seed, 7919])

    def draw(n):
        x = rng.uniform(-2.0, 2.0, n) if config.input_dist == "uniform" else rng.standard_normal(n)
        return x, config.alpha * np.abs(x) + config.noise * rng.standard_normal(n)

    x_train, y_train = draw(config.n_train)
    x_test, y_test = draw(config.n_test)
    return two_relu.ToyData(x_train, y_train, x_test, y_test)


@dataclass(frozen=True)
class ExactAnswer:
    """What the exact posterior says about one data set, to measure fits against."""

    log_evidence: float  # the ceiling of every bound
    test_mse: float  # of the posterior predictive mean: the best test MSE to expect of a method
    opposite_sides: float  # P(w₁w₂ < 0 | D)
    modes: np.ndarray  # [2, 2]: the grid's maximum and its swap


def exact_answer(data: two_relu.ToyData, config: ToyConfig, post: two_relu.GridPosterior | None = None) -> ExactAnswer:
    post = two_relu.exact_posterior(data, config.noise, config.prior_scale) if post is None else post
    predicted = two_relu.posterior_predictive(post, data.x_test, config.noise)[0]
    i, j = np.unravel_index(np.argmax(post.log_density), post.log_density.shape)
    mode = np.array([post.axis[i], post.axis[j]])
    return ExactAnswer(
        post.log_evidence,
        float(np.mean((predicted - data.y_test) ** 2)),
        post.opposite_sides(),
        np.stack([mode, mode[::-1]]),
    )


HMC_STREAM = 4099  # the chains' random stream, apart from the data's (make_data) and the fits'


def hmc_draws(data: two_relu.ToyData, config: ToyConfig, sampler: HmcConfig) -> tuple[hmc.ChainState, hmc.Draws]:
    """Full-batch HMC on p(w | D), ``sampler.hmc_chains`` chains from draws of the prior, seeded by the config."""
    x, y = (torch.as_tensor(values, dtype=torch.float64) for values in (data.x_train, data.y_train))
    generator = torch.Generator().manual_seed(
        int(np.random.SeedSequence([config.seed, HMC_STREAM]).generate_state(1)[0])
    )
    start = config.prior_scale * torch.randn(sampler.hmc_chains, 2, generator=generator, dtype=torch.float64)
    return hmc.hmc(
        lambda w: two_relu.log_joint(w, x, y, config.noise, config.prior_scale), start, sampler.settings(), generator
    )


def hmc_estimates(data: two_relu.ToyData, config: ToyConfig, sampler: HmcConfig) -> dict:
    """HMC's E|w₁|, P(w₁w₂ < 0) and test MSE of the predictive mean beside the grid's, each with its Monte-Carlo
    standard error: the means' :func:`symlab.lib.chains.mcse_mean_cautious`; the proportion's
    :func:`symlab.lib.chains.mcse_proportion`, never 0, from no more effective draws than there are chains where
    no chain crossed between the copies; the test MSE's by the delta method, the error of the mean of
    (2/n) Σⱼ rⱼ f(w, xⱼ), r the residuals. Then the chains' diagnostics on the weights as drawn and with the units
    sorted (the swap removed). ``mode_hops``: per chain, how often it crossed w₁ = w₂ into the swapped copy."""
    began = time.perf_counter()
    state, draws = hmc_draws(data, config, sampler)
    seconds = time.perf_counter() - began
    w = draws.samples.numpy()  # [C, S, 2]
    # E|w₁| = E(|w₁| + |w₂|)/2, the posterior being swap-invariant: chains that never cross into the swapped copy
    # then cannot weigh the two copies by where they started (16 chains split 9:7 moved E|w₁| by 0.1 at α = 1.7).
    abs_w1, opposite = np.abs(w).mean(-1), (w[..., 0] * w[..., 1] < 0).astype(float)
    f_test = two_relu.network(w, data.x_test)  # [C, S, n_test]
    residual = f_test.mean((0, 1)) - data.y_test
    mse_gradient = f_test @ residual * (2 / residual.size)
    post = two_relu.exact_posterior(data, config.noise, config.prior_scale)
    exact = exact_answer(data, config, post)
    canonical = np.sort(w, -1)[..., ::-1]
    ess_canonical = chains.ess(canonical).min()
    hops = chains.switches(w[..., 0] < w[..., 1])
    # w₁w₂ > 0 lies between the swapped copies (every path from one to the other crosses it, or the origin).
    # Chains that never crossed have not explored it, whatever their ESS inside a copy: at α = 1.7 the truth is
    # 7·10⁻⁴, reached in rare visits of ~100 draws, so the count of independent looks at it is the chains'.
    opposite_draws = ess_canonical if hops.sum() else float(sampler.hmc_chains)
    return to_json(
        {
            "hmc_abs_w1": abs_w1.mean(),
            "hmc_abs_w1_se": chains.mcse_mean_cautious(abs_w1),
            "exact_abs_w1": post.mean_abs_first(),
            "hmc_opposite_sides": opposite.mean(),
            "hmc_opposite_sides_se": chains.mcse_proportion(opposite, opposite_draws),
            "exact_opposite_sides": exact.opposite_sides,
            "hmc_test_mse": float(np.mean(residual**2)),
            "hmc_test_mse_se": chains.mcse_mean_cautious(mse_gradient),
            "exact_test_mse": exact.test_mse,
            "hmc": {
                **sampler_record(sampler, state, draws, seconds),
                "rhat_raw": chains.rhat(w).max(),
                "rhat_canonical": chains.rhat(canonical).max(),
                "ess_raw": chains.ess(w).min(),
                "ess_canonical": ess_canonical,
                "mode_hops": hops,
            },
        }
    )


def sampler_record(sampler: HmcConfig, state: hmc.ChainState, draws: hmc.Draws, seconds: float) -> dict:
    """What ran and how each chain fared: its frozen step size and leapfrog steps, acceptance and divergences."""
    return {
        "chains": sampler.hmc_chains,
        "warmup": sampler.hmc_warmup,
        "samples": sampler.hmc_samples,
        "trajectory_length": sampler.hmc_trajectory,
        "target_accept": sampler.hmc_target_accept,
        "step_size": state.step_size.numpy(),
        "leapfrog_steps": hmc.leapfrog_steps(state.step_size, sampler.settings()).numpy(),
        "acceptance": draws.acceptance.numpy(),
        "divergences": int(draws.divergent.sum()),
        "seconds": seconds,
    }


PREDICTION_POINTS = 89  # where the page draws predictive bands, over x in [−2.2, 2.2]


def exact_view(config: ToyConfig, display_grid: int = 81):
    """What the page draws of the exact posterior for ``config``: the data, the exact answer, the posterior on a
    ``display_grid``² grid over its mass, the predictive points x and its mean and std dev there."""
    data = make_data(config)
    post = two_relu.exact_posterior(data, config.noise, config.prior_scale)
    x = np.linspace(-2.2, 2.2, PREDICTION_POINTS)
    mean, std = two_relu.posterior_predictive(post, x, config.noise)
    display = two_relu.exact_posterior(data, config.noise, config.prior_scale, display_grid, two_relu.mass_bound(post))
    return data, exact_answer(data, config, post), display, x, mean, std


# ---------------------------------------------------------------------------------------------
# The landscape: the exact log posterior over (w₁, w₂) with the fits on it (the 3-D view, --surface)
# ---------------------------------------------------------------------------------------------

SURFACE_DEPTH = 8.0  # nats below the peak the view draws: deeper, the posterior is drawn flat on the floor


def q_log_density(mean, std, symmetrised: bool, x, y) -> np.ndarray:
    """log q(w) on the grid ``x × y`` (rows follow w₂): mean-field q = N(mean, diag std²), or SGM's
    q_G = ½q(w) + ½q(swap w)."""
    w1, w2 = np.meshgrid(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))

    def log_normal(m, s):
        return sum(
            -0.5 * ((w - mi) / si) ** 2 - np.log(si) - 0.5 * np.log(2 * np.pi) for w, mi, si in zip((w1, w2), m, s)
        )

    mean, std = np.asarray(mean, dtype=np.float64), np.asarray(std, dtype=np.float64)
    own = log_normal(mean, std)
    return np.logaddexp(own, log_normal(mean[::-1], std[::-1])) - np.log(2.0) if symmetrised else own


def posterior_surface(display: two_relu.GridPosterior) -> Surface:
    """The exact log posterior on the page's display grid (81 × 81: far-apart modes are narrow peaks) as a
    landscape over (w₁, w₂)."""
    axis = display.axis
    z = display.log_density.T  # GridPosterior's [i, j] is (w₁[i], w₂[j]): rows follow w₂
    return Surface(axis, axis, z, "w₁", "w₂", "log p(w | D) (nats)", z_floor=float(z.max() - SURFACE_DEPTH))


def landscape_lines(surface: Surface, config: ToyConfig, fitted: dict[str, tuple]) -> list[Line]:
    """On the landscape: the two equivalent modes (label ``modes``) and each fitted method's 1 and 2 sd outlines
    (``fitted``: method -> (mean, std); both components of SGM's q_G; labelled by the method)."""
    a = config.alpha
    return [on_surface(surface, "modes", [a, -a], [-a, a])] + [
        on_surface(surface, method, *two_relu.gaussian_outlines(mean, std, method == "sgm"))
        for method, (mean, std) in fitted.items()
    ]


def q_grids(surface: Surface, fitted: dict[str, tuple]) -> dict[str, np.ndarray]:
    """Each fitted method's log q on the landscape's grid."""
    return {
        method: q_log_density(mean, std, method == "sgm", surface.x, surface.y)
        for method, (mean, std) in fitted.items()
    }


def posterior_landscape(
    config: ToyConfig, display: two_relu.GridPosterior, fitted: dict[str, tuple]
) -> tuple[Surface, dict[str, np.ndarray]]:
    """:func:`posterior_surface` with :func:`landscape_lines` on it, and :func:`q_grids`: what the page's 3-D view
    draws and its CSV holds, for ``fitted``."""
    surface = posterior_surface(display)
    drawn = replace(surface, lines=tuple(landscape_lines(surface, config, fitted)))
    return drawn, q_grids(surface, fitted)


# ---------------------------------------------------------------------------------------------
# The runs a config names, for the batched trainer (two_relu.ToyTrainer)
# ---------------------------------------------------------------------------------------------


def training_settings(config: ToyConfig) -> two_relu.TrainingSettings:
    """How each run of ``config`` trains."""
    return two_relu.TrainingSettings(
        noise=config.noise,
        prior_scale=config.prior_scale,
        lr=config.lr,
        batch_size=config.batch_size,
        samples=config.samples,
        K=config.K,
        mi=config.mi,
        init=config.init,
        seed=config.seed,
    )


def run_spec(method: str, config: ToyConfig, start: int = 0) -> two_relu.RunSpec:
    """``method`` on ``config``'s data from the seed's ``start``-th initialisation, tagged with the config."""
    return two_relu.RunSpec(method, make_data(config), training_settings(config), start, tag=config)


def starts_of(method: str, config: ToyConfig) -> list[two_relu.RunSpec]:
    """The ``config.restarts`` runs of one fit: the same data (drawn once), the seed's first R initialisations."""
    data, settings = make_data(config), training_settings(config)
    return [two_relu.RunSpec(method, data, settings, start, tag=config) for start in range(config.restarts)]


# ---------------------------------------------------------------------------------------------
# Restarts: each fit is R starts, the one with the best own bound kept, each start's end named
# ---------------------------------------------------------------------------------------------

# In the live view starts within this many nats of the best tie and the first of them is kept: the fit shown does
# not hop between a mode and its mirror image whenever their bounds, nearly equal, cross as training plays.
LIVE_BOUND_TIE = 0.05
STUCK = "both units on one side"
OUTCOMES = ("at a mode", "between the modes", STUCK, "diverged")
# Stuck: q gives the units opposite signs less often than this, where the exact posterior does more often than not.
STUCK_OPPOSITE_SIDES = 0.05


def stuck_notice(remedy: str) -> str:
    return f"{STUCK}, a local optimum of ReLU(w₁x) + ReLU(w₂x); {remedy}"


def outcome(mean, std, exact: ExactAnswer) -> str:
    """Where one q ended, one of :data:`OUTCOMES`. Both units on one side is a local optimum of the training
    (half the inputs get no slope), not the symmetry: "between the modes" (nearer the modes' midpoint than
    either mode) is the symmetry effect MFVI shows when the modes are close."""
    mean = np.asarray(mean, float)
    if not np.all(np.isfinite(mean)):
        return "diverged"
    if two_relu.opposite_sides(mean, std) < STUCK_OPPOSITE_SIDES and exact.opposite_sides > 0.5:
        return STUCK
    to_mode = np.linalg.norm(exact.modes - mean, axis=1).min()
    return "between the modes" if np.linalg.norm(exact.modes.mean(0) - mean) < to_mode else "at a mode"


def kept_start(bounds, tie: float = 0.0) -> int:
    """The start to keep: the best bound's, or the first within ``tie`` nats of it; a diverged one (NaN)
    only when all are."""
    bounds = np.asarray(bounds, dtype=float)
    finite = np.isfinite(bounds)
    if not finite.any():
        return 0
    return int(np.flatnonzero(finite & (bounds >= bounds[finite].max() - tie))[0])


@dataclass(frozen=True)
class Fit:
    """One method on one config: its starts' rows in a trainer, their own bounds and outcomes, the start kept."""

    method: str
    config: ToyConfig
    rows: tuple[int, ...]
    bounds: tuple[float, ...]
    outcomes: tuple[str, ...]
    kept: int  # index into rows

    @property
    def row(self) -> int:
        return self.rows[self.kept]

    @property
    def outcome(self) -> str:
        return self.outcomes[self.kept]

    @property
    def stuck(self) -> bool:
        return self.outcome == STUCK

    @property
    def stuck_starts(self) -> int:
        return self.outcomes.count(STUCK)


def fits(
    trainer: two_relu.ToyTrainer | two_relu.Snapshot, bounds, exact: dict[ToyConfig, ExactAnswer], tie: float = 0.0
) -> list[Fit]:
    """The trainer's runs grouped into fits by method and config (each run's tag, as :func:`run_spec` sets it), in
    order of first appearance, given each run's own bound (``evaluate()["objective"]`` or ``latest_bounds()``),
    each config's exact answer and the tie (:func:`kept_start`)."""
    mean, std = trainer.parameters()
    groups: dict = {}
    for row, run in enumerate(trainer.runs):
        groups.setdefault((run.method, run.tag), []).append(row)
    result = []
    for (method, config), rows in groups.items():
        fit_bounds = tuple(float(bounds[r]) for r in rows)
        outcomes = tuple(outcome(mean[r], std[r], exact[config]) for r in rows)
        result.append(Fit(method, config, tuple(rows), fit_bounds, outcomes, kept_start(fit_bounds, tie)))
    return result


# ---------------------------------------------------------------------------------------------
# Tables 2 and 3: test MSE and ELBO, MFVI vs SGM, over α and seeds
# ---------------------------------------------------------------------------------------------


def fit_summary(trainer: two_relu.ToyTrainer, metrics: dict, fit: Fit, exact: ExactAnswer, remedy: str) -> dict:
    """What the headless twin reports for one fit (JSON-ready): the kept start's numbers (from ``metrics``,
    the evaluation the start was chosen by), the exact posterior's beside them, and every start's end.
    ``remedy``: what to do about a stuck fit, in the reader's terms."""
    mean, std = trainer.parameters()
    row = fit.row
    return to_json(
        {
            "method": fit.method,
            "config": fit.config,
            "steps": trainer.steps_done,
            "diverged": trainer.diverged[row],
            "elbo": metrics["objective"][row],
            "elbo_mf": metrics["elbo"][row],
            "elbo_g": metrics["elbo_g"][row],
            "mutual_information": metrics["elbo_g"][row] - metrics["elbo"][row],
            "log_evidence": exact.log_evidence,
            "test_mse": metrics["test_mse"][row],
            "exact_test_mse": exact.test_mse,
            "mu": mean[row],
            "sigma": std[row],
            "outcome": fit.outcome,
            "notice": stuck_notice(remedy) if fit.stuck else None,
            "opposite_sides": two_relu.opposite_sides(mean[row], std[row]),
            "exact_opposite_sides": exact.opposite_sides,
            "restarts": len(fit.rows),
            "start": fit.kept + 1,  # counted from 1, as on the page
            "stuck_starts": fit.stuck_starts,
            "starts": [
                {
                    "start": k + 1,
                    "elbo": metrics["objective"][r],
                    "test_mse": metrics["test_mse"][r],
                    "outcome": fit.outcomes[k],
                    "mu": mean[r],
                    "sigma": std[r],
                }
                for k, r in enumerate(fit.rows)
            ],
        }
    )


def paper_table(
    alphas=DEFAULT_TABLE_ALPHAS,
    seeds: int = 5,
    steps: int = DEFAULT_STEPS,
    base: ToyConfig = ToyConfig(),
    progress=None,
) -> list[dict]:
    """Tables 2–3: per α and method, test MSE and the method's ELBO (MFVI: ELBO, SGM: ELBO_G),
    mean ± std over seeds 0..seeds−1, each seed's fit the best of ``base.restarts`` starts, all trained as
    one batch. Beside them, the exact posterior's log evidence (the ceiling of both bounds) and predictive
    test MSE, means over the seeds' data sets, and how many fits and starts ended stuck on one side.
    """
    alphas = [float(a) for a in alphas]
    if not alphas or int(seeds) != seeds or seeds < 1:
        raise ValueError("a table needs at least one alpha and seeds >= 1")
    configs = [replace(base, alpha=a, seed=s).validate() for a in alphas for s in range(int(seeds))]
    runs = [run for cfg in configs for method in two_relu.METHODS for run in starts_of(method, cfg)]
    trainer = two_relu.train_runs(runs, steps, progress=progress)
    metrics = trainer.evaluate()
    exact = {c: exact_answer(make_data(c), c) for c in configs}
    by_method_alpha: dict = {}
    for fit in fits(trainer, metrics["objective"], exact):
        by_method_alpha.setdefault((fit.config.alpha, fit.method), []).append(fit)
    rows = []
    for alpha in alphas:
        per_method = {}
        for method in two_relu.METHODS:
            kept = by_method_alpha[(alpha, method)]
            idx = [fit.row for fit in kept]
            bound, mse = metrics["objective"][idx], metrics["test_mse"][idx]
            per_method[method] = (bound, mse)
            rows.append(
                {
                    "alpha": alpha,
                    "method": method,
                    "seeds": len(idx),
                    "restarts": base.restarts,
                    "elbo_mean": np.mean(bound),
                    "elbo_std": np.std(bound),
                    "test_mse_mean": np.mean(mse),
                    "test_mse_std": np.std(mse),
                    "log_evidence_mean": np.mean([exact[fit.config].log_evidence for fit in kept]),
                    "exact_test_mse_mean": np.mean([exact[fit.config].test_mse for fit in kept]),
                    "stuck_fits": sum(fit.stuck for fit in kept),
                    "stuck_starts": sum(fit.stuck_starts for fit in kept),
                    "diverged": sum(trainer.diverged[i] for i in idx),
                }
            )
        paired = _paired_with_mfvi(per_method)
        for row in rows[-len(two_relu.METHODS) :]:
            row.update(paired if row["method"] == "sgm" else dict.fromkeys(PAIRED_KEYS))
    return to_json(rows)


# Floating-point operations per draw and training point (the two units' forward pass, the log-likelihood and its
# gradient) and per draw (SGM's I and its gradient); per point of the quasi-Monte-Carlo rule for I.
POINT_FLOPS, INFORMATION_FLOPS, RULE_POINT_FLOPS = 24, 40, 20


def training_cost(config: ToyConfig, runs: int, steps: int, records: int) -> Cost:
    """The arithmetic of ``steps`` Adam steps of ``runs`` runs on ``config``'s data (every draw on the
    minibatch, SGM's I), element by element (no product is large enough for a matrix library), and of
    ``records`` evaluations (:meth:`two_relu.ToyTrainer.record`: the closed-form ELBO and predictive on the training
    and test points, I by the 2¹²-point rule)."""
    batch = min(config.batch_size, config.n_train)
    draws = runs * steps * config.samples
    record = runs * (
        two_relu.TRACE_INFORMATION_POINTS * RULE_POINT_FLOPS + (config.n_train + config.n_test) * POINT_FLOPS
    )
    return Cost(elementwise=draws * (batch * POINT_FLOPS + INFORMATION_FLOPS) + records * record, normals=draws * 2)


def table_rows(alphas: tuple[float, ...], seeds: int, base: ToyConfig, progress=None) -> list[dict]:
    """:func:`paper_table` as a shared task computes it, reporting its Adam steps."""
    return paper_table(
        alphas,
        seeds,
        DEFAULT_STEPS,
        base,
        None if progress is None else (lambda done, total: progress(done, total, f"Adam step {done} / {total}")),
    )


def table_task(alphas, seeds: int, base: ToyConfig) -> Task:
    """The paper tables for ``alphas`` × ``seeds`` seeds on ``base``'s other settings, as a shared task:
    computed once for every session, in a worker process."""
    alphas = tuple(float(a) for a in alphas)
    runs = len(alphas) * seeds * len(two_relu.METHODS) * base.restarts
    return Task(
        ("toy_table", alphas, seeds, base),
        table_rows,
        (alphas, seeds, base),
        "Training the table",
        training_cost(base, runs, DEFAULT_STEPS, DEFAULT_STEPS // 100 + 1),
    )


PAIRED_KEYS = (
    "elbo_gain_mean",
    "elbo_gain_std",
    "seeds_higher_elbo",
    "test_mse_change_mean",
    "test_mse_change_std",
    "seeds_lower_test_mse",
)


def _paired_with_mfvi(per_method) -> dict:
    """SGM minus MFVI on the same seeds (same data and initialisation): the differences a table
    of two means ± std hides, since most of the spread across seeds is the data's, shared by both."""
    elbo_gain = per_method["sgm"][0] - per_method["mfvi"][0]
    mse_change = per_method["sgm"][1] - per_method["mfvi"][1]
    return dict(
        zip(
            PAIRED_KEYS,
            (
                np.mean(elbo_gain),
                np.std(elbo_gain),
                np.sum(elbo_gain > 0),
                np.mean(mse_change),
                np.std(mse_change),
                np.sum(mse_change < 0),
            ),
        )
    )
