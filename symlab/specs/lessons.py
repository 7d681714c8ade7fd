"""A class's path through the labs (``lessons.toml``): each step a question to predict first, the lab and
preset that answer it, and one sentence on what to see."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

PATH_FILE = Path(__file__).with_name("lessons.toml")


@dataclass(frozen=True)
class Step:
    number: int  # from 1
    lab: str  # a lab's name, its page's URL path
    preset: str  # one of that page's presets
    minutes: int
    question: str
    see: str  # may name numbers, {name:format}, of symlab.serving.findings

    def seen(self, numbers: dict) -> str:
        """What to see, its numbers filled in from ``numbers`` (:func:`symlab.serving.findings.numbers`)."""
        return self.see.format(**numbers)


@dataclass(frozen=True)
class LessonPath:
    title: str
    steps: tuple[Step, ...]

    @property
    def minutes(self) -> int:
        return sum(step.minutes for step in self.steps)

    def next_step(self, lab: str, preset: str | None, opened: int | None = None) -> Step | None:
        """The step after the one that ``lab``'s page shows with ``preset``. On a state that is no step of the path
        (a default link, a control moved): the step after ``opened``, the step of this lab the visitor last opened;
        without one, the lab's first step, so that a lab's default link starts its part of the path rather than
        skipping it. None after the last step."""
        steps = self.steps
        at = next((step.number for step in steps if step.lab == lab and step.preset == preset), None)
        if at is None and opened is not None and 1 <= opened <= len(steps) and steps[opened - 1].lab == lab:
            at = opened
        if at is None:
            first = next((step for step in steps if step.lab == lab), None)
            return first if first is not None else steps[0]
        return steps[at] if at < len(steps) else None


def lesson_path(path: Path = PATH_FILE) -> LessonPath:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    steps = tuple(Step(number=index + 1, **step) for index, step in enumerate(data["step"]))
    return LessonPath(data["title"].format(minutes=sum(step.minutes for step in steps)), steps)
