"""What a lab declares for its background runs (:mod:`symlab.runs`): its :class:`RunKind`, the
:class:`Training` the worker drives, and the statuses a run passes through."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

QUEUED, RUNNING, FINISHED, FAILED, DIVERGED, CANCELLED, INTERRUPTED = (
    "queued",
    "running",
    "finished",
    "failed",
    "diverged",
    "cancelled",
    "interrupted",
)


ACTIVE = (QUEUED, RUNNING)


RESUMABLE = (INTERRUPTED, CANCELLED, FAILED)


class Training(Protocol):
    """One run's training as the worker drives it: epoch by epoch, checkpointed after each."""

    epochs: int  # epochs to train

    @property
    def epoch(self) -> int:
        """Completed epochs."""

    def train_epoch(self, on_step: Callable[[int, int], None]) -> dict:
        """Train one epoch; its metrics, with "epoch". ``on_step(step, steps)`` may raise to stop."""

    def save(self, path: Path) -> None:
        """Write a checkpoint that :meth:`load` resumes from exactly."""

    def load(self, path: Path) -> None:
        """Continue from a checkpoint that :meth:`save` wrote."""

    def summary(self) -> dict:
        """The run's result: JSON-ready, recorded when it finishes or diverges."""


class RunConfig(Protocol):
    """A run's settings as the registry keeps them: a JSON-ready dict, read back whole."""

    def to_dict(self) -> dict: ...

    @classmethod
    def from_dict(cls, values: dict) -> RunConfig: ...


@dataclass(frozen=True)
class RunKind:
    """One lab's runs. ``config_type`` is a dataclass with ``to_dict()``, ``from_dict(values)``,
    ``validate()``, a ``label`` and ``work()`` (a :class:`~symlab.specs.settings.Work` for the server's caps)."""

    config_type: type[RunConfig]
    device: Callable[[Any], str]  # the device type a config trains on ("cpu", "cuda"): the queue it waits in
    start: Callable[..., Training]  # start(config, device, data_dir): its training at epoch 0
    failures: tuple[type[BaseException], ...] = ()  # expected errors, recorded by their message alone
    # Why a checkpoint cannot be read, in a few words, or None: cheap (it need not read the tensors), for pages that
    # offer a run's resume or its files. None: not checked.
    checkpoint_problem: Callable[[Path], str | None] | None = None
