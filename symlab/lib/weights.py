"""Networks from files, and posteriors to files.

A network comes in as a PyTorch ``state_dict`` of ``nn.Linear`` layers (``torch.save``) or as a
safetensors file: point estimates, or mean-field posteriors in the format :func:`posterior_bytes`
writes (the means under the usual keys, the standard deviations under ``sd.<key>``), or as saved by a
BNN library (:mod:`symlab.lib.bnn_formats` renames those to SymLab's keys first). A file is data,
never code: safetensors holds only tensors, and torch files are read with ``weights_only=True``,
which refuses any pickled object but tensors and plain containers.

A small file must not become a large one in memory. The file is capped in size; a torch file's archive
by the size its members expand to (declared in the archive, checked before anything is unpacked: a
member recompressed with DEFLATE can expand a thousandfold); the tensors by how many numbers they hold
once copied (checked before any copy: a view with stride 0 shows one stored number as billions), and a
view that repeats or overlaps its stored numbers is refused; the network by its depth. Every tensor is
checked for shape, dtype and finite values; the layer structure is inferred from the shapes (each
layer's inputs are the previous layer's outputs). Anything else ends in :class:`WeightsError`, with a
message that says what was wrong.

The layers come back as float64 numpy ``(W, b)`` pairs, as :mod:`symlab.lib.symmetry` takes them.
"""

from __future__ import annotations

import io
import json
import pickle
import re
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from symlab.lib import bnn_formats, mlp
from symlab.lib.gaussian import DiagonalGaussian
from symlab.lib.mnist_data import PIXEL_MEAN, PIXEL_STD
from symlab.lib.options import WEIGHTS_MAX_FILE_MB, library_names

# One limit: Streamlit's server.maxUploadSize (.streamlit/config.toml), in MB of 10⁶ bytes as its uploader counts
# and states them ("Limit 64MB per file"); its server, counting 2²⁰, lets through only what the reader then refuses.
MAX_FILE_MB = WEIGHTS_MAX_FILE_MB
MAX_FILE_BYTES = MAX_FILE_MB * 10**6
MAX_NUMBERS = MAX_FILE_BYTES // 4  # in all tensors once copied: as many as a full file holds in float32
MAX_LAYERS = 64  # nn.Linear layers: the analyses' cost grows with the square of the depth
# Named tensors in a file: a layer of a Bayesian library's module holds at most about a dozen (means, spreads, its
# prior's, noise buffers). A file of 200 000 empty tensors took minutes to read: it is refused from its header.
MAX_TENSORS = 16 * MAX_LAYERS
SD_PREFIX = "sd."  # the standard deviations of a mean-field posterior, under the means' keys
FORMAT = "symlab mean-field posterior"


class WeightsError(ValueError):
    """A file that is not a usable MLP; the message says why and what to do."""


@dataclass(frozen=True)
class Network:
    """An MLP read from a file: ``means`` (the point estimate, or a posterior's means) and, for a
    mean-field posterior, ``sds``; both lists of float64 ``(W, b)`` with W of shape (out, in). A layer
    saved without a bias (``nn.Linear(..., bias=False)``) has b = 0 here, and ``has_bias`` says so."""

    name: str
    means: list
    sds: list | None = None
    metadata: dict | None = None
    has_bias: tuple[bool, ...] | None = None  # per layer; None: every layer has one
    library: str | None = None  # a BNN library's posterior it was read from (bnn_formats.BnnFormat.library)

    @property
    def sizes(self) -> tuple[int, ...]:
        return (self.means[0][0].shape[1],) + tuple(W.shape[0] for W, _ in self.means)

    @property
    def biases(self) -> tuple[bool, ...]:
        return self.has_bias or (True,) * len(self.means)

    @property
    def n_parameters(self) -> int:
        """The parameters the file holds: a bias-free layer's zeros are not counted."""
        return sum(W.size + b.size * present for (W, b), present in zip(self.means, self.biases))

    @property
    def is_posterior(self) -> bool:
        return self.sds is not None

    def describe(self) -> str:
        kind = "a mean-field posterior (means and standard deviations)" if self.is_posterior else "a point estimate"
        missing = [str(index + 1) for index, present in enumerate(self.biases) if not present]
        no_bias = f" (no bias in layer{'s' * (len(missing) > 1)} {', '.join(missing)})" if missing else ""
        return (
            f"{' → '.join(map(str, self.sizes))}: {len(self.means)} nn.Linear layers with ReLU between them, "
            f"{self.n_parameters:,} parameters{no_bias}, {kind}"
            + (f", read from a {self.library}" if self.library else "")
        )

    def layer_rows(self) -> list[dict]:
        """The inferred structure, one row per nn.Linear layer, for the user to confirm."""
        return [
            {
                "layer": index + 1,
                "inputs": W.shape[1],
                "outputs": W.shape[0],
                "parameters": W.size + b.size * present,
                "bias": "yes" if present else "none",
                "then": "ReLU" if index < len(self.means) - 1 else "—",
            }
            for index, ((W, b), present) in enumerate(zip(self.means, self.biases))
        ]

    def gaussian(self) -> DiagonalGaussian:
        """q over the flat parameters; a point estimate is the point mass (σ = 0)."""
        layout, mean = mlp.flatten(self.means)
        sd = np.zeros_like(mean) if self.sds is None else mlp.flatten(self.sds)[1]
        return DiagonalGaussian.from_sd(layout, mean, sd)


# ---------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------


def read_network(source: bytes | str | Path, name: str | None = None) -> Network:
    """The MLP in a file (a path) or in its bytes; :class:`WeightsError` for anything else."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        name = name or path.name
        try:
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                raise WeightsError(f"{name}: {size / 10**6:.0f} MB is over the {MAX_FILE_BYTES / 10**6:g} MB cap")
            data = path.read_bytes()
        except (OSError, ValueError) as error:  # ValueError: a NUL in the name
            raise WeightsError(f"{name[:200]}: cannot read it ({getattr(error, 'strerror', None) or error})") from None
    else:
        data, name = bytes(source), name or "the file"
    tensors, metadata, ordered = read_tensors(data, name)
    return network_from_tensors(tensors, name, metadata, ordered)


def read_tensors(data: bytes, name: str) -> tuple[dict[str, torch.Tensor], dict, bool]:
    """The named tensors in a safetensors or torch file, the safetensors metadata, and whether the tensors'
    order is the model's (a state_dict's is; safetensors sorts its keys)."""
    if not data:
        raise WeightsError(f"{name}: the file is empty")
    if len(data) > MAX_FILE_BYTES:
        raise WeightsError(f"{name}: {len(data) / 10**6:.0f} MB is over the {MAX_FILE_BYTES / 10**6:g} MB cap")
    if data[:4] != b"PK\x03\x04" and _looks_like_safetensors(data):
        tensors, metadata = _safetensors_tensors(data, name)
        return _checked_sizes(tensors, name), metadata, False
    if data[:4] == b"PK\x03\x04" or data[:1] == b"\x80":  # torch.save: a zip archive, or a bare pickle (old format)
        if data[:4] == b"PK\x03\x04":
            _check_archive(data, name)
        return _checked_sizes(_torch_tensors(data, name), name), {}, True
    raise WeightsError(f"{name}: not a PyTorch state_dict (torch.save) or a safetensors file")


def _check_archive(data: bytes, name: str) -> None:
    """A torch file's zip archive, from its directory alone: what its members expand to must fit the cap (torch
    unpacks each member whole, at the size the directory declares)."""
    try:
        members = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as error:
        raise WeightsError(f"{name}: truncated or corrupt PyTorch file ({_first_line(error)})") from None
    unknown = sorted({member.compress_type for member in members} - {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED})
    if unknown:
        raise WeightsError(f"{name}: its archive uses compression method {unknown[0]}, which PyTorch cannot read")
    _check_count(sum("/data/" in member.filename for member in members), name)  # a member per tensor's storage
    expanded = sum(member.file_size for member in members)
    if expanded > MAX_FILE_BYTES:
        raise WeightsError(
            f"{name}: its archive expands to {expanded / 10**6:,.0f} MB, over the "
            f"{MAX_FILE_BYTES / 10**6:g} MB cap (a file recompressed to a fraction of that is still that "
            "large once read)"
        )


def _check_count(tensors: int, name: str) -> None:
    if tensors > MAX_TENSORS:
        raise WeightsError(
            f"{name}: holds {tensors:,} tensors, over this reader's cap of {MAX_TENSORS:,} (an MLP of at most "
            f"{MAX_LAYERS} layers needs far fewer)"
        )


def _checked_sizes(tensors: dict, name: str) -> dict:
    """``tensors``, at most :data:`MAX_TENSORS` of them, each a view of numbers the file holds once (none repeated or
    overlapping), and together at most :data:`MAX_NUMBERS` numbers: checked before anything copies them."""
    if not isinstance(tensors, dict):
        return tensors  # not a state_dict: refused by its reader, with the reason
    _check_count(len(tensors), name)
    numbers, seen = 0, set()
    for key, tensor in tensors.items():
        if not isinstance(tensor, torch.Tensor):
            continue
        if _repeats_numbers(tensor):
            raise WeightsError(
                f"{name}: {key} is a view that repeats or overlaps its stored numbers (shape "
                f"{tuple(tensor.shape)}, strides {tuple(tensor.stride())}): save the tensors "
                "themselves, e.g. torch.save(model.state_dict(), path)"
            )
        view = (tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype)
        if view not in seen:  # the same view under two names (a library's copies) is read once
            seen.add(view)
            numbers += tensor.numel()
        if numbers > MAX_NUMBERS:
            raise WeightsError(f"{name}: its tensors hold more than {MAX_NUMBERS:,} numbers, this reader's cap")
    return tensors


def _repeats_numbers(tensor: torch.Tensor) -> bool:
    """Whether two of the view's elements can fall on one stored number: with its dimensions in the order of
    their strides, each stride must step past everything the smaller ones reach (stride 0 never does)."""
    reach = 0
    for stride, size in sorted((stride, size) for size, stride in zip(tensor.shape, tensor.stride()) if size > 1):
        if stride <= reach:
            return True
        reach += stride * (size - 1)
    return False


def _looks_like_safetensors(data: bytes) -> bool:
    return len(data) >= 10 and data[8:9] == b"{"


def _torch_tensors(data: bytes, name: str) -> dict[str, torch.Tensor]:
    try:
        loaded = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise WeightsError(
            f"{name}: refused: the file holds objects other than tensors (code, a pickled module or "
            f"class{_refused_global(error)}); nothing in it was run. Save the weights with "
            "torch.save(model.state_dict(), path)"
        ) from None
    except (EOFError, RuntimeError, zipfile.BadZipFile, ValueError, KeyError, struct.error, OSError) as error:
        raise WeightsError(f"{name}: truncated or corrupt PyTorch file ({_first_line(error)})") from None
    if isinstance(loaded, dict) and isinstance(loaded.get("state_dict"), dict):
        loaded = loaded["state_dict"]  # a checkpoint {"state_dict": ..., "epoch": ...}
    if isinstance(loaded, torch.Tensor) or not isinstance(loaded, dict):
        raise WeightsError(
            f"{name}: holds a {type(loaded).__name__}, not a state_dict (a dict of named tensors); "
            "save the weights with torch.save(model.state_dict(), path)"
        )
    return loaded


def _safetensors_tensors(data: bytes, name: str) -> tuple[dict[str, torch.Tensor], dict]:
    from safetensors import SafetensorError
    from safetensors.torch import load

    (header_size,) = struct.unpack("<Q", data[:8])
    if 8 + header_size > len(data):
        raise WeightsError(
            f"{name}: truncated safetensors file (its header says {header_size} bytes, the file has {len(data) - 8})"
        )
    try:
        header = json.loads(data[8 : 8 + header_size])
    except ValueError as error:
        raise WeightsError(f"{name}: truncated or corrupt safetensors file ({_first_line(error)})") from None
    _check_count(len(header) - ("__metadata__" in header) if isinstance(header, dict) else 0, name)
    try:
        tensors = load(data)
    except (SafetensorError, ValueError, TypeError) as error:
        raise WeightsError(f"{name}: truncated or corrupt safetensors file ({_first_line(error)})") from None
    metadata = (header.get("__metadata__") or {}) if isinstance(header, dict) else {}
    return tensors, dict(metadata)


def _refused_global(error: Exception) -> str:
    """What torch's weights-only unpickler refused (its message buries it among advice to disable it)."""
    for line in str(error).splitlines():
        if "GLOBAL" in line or "Unsupported" in line:
            return ": " + line.strip()[:200]
    return ""


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return text[0][:200] if text else type(error).__name__


def network_from_tensors(tensors: dict, name: str, metadata: dict | None = None, ordered: bool = True) -> Network:
    """Infer an MLP from named tensors: ``<layer>.weight`` (out, in) and ``<layer>.bias`` (out,) pairs whose
    shapes chain, with ``sd.<key>`` standard deviations for a posterior; ``ordered``: the tensors come in the
    model's order."""
    if not tensors:
        raise WeightsError(f"{name}: holds no tensors")
    not_tensors = [key for key, value in tensors.items() if not isinstance(value, torch.Tensor)]
    if not_tensors:
        raise WeightsError(f"{name}: {_listed(not_tensors)} are not tensors")
    tensors, library = _from_bnn_library(tensors, name)
    sd_keys = {key[len(SD_PREFIX) :]: value for key, value in tensors.items() if key.startswith(SD_PREFIX)}
    mean_keys = {key: value for key, value in tensors.items() if not key.startswith(SD_PREFIX)}
    prefixes = _layer_prefixes(mean_keys, name)
    means = [_layer(mean_keys, prefix, name) for prefix in prefixes]
    order = _chain_order(means, prefixes, name, ordered)
    prefixes, means = [prefixes[i] for i in order], [means[i] for i in order]
    sds = None
    if sd_keys:
        if set(sd_keys) != set(mean_keys):
            raise WeightsError(
                f"{name}: the standard deviations ({SD_PREFIX}…) do not cover the same tensors as the "
                f"means: {_listed(sorted(set(sd_keys) ^ set(mean_keys)))}"
            )
        sds = [_layer(sd_keys, prefix, name, means=means[i]) for i, prefix in enumerate(prefixes)]
        negative = [prefix for prefix, (W, b) in zip(prefixes, sds) if (W < 0).any() or (b < 0).any()]
        if negative:
            raise WeightsError(f"{name}: negative standard deviations in {_listed(negative)}")
    has_bias = tuple(prefix + "bias" in mean_keys for prefix in prefixes)
    return Network(name, means, sds, metadata or None, None if all(has_bias) else has_bias, library=library)


def _from_bnn_library(tensors: dict, name: str) -> tuple[dict, str | None]:
    """A BNN library's posterior under SymLab's keys, and where it came from; any other file as it is."""
    try:
        fmt = bnn_formats.detect(tensors)
        return (bnn_formats.to_symlab(tensors, fmt), fmt.library) if fmt else (tensors, None)
    except bnn_formats.FormatError as error:
        raise WeightsError(f"{name}: {error}") from None


# The BNN libraries whose saved posteriors are read as they are (symlab.lib.bnn_formats), as the help texts say it.
LIBRARIES = library_names()
# What the refusal of an unknown tensor lists: every format read, and how to bring another one.
_READABLE = (
    "a plain state_dict or safetensors file, a SymLab posterior (standard deviations under sd.<key>), or "
    f"a mean-field posterior saved by {LIBRARIES} ({bnn_formats.UNREADABLE}); from another library, save "
    "the means as <layer>.weight/<layer>.bias and the standard deviations as "
    "sd.<layer>.weight/sd.<layer>.bias"
)


def _layer_prefixes(tensors: dict, name: str) -> list[str]:
    """The layers' key prefixes, in the file's order (a state_dict's is the module's)."""
    prefixes, extra = [], []
    for key, value in tensors.items():
        if key.endswith(".weight") or key == "weight":
            prefix = key[: -len("weight")]
            if value.dim() != 2:
                kind = {
                    1: "a normalisation layer's (BatchNorm, LayerNorm)",
                    3: "a convolutional layer's",
                    4: "a convolutional layer's",
                    5: "a convolutional layer's",
                }.get(value.dim(), "no nn.Linear's")
                raise WeightsError(
                    f"{name}: {key} has shape {tuple(value.shape)}, {kind}: only MLPs of nn.Linear "
                    "layers (2-D weights) with ReLU between them can be read"
                )
            prefixes.append(prefix)
        elif not (key.endswith(".bias") or key == "bias"):
            extra.append(key)
    if extra:
        raise WeightsError(
            f"{name}: {_listed(extra)} belong to no nn.Linear layer (weight, bias); only MLPs of "
            f"nn.Linear layers with ReLU between them can be read, from {_READABLE}"
        )
    if len(prefixes) > MAX_LAYERS:
        raise WeightsError(
            f"{name}: {len(prefixes)} nn.Linear layers, over the {MAX_LAYERS} this reader takes (the "
            "analyses' cost grows with the square of the depth)"
        )
    orphans = [key for key in tensors if key.endswith("bias") and key[: -len("bias")] not in prefixes]
    if orphans:
        raise WeightsError(f"{name}: {_listed(orphans)} have no weight beside them")
    if len(prefixes) < 2:
        raise WeightsError(f"{name}: {len(prefixes)} nn.Linear layer: a network with hidden units needs two or more")
    return prefixes


def _layer(tensors: dict, prefix: str, name: str, means=None) -> tuple[np.ndarray, np.ndarray]:
    weight = tensors[prefix + "weight"]
    bias = tensors.get(prefix + "bias")
    for key, tensor in ((prefix + "weight", weight), (prefix + "bias", bias)):
        if tensor is None:
            continue
        if not tensor.is_floating_point():
            raise WeightsError(f"{name}: {key} is {str(tensor.dtype).removeprefix('torch.')}, not floating point")
        if not torch.isfinite(tensor).all():
            bad = int((~torch.isfinite(tensor)).sum())
            raise WeightsError(
                f"{name}: {key} has {bad} NaN or infinite value{'s' * (bad != 1)}: a diverged "
                "network cannot be analysed"
            )
    if 0 in weight.shape:
        raise WeightsError(
            f"{name}: {prefix}weight has shape {tuple(weight.shape)}: every layer needs at least one input and one unit"
        )
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise WeightsError(
            f"{name}: {prefix}bias has shape {tuple(bias.shape)}, but {prefix}weight has {weight.shape[0]} outputs"
        )
    W = weight.detach().to(torch.float64).numpy().copy()
    b = np.zeros(W.shape[0]) if bias is None else bias.detach().to(torch.float64).numpy().copy()
    if means is not None and (W.shape != means[0].shape or b.shape != means[1].shape):
        raise WeightsError(f"{name}: {SD_PREFIX}{prefix}weight has shape {W.shape}, its mean {means[0].shape}")
    return W, b


def _chain_order(layers: list, prefixes: list[str], name: str, ordered: bool) -> list[int]:
    """An order of the layers where each one's inputs are the previous one's outputs: the file's when it is
    the model's, else the prefixes' natural order ("2.weight" before "10.weight"), else the other one. (A
    2-16-2 net chains both ways round: the order decides.)"""
    natural = sorted(range(len(layers)), key=lambda i: _natural_key(prefixes[i]))
    orders = [list(range(len(layers))), natural] if ordered else [natural, list(range(len(layers)))]
    for order in orders:
        if all(layers[a][0].shape[0] == layers[b][0].shape[1] for a, b in zip(order, order[1:])):
            return order
    shapes = ", ".join(f"{prefixes[i] or ''}weight {layers[i][0].shape}" for i in natural)
    raise WeightsError(
        f"{name}: the layers' shapes do not chain into an MLP ({shapes}): each layer's inputs must be "
        "the previous layer's outputs"
    )


def _natural_key(text: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _listed(keys, limit: int = 4) -> str:
    keys = list(keys)
    shown = ", ".join(repr(k) for k in keys[:limit])
    return shown + (f" and {len(keys) - limit} more" if len(keys) > limit else "")


def check_widths(network: Network, most: int, doing: str) -> None:
    """A network whose hidden layers have at most ``most`` units each, for an analysis (``doing``) whose cost
    grows faster than the width."""
    widest = max(network.sizes[1:-1])
    if widest > most:
        raise WeightsError(
            f"{network.name}: a hidden layer of {widest:,} units, over the {most:,} this page allows "
            f"for {doing} (its cost grows faster than the width): run it on your own machine with "
            "python -m symlab"
        )


def check_pair(a: Network, b: Network) -> None:
    """Two networks that can be aligned: the same layer sizes, both posteriors or both point estimates."""
    if a.sizes != b.sizes:
        raise WeightsError(
            f"mismatched networks: {a.name} is {'-'.join(map(str, a.sizes))}, {b.name} is "
            f"{'-'.join(map(str, b.sizes))}; alignment needs the same layer sizes"
        )
    if a.is_posterior != b.is_posterior:
        point = b.name if a.is_posterior else a.name
        raise WeightsError(f"{point} is a point estimate and the other a posterior: give two of a kind")


# ---------------------------------------------------------------------------------------------
# MNIST, for a network trained elsewhere
# ---------------------------------------------------------------------------------------------

# How MNIST pixels may have been scaled for a network trained elsewhere: the one it classifies best is used.
INPUT_SCALINGS = {
    "[0, 1]": lambda pixels: pixels / 255.0,
    "standardised": lambda pixels: (pixels / 255.0 - PIXEL_MEAN) / PIXEL_STD,
}


def is_mnist_classifier(sizes) -> bool:
    return sizes[0] == 784 and sizes[-1] == 10


SCALING_IMAGES = 1000  # test images the input scaling is chosen on: the right one is far ahead on any trained net


def mnist_accuracy(layers, mnist, count: int | None = None) -> tuple[float, str]:
    """(Test accuracy on the first ``count`` test images, the input scaling of :data:`INPUT_SCALINGS` it is
    measured with): the network's inputs must be scaled the way it was trained, so the scaling is the one it
    classifies the first :data:`SCALING_IMAGES` test images best with."""
    torch_layers = [
        (torch.as_tensor(W, dtype=torch.float32), torch.as_tensor(b, dtype=torch.float32)) for W, b in layers
    ]

    def accuracy(scaling: str, images: int | None) -> float:
        x = torch.from_numpy(INPUT_SCALINGS[scaling](np.asarray(mnist.test_images[:images], dtype=np.float32)))
        labels = torch.from_numpy(np.asarray(mnist.test_labels[:images], dtype=np.int64))
        with torch.no_grad():
            return float((mlp.forward(torch_layers, x).argmax(1) == labels).float().mean())

    chosen = min(SCALING_IMAGES, count) if count is not None else SCALING_IMAGES
    best = max((accuracy(name, chosen), name) for name in INPUT_SCALINGS)
    return (best[0] if count == chosen else accuracy(best[1], count)), best[1]


# ---------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------


def sequential_keys(n_layers: int) -> list[str]:
    """The key prefixes of nn.Sequential(Linear, ReLU, Linear, …): "0.", "2.", "4.", …"""
    return [f"{2 * index}." for index in range(n_layers)]


def posterior_tensors(means, sds=None, has_bias=None) -> dict[str, torch.Tensor]:
    """The named float32 tensors of :func:`posterior_bytes`; layers whose ``has_bias`` is False get no bias
    (a bias-free network stays one)."""
    has_bias = has_bias or (True,) * len(means)
    tensors = {}
    for prefix, (W, b), present in zip(sequential_keys(len(means)), means, has_bias):
        tensors[prefix + "weight"] = _tensor(W)
        if present:
            tensors[prefix + "bias"] = _tensor(b)
    for prefix, (W, b), present in zip(sequential_keys(len(means)), sds or [], has_bias):
        tensors[SD_PREFIX + prefix + "weight"] = _tensor(W)
        if present:
            tensors[SD_PREFIX + prefix + "bias"] = _tensor(b)
    return tensors


def _tensor(array) -> torch.Tensor:
    tensor = array.detach().cpu() if isinstance(array, torch.Tensor) else torch.from_numpy(np.asarray(array))
    return tensor.to(torch.float32).contiguous()


def posterior_bytes(means, sds=None, metadata: dict | None = None, has_bias=None) -> bytes:
    """A safetensors file of an MLP posterior: the means under nn.Sequential's keys ("0.weight", "0.bias",
    "2.weight", …), so ``nn.Sequential(nn.Linear, nn.ReLU, …).load_state_dict(tensors, strict=False)`` takes
    the mean network; the standard deviations under "sd.0.weight", …; ``metadata`` (strings) as its header's
    metadata, with the layer sizes and the format."""
    from safetensors.torch import save

    sizes = (np.shape(means[0][0])[1],) + tuple(np.shape(W)[0] for W, _ in means)
    header = {"format": FORMAT, "sizes": json.dumps(sizes)}
    header.update(
        {key: value if isinstance(value, str) else json.dumps(value) for key, value in (metadata or {}).items()}
    )
    return save(posterior_tensors(means, sds, has_bias), metadata=header)


def write_atomically(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file: a failure leaves no half-written file."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    try:
        partial.write_bytes(data)
        partial.replace(path)
    except OSError as error:
        partial.unlink(missing_ok=True)
        raise WeightsError(f"cannot write {path} ({error.strerror or error})") from None
    return path
