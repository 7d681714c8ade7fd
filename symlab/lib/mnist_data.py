"""MNIST from the canonical IDX files, verified by content checksum.

A copy ships in ``assets/mnist/`` so the app works offline. Another directory can be given;
when it lacks the files and the network allows, :func:`download_mnist` fetches them from the
canonical mirrors. The checksums are of the *decompressed* bytes (the official distribution's
content): a recompressed ``.gz`` is as good as the original.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import shutil
import tempfile
import threading
import urllib.request
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from symlab.lib.shipped import shipped

SHIPPED_DIR = shipped("mnist")


@dataclass(frozen=True)
class IdxFile:
    name: str
    md5: str  # of the decompressed content
    size: int  # bytes after decompression
    magic: int  # 2051 images, 2049 labels
    count: int


FILES = {
    "train_images": IdxFile("train-images-idx3-ubyte.gz", "6bbc9ace898e44ae57da46a324031adb", 47040016, 2051, 60000),
    "train_labels": IdxFile("train-labels-idx1-ubyte.gz", "a25bea736e30d166cdddb491f175f624", 60008, 2049, 60000),
    "test_images": IdxFile("t10k-images-idx3-ubyte.gz", "2646ac647ad5339dbf082846283269ea", 7840016, 2051, 10000),
    "test_labels": IdxFile("t10k-labels-idx1-ubyte.gz", "27ae3e4e09519cfbb04c329615203637", 10008, 2049, 10000),
}
MIRRORS = (
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "https://storage.googleapis.com/cvdf-datasets/mnist/",
    "http://yann.lecun.com/exdb/mnist/",
)
# Standardisation used by every model here (the training set's pixel mean and std / 255).
PIXEL_MEAN, PIXEL_STD = 0.1307, 0.3081


class MnistDataError(RuntimeError):
    """MNIST is missing or damaged; the message says which file and how to fix it."""


@dataclass(frozen=True)
class Mnist:
    train_images: np.ndarray  # (60000, 784) uint8
    train_labels: np.ndarray  # (60000,) uint8
    test_images: np.ndarray  # (10000, 784) uint8
    test_labels: np.ndarray  # (10000,) uint8


def _fix_hint(directory: Path) -> str:
    if directory == SHIPPED_DIR:
        return (
            "The copy shipped with SymLab is damaged: restore it with "
            "`git checkout -- assets/mnist` (or re-clone the repository)."
        )
    return (
        f"Delete the file and run `python -m symlab mnist-data --data-dir {directory} --download` "
        f"(needs network), copy the four IDX files from SymLab's `assets/mnist/`, or leave out "
        f"--data-dir to use that copy."
    )


def read_idx(path: Path, spec: IdxFile) -> np.ndarray:
    """Decompress, verify size, checksum and header, and return the uint8 payload."""
    path = Path(path)
    if not path.is_file():
        raise MnistDataError(f"MNIST file {path} is missing. {_fix_hint(path.parent)}")
    try:
        with gzip.open(path, "rb") as handle:
            content = handle.read()
    except (OSError, EOFError, zlib.error) as error:
        raise MnistDataError(
            f"MNIST file {path} is not a readable gzip file ({error}). {_fix_hint(path.parent)}"
        ) from None
    if len(content) != spec.size or hashlib.md5(content).hexdigest() != spec.md5:
        raise MnistDataError(
            f"MNIST file {path} has the wrong content ({len(content)} bytes, md5 "
            f"{hashlib.md5(content).hexdigest()}; expected {spec.size} bytes, md5 {spec.md5}). "
            f"{_fix_hint(path.parent)}"
        )
    header = np.frombuffer(content, dtype=">i4", count=2)
    assert header[0] == spec.magic and header[1] == spec.count  # implied by the checksum
    offset = 16 if spec.magic == 2051 else 8
    data = np.frombuffer(content, dtype=np.uint8, offset=offset)
    return data.reshape(spec.count, -1) if spec.magic == 2051 else data


def data_directory(directory=None) -> Path:
    """``directory``, else the copy shipped in assets/mnist (the settings, symlab.specs.settings, say which)."""
    return SHIPPED_DIR if directory is None else Path(directory).expanduser().resolve()


# Loading MNIST (decompressing and checking its four files: about 0.4 s) as the elementwise work of the same time,
# for the estimates of what a computation that loads it costs.
LOAD_ELEMENTS = 2.2e9


def load_mnist(directory: str | os.PathLike | None = None) -> Mnist:
    """The four MNIST arrays from ``directory`` (default: the shipped copy), verified."""
    directory = data_directory(directory)
    if not directory.is_dir():
        raise MnistDataError(f"MNIST directory {directory} does not exist. {_fix_hint(directory)}")
    return Mnist(**{key: read_idx(directory / spec.name, spec) for key, spec in FILES.items()})


@functools.lru_cache(maxsize=2)
def load_mnist_once(directory: str | None = None) -> Mnist:
    """:func:`load_mnist`, read once per process: a compute worker trains task after task on it.
    The arrays are shared: treat them as read-only."""
    return load_mnist(directory)


def check_mnist(directory: str | os.PathLike | None = None) -> list[str]:
    """Problems with the MNIST files in ``directory`` (an empty list when all four are good)."""
    directory = data_directory(directory)
    problems = []
    for spec in FILES.values():
        try:
            read_idx(directory / spec.name, spec)
        except MnistDataError as error:
            problems.append(str(error))
    return problems


_CHECKING = threading.Lock()


def check_mnist_once(directory: str | os.PathLike | None = None) -> list[str]:
    """:func:`check_mnist`'s answer, kept while the four files stay as they were (present or not, their sizes,
    modification times and inodes): a page asks on every run, and reading them takes half a second."""
    directory = data_directory(directory)
    stamp = _stamp(directory)
    with _CHECKING:  # one reading at a time: a class opening the page at once waits for the first
        return list(_checked(str(directory), stamp))


def _stamp(directory: Path) -> tuple:
    stamps: list[tuple[int, int, int] | None] = []  # None: a file that is missing
    for spec in FILES.values():
        try:
            status = (directory / spec.name).stat()
            stamps.append((status.st_size, status.st_mtime_ns, status.st_ino))
        except OSError:
            stamps.append(None)
    return tuple(stamps)


@functools.lru_cache(maxsize=8)
def _checked(directory: str, stamp: tuple) -> tuple[str, ...]:
    return tuple(check_mnist(directory))


def download_mnist(directory: str | os.PathLike, mirrors=MIRRORS, timeout: float = 30.0) -> list[str]:
    """Fetch each missing or damaged file into ``directory`` from the first mirror whose copy
    passes the checksum; returns the names downloaded. Raises :class:`MnistDataError` when no
    mirror gives a good copy (e.g. no network)."""
    directory = Path(directory).expanduser().resolve()
    directory.mkdir(parents=True, exist_ok=True)
    fetched = []
    for spec in FILES.values():
        target = directory / spec.name
        try:
            read_idx(target, spec)
            continue
        except MnistDataError:
            pass
        failures = []
        for mirror in mirrors:
            try:
                _fetch_verified(mirror + spec.name, target, spec, timeout)
                fetched.append(spec.name)
                break
            except (OSError, MnistDataError) as error:
                failures.append(f"{mirror}: {error}")
        else:
            raise MnistDataError(
                f"Could not download {spec.name} with a matching checksum:\n  "
                + "\n  ".join(failures)
                + f"\nCopy the IDX files from SymLab's `assets/mnist/` into {directory} instead."
            )
    return fetched


def _fetch_verified(url: str, target: Path, spec: IdxFile, timeout: float) -> None:
    # Write beside the target and rename only after the checksum passes: never a half file.
    with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".part", delete=False) as part:
        part_path = Path(part.name)
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                shutil.copyfileobj(response, part)
        except BaseException:
            part.close()
            part_path.unlink(missing_ok=True)
            raise
    try:
        read_idx(part_path, spec)
    except MnistDataError:
        part_path.unlink(missing_ok=True)
        raise MnistDataError(f"checksum mismatch for {url}") from None
    os.replace(part_path, target)
