"""Stored results that do not read back whole, and store files that are not databases (symlab/serving/codec.py,
symlab/serving/store.py): whatever the bytes, the entry is deleted (or the file moved aside) with one warning,
reads as absent and is computed again, never shown; the decoder builds only the types the labs list."""

import dataclasses
import gc
import hashlib
import json
import logging
import lzma
import sqlite3
import sys
import threading
from contextlib import closing

import numpy as np
import pytest
import torch

from symlab.labs import LABS
from symlab.labs.symmetry import experiment as symmetry_lab
from symlab.lib import mlp
from symlab.serving import codec, precomputed, shared_results, store
from symlab.specs.tasks import Progress

KEY = ("proximity", symmetry_lab.ProximityConfig(widths=(2, 4)))
NOT_A_DATABASE = bytes(range(256)) * 64


def payload(document: str, arrays: bytes = b"") -> bytes:
    """A result's bytes around ``document``, its JSON, as :func:`codec.encode` lays them out."""
    data = document.encode()
    return codec.MAGIC + codec._HEADER.pack(len(data)) + data + arrays


def forged(tree, arrays: bytes = b"") -> bytes:
    return payload(json.dumps({"tree": tree, "offsets": [0] if arrays else [], "size": len(arrays)}), arrays)


def rows(directory) -> int:
    with closing(sqlite3.connect(directory / store.FILE_NAME)) as connection:
        return connection.execute("SELECT COUNT(*) FROM results").fetchone()[0]


def tampered(directory, data: bytes) -> store.ResultStore:
    """A store whose entry for KEY holds ``data`` under a checksum that matches: written so, not torn."""
    results = store.ResultStore(directory)
    assert results.put(KEY, "genuine")
    with closing(sqlite3.connect(directory / store.FILE_NAME)) as connection, connection:
        connection.execute("UPDATE results SET payload = ?, checksum = ?", (data, hashlib.sha256(data).hexdigest()))
    return results


def warnings_of_the_store(caplog) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == store.LOG.name and record.levelno >= logging.WARNING
    ]


def assert_deleted_and_computed_again(tmp_path, data: bytes, caplog) -> None:
    """The entry reads as absent, with one warning line, and is gone; a page asking for it computes it again."""
    results = tampered(tmp_path / "read", data)
    with caplog.at_level(logging.WARNING, logger=store.LOG.name):
        assert results.get(KEY, "absent") == "absent"
    assert rows(tmp_path / "read") == 0
    warnings = warnings_of_the_store(caplog)
    assert len(warnings) == 1 and "deleted" in warnings[0] and "\n" not in warnings[0]
    tampered(tmp_path / "page", data)
    calls = []
    page = shared_results.SharedResults(workers=0, store=store.ResultStore(tmp_path / "page"))
    assert page.compute(KEY, lambda: calls.append(1) or "computed") == "computed" and calls == [1]
    assert store.ResultStore(tmp_path / "page").get(KEY) == "computed"  # stored again, whole


# ------------------------------------------------------------------------------------------ tampered entries


def test_an_entry_nested_100_000_deep(tmp_path, caplog):
    deep = "[" * 100_000 + "]" * 100_000
    assert_deleted_and_computed_again(tmp_path, payload(f'{{"tree":{deep},"offsets":[],"size":0}}'), caplog)


@pytest.mark.parametrize(
    "tree",
    [
        {"scalar": "<f4", "value": {"int": "9" * 300}},
        {"scalar": "<f8", "value": {"int": "9" * 400}},
        {"scalar": "<i8", "value": {"int": str(2**70)}},
    ],
    ids=["float32", "float64", "int64"],
)
def test_an_entry_whose_number_overflows_its_type(tmp_path, caplog, tree):
    assert_deleted_and_computed_again(tmp_path, forged(tree), caplog)


def test_an_entry_that_exhausts_memory(tmp_path, caplog, monkeypatch):
    decode = codec._decode

    def exhausting(node, *args):
        if node == "exhausting":
            raise MemoryError
        return decode(node, *args)

    monkeypatch.setattr(codec, "_decode", exhausting)
    assert_deleted_and_computed_again(tmp_path, forged("exhausting"), caplog)


def test_an_entry_holding_a_symlab_dataclass_that_is_not_a_result(tmp_path, caplog):
    attributes = {"done": 1.0, "total": 2.0, "text": "", "payload": None}
    assert_deleted_and_computed_again(
        tmp_path, forged({"dataclass": "symlab.specs.tasks:Progress", "attributes": attributes}), caplog
    )


@pytest.mark.parametrize(
    "attributes",
    [{"sizes": {"tuple": [2, 3, 1]}, "__class__": 1}, {}],
    ids=["an attribute not a field", "a field missing"],
)
def test_an_entry_holding_a_result_type_with_other_attributes(tmp_path, caplog, attributes):
    assert_deleted_and_computed_again(
        tmp_path, forged({"dataclass": "symlab.lib.layout:Layout", "attributes": attributes}), caplog
    )


def test_an_entry_naming_the_command_line_runs_nothing(tmp_path, caplog, capsys):
    imported = "symlab.__main__" in sys.modules
    assert_deleted_and_computed_again(tmp_path, forged({"dataclass": "symlab.__main__:X", "attributes": {}}), caplog)
    assert capsys.readouterr() == ("", "")  # the command line's parser never ran
    assert ("symlab.__main__" in sys.modules) == imported


# ------------------------------------------------------------------------------------------ the decoder's bounds


def nested(depth: int):
    value = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_tree_deeper_than_the_limit_is_refused_both_ways():
    assert codec.decode(codec.encode(nested(codec.MAX_DEPTH))) == nested(codec.MAX_DEPTH)
    with pytest.raises(codec.CodecError, match="deep"):
        codec.encode(nested(codec.MAX_DEPTH + 1))
    with pytest.raises(codec.CodecError, match="deep"):
        codec.decode(forged(nested(codec.MAX_DEPTH + 1)))
    with pytest.raises(codec.CodecError, match="RecursionError"):
        codec.decode(payload('{"tree":' + "[" * 100_000 + "]" * 100_000 + ',"offsets":[],"size":0}'))


def test_a_document_past_its_cap_is_refused_both_ways(monkeypatch):
    monkeypatch.setattr(codec, "MAX_DOCUMENT_BYTES", 1000)
    with pytest.raises(codec.CodecError, match="JSON"):
        codec.encode(["x" * 2000])
    data = payload(json.dumps({"tree": ["x" * 2000], "offsets": [], "size": 0}))
    with pytest.raises(codec.CodecError, match="JSON"):
        codec.decode(data)


@pytest.mark.parametrize("dtype", ["|O", "<U4", "|S3", "|V8", "<M8[s]", "(2,)<f8", [["a", "<f8"]], 8])
def test_an_array_of_anything_but_numbers_is_refused(dtype):
    with pytest.raises(codec.CodecError, match="numeric"):
        codec.decode(forged({"ndarray": dtype, "shape": [1], "blob": 0}, bytes(16)))


@pytest.mark.parametrize(
    "value",
    [
        np.array(["text"]),
        np.zeros(2, dtype="f8,i4"),
        np.array(["2024-01-01"], "M8[D]"),
        torch.zeros(2, dtype=torch.complex64),
    ],
)
def test_an_array_of_anything_but_numbers_is_refused_when_writing(value):
    with pytest.raises(codec.CodecError):
        codec.encode(value)


@pytest.mark.parametrize("tensor", ["complex64", "quint8", "manual_seed", ["float32"]])
def test_a_tensor_of_another_type_is_refused(tensor):
    with pytest.raises(codec.CodecError, match="unknown tensor type"):
        codec.decode(forged({"tensor": tensor, "shape": [2], "blob": 0}, bytes(8)))


@pytest.mark.parametrize(
    "node",
    [
        {"ndarray": "<f8", "shape": [3], "blob": 0},
        {"ndarray": "<f8", "shape": [2**40]},
        {"tensor": "float32", "shape": [2**40], "blob": 0},
        {"ndarray": "<f8", "shape": [1]},
    ],
    ids=["short", "huge array", "huge tensor", "long"],
)
def test_an_arrays_bytes_are_exactly_its_shapes(node):
    with pytest.raises(codec.CodecError, match="bytes"):
        codec.decode(forged({"blob": 0, **node}, bytes(16)))


def test_a_dict_key_that_cannot_be_one_is_refused():
    with pytest.raises(codec.CodecError, match="dict key"):
        codec.decode(forged({"dict": [[[1, 2], "value"]]}))


@pytest.mark.parametrize(
    "tree",
    [
        {"int": 12},
        {"float": "1e5"},
        {"int": "1", "dict": []},
        {"tuple": "ab"},
        {"dict": [[1]]},
        {"scalar": "<f8", "value": [1.0]},
    ],
)
def test_a_node_not_as_written_is_refused(tree):
    with pytest.raises(codec.CodecError):
        codec.decode(forged(tree))


def test_only_the_listed_types_are_written_with_their_fields_and_cached_values():
    layout = mlp.Layout((2, 3, 1))
    assert layout.offsets  # a functools.cached_property: kept as it was
    back = codec.decode(codec.encode(layout))
    assert back.sizes == (2, 3, 1) and "offsets" in vars(back) and back.offsets == layout.offsets
    with pytest.raises(codec.CodecError, match="Lab.results"):
        codec.encode(Progress())  # a dataclass of symlab, but no lab's result
    stray = mlp.Layout((2, 3, 1))
    stray.__dict__["note"] = "set by hand"
    with pytest.raises(codec.CodecError, match="not its fields"):
        codec.encode(stray)


@pytest.mark.parametrize("path", sorted(precomputed.DIRECTORY.glob(f"*{precomputed.SUFFIX}")), ids=lambda p: p.name)
def test_every_shipped_result_decodes(path):
    entries = codec.decode(lzma.decompress(path.read_bytes()))
    # "arithmetic": the machine's floating-point arithmetic the result was computed in, where the file says.
    assert entries and all({"key", "value"} <= entry.keys() <= {"key", "value", "arithmetic"} for entry in entries)


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.name)
def test_each_labs_result_types_are_dataclasses_named_as_they_are(lab):
    for name, found in zip(lab.results, lab.result_types(), strict=True):
        assert dataclasses.is_dataclass(found) and isinstance(found, type)
        assert f"{found.__module__}:{found.__qualname__}" == name


# ------------------------------------------------------------------------------------------ corrupt store files


def store_file(directory) -> bytes:
    """A store holding KEY among twenty other results, its journal folded into the file: the file's bytes."""
    results = store.ResultStore(directory)
    for index in range(20):
        assert results.put(("filler", index), np.full(2000, float(index)))
    assert results.put(KEY, "genuine")
    del results  # and with it this thread's connection
    gc.collect()
    with closing(sqlite3.connect(directory / store.FILE_NAME)) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return (directory / store.FILE_NAME).read_bytes()


CORRUPTIONS = {
    "garbage": lambda data: NOT_A_DATABASE,
    "truncated": lambda data: data[: len(data) // 2],
    "zero-length": lambda data: b"",
}


def corrupted(directory, corruption: str) -> bytes:
    """The store file in ``directory`` made ``corruption``, its journal gone with it: the bytes now there."""
    broken = CORRUPTIONS[corruption](store_file(directory))
    for suffix in ("-wal", "-shm"):
        (directory / f"{store.FILE_NAME}{suffix}").unlink(missing_ok=True)
    (directory / store.FILE_NAME).write_bytes(broken)
    return broken


def moved_aside(directory) -> list:
    return sorted(
        path for path in directory.glob(f"{store.FILE_NAME}.corrupt-*") if not path.name.endswith(("-wal", "-shm"))
    )


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_corrupt_store_file_is_moved_aside_and_begun_afresh(tmp_path, caplog, corruption):
    broken = corrupted(tmp_path, corruption)
    registry = tmp_path / "registry.sqlite3"  # the run registry's, beside it: runs are never thrown away
    registry.write_bytes(NOT_A_DATABASE)
    results = store.ResultStore(tmp_path)
    with caplog.at_level(logging.WARNING, logger=store.LOG.name):
        assert results.get(KEY, "absent") == "absent"
    if corruption == "zero-length":  # to SQLite an empty database: nothing to move
        assert moved_aside(tmp_path) == [] and warnings_of_the_store(caplog) == []
    else:
        assert [path.read_bytes() for path in moved_aside(tmp_path)] == [broken]
        warnings = warnings_of_the_store(caplog)
        assert len(warnings) == 1 and "moved to" in warnings[0]
    assert registry.read_bytes() == NOT_A_DATABASE
    assert results.put(KEY, "fresh") and results.get(KEY) == "fresh"
    assert store.ResultStore(tmp_path).get(KEY) == "fresh"
    corrupted(tmp_path / "page", corruption)
    calls = []
    page = shared_results.SharedResults(workers=0, store=store.ResultStore(tmp_path / "page"))
    assert page.compute(KEY, lambda: calls.append(1) or "computed") == "computed" and calls == [1]
    assert store.ResultStore(tmp_path / "page").get(KEY) == "computed"


def test_a_write_to_a_corrupt_store_file_lands_in_the_fresh_one(tmp_path):
    corrupted(tmp_path, "garbage")
    results = store.ResultStore(tmp_path)
    assert results.put(KEY, "computed")
    assert len(moved_aside(tmp_path)) == 1 and results.get(KEY) == "computed"


def test_every_thread_and_process_follows_the_store_to_its_fresh_file(tmp_path):
    store_file(tmp_path)
    results, elsewhere = store.ResultStore(tmp_path), store.ResultStore(tmp_path)  # as another process's
    opened = threading.Event()
    moved = threading.Event()
    outcome = {}

    def other_thread():
        outcome["before"] = results.get(KEY)  # this thread's connection, kept open
        opened.set()
        moved.wait(timeout=60)
        outcome["put"] = results.put(("other thread",), 1)

    thread = threading.Thread(target=other_thread)
    thread.start()
    assert opened.wait(timeout=60) and elsewhere.get(KEY) == "genuine"
    (tmp_path / store.FILE_NAME).write_bytes(NOT_A_DATABASE)  # corrupt under both open connections
    assert store.ResultStore(tmp_path).get(KEY, "absent") == "absent"  # a new connection finds it, moves it
    moved.set()
    thread.join(timeout=60)
    assert outcome == {"before": "genuine", "put": True}
    assert elsewhere.put(("other process",), 2)
    fresh = store.ResultStore(tmp_path)
    assert fresh.get(("other thread",)) == 1 and fresh.get(("other process",)) == 2
    assert len(moved_aside(tmp_path)) == 1  # moved once: the fresh file is never taken for the corrupt one
