"""How the MNIST lab's VI converges: σ fitted by curvature (the Hessian diagonal's estimate, the stationary
point it gives), the learning-rate schedule, sparse evaluation, and the convergence test."""

import math

import numpy as np
import pytest
import torch

from symlab.labs.mnist import convergence
from symlab.labs.mnist import experiment as mnist
from symlab.labs.mnist.experiment import MnistConfig, MnistTensors, MnistTrainer
from symlab.lib import gaussian, mlp

pytestmark = pytest.mark.slow


def test_fisher_diagonal_is_the_hessian_diagonal_in_expectation():
    """For a ReLU MLP the Gauss-Newton diagonal equals the Hessian diagonal (whatever the labels), and the
    sampled-label estimate averages to it."""
    torch.manual_seed(0)
    layout = mlp.Layout((5, 4, 3, 3))
    theta = torch.randn(layout.n_params, dtype=torch.float64)
    x = torch.randn(6, 5, dtype=torch.float64)
    labels = torch.randint(0, 3, (6,))

    def loss(th, inputs, y):
        return torch.nn.functional.cross_entropy(mlp.forward(layout.layers(th), inputs), y, reduction="sum")

    hessian = torch.autograd.functional.hessian(lambda th: loss(th, x, labels), theta).diagonal() / 6
    probs = torch.softmax(mlp.forward(layout.layers(theta), x), -1)
    gauss_newton = torch.zeros_like(theta)  # Σ_n Σ_k p_nk (∂ℓ(x_n, k)/∂θ)², by brute force over the labels
    for n in range(6):
        for k in range(3):
            gradient = torch.autograd.functional.jacobian(lambda th: loss(th, x[n : n + 1], torch.tensor([k])), theta)
            gauss_newton += probs[n, k] * gradient**2
    gauss_newton /= 6
    torch.testing.assert_close(gauss_newton, hessian, rtol=0, atol=1e-12)
    generator, out, total, draws = torch.Generator().manual_seed(1), torch.zeros_like(theta), 0.0, 20_000
    for _ in range(draws):
        mlp.fisher_diagonal(layout.layers(theta), x, generator, layout.layers(out))
        total = total + out
    assert (total / draws - hessian).abs().max() < 0.03 * hessian.abs().max()


def synthetic_trainer(**changes) -> MnistTrainer:
    """A 784-3-10 network on 64 random images, one full batch per step."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 784, generator=generator)
    y = torch.randint(0, 10, (64,), generator=generator)
    config = MnistConfig(**{**dict(hidden=3, batch_size=64, device="cpu", init_sd=0.05, seed=0), **changes})
    return MnistTrainer(config, MnistTensors(x, y, x[:8], y[:8]), torch.device("cpu"))


def elbo_along(trainer: MnistTrainer, scales, draws: int = 2000) -> list[float]:
    """The ELBO with every σ multiplied by each of ``scales``, on the same draws ε (common random numbers)."""
    mu, log_sd = trainer.mu.detach().double(), trainer.log_sd.detach().double()
    x, y = trainer.data.train_x.double(), trainer.data.train_y
    noise = torch.randn(draws, mu.numel(), generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    values = []
    for scale in scales:
        sd = log_sd.exp() * scale
        weights = mu + sd * noise
        log_likelihood = torch.stack(
            [
                -torch.nn.functional.cross_entropy(mlp.forward(trainer.layout.layers(w), x), y, reduction="sum")
                for w in weights
            ]
        ).mean()
        kl = gaussian.flat_kl_to_prior(mu, sd.log(), trainer.config.prior_scale, sd)
        values.append(float(log_likelihood - kl))
    return values


def test_the_curvature_fit_puts_sigma_where_the_elbo_is_highest():
    """μ held still: after the running mean has settled, scaling every σ up or down by 20 % lowers the ELBO."""
    trainer = synthetic_trainer()
    generator = torch.Generator().manual_seed(3)
    x = trainer.data.train_x
    with torch.no_grad():
        for _ in range(1500):
            sd = trainer.log_sd.exp()
            weights = trainer.mu + sd * torch.randn(trainer.mu.shape, generator=generator)
            trainer.fit_sd(x, weights, sd, None, generator)
    lower, at, higher = elbo_along(trainer, (math.exp(-0.2), 1.0, math.exp(0.2)))
    assert at > lower + 1.0 and at > higher + 1.0
    assert trainer.log_sd.exp().median() > 0.2  # far from σ₀ 0.05: the fit moved it


def test_sgm_sigma_solves_the_stationarity_of_elbo_plus_i():
    """After SGM steps whose Î had a gradient: 1/σ − aσ + g = 0 with a = 1/s² + N·(running Hessian mean) and
    g the running mean of ∂Î/∂σ."""
    trainer = synthetic_trainer(method="sgm", K=8, init_sd=0.5)
    active = [trainer.train_epoch()["mi_active"] for _ in range(5)]
    assert max(active) > 0 and trainer.info_grad.abs().max() > 0
    sd = trainer.log_sd.detach().double().exp()
    a = 1.0 / trainer.config.prior_scale**2 + trainer.n_train * trainer.curvature.double()
    residual = 1.0 / sd - a * sd + trainer.info_grad.double()
    assert residual.abs().max() < 1e-4 * (1.0 / sd).max()


def test_sgm_whose_i_never_had_a_gradient_fits_sigma_exactly_as_mfvi():
    mfvi, sgm = synthetic_trainer(init_sd=1e-3), synthetic_trainer(method="sgm", K=4, init_sd=1e-3)
    for _ in range(3):
        mfvi.train_epoch()
        assert sgm.train_epoch()["mi_active"] == 0.0
    assert torch.equal(mfvi.log_sd, sgm.log_sd) and torch.equal(mfvi.mu, sgm.mu)


def test_adam_fit_trains_log_sd_and_curvature_fit_leaves_it_to_the_fixed_point():
    adam = synthetic_trainer(sd_fit="adam")
    assert any(p is adam.log_sd for group in adam.optimizer.param_groups for p in group["params"])
    assert adam.curvature is None
    curvature = synthetic_trainer()
    assert all(p is not curvature.log_sd for group in curvature.optimizer.param_groups for p in group["params"])


def test_cosine_schedule_falls_to_zero_and_constant_stays():
    trainer = synthetic_trainer(lr=0.01)
    rates = []
    for step in (0, 50, 100):
        trainer.set_learning_rate(step, 100)
        rates.append(trainer.optimizer.param_groups[0]["lr"])
    assert rates == pytest.approx([0.01, 0.005, 0.0], abs=1e-12)
    constant = synthetic_trainer(lr=0.01, lr_schedule="constant")
    constant.set_learning_rate(99, 100)
    assert constant.optimizer.param_groups[0]["lr"] == 0.01


def test_evaluation_every_n_epochs_and_always_the_last():
    trainer = synthetic_trainer(epochs=5, eval_every=2)
    history = [trainer.train_epoch() for _ in range(5)]
    assert [m["test_acc"] is not None for m in history] == [False, True, False, True, True]
    assert all(m["train_elbo"] is not None and m["log_sd_mean"] is not None for m in history)
    assert mnist.final_summary(trainer)["test_acc"] == history[-1]["test_acc"]


def test_configs_recorded_before_the_fit_existed_read_as_what_ran():
    old = {
        key: value
        for key, value in MnistConfig().to_dict().items()
        if key not in ("sd_fit", "lr_schedule", "eval_every")
    }
    config = MnistConfig.from_dict(old)
    assert (config.sd_fit, config.lr_schedule, config.eval_every) == ("adam", "constant", 1)
    assert MnistConfig.from_dict(MnistConfig().to_dict()) == MnistConfig()


# --- the convergence test ------------------------------------------------------------------------------------


def history_from(step_elbos: np.ndarray, log_sds, steps_per_epoch: int) -> list[dict]:
    """Per-epoch entries as the trainer writes them, from per-step ELBOs and each epoch's mean log σ."""
    entries = []
    for index, start in enumerate(range(0, len(step_elbos), steps_per_epoch)):
        chunk = step_elbos[start : start + steps_per_epoch]
        entries.append(
            {
                "epoch": index + 1,
                "steps": len(chunk),
                "train_elbo": float(chunk.mean()),
                "train_elbo_sd": float(chunk.std()),
                "log_sd_mean": float(log_sds[index]),
            }
        )
    return entries


def test_window_statistics_equal_the_direct_ones():
    rng = np.random.default_rng(0)
    elbos = rng.normal(-1000.0, 30.0, 1200)
    history = history_from(elbos, np.zeros(12), 100)
    start, window = convergence._window(history, 12, 500)
    assert start == 7
    direct = elbos[700:1200]
    assert window["mean"] == pytest.approx(direct.mean()) and window["se"] == pytest.approx(
        direct.std() / math.sqrt(500)
    )


def test_a_flat_run_converges_where_it_became_flat():
    rng = np.random.default_rng(1)
    rising = np.linspace(-5000.0, -1000.0, 2000)  # 2 per step: far beyond the noise
    elbos = np.concatenate([rising, np.full(3000, -1000.0)]) + rng.normal(0.0, 20.0, 5000)
    log_sds = np.concatenate([np.linspace(-3.0, -1.0, 20), np.full(30, -1.0)])
    result = convergence.convergence(history_from(elbos, log_sds, 100))
    assert result["converged"] and 25 <= result["converged_epoch"] <= 35  # two flat windows after step 2000
    assert convergence.describe(result) == f"converged at epoch {result['converged_epoch']}"


def test_a_rising_elbo_or_a_moving_sigma_is_not_converged_and_says_which():
    rng = np.random.default_rng(2)
    rising = np.linspace(-5000.0, -1000.0, 3000) + rng.normal(0.0, 20.0, 3000)
    verdict = convergence.convergence(history_from(rising, np.full(30, -1.0), 100))
    assert not verdict["converged"] and verdict["elbo_change"] > 0
    assert convergence.describe(verdict).startswith("not converged: ELBO moved +")
    flat = rng.normal(-1000.0, 20.0, 3000)
    moving = convergence.convergence(history_from(flat, np.linspace(-3.0, -1.0, 30), 100))
    assert not moving["converged"] and "σ moved +" in convergence.describe(moving)


def test_too_short_or_unrecorded_histories_are_not_called_converged():
    rng = np.random.default_rng(3)
    short = history_from(rng.normal(-1000.0, 20.0, 900), np.zeros(9), 100)
    assert convergence.convergence(short)["converged"] is False
    assert convergence.describe(convergence.convergence(short)) == "too short to tell"
    old = [{k: v for k, v in entry.items() if k != "train_elbo_sd"} for entry in short * 2]
    assert convergence.convergence(old)["elbo_change"] is None


def test_a_trainer_run_records_what_the_test_reads():
    """2 500 full-batch steps on 64 images with the cosine schedule: flat (within its noise) from about step 1 000."""
    trainer = synthetic_trainer(epochs=2500, eval_every=2500)
    for _ in range(2500):
        trainer.train_epoch()
    summary = mnist.final_summary(trainer)
    assert summary["converged"] and 0 < summary["elbo_change_se"]
    assert summary["converged_epoch"] % 500 == 0  # checks fall a window (500 one-step epochs) apart
    assert summary == {**summary, **convergence.convergence(trainer.history)}


def test_blocks_are_rebuilt_every_n_steps_of_the_run_not_of_each_epoch(monkeypatch):
    """64 images in batches of 16: 4 steps an epoch. Rebuilding every 10 steps over 5 epochs (20 steps) plans the
    blocks at steps 0 and 10 only."""
    from symlab.lib import blocks

    planned = []
    original = blocks.plan_blocks

    def counting(*args):
        planned.append(args[4] if len(args) > 4 else "diagnostics")  # training passes the parity
        return original(*args)

    monkeypatch.setattr(blocks, "plan_blocks", counting)
    trainer = synthetic_trainer(method="sgm", mi="blocks", block_size=2, batch_size=16, rebuild_every=10, eval_every=5)
    for _ in range(5):
        trainer.train_epoch()
    assert planned == [0, 1, "diagnostics"]


def test_a_server_caps_epochs_in_passes_over_all_the_images():
    from symlab.specs.settings import RunLimits

    assert MnistConfig(epochs=1000, train_subset=500).work().epochs == 9  # 8.3 passes, rounded up
    assert MnistConfig(epochs=10).work().epochs == 10
    hosted = RunLimits(max_epochs=10)
    hosted.check(MnistConfig(epochs=1000, train_subset=500, hidden=16).work())
    with pytest.raises(ValueError, match="11 epochs is above this server's cap of 10"):
        hosted.check(MnistConfig(epochs=1100, train_subset=600, hidden=16).work())
