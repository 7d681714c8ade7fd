"""A lab's run that is not MNIST's, for the registry's and the worker's tests: it counts to its epochs."""

from dataclasses import asdict, dataclass

from symlab.specs.results import TrainingDiverged
from symlab.specs.run_kind import RunKind
from symlab.specs.settings import Work


@dataclass(frozen=True)
class CountConfig:
    """A lab's run that is not MNIST's: counts to ``epochs``; epoch ``diverge_in`` diverges (0: none)."""

    epochs: int = 3
    diverge_in: int = 0

    def to_dict(self):
        return asdict(self)

    @classmethod
    def from_dict(cls, values):
        return cls(**values)

    def validate(self):
        return self

    def work(self):
        return Work(width=1, depth=1, epochs=self.epochs)

    @property
    def label(self):
        return f"count to {self.epochs}"


class Counting:
    def __init__(self, config, device, data_dir):
        self.config, self.epochs, self.epoch = config, config.epochs, 0

    def train_epoch(self, on_step):
        on_step(1, 1)
        if self.epoch + 1 == self.config.diverge_in:
            raise TrainingDiverged(f"diverged in epoch {self.epoch + 1}")
        self.epoch += 1
        return {"epoch": self.epoch, "count": self.epoch}

    def save(self, path):
        path.write_text(str(self.epoch))

    def load(self, path):
        self.epoch = int(path.read_text())

    def summary(self):
        return {"counted": self.epoch}


COUNTING = RunKind(config_type=CountConfig, device=lambda config: "cpu", start=Counting)
