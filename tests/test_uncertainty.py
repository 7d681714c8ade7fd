"""Prediction metrics of sampled predictions (symlab.lib.uncertainty): hand-computed cases, and
torch-uncertainty (the paper authors' library) and scikit-learn as independent implementations."""

import math

import pytest
import torch
from sklearn.metrics import average_precision_score, roc_curve
from tiny_networks import mlp_logits
from torch_uncertainty_parts import torch_uncertainty_part

from symlab.lib import uncertainty as unc


def log(probs):
    return torch.tensor(probs, dtype=torch.float64).log()


def entropy(*probs):
    return -sum(p * math.log(p) for p in probs if p > 0)


# Two weight samples, three inputs, two classes; their mean is [[.8, .2], [.3, .7], [.2, .8]].
SAMPLES = log([[[0.9, 0.1], [0.5, 0.5], [0.1, 0.9]], [[0.7, 0.3], [0.1, 0.9], [0.3, 0.7]]])
LABELS = torch.tensor([0, 0, 1])  # predicted 0, 1, 1: the second is wrong
OOD_SAMPLES = log([[[0.5, 0.5], [0.6, 0.4]], [[0.5, 0.5], [0.4, 0.6]]])  # mean [.5, .5] for both


@pytest.fixture(scope="module")
def tu():
    """torch-uncertainty's metric classes (tests/torch_uncertainty_parts.py)."""
    return torch_uncertainty_part("metrics.classification")


def test_the_three_input_case_by_hand():
    metrics = unc.prediction_metrics(SAMPLES, LABELS, OOD_SAMPLES)
    assert list(metrics) == list(unc.METRIC_KEYS)
    assert metrics["accuracy"] == pytest.approx(2 / 3)
    assert metrics["nll"] == pytest.approx(-(math.log(0.8) + math.log(0.3) + math.log(0.8)) / 3)
    # Squared distance to the one-hot label, summed over both classes.
    assert metrics["brier"] == pytest.approx((2 * 0.2**2 + 2 * 0.7**2 + 2 * 0.2**2) / 3)
    # Every OOD input (score 1 − .5) ranks above every test input (.2, .7 → .3, .2): perfect detection.
    assert metrics["aupr"] == 1.0 and metrics["fpr95"] == 0.0
    id_mi = [
        entropy(0.8, 0.2) - (entropy(0.9, 0.1) + entropy(0.7, 0.3)) / 2,
        entropy(0.3, 0.7) - (entropy(0.5, 0.5) + entropy(0.1, 0.9)) / 2,
        entropy(0.2, 0.8) - (entropy(0.1, 0.9) + entropy(0.3, 0.7)) / 2,
    ]
    assert metrics["id_mi"] == pytest.approx(sum(id_mi) / 3)
    assert metrics["ood_mi"] == pytest.approx((0.0 + entropy(0.5, 0.5) - entropy(0.6, 0.4)) / 2)
    assert unc.paper_scale(metrics) == pytest.approx(
        {**{k: 100 * v for k, v in metrics.items()}, "nll": metrics["nll"]}
    )


def test_calibration_error_by_hand():
    mean = unc.predictive_log_probs(SAMPLES)
    # Four bins: confidences .8 and .8 (both right) in [.75, 1], .7 (wrong) in [.5, .75).
    assert unc.expected_calibration_error(mean, LABELS, bins=4) == pytest.approx(2 / 3 * 0.2 + 1 / 3 * 0.7)
    # One bin: |accuracy − mean confidence|.
    assert unc.expected_calibration_error(mean, LABELS, bins=1) == pytest.approx(abs(2 / 3 - 2.3 / 3))


def test_mutual_information_of_certain_samples():
    disagree = log([[[1.0, 0.0]], [[0.0, 1.0]]])  # log 0 = −inf: 0 · log 0 counts as 0
    assert unc.mutual_information(disagree).item() == pytest.approx(math.log(2))
    agree = SAMPLES[:1].expand(4, -1, -1)
    assert torch.equal(unc.mutual_information(agree), torch.zeros(3, dtype=torch.float64))


def test_detection_scores_by_hand_with_ties():
    # Ranked .9 (OOD), .8 (test), .7 (OOD), .6 (test): precision 1 at recall ½, ⅔ at recall 1.
    scores, positive = torch.tensor([0.9, 0.8, 0.7, 0.6]), torch.tensor([True, False, True, False])
    assert unc.average_precision(scores, positive) == pytest.approx(0.5 + 0.5 * 2 / 3)
    assert unc.false_positive_rate_at_recall(scores, positive) == 0.5
    # A tie is never split: reaching the second OOD input takes the test input tied with it.
    scores, positive = torch.tensor([0.9, 0.5, 0.5]), torch.tensor([True, True, False])
    assert unc.average_precision(scores, positive) == pytest.approx(0.5 + 0.5 * 2 / 3)
    assert unc.false_positive_rate_at_recall(scores, positive) == 1.0
    assert unc.false_positive_rate_at_recall(scores, positive, recall=0.5) == 0.0


def random_samples(generator, samples, inputs, shared, classes=10):
    """Each sample's log-probabilities: logits of scale 2 of its own plus ``shared`` × logits common to all."""
    logits = 2 * torch.randn(samples, inputs, classes, generator=generator, dtype=torch.float64)
    logits += shared * torch.randn(1, inputs, classes, generator=generator, dtype=torch.float64)
    return torch.log_softmax(logits, dim=-1)


@pytest.mark.filterwarnings("ignore:Metric `FPR95` will save")
def test_against_torch_uncertainty_and_scikit_learn(tu):
    generator = torch.Generator().manual_seed(0)
    samples, ood_samples = random_samples(generator, 5, 400, shared=3), random_samples(generator, 5, 300, shared=1)
    mean, ood_mean = unc.predictive_log_probs(samples).exp(), unc.predictive_log_probs(ood_samples).exp()
    guess = torch.randint(0, 10, (400,), generator=generator)
    labels = torch.where(torch.rand(400, generator=generator) < 0.6, mean.argmax(1), guess)  # right ~64 %
    metrics = unc.prediction_metrics(samples, labels, ood_samples)

    def tu_metric(metric, *inputs):
        metric.update(*inputs)
        return metric.compute().item()

    assert 0.3 < metrics["accuracy"] < 0.9 and 0.05 < metrics["ece"]  # the case is not degenerate
    assert metrics["accuracy"] == pytest.approx((mean.argmax(1) == labels).double().mean().item())
    assert metrics["nll"] == pytest.approx(tu_metric(tu.CategoricalNLL(), mean, labels))
    assert metrics["brier"] == pytest.approx(tu_metric(tu.BrierScore(num_classes=10), mean, labels))
    # torchmetrics' calibration error runs in float32.
    calibration = tu.CalibrationError(task="multiclass", num_bins=15, num_classes=10)
    assert metrics["ece"] == pytest.approx(tu_metric(calibration, mean, labels), abs=1e-6)
    # MutualInformation takes [inputs, estimators, classes].
    assert metrics["id_mi"] == pytest.approx(tu_metric(tu.MutualInformation(), samples.exp().transpose(0, 1)))
    assert metrics["ood_mi"] == pytest.approx(tu_metric(tu.MutualInformation(), ood_samples.exp().transpose(0, 1)))
    # The routine's OOD criterion "msp" scores −max p̄; OOD is label 1.
    msp = -torch.cat([mean, ood_mean]).max(dim=1).values
    is_ood = torch.cat([torch.zeros(400), torch.ones(300)]).long()
    assert metrics["fpr95"] == pytest.approx(tu_metric(tu.FPR95(pos_label=1), msp, is_ood))
    assert metrics["aupr"] == pytest.approx(average_precision_score(is_ood.numpy(), msp.numpy()))
    false_pos, true_pos, _ = roc_curve(is_ood.numpy(), msp.numpy(), drop_intermediate=False)
    assert metrics["fpr95"] == pytest.approx(false_pos[(true_pos >= 0.95).argmax()])
    assert 0.1 < metrics["fpr95"] < 0.9 and 0.5 < metrics["aupr"] < 1.0


@pytest.mark.parametrize("seed", range(5))
def test_detection_with_many_ties_against_scikit_learn(seed):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 6, (60,), generator=generator).double() / 5
    positive = torch.rand(60, generator=generator) < scores * 0.6 + 0.2
    expected_ap = average_precision_score(positive.numpy(), scores.numpy())
    assert unc.average_precision(scores, positive) == pytest.approx(expected_ap)
    false_pos, true_pos, _ = roc_curve(positive.numpy(), scores.numpy())
    for recall in (0.5, 0.8, 0.95, 1.0):
        expected = false_pos[(true_pos >= recall).argmax()]
        assert unc.false_positive_rate_at_recall(scores, positive, recall) == pytest.approx(expected)


def test_metrics_of_weight_samples_through_a_network():
    generator = torch.Generator().manual_seed(1)
    weights = torch.randn(8, 27, generator=generator)
    x, ood_x = torch.randn(50, 4, generator=generator), 4 * torch.randn(30, 4, generator=generator)
    labels = torch.randint(0, 3, (50,), generator=generator)
    log_probs = torch.vmap(lambda flat: torch.log_softmax(mlp_logits(flat, x), -1))(weights)
    ood_log_probs = torch.vmap(lambda flat: torch.log_softmax(mlp_logits(flat, ood_x), -1))(weights)
    metrics = unc.prediction_metrics(log_probs, labels, ood_log_probs)
    assert all(math.isfinite(value) for value in metrics.values())
    # One sample repeated: its own predictions, no disagreement.
    single = unc.prediction_metrics(log_probs[:1].expand(3, -1, -1), labels, ood_log_probs[:1].expand(3, -1, -1))
    assert single["id_mi"] == pytest.approx(0.0, abs=1e-12) and single["ood_mi"] == pytest.approx(0.0, abs=1e-12)
    assert single["accuracy"] == unc.accuracy(log_probs[0], labels)


@pytest.mark.parametrize(
    "case, message",
    [
        (lambda: unc.prediction_metrics(torch.randn(2, 3, 2), LABELS, OOD_SAMPLES), "not normalised"),
        (lambda: unc.prediction_metrics(SAMPLES[0], LABELS, OOD_SAMPLES), r"\[samples, inputs, classes\]"),
        (lambda: unc.prediction_metrics(SAMPLES, LABELS, OOD_SAMPLES[:1]), "samples and classes"),
        (
            lambda: unc.prediction_metrics(
                SAMPLES.clone().index_fill_(2, torch.tensor([0]), math.nan), LABELS, OOD_SAMPLES
            ),
            "NaN",
        ),
        (lambda: unc.prediction_metrics(SAMPLES, torch.tensor([0, 2, 1]), OOD_SAMPLES), "class indices"),
        (lambda: unc.prediction_metrics(SAMPLES, torch.tensor([0.0, 1.0, 1.0]), OOD_SAMPLES), "integers"),
        (lambda: unc.prediction_metrics(SAMPLES, LABELS, OOD_SAMPLES, bins=0), "bins"),
        (lambda: unc.average_precision(torch.rand(3), torch.ones(3, dtype=torch.bool)), "both classes"),
        (lambda: unc.false_positive_rate_at_recall(torch.rand(2), torch.tensor([True, False]), 0.0), "recall"),
    ],
)
def test_invalid_inputs_are_refused(case, message):
    with pytest.raises(ValueError, match=message):
        case()


def test_agreement_and_total_variation_by_hand():
    """Izmailov's two comparisons of predictives, on inputs small enough to work out: p̄ = [[.8, .2], [.3, .7],
    [.2, .8]] against q̄ = [[.6, .4], [.6, .4], [.2, .8]] agree on inputs 1 and 3; ½Σ|p − q| is .2, .3 and 0."""
    p = unc.predictive_log_probs(SAMPLES)
    q = log([[0.6, 0.4], [0.6, 0.4], [0.2, 0.8]])
    assert unc.agreement(p, q) == pytest.approx(2 / 3)
    assert unc.total_variation(p, q) == pytest.approx((0.2 + 0.3 + 0.0) / 3)
    assert unc.agreement(p, p) == 1.0 and unc.total_variation(p, p) == pytest.approx(0.0, abs=1e-15)


def test_total_variation_is_half_the_l1_distance_for_random_predictives():
    g = torch.Generator().manual_seed(0)
    p = torch.log_softmax(torch.randn(50, 10, generator=g, dtype=torch.float64), -1)
    q = torch.log_softmax(torch.randn(50, 10, generator=g, dtype=torch.float64), -1)
    by_loops = sum(0.5 * sum(abs(math.exp(a) - math.exp(b)) for a, b in zip(p[i], q[i])) for i in range(50)) / 50
    assert unc.total_variation(p, q) == pytest.approx(float(by_loops), rel=1e-12)
    assert 0.0 <= unc.total_variation(p, q) <= 1.0


def test_predictives_of_other_shapes_are_refused():
    with pytest.raises(ValueError, match="one shape"):
        unc.agreement(log([[0.5, 0.5]]), log([[0.5, 0.5], [0.5, 0.5]]))
