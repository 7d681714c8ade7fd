"""An MNIST run as the run registry and its worker processes see it (:class:`symlab.specs.run_kind.RunKind`)."""

from __future__ import annotations

import torch

from symlab.lib import mnist_data
from symlab.specs import settings
from symlab.specs.run_kind import RunKind

from . import experiment as mnist


class MnistTraining:
    """A registered run's trainer on MNIST from ``data_dir`` (None: $SYMLAB_MNIST_DIR, else the
    shipped copy), with its checkpoints and final summary."""

    def __init__(self, config: mnist.MnistConfig, device: str, data_dir=None):
        resolved = mnist.resolve_device(device)
        data = mnist_data.load_mnist(settings.mnist_directory(data_dir))
        self.trainer = mnist.MnistTrainer(config, mnist.prepare_tensors(data, config, resolved), resolved)
        self.epochs = config.epochs

    @property
    def epoch(self) -> int:
        return self.trainer.epoch

    def train_epoch(self, on_step) -> dict:
        return self.trainer.train_epoch(on_step)

    def save(self, path) -> None:
        mnist.save_checkpoint(self.trainer, path)

    def load(self, path) -> None:
        mnist.load_checkpoint(self.trainer, path)

    def summary(self) -> dict:
        return mnist.final_summary(self.trainer)


def device(config: mnist.MnistConfig) -> str:
    return mnist.resolve_device(config.device).type


KIND = RunKind(
    config_type=mnist.MnistConfig,
    device=device,
    start=MnistTraining,
    failures=(mnist_data.MnistDataError, mnist.CheckpointError, torch.cuda.OutOfMemoryError),
    checkpoint_problem=mnist.checkpoint_problem,
)
