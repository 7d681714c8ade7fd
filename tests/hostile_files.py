"""Uploads built to exhaust a server: small files that expand to gigabytes, networks whose analysis costs hours,
names that are markup. Used by the reader's and the pages' tests and by ``benchmarks/upload_attacks.py``."""

from __future__ import annotations

import functools
import io
import tempfile
import zipfile
from pathlib import Path

import torch

MNIST_INPUTS, MNIST_CLASSES = 784, 10


def torch_bytes(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def stride_zero_view(units: int = 100_000, inputs: int = 8_000) -> bytes:
    """A 784 → ``units`` → 10 net whose weights are views of one number repeated (stride 0): a file of a few
    kilobytes that a reader copying its tensors expands to ``units`` × ``inputs`` numbers (8 × 10⁸: 6.4 GB as
    float64)."""
    one = torch.zeros(1)
    return torch_bytes(
        {
            "0.weight": one.expand(units, inputs),
            "0.bias": one.expand(units),
            "2.weight": one.expand(MNIST_CLASSES, units),
            "2.bias": one.expand(MNIST_CLASSES),
        }
    )


def overlapping_view(units: int = 1000, inputs: int = MNIST_INPUTS) -> bytes:
    """A net whose first weight matrix reads one short storage again and again (rows that overlap)."""
    storage = torch.randn(units + inputs)
    return torch_bytes(
        {
            "0.weight": storage.as_strided((units, inputs), (1, 1)),
            "0.bias": torch.zeros(units),
            "2.weight": torch.randn(MNIST_CLASSES, units),
            "2.bias": torch.zeros(MNIST_CLASSES),
        }
    )


@functools.lru_cache(maxsize=4)
def deflated(expanded_bytes: int) -> bytes:
    """A torch file whose zip members are recompressed with DEFLATE: its weights (zeros) expand to about
    ``expanded_bytes`` while the file stays a few hundredths of that. Written without ever holding the zeros:
    torch saves the weights' room as a hole in a sparse file, which is read and compressed a chunk at a time."""
    units = max(expanded_bytes // (4 * MNIST_INPUTS), 1)
    state = {
        "0.weight": torch.empty(units, MNIST_INPUTS),
        "0.bias": torch.zeros(units),
        "2.weight": torch.zeros(MNIST_CLASSES, units),
        "2.bias": torch.zeros(MNIST_CLASSES),
    }
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "archive.pt"
        with torch.serialization.skip_data():
            torch.save(state, path)
        return recompressed(path)


def recompressed(torch_file) -> bytes:
    """``torch_file`` (a zip: its bytes, or a path) with every member compressed by DEFLATE, as any zip tool could
    write it."""
    source = zipfile.ZipFile(io.BytesIO(torch_file) if isinstance(torch_file, bytes) else torch_file)
    target = io.BytesIO()
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as out:
        for info in source.infolist():
            with source.open(info) as member, out.open(info.filename, "w", force_zip64=True) as written:
                member._expected_crc = None  # torch's skip_data records a checksum of bytes it never wrote
                while chunk := member.read(2**24):
                    written.write(chunk)
    return target.getvalue()


def deep_chain(layers: int = 200) -> bytes:
    """``layers`` nn.Linear(1, 1) layers in a row: a file of a few hundred kilobytes whose analysis grows with
    the square of its depth."""
    generator = torch.Generator().manual_seed(0)
    state = {}
    for index in range(layers):
        state[f"{index}.weight"] = torch.randn(1, 1, generator=generator)
        state[f"{index}.bias"] = torch.randn(1, generator=generator)
    return torch_bytes(state)


def no_hidden_units() -> bytes:
    """A 784 → 0 → 10 net: weight matrices with no rows or no columns."""
    return torch_bytes(
        {
            "0.weight": torch.zeros(0, MNIST_INPUTS),
            "0.bias": torch.zeros(0),
            "2.weight": torch.zeros(MNIST_CLASSES, 0),
            "2.bias": torch.zeros(MNIST_CLASSES),
        }
    )


def wide_network(units: int = 5000, seed: int = 0) -> bytes:
    """A 784 → ``units`` → 10 MNIST-shaped net, float32 (5 000 units: 16 MB), as nn.Linear initialises it."""
    torch.manual_seed(seed)
    net = torch.nn.Sequential(
        torch.nn.Linear(MNIST_INPUTS, units), torch.nn.ReLU(), torch.nn.Linear(units, MNIST_CLASSES)
    )
    return torch_bytes(net.state_dict())


def small_network(seed: int = 0) -> bytes:
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    return torch_bytes(net.state_dict())


# A file name a page must show as text: markdown, a link, LaTeX, an icon and a colour directive.
# (No "/": it is a file's name too.)
MARKUP_NAME = "**bold** [link](#here) $x^2$ :warning: :red[red] <img src=x onerror=alert(1)> `tick`.pt"
