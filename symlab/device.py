"""Which device computations run on, in words for the home page and the command line."""

from __future__ import annotations

import sys


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

    before = torch.get_num_threads()
    if count > 0:
        torch.set_num_threads(count)
    _blas_controller().limit(limits=count if count > 0 else None, user_api="blas")
    return before


_blas = {"modules": -1, "controller": None}


def _blas_controller():
    """The BLAS libraries the process has loaded (threadpoolctl scans every loaded library, a few milliseconds,
    and every page run sets the threads): scanned again only after an import, which is what loads a new
    one (scipy brings its own)."""
    import numpy  # noqa: F401  (its BLAS, in the first scan)
    from threadpoolctl import ThreadpoolController

    if _blas["modules"] != len(sys.modules):
        _blas["controller"], _blas["modules"] = ThreadpoolController(), len(sys.modules)
    return _blas["controller"]
