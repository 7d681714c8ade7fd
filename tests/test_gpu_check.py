"""benchmarks/gpu_check.py: without a GPU it says so in one line, runs its CPU half through the app's own paths
and ends with one JSON line; its agreement rules flag what they must."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import gpu_check  # noqa: E402


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="the no-GPU path: this machine has a GPU")
def test_without_a_gpu_it_says_so_and_runs_the_cpu_half(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "gpu_check.py"),
            "--widths",
            "16",
            "--subset",
            "600",
            "--networks",
            "3",
            "--hmc-chains",
            "2",
            "--hmc-images",
            "600",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == "no GPU: torch finds no CUDA device here; running the CPU half"
    result = json.loads(lines[-1])
    assert result["gpu"] is False and result["ok"] is True and result["disagreements"] == []
    assert [(row["width"], row["variant"]) for row in result["mnist"]] == [(16, name) for name in gpu_check.VARIANTS]
    for row in result["mnist"]:
        assert "cuda" not in row and row["cpu"]["seconds"] > 0 and 0.1 < row["cpu"]["test_acc"] <= 1
    run = result["app_run"]  # the page's path: the registry, a detached worker, device "auto"
    assert run["finished"] and run["device"] == "cpu" and run["device_name"].startswith("CPU (")
    assert result["reference"]["networks"] == 3 and result["reference"]["cpu"]["networks_per_second"] > 0
    assert result["ray"] == {"ran": False, "why": "no GPU"}
    hmc = result["hmc"]  # the posterior-approximations lab's full-batch HMC, timed for a reference run
    assert hmc["chains"] == 2 and "cuda" not in hmc and hmc["cpu"]["finite"]
    assert hmc["cpu"]["gradient_seconds"] > 0 and hmc["cpu"]["reference_run_hours"] > 0


def test_epochs_that_differ_by_more_than_two_seeds_are_flagged():
    def row(accuracy_gpu, elbo_gpu):
        return {
            "width": 64,
            "variant": "mfvi",
            "cpu": {"test_acc": 0.95, "train_elbo": -10_000.0},
            "cuda": {"test_acc": accuracy_gpu, "train_elbo": elbo_gpu},
        }

    assert gpu_check.epoch_disagreements([row(0.935, -10_100.0), {"width": 64, "variant": "mfvi", "cpu": {}}]) == []
    (accuracy,) = gpu_check.epoch_disagreements([row(0.925, -10_000.0)])
    assert "test accuracy 0.9500 on the CPU, 0.9250 on the GPU (more than 2.0 points apart)" in accuracy
    (elbo,) = gpu_check.epoch_disagreements([row(0.95, -10_300.0)])
    assert "training ELBO -10,000 on the CPU, -10,300 on the GPU (more than 2% apart)" in elbo


def test_one_step_on_the_same_device_agrees_exactly():
    """The step comparison's plumbing: the same parameters, noise and minibatch twice on the CPU give the same
    gradients and block estimate to the last bit (on a GPU the same code measures float32 rounding)."""
    from symlab.lib import mnist_data
    from symlab.specs import settings

    found = gpu_check.step_agreement(mnist_data.load_mnist(settings.mnist_directory()), 8, torch.device("cpu"))
    assert found == {"nll": 0.0, "grad_mu": 0.0, "grad_log_sd": 0.0, "block_information": 0.0}


def test_hmc_that_differs_between_devices_or_draws_non_finite_weights_is_flagged():
    def row(cuda_gradient, finite=True):
        return {
            "cpu": {"log_density": torch.tensor([-100.0]), "gradient": torch.tensor([[1.0, 2.0]]), "finite": True},
            "cuda": {
                "log_density": torch.tensor([-100.0 + 1e-4]),
                "gradient": torch.tensor([cuda_gradient]),
                "finite": finite,
            },
        }

    assert gpu_check.hmc_disagreements(row([1.0, 2.0 + 1e-5])) == []
    flagged = gpu_check.hmc_disagreements(row([1.0, 2.01], finite=False))
    assert len(flagged) == 2 and "non-finite" in flagged[0] and "gradient differs by 5.00e-03" in flagged[1]
