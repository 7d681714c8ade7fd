"""Which device computations run on, in words for the home page and the command line; a process's thread count;
and what one core of this machine does per second (:class:`~symlab.specs.tasks.Rates`)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from symlab.specs.tasks import Rates


def cpu_threads() -> str:
    """ "CPU (n threads)", the threads torch computes with here."""
    import torch

    count = torch.get_num_threads()
    return f"CPU ({count} thread{'' if count == 1 else 's'})"


def describe_device() -> str:
    import torch

    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return f"GPU: {props.name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}"
    return f"{cpu_threads()}, torch {torch.__version__}; no CUDA GPU found"


def device_name(kind: str) -> str:
    """The device of ``kind`` ("cuda" or "cpu") a run trains on here, named, for its record."""
    import torch

    if kind == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        return f"GPU: {props.name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}"
    return f"{cpu_threads()}, torch {torch.__version__}"


def set_threads(count: int) -> int:
    """Compute with ``count`` threads, torch's and the BLAS numpy multiplies matrices with (they are separate
    pools: a cap on one leaves the other at every core); returns torch's count before. ``count`` 0: torch's
    and the BLAS's own defaults (every core)."""
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    if count > 0:
        torch.set_num_threads(count)
    threadpool_limits(limits=count if count > 0 else None, user_api="blas")
    return before


def measured_rates(repeats: int = 5) -> Rates:
    """:class:`Rates` measured here, the best of ``repeats`` tries of each (a few tens of milliseconds)."""
    import numpy as np
    import torch

    threads = set_threads(1)
    try:
        a, b = torch.randn(512, 512), torch.randn(512, 512)
        big, out = torch.randn(4_000_000), torch.empty(4_000_000)
        generator = torch.Generator().manual_seed(0)
        an, bn = a.numpy(), b.numpy()
        matmul = max(
            2
            * 512**3
            / min(_best_seconds(lambda: torch.mm(a, b), repeats), _best_seconds(lambda: np.matmul(an, bn), repeats)),
            1.0,
        )
        elementwise = 2 * big.numel() / _best_seconds(lambda: torch.add(big, 1.0, out=out), repeats)
        normals = big.numel() / _best_seconds(lambda: torch.randn(big.shape, generator=generator, out=out), repeats)
    finally:
        set_threads(threads)
    return Rates(matmul, elementwise, normals)


@functools.cache
def machine_rates() -> Rates:
    """:func:`measured_rates`, once per process: what the caps on a run's CPU time estimate it with."""
    return measured_rates()


def _best_seconds(function: Callable, repeats: int) -> float:
    function()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append(time.perf_counter() - started)
    return max(min(times), 1e-9)
