"""Where the data SymLab ships lies: ``symlab/assets`` inside the package (MNIST, the letters, the shipped results),
found through importlib.resources, so that an installed package finds its own copy. In a checkout, ``assets/`` at
the top is a link to it."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def shipped(*parts: str) -> Path:
    """The path of ``symlab/assets/<parts...>`` (a file system path: the package is installed unzipped)."""
    return Path(str(files("symlab").joinpath("assets", *parts)))
