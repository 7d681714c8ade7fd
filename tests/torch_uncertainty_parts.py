"""Parts of torch-uncertainty (Laurent et al.'s library) as independent checks. Its package's __init__ imports
Lightning and torchvision, which SymLab does not install, and which the parts used here do not need: the
packages above a part are entered as bare namespaces while it is imported, then taken out again."""

import contextlib
import importlib
import importlib.util
import sys
import types
from pathlib import Path


def torch_uncertainty_part(module: str):
    """``torch_uncertainty.<module>`` (e.g. ``metrics.classification``), imported without the package's own
    __init__ files."""
    root = Path(importlib.util.find_spec("torch_uncertainty").submodule_search_locations[0])
    parents = module.split(".")[:-1]
    names = ["torch_uncertainty", *(f"torch_uncertainty.{'.'.join(parents[: i + 1])}" for i in range(len(parents)))]
    with _bare_packages(names, root):
        return importlib.import_module(f"torch_uncertainty.{module}")


@contextlib.contextmanager
def _bare_packages(names, root: Path):
    saved = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "torch_uncertainty"}
    for name in names:
        package = types.ModuleType(name)
        package.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
        sys.modules[name] = package
    try:
        yield
    finally:
        for name in names:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
