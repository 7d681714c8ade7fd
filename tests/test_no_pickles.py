"""No code path of the app unpickles what it reads: every call that could (pickle and its relatives,
torch.load, numpy's and pandas' loaders) is found in the source and checked for the data-only form."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APP_SOURCES = sorted(
    [*ROOT.joinpath("symlab").rglob("*.py"), *ROOT.joinpath("views").rglob("*.py"), ROOT / "app.py", ROOT / "serve.py"]
)

# Modules whose loaders run code from the bytes they read, whatever their arguments.
UNPICKLING_MODULES = {"pickle", "cPickle", "_pickle", "cloudpickle", "dill", "joblib", "shelve", "marshal"}
UNPICKLING_CALLS = {"load", "loads", "Unpickler", "open", "read_pickle"}


def dotted(node) -> str:
    """``a.b.c`` for an attribute chain, '' for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def keyword(call: ast.Call, name: str):
    for item in call.keywords:
        if item.arg == name:
            return item.value.value if isinstance(item.value, ast.Constant) else "not a constant"
    return None


def unsafe_loads(source: str, filename: str = "<source>") -> list[str]:
    """Each call in ``source`` that may unpickle: ``file:line: call``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            imported = [alias.name for alias in node.names] if isinstance(node, ast.ImportFrom) else []
            if any(name.split(".")[0] in UNPICKLING_MODULES - {"pickle"} for name in names) or (
                isinstance(node, ast.ImportFrom) and node.module == "pickle" and set(imported) & UNPICKLING_CALLS
            ):
                found.append(f"{filename}:{node.lineno}: imports an unpickler")
        if not isinstance(node, ast.Call):
            continue
        name = dotted(node.func)
        module, _, function = name.rpartition(".")
        if module.split(".")[0] in UNPICKLING_MODULES and function in UNPICKLING_CALLS:
            found.append(f"{filename}:{node.lineno}: {name}")
        elif function == "load" and module == "torch" and keyword(node, "weights_only") is not True:
            found.append(f"{filename}:{node.lineno}: torch.load without weights_only=True")
        elif function == "load" and module in ("np", "numpy") and keyword(node, "allow_pickle") not in (None, False):
            found.append(f"{filename}:{node.lineno}: {name} with allow_pickle")
        elif function == "read_pickle":
            found.append(f"{filename}:{node.lineno}: {name}")
    return found


def test_the_app_reads_no_pickle():
    assert len(APP_SOURCES) > 50
    found = [line for path in APP_SOURCES for line in unsafe_loads(path.read_text(), str(path.relative_to(ROOT)))]
    assert found == []


@pytest.mark.parametrize(
    "source",
    [
        "import pickle\npickle.loads(data)",
        "import pickle\nwith open(p, 'rb') as f:\n    pickle.load(f)",
        "from pickle import loads",
        "import torch\ntorch.load(path)",
        "import torch\ntorch.load(path, weights_only=False)",
        "import numpy as np\nnp.load(path, allow_pickle=True)",
        "import pandas as pd\npd.read_pickle(path)",
        "import joblib\njoblib.load(path)",
        "import shelve\nshelve.open(path)",
    ],
)
def test_the_scan_finds_each_way_to_unpickle(source):
    assert unsafe_loads(source)


@pytest.mark.parametrize(
    "source",
    [
        "import torch\ntorch.load(path, map_location='cpu', weights_only=True)",
        "import numpy as np\nnp.load(path, allow_pickle=False)",
        "import pickle\ntry:\n    pass\nexcept pickle.UnpicklingError:\n    pass",
    ],
)
def test_the_scan_passes_data_only_loads(source):
    assert unsafe_loads(source) == []
