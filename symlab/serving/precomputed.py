"""Default-link results shipped with the app, so that a server that has only just started serves
them at once instead of training first (alignment's pair and first maps, the symmetry explorer's
perceptrons).

Each lab's ``warm`` tasks (:mod:`symlab.serving.warmup`) are shipped in ``assets/precomputed/<kind>.result.xz``,
one file per kind of result (a key's first item), holding each task's key and result as data only: the
result store's codec (:mod:`symlab.serving.codec`: JSON and raw array bytes, SymLab dataclasses rebuilt
without running code), compressed by xz. No pickle is read, not even one the repository ships. A starting
server stores each result whose key is still one the page asks for (a changed default, or an
unreadable file, means the task is computed as before). ``tests/test_precomputed.py`` recomputes
every result and compares; ``python -m symlab.serving.precomputed`` rewrites the files (after a change to a
default or to the code behind it) and ``--check`` compares without writing.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import lzma
import math
import sys
from collections.abc import Hashable, Iterable
from pathlib import Path

import numpy as np

from symlab.labs import LABS
from symlab.lib.shipped import shipped
from symlab.runs.device import set_threads
from symlab.serving import shared_results
from symlab.specs.tasks import Task, kind_of

DIRECTORY = shipped("precomputed")
# Training on another machine of the same arithmetic rounds alike but for a few reductions; over thousands of
# Adam steps that moves a trained weight by far more than one rounding, but not by this much.
RELATIVE_TOLERANCE, ABSOLUTE_TOLERANCE = 1e-3, 1e-5
# Another arithmetic (other vector units: AVX-512 against AVX2) rounds every float32 sum differently, and a noisy
# training then follows another path: the weights differ throughout (by up to 0.4), the permutations found, and the
# losses along a path by up to 10 %. Between arithmetics, a result is compared by its structure alone; what the labs
# claim of such results holds over seeds (tests/test_interactions.py).

LOG = logging.getLogger("symlab.serving.precomputed")
SUFFIX = ".result.xz"


def path_of(task: Task) -> Path:
    return DIRECTORY / f"{kind_of(task.key)}{SUFFIX}"


def arithmetic() -> str:
    """This machine's floating-point arithmetic as the computations meet it: torch's and numpy's (OpenBLAS's)
    kernels, each chosen by the CPU's vector units."""
    import torch
    from threadpoolctl import threadpool_info

    blas = [
        f"{info['internal_api']} {info.get('architecture')}" for info in threadpool_info() if info.get("architecture")
    ]
    return ", ".join([f"torch {torch.backends.cpu.get_cpu_capability()}", *blas])


def write(computed: Iterable[tuple[Task, object]]) -> list[Path]:
    """Write each (task, result), one file per kind, with the arithmetic it was computed in; the files written."""
    by_path: dict[Path, list] = {}
    made_in = arithmetic()
    for task, value in computed:
        by_path.setdefault(path_of(task), []).append({"key": task.key, "value": value, "arithmetic": made_in})
    for path, entries in by_path.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(lzma.compress(_codec().encode(entries)))
    return list(by_path)


def read(task: Task):
    """The stored result of ``task``, or None where there is none for its key (a default changed since
    the file was written) or the file cannot be read (the task is then computed, as without a file)."""
    entry = read_entry(task)
    return None if entry is None else entry["value"]


def arithmetic_of(task: Task) -> str | None:
    """The arithmetic ``task``'s shipped result was computed in (:func:`arithmetic`); None where its file does not
    say (written before files said) or has no result for it."""
    entry = read_entry(task)
    return None if entry is None else entry.get("arithmetic")


def read_entry(task: Task) -> dict | None:
    """``task``'s entry in its shipped file ("key", "value", and "arithmetic" where the file says), or None."""
    path = path_of(task)
    if not path.exists():
        return None
    codec = _codec()
    try:
        entries = codec.decode(lzma.decompress(path.read_bytes()))
        found = [entry for entry in entries if entry["key"] == task.key and "value" in entry]
    except (OSError, EOFError, lzma.LZMAError, codec.CodecError, TypeError, KeyError) as error:
        # corrupt, truncated, not a list of entries, or written by code whose classes changed since
        LOG.warning("precomputed %s unreadable (%s: %s): computing it instead", path.name, type(error).__name__, error)
        return None
    if not found:
        LOG.info("precomputed %s has nothing for %r (another default): computing it instead", path.name, task.key)
        return None
    return found[0]


def _codec():
    """The result codec, imported when a file is read or written: it imports torch, which a starting server
    loads only after its workers have started (tests/test_layers.py)."""
    from symlab.serving import codec

    return codec


def store_into(results: shared_results.SharedResults, tasks: Iterable[Task]) -> list[Hashable]:
    """Store each task's shipped result in ``results``; the keys stored."""
    stored = []
    for task in tasks:
        value = read(task)
        if value is not None:
            results.remember(task.key, value)
            stored.append(task.key)
    _shipped.update(stored)
    return stored


def is_shipped(key: Hashable) -> bool:
    """Whether this server serves ``key``'s result from the shipped files (its timings are then another machine's)."""
    return key in _shipped


_shipped: set = set()


def default_tasks(hosting=None) -> list[Task]:
    return [
        task for lab in LABS if lab.tasks and lab.ships_defaults for task in lab.page_tasks(lab.default_values(hosting))
    ]


def compute(task: Task):
    """``task``'s result as a compute worker gets it (one torch thread)."""
    threads = set_threads(1)
    try:
        return task.function(*task.args, progress=lambda *args, **kwargs: None)
    finally:
        set_threads(threads)


def differences(stored, recomputed, where: str = "result", same_arithmetic: bool = True) -> list[str]:
    """Where ``recomputed`` differs from ``stored`` beyond rounding (timings aside), in words. Computed in another
    arithmetic (``same_arithmetic=False``): by its structure alone (types, fields, keys, arrays' kinds and shapes);
    its values, and the lengths of what a search found, follow the training's path."""
    import torch

    compare = functools.partial(differences, same_arithmetic=same_arithmetic)

    if isinstance(stored, torch.Tensor):
        stored, recomputed = stored.detach().numpy(), _numpy(recomputed)
    if isinstance(stored, np.ndarray):
        recomputed = _numpy(recomputed)
        same_kind = isinstance(recomputed, np.ndarray) and stored.dtype == recomputed.dtype
        if not same_kind or stored.shape != recomputed.shape:
            return [f"{where}: {_describe(stored)} stored, {_describe(recomputed)} recomputed"]
        if not same_arithmetic:
            return []
        if stored.dtype.kind in "fc":
            close = np.isclose(stored, recomputed, rtol=RELATIVE_TOLERANCE, atol=ABSOLUTE_TOLERANCE, equal_nan=True)
            if not close.all():
                largest = np.nanmax(np.abs(stored - recomputed))
                return [f"{where}: {np.count_nonzero(~close)} of {close.size} values differ, largest by {largest:.3g}"]
            return []
        return [] if np.array_equal(stored, recomputed) else [f"{where}: arrays differ"]
    if type(stored) is not type(recomputed):
        return [f"{where}: {type(stored).__name__} stored, {type(recomputed).__name__} recomputed"]
    if dataclasses.is_dataclass(stored):
        return [
            difference
            for field in dataclasses.fields(stored)
            if not _is_timing(field.name)
            for difference in compare(
                getattr(stored, field.name), getattr(recomputed, field.name), f"{where}.{field.name}"
            )
        ]
    if isinstance(stored, dict):
        if stored.keys() != recomputed.keys():
            return [f"{where}: keys {sorted(map(str, stored))} stored, {sorted(map(str, recomputed))} recomputed"]
        return [
            difference
            for key in stored
            if not _is_timing(key)
            for difference in compare(stored[key], recomputed[key], f"{where}[{key!r}]")
        ]
    if isinstance(stored, (list, tuple)):
        if not same_arithmetic and len(stored) != len(recomputed):  # a search's path, as long as it took
            return []
        if len(stored) != len(recomputed):
            return [f"{where}: {len(stored)} items stored, {len(recomputed)} recomputed"]
        return [
            difference
            for index, (a, b) in enumerate(zip(stored, recomputed))
            for difference in compare(a, b, f"{where}[{index}]")
        ]
    if isinstance(stored, float):
        if not same_arithmetic:
            return []
        same = (math.isnan(stored) and math.isnan(recomputed)) or math.isclose(
            stored, recomputed, rel_tol=RELATIVE_TOLERANCE, abs_tol=ABSOLUTE_TOLERANCE
        )
        return [] if same else [f"{where}: {stored!r} stored, {recomputed!r} recomputed"]
    if not same_arithmetic and isinstance(stored, (int, str)):
        return []
    return [] if stored == recomputed else [f"{where}: {stored!r} stored, {recomputed!r} recomputed"]


def _is_timing(name) -> bool:
    """Timings (``seconds``, ``train_seconds``, ``nets_per_second``) are never the same twice."""
    return isinstance(name, str) and name.endswith(("seconds", "per_second"))


def _numpy(value):
    import torch

    return value.detach().numpy() if isinstance(value, torch.Tensor) else value


def _name(task: Task) -> str:
    """The kind of result and what tells the kind's results apart besides the config (a map's path and point)."""
    rest = task.key[2:] if isinstance(task.key, tuple) else ()
    details = [str(item) for item in rest if isinstance(item, (str, int))]
    return " ".join([str(kind_of(task.key)), *details])


def _describe(value) -> str:
    return f"{value.dtype}{list(value.shape)}" if isinstance(value, np.ndarray) else type(value).__name__


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m symlab.serving.precomputed",
        description="Recompute the shipped default-link results and write them "
        f"to {DIRECTORY.relative_to(DIRECTORY.parents[1])}/.",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with the shipped files; write nothing (exit status 1 where one is missing or differs)",
    )
    args = parser.parse_args(argv)
    computed = [(task, compute(task)) for task in default_tasks()]
    if not args.check:
        for path in write(computed):
            print(f"{path.name}: {path.stat().st_size / 1e6:.2f} MB")
        return 0
    failed = False
    here = arithmetic()
    for task, value in computed:
        stored = read(task)
        same = arithmetic_of(task) == here
        found = ["no result for this key"] if stored is None else differences(stored, value, same_arithmetic=same)
        failed |= bool(found)
        print(f"{_name(task)}: {'; '.join(found) if found else 'matches a recomputation'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
