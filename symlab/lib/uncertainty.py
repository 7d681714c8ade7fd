"""What sampled predictions are worth: accuracy, NLL, calibration, Brier, OOD detection, mutual information.

Laurent et al. (ICLR 2024) §4 and Table 1 (docs/science.md, § Prediction metrics) score each approximate
posterior by the predictions of its weight samples ω_1..ω_S. Everything here takes LOG-probabilities,
``log p_s(c | x)`` (``log_softmax`` of each sample's logits, shape ``[S, n, C]``), so that averaging the
samples, ``log p̄ = logsumexp_s(log p_s) − log S``, never underflows. The metrics follow
torch-uncertainty (the authors' library; its ``ClassificationRoutine``) and are returned as FRACTIONS, the
mutual information in nats; :func:`paper_scale` gives Table 1's numbers (× 100).

- accuracy: mean of ``[argmax_c p̄(c | x_i) = y_i]``;
- NLL: ``−(1/n) Σ_i log p̄(y_i | x_i)`` (nats);
- ECE: top-label, ``B`` equal-width confidence bins on [0, 1] (15 by default, as torch-uncertainty's
  routine): ``Σ_b (n_b / n) |acc_b − conf_b|`` with confidence ``max_c p̄(c | x)``;
- Brier: ``(1/n) Σ_i Σ_c (p̄_ic − [c = y_i])²``, summed over classes (range [0, 2]);
- OOD detection, the OOD inputs the positive class, scored by ``1 − max_c p̄(c | x)`` (the maximum
  softmax probability, torch-uncertainty's default criterion ``msp``, which ranks by ``−max p̄``: the
  same order): AUPR is the average precision, FPR95 the false positive rate at the first threshold
  whose recall of OOD inputs reaches 95 %, thresholds taken only between distinct scores;
- mutual information: per input ``I = H[p̄] − (1/S) Σ_s H[p_s]`` (nats; ≥ 0 by Jensen), averaged over
  the inputs, in distribution (IDMI) and out of it (OODMI).

Two predictives ``p̄`` and ``q̄`` compared, as Izmailov et al. (2021, §3) compare an approximation with HMC's:
- agreement: ``(1/n) Σ_i [argmax_c p̄(c | x_i) = argmax_c q̄(c | x_i)]``;
- total variation: ``(1/n) Σ_i ½ Σ_c |p̄_ic − q̄_ic|`` (range [0, 1]).
"""

from __future__ import annotations

import math

import torch

ECE_BINS = 15
RECALL_LEVEL = 0.95
METRIC_KEYS = ("accuracy", "nll", "ece", "brier", "aupr", "fpr95", "id_mi", "ood_mi")
NORMALISED_TOLERANCE = 1e-4  # |logsumexp_c log p(c)|: float32 log_softmax is within 1e-6
# Table 1 prints every column × 100 (Acc, ECE, Brier, AUPR, FPR95 as percentages; MI in centinats);
# it reports no NLL, which stays in nats.
PAPER_FACTORS = {
    "accuracy": 100.0,
    "nll": 1.0,
    "ece": 100.0,
    "brier": 100.0,
    "aupr": 100.0,
    "fpr95": 100.0,
    "id_mi": 100.0,
    "ood_mi": 100.0,
}


def prediction_metrics(
    sample_log_probs: torch.Tensor, labels: torch.Tensor, ood_sample_log_probs: torch.Tensor, bins: int = ECE_BINS
) -> dict[str, float]:
    """Table 1's prediction columns for S weight samples: ``sample_log_probs[S, n, C]`` on the test inputs
    with ``labels[n]``, ``ood_sample_log_probs[S, m, C]`` on OOD inputs. Fractions and nats (module doc)."""
    _check_samples(sample_log_probs, "sample_log_probs")
    _check_samples(ood_sample_log_probs, "ood_sample_log_probs")
    if (
        ood_sample_log_probs.shape[0] != sample_log_probs.shape[0]
        or ood_sample_log_probs.shape[2] != sample_log_probs.shape[2]
    ):
        raise ValueError(
            f"ood_sample_log_probs {tuple(ood_sample_log_probs.shape)} must have the samples and classes "
            f"of sample_log_probs {tuple(sample_log_probs.shape)}"
        )
    log_probs, ood_log_probs = _predictive(sample_log_probs), _predictive(ood_sample_log_probs)
    scores = torch.cat([max_probability_score(log_probs), max_probability_score(ood_log_probs)])
    is_ood = torch.cat(
        [torch.zeros(len(log_probs), dtype=torch.bool), torch.ones(len(ood_log_probs), dtype=torch.bool)]
    )
    return {
        "accuracy": accuracy(log_probs, labels),
        "nll": negative_log_likelihood(log_probs, labels),
        "ece": expected_calibration_error(log_probs, labels, bins),
        "brier": brier_score(log_probs, labels),
        "aupr": average_precision(scores, is_ood),
        "fpr95": false_positive_rate_at_recall(scores, is_ood, RECALL_LEVEL),
        "id_mi": _mutual_information(sample_log_probs, log_probs).mean().item(),
        "ood_mi": _mutual_information(ood_sample_log_probs, ood_log_probs).mean().item(),
    }


def paper_scale(metrics: dict[str, float]) -> dict[str, float]:
    """``metrics`` (from :func:`prediction_metrics`) on Table 1's scale: every column × 100, NLL unchanged."""
    return {key: value * PAPER_FACTORS[key] for key, value in metrics.items()}


def predictive_log_probs(sample_log_probs: torch.Tensor) -> torch.Tensor:
    """``log p̄(c | x) = logsumexp_s log p_s(c | x) − log S``, float64, shape ``[n, C]``."""
    _check_samples(sample_log_probs, "sample_log_probs")
    return _predictive(sample_log_probs)


def accuracy(log_probs: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of inputs whose most probable class is the label (``log_probs[n, C]``)."""
    labels = _check_predictive(log_probs, labels)
    _, predicted = _top_label(log_probs)
    return (predicted == labels).double().mean().item()


def negative_log_likelihood(log_probs: torch.Tensor, labels: torch.Tensor) -> float:
    """``−(1/n) Σ_i log p(y_i | x_i)`` in nats."""
    labels = _check_predictive(log_probs, labels)
    return -log_probs.double().gather(1, labels[:, None]).mean().item()


def expected_calibration_error(log_probs: torch.Tensor, labels: torch.Tensor, bins: int = ECE_BINS) -> float:
    """Top-label ECE with ``bins`` equal-width bins ``[b/B, (b+1)/B)`` (the last one closed):
    ``Σ_b (n_b/n) |acc_b − conf_b| = (1/n) Σ_b |Σ_{i ∈ b} ([ŷ_i = y_i] − conf_i)|``."""
    labels = _check_predictive(log_probs, labels)
    if not isinstance(bins, int) or bins < 1:
        raise ValueError(f"bins must be a positive integer, got {bins!r}")
    confidence, predicted = _top_label(log_probs)
    correct = (predicted == labels).double()
    bin_index = torch.clamp((confidence * bins).long(), max=bins - 1)
    gap = torch.bincount(bin_index, weights=correct - confidence, minlength=bins).abs()
    return (gap.sum() / len(labels)).item()


def brier_score(log_probs: torch.Tensor, labels: torch.Tensor) -> float:
    """``(1/n) Σ_i Σ_c (p_ic − [c = y_i])²``: summed over the classes, as torch-uncertainty's BrierScore."""
    labels = _check_predictive(log_probs, labels)
    probs = log_probs.double().exp()
    one_hot = torch.nn.functional.one_hot(labels, probs.shape[1]).double()
    return (probs - one_hot).square().sum(dim=1).mean().item()


def max_probability_score(log_probs: torch.Tensor) -> torch.Tensor:
    """OOD score ``1 − max_c p(c | x)`` per input (higher: more likely out of distribution)."""
    return 1.0 - log_probs.double().max(dim=1).values.exp()


def mutual_information(sample_log_probs: torch.Tensor) -> torch.Tensor:
    """Per input ``H[p̄] − (1/S) Σ_s H[p_s]`` in nats, shape ``[n]``, float64; rounding below 0 is
    clamped to 0 (as torch-uncertainty's MutualInformation)."""
    _check_samples(sample_log_probs, "sample_log_probs")
    return _mutual_information(sample_log_probs, _predictive(sample_log_probs))


def average_precision(scores: torch.Tensor, positive: torch.Tensor) -> float:
    """``Σ_k (R_k − R_{k−1}) P_k`` over the distinct score thresholds, highest first (the step-wise area
    under the precision-recall curve, as scikit-learn's average_precision_score)."""
    true_pos, false_pos, n_pos, _ = _ranked_counts(scores, positive)
    precision = true_pos / (true_pos + false_pos)
    recall_step = torch.diff(true_pos, prepend=true_pos.new_zeros(1)) / n_pos
    return (recall_step * precision).sum().item()


def false_positive_rate_at_recall(scores: torch.Tensor, positive: torch.Tensor, recall: float = RECALL_LEVEL) -> float:
    """False positive rate at the highest threshold whose recall of the positives is at least
    ``recall`` (thresholds only between distinct scores: a tie is never split)."""
    if not 0.0 < recall <= 1.0:
        raise ValueError(f"recall must be in (0, 1], got {recall!r}")
    true_pos, false_pos, n_pos, n_neg = _ranked_counts(scores, positive)
    first = torch.nonzero(true_pos / n_pos >= recall)[0, 0]
    return (false_pos[first] / n_neg).item()


def _ranked_counts(scores: torch.Tensor, positive: torch.Tensor):
    """True and false positives above each distinct threshold, highest first; the counts of each class."""
    if scores.ndim != 1 or positive.shape != scores.shape or positive.dtype != torch.bool:
        raise ValueError(
            f"scores and positive must be 1-D of one length, positive boolean; got "
            f"{tuple(scores.shape)} and {tuple(positive.shape)} {positive.dtype}"
        )
    if not torch.isfinite(scores).all():
        raise ValueError("scores must be finite")
    n_pos = int(positive.sum())
    n_neg = len(positive) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError(f"need both classes: {n_pos} positive and {n_neg} negative scores")
    order = torch.argsort(scores.double(), descending=True, stable=True)
    ranked = scores.double()[order]
    # The last index of each run of tied scores: a threshold takes a whole tie or none of it.
    ends = torch.cat([torch.nonzero(ranked[1:] != ranked[:-1]).flatten(), torch.tensor([len(ranked) - 1])])
    true_pos = positive[order].double().cumsum(0)[ends]
    false_pos = (ends + 1).double() - true_pos
    return true_pos, false_pos, n_pos, n_neg


def _predictive(sample_log_probs: torch.Tensor) -> torch.Tensor:
    return torch.logsumexp(sample_log_probs.double(), dim=0) - math.log(sample_log_probs.shape[0])


def _mutual_information(sample_log_probs: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
    """``H[p̄] − mean_s H[p_s]`` per input, given the samples' ``log p_s`` and the predictive ``log p̄``."""
    return (_entropy(log_probs) - _entropy(sample_log_probs.double()).mean(dim=0)).clamp_min(0.0)


def agreement(log_probs: torch.Tensor, other: torch.Tensor) -> float:
    """Fraction of inputs on which two predictives (``[n, C]`` log-probabilities) pick the same class."""
    _check_pair(log_probs, other)
    return (_top_label(log_probs)[1] == _top_label(other)[1]).double().mean().item()


def total_variation(log_probs: torch.Tensor, other: torch.Tensor) -> float:
    """Mean over inputs of ½ Σ_c |p(c | x) − q(c | x)| between two predictives (``[n, C]`` log-probabilities)."""
    _check_pair(log_probs, other)
    return (0.5 * (log_probs.double().exp() - other.double().exp()).abs().sum(1)).mean().item()


def _check_pair(log_probs: torch.Tensor, other: torch.Tensor) -> None:
    if log_probs.ndim != 2 or len(log_probs) == 0 or other.shape != log_probs.shape:
        raise ValueError(
            f"two predictives must be non-empty [inputs, classes] tensors of one shape, got "
            f"{tuple(log_probs.shape)} and {tuple(other.shape)}"
        )
    _check_log_probs(log_probs, "log_probs")
    _check_log_probs(other, "other")


def _top_label(log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The confidence ``max_c p(c | x)`` and the predicted class, per input."""
    return log_probs.double().exp().max(dim=1)


def _entropy(log_probs: torch.Tensor) -> torch.Tensor:
    """``−Σ_c p_c log p_c`` over the last axis, with 0 · log 0 = 0."""
    probs = log_probs.exp()
    return -torch.where(probs > 0, probs * log_probs, 0.0).sum(dim=-1)


def _check_samples(sample_log_probs: torch.Tensor, name: str) -> None:
    if not isinstance(sample_log_probs, torch.Tensor) or sample_log_probs.ndim != 3 or 0 in sample_log_probs.shape:
        shape = tuple(sample_log_probs.shape) if isinstance(sample_log_probs, torch.Tensor) else type(sample_log_probs)
        raise ValueError(f"{name} must be a non-empty [samples, inputs, classes] tensor, got {shape}")
    _check_log_probs(sample_log_probs, name)


def _check_predictive(log_probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Validate; the labels as int64 (what gather and one_hot index with)."""
    if log_probs.ndim != 2 or len(log_probs) == 0:
        raise ValueError(f"log_probs must be a non-empty [inputs, classes] tensor, got {tuple(log_probs.shape)}")
    if (
        labels.shape != (len(log_probs),)
        or labels.is_floating_point()
        or labels.is_complex()
        or labels.dtype == torch.bool
    ):
        raise ValueError(
            f"labels must be integers of shape ({len(log_probs)},), got {tuple(labels.shape)} {labels.dtype}"
        )
    if labels.min() < 0 or labels.max() >= log_probs.shape[1]:
        raise ValueError(f"labels must be class indices in [0, {log_probs.shape[1]})")
    _check_log_probs(log_probs, "log_probs")
    return labels.long()


def _check_log_probs(log_probs: torch.Tensor, name: str) -> None:
    if torch.isnan(log_probs).any() or (log_probs == math.inf).any():
        raise ValueError(f"{name} holds NaN or +inf: the network's outputs are not finite")
    off = torch.logsumexp(log_probs.double(), dim=-1).abs().max().item()
    if off > NORMALISED_TOLERANCE:
        raise ValueError(
            f"{name} are not normalised log-probabilities (logsumexp over classes is off 0 by "
            f"{off:.3g}): pass log_softmax of the logits"
        )
