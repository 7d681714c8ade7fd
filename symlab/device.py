"""Which device computations run on, in words for the home page and the command line."""

from __future__ import annotations


def describe_device() -> str:
    import torch

    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return f"GPU: {props.name} ({props.total_memory / 2**30:.0f} GiB), torch {torch.__version__}"
    return f"CPU ({torch.get_num_threads()} threads), torch {torch.__version__}; no CUDA GPU found"
