"""Results as bytes that hold data only, never code: what the shared result store keeps on disk or in
PostgreSQL (:mod:`symlab.serving.store`), which any process, or any machine of a cluster, may read back.

A result is a tree of lists, tuples, dicts, numbers, strings, numeric arrays (numpy or torch) and the
dataclasses the labs list as their results (:attr:`symlab.specs.lab.Lab.results`). It is written as one JSON
document describing the tree, followed by the arrays' raw bytes. Reading it back builds only those types: a
dataclass is named by its module and class, and the name must be one a lab lists, so that stored bytes can
only choose among types the code names (they never name a module to import). An instance's attributes are its
class's fields, all of them, and besides them only the values it caches (a ``functools.cached_property``);
they are restored as they were, without running its constructor.

Reading is bounded, whatever the bytes: the JSON document's length (:data:`MAX_DOCUMENT_BYTES`), the tree's
depth (:data:`MAX_DEPTH`), numeric dtypes only (no objects, strings, records or dates), each array's bytes
exactly its shape's, hashable dict keys. Any bytes that are not such a result, whatever they make the reader
do (a JSON document too deep to parse, a number past its type's range, memory), raise :class:`CodecError`.
Writing refuses, with :class:`CodecError`, anything that could not be read back: a function, an object of
another library, a dataclass no lab lists, an array of strings, a tree deeper than the limit.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import struct
from typing import Any

import numpy as np
import torch

from symlab import labs
from symlab.specs.lab import part

MAGIC = b"SYMLAB-RESULT-1\n"
_HEADER = struct.Struct("<Q")  # the JSON document's length
NUMPY_SCALARS = (np.bool_, np.integer, np.floating)
MAX_DEPTH = 64  # containers and dataclasses inside one another (the shipped results go 9 deep)
MAX_DOCUMENT_BYTES = 16 * 2**20  # the tree without its arrays (the shipped results' is under 10 kB)
NUMERIC_KINDS = "biufc"  # numpy's bool, signed, unsigned, floating and complex dtypes
TENSOR_TYPES = {
    name: getattr(torch, name)
    for name in ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")
}
NON_FINITE = ("nan", "inf", "-inf")


class CodecError(ValueError):
    """A result cannot be written (a type it does not know) or read back (corrupt, or not a result)."""


# ------------------------------------------------------------------------------------------ writing


def encode(value) -> bytes:
    """``value`` as bytes (:func:`decode` reads them back)."""
    blobs: list[bytes] = []
    tree = _encode(value, blobs, 0)
    offsets, position = [], 0
    for blob in blobs:
        offsets.append(position)
        position += len(blob)
    document = json.dumps(
        {"tree": tree, "offsets": offsets, "size": position}, allow_nan=True, separators=(",", ":")
    ).encode()
    if len(document) > MAX_DOCUMENT_BYTES:
        raise CodecError(f"a result's tree takes {len(document)} bytes of JSON, more than {MAX_DOCUMENT_BYTES}")
    return b"".join([MAGIC, _HEADER.pack(len(document)), document, *blobs])


def _encode(value, blobs: list[bytes], depth: int):
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return {"int": str(value)} if abs(value) > 2**53 else value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, NUMPY_SCALARS):
        return {"scalar": _numeric_dtype(value.dtype.str).str, "value": _encode(value.item(), blobs, _deeper(depth))}
    if isinstance(value, np.ndarray):
        dtype = _numeric_dtype(value.dtype.str)
        blobs.append(np.ascontiguousarray(value).tobytes())
        return {"ndarray": dtype.str, "shape": list(value.shape), "blob": len(blobs) - 1}
    if isinstance(value, torch.Tensor):
        name = str(value.dtype).removeprefix("torch.")
        if name not in TENSOR_TYPES:
            raise CodecError(f"a tensor of {name} is not numeric data")
        array = value.detach().cpu().contiguous()
        blobs.append(array.reshape(-1).view(torch.uint8).numpy().tobytes() if array.numel() else b"")
        return {"tensor": name, "shape": list(array.shape), "blob": len(blobs) - 1}
    inner = _deeper(depth)
    if isinstance(value, list):
        return [_encode(item, blobs, inner) for item in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(item, blobs, inner) for item in value]}
    if isinstance(value, dict):
        return {"dict": [[_encode(k, blobs, inner), _encode(v, blobs, inner)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        attributes = vars(value)
        _check_attributes(type(value), attributes)
        return {
            "dataclass": _listed_name(type(value)),
            "attributes": {name: _encode(item, blobs, inner) for name, item in attributes.items()},
        }
    raise CodecError(f"a result cannot hold a {type(value).__module__}.{type(value).__qualname__}")


def _listed_name(cls: type) -> str:
    """``cls`` as ``module:QualName``, where a lab lists it among its results (what :func:`decode` builds back)."""
    name = f"{cls.__module__}:{cls.__qualname__}"
    if name not in _listed_names() or part(name) is not cls:
        raise CodecError(f"{name} is not a result type a lab lists (Lab.results)")
    return name


# ------------------------------------------------------------------------------------------ reading


def decode(data: bytes):
    """The value :func:`encode` wrote; :class:`CodecError` when ``data`` is not such bytes, whole."""
    view = memoryview(data)
    if bytes(view[: len(MAGIC)]) != MAGIC:
        raise CodecError("not a SymLab result")
    start = len(MAGIC) + _HEADER.size
    try:
        (length,) = _HEADER.unpack(view[len(MAGIC) : start])
        if length > MAX_DOCUMENT_BYTES:
            raise CodecError(f"a tree of {length} bytes of JSON, more than {MAX_DOCUMENT_BYTES}")
        document = json.loads(bytes(view[start : start + length]))
        return _decode(_tree(document), _blobs(document, view[start + length :]), 0)
    except CodecError:
        raise
    except Exception as error:  # the bytes come from outside: whatever they make the reader do means unreadable
        raise CodecError(f"unreadable result ({type(error).__name__}: {str(error)[:200]})") from None


def _tree(document):
    if not isinstance(document, dict) or document.keys() != {"tree", "offsets", "size"}:
        raise CodecError("not a result's document")
    return document["tree"]


def _blobs(document: dict, arrays: memoryview) -> list[memoryview]:
    """Each array's bytes: the document's offsets, in order, within ``size``, which is all the bytes there are."""
    offsets, size = document["offsets"], document["size"]
    if not (_is_count(size) and isinstance(offsets, list) and all(map(_is_count, offsets))):
        raise CodecError("the arrays' offsets are not counts")
    if len(arrays) != size:
        raise CodecError(f"truncated or padded result: {len(arrays)} bytes of arrays, {size} expected")
    ends = [*offsets[1:], size]
    if any(start > end for start, end in zip(offsets, ends)):
        raise CodecError("the arrays' offsets are out of order")
    return [arrays[start:end] for start, end in zip(offsets, ends)]


def _decode(node, blobs: list[memoryview], depth: int):
    if node is None or isinstance(node, (bool, int, float, str)):
        return node
    if isinstance(node, list):
        inner = _deeper(depth)
        return [_decode(item, blobs, inner) for item in node]
    form = _FORMS.get(frozenset(node)) if isinstance(node, dict) else None
    if form is None:
        raise CodecError(f"unknown node {sorted(map(str, node))[:3] if isinstance(node, dict) else type(node)}")
    return form(node, blobs, depth)


def _deeper(depth: int) -> int:
    """The depth inside one more container; a tree past :data:`MAX_DEPTH` is refused, before Python's own limit."""
    if depth >= MAX_DEPTH:
        raise CodecError(f"a result nested more than {MAX_DEPTH} deep")
    return depth + 1


def _big_int(node, blobs, depth) -> int:
    if not isinstance(node["int"], str):
        raise CodecError("a whole number's digits are not text")
    return int(node["int"])


def _non_finite(node, blobs, depth) -> float:
    if node["float"] not in NON_FINITE:
        raise CodecError("a non-finite number that is not nan or ±inf")
    return float(node["float"])


def _scalar(node, blobs, depth):
    dtype = _numeric_dtype(node["scalar"])
    number = _decode(node["value"], blobs, _deeper(depth))
    if type(number) not in (bool, int, float):
        raise CodecError("a numpy scalar's value is not a number")
    with np.errstate(over="raise", invalid="raise"):  # a value past its dtype's range is not what was written
        return dtype.type(number)


def _tuple(node, blobs, depth) -> tuple:
    if not isinstance(node["tuple"], list):
        raise CodecError("a tuple's items are not a list")
    inner = _deeper(depth)
    return tuple(_decode(item, blobs, inner) for item in node["tuple"])


def _dict(node, blobs, depth) -> dict:
    pairs = node["dict"]
    if not (isinstance(pairs, list) and all(isinstance(pair, list) and len(pair) == 2 for pair in pairs)):
        raise CodecError("a dict's items are not pairs")
    inner = _deeper(depth)
    found = {}
    for key, value in pairs:
        key = _decode(key, blobs, inner)
        try:
            hash(key)
        except TypeError:
            raise CodecError(f"a dict key that cannot be one: a {type(key).__name__}") from None
        found[key] = _decode(value, blobs, inner)
    return found


def _ndarray(node, blobs, depth) -> np.ndarray:
    dtype, shape = _numeric_dtype(node["ndarray"]), _shape(node["shape"])
    raw = _blob(node, blobs, math.prod(shape) * dtype.itemsize)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _tensor(node, blobs, depth) -> torch.Tensor:
    dtype = TENSOR_TYPES.get(node["tensor"]) if isinstance(node["tensor"], str) else None
    if dtype is None:
        raise CodecError(f"unknown tensor type {str(node['tensor'])[:50]!r}")
    shape = _shape(node["shape"])
    raw = bytearray(_blob(node, blobs, math.prod(shape) * dtype.itemsize))
    flat = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
    return flat.reshape(shape)


def _dataclass(node, blobs, depth):
    cls, attributes = _result_type(node["dataclass"]), node["attributes"]
    if not isinstance(attributes, dict):
        raise CodecError("a dataclass's attributes are not named")
    _check_attributes(cls, attributes)
    inner = _deeper(depth)
    instance: Any = object.__new__(cls)  # as a dataclass's own __new__, without its __init__
    instance.__dict__.update({name: _decode(item, blobs, inner) for name, item in attributes.items()})
    return instance


# Each node that is a JSON object, by its keys.
_FORMS = {
    frozenset(("int",)): _big_int,
    frozenset(("float",)): _non_finite,
    frozenset(("scalar", "value")): _scalar,
    frozenset(("tuple",)): _tuple,
    frozenset(("dict",)): _dict,
    frozenset(("ndarray", "shape", "blob")): _ndarray,
    frozenset(("tensor", "shape", "blob")): _tensor,
    frozenset(("dataclass", "attributes")): _dataclass,
}


def _is_count(value) -> bool:
    return type(value) is int and value >= 0


def _shape(shape) -> tuple[int, ...]:
    if not (isinstance(shape, list) and all(map(_is_count, shape))):
        raise CodecError("an array's shape is not a list of sizes")
    return tuple(shape)


def _blob(node, blobs: list[memoryview], size: int) -> memoryview:
    """The array's bytes, exactly ``size`` of them (its shape times its item's size)."""
    index = node["blob"]
    if not (_is_count(index) and index < len(blobs)):
        raise CodecError("an array's bytes are not among the result's")
    if len(blobs[index]) != size:
        raise CodecError(f"an array of {len(blobs[index])} bytes where its shape takes {size}")
    return blobs[index]


def _numeric_dtype(text) -> np.dtype:
    """The numpy dtype ``text`` names (as ``dtype.str`` writes it), if a plain number's: no objects, strings,
    records, dates or sub-arrays."""
    dtype = np.dtype(text) if isinstance(text, str) else None
    if dtype is None or dtype.kind not in NUMERIC_KINDS or dtype.fields is not None or dtype.subdtype is not None:
        raise CodecError(f"{str(text)[:50]!r} is not a numeric dtype (no objects, strings or records)")
    return dtype


# ------------------------------------------------------------------------------------------ result types


def _listed_names() -> set[str]:
    """Every lab's result types, by name: read at each use, so that a lab added to the registry counts."""
    return {name for lab in labs.LABS for name in lab.results}


def _result_type(name) -> type:
    """The dataclass ``name`` (``module:QualName``) where a lab lists it; for any other name nothing is imported."""
    if not isinstance(name, str) or name not in _listed_names():
        raise CodecError(f"{str(name)[:100]!r} is not a SymLab result type")
    found = part(name)
    if not (isinstance(found, type) and dataclasses.is_dataclass(found)):
        raise CodecError(f"{name!r} is not a SymLab result type")
    return found


def _check_attributes(cls: type, names) -> None:
    """Every field of ``cls``, and besides them only the values it caches (a ``functools.cached_property``'s)."""
    fields = {field.name for field in dataclasses.fields(cls)}
    missing, unknown = fields - set(names), set(names) - fields - _cached_names(cls)
    if missing or unknown:
        raise CodecError(
            f"{cls.__qualname__}'s attributes are not its fields: missing {sorted(missing)[:5]}, "
            f"unknown {[str(name)[:50] for name in sorted(unknown)[:5]]}"
        )


@functools.cache
def _cached_names(cls: type) -> frozenset[str]:
    return frozenset(
        name
        for klass in cls.__mro__
        for name, member in vars(klass).items()
        if isinstance(member, functools.cached_property)
    )
