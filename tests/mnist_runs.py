"""MNIST runs for tests: recorded as finished without training, or trained by the command line."""

import subprocess
import sys
from pathlib import Path

from symlab.specs.run_kind import FINISHED

ROOT = Path(__file__).resolve().parents[1]
# A run that trains in seconds; σ₀ small, so it learns in its 8 steps.
TINY = dict(hidden=8, epochs=2, train_subset=500, samples=2, init_sd=1e-3, device="cpu")


def finished_run(registry, config, test_acc: float, train_elbo: float, **more) -> int:
    """A run of ``config`` recorded as finished (no metrics per epoch) with these results, a test NLL of 0.3 and an
    ECE of 0.02, and ``more``."""
    run_id = registry.create("mnist", config, "cpu")
    result = {"test_acc": test_acc, "test_nll": 0.3, "test_ece": 0.02, "train_elbo": train_elbo, **more}
    registry.update(run_id, status=FINISHED, result=result)
    return run_id


def small_sweep(seeds: int) -> list[str]:
    """The command line's arguments for a small sweep: widths 8 and 16, MFVI and SGM K=4, ``seeds`` seeds, one epoch
    on 500 images with 2 samples."""
    return (
        f"mnist-sweep --hidden 8,16 --methods mfvi,sgm --K 4 --seeds {seeds} --epochs 1 --train-subset 500 --samples 2"
    ).split()


def train(runs_dir: Path, hidden: int, train_subset: int, timeout: float) -> None:
    """One epoch of an MFVI run of width ``hidden`` on ``train_subset`` images, trained by ``python -m symlab mnist``
    into ``runs_dir``."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "symlab",
            "mnist",
            "--hidden",
            str(hidden),
            "--epochs",
            "1",
            "--train-subset",
            str(train_subset),
            "--runs-dir",
            str(runs_dir),
            "--json",
        ],
        check=True,
        capture_output=True,
        cwd=ROOT,
        timeout=timeout,
    )
