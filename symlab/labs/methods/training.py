"""A comparison as the run registry and its worker processes see it (:class:`symlab.specs.run_kind.RunKind`):
one "epoch" per stage — the reference checkpoints in chunks, the starts, then each method — checkpointed
after each, so a run killed halfway resumes from its last finished stage."""

from __future__ import annotations

from safetensors import SafetensorError

from symlab.lib import mnist_data
from symlab.lib.glyphs import GlyphsDataError
from symlab.specs import settings
from symlab.specs.run_kind import RunKind

from . import experiment


class MethodsTraining:
    def __init__(self, config: experiment.MethodsConfig, device: str, data_dir=None):
        data = mnist_data.load_mnist(settings.mnist_directory(data_dir))
        self.comparison = experiment.Comparison(config, experiment.prepare_data(data, config))
        self.epochs = self.comparison.stages

    @property
    def epoch(self) -> int:
        return self.comparison.stage

    def train_epoch(self, on_step) -> dict:
        on_step(0, 1)  # a heartbeat, and the chance to stop, before a stage that can take minutes, and within it
        done = self.comparison.run_stage(check=lambda: on_step(0, 1))
        return {"epoch": done["stage"], "stage": done["name"], "seconds": done["seconds"], "rows": done["rows"]}

    def save(self, path) -> None:
        self.comparison.save(path)

    def load(self, path) -> None:
        try:
            self.comparison.load(path)
        except (SafetensorError, KeyError, ValueError, TypeError) as error:
            raise experiment.CheckpointError(
                f"the file is damaged or is not this comparison's checkpoint ({type(error).__name__})"
            ) from None

    def summary(self) -> dict:
        return self.comparison.report()


def device(config) -> str:
    return "cpu"


KIND = RunKind(
    config_type=experiment.MethodsConfig,
    device=device,
    start=MethodsTraining,
    failures=(mnist_data.MnistDataError, GlyphsDataError, experiment.CheckpointError),
    checkpoint_problem=experiment.checkpoint_problem,
)
