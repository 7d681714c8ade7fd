"""Each lab names its parts as "module:attribute" strings (symlab.specs.lab), which no type checker reads: every
reference resolves, and to a part of the kind its field says."""

import dataclasses
import inspect
from pathlib import Path

import pytest

from symlab.labs import LABS
from symlab.specs.lab import Lab, part
from symlab.specs.presets import Presets
from symlab.specs.run_kind import RunKind
from symlab.specs.settings import Hosting
from symlab.specs.urlstate import Param

ROOT = Path(__file__).resolve().parents[1]


def references(lab: Lab) -> list[tuple[str, str]]:
    """(field, reference) for every part the lab names."""
    named = [(field, getattr(lab, field)) for field in ("command", "params", "runs", "tasks", "presets")]
    return [(field, reference) for field, reference in named if reference] + [("results", r) for r in lab.results]


@pytest.mark.parametrize("lab", LABS, ids=lambda lab: lab.name)
def test_every_reference_resolves_to_its_kind(lab):
    for field, reference in references(lab):
        module, colon, name = reference.partition(":")
        assert colon and module and name, f"{lab.name}.{field} = {reference!r} is not 'module:attribute'"
        found = part(reference)
        if field in ("command", "params", "tasks"):
            assert callable(found) and len(inspect.signature(found).parameters) == 1, (field, reference)
        elif field == "runs":
            assert isinstance(found, RunKind), reference
        elif field == "presets":
            assert isinstance(found, Presets), reference
        else:
            assert isinstance(found, type) and dataclasses.is_dataclass(found), reference
    assert all(isinstance(param, Param) for param in lab.page_params(Hosting.defaults(False))), lab.name
    assert (ROOT / lab.page).is_file(), lab.page


def test_a_reference_that_names_nothing_fails():
    """What the test above relies on: a wrong module or attribute raises, rather than resolving to None."""
    with pytest.raises(ModuleNotFoundError):
        part("symlab.labs.no_such_lab:LAB")
    with pytest.raises(AttributeError):
        part("symlab.labs.toy:NO_SUCH_PART")
