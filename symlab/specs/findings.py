"""What a lab measured, as its package declares it (``symlab/labs/<lab>/findings.py``): each finding's sentence, the
numbers it states and the command that reproduces them. :mod:`symlab.serving.findings` gathers the labs' findings
for the home page, the README and the class path."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Finding:
    lab: str
    title: str
    text: str  # markdown, its numbers filled in
    command: str  # what reproduces its numbers

    def markdown(self) -> str:
        return f"**{self.title}** {self.text}"


class FindingsError(ValueError):
    """A finding's numbers cannot be read from their source; the message says how to write it again."""


def signed(value: float, digits: int) -> str:
    """``value`` with its sign, a true minus for a negative one."""
    return f"{value:+.{digits}f}".replace("-", "−")
