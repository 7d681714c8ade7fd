"""MNIST data (checksums, user directories, downloads) and the trainer (learning, pairing,
checkpoints, divergence, metrics)."""

import functools
import gzip
import http.server
import math
import shutil
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from symlab.cli import mnist as mnist_cli
from symlab.labs.mnist import experiment as mnist
from symlab.labs.mnist import table as mnist_table
from symlab.labs.mnist.experiment import MnistConfig, MnistTrainer
from symlab.lib import bnn, mnist_data
from symlab.specs.results import TrainingDiverged

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data():
    return mnist_data.load_mnist()


def test_shipped_copy_loads_and_is_verified(data):
    assert data.train_images.shape == (60000, 784) and data.test_images.shape == (10000, 784)
    assert set(np.unique(data.train_labels)) == set(range(10))
    assert data.train_images.dtype == np.uint8 and data.train_images.max() == 255
    assert mnist_data.check_mnist() == []


def test_user_directory_missing_and_damaged_files_say_how_to_fix(tmp_path):
    for spec in mnist_data.FILES.values():
        shutil.copy(mnist_data.SHIPPED_DIR / spec.name, tmp_path / spec.name)
    assert mnist_data.load_mnist(tmp_path).test_labels.shape == (10000,)

    labels = tmp_path / mnist_data.FILES["test_labels"].name
    content = bytearray(gzip.decompress(labels.read_bytes()))
    content[100] ^= 1
    labels.write_bytes(gzip.compress(bytes(content)))
    with pytest.raises(mnist_data.MnistDataError, match="wrong content.*--download"):
        mnist_data.load_mnist(tmp_path)
    labels.write_bytes(b"not gzip at all")
    with pytest.raises(mnist_data.MnistDataError, match="not a readable gzip"):
        mnist_data.load_mnist(tmp_path)
    labels.unlink()
    problems = mnist_data.check_mnist(tmp_path)
    assert len(problems) == 1 and "missing" in problems[0]
    assert mnist_data.check_mnist_once(tmp_path) == problems
    shutil.copy(mnist_data.SHIPPED_DIR / labels.name, labels)
    assert mnist_data.check_mnist_once(tmp_path) == []  # a file that changed is read again
    content[100] ^= 1  # back to the right content, then damaged again in place
    content[200] ^= 1
    labels.write_bytes(gzip.compress(bytes(content)))
    assert "wrong content" in mnist_data.check_mnist_once(tmp_path)[0]
    with pytest.raises(mnist_data.MnistDataError, match="does not exist"):
        mnist_data.load_mnist(tmp_path / "nowhere")


@pytest.fixture
def mirror(tmp_path):
    """A local HTTP mirror serving a copy of the files; yields (url, its directory)."""
    served = tmp_path / "mirror"
    served.mkdir()
    for spec in mnist_data.FILES.values():
        shutil.copy(mnist_data.SHIPPED_DIR / spec.name, served / spec.name)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    handler.log_message = lambda *args: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", served
    server.shutdown()


def test_download_into_an_empty_directory_verifies_checksums(tmp_path, mirror):
    url, served = mirror
    target = tmp_path / "data"
    unreachable = "http://127.0.0.1:9/"  # the first mirror fails, the next one is used
    fetched = mnist_data.download_mnist(target, mirrors=(unreachable, url), timeout=5)
    assert sorted(fetched) == sorted(spec.name for spec in mnist_data.FILES.values())
    assert mnist_data.check_mnist(target) == []
    assert mnist_data.download_mnist(target, mirrors=(url,)) == []  # nothing left to fetch

    (served / mnist_data.FILES["train_labels"].name).write_bytes(gzip.compress(b"\0" * 60008))
    (target / mnist_data.FILES["train_labels"].name).unlink()
    with pytest.raises(mnist_data.MnistDataError, match="checksum mismatch"):
        mnist_data.download_mnist(target, mirrors=(url,))
    assert not list(target.glob("*.part"))  # no half-written file left behind


def small_config(**changes):
    values = dict(hidden=32, epochs=2, train_subset=3000, samples=4, seed=0, device="cpu")
    values.update(changes)
    return MnistConfig(**values).validate()


def trainer_for(config, data):
    device = torch.device("cpu")
    return MnistTrainer(config, mnist.prepare_tensors(data, config, device), device)


@pytest.mark.parametrize("estimator", bnn.ESTIMATORS)
def test_a_short_run_learns(data, estimator):
    trainer = trainer_for(small_config(hidden=64, train_subset=5000, estimator=estimator), data)
    for _ in range(2):
        metrics = trainer.train_epoch()
    # Chance is 0.1 (NLL 2.3). Seeds 0–5 give 0.73–0.77 (reparam) to 0.78–0.82 (local): σ reaches its wide
    # optimum (the curvature fit) within these 80 steps, while μ has barely left its start.
    assert metrics["test_acc"] > 0.7
    assert metrics["test_nll"] < 1.0 and 0 <= metrics["test_ece"] < 0.3
    assert metrics["train_elbo"] < 0 and trainer.history[0]["train_elbo"] < metrics["train_elbo"]


def test_sgm_with_far_apart_copies_trains_exactly_like_mfvi_and_gains_log_k(data):
    mfvi = trainer_for(small_config(method="mfvi", epochs=1, init_sd=1e-3), data)
    sgm = trainer_for(small_config(method="sgm", K=8, epochs=1, init_sd=1e-3), data)
    first, second = mfvi.train_epoch(), sgm.train_epoch()
    assert second["mi_active"] == 0.0
    assert torch.equal(mfvi.mu, sgm.mu) and first["test_acc"] == second["test_acc"]
    assert second["train_elbo_sym"] - second["train_elbo"] == pytest.approx(math.log(8))


@pytest.mark.parametrize("estimator", bnn.ESTIMATORS)
def test_sgm_term_is_active_when_copies_overlap(data, estimator):
    """Also under local reparameterisation, which samples no weights for the likelihood: Î keeps its own draw."""
    settings = dict(hidden=3, K=16, init_sd=0.5, epochs=1, train_subset=500, estimator=estimator)
    sgm, mfvi = trainer_for(small_config(method="sgm", **settings), data), trainer_for(small_config(**settings), data)
    metrics = sgm.train_epoch()
    mfvi.train_epoch()
    assert metrics["mi_active"] > 0.5
    assert metrics["mutual_info"] < math.log(16)
    assert not torch.equal(sgm.mu, mfvi.mu)  # the extra term moved the parameters


def test_sgm_blocks_with_far_apart_units_trains_exactly_like_mfvi_and_gains_log_h(data):
    mfvi = trainer_for(small_config(method="mfvi", epochs=1, init_sd=1e-3), data)
    sgm = trainer_for(small_config(method="sgm", mi="blocks", block_size=2, epochs=1, init_sd=1e-3), data)
    first, second = mfvi.train_epoch(), sgm.train_epoch()
    assert second["mi_active"] == 0.0
    assert second["log_group_size"] == pytest.approx(16 * math.log(2))  # 32 units in 16 pairs
    assert torch.equal(mfvi.mu, sgm.mu) and first["test_acc"] == second["test_acc"]
    assert second["train_elbo_sym"] - second["train_elbo"] == pytest.approx(16 * math.log(2))


@pytest.mark.parametrize("block_size", [2, 3])
def test_sgm_blocks_act_on_close_units(data, block_size):
    settings = dict(hidden=6, init_sd=0.5, epochs=1, train_subset=500, block_size=block_size, rebuild_every=5)
    sgm = trainer_for(small_config(method="sgm", mi="blocks", **settings), data)
    mfvi = trainer_for(small_config(**settings), data)
    metrics, baseline = sgm.train_epoch(), mfvi.train_epoch()
    assert metrics["mi_active"] > 0.5
    assert (
        0
        < metrics["mutual_info"]
        < metrics["log_group_size"]
        == pytest.approx(2 * math.log(math.factorial(3)) if block_size == 3 else 3 * math.log(2))
    )
    assert not torch.equal(sgm.mu, mfvi.mu)  # the extra term moved the parameters
    assert baseline["mi_active"] is None and baseline["block_mi_active"] > 0  # MFVI: measured, not trained


def test_every_epoch_reports_how_close_the_units_are(data):
    trainer = trainer_for(small_config(hidden=8, depth=2, epochs=1, init_sd=1e-3), data)
    metrics = trainer.train_epoch()
    assert len(metrics["unit_layers"]) == 2
    assert metrics["nearest_unit_kl_min"] == min(layer["nearest_unit_kl_min"] for layer in metrics["unit_layers"])
    assert metrics["nearest_unit_kl_min"] <= metrics["nearest_unit_kl_median"]
    assert metrics["units_at_prior"] == 0  # σ 10⁻³: far from the prior N(0, 1)
    assert metrics["block_log_group_size"] == pytest.approx(4 * math.log(2))  # first hidden layer, 4 pairs
    assert metrics["block_mi"] == pytest.approx(metrics["block_log_group_size"])  # a near point mass: saturated
    summary = mnist.final_summary(trainer)
    assert summary["mi_estimator"] == "blocks" and summary["mi_trained"] is False
    assert summary["mutual_info"] == metrics["block_mi"] and summary["units_at_prior"] == 0


def test_resuming_sgm_blocks_rebuilds_the_same_blocks(data, tmp_path):
    config = small_config(method="sgm", mi="blocks", hidden=6, init_sd=0.5, rebuild_every=3, train_subset=600)
    straight = trainer_for(config, data)
    straight.train_epoch()
    straight.train_epoch()
    first = trainer_for(config, data)
    first.train_epoch()
    mnist.save_checkpoint(first, tmp_path / "checkpoint.pt")
    resumed = trainer_for(config, data)
    mnist.load_checkpoint(resumed, tmp_path / "checkpoint.pt")
    resumed.train_epoch()
    assert torch.equal(resumed.mu, straight.mu) and torch.equal(resumed.log_sd, straight.log_sd)


def test_resuming_from_a_checkpoint_equals_an_uninterrupted_run(data, tmp_path):
    straight = trainer_for(small_config(method="sgm", K=4), data)
    straight.train_epoch()
    straight.train_epoch()
    first = trainer_for(small_config(method="sgm", K=4), data)
    first.train_epoch()
    mnist.save_checkpoint(first, tmp_path / "checkpoint.pt")
    resumed = trainer_for(small_config(method="sgm", K=4), data)
    mnist.load_checkpoint(resumed, tmp_path / "checkpoint.pt")
    assert resumed.epoch == 1
    resumed.train_epoch()
    assert torch.equal(resumed.mu, straight.mu) and torch.equal(resumed.log_sd, straight.log_sd)
    assert resumed.history == [{**m, "seconds": r["seconds"]} for m, r in zip(straight.history, resumed.history)]


def test_divergence_stops_with_a_clear_error_and_keeps_the_last_parameters(data):
    trainer = trainer_for(small_config(), data)
    with torch.no_grad():
        trainer.mu[5] = float("nan")
    before = trainer.log_sd.detach().clone()
    with pytest.raises(TrainingDiverged, match="epoch 1, step 1.*learning rate"):
        trainer.train_epoch()
    assert torch.equal(trainer.log_sd, before)


def test_calibration_metrics_on_known_predictions():
    labels = torch.tensor([0, 1, 0, 1])
    confident_right = torch.log(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]]).clamp_min(1e-30))
    metrics = mnist.classification_metrics(confident_right, labels)
    assert metrics["test_acc"] == 1.0 and metrics["test_ece"] == pytest.approx(0.0, abs=1e-12)
    # Always 90 % sure of class 0: right half the time, so the calibration gap is 0.4.
    overconfident = torch.log(torch.tensor([[0.9, 0.1]] * 4))
    metrics = mnist.classification_metrics(overconfident, labels)
    assert metrics["test_acc"] == 0.5 and metrics["test_ece"] == pytest.approx(0.4)
    assert metrics["test_nll"] == pytest.approx(-(math.log(0.9) + math.log(0.1)) / 2)


def test_bound_gain_is_sgms_bound_minus_mfvis_elbo_of_the_same_setting_and_width():
    def run(run_id, seed=0, train_epochs=1, hidden=16, **result):
        return SimpleNamespace(
            id=run_id,
            status=mnist_table.FINISHED,
            result={"test_acc": 0.9, **result},
            config=MnistConfig(
                hidden=hidden,
                epochs=train_epochs,
                seed=seed,
                method="sgm" if "train_elbo_sym" in result else "mfvi",
                K=4,
            ),
        )

    rows = mnist_table.results_table(
        [
            run(1, seed=0, train_elbo=-100.0),
            run(2, seed=1, train_elbo=-102.0),  # MFVI at width 16: mean −101
            run(3, train_elbo=-100.5, train_elbo_sym=-98.6),  # SGM K=4 at width 16: 2.4 nats above MFVI
            run(4, hidden=64, train_elbo=-90.0, train_elbo_sym=-89.0),  # width 64 has no MFVI run: no gain
            run(5, train_epochs=2, train_elbo=-50.0),  # another setting's MFVI at width 16: not compared with
            run(6, train_epochs=2, train_elbo=-60.0, train_elbo_sym=None),  # an SGM run without its bound
        ]
    )
    [gain] = mnist_table.bound_gain_rows(rows)
    assert (gain["label"], gain["hidden"], gain["run_ids"]) == ("SGM K=4", 16, [3])
    assert gain["gain_mean"] == pytest.approx(2.4) and gain["gain_std"] is None
    assert gain["setting"] == mnist_table.setting_label(MnistConfig(hidden=16, epochs=1))
    assert mnist_table.bound_gain_rows([row for row in rows if row["method"] == "sgm"]) == []


def finished(run_id, seed=0, hidden=16, method="mfvi", **result):
    return SimpleNamespace(
        id=run_id,
        status=mnist_table.FINISHED,
        result={"test_acc": 0.9, **result},
        config=MnistConfig(hidden=hidden, seed=seed, method=method, K=4),
    )


def test_a_seed_run_twice_counts_once_by_its_latest_run():
    """Two runs of one setting and seed 0 were counted as two seeds, their spread as if between seeds."""
    rows = mnist_table.results_table(
        [
            finished(1, seed=0, test_acc=0.40, nearest_unit_kl_min=900.0),
            finished(5, seed=0, test_acc=0.3651),
            finished(3, seed=1, test_acc=0.38),
            finished(4, seed=1, test_acc=0.38, units_at_prior=2),
        ]
    )
    [row] = rows
    assert (row["seeds"], row["seed_list"], row["runs"], row["run_ids"]) == (2, [0, 1], 4, [5, 4])
    assert row["test_acc_mean"] == pytest.approx((0.3651 + 0.38) / 2)  # seed 0's latest run, not 0.40
    assert row["test_acc_std"] == pytest.approx((0.38 - 0.3651) / 2)
    # A value the latest run lacks (recorded before it existed) comes from the seed's latest run that has it.
    assert row["nearest_unit_kl_min_mean"] == 900.0 and row["units_at_prior_mean"] == 2.0


def test_a_table_row_whose_runs_did_not_learn_says_so():
    """The table ranks methods by accuracy: rows of networks at chance (10 %) are flagged, with the reason."""
    rows = mnist_table.results_table(
        [
            finished(1, hidden=16, test_acc=0.12),
            finished(2, hidden=16, seed=1, test_acc=0.3),
            finished(3, hidden=64, test_acc=0.93),
        ]
    )
    low, high = rows
    assert low["trained"] is False and "of width 16 classify 21.0 %" in low["trained_reason"]
    assert high["trained"] is True
    verdict = mnist_table.table_verdict(rows)
    assert verdict["trained"] is False and verdict["trained_reason"] == low["trained_reason"]
    assert mnist_table.table_verdict([high])["trained"] is True
    report = {"trained": False, "trained_reason": low["trained_reason"], "table": [], "runs": []}
    assert mnist_cli._format_mnist_sweep(report).startswith("NOT TRAINED: The MFVI runs of width 16 classify")


def test_sgm_equals_mfvi_by_design_only_where_its_term_had_no_gradient_on_the_same_seeds():
    rows = mnist_table.results_table(
        [
            finished(1, hidden=256),
            finished(2, hidden=256, method="sgm", mi_active=0.0),  # the same numbers
            finished(3, hidden=16),
            finished(4, hidden=16, method="sgm", mi_active=0.3),  # equal, but the term acted
            finished(5, hidden=64),
            finished(6, hidden=64, seed=1, method="sgm", mi_active=0.0),  # other seeds
            finished(7, hidden=1024),
            finished(8, hidden=1024, method="sgm", mi_active=0.0, test_acc=0.91),
        ]
    )
    assert mnist_table.same_as_mfvi(rows, "test_acc_mean") == {"SGM K=4": [256]}

    history = [{"epoch": 1, "train_elbo": -10.0, "mi_active": 0.0}, {"epoch": 2, "train_elbo": -9.0, "mi_active": 0.0}]
    mfvi_history = [{key: value for key, value in epoch.items() if key != "mi_active"} for epoch in history]
    sgm, mfvi = MnistConfig(method="sgm", K=4), MnistConfig()
    assert mnist_table.trained_as_mfvi(sgm, history, mfvi, mfvi_history)
    assert mnist_table.trained_as_mfvi(sgm, history[:1], mfvi, mfvi_history)  # while it runs: the epochs so far
    assert not mnist_table.trained_as_mfvi(mfvi, mfvi_history, sgm, history)
    assert not mnist_table.trained_as_mfvi(MnistConfig(method="sgm", seed=1), history, mfvi, mfvi_history)
    assert not mnist_table.trained_as_mfvi(sgm, [history[0], {**history[1], "mi_active": 0.01}], mfvi, mfvi_history)
    assert not mnist_table.trained_as_mfvi(sgm, [], mfvi, [])


def test_invalid_configurations_are_explained():
    with pytest.raises(ValueError, match="hidden must be.*K must be.*method must be"):
        MnistConfig(hidden=0, K=1, method="adam").validate()
    assert mnist.resolve_device("cpu").type == "cpu"
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            mnist.resolve_device("cuda")


def test_pages_opened_at_once_read_the_files_once(monkeypatch, tmp_path):
    reads = []

    def slow_check(directory):
        reads.append(directory)
        time.sleep(0.2)
        return ["missing"]

    monkeypatch.setattr(mnist_data, "check_mnist", slow_check)
    answers = []
    threads = [threading.Thread(target=lambda: answers.append(mnist_data.check_mnist_once(tmp_path))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [["missing"]] * 4 and len(reads) == 1
