"""Results as bytes that hold data only, never code: what the shared result store keeps on disk or in
PostgreSQL (:mod:`symlab.serving.store`), which any process, or any machine of a cluster, may read back.

A result is a tree of dataclasses defined in ``symlab``, lists, tuples, dicts, numbers, strings and
arrays (numpy or torch). It is written as one JSON document describing the tree, followed by the
arrays' raw bytes. Reading it back builds only those types: a dataclass is named by its module and
class, and only a dataclass of a ``symlab`` module is accepted; an instance's attributes are restored
as they were (cached values included), without running its constructor. Anything else in a result
(a function, an object of another library) is refused when writing, with :class:`CodecError`.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import struct

import numpy as np
import torch

MAGIC = b"SYMLAB-RESULT-1\n"
_HEADER = struct.Struct("<Q")  # the JSON document's length
NUMPY_SCALARS = (np.bool_, np.integer, np.floating)


class CodecError(ValueError):
    """A result cannot be written (a type it does not know) or read back (corrupt, or not a result)."""


def encode(value) -> bytes:
    """``value`` as bytes (:func:`decode` reads them back)."""
    blobs: list[bytes] = []
    tree = _encode(value, blobs)
    offsets, position = [], 0
    for blob in blobs:
        offsets.append(position)
        position += len(blob)
    document = json.dumps({"tree": tree, "offsets": offsets, "size": position}, allow_nan=True,
                          separators=(",", ":")).encode()
    return b"".join([MAGIC, _HEADER.pack(len(document)), document, *blobs])


def decode(data: bytes):
    """The value :func:`encode` wrote; :class:`CodecError` when ``data`` is not such bytes, whole."""
    view = memoryview(data)
    if bytes(view[:len(MAGIC)]) != MAGIC:
        raise CodecError("not a SymLab result")
    start = len(MAGIC) + _HEADER.size
    try:
        (length,) = _HEADER.unpack(view[len(MAGIC):start])
        document = json.loads(bytes(view[start:start + length]))
        base, size = start + length, int(document["size"])
        if len(view) != base + size:
            raise CodecError(f"truncated or padded result: {len(view) - base} bytes of arrays, {size} expected")
        return _decode(document["tree"], view[base:], document["offsets"])
    except CodecError:
        raise
    except (struct.error, ValueError, KeyError, TypeError, IndexError, AttributeError, ImportError) as error:
        raise CodecError(f"unreadable result ({type(error).__name__}: {error})") from None


def _encode(value, blobs: list[bytes]):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return {"int": str(value)} if abs(value) > 2**53 else value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, NUMPY_SCALARS):
        return {"scalar": value.dtype.str, "value": _encode(value.item(), blobs)}
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise CodecError("an array of Python objects is not data")
        blobs.append(np.ascontiguousarray(value).tobytes())
        return {"ndarray": value.dtype.str, "shape": list(value.shape), "blob": len(blobs) - 1}
    if isinstance(value, torch.Tensor):
        array = value.detach().cpu().contiguous()
        blobs.append(array.reshape(-1).view(torch.uint8).numpy().tobytes() if array.numel() else b"")
        return {"tensor": str(array.dtype).removeprefix("torch."), "shape": list(array.shape), "blob": len(blobs) - 1}
    if isinstance(value, list):
        return [_encode(item, blobs) for item in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(item, blobs) for item in value]}
    if isinstance(value, dict):
        return {"dict": [[_encode(k, blobs), _encode(v, blobs)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        cls = type(value)
        if not cls.__module__.startswith("symlab."):
            raise CodecError(f"{cls.__module__}.{cls.__qualname__} is not a SymLab result type")
        return {"dataclass": f"{cls.__module__}:{cls.__qualname__}",
                "attributes": {name: _encode(item, blobs) for name, item in vars(value).items()}}
    raise CodecError(f"a result cannot hold a {type(value).__module__}.{type(value).__qualname__}")


def _decode(node, arrays: memoryview, offsets: list[int]):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        return [_decode(item, arrays, offsets) for item in node]
    if "int" in node:
        return int(node["int"])
    if "float" in node:
        return float(node["float"])
    if "scalar" in node:
        return np.dtype(node["scalar"]).type(_decode(node["value"], arrays, offsets))
    if "tuple" in node:
        return tuple(_decode(item, arrays, offsets) for item in node["tuple"])
    if "dict" in node:
        return {_decode(k, arrays, offsets): _decode(v, arrays, offsets) for k, v in node["dict"]}
    if "ndarray" in node:
        dtype = np.dtype(node["ndarray"])
        if dtype.hasobject:
            raise CodecError("an array of Python objects is not data")
        return np.frombuffer(_blob(node, arrays, offsets), dtype=dtype).reshape(node["shape"]).copy()
    if "tensor" in node:
        dtype = getattr(torch, node["tensor"])
        if not isinstance(dtype, torch.dtype):
            raise CodecError(f"unknown tensor type {node['tensor']!r}")
        raw = bytearray(_blob(node, arrays, offsets))
        flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        return flat.reshape(node["shape"])
    if "dataclass" in node:
        cls = _result_type(node["dataclass"])
        instance = cls.__new__(cls)
        instance.__dict__.update({name: _decode(item, arrays, offsets) for name, item in node["attributes"].items()})
        return instance
    raise CodecError(f"unknown node {sorted(node)[:3]}")


def _blob(node, arrays: memoryview, offsets: list[int]) -> memoryview:
    index = node["blob"]
    end = offsets[index + 1] if index + 1 < len(offsets) else len(arrays)
    return arrays[offsets[index]:end]


def _result_type(name: str) -> type:
    """The dataclass ``module:QualName`` of a ``symlab`` module, and nothing else."""
    module_name, _, qualname = name.partition(":")
    if not module_name.startswith("symlab.") or not qualname:
        raise CodecError(f"{name!r} is not a SymLab result type")
    found = importlib.import_module(module_name)
    for part in qualname.split("."):
        found = getattr(found, part)
    if not (isinstance(found, type) and dataclasses.is_dataclass(found)):
        raise CodecError(f"{name!r} is not a SymLab result type")
    return found
