"""Posterior approximations against a reference posterior on MNIST (Laurent et al. 2024, §4 and Table 1;
docs/science.md, § Posterior approximations).

The reference posterior is ``reference`` independently trained checkpoints (SGD, each its own
initialisation and minibatch order, trained together: :mod:`symlab.lib.ensembles`). Each method gives
``samples`` weight samples, single-mode (from one trained start) and multi-mode (``modes`` independent
starts, ``samples / modes`` from each); a deep ensemble is the ``modes`` starts themselves. Each sample set
is scored by:

- its MMD to the reference, layer by layer, the median over 10 Gaussian and 10 Laplace kernels, averaged
  with weights = the layer's parameter count (:func:`symlab.lib.mmd.layerwise_mmd`), on the weights as they
  are (``mmd``) and with the symmetries removed from both sets (``mmd_no_symmetry``: unit norms, then units
  sorted by ``removal``'s key: :func:`symlab.lib.networks.remove_symmetries`);
- its predictions, averaged over the samples: accuracy, NLL, ECE, Brier, OOD AUPR and FPR95 against an
  offline letter set, in- and out-of-distribution mutual information (:mod:`symlab.lib.uncertainty`).

A comparison runs in stages (the reference in chunks, the starts, then one method per stage) so that a
background run shows progress per method and resumes from the last finished stage.
"""

from __future__ import annotations

import functools
import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save
from scipy import stats

from symlab.lib import bbb, bnn, chains, ensembles, hmc, laplace, mlp, mmd, networks, sghmc, swag, uncertainty
from symlab.lib.glyphs import load_glyphs
from symlab.lib.mnist_data import PIXEL_MEAN, PIXEL_STD, Mnist
from symlab.lib.shipped import shipped
from symlab.lib.weights import write_atomically
from symlab.specs.results import TrainingDiverged, training_verdict

from .config import (
    CURVATURE_IMAGES,
    HMC_START_EPOCHS,
    LABELS,
    LR,
    MAX_LEAPFROG,
    METHODS,
    MOMENTUM,
    MULTI_ONLY,
    PAPER_COLUMNS,
    PAPER_ROWS,
    SINGLE_ONLY,
    WEIGHT_DECAY,
    MethodsConfig,
)

DROPOUT_RATE = 0.2  # on the last layer, in training and testing (App. B.1)
CHUNK = 50  # reference checkpoints trained per stage
SGHMC_LR, SGHMC_FRICTION = 0.01, 1.0
BBB_LR = 1e-3
SGM_K = 16  # the MLP's InfoNCE terms (its S_h is too large to enumerate; the convnet's 32 symmetries are not)
SHIPPED_REPORTS = shipped("methods")  # seed<N>.json: the default comparison for seeds 0, 1, 2
MMD_KEYS = ("mmd", "mmd_no_symmetry")
ROW_KEYS = ("method", "modes", "samples", *MMD_KEYS, "mmd_by_reference", *uncertainty.METRIC_KEYS, "seconds")
HMC_KEYS = ("mmd_hmc", "mmd_hmc_no_symmetry", "agreement_hmc", "tv_hmc")  # each row's scores against HMC's draws
HMC_STREAM = len(METHODS)  # the HMC reference's random stream, after the methods' own
HMC_DRAW_CHUNK = 10  # HMC draws per chain in one stage: a background run's progress and resume point
BOOTSTRAP_REPLICATES = 200  # resamples behind each MMD²'s interval
RHAT_MIXED = 1.1  # R̂ at or below which chains count as agreeing (Izmailov et al. 2021's threshold)
IMAGE_CHUNK = 500  # images per piece of a full-batch pass (one piece's activations at a time are faster on a CPU)


class CheckpointError(RuntimeError):
    """A comparison's checkpoint cannot be written or read."""


@dataclass(frozen=True)
class Data:
    x: torch.Tensor  # training images [n, 1, 28, 28], normalised as the MNIST lab's
    y: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    x_ood: torch.Tensor  # as many letters as test images


def _images(pixels: np.ndarray) -> torch.Tensor:
    return ((torch.tensor(pixels, dtype=torch.float32) / 255 - PIXEL_MEAN) / PIXEL_STD).reshape(-1, 1, 28, 28)


def prepare_data(mnist: Mnist, config: MethodsConfig, glyphs=None) -> Data:
    """Seeded subsets of MNIST's training and test sets and of the letters."""
    glyphs = load_glyphs() if glyphs is None else glyphs
    rng = np.random.default_rng(config.seed)
    train = np.sort(rng.choice(len(mnist.train_labels), config.train_size, replace=False))
    test = np.sort(rng.choice(len(mnist.test_labels), config.test_size, replace=False))
    ood = np.sort(rng.choice(len(glyphs.images), min(config.test_size, len(glyphs.images)), replace=False))
    return Data(
        _images(mnist.train_images[train]),
        torch.tensor(mnist.train_labels[train], dtype=torch.long),
        _images(mnist.test_images[test]),
        torch.tensor(mnist.test_labels[test], dtype=torch.long),
        _images(glyphs.images[ood]),
    )


# ---------------------------------------------------------------------------------------------
# Each method's samples around one start
# ---------------------------------------------------------------------------------------------


def _generator(config: MethodsConfig, *parts: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(np.random.SeedSequence([config.seed, *parts]).generate_state(1)[0]))


def method_samples(
    method: str,
    config: MethodsConfig,
    data: Data,
    start: torch.Tensor,
    dropout_start: torch.Tensor,
    count: int,
    index: int,
) -> torch.Tensor:
    """``count`` weight samples ``[count, P]`` of ``method`` around start ``index`` (its trained network
    ``start``; ``dropout_start`` the same network trained with dropout)."""
    arch, g = config.arch, _generator(config, METHODS.index(method), index)
    steps_per_epoch = math.ceil(config.train_size / 64)
    if method == "dropout":
        return networks.dropout_weights(arch, dropout_start, DROPOUT_RATE, count, g)
    if method in ("mfvi", "sgm"):  # from the start's initialisation, for as many epochs (App. B.1)
        init = ensembles.initial_networks(arch, range(index, index + 1), config.seed)[0]
        information = symmetry_information(arch, g) if method == "sgm" else None
        mean, sd = bbb.bbb_fit(
            arch.logits,
            init,
            data.x,
            data.y,
            epochs=config.epochs,
            batch_size=64,
            lr=BBB_LR,
            generator=g,
            information=information,
        )
        samples = bbb.bbb_samples(mean, sd, count, g)
        return symmetrised(arch, samples, g) if method == "sgm" else samples
    if method == "swag":  # SGD at the starting rate for twice as long, 20 snapshots (App. B.1)
        posterior = swag.swag_fit(
            arch.logits,
            start,
            data.x,
            data.y,
            lr=LR,
            momentum=MOMENTUM,
            weight_decay=WEIGHT_DECAY,
            batch_size=64,
            snapshots=20,
            generator=g,
            steps_between=max(1, 2 * config.epochs * steps_per_epoch // 20),
        )
        return posterior.sample(count, g)
    if method == "laplace":
        return _laplace_samples(config, data, start, count, g)
    if method == "sghmc":
        return sghmc.sghmc_samples(
            arch.logits,
            start,
            data.x,
            data.y,
            prior_var=prior_variance(config),
            lr=SGHMC_LR,
            friction=SGHMC_FRICTION,
            batch_size=64,
            burn_in=steps_per_epoch,
            thinning=max(1, steps_per_epoch // 10),
            count=count,
            generator=g,
        )
    raise ValueError(f"no sampler for {method!r}")


def symmetry_information(arch: networks.Architecture, generator: torch.Generator):
    """SGM's information term I(w) for one draw: exact over the convnet's 32 permutation symmetries; for the MLP
    InfoNCE Î_K over the identity and K − 1 random permutations of its hidden units (Gelberg et al. Thm 4.3)."""
    if arch.name == "convnet":
        indices = networks.convnet_group(arch)
        return lambda w, mu, log_sd: bnn.group_information(w, mu, log_sd, indices)
    layout = mlp.Layout((784, arch.width, networks.CLASSES))

    def infonce(w, mu, log_sd):
        perms = bnn.random_permutations(layout, SGM_K - 1, generator)
        indices = torch.stack(
            [
                torch.arange(arch.n_params),
                *(mlp.permutation_index(layout, bnn.group_element(perms, k)) for k in range(SGM_K - 1)),
            ]
        )
        return bnn.group_information(w, mu, log_sd, indices)

    return infonce


def symmetrised(arch: networks.Architecture, samples: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Draws of the symmetrised posterior (1/|G|) Σ_g q(g⁻¹w): each of q's draws moved by a uniformly random
    permutation symmetry (of the convnet's 32; of all h! orders of the MLP's hidden units)."""
    if arch.name == "convnet":
        group = networks.convnet_group(arch)
        chosen = torch.randint(len(group), (len(samples),), generator=generator)
        return torch.gather(samples, 1, group[chosen])
    layout = mlp.Layout((784, arch.width, networks.CLASSES))
    return torch.stack(
        [sample[mlp.permutation_index(layout, [torch.randperm(arch.width, generator=generator)])] for sample in samples]
    )


def _laplace_samples(config: MethodsConfig, data: Data, start: torch.Tensor, count: int, g) -> torch.Tensor:
    """The GGN Laplace posterior at ``start``, the prior precision n·λ of SGD's weight decay over n training images.
    The GGN is summed over the first 1000 of them and scaled by n / 1000, so that data and prior weigh as in the
    training that found ``start``. The convnet's covers every weight (the paper's full Laplace); the MLP's its last
    layer, the hidden layer fixed (as the paper did for ResNet-18), since a full one would be P² numbers."""
    arch = config.arch
    x, y = data.x[:CURVATURE_IMAGES], data.y[:CURVATURE_IMAGES]
    precision = config.train_size * WEIGHT_DECAY
    if arch.name == "convnet":
        return laplace.laplace_samples(
            arch.logits, start, x, y, count=count, generator=g, prior_precision=precision, data_size=config.train_size
        )
    last = arch.layers[-1][1]

    def last_layer_logits(w, images):
        return arch.logits(torch.cat([start[: last.start].to(w.dtype), w]), images)

    tail = laplace.laplace_samples(
        last_layer_logits,
        start[last],
        x,
        y,
        count=count,
        generator=g,
        prior_precision=precision,
        data_size=config.train_size,
    )
    return torch.cat([start[: last.start].expand(count, -1), tail], -1)


def prior_variance(config: MethodsConfig) -> float:
    """The Gaussian prior's variance that SGD's weight decay λ stands for on n images, v = 1/(nλ): the prior of the
    SGHMC chains and of the HMC reference (the Laplace fit's precision is its inverse)."""
    return 1 / (config.train_size * WEIGHT_DECAY)


def log_posterior(config: MethodsConfig, x: torch.Tensor, y: torch.Tensor):
    """log p(w | D) up to a constant, for networks ``w[C, P]`` on all of ``x``, ``y`` (full batch, in pieces of
    ``IMAGE_CHUNK`` images): Σᵢ log softmax(f(w, xᵢ))_{yᵢ} − |w|²/(2v), shape ``[C]``. The density full-batch HMC
    samples."""
    arch, variance = config.arch, prior_variance(config)

    def log_density(w: torch.Tensor) -> torch.Tensor:
        log_likelihood = torch.zeros((), dtype=w.dtype, device=w.device)
        for xc, yc in zip(x.split(IMAGE_CHUNK), y.split(IMAGE_CHUNK)):
            log_probs = torch.log_softmax(networks.batched_logits(arch, w, xc), -1)
            log_likelihood = log_likelihood + log_probs.gather(-1, yc.expand(len(w), -1)[..., None]).sum((-1, -2))
        return log_likelihood - w.square().sum(-1) / (2 * variance)

    return log_density


# ---------------------------------------------------------------------------------------------
# Scores
# ---------------------------------------------------------------------------------------------


def layer_sets(arch: networks.Architecture, flat: np.ndarray) -> list[np.ndarray]:
    return [flat[:, part] for _, part in arch.layers]


def reference_counts(total: int) -> list[int]:
    """The reference sizes each MMD is also measured against (a quarter, half and all of the checkpoints): a
    ranking that holds as the count grows is not an artefact of too few checkpoints."""
    return sorted({max(2, total // 4), max(2, total // 2), total})


def layer_mmd(config: MethodsConfig, points: np.ndarray, reference: np.ndarray) -> float:
    """:func:`symlab.lib.mmd.layerwise_mmd` between two sets of flat networks, layer by layer."""
    return mmd.layerwise_mmd(layer_sets(config.arch, points), layer_sets(config.arch, reference), seed=config.seed)


def mmd_interval(config: MethodsConfig, points: np.ndarray, reference: np.ndarray) -> list[float]:
    """The 95 % bootstrap interval of :func:`layer_mmd` (``BOOTSTRAP_REPLICATES`` resamples of both sets): its
    noise within this one pair of sets, the draws taken as independent."""
    replicates = mmd.bootstrap_layerwise_mmd(
        layer_sets(config.arch, points), layer_sets(config.arch, reference), BOOTSTRAP_REPLICATES, seed=config.seed
    )
    return list(mmd.interval(replicates))


def split_half(config: MethodsConfig, first: np.ndarray, second: np.ndarray) -> dict:
    """A reference's noise floor: the MMD² (symmetries removed, as given) between two halves of it, with its
    bootstrap interval. Two halves of one distribution score about 0; a method closer to the reference than its own
    halves are to each other cannot be told from it."""
    return {
        "split_half_mmd": layer_mmd(config, first, second),
        "split_half_mmd_interval": mmd_interval(config, first, second),
    }


def mmd_scores(
    config: MethodsConfig, samples: torch.Tensor, reference: np.ndarray, reference_canonical: np.ndarray
) -> dict:
    """Layer-wise MMD² to the reference, raw and with the symmetries removed from both sets (with its bootstrap
    interval, ``mmd_no_symmetry_interval``), and the latter against the first quarter and half of the reference
    too (``mmd_by_reference``: count → MMD²)."""
    arch, flat = config.arch, samples.double().numpy()
    canonical = networks.remove_symmetries(arch, flat, config.removal)
    against = functools.partial(layer_mmd, config)

    by_count = {
        str(count): against(canonical, reference_canonical[:count]) for count in reference_counts(len(reference))
    }
    return {
        "mmd": against(flat, reference),
        "mmd_no_symmetry": by_count[str(len(reference))],
        "mmd_no_symmetry_interval": mmd_interval(config, canonical, reference_canonical),
        "mmd_by_reference": by_count,
    }


def sample_log_probs(config: MethodsConfig, samples: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Each sample's log-probabilities ``[S, n, classes]`` on images ``x``."""
    with torch.no_grad():
        return torch.cat(
            [F.log_softmax(networks.batched_logits(config.arch, part.to(x.dtype), x), -1) for part in samples.split(25)]
        )


def prediction_scores(config: MethodsConfig, samples: torch.Tensor, data: Data) -> dict:
    """:func:`symlab.lib.uncertainty.prediction_metrics` of the samples' predictions."""
    return uncertainty.prediction_metrics(
        sample_log_probs(config, samples, data.x_test), data.y_test, sample_log_probs(config, samples, data.x_ood)
    )


@dataclass(frozen=True)
class HmcReference:
    """HMC's draws as a reference: the weights as they are and canonicalised ``[N, P]``, and the predictive on the
    test images (the mixture over the draws, log-probabilities ``[n, classes]``)."""

    raw: np.ndarray
    canonical: np.ndarray
    predictive: torch.Tensor


def hmc_reference(config: MethodsConfig, samples: torch.Tensor, data: Data) -> HmcReference:
    flat = samples.reshape(-1, samples.shape[-1])
    raw = flat.double().numpy()
    return HmcReference(
        raw, networks.remove_symmetries(config.arch, raw, config.removal), predictive_on_test(config, flat, data)
    )


def predictive_on_test(config: MethodsConfig, samples: torch.Tensor, data: Data) -> torch.Tensor:
    """The samples' predictive on the test images: the mixture's log-probabilities ``[n, classes]``."""
    return uncertainty.predictive_log_probs(sample_log_probs(config, samples, data.x_test))


def hmc_scores(config: MethodsConfig, samples: torch.Tensor, reference: HmcReference, data: Data) -> dict:
    """A sample set against HMC's draws: MMD² with and without the symmetries removed (the latter with its bootstrap
    interval), and Izmailov et al.'s
    agreement and total variation between the two predictives on the test images."""
    flat = samples.double().numpy()
    canonical = networks.remove_symmetries(config.arch, flat, config.removal)
    predictive = predictive_on_test(config, samples, data)
    return {
        "mmd_hmc": layer_mmd(config, flat, reference.raw),
        "mmd_hmc_no_symmetry": layer_mmd(config, canonical, reference.canonical),
        "mmd_hmc_no_symmetry_interval": mmd_interval(config, canonical, reference.canonical),
        "agreement_hmc": uncertainty.agreement(predictive, reference.predictive),
        "tv_hmc": uncertainty.total_variation(predictive, reference.predictive),
    }


def predictive_rhat(config: MethodsConfig, samples: torch.Tensor, data: Data) -> np.ndarray:
    """Split-R̂ of every test image's class probabilities under the draws ``samples[C, S, P]``, ``[n, classes]``:
    the chains' agreement on what the network predicts, which no symmetry changes (Izmailov et al. 2021, §4)."""
    chain_count, draw_count = samples.shape[:2]
    probabilities = sample_log_probs(config, samples.reshape(chain_count * draw_count, -1), data.x_test).exp()
    rhat = chains.rhat(probabilities.double().numpy().reshape(chain_count, draw_count, -1))
    return rhat.reshape(probabilities.shape[1:])


def hmc_noise(config: MethodsConfig, draws: hmc.Draws, data: Data) -> dict:
    """Whether the chains agree in function space and how far apart the reference's own halves sit: R̂ of the
    predictive (``rhat_predictive``: the median over test images and classes, with the largest and the share at or
    below ``RHAT_MIXED``), and :func:`split_half` between the first half of the chains' draws and the second, with
    the symmetries removed (and without: ``split_half_mmd_raw``)."""
    raw = draws.samples.double().numpy()
    canonical = networks.remove_symmetries(config.arch, raw, config.removal)
    rhat = predictive_rhat(config, draws.samples, data)
    finite = rhat[np.isfinite(rhat)]  # a probability that is the same in every draw has no R̂
    return {
        "rhat_predictive": float(np.median(finite)),
        "rhat_predictive_max": float(finite.max()),
        "rhat_predictive_share_mixed": float(np.mean(finite <= RHAT_MIXED)),
        **split_half(config, *chain_halves(canonical)),
        "split_half_mmd_raw": layer_mmd(config, *chain_halves(raw)),
    }


def chain_halves(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Draws ``[C, S, P]`` as two sets ``[N, P]``: the first half of the chains' and the second's (one chain: its
    first half of draws and its second)."""
    if draws.shape[0] == 1:
        draws = chains.split_chain(draws)
    half = draws.shape[0] // 2
    return draws[:half].reshape(-1, draws.shape[-1]), draws[half:].reshape(-1, draws.shape[-1])


def hmc_converged(run: dict, rows: list[dict]) -> bool:
    """Whether the HMC reference can rank what it is asked to: the chains agree on the predictive (median R̂ at or
    below ``RHAT_MIXED``), and its own halves sit closer (the upper end of their MMD²'s interval) than the closest
    set's lead over the next."""
    claim = closest_claim([{"rows": rows, "hmc": run}], "mmd_hmc_no_symmetry", hmc_floor)
    return run["rhat_predictive"] <= RHAT_MIXED and claim["floor"] < claim["lead"]


def hmc_diagnostics(config: MethodsConfig, state: hmc.ChainState, draws: hmc.Draws) -> dict:
    """How the chains fared, on the weights as they are (``_raw``) and canonicalised: rank-normalised split-R̂ (the
    largest over the weights, and the median), bulk ESS (the smallest, and the median), R̂ of the log density
    (which no symmetry changes), acceptance, divergences, and per chain how often it moved into another
    permuted copy (:func:`symlab.lib.networks.copy_labels`)."""
    arch, raw = config.arch, draws.samples.double().numpy()
    canonical = networks.remove_symmetries(arch, raw, config.removal)
    labels = networks.copy_labels(arch, raw, config.removal)
    codes = np.unique(labels.reshape(-1, labels.shape[-1]), axis=0, return_inverse=True)[1].reshape(labels.shape[:2])
    out: dict = {}
    for name, weights in (("raw", raw), ("canonical", canonical)):
        rhat, ess = chains.rhat(weights), chains.ess(weights)
        out |= {
            f"rhat_{name}": float(np.max(rhat)),
            f"rhat_{name}_median": float(np.median(rhat)),
            f"ess_{name}": float(np.min(ess)),
            f"ess_{name}_median": float(np.median(ess)),
        }
    settings = config.hmc_settings()
    return {
        "chains": int(raw.shape[0]),
        "draws_per_chain": int(raw.shape[1]),
        "warmup": config.sampler.hmc_warmup,
        "trajectory_length": config.sampler.hmc_trajectory,
        "target_accept": config.sampler.hmc_target_accept,
        "max_leapfrog": MAX_LEAPFROG,
        "step_size": state.step_size.tolist(),
        "leapfrog_steps": hmc.leapfrog_steps(state.step_size, settings).tolist(),
        "acceptance": float(draws.acceptance.mean()),
        "acceptance_by_chain": draws.acceptance.tolist(),
        "divergences": int(draws.divergent.sum()),
        "ess": out["ess_canonical"],
        **out,
        "rhat_log_density": float(chains.rhat(draws.log_density.double().numpy()[..., None])[0]),
        "copies_visited": int(codes.max() + 1),
        "mode_hops": chains.switches(codes).tolist(),
    }


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"a GPU ({torch.cuda.get_device_name(device)})"
    threads = torch.get_num_threads()
    return f"the CPU ({threads} thread{'s' if threads > 1 else ''})"


def _moved(record, device):
    """A :class:`~symlab.lib.hmc.ChainState` or :class:`~symlab.lib.hmc.Draws` with every tensor on ``device``."""
    return type(record)(*(tensor.to(device) for tensor in vars(record).values()))


def joined(first: hmc.Draws | None, second: hmc.Draws) -> hmc.Draws:
    """Two runs of draws of the same chains, one after the other."""
    if first is None:
        return second
    return hmc.Draws(*(torch.cat([a, b], 1) for a, b in zip(vars(first).values(), vars(second).values())))


# ---------------------------------------------------------------------------------------------
# The comparison, stage by stage
# ---------------------------------------------------------------------------------------------


def hmc_stage_count(config: MethodsConfig) -> int:
    """With an HMC reference: its warm-up, its draws ``HMC_DRAW_CHUNK`` at a time, and the scores against it."""
    return 2 + math.ceil(config.sampler.hmc_samples / HMC_DRAW_CHUNK) if config.hmc else 0


def stage_count(config: MethodsConfig) -> int:
    """The reference's chunks, the starts, one stage per method, and the HMC reference's stages."""
    return math.ceil(config.reference / CHUNK) + 1 + len(METHODS) + hmc_stage_count(config)


class Comparison:
    """A comparison's state: the reference checkpoints, the starts, each method's samples and rows, and with
    ``config.hmc`` the HMC chains. Stage k < ``reference_stages`` trains reference chunk k; the next trains the
    starts (with and without dropout); then one stage per method; then HMC's warm-up, its draws in chunks, and the
    scores against its draws. :meth:`run_stage` does the next one; :meth:`save` / :meth:`load` keep it, the chains'
    state and random stream included, so a resumed run draws what an unbroken one would."""

    def __init__(self, config: MethodsConfig, data: Data):
        self.config = config.validate()
        self.data = data
        self.reference = torch.empty(0, config.arch.n_params)
        self.starts: torch.Tensor | None = None  # the methods' starting networks, trained after the reference
        self.dropout_starts: torch.Tensor | None = None
        self.samples: dict[str, torch.Tensor] = {}
        self.rows: list[dict] = []
        self.stage = 0
        self._canonical: tuple[np.ndarray, np.ndarray] | None = None
        self._noise: dict | None = None  # the reference's split-half MMD², once every checkpoint is trained
        self.chain_state: hmc.ChainState | None = None
        self.hmc_draws: hmc.Draws | None = None
        self.hmc_generator = _generator(config, HMC_STREAM)  # on the CPU, wherever the chains run
        self.hmc_seconds = 0.0
        self.hmc_summary: dict | None = None
        self.hmc_device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

    @property
    def reference_stages(self) -> int:
        return math.ceil(self.config.reference / CHUNK)

    @property
    def method_stages_end(self) -> int:
        return self.reference_stages + 1 + len(METHODS)

    @property
    def stages(self) -> int:
        return stage_count(self.config)

    def stage_name(self, stage: int) -> str:
        if stage < self.reference_stages:
            done = min((stage + 1) * CHUNK, self.config.reference)
            return f"reference checkpoints {stage * CHUNK + 1}–{done}"
        if stage == self.reference_stages:
            return f"{self.config.modes} starts"
        if stage < self.method_stages_end:
            return LABELS[METHODS[stage - self.reference_stages - 1]]
        hmc_stage, samples = stage - self.method_stages_end, self.config.sampler.hmc_samples
        if hmc_stage == 0:
            return f"HMC warm-up ({self.config.sampler.hmc_chains} chains)"
        if stage < self.stages - 1:
            return f"HMC draws {(hmc_stage - 1) * HMC_DRAW_CHUNK + 1}–{min(hmc_stage * HMC_DRAW_CHUNK, samples)}"
        return "scores against HMC"

    def run_stage(self, check=None) -> dict:
        """Run the next stage; returns what it did (its name, seconds and any rows). ``check()``, called after
        each epoch of its training and between its sample sets, may raise to stop it."""
        began, stage = time.perf_counter(), self.stage
        config, arch, data = self.config, self.config.arch, self.data
        check = check or (lambda: None)
        rows = []
        try:
            if stage < self.reference_stages:
                indices = range(stage * CHUNK, min((stage + 1) * CHUNK, config.reference))
                chunk = ensembles.train_networks(
                    arch, data.x, data.y, config.recipe(), config.seed, indices, on_epoch=lambda *_: check()
                )
                self.reference = torch.cat([self.reference, chunk])
            elif stage == self.reference_stages:
                indices = range(config.reference, config.reference + config.modes)
                self.starts = ensembles.train_networks(
                    arch, data.x, data.y, config.recipe(), config.seed, indices, on_epoch=lambda *_: check()
                )
                self.dropout_starts = ensembles.train_networks(
                    arch, data.x, data.y, config.recipe(DROPOUT_RATE), config.seed, indices, on_epoch=lambda *_: check()
                )
            elif stage < self.method_stages_end:
                rows = self._method_rows(METHODS[stage - self.reference_stages - 1], check)
            elif stage == self.method_stages_end:
                self._hmc_warm_up(check)
            elif stage < self.stages - 1:
                self._hmc_draw(check)
            else:
                self._score_against_hmc(check)
        except FloatingPointError as error:
            raise TrainingDiverged(f"{self.stage_name(stage)}: {error}") from None
        self.rows += rows
        self.stage += 1
        return {
            "stage": self.stage,
            "name": self.stage_name(stage),
            "seconds": time.perf_counter() - began,
            "rows": rows,
        }

    def _trained_starts(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The methods' starting networks, without and with dropout (their stage comes before every method's)."""
        if self.starts is None or self.dropout_starts is None:
            raise RuntimeError("the methods' starts are trained in the stage before the methods")
        return self.starts, self.dropout_starts

    def _hmc_chains(self) -> tuple[hmc.ChainState, hmc.Draws]:
        """The chains' state and their draws (HMC's stages come before the scores against them)."""
        if self.chain_state is None or self.hmc_draws is None:
            raise RuntimeError("HMC's chains are warmed up and drawn before the scores against them")
        return self.chain_state, self.hmc_draws

    def _method_rows(self, method: str, check) -> list[dict]:
        config = self.config
        starts, dropout_starts = self._trained_starts()
        rows = []
        for modes in (1, config.modes):
            if (modes == 1 and method in MULTI_ONLY) or (modes > 1 and method in SINGLE_ONLY):
                continue
            began = time.perf_counter()
            if method == "ensemble":
                samples = starts.clone()
            else:
                each, parts = config.samples // modes, []
                for i in range(modes):
                    parts.append(method_samples(method, config, self.data, starts[i], dropout_starts[i], each, i))
                    check()
                samples = torch.cat(parts)
            samples = samples.to(torch.float32)
            if not torch.isfinite(samples).all():
                raise TrainingDiverged(f"{LABELS[method]} drew non-finite weights")
            self.samples[f"{method}/{modes}"] = samples
            row = {"method": method, "modes": modes, "samples": len(samples)}
            row.update(mmd_scores(config, samples, *self._reference_sets()))
            check()
            row.update(prediction_scores(config, samples, self.data))
            row["seconds"] = time.perf_counter() - began
            rows.append(row)
        return rows

    def _hmc_log_density(self):
        """The posterior's log density, on the device the chains run on (a GPU where there is one)."""
        return log_posterior(self.config, self.data.x.to(self.hmc_device), self.data.y.to(self.hmc_device))

    def _hmc_warm_up(self, check) -> None:
        """Chains from networks trained by the reference's recipe for ``HMC_START_EPOCHS`` (indices after the
        starts'), v first guessed as 1/(diagonal empirical Fisher + prior precision) at each start, then HMC's
        warm-up."""
        began, config, arch, data = time.perf_counter(), self.config, self.config.arch, self.data
        first = config.reference + config.modes
        starts = ensembles.train_networks(
            arch,
            data.x,
            data.y,
            replace(config, epochs=HMC_START_EPOCHS).recipe(),
            config.seed,
            range(first, first + config.sampler.hmc_chains),
            on_epoch=lambda *_: check(),
        )
        curvature = torch.stack(
            [laplace.diagonal_fisher(arch.logits, w, data.x, data.y, chunk_size=IMAGE_CHUNK) for w in starts]
        )
        inverse_mass = (1 / (curvature + 1 / prior_variance(config))).to(starts.dtype)
        check()
        state = hmc.warm_up(
            self._hmc_log_density(),
            starts.to(self.hmc_device),
            config.hmc_settings(),
            self.hmc_generator,
            progress=lambda *_: check(),
            inverse_mass=inverse_mass.to(self.hmc_device),
        )
        self.chain_state = _moved(state, "cpu")
        self.hmc_seconds += time.perf_counter() - began

    def _hmc_draw(self, check) -> None:
        began, settings = time.perf_counter(), self.config.hmc_settings()
        drawn = 0 if self.hmc_draws is None else self.hmc_draws.samples.shape[1]
        count = min(HMC_DRAW_CHUNK, settings.samples - drawn)
        state, draws = hmc.draw(
            self._hmc_log_density(),
            _moved(self.chain_state, self.hmc_device),
            count,
            settings,
            self.hmc_generator,
            lambda *_: check(),
        )
        if not torch.isfinite(draws.samples).all():
            raise FloatingPointError("HMC drew non-finite weights")
        self.chain_state, self.hmc_draws = _moved(state, "cpu"), joined(self.hmc_draws, _moved(draws, "cpu"))
        self.hmc_seconds += time.perf_counter() - began

    def _score_against_hmc(self, check) -> None:
        """Every row, and the reference checkpoints themselves, scored against HMC's draws; the chains' diagnostics."""
        config, data = self.config, self.data
        chain_state, hmc_draws = self._hmc_chains()
        reference = hmc_reference(config, hmc_draws.samples, data)
        for row in self.rows:
            row.update(hmc_scores(config, self.samples[f"{row['method']}/{row['modes']}"], reference, data))
            check()
        summary = {
            **hmc_diagnostics(config, chain_state, hmc_draws),
            **hmc_noise(config, hmc_draws, data),
            "seconds": self.hmc_seconds,
            "device": device_name(self.hmc_device),
            "checkpoints": hmc_scores(config, self.reference, reference, data),
        }
        self.hmc_summary = {**summary, "converged": hmc_converged(summary, self.rows)}

    def _reference_sets(self) -> tuple[np.ndarray, np.ndarray]:
        if self._canonical is None:
            flat = self.reference.double().numpy()
            self._canonical = (flat, networks.remove_symmetries(self.config.arch, flat, self.config.removal))
        return self._canonical

    @property
    def finished(self) -> bool:
        return self.stage >= self.stages

    def start_accuracy(self) -> list[float]:
        """Each start's test accuracy (without dropout): the networks every method's samples are drawn around."""
        if self.starts is None:
            return []
        with torch.no_grad():
            logits = networks.batched_logits(self.config.arch, self.starts, self.data.x_test)
        return (logits.argmax(-1) == self.data.y_test).double().mean(-1).tolist()

    def report(self) -> dict:
        """The JSON report: the rows, the paper's rows beside them, what was used, whether the starts learned
        (``trained``, ``trained_reason``, ``start_accuracy``), and a 2-D view."""
        accuracy = self.start_accuracy()
        return {
            "config": self.config.to_dict(),
            "architecture": self.config.arch.label,
            "parameters": self.config.arch.n_params,
            "reference_checkpoints": len(self.reference),
            "samples_per_method": self.config.samples,
            "stages_done": self.stage,
            "stages": self.stages,
            "start_accuracy": accuracy,
            **training_verdict(accuracy, f"the {self.config.modes} starts"),
            "rows": self.rows,
            **self.reference_noise(),
            "paper_rows": paper_rows(),
            "projection": self.projection(),
            **({"hmc": self.hmc_summary} if self.config.hmc else {}),
        }

    def reference_noise(self) -> dict:
        """The checkpoints' noise floor (``reference_split_half_mmd`` and its interval): :func:`split_half` between
        the first half of the reference checkpoints and the second, once all are trained."""
        if len(self.reference) < max(4, self.config.reference):
            return {}
        if self._noise is None:
            canonical = self._reference_sets()[1]
            half = len(canonical) // 2
            floor = split_half(self.config, canonical[:half], canonical[half:])
            self._noise = {f"reference_{key}": value for key, value in floor.items()}
        return self._noise

    def projection(self) -> dict:
        """Reference checkpoints and each method's samples on the reference's first two principal axes, the
        weights as they are (``raw``) and with the symmetries removed (``canonical``): per set, [x…], [y…]."""
        if len(self.reference) < 3:
            return {}
        raw, canonical = self._reference_sets()
        sets = {
            "raw": (raw, lambda flat: flat),
            "canonical": (
                canonical,
                lambda flat: networks.remove_symmetries(self.config.arch, flat, self.config.removal),
            ),
        }
        out = {}
        for view, (reference, transform) in sets.items():
            centre = reference.mean(0)
            axes = np.linalg.svd(reference - centre, full_matrices=False)[2][:2]
            points = {
                "reference": reference,
                **{key: transform(value.double().numpy()) for key, value in self.samples.items()},
            }
            if self.hmc_draws is not None:
                points["hmc"] = transform(self.hmc_draws.samples.reshape(-1, reference.shape[-1]).double().numpy())
            out[view] = {key: ((flat - centre) @ axes.T).T.round(5).tolist() for key, flat in points.items()}
        return out

    # Checkpoints: every tensor in one safetensors file, the rest in its metadata.
    def save(self, path: Path) -> None:
        tensors = {"reference": self.reference.contiguous()}
        if self.starts is not None and self.dropout_starts is not None:
            tensors.update(starts=self.starts.contiguous(), dropout_starts=self.dropout_starts.contiguous())
        tensors.update({f"samples/{key}": value.contiguous() for key, value in self.samples.items()})
        if self.chain_state is not None:
            tensors.update({f"hmc/state/{k}": v.contiguous() for k, v in vars(self.chain_state).items()})
            tensors["hmc/generator"] = self.hmc_generator.get_state()
        if self.hmc_draws is not None:
            tensors.update({f"hmc/draws/{k}": v.contiguous() for k, v in vars(self.hmc_draws).items()})
        metadata = {
            "config": json.dumps(self.config.to_dict()),
            "stage": str(self.stage),
            "rows": json.dumps(self.rows),
            "hmc_seconds": repr(self.hmc_seconds),
            "hmc_summary": json.dumps(self.hmc_summary),
        }
        write_atomically(path, save(tensors, metadata=metadata))

    def load(self, path: Path) -> None:
        with safe_open(str(path), "pt") as handle:
            metadata = handle.metadata()
        if MethodsConfig.from_dict(json.loads(metadata["config"])) != self.config:
            raise ValueError(f"{path} holds another comparison's checkpoint")
        tensors = load_file(str(path))
        self.reference = tensors["reference"]
        self.starts, self.dropout_starts = tensors.get("starts"), tensors.get("dropout_starts")
        self.samples = {key.split("/", 1)[1]: value for key, value in tensors.items() if key.startswith("samples/")}
        self.rows = json.loads(metadata["rows"])
        self.stage = int(metadata["stage"])
        self._canonical = self._noise = None
        state, draws = _prefixed(tensors, "hmc/state/"), _prefixed(tensors, "hmc/draws/")
        self.chain_state = hmc.ChainState(**state) if state else None
        self.hmc_draws = hmc.Draws(**draws) if draws else None
        if "hmc/generator" in tensors:
            self.hmc_generator.set_state(tensors["hmc/generator"])
        self.hmc_seconds = float(metadata.get("hmc_seconds", 0.0))
        self.hmc_summary = json.loads(metadata.get("hmc_summary", "null"))


def _prefixed(tensors: dict, prefix: str) -> dict:
    return {key[len(prefix) :]: value for key, value in tensors.items() if key.startswith(prefix)}


def checkpoint_problem(path: Path) -> str | None:
    """Why the checkpoint at ``path`` cannot be read, in a few words; None where it reads (its header only)."""
    try:
        with safe_open(str(path), "pt") as handle:
            metadata = handle.metadata()
        MethodsConfig.from_dict(json.loads(metadata["config"]))
        int(metadata["stage"])
    except FileNotFoundError:
        return "it has no checkpoint yet: one is written after each finished stage"
    except (OSError, KeyError, TypeError, ValueError, SafetensorError):
        return "its checkpoint is damaged or is not a comparison's"
    return None


def checkpoint_set(checkpoint: Path, run_id: int) -> bytes:
    """Run ``run_id``'s reference checkpoints as a safetensors file: each of the network's parameters stacked over
    the checkpoints (``conv1.weight`` of shape [R, 4, 1, 5, 5], …; checkpoint i loads into
    ``Architecture.module()`` by ``{name: tensor[i]}``), the settings and the input scaling as metadata."""
    if not Path(checkpoint).exists():
        raise ValueError(f"run #{run_id} has no checkpoint yet: one is written after each finished stage")
    try:
        with safe_open(str(checkpoint), "pt") as handle:
            config = MethodsConfig.from_dict(json.loads(handle.metadata()["config"]))
            reference = handle.get_tensor("reference")
    except (OSError, KeyError, ValueError, SafetensorError) as error:
        raise ValueError(f"run #{run_id}'s checkpoint cannot be read ({error})") from None
    if not len(reference):
        raise ValueError(f"run #{run_id} has trained no reference checkpoint yet")
    tensors = {name: part.contiguous() for name, part in config.arch.parameters(reference).items()}
    metadata = {
        "config": json.dumps(config.to_dict()),
        "architecture": config.arch.label,
        "run_id": str(run_id),
        "checkpoints": str(len(reference)),
        "inputs": f"pixels / 255, then (x - {PIXEL_MEAN}) / {PIXEL_STD}",
    }
    return save(tensors, metadata=metadata)


HMC_EXPORT = ("draws/samples", "draws/log_density", "draws/accepted", "state/step_size", "state/inverse_mass")


def hmc_draw_set(checkpoint: Path, run_id: int) -> bytes:
    """Run ``run_id``'s HMC draws as a safetensors file: ``samples`` [chains, draws, P] (flat parameters, which
    ``Architecture.parameters`` splits into the module's), ``log_density`` and ``accepted`` [chains, draws], each
    chain's frozen ``step_size`` and ``inverse_mass``; the settings, the input scaling and the chains' diagnostics
    (once scored) as metadata."""
    if not Path(checkpoint).exists():
        raise ValueError(f"run #{run_id} has no checkpoint yet: one is written after each finished stage")
    try:
        tensors = load_file(str(checkpoint))
        with safe_open(str(checkpoint), "pt") as handle:
            metadata = handle.metadata()
        config = MethodsConfig.from_dict(json.loads(metadata["config"]))
    except (OSError, KeyError, ValueError, SafetensorError) as error:
        raise ValueError(f"run #{run_id}'s checkpoint cannot be read ({error})") from None
    if "hmc/draws/samples" not in tensors:
        raise ValueError(f"run #{run_id} has drawn nothing by HMC yet (its settings: hmc={config.hmc})")
    out = {name.split("/")[1]: tensors[f"hmc/{name}"].contiguous() for name in HMC_EXPORT}
    return save(
        out,
        metadata={
            "config": json.dumps(config.to_dict()),
            "architecture": config.arch.label,
            "run_id": str(run_id),
            "inputs": f"pixels / 255, then (x - {PIXEL_MEAN}) / {PIXEL_STD}",
            "diagnostics": metadata.get("hmc_summary", "null"),
        },
    )


def shipped_hmc_draws(seed: int) -> tuple[hmc.ChainState, hmc.Draws] | None:
    """The shipped HMC draws of the default comparison for ``seed`` (``hmc-seed<N>.safetensors``, written by
    ``--export-hmc``), as the chains' frozen kernel and their draws: what its report's diagnostics were computed
    from. ``accept_prob`` is not kept (each draw's acceptance is); None where there is no such file."""
    path = SHIPPED_REPORTS / f"hmc-seed{seed}.safetensors"
    if not path.is_file():
        return None
    tensors = load_file(str(path))
    samples, accepted = tensors["samples"], tensors["accepted"]
    last = samples[:, -1]
    state = hmc.ChainState(
        last, tensors["log_density"][:, -1], torch.zeros_like(last), tensors["step_size"], tensors["inverse_mass"]
    )
    no = torch.zeros_like(accepted)
    return state, hmc.Draws(samples, tensors["log_density"], accepted.to(samples.dtype), accepted, no)


def shipped_reports() -> list[dict]:
    """The default comparison's reports for seeds 0, 1 and 2, shipped so that the page's default link shows results,
    and their spread over seeds, at once, with an HMC reference beside the checkpoints
    (``python -m symlab methods --hmc --seed N --json > assets/methods/seedN.json`` writes one again; its draws are
    ``hmc-seedN.safetensors``, from ``--export-hmc``). A missing or unreadable file is left out."""
    reports = []
    for path in sorted(SHIPPED_REPORTS.glob("seed*.json")):
        try:
            reports.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return reports


def same_but_seed(a: MethodsConfig, b: MethodsConfig) -> bool:
    return replace(a, seed=0) == replace(b, seed=0)


def answers(report_config: MethodsConfig, config: MethodsConfig) -> bool:
    """Whether a comparison run with ``report_config`` shows ``config``'s results: the same settings, or the same
    with an HMC reference added (its rows are the comparison's own, with HMC's columns beside them)."""
    if report_config == config:
        return True
    return report_config.hmc and not config.hmc and replace(report_config, hmc=False, sampler=config.sampler) == config


def seed_summary(reports: list[dict]) -> dict:
    """Over comparisons that differ only by their seed: the seeds whose starts did not learn, each row's mean and
    standard deviation per column, and the two paired answers, per seed: each method's several-mode MMD²
    (symmetries removed) minus its one-mode one, and SGM's minus MFVI's for every column. Where every report has an
    HMC reference, its columns too, and per seed how the two references rank the methods
    (:func:`ranking_agreement`). Lists hold one value per seed, in the reports' order."""
    by_row: dict[tuple, list[dict]] = {}
    for report in reports:
        for row in report["rows"]:
            by_row.setdefault((row["method"], row["modes"]), []).append(row)
    with_hmc = bool(reports) and all(report.get("hmc") for report in reports)
    keys = (*MMD_KEYS, *uncertainty.METRIC_KEYS, *(HMC_KEYS if with_hmc else ()))
    rows = [
        {
            "method": method,
            "modes": modes,
            "seeds": len(found),
            **{key: float(np.mean([r[key] for r in found])) for key in keys},
            **{f"{key}_sd": float(np.std([r[key] for r in found], ddof=1)) if len(found) > 1 else None for key in keys},
        }
        for (method, modes), found in by_row.items()
    ]
    multi = {
        method: [
            b["mmd_no_symmetry"] - a["mmd_no_symmetry"] for a, b in zip(by_row[(method, 1)], by_row[(method, modes)])
        ]
        for (method, modes) in by_row
        if modes > 1 and (method, 1) in by_row
    }
    sgm = {
        modes: {key: [b[key] - a[key] for a, b in zip(by_row[("mfvi", modes)], by_row[("sgm", modes)])] for key in keys}
        for (method, modes) in by_row
        if method == "sgm" and ("mfvi", modes) in by_row
    }
    untrained = [report["config"]["seed"] for report in reports if report.get("trained") is False]
    rankings = [ranking_agreement(report) for report in reports] if with_hmc else []
    return {
        "seeds": len(reports),
        "untrained_seeds": untrained,
        "rows": rows,
        "multi_minus_single": multi,
        "sgm_minus_mfvi": sgm,
        "rankings": {key: [r[key] for r in rankings] for key in rankings[0]} if rankings else {},
        "closest": closest_claim(reports, "mmd_no_symmetry", checkpoint_floor) if reports else {},
        "closest_hmc": closest_claim(reports, "mmd_hmc_no_symmetry", hmc_floor) if with_hmc else {},
    }


def checkpoint_floor(report: dict) -> list[float] | None:
    """The reference checkpoints' split-half MMD²'s interval (None in a report from before it was measured)."""
    return report.get("reference_split_half_mmd_interval")


def hmc_floor(report: dict) -> list[float] | None:
    """HMC's draws' split-half MMD²'s interval (None in a report from before it was measured)."""
    return report["hmc"].get("split_half_mmd_interval")


def closest_claim(reports: list[dict], key: str, floor_of) -> dict:
    """Whether "the closest sample set to the reference" can be said over ``reports`` (comparisons differing by
    their seed), by MMD² ``key``: the set with the lowest mean and the next, the next's lead (mean over seeds, and its
    standard error where there are several), the noise floor (the largest upper end over seeds of the reference's
    split-half MMD²'s 95 % interval: what the reference's own halves can score), and ``distinguishable``: the lead
    exceeds the floor and twice its standard error, and on every seed the two sets' bootstrap intervals are apart.
    ``floor`` is None where a report does not measure it, and then nothing is distinguishable."""
    names = [[_set_name(row) for row in report["rows"]] for report in reports]
    common = [name for name in names[0] if all(name in found for found in names)]
    values = {name: [_row(report, name)[key] for report in reports] for name in common}
    first, second = sorted(common, key=lambda name: np.mean(values[name]))[:2]
    leads = np.subtract(values[second], values[first])
    floors = [floor_of(report) for report in reports]
    floor = None if any(f is None for f in floors) else float(max(high for _, high in floors))
    apart = all(
        _row(report, first)[f"{key}_interval"][1] < _row(report, second)[f"{key}_interval"][0]
        for report in reports
        if f"{key}_interval" in _row(report, first)
    )
    lead_se = float(np.std(leads, ddof=1) / np.sqrt(len(leads))) if len(leads) > 1 else None
    lead = float(np.mean(leads))
    return {
        "closest": first,
        "runner_up": second,
        "lead": lead,
        "lead_se": lead_se,
        "floor": floor,
        "intervals_apart": apart,
        "closest_on_seeds": sum(
            min(common, key=lambda name: values[name][seed]) == first for seed in range(len(reports))
        ),
        "distinguishable": floor is not None and lead > floor and apart and (lead_se is None or lead > 2 * lead_se),
    }


def _row(report: dict, name: str) -> dict:
    return next(row for row in report["rows"] if _set_name(row) == name)


def ranking_agreement(report: dict) -> dict:
    """How a comparison's two references rank its sample sets: Kendall's τ between the MMD² to the checkpoints and
    to HMC's draws, with the symmetries removed (``kendall_tau``) and as they are (``kendall_tau_raw``); and the
    sample set closest to HMC by MMD² without symmetries, and by the predictives' total variation."""
    rows = report["rows"]
    return {
        "kendall_tau": float(
            stats.kendalltau([r["mmd_no_symmetry"] for r in rows], [r["mmd_hmc_no_symmetry"] for r in rows])[0]
        ),
        "kendall_tau_raw": float(stats.kendalltau([r["mmd"] for r in rows], [r["mmd_hmc"] for r in rows])[0]),
        "closest_to_hmc": _set_name(min(rows, key=lambda r: r["mmd_hmc_no_symmetry"])),
        "closest_to_hmc_predictive": _set_name(min(rows, key=lambda r: r["tv_hmc"])),
    }


def _set_name(row: dict) -> str:
    return f"{row['method']}/{row['modes']}"


def paper_rows() -> list[dict]:
    """Table 1's MNIST rows, each column × 100 as printed."""
    return [
        {"method": method, "modes": modes, **dict(zip(PAPER_COLUMNS, values))}
        for (method, modes), values in PAPER_ROWS.items()
    ]
