"""Which device computations run on, in words for the home page and the command line."""

from __future__ import annotations


def describe_device() -> str:
    import torch

    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return f"GPU: {props.name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}"
    return f"CPU ({torch.get_num_threads()} threads), torch {torch.__version__}; no CUDA GPU found"


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
