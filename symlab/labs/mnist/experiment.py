"""MNIST lab core: MFVI vs SGM for MLPs (Gelberg et al. §5, Table 1).

A run is a :class:`MnistConfig`; :class:`MnistTrainer` trains it epoch by epoch, reports the
per-epoch metrics (train ELBO, ELBO + Î_K for SGM, test accuracy, NLL, calibration error) and
saves/restores checkpoints so that an interrupted run resumes exactly where its last completed
epoch left it (every epoch draws its randomness from its own seeded generator).
"""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from symlab.lib import blocks, bnn, gaussian, mlp, uncertainty, weights
from symlab.lib.mnist_data import PIXEL_MEAN, PIXEL_STD, Mnist
from symlab.specs.results import TrainingDiverged

from . import convergence
from .config import CURVATURE_DECAY, DIAGNOSTIC_DRAWS, ECE_BINS, EVAL_BATCH, MnistConfig


def resolve_device(name: str) -> torch.device:
    """ "auto" → CUDA when torch finds a GPU, else CPU; "cuda" without a GPU is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was requested but torch finds no CUDA GPU here; use 'cpu' or 'auto'")
    return torch.device(name)


@dataclass(frozen=True)
class MnistTensors:
    train_x: torch.Tensor  # (n, 784) float32, standardised
    train_y: torch.Tensor  # (n,) int64
    test_x: torch.Tensor
    test_y: torch.Tensor


def prepare_tensors(mnist: Mnist, config: MnistConfig, device: torch.device) -> MnistTensors:
    """Standardised float32 tensors on ``device`` (kept there for the whole run: on a GPU no
    batch crosses the bus); a seeded subset of the training set when ``train_subset`` is set."""
    train_images, train_labels = mnist.train_images, mnist.train_labels
    if config.train_subset:
        chosen = np.random.default_rng(config.seed).permutation(len(train_labels))[: config.train_subset]
        train_images, train_labels = train_images[np.sort(chosen)], train_labels[np.sort(chosen)]

    def images(array):
        return ((torch.from_numpy(np.asarray(array, dtype=np.float32)) / 255.0 - PIXEL_MEAN) / PIXEL_STD).to(device)

    def labels(array):
        return torch.from_numpy(np.asarray(array, dtype=np.int64)).to(device)

    return MnistTensors(
        images(train_images), labels(train_labels), images(mnist.test_images), labels(mnist.test_labels)
    )


def _generator(device: torch.device, *seed_parts: int) -> torch.Generator:
    """A generator for one purpose of one run (init, an epoch's draws, its permutations, …)."""
    seed = 0
    for part in seed_parts:
        seed = (seed * 1_000_003 + part) % 2**60
    return torch.Generator(device=device).manual_seed(seed)


# The metrics of an evaluated epoch only (None in the others): test metrics and unit diagnostics.
EVALUATED_KEYS = (
    "test_acc",
    "test_nll",
    "test_ece",
    "nearest_unit_kl_min",
    "nearest_unit_kl_median",
    "units_at_prior",
    "unit_layers",
    "block_mi",
    "block_mi_se",
    "block_log_group_size",
    "block_mi_active",
    "sd_median",
)


class MnistTrainer:
    """Variational parameters, Adam state and history of one run."""

    normals = bnn.NormalTable  # where a step's ε comes from (bnn.FreshNormals: drawn afresh, the reference)

    def __init__(self, config: MnistConfig, data: MnistTensors, device: torch.device):
        self.config = config.validate()
        self.layout = config.layout
        self.data = data
        self.device = device
        self.n_train = data.train_x.shape[0]
        q = gaussian.init_posterior(self.layout, config.init_sd, _generator(device, config.seed, 0), device)
        self.mu = q.mean.requires_grad_()
        self.log_sd = q.log_sd.requires_grad_()
        fits_curvature = config.sd_fit == "curvature"
        self.optimizer = torch.optim.Adam(
            [self.mu] if fits_curvature else [self.mu, self.log_sd], lr=config.lr, fused=True
        )
        # The curvature fit's running means: the Hessian diagonal, started where it gives σ₀, and SGM's ∂Î/∂σ.
        self.curvature = (
            ((1.0 / q.log_sd.detach().exp().square() - 1.0 / config.prior_scale**2).clamp_(min=0.0) / self.n_train)
            if fits_curvature
            else None
        )
        self.info_grad = torch.zeros_like(self.mu) if fits_curvature and config.method == "sgm" else None
        self.epoch = 0  # completed epochs
        self.history: list[dict] = []
        self.block_plan: blocks.BlockPlan | None = None  # H(θ) for SGM with mi="blocks"
        self._scratch_arrays: dict[str, torch.Tensor] = {}
        self._scratch_views: dict[str, list] = {}

    def _scratch(self, name: str) -> torch.Tensor:
        """A parameter-sized array kept from step to step (overwritten by the next): a fresh 1 MB
        allocation costs a training step as much as a pass over it (the pages fault in again)."""
        if name not in self._scratch_arrays:
            self._scratch_arrays[name] = torch.empty_like(self.mu, requires_grad=False)
        return self._scratch_arrays[name]

    def _views(self, name: str) -> list:
        """The (W, b) layer views of the scratch array ``name``, made once."""
        if name not in self._scratch_views:
            self._scratch_views[name] = self.layout.layers(self._scratch(name))
        return self._scratch_views[name]

    @property
    def draws_weights(self) -> bool:
        """Whether a step draws ω = μ + σ ⊙ noise: all but MFVI fitting σ by Adam with local reparameterisation."""
        return self.config.estimator != "local" or self.config.method == "sgm" or self.curvature is not None

    @property
    def steps_per_epoch(self) -> int:
        return math.ceil(self.n_train / self.config.batch_size)

    def negative_elbo_gradients(self, x, y, noise, sd, sample_generator=None):
        """(minibatch NLL, gradients of NLL + KL/N w.r.t. μ and log σ, the weight draw ω = μ + σ ⊙ noise or
        None) by the config's gradient estimator, given σ = exp(log σ) outside autograd; ``noise`` is None only
        for MFVI with ``local``, which draws no weights; ``local`` and ``flipout`` draw their per-example noise
        from ``sample_generator``."""
        config, mu, log_sd = self.config, self.mu, self.log_sd
        if config.estimator == "reparam":
            with torch.no_grad():
                perturbation = torch.mul(sd, noise, out=self._scratch("perturbation"))
                w = torch.add(mu, perturbation, out=self._scratch("w"))
                grad_w = self._scratch("grad_mu")
                nll = mlp.cross_entropy_gradient(self._views("w"), x, y, self._views("grad_mu"))
                return (
                    nll,
                    *bnn.negative_elbo_gradients(
                        grad_w, perturbation, mu, sd, config.prior_scale, self.n_train, out=self._scratch("grad_log_sd")
                    ),
                    w,
                )
        if config.estimator == "local":
            logits = bnn.local_reparam_outputs(self.layout, mu, log_sd, x, sample_generator)
        else:
            logits = bnn.flipout_outputs(self.layout, mu, log_sd, noise, x, sample_generator)
        nll = F.cross_entropy(logits, y)
        grad_mu, grad_log_sd = torch.autograd.grad(nll, [mu, log_sd])
        with torch.no_grad():
            kl_mu, kl_log_sd = bnn.kl_gradients(mu, sd, config.prior_scale, self.n_train)
            drawn = None if noise is None else torch.addcmul(mu, sd, noise)
        return nll, grad_mu.add_(kl_mu), grad_log_sd.add_(kl_log_sd), drawn

    def step(self, x, y, noise, perm_generator, sample_generator=None, label_generator=None) -> dict:
        """One Adam step on −(ELBO [+ Î]) / N from one minibatch, by the config's gradient estimator
        (:meth:`negative_elbo_gradients`), then σ by :meth:`fit_sd` when the config fits it by curvature
        (``label_generator`` draws its labels); returns the step's estimates. SGM's Î is Î_K (InfoNCE) or Î_H
        over ``block_plan``, at the weight draw ω = μ + σ ⊙ noise (its own draw under ``local``)."""
        config, mu, log_sd = self.config, self.mu, self.log_sd
        with torch.no_grad():
            sd = torch.exp(log_sd, out=self._scratch("sd"))
        nll, grad_mu, grad_log_sd, w = self.negative_elbo_gradients(x, y, noise, sd, sample_generator)
        with torch.no_grad():
            kl = gaussian.flat_kl_to_prior(mu, log_sd, config.prior_scale, sd)
            elbo = -self.n_train * nll.detach().double() - kl.double()
        estimates: dict[str, float] = {}
        info_grad_log_sd = None  # ∂(−Î/N)/∂log σ, when Î had a gradient
        mutual_info = None
        if config.method == "sgm":
            if config.mi == "blocks":
                plan = self.block_plan
                assert plan is not None  # made for the blocks estimator
                mutual_info, active = blocks.block_mutual_info(self.layout, w.detach(), noise, mu, log_sd, plan)
                log_group_size = plan.log_group_size
            else:
                mutual_info, active = bnn.infonce(
                    self.layout, w.detach(), noise, mu, log_sd, config.K, perm_generator, sd
                )
                log_group_size = math.log(config.K)
            if active:
                extra_mu, extra_log_sd = torch.autograd.grad(-mutual_info.float() / self.n_train, [mu, log_sd])
                grad_mu += extra_mu
                grad_log_sd += extra_log_sd
                info_grad_log_sd = extra_log_sd
            estimates.update(active=active, log_group_size=log_group_size)
        # One sum is finite exactly when every term is (NaN and ±inf propagate): a cheap check. The step's numbers
        # come back in one transfer: on a GPU each read waits for the queued work, and a step has few to spare.
        with torch.no_grad():
            read = [elbo, (grad_mu.sum() + grad_log_sd.sum()).double()]
            read += [] if mutual_info is None else [mutual_info.detach().double()]
            values = torch.stack(read).tolist()
        if not math.isfinite(values[0]) or not math.isfinite(values[1]):
            raise TrainingDiverged("the loss became NaN or infinite")
        estimates["elbo"] = values[0]
        if mutual_info is not None:
            estimates["mutual_info"] = values[2]
        mu.grad, log_sd.grad = grad_mu, grad_log_sd
        if self.curvature is not None:
            with torch.no_grad():
                weights = w if w is not None else torch.addcmul(mu, sd, noise, out=self._scratch("w"))
                self.fit_sd(x, weights, sd, info_grad_log_sd, label_generator)
        self.optimizer.step()
        return estimates

    def set_learning_rate(self, step: int, total_steps: int) -> None:
        """The schedule's rate for step ``step`` (from 0) of ``total_steps``."""
        rate = self.config.lr
        if self.config.lr_schedule == "cosine":
            rate *= 0.5 * (1.0 + math.cos(math.pi * step / total_steps))
        for group in self.optimizer.param_groups:
            group["lr"] = rate

    def fit_sd(self, x, weights, sd, info_grad_log_sd, label_generator) -> None:
        """σ at the stationary point of ELBO [+ Î] for the running means. By Price's theorem
        ∂E_q[Σ_n ℓ_n]/∂σ = σ N E_q[∂²ℓ/∂w²], so ∂(ELBO + I)/∂σ = 1/σ − aσ + g with a = 1/s² + N E_q[∂²ℓ/∂w²]
        and g = ∂I/∂σ; its root is σ = (g + √(g² + 4a)) / 2a, and 1/σ² = a for MFVI (g = 0). The Hessian
        diagonal at this step's draw ω (:func:`~symlab.lib.mlp.fisher_diagonal`, unbiased) and g enter
        running means, so the noise of one minibatch averages out. μ's Adam step is left as it is."""
        config = self.config
        hessian = self._scratch("hessian")
        mlp.fisher_diagonal(self.layout.layers(weights), x, label_generator, self._views("hessian"))
        curvature = self.curvature
        assert curvature is not None  # kept where σ follows the curvature, the only fit that calls this
        curvature.mul_(CURVATURE_DECAY).add_(hessian, alpha=1.0 - CURVATURE_DECAY)
        precision = torch.mul(curvature, float(self.n_train), out=hessian).add_(1.0 / config.prior_scale**2)
        g = self.info_grad
        if g is not None:
            g.mul_(CURVATURE_DECAY)
            if info_grad_log_sd is not None:  # ∂I/∂σ = −N ∂(−Î/N)/∂log σ / σ
                g.add_(info_grad_log_sd / sd, alpha=-(1.0 - CURVATURE_DECAY) * self.n_train)
        # One expression for both: with g = 0 it is 1/√a to the last bit, as MFVI's is.
        root = precision.mul(4.0)
        if g is not None:
            root.addcmul_(g, g)
        root.sqrt_()
        if g is not None:
            root.add_(g)
        self.log_sd.data.copy_(root.div_(precision.mul_(2.0)).log_())

    def train_epoch(self, on_step=None) -> dict:
        """Train one epoch and evaluate; ``on_step(step, steps)`` may raise to stop it mid-epoch (it is also
        called, as ``on_step(steps, steps)``, between the evaluation's chunks: a long one stops too).
        Returns the epoch's metrics (also appended to ``history``)."""
        config, epoch = self.config, self.epoch + 1
        generator = _generator(self.device, config.seed, epoch)
        # SGM's permutations have their own stream, so MFVI and SGM runs with the same seed see the
        # same minibatches and weight noise: their difference is the Î_K term alone.
        perm_generator = _generator(self.device, config.seed, epoch, 2)
        label_generator = _generator(self.device, config.seed, epoch, 4)  # the curvature fit's labels
        order = torch.randperm(self.n_train, generator=generator, device=self.device)
        steps = self.steps_per_epoch
        normals = self.normals(self.layout.n_params, steps, generator, self.device) if self.draws_weights else None
        totals = {"elbo": 0.0, "elbo_squared": 0.0, "mutual_info": 0.0, "active": 0.0, "log_group_size": 0.0}
        started = time.perf_counter()
        for step in range(steps):
            global_step = (epoch - 1) * steps + step
            if config.method == "sgm" and config.mi == "blocks" and global_step % config.rebuild_every == 0:
                self.block_plan = self._plan_blocks(global_step)
            batch = order[step * config.batch_size : (step + 1) * config.batch_size]
            noise = None if normals is None else normals.draw(step)
            self.set_learning_rate(global_step, config.epochs * steps)
            try:
                estimates = self.step(
                    self.data.train_x[batch],
                    self.data.train_y[batch],
                    noise,
                    perm_generator,
                    generator,
                    label_generator,
                )
            except TrainingDiverged:
                raise TrainingDiverged(
                    f"training diverged at epoch {epoch}, step {step + 1}: the loss became "
                    f"NaN or infinite (try a lower learning rate than {config.lr:g})"
                ) from None
            for key, value in estimates.items():
                totals[key] += float(value)
            totals["elbo_squared"] += estimates["elbo"] ** 2
            if on_step is not None:
                on_step(step + 1, steps)
        seconds = time.perf_counter() - started
        mean_elbo = totals["elbo"] / steps
        metrics = {
            "epoch": epoch,
            "steps": steps,
            "train_elbo": mean_elbo,
            "train_elbo_sd": math.sqrt(max(totals["elbo_squared"] / steps - mean_elbo**2, 0.0)),
            "log_sd_mean": float(self.log_sd.detach().mean()),
            "train_elbo_sym": None,
            "mutual_info": None,
            "log_group_size": None,
            "mi_active": None,
            "seconds": seconds,
        }
        if config.method == "sgm":
            metrics.update(
                train_elbo_sym=(totals["elbo"] + totals["mutual_info"]) / steps,
                mutual_info=totals["mutual_info"] / steps,
                mi_active=totals["active"] / steps,
                log_group_size=totals["log_group_size"] / steps,
            )
        if epoch % config.eval_every == 0 or epoch >= config.epochs:
            check = None if on_step is None else (lambda: on_step(steps, steps))
            metrics.update(self.evaluate(_generator(self.device, config.seed, epoch, 1), check))
            metrics.update(self.diagnose(_generator(self.device, config.seed, epoch, 3), check))
        else:
            metrics.update(dict.fromkeys(EVALUATED_KEYS))
        self.epoch = epoch
        self.history.append(metrics)
        return metrics

    def _plan_blocks(self, global_step: int) -> blocks.BlockPlan:
        """H(θ) from the current q, every ``rebuild_every`` steps counted over the whole run (an epoch of a
        small training set is shorter than that). Deeper nets alternate between the odd and even hidden layers
        at each rebuild (blocks in adjacent layers would not factorise). The plan is kept in checkpoints, so a
        resumed run goes on with the blocks it had."""
        parity = (global_step // self.config.rebuild_every) % 2
        return blocks.plan_blocks(self.layout, self.mu.detach(), self.log_sd.detach(), self.config.block_size, parity)

    def diagnose(self, generator: torch.Generator, check=None) -> dict:
        """How close q's units are (nearest-unit Jeffreys divergence, units at the prior) and the
        block estimate of I_H on q as it is now (greedy blocks of ``block_size`` in the first,
        third, … hidden layers), for every run: MFVI's too, where nothing trains on it. ``check()``, called
        between its parts, may raise to stop it."""
        check = check or _no_check
        mu, log_sd = self.mu.detach(), self.log_sd.detach()
        units = blocks.unit_diagnostics(self.layout, mu, log_sd, self.config.prior_scale)
        check()
        plan = blocks.plan_blocks(self.layout, mu, log_sd, self.config.block_size)
        check()
        estimate = blocks.block_mutual_info_estimate(self.layout, mu, log_sd, plan, DIAGNOSTIC_DRAWS, generator)
        return {
            "nearest_unit_kl_min": units["nearest_unit_kl_min"],
            "nearest_unit_kl_median": units["nearest_unit_kl_median"],
            "units_at_prior": units["units_at_prior"],
            "unit_layers": units["by_layer"],
            "block_mi": estimate["mutual_info"],
            "block_mi_se": estimate["mutual_info_se"],
            "block_log_group_size": estimate["log_group_size"],
            "block_mi_active": estimate["active"],
            "sd_median": float(log_sd.median().exp()),
        }

    @torch.no_grad()
    def predictive_log_probs(self, x: torch.Tensor, generator: torch.Generator, check=None) -> torch.Tensor:
        """log of the predictive (1/M) Σ_m softmax(f_{ω_m}(x)), M = config.samples. ``check()``, called after each
        weight draw and each sample's pass over a chunk of ``x``, may raise to stop it."""
        check = check or _no_check
        samples = []
        for _ in range(self.config.samples):
            samples.append(bnn.sample_weights(self.mu, self.log_sd, generator))
            check()
        outputs = []
        for start in range(0, x.shape[0], EVAL_BATCH):
            chunk = x[start : start + EVAL_BATCH]
            log_probs = []
            for w in samples:
                log_probs.append(F.log_softmax(mlp.forward(self.layout.layers(w), chunk), dim=1))
                check()
            outputs.append(torch.logsumexp(torch.stack(log_probs), 0) - math.log(len(samples)))
        return torch.cat(outputs)

    def evaluate(self, generator: torch.Generator, check=None) -> dict:
        log_probs = self.predictive_log_probs(self.data.test_x, generator, check)
        return classification_metrics(log_probs, self.data.test_y)

    def state_dict(self) -> dict:
        return {
            "config": self.config.to_dict(),
            "epoch": self.epoch,
            "history": self.history,
            "mu": self.mu.detach().cpu(),
            "log_sd": self.log_sd.detach().cpu(),
            "optimizer": self.optimizer.state_dict(),
            **{
                name: getattr(self, name).cpu()
                for name in ("curvature", "info_grad")
                if getattr(self, name) is not None
            },
            **({"block_plan": blocks.plan_state(self.block_plan)} if self.block_plan is not None else {}),
        }

    def load_state_dict(self, state: dict) -> None:
        with torch.no_grad():
            self.mu.copy_(state["mu"].to(self.device))
            self.log_sd.copy_(state["log_sd"].to(self.device))
            for name in ("curvature", "info_grad"):
                if getattr(self, name) is not None:
                    getattr(self, name).copy_(state[name].to(self.device))
        self.optimizer.load_state_dict(state["optimizer"])
        if "block_plan" in state:
            self.block_plan = blocks.plan_from_state(state["block_plan"], self.device)
        self.epoch, self.history = int(state["epoch"]), list(state["history"])


def _no_check() -> None:
    """Nothing asks a computation to stop."""


def classification_metrics(log_probs: torch.Tensor, labels: torch.Tensor, bins: int = ECE_BINS) -> dict:
    """Test accuracy, mean negative log-likelihood, and expected calibration error (equal-width
    confidence bins: Σ_b (n_b/n) |accuracy_b − confidence_b|), by symlab.lib.uncertainty's formulas."""
    return {
        "test_acc": uncertainty.accuracy(log_probs, labels),
        "test_nll": uncertainty.negative_log_likelihood(log_probs, labels),
        "test_ece": uncertainty.expected_calibration_error(log_probs, labels, bins),
    }


class CheckpointError(RuntimeError):
    """A checkpoint could not be written (disk full, no permission; the previous one is intact) or read (the
    message says why in a few words)."""


def save_checkpoint(trainer: MnistTrainer, path: Path) -> None:
    """Write atomically: a crash or a full disk mid-write leaves the previous checkpoint intact."""
    path = Path(path)
    partial = path.with_suffix(".partial")
    try:
        torch.save(trainer.state_dict(), partial)
        os.replace(partial, path)
    except (OSError, RuntimeError) as error:  # torch reports a failed write as a RuntimeError
        partial.unlink(missing_ok=True)
        earlier = sorted(path.parent.glob("checkpoint*.pt"))
        kept = f"epoch {trainer.epoch - 1}'s checkpoint is intact" if earlier else "no checkpoint was kept"
        raise CheckpointError(
            f"cannot write the checkpoint {path} ({error}): free some space or fix the "
            f"permissions there, then resume ({kept})"
        ) from None


def load_checkpoint(trainer: MnistTrainer, path: Path) -> None:
    """Continue ``trainer`` from the checkpoint at ``path``; a :class:`CheckpointError` saying why in a few words
    where it cannot (torch's own messages advise loading untrusted files unsafely)."""
    state = read_checkpoint(path, trainer.device)
    if MnistConfig.from_dict(state["config"]) != trainer.config:
        raise CheckpointError("it holds another run's checkpoint")
    try:
        trainer.load_state_dict(state)
    except (KeyError, ValueError, RuntimeError, TypeError) as error:
        raise CheckpointError(f"its contents do not fit this run ({type(error).__name__})") from None


def read_checkpoint(path: Path, device="cpu") -> dict:
    """A checkpoint's state (:meth:`MnistTrainer.state_dict`), read as data only; a :class:`CheckpointError` where
    the file is damaged, truncated or not a checkpoint."""
    try:
        state = _load_quietly(path, map_location=device)
    except FileNotFoundError:
        raise CheckpointError("the file is gone") from None
    except Exception:  # torch fails as many ways as a file can be wrong, and advises weights_only=False
        raise CheckpointError("the file is damaged or is not a checkpoint") from None
    if not isinstance(state, dict) or not {"config", "epoch", "mu", "log_sd"} <= state.keys():
        raise CheckpointError("the file is not a checkpoint of an MNIST run")
    try:
        MnistConfig.from_dict(state["config"])
    except (TypeError, ValueError, AttributeError):
        raise CheckpointError("the file is not a checkpoint of an MNIST run") from None
    return state


def _load_quietly(path: Path, **options):
    """torch.load as data only, without the warnings it prints about a file that is not its own."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.load(path, weights_only=True, **options)


def checkpoint_problem(path: Path) -> str | None:
    """Why the checkpoint at ``path`` cannot be read, in a few words; None where it reads. Memory-maps the file:
    the tensors' bytes are not read."""
    try:
        state = _load_quietly(path, map_location="cpu", mmap=True)
    except FileNotFoundError:
        return "it has no checkpoint yet: one is written after each completed epoch"
    except Exception:
        return "its checkpoint is damaged or is not a checkpoint"
    if not isinstance(state, dict) or not {"config", "epoch", "mu", "log_sd"} <= state.keys():
        return "its checkpoint is not an MNIST run's"
    return None


INPUT_NOTE = f"pixels / 255, then (x - {PIXEL_MEAN}) / {PIXEL_STD}"  # how this lab's runs see MNIST


def posterior_file(state: dict, run_id: int | None = None) -> bytes:
    """A run's posterior (a checkpoint's ``state``, :meth:`MnistTrainer.state_dict`) as a safetensors file
    (:func:`symlab.lib.weights.posterior_bytes`): the means load into nn.Sequential(nn.Linear, nn.ReLU, …); the
    metadata carry the config, the epochs done, the last test accuracy and how the inputs were scaled."""
    config = MnistConfig.from_dict(state["config"])
    mu, sd = state["mu"].detach().cpu(), state["log_sd"].detach().cpu().exp()
    history = state.get("history") or []
    metadata = {
        "config": config.to_dict(),
        "epochs_done": int(state["epoch"]),
        "inputs": INPUT_NOTE,
        "test_acc": history[-1].get("test_acc") if history else None,
    }
    if run_id is not None:
        metadata["run_id"] = run_id
    return weights.posterior_bytes(config.layout.layers(mu), config.layout.layers(sd), metadata)


def exported_run(checkpoint: Path, run_id: int) -> bytes:
    """:func:`posterior_file` of run ``run_id`` from its last checkpoint (written after every epoch)."""
    if not Path(checkpoint).exists():
        raise ValueError(f"run #{run_id} has no checkpoint yet: one is written after each completed epoch")
    try:
        state = read_checkpoint(checkpoint)
    except CheckpointError as error:
        raise ValueError(
            f"run #{run_id}'s checkpoint cannot be read: {error}. Resume the run (it goes on from the "
            "checkpoint before) or restart it"
        ) from None
    return posterior_file(state, run_id)


DIAGNOSTIC_KEYS = (
    "nearest_unit_kl_min",
    "nearest_unit_kl_median",
    "units_at_prior",
    "block_mi",
    "block_log_group_size",
    "block_mi_active",
    "sd_median",
)


def final_summary(trainer: MnistTrainer) -> dict:
    """The last epoch's metrics with the run's totals (the headless command's JSON keys).

    ``mutual_info``, ``log_group_size`` and ``mi_active`` describe the run's estimator of I: for
    SGM the one it trains on (averaged over the last epoch's steps; ``mi_trained`` true); for MFVI
    the block estimate measured on q at the end of the last epoch (``mi_trained`` false)."""
    config = trainer.config
    last = trainer.history[-1] if trainer.history else {}
    trained = config.method == "sgm"
    summary = {
        "epochs_done": trainer.epoch,
        "test_acc": last.get("test_acc"),
        "test_nll": last.get("test_nll"),
        "test_ece": last.get("test_ece"),
        "train_elbo": last.get("train_elbo"),
        "train_elbo_sym": last.get("train_elbo_sym"),
        "mi_estimator": config.mi if trained else "blocks",
        "mi_trained": trained,
        "mutual_info": last.get("mutual_info" if trained else "block_mi"),
        "log_group_size": last.get("log_group_size" if trained else "block_log_group_size"),
        "mi_active": last.get("mi_active" if trained else "block_mi_active"),
        "train_seconds": sum(m["seconds"] for m in trainer.history),
    }
    summary.update({key: last.get(key) for key in DIAGNOSTIC_KEYS})
    summary.update(convergence.convergence(trainer.history))
    return summary
