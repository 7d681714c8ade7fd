"""The layers of the code (``[tool.importlinter]`` in ``pyproject.toml``): imports run one way, no module imports
itself back through others, and no import hides inside a function to dodge either rule."""

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
# Imports inside functions that are there for a reason other than a cycle: an optional dependency, loaded only
# where it is used; torch, which a starting server loads only after it has started its compute workers.
LAZY_FOR_A_REASON = {"symlab.runs.ray_cluster": "imports ray, needed only by runs and results on a Ray cluster"}
LAZY_IN = {
    ("symlab/serving/shared_results.py", "symlab.serving.store.ResultStore"): "its codec imports torch",
    ("symlab/serving/warmup.py", "symlab.labs.toy.experiment"): "imports torch",
    ("symlab/serving/warmup.py", "symlab.lib.two_relu"): "imports torch",
    ("symlab/serving/precomputed.py", "symlab.serving.codec"): "imports torch",
    # The findings' sources load torch; a page reads only their shipped numbers.
    ("symlab/labs/symmetry/findings.py", "symlab.labs.symmetry.experiment.perceptron_task"): "imports torch",
    ("symlab/labs/align/findings.py", "symlab.labs.align.experiment.alignment_task"): "imports torch",
    ("symlab/labs/methods/findings.py", "symlab.labs.methods.experiment"): "imports torch",
    # The command line parses with the labs' configs, free of numpy and torch; a computation loads them when it runs
    # (tests/test_cli_speed.py holds --help under its budget).
    **{
        (f"symlab/cli/{lab}.py", f"symlab.labs.{lab}.experiment"): "imports torch: parsing needs only the config"
        for lab in ("toy", "symmetry", "align", "methods", "modes")
    },
    ("symlab/cli/toy.py", "symlab.lib.two_relu"): "imports torch: parsing needs only the config",
    # numpy too waits for a computation: --help and parsing load none.
    **{
        (f"symlab/cli/{cli}.py", "symlab.specs.surfaces"): "imports numpy: a computed landscape"
        for cli in ("toy", "align", "common")
    },
    ("symlab/cli/common.py", "symlab.lib.mnist_data.load_mnist"): "imports numpy: the digits",
    ("symlab/cli/mnist.py", "symlab.lib.mnist_data"): "imports numpy: checking the files",
    ("symlab/cli/serve.py", "symlab.serving.warmup"): "imports every lab and numpy: parsing needs none",
    ("symlab/cli/mnist.py", "symlab.labs.mnist.experiment.resolve_device"): "imports torch: the device",
    ("symlab/cli/mnist.py", "symlab.labs.mnist.experiment.exported_run"): "imports torch: the file's tensors",
    ("symlab/cli/methods.py", "symlab.labs.methods.experiment.checkpoint_set"): "imports torch: the tensors",
    ("symlab/cli/methods.py", "symlab.labs.methods.experiment.hmc_draw_set"): "imports torch: the tensors",
    **{
        (f"symlab/cli/{lab}.py", "symlab.lib.weights"): "imports torch: a network file's tensors"
        for lab in ("symmetry", "align", "mnist", "methods")
    },
    ("symlab/labs/methods/config.py", "symlab.lib.networks"): "imports torch: the settings alone do not",
    ("symlab/labs/methods/config.py", "symlab.lib.ensembles"): "imports torch: the settings alone do not",
    ("symlab/specs/hmc.py", "symlab.lib.hmc.HmcSettings"): "imports torch: the settings alone do not",
}


def cycles(graph) -> list[set[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(component)

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_the_layers_contract_is_kept_with_no_exceptions():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert all(not {"ignore_imports", "unmatched_ignore_imports_alerting"} & set(c) for c in config["contracts"])
    # In its own process, as `lint-imports` runs: its command configures logging, which would silence this one's.
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        f"sys.exit(lint_imports(config_filename={str(ROOT / 'pyproject.toml')!r}, no_cache=True, no_logo=True))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_module_imports_itself_back():
    graph = grimp.build_graph("symlab", "views", cache_dir=None)
    assert cycles(graph) == []


def test_a_cycle_is_found(tmp_path, monkeypatch):
    """The check above can fail: a package whose modules import each other in a ring is caught."""
    package = tmp_path / "ringed"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from ringed import b\n")
    (package / "b.py").write_text("def f():\n    from ringed import c\n")  # hidden in a function: still an import
    (package / "c.py").write_text("import ringed.a\n")
    (package / "d.py").write_text("from ringed import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert cycles(grimp.build_graph("ringed", cache_dir=None)) == [{"ringed.a", "ringed.b", "ringed.c"}]


def function_level_imports(path: Path) -> list[str]:
    """The modules of this project imported inside a function of ``path``."""
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = []
    for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        for node in ast.walk(function):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(
                        package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                    )
                names = [f"{base}.{alias.name}" for alias in node.names]  # a module, or a name in one
                found += [name for name in names if name.split(".")[0] in ("symlab", "views")]
            elif isinstance(node, ast.Import):
                found += [alias.name for alias in node.names if alias.name.split(".")[0] in ("symlab", "views")]
    return found


@pytest.mark.parametrize(
    "path",
    sorted(p.relative_to(ROOT).as_posix() for folder in ("symlab", "views") for p in (ROOT / folder).rglob("*.py")),
)
def test_no_import_hides_in_a_function(path):
    hidden = [
        name
        for name in function_level_imports(ROOT / path)
        if not any(name == lazy or name.startswith(f"{lazy}.") for lazy in LAZY_FOR_A_REASON)
        and (path, name) not in LAZY_IN
    ]
    assert hidden == [], f"{path}: import at the top of the module (a function-level import dodges the layers)"


def test_one_chart_stack_per_job():
    """2-D charts are Vega-Lite (Altair); 3-D landscapes are drawn by Streamlit's own Plotly, through one module
    (views/common/surfaces.py), which no other view bypasses; the app installs no Plotly of its own."""
    sources = [p for folder in ("symlab", "views") for p in (ROOT / folder).rglob("*.py")] + [ROOT / "app.py"]
    drawing = [
        p.relative_to(ROOT).as_posix()
        for p in sources
        if "plotly_chart" in p.read_text() or "import plotly" in p.read_text() or "Plotly.react" in p.read_text()
    ]
    assert drawing == ["views/common/surfaces.py"]
    assert "plotly_chart" not in (ROOT / drawing[0]).read_text()  # it remounts on every new figure
    assert "plotly" not in (ROOT / "pyproject.toml").read_text().lower()
    three_d = [p.relative_to(ROOT).as_posix() for p in sources if "surfaces.surface_chart(" in p.read_text()]
    assert sorted(three_d) == ["views/align.py", "views/modes.py", "views/toy.py"]


def test_a_starting_server_loads_torch_after_it_starts_its_workers():
    """serve.py imports the warm-up; torch loads in its lifespan, after the compute workers have started (they
    load it on the other core meanwhile)."""
    code = "import sys, symlab.serving.warmup; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.stdout.strip() == "False", result.stderr
